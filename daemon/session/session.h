/* session: the Unix socket server and one session per connected client.
 *
 * The server accepts clients (listener.h), knows who each is (principal.h)
 * and refuses those access control does not allow. A session reads protocol
 * lines (proto.h) one at a time while no backpressure holds, runs them
 * through the verb table (verbs.h) against the job table and the database,
 * and its transport (transport.h) writes the replies; DONE replies carry
 * the blob's fd as SCM_RIGHTS. A session owns its fetches: when the client
 * goes, its waiters leave their jobs (jobs_cancel) and the jobs run on for
 * everyone else. Loop thread only. */
#ifndef HUBD_SESSION_H
#define HUBD_SESSION_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "db.h"
#include "hf_meta.h"
#include "job.h"
#include "principal.h"
#include "proto.h"
#include "quota.h"
#include "store.h"

typedef struct session_server session_server_t;

/* Starts accepting on listen_fd (a socket systemd passed) or, when it is
 * -1, binds cfg->socket_path (replacing a stale socket file, refusing when
 * another daemon answers there) with socket_mode and socket_group. */
int session_server_start(uv_loop_t *loop, const hubd_config_t *cfg, jobs_t *jobs, db_t *db,
                         store_t *store, int listen_fd, session_server_t **out);

/* What the HTTP front (httpd.h) shares with the sessions: who may connect
 * (reloaded on SIGHUP) and the per-uid counters. Valid until the server is
 * closed. */
const principal_acl_t *session_server_acl(const session_server_t *srv);
quota_t *session_server_quota(session_server_t *srv);
/* What the Hub said of files (hf_meta.h), asked by the socket's FETCH of a
 * Hub URL and by the HTTP front's /hf route: one memory for both. */
hf_meta_t *session_server_hf(session_server_t *srv);
/* The HTTP front's counters, as STATS and STATUS show them. */
typedef struct session_front_stats {
    uint64_t connections; /* accepted */
    uint64_t requests;    /* answered, whatever the status */
    uint64_t bytes;       /* body bytes sent */
    uint64_t refused;     /* peers refused */
    uint64_t open;        /* connections open now */
} session_front_stats_t;
typedef void (*session_front_stats_fn)(void *arg, session_front_stats_t *out);
/* Where STATS and STATUS read the HTTP front's counters: stats(arg, out),
 * set by main.c while the front is open (NULL: none, or closed). The
 * sessions know the front only through this. */
void session_server_set_front_stats(session_server_t *srv, session_front_stats_fn stats, void *arg);
/* The addresses the HTTP front listens on (as bound), n of them, or none:
 * HELLO names its Hugging Face endpoint, `http://ADDR/hf`, for each, so
 * that a client can tell whether HF_ENDPOINT means this hubd. */
void session_server_set_front(session_server_t *srv, const struct sockaddr_storage *addrs,
                              size_t n);

/* FLEET (docs/PROTOCOL.md): the cluster swarm as this node sees it. The
 * sessions know the swarm only through this hook, which main.c sets: the
 * swarm (daemon/fleet) is built only where libtorrent is, and the session
 * layer is compiled without it. fn(arg, sink), on the loop thread, tells
 * at once what the swarm has through session_fleet_node, _file and _peer
 * below, and returns NULL; or it returns a sentence saying why this hubd
 * has no swarm, which FLEET answers as ERR code=not_in_swarm (as it does
 * without a hook). */
typedef struct session_fleet_sink session_fleet_sink_t; /* the reply being made */
typedef const char *(*session_fleet_fn)(void *arg, session_fleet_sink_t *sink);
void session_server_set_fleet(session_server_t *srv, session_fleet_fn fn, void *arg);

/* The node's totals: the FLEET line. */
typedef struct session_fleet_node {
    const char *listen;          /* its fleet_listen */
    uint64_t members;            /* nodes in fleet_peers */
    uint64_t up, down;           /* payload sent and received over the swarm since the start */
    uint64_t from_swarm;         /* files brought from the swarm since the start */
    uint64_t seeded_from_origin; /* files fetched from the origin as their seed */
    uint64_t fell_back;          /* downloads the swarm gave back to the origin */
    uint64_t bad_pieces, banned; /* pieces that failed their hash; peers banned for them */
    uint64_t meta_refused;       /* metadata connections whose certificate was refused */
} session_fleet_node_t;

/* A file in the swarm: a FILE line. */
typedef struct session_fleet_file {
    const char *sha256;
    const char *state;        /* asking, preparing, swarming, swarmed, fetching, making, seeding */
    uint64_t size;            /* 0 while unknown */
    uint64_t done;            /* bytes verified and on disk */
    uint64_t up, down;        /* payload over the swarm, since its torrent was added */
    uint64_t peers;           /* peers connected for it */
    const char *info_hash;    /* v2, "" while unknown */
    const char *info_hash_v1; /* "" when there is none */
} session_fleet_file_t;

/* A peer connected now: a PEER line. */
typedef struct session_fleet_peer {
    const char *addr;  /* "ip:port" as connected */
    uint64_t up, down; /* payload sent to and received from it, over the files it is in */
    uint64_t files;    /* files it is connected for */
} session_fleet_peer_t;

/* What fn tells, in any order, each copied at once (the strings are the
 * caller's). Lines past the reply's bound are counted, not sent. */
void session_fleet_node(session_fleet_sink_t *sink, const session_fleet_node_t *node);
void session_fleet_file(session_fleet_sink_t *sink, const session_fleet_file_t *file);
void session_fleet_peer(session_fleet_sink_t *sink, const session_fleet_peer_t *peer);

/* The STATS counters (docs/PROTOCOL.md) added to w as fields: what the
 * STATS verb answers and the metrics endpoint renders (verbs.c). */
void session_server_stats(session_server_t *srv, proto_writer_t *w);

/* Start-up and SIGHUP: looks up the admin group (cfg->admin_group) again. */
void session_server_reload(session_server_t *srv);

/* Removes the socket file, lets every session send what it has queued
 * (bounded: a client that does not read is cut off after a second), closes
 * them, frees the server, then calls done(arg). */
void session_server_close(session_server_t *srv, void (*done)(void *arg), void *arg);

#endif
