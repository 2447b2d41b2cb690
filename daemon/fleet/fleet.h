/* fleet: the cluster swarm. Nodes of one cluster share each file over
 * their own links, so that the origin sends it once per cluster.
 *
 * For a download whose SHA-256 is known up front, the rendezvous order of
 * that digest over fleet_peers (fleet_peers.h) names the file's seed. The
 * seed fetches it from the origin with hubd's normal download; every other
 * node asks the seed for the file's metadata (fleet_meta.h, mutual TLS)
 * and brings the pieces from the swarm (lt_shim.h, libtorrent's SSL
 * torrents: only peers the cluster CA signed) into the job's own partial
 * file, which the job checks against the digest and commits as any
 * download (job.h, "The cluster swarm"). A seed that cannot be reached
 * gives way to the next node in the order; a seed that answers that it
 * has not got the file and is not fetching it, for fleet_wait, makes the
 * node fetch it itself. Every committed blob is seeded until it leaves the
 * cache.
 *
 * Loop thread only, except where a function says otherwise. */
#ifndef HUBD_FLEET_H
#define HUBD_FLEET_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "job.h"
#include "store.h"

typedef struct fleet fleet_t;

/* Whether the config asks for the swarm: any fleet_* key but fleet_wait. */
int fleet_configured(const hubd_config_t *cfg);

/* Start-up and --check-config: fleet_listen, fleet_peers, fleet_ca,
 * fleet_cert and fleet_key set together, the files readable and sound
 * (the peer list names this node, the certificate is the CA's and goes
 * with the key). 0 or a negative errno with err a sentence. Blocking. */
int fleet_check_config(const hubd_config_t *cfg, char *err, size_t errlen);

/* Starts the swarm: the peer and metadata listeners, and the hooks in js.
 * Blocking (reads the files; libtorrent's session starts): start-up only. */
int fleet_new(uv_loop_t *loop, const hubd_config_t *cfg, jobs_t *js, store_t *store, fleet_t **out,
              char *err, size_t errlen);

/* SIGHUP: fleet_peers is read again (in the pool); a list that does not
 * parse is logged and the old one kept. */
void fleet_reload(fleet_t *f);

/* ---- Verdicts: what the Hub said of a file to a credential, shared -------
 *
 * So that a cluster asks the Hub about once a minute per credential and
 * file, not once per node (fleet_verdict.c). The record is the asker's
 * own text (lowercase hex: hub/hf_meta.c packs its hf_file_t); the key
 * names the credential and the file together (fleet_verdict_key). */
typedef struct fleet_vask fleet_vask_t;
/* value: the record (valid during the call), or NULL: no fresh record,
 * ask the Hub (and fleet_verdict_tell what it says). */
typedef void (*fleet_verdict_cb)(void *arg, const char *value);

/* HMAC-SHA256 of the credential header lines and file_key, keyed by the
 * digest of the cluster CA's certificate, in hex: 0 or -ENOMEM. */
int fleet_verdict_key(fleet_t *f, const char *const *cred, size_t ncred, const char *file_key,
                      char out[65]);
/* Asks the key's holder: cb once, never from inside the call (at most
 * about 10 s later), unless cancelled. NULL: ask the Hub now (stopping, no
 * memory). */
fleet_vask_t *fleet_verdict_ask(fleet_t *f, const char *key, fleet_verdict_cb cb, void *arg);
void fleet_verdict_cancel(fleet_vask_t *a);
/* Tells the key's holder the record (at most FMETA_MAX_URL hex digits). */
void fleet_verdict_tell(fleet_t *f, const char *key, const char *value);

/* What `hubctl fleet status` shows. */
typedef struct fleet_file_info {
    const char *sha256;
    const char *state; /* asking, swarming, fetching (the seed, from the origin), making, seeding */
    uint64_t size;     /* 0 while unknown */
    uint64_t done;     /* bytes verified and on disk */
    uint64_t up, down; /* payload sent and received over the swarm */
    int peers;         /* connected peers */
    const char *info_hash_v1; /* "" when the torrent has no v1 hash */
    const char *info_hash;    /* v2 info-hash, "" while unknown */
} fleet_file_info_t;

typedef struct fleet_peer_info {
    const char *peer;  /* "ip:port" as connected */
    uint64_t up, down; /* payload sent and received, over every file now in the swarm */
    int files;         /* files it is connected for */
} fleet_peer_info_t;

typedef struct fleet_info {
    const char *listen;                       /* this node's fleet_listen */
    size_t members;                           /* lines of fleet_peers */
    uint64_t up, down;                        /* payload over the swarm since the start */
    uint64_t from_swarm, from_origin_as_seed; /* files brought by each way since the start */
    uint64_t fell_back;                       /* downloads the swarm gave back to the origin */
    uint64_t bad_pieces, banned;
    uint64_t meta_refused; /* metadata connections whose certificate was refused */
    uint64_t verdicts_served, verdicts_leased, verdicts_told; /* as a verdicts' holder */
} fleet_info_t;

/* Calls file() for each file in the swarm and peer() for each connected
 * peer, then fills *info. */
void fleet_status(fleet_t *f, void (*file)(void *arg, const fleet_file_info_t *fi),
                  void (*peer)(void *arg, const fleet_peer_info_t *pi), void *arg,
                  fleet_info_t *info);

/* Shutdown, after jobs_stop (which lets go of every swarm download): the
 * listeners close and libtorrent's session stops in the pool; done(arg)
 * once all is closed. */
void fleet_stop(fleet_t *f, void (*done)(void *arg), void *arg);

#endif
