/* fleet_internal.h: private to daemon/fleet/'s fleet.c (a file's way
 * through the swarm) and fleet_node.c (the node: start, stop, reload, the
 * metadata it answers, its clock and its status). Loop thread only. */
#ifndef HUBD_FLEET_INTERNAL_H
#define HUBD_FLEET_INTERNAL_H

#include "fleet.h"
#include "fleet_meta.h"
#include "fleet_peers.h"
#include "list.h"
#include "lt_shim.h"

#include <limits.h>
#include <stdint.h>

#define TICK_MS 500           /* progress, asks again, stalls */
#define ASK_TIMEOUT_MS 5000   /* one metadata exchange: a node slower than this did not answer */
#define ASK_AGAIN_MS 500      /* a seed that is fetching is asked again after this at first... */
#define ASK_AGAIN_MAX_MS 4000 /* ...then twice as long each time, up to this */
#define ASK_MISSES_MAX 3    /* timeouts in a row, over fleet_wait at least, before a node is down */
#define STALL_MS 10000      /* a swarm download with no new byte: ask the order again */
#define PEERS_AGAIN_MS 5000 /* the members are offered to a torrent again */
#define SWEEP_MS 10000      /* seeded blobs still in the cache? */
#define WARM_MAX 64         /* fetches started for other nodes at once */
#define WARM_AGAIN_MS 60000 /* after one failed, another node's ask gets NONE this long */
#define WARM_FAILED_MAX 256 /* failures remembered for that; past it the oldest is forgotten */
#define STATUS_PEERS 256    /* peers read per torrent for fleet status */

typedef enum {
    FF_IDLE,
    FF_ASKING,
    FF_PREPARING,
    FF_SWARMING,
    FF_SWARMED,
    FF_FETCHING,
    FF_MAKING,
    FF_SEEDING,
    FF_NSTATES
} ff_state_t;

extern const char *const ff_names[FF_NSTATES];

typedef struct ffile {
    fleet_t *f;
    list_node_t node; /* in f->files */
    char sha[65];
    ff_state_t state;
    job_t *job;      /* the download the swarm holds (ASKING..SWARMING), or NULL */
    uint64_t job_id; /* FETCHING: the origin download of this node, for the log and asks */
    char *url;       /* given to the seed when the request had no credentials, or NULL */
    char part[PATH_MAX];
    char blob[PATH_MAX];
    unsigned char *torrent; /* the metadata, from the seed or made here */
    size_t torrent_len;
    char info_hash[65], info_hash_v1[41];
    lt_torrent_t *t;     /* in the session, or NULL */
    int removing;        /* a removal is out: LT_EV_REMOVED comes for it */
    int then_seed;       /* after the removal: add it again, seeding blob */
    int then_origin;     /* after the removal: the job goes to the origin */
    int then_check;      /* after the removal: added again over its partial (fresh peers) */
    int stalls;          /* stalls in a row, no new piece between them */
    int spoiled;         /* pieces failed and peers banned since its torrent was added */
    int items;           /* pool items out for it */
    fmeta_ask_t *ask;    /* the metadata exchange in flight */
    size_t cand;         /* the ask's place in the rendezvous order */
    int cand_misses;     /* its timeouts (or closes) in a row */
    uint64_t miss_since; /* when the first of them came */
    uint64_t ask_gap;    /* ms to the next ask of a node that said FETCHING or NONE */
    uint64_t next_ask, none_since, last_move, last_done, peers_at;
    uint64_t size, up, down;
} ffile_t;

/* A fetch for another node that failed: its asks get NONE for a while. */
typedef struct warm_failure {
    char sha[65];
    uint64_t at; /* uv_now when it failed (0: an empty place) */
} warm_failure_t;

struct fleet {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    jobs_t *jobs;
    store_t *store;
    fmeta_identity_t *id;
    fmeta_server_t *meta;
    lt_session_t *ses;
    char *ca_pem;
    char listen_ip[46];
    fleet_peers_t peers;
    uv_async_t async;
    uv_timer_t tick;
    uint64_t swept_at;
    int sweep_out;
    int reload_out;
    void (*item_back)(fleet_t *f);    /* see the end of this header */
    struct fleet_verdicts *verdicts;  /* the records this node holds (fleet_verdict.c) */
    unsigned char verdict_secret[32]; /* SHA-256 of the CA's PEM: the records' HMAC key */
    unsigned items; /* pool items out (the files', the sweep, the reload) and the meta close */
    list_t files;
    unsigned warm_out;
    /* A ring, not a file each: a member asking for many files that fail
     * would otherwise make the node keep one file per ask. */
    warm_failure_t warm_failed[WARM_FAILED_MAX];
    unsigned warm_failed_next; /* the place the next failure takes (the oldest one's) */
    int stopping;
    unsigned handles; /* async and tick not yet closed */
    void (*done)(void *);
    void *done_arg;
    uint64_t up_gone, down_gone; /* payload of torrents removed since */
    uint64_t from_swarm, from_origin, fell_back, bad_pieces, banned;
};

/* fleet.c */
ffile_t *ff_find(fleet_t *f, const char *sha);
/* The file of sha, made (idle) when new; NULL: no memory. */
ffile_t *ff_get(fleet_t *f, const char *sha);
void ff_set(ffile_t *ff, ff_state_t to);
void ff_release(ffile_t *ff);
void ff_remove_torrent(ffile_t *ff);
void ff_add_peers(ffile_t *ff);
void ff_ask(ffile_t *ff);
void ff_ask_from_top(ffile_t *ff);
/* A complete blob of this node: seeded from its path in the cache. */
void fleet_offer(fleet_t *f, const char *sha, uint64_t size, const char *path);
/* libtorrent's news, polled by the node. */
void fleet_on_event(fleet_t *f, const lt_event_t *ev);
extern const jobs_swarm_ops_t fleet_swarm_ops;

/* fleet_verdict.c */
typedef struct fleet_verdicts fleet_verdicts_t;
int fleet_verdicts_new(fleet_t *f);
void fleet_verdicts_free(fleet_t *f);
/* The metadata server's VERDICT requests (fmeta_server_set_verdicts). */
fmeta_status_t fleet_verdict_lookup(void *arg, const char *key, const char *value, const char *peer,
                                    const unsigned char **bytes, size_t *len);
/* Its counters, for fleet_status. */
void fleet_verdicts_counts(const fleet_t *f, uint64_t *served, uint64_t *leased, uint64_t *told);

/* fleet_node.c sets it, fleet.c calls it (fleet_node.c is above it): a
 * pool item of the node's is back, and a stopping node may be done. */

#endif
