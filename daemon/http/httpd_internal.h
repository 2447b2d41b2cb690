/* httpd_internal: the state shared by the HTTP front's files. Private to
 * the front; loop thread only. Calls go one way, top to bottom:
 *
 *   httpd.c          the server: accept, who the peer is, refusals
 *   httpd_request.c  a request's head, the checks, the route table
 *   routes           httpd_fetch.c (/<URL>), httpd_hf.c (/hf resolve),
 *                    httpd_hf_api.c (/hf/api); the Hub's routes start their
 *                    download through httpd_fetch.c; httpd_metrics.c
 *                    (/metrics, the one route of the metrics endpoint's
 *                    server: metrics.h)
 *   httpd_answer.c   the answers' heads and bodies, the statuses
 *   httpd_conn.c     each connection's I/O: reading, sending, timers, close
 *
 * What comes back up is a function pointer the higher file registered: the
 * connection calls the router through httpd_t.hooks, and a route's state
 * through its row (hroute_t.abandon). */
#ifndef HUBD_HTTPD_INTERNAL_H
#define HUBD_HTTPD_INTERNAL_H

#include "bytebuf.h"
#include "hf_revs.h"
#include "httpd.h"
#include "list.h"
#include "memtrim.h"

#include <llhttp.h>
#include <sys/socket.h>

#define HTTPD_IN_MAX (16 * 1024)     /* request line and headers, all of them */
#define HTTPD_TARGET_MAX 8192        /* the request target (an URL inside it) */
#define HTTPD_MAX_HEADERS 64         /* header lines per request */
#define HTTPD_MAX_CRED 8             /* credential headers passed on */
#define HTTPD_MAX_CONNS 1024         /* connections, all users */
#define HTTPD_MAX_CONNS_PER_UID 64   /* connections of one uid */
#define HTTPD_METRICS_MAX_CONNS 16   /* connections to the metrics endpoint */
#define HTTPD_IDLE_TIMEOUT_MS 60000  /* keep-alive: no new request for this long */
#define HTTPD_SEND_TIMEOUT_MS 120000 /* a client that takes no byte for this long */
#define HTTPD_SEND_TURN (1 << 20)    /* bytes of an answer in memory sent a turn of the loop */
#define HTTPD_LINGER_MS 2000         /* reading after a last answer, before the close */
#define HTTPD_REFUSED_MS 5000        /* a refused client's time to send the request it is refused */
#define HTTPD_HOLD_BACK (64 * 1024)  /* a streamed download's tail, sent only once verified */
#define HTTPD_BODY_MAX                                                                             \
    (1024 * 1024) /* a request body (the Hub's paths-info), with Content-Length */

typedef enum {
    HC_PEER,    /* who is it: the peer lookup item is out */
    HC_HEAD,    /* reading a request head */
    HC_FETCH,   /* its route answers later: it asks the Hub, or waits for the file */
    HC_SEND,    /* sending the answer: head, then body */
    HC_LINGER,  /* answered and shut for writing: reading what the client still sends */
    HC_CLOSING, /* closing its parts; freed when the last is back */
} hc_state_t;

typedef struct hconn hconn_t;
typedef struct hroute hroute_t;

/* One request, as read. */
typedef struct hreq {
    int method; /* llhttp_method_t */
    char target[HTTPD_TARGET_MAX + 1];
    size_t target_len;
    int target_too_long;
    char host[256], origin[256], fetch_site[32], range[128];
    char *cred[HTTPD_MAX_CRED]; /* "Name: value" lines passed on (malloc'd) */
    unsigned ncred;
    unsigned nheaders;
    char field[64]; /* the header name being read, lower-cased */
    size_t field_len;
    char value[4097]; /* its value (longer ones are cut: not ours to keep) */
    size_t value_len;
    int value_too_long;
    char content_type[256]; /* of a body ("?" when longer) */
    int has_body;           /* Content-Length > 0 or chunked: refused unless read (body_done) */
    int chunked;            /* Transfer-Encoding: chunked */
    uint64_t content_length;
    int reading_body;  /* the head is in and llhttp goes on: its body into `body` */
    int body_done;     /* the whole body is in `body` */
    bytebuf_t body;    /* a POST's body (its route's takes_body), at most HTTPD_BODY_MAX */
    const char *allow; /* a 405's Allow value (static), NULL for "GET, HEAD" */
    int complete;      /* the head (and any body read) is in */
    char *extra;       /* header lines every answer to it carries ("Name: v\r\n"...), or NULL */
    int own_etag;      /* extra has the ETag (the Hub's): the answer sets none of its own */
} hreq_t;

struct hconn {
    httpd_t *srv;
    list_node_t node; /* in srv->conns */
    hc_state_t state;
    int fd;
    uv_poll_t poll;
    int poll_events; /* what poll watches now (0: stopped) */
    uv_timer_t timer;
    unsigned closes_pending; /* poll and timer close callbacks to come */
    int item_out;            /* the peer lookup, a sendfile or a route's item is in the pool */
    uv_work_t work;          /* the peer lookup's and the sendfile items' */
    struct sockaddr_storage local, peer;
    principal_t who;
    int peer_self; /* the peer's socket is hubd's own (peeruid_is_own): refused */
    int counted;   /* counted in its uid's connections */
    /* A refusal decided before the request was read (who it is, limits):
     * answered once its head is in, so the client reads an answer, not a
     * reset. */
    int refuse_status;
    const char *refuse_code;
    char refuse_msg[300];
    /* reading: `in` (HTTPD_IN_MAX bytes) and `req` are allocated when a
     * request's first bytes come and freed once it is answered: NULL while
     * the connection is idle (rx_begin) */
    char *in;
    size_t in_len; /* bytes in `in` */
    size_t in_off; /* parsed so far */
    llhttp_t parser;
    hreq_t *req;
    /* the answer */
    char *out; /* the head (and a short body) being sent */
    size_t out_len, out_off;
    job_fd_t *body;      /* the blob (or partial file) being sent, or NULL */
    uint64_t body_off;   /* its next byte */
    uint64_t body_left;  /* bytes still to send */
    uint64_t body_limit; /* the offset sending may reach now (a partial: what is written) */
    int body_wait;       /* caught up with body_limit: waits for hconn_more_body */
    int item_fd;         /* a sendfile item's file, offset and bytes: copied on the loop, */
    uint64_t item_off;   /* so the pool thread reads nothing the loop may change (or free) */
    uint64_t item_want;
    ssize_t item_sent; /* what the last sendfile item sent */
    int item_err;      /* its errno (EAGAIN: the socket is full) */
    int keep_alive;    /* read the next request after this answer */
    /* the route answering the request */
    const hroute_t *route; /* its row, or NULL before the request is handled */
    void *rstate;          /* its state for this request (the route's to free), or NULL */
};

/* A route of the front (httpd_request.c's table): a row of what the router
 * asks of it, with its handler. A route keeps what it needs for one
 * request in c->rstate (its own struct), and what it keeps across requests
 * in its memory (mem_size bytes, zeroed, one per server). */
struct hroute {
    int (*match)(const char *target); /* whether the target is this route's */
    int post;                         /* POST passes the front's method check (the route
                                         checks its own methods) */
    /* Whether the body of a POST to target is read (at most HTTPD_BODY_MAX,
     * with a Content-Length): from the head, before the body. NULL: never. */
    int (*takes_body)(const char *target);
    /* A request with a body the front did not read: 1 when the route
     * answered it in its own words, 0 for the front's 413. NULL: 0. */
    int (*unread_body)(hconn_t *c);
    /* Answers the request, now or later (then c->state is HC_FETCH). */
    void (*handle)(hconn_t *c, void *mem);
    /* The request is over (answered, or its connection goes): stops what
     * it still has in flight (a request upstream, a waiter, a quota count),
     * frees c->rstate and sets it NULL. A pool item still out keeps (and
     * frees) its own part. Called only with c->rstate set. */
    void (*abandon)(hconn_t *c);
    /* The timer the route armed (hconn_wait) rang, the request still in
     * HC_FETCH with c->rstate set. NULL: the route arms none. */
    void (*timer)(hconn_t *c);
    size_t mem_size; /* bytes of its memory across requests; 0: none */
};

#define HTTPD_ROUTES_MAX 8 /* rows of the route table */

/* What the connection calls up into (httpd_request.c's; httpd_new sets it). */
typedef struct hconn_hooks {
    /* The head of a request (and any body read) is in: answer it (sets the
     * state: HC_FETCH or HC_SEND). */
    void (*request)(hconn_t *c);
    /* A request that cannot be read (400, 408, 431): answered with a short
     * text (X-Hubd-Error code, NULL: none), and the connection closes. */
    void (*unreadable)(hconn_t *c, int status, const char *code, const char *msg);
} hconn_hooks_t;

struct httpd {
    httpd_deps_t d;
    const hconn_hooks_t *hooks;        /* the router's */
    const hroute_t *const *routes;     /* its route table (the front's or the metrics'), */
    size_t nroutes;                    /* first match first, the last takes every target */
    void *route_mem[HTTPD_ROUTES_MAX]; /* each route's memory, by its row (flat: free()) */
    hf_revs_t *revs;                   /* the Hub's commits of revisions, for its outages */
    uint64_t offline_said;             /* uv_now when the log last said so (httpd_hf.c) */
    list_t conns;                      /* open connections, closing ones too */
    unsigned nconns;                   /* not yet freed */
    memtrim_t trim;                    /* counts them: their memory goes back after a burst */
    httpd_stats_t stats;
    uv_timer_t closer; /* calls the close callback from a loop iteration */
    int closing;
    void (*close_cb)(void *);
    void *close_arg;
};

/* httpd_conn.c: the connection's I/O. */

/* Reading begins (or resumes, after the peer lookup): a request is read
 * within ms. */
void hconn_read_start(hconn_t *c, unsigned ms);
/* Starts sending c->out (then c->body, if any); c->keep_alive decides
 * what follows. */
void hconn_send(hconn_t *c);
/* The one close path: idempotent, safe inside any callback. */
void hconn_close(hconn_t *c);
/* In HC_FETCH, while its route waits (it watches only for a hang-up):
 * its route's timer (hroute_t.timer) rings in ms, replacing one armed. */
void hconn_wait(hconn_t *c, unsigned ms);
/* body_limit grew: sending goes on if it had caught up. */
void hconn_more_body(hconn_t *c);
/* A pool item of c's is back (c->item_out was set): 1 when c is closing
 * (then it may be freed here, and the caller touches it no more), else 0. */
int hconn_item_back(hconn_t *c);

/* httpd_request.c: requests and the route table. */

extern const hconn_hooks_t hreq_hooks;
void hreq_settings_init(llhttp_settings_t *s);
/* Each route's memory for a new server (route_mem): 0 or -ENOMEM. */
int hreq_routes_init(httpd_t *h);
/* A refusal of c, counted and kept, answered once its request's head is in
 * (hconn_t.refuse_status): a peer lookup's verdict, or a reload's. */
void hreq_refuse(hconn_t *c, int status, const char *code, const char *msg);
/* c's user is not one the front serves (principal_may_use_front): the 403
 * permission_denied refusal, with why and who decides, and a log line. */
void hreq_refuse_unknown_user(hconn_t *c);

/* httpd_answer.c: the answers. Each hands the connection its head (and a
 * body) to send; once it is sent the request ends (the route's state goes:
 * hroute_t.abandon) and a keep-alive connection reads its next request,
 * both maybe before the call returns. So after an answer nothing of the
 * request is touched. */

/* Answers with a short text: status, the X-Hubd-Error code (NULL: none)
 * and a one-line body; closes after it when close_after. */
void hanswer_text(hconn_t *c, int status, const char *code, const char *msg, int close_after);
/* Answers with the stored file res (Range, HEAD, the body by sendfile). */
void hanswer_file(hconn_t *c, const job_result_t *res);
/* Answers with a head only: 200, Content-Length length, the request's
 * extra lines. */
void hanswer_head(hconn_t *c, uint64_t length);
/* Answers with status, Content-Type ctype, the request's extra lines and
 * the len bytes of body (copied). */
void hanswer_bytes(hconn_t *c, int status, const char *ctype, const char *body, size_t len);
/* As hanswer_bytes, the body the len bytes at buf + room, buf malloc'd and
 * taken (freed with the answer): the head is written in the room before
 * the body, which is not copied (16 MiB copied on the loop into memory
 * not touched before held it for tens of ms), unless it is larger than
 * the room. */
void hanswer_bytes_at(hconn_t *c, int status, const char *ctype, char *buf, size_t room,
                      size_t len);
/* Answers 200 with the head of a download of total bytes from source
 * ("download", "attached"), its body the file body (taken) as sending may
 * reach limit (body_limit, raised as the file grows). -1 when out of
 * memory: then nothing is answered and body is not taken. */
int hanswer_stream(hconn_t *c, job_fd_t *body, uint64_t total, const char *source, uint64_t limit);
/* "Name: value\r\n" appended to the request's extra lines when value is
 * set and has no control character (the Hub's values pass in answers). 0
 * or -1 (no memory). */
int hanswer_add_line(hconn_t *c, const char *name, const char *value);
/* One more waiting request of c's uid (max_requests_per_user): 0 (the
 * caller ends it: quota_request_end), or -1 after answering 429. */
int hanswer_quota_begin(hconn_t *c);

/* httpd_fetch.c: the download behind an answer (jobs_fetch with the
 * request's credentials): the generic route's, and the Hub's resolve
 * route's once it knows the file. A waiter answers with the file once it
 * is in, or follows the partial file as it lands. Lives in the state of
 * the route that uses it. */
typedef void (*hfetch_file_cb)(hconn_t *c, const job_result_t *res, void *arg);
typedef struct hfetch {
    hconn_t *c;
    job_waiter_t w;
    int waiting;            /* w is in a job (jobs_cancel on abandon) */
    int quota_counted;      /* a waiting request of its uid (quota_request_end) */
    int64_t total;          /* the download's announced length, -1 until known */
    uint64_t written;       /* its partial file's bytes written (on_written) */
    int streaming;          /* the answer follows the partial file as it lands */
    hfetch_file_cb on_file; /* NULL: answered with the file; else handed it, whole
                               (not streamed): a check of the route's first */
    void *arg;              /* on_file's */
    int vouched;            /* set before hfetch_start: the origin named sha256 to this
                               request's credentials (job_waiter_t.vouched) */
} hfetch_t;

/* Starts the download of url (sha256: the expected digest or NULL) for c,
 * answered when it ends (or streamed), or answers why not. f->vouched is
 * the caller's (0 unless the origin vouched for sha256). */
void hfetch_start(hfetch_t *f, hconn_t *c, const char *url, const char *sha256,
                  hfetch_file_cb on_file, void *arg);
/* Leaves the job, if still in one, and ends the quota count: idempotent. */
void hfetch_abandon(hfetch_t *f);

/* The routes, rows of httpd_request.c's table. */
extern const hroute_t hroute_generic; /* httpd_fetch.c: /<URL> */
extern const hroute_t hroute_hf;      /* httpd_hf.c: /hf, /hf/... */
extern const hroute_t hroute_hf_api;  /* httpd_hf_api.c: /hf/api/... */
extern const hroute_t hroute_metrics; /* httpd_metrics.c: the metrics endpoint's one route */

/* The generic form's URL from a request target: "/https://host/path?q",
 * or "/https:/host/path" as clients that merge slashes send it. 0, or -1
 * when the target is no such form (or the URL does not fit cap). */
int hreq_generic_url(const char *target, char *url, size_t cap);

#endif
