/* session_core: a session as its verbs see it, below them: the session and
 * its server, and the few things a verb may ask of a session (a descriptor
 * pinned or unpinned, a wake-up, whether its peer is an admin), as a
 * redis command sees its client. session.c (life cycle, reading,
 * backpressure) sits above the verbs (verbs*.c), which keep their own
 * state (fetches, admin requests, a stream) in the session; nothing here
 * calls up into either, but through the server's pump, which session.c
 * sets. Private to the session layer; loop thread only. */
#ifndef HUBD_SESSION_CORE_H
#define HUBD_SESSION_CORE_H

#include "listener.h"
#include "list.h"
#include "listings.h"
#include "memtrim.h"
#include "principal.h"
#include "proto.h"
#include "hostport.h"
#include "hf_meta.h"
#include "quota.h"
#include "served.h"
#include "session.h"
#include "transport.h"

#define SESSION_READ_BUF 16384
/* Backpressure. A session's requests are parsed one line at a time, and
 * parsing stops (the rest of the read is kept, and the socket is not read)
 * while any of these holds; it goes on when the replies are read:
 * - more than TRANSPORT_PAUSE_QUEUE (1 MiB) of replies are queued;
 * - a STATUS or LIST is being streamed (its pages follow as the client
 *   reads, below a quarter of that queued; later lines wait their turn);
 * - SESSION_MAX_FDS blob descriptors are pinned for it (hits being opened,
 *   DONE lines waiting to pass their fd, fds passed and not yet read), or
 *   QUOTA_USER_MAX_FDS for its uid in all its sessions;
 * - SESSION_MAX_FETCHES FETCHes of it wait.
 * So what a client that never reads costs hubd is bounded whatever it
 * sends: about 1 MiB plus one page or one reply. */
#define SESSION_MAX_FDS TRANSPORT_MAX_FDS_IN_FLIGHT
#define SESSION_MAX_FETCHES 64

typedef struct session session_t;
typedef struct listing_page listing_page_t;

typedef enum { STREAM_NONE, STREAM_LIST, STREAM_STATUS } stream_kind_t;

struct session {
    transport_t t; /* the connection */
    session_server_t *srv;
    list_node_t node;      /* in srv->sessions */
    principal_t who;       /* the peer, from the listener at accept */
    int closing;           /* session_close has begun */
    proto_reader_t reader; /* holds a line split between reads, only then */
    /* Bytes read and not yet parsed, in[in_off, in_len): the server's
     * scratch during a read; what a read leaves (backpressure) is copied
     * out to a buffer of its own size (kept), so an idle session holds no
     * read buffer. NULL when there are none. */
    char *in;
    size_t in_off, in_len;
    int in_kept;         /* in is this session's malloc'd copy */
    int in_pump;         /* inside session_pump: do not re-enter */
    unsigned nfds;       /* blob fds pinned: hits being opened, fd lines queued or in flight */
    size_t discarded;    /* bytes of the overlong line being skipped */
    unsigned long_lines; /* overlong lines sent so far */
    int cut;             /* flooding: closed once the current read is handled */
    int announced;       /* its first line was logged (a probe that sends none is not) */
    /* The verbs' state. */
    list_t fetches;        /* waiting FETCHes (verbs_fetch.c) */
    unsigned nfetches;     /* their number */
    list_t pending;        /* admin requests in the pool (verbs_admin.c) */
    stream_kind_t stream;  /* a STATUS or LIST being streamed, or STREAM_NONE */
    uint64_t stream_at;    /* its cursor: last job id, or last entry's use sequence */
    uint64_t stream_count; /* lines sent so far */
    listing_page_t *page;  /* a LIST page being read in the pool, or NULL */
    list_t hfrepos;        /* HFREPO requests in flight (verbs_hf.c) */
    list_t holds;          /* HOLD, UNHOLD, HOLDS requests in the pool (verbs_hold.c) */
};

#define HOLD_TOLD_MAX 64 /* uids remembered as told why their HOLD was refused */

struct session_server {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    jobs_t *jobs;
    db_t *db;
    store_t *store;
    listener_t *listener;
    principal_acl_t acl;                /* loaded at start and on reload */
    quota_t quota;                      /* per-uid counters across sessions */
    hf_meta_t *hf;                      /* the Hub's answers about files (hf_meta.h), owned */
    listings_t *listings;               /* HFREPO's listings alive, by uid (listings.h), owned */
    session_front_stats_fn front_stats; /* the HTTP front's counters, for STATS; NULL: none */
    void *front_stats_arg;
    session_fleet_fn fleet; /* FLEET's answer (session.h), NULL: no swarm */
    void *fleet_arg;
    served_t served;                /* (uid, blob) pairs lately answered DONE: HOLD's test */
    uid_t hold_told[HOLD_TOLD_MAX]; /* uids whose HOLD went past a bound, logged once each */
    unsigned hold_told_n;           /* uids logged so far: the ring's next slot, mod the size */
    list_t sessions;                /* open sessions (session.node), newest first */
    unsigned nsessions;             /* sessions not yet freed (closing ones too) */
    memtrim_t trim;                 /* counts them: their memory goes back after a burst */
    uint64_t started;   /* uv_hrtime() at start: uptime never goes back with the clock */
    uint64_t reclaimed; /* uv_now() of the last walk of reclaim_fds: one a loop turn */
    /* HELLO's hf_front: "http://ADDR/hf" for each address of the HTTP
     * front, ','-joined; "" while there is none. */
    char hf_front[HOSTPORT_MAX_ADDRS * 64];
    /* Every session reads into this, one read at a time on the loop: a
     * session reads only when it keeps nothing, and session_pump copies
     * out what it leaves before the next read can come. */
    char scratch[SESSION_READ_BUF];
    int closing;
    void (*close_cb)(void *);
    void *close_arg;
    /* session.c's pump (session_pump there: the one function that decides
     * whether a session reads), set at start: how a verb lets a session
     * parse again without calling up into session.c. */
    void (*pump)(session_t *s);
};

/* For the verbs and session.c (session_core.c). */

/* One more, or one fewer, blob descriptor pinned for the session and its
 * uid: a hit being opened, or a DONE line's fd. session_unpin wakes the
 * session, and the uid's other sessions when its budget was full. */
void session_pin(session_t *s);
void session_unpin(session_t *s);

/* A reason to wait has gone (a stream ended): the session parses its
 * kept lines and reads again now, while no backpressure holds (the
 * server's pump; nothing when called from inside it). */
void session_resume(session_t *s);

/* session_resume from the next loop iteration: for callers inside a job's
 * callbacks, or inside a reply still being made (a FETCH's final line must
 * leave before a later line with its id is read). */
void session_kick(session_t *s);

/* Whether the peer may administer the cache. */
int session_is_admin(const session_t *s);

#endif
