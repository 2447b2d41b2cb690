/* httpd_internal: the state shared by httpd.c (the server and each
 * connection's I/O: peer lookup, reading, sending, sendfile items, timers,
 * the close path) and httpd_request.c (what a request asks and how it is
 * answered). Private to the HTTP front. Loop thread only. */
#ifndef HUBD_HTTPD_INTERNAL_H
#define HUBD_HTTPD_INTERNAL_H

#include "bytebuf.h"
#include "httpd.h"
#include "list.h"

#include <llhttp.h>
#include <sys/socket.h>

#define HTTPD_IN_MAX (16 * 1024)     /* request line and headers, all of them */
#define HTTPD_TARGET_MAX 8192        /* the request target (an URL inside it) */
#define HTTPD_MAX_HEADERS 64         /* header lines per request */
#define HTTPD_MAX_CRED 8             /* credential headers passed on */
#define HTTPD_MAX_CONNS 1024         /* connections, all users */
#define HTTPD_MAX_CONNS_PER_UID 64   /* connections of one uid */
#define HTTPD_IDLE_TIMEOUT_MS 60000  /* keep-alive: no new request for this long */
#define HTTPD_SEND_TIMEOUT_MS 120000 /* a client that takes no byte for this long */
#define HTTPD_LINGER_MS 2000         /* reading after a last answer, before the close */
#define HTTPD_REFUSED_MS 5000        /* a refused client's time to send the request it is refused */
#define HTTPD_HOLD_BACK (64 * 1024)  /* a streamed download's tail, sent only once verified */
#define HTTPD_BODY_MAX                                                                             \
    (1024 * 1024) /* a request body (the Hub's paths-info), with Content-Length */

typedef enum {
    HC_PEER,    /* who is it: the peer lookup item is out */
    HC_HEAD,    /* reading a request head */
    HC_FETCH,   /* the request waits for its file (jobs_fetch) */
    HC_SEND,    /* sending the answer: head, then body */
    HC_LINGER,  /* answered and shut for writing: reading what the client still sends */
    HC_CLOSING, /* closing its parts; freed when the last is back */
} hc_state_t;

typedef struct hconn hconn_t;

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
    bytebuf_t body;    /* a POST's body (hf_api_takes_body), at most HTTPD_BODY_MAX */
    const char *allow; /* a 405's Allow value (static), NULL for "GET, HEAD" */
    int complete;      /* the head (and any body read) is in */
    char *extra;       /* header lines every answer to it carries ("Name: v\r\n"...), or NULL */
    char git_sha1[41]; /* /hf: a small file's git blob SHA-1 (the Hub's ETag) to check, or "" */
    char *pinned;      /* /hf: the URL fetched (pinned to the commit), or NULL */
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
    int item_out;            /* the peer lookup, a sendfile or a check item is in the pool */
    uv_work_t work;
    void *item_ctx; /* what a check item (httpd_hf.c) works on */
    struct sockaddr_storage local, peer;
    principal_t who;
    int counted; /* counted in its uid's connections */
    /* A refusal decided before the request was read (who it is, limits):
     * answered once its head is in, so the client reads an answer, not a
     * reset. */
    int refuse_status;
    const char *refuse_code;
    char refuse_msg[300];
    /* reading */
    char in[HTTPD_IN_MAX];
    size_t in_len; /* bytes in `in` */
    size_t in_off; /* parsed so far */
    llhttp_t parser;
    hreq_t req;
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
    /* the fetch */
    job_waiter_t w;
    int waiting;        /* w is in a job (jobs_cancel on close) */
    int quota_counted;  /* a waiting request of its uid (quota_request_end) */
    struct hf_meta *hf; /* the /hf endpoint's request to the Hub in flight, or NULL */
    struct hf_api *api; /* an /hf/api request to the Hub or its pool item, or NULL */
    int64_t total;      /* the download's announced length, -1 until known */
    uint64_t written;   /* its partial file's bytes written (on_written) */
    int streaming;      /* the answer follows the partial file as it lands */
};

/* A revision a HEAD resolved to a commit, for the GET that follows it: a
 * branch may move between the two, and the client must get the file the
 * HEAD described. */
#define HF_REVS 64
#define HF_REV_TTL_MS 300000
typedef struct hf_rev {
    char key[512]; /* "datasets/org/name@rev" */
    char commit[41];
    uint64_t until; /* uv_now() when it is forgotten */
} hf_rev_t;

/* What the Hub said of one file to one credential tag: the GET that
 * follows a HEAD (huggingface_hub's way) needs no second question, and a
 * token the Hub accepted stays accepted this long, no longer. */
#define HF_KNOWN 64
#define HF_KNOWN_TTL_MS 60000
typedef struct hf_file {
    char commit[41];
    int64_t size;
    int lfs;          /* the Hub redirected to its CDN: sha256 is the file's */
    char sha256[65];  /* an LFS file's (X-Linked-Etag), else "" */
    char etag[136];   /* the Hub's ETag as sent, or "" */
    char linked[136]; /* X-Linked-Etag as sent (LFS), or "" */
    char linked_size[24];
} hf_file_t;
typedef struct hf_known {
    char tag[65];   /* the credential tag ("" without credentials) */
    char key[1024]; /* "datasets/org/name@rev/path" as the client named it */
    hf_file_t file;
    uint64_t until; /* uv_now() when it is forgotten */
} hf_known_t;

struct httpd {
    httpd_deps_t d;
    hf_rev_t revs[HF_REVS];     /* httpd_hf.c's memory; the oldest goes first */
    hf_known_t known[HF_KNOWN]; /* the same */
    list_t conns;               /* open connections, closing ones too */
    unsigned nconns;            /* not yet freed */
    httpd_stats_t stats;
    uv_timer_t closer; /* calls the close callback from a loop iteration */
    int closing;
    void (*close_cb)(void *);
    void *close_arg;
};

/* httpd.c: the connection's I/O. */

/* Starts sending c->out (then c->body, if any); c->keep_alive decides
 * what follows. */
void hconn_send(hconn_t *c);
/* The one close path: idempotent, safe inside any callback. */
void hconn_close(hconn_t *c);
/* body_limit grew: sending goes on if it had caught up. */
void hconn_more_body(hconn_t *c);
/* A pool item of c's (c->work) is back: 1 when c is closing (then it may
 * be freed here, and the caller touches it no more), else 0. */
int hconn_item_back(hconn_t *c);

/* httpd_request.c: requests. */

void hreq_settings_init(llhttp_settings_t *s);
/* Forgets the request read (for the next on a kept connection). */
void hreq_reset(hreq_t *r);
/* The head of the request is in: answer it (sets the state: HC_FETCH or
 * HC_SEND). */
void hreq_handle(hconn_t *c);
/* Answers with a short text: status, the X-Hubd-Error code (NULL: none)
 * and a one-line body; closes after it when close_after. */
void hreq_answer_text(hconn_t *c, int status, const char *code, const char *msg, int close_after);
/* The fetch of c ends early (the client went away or the server closes). */
void hreq_abandon(hconn_t *c);
/* Starts the download of url (jobs_fetch) for c, whose answer follows
 * (streamed, or the file): the generic form's and the Hub's. sha256: the
 * expected digest or NULL. */
void hreq_fetch(hconn_t *c, const char *url, const char *sha256);
/* One more waiting request of c's uid (max_requests_per_user): 0, or -1
 * after answering 429. hreq_abandon ends it. */
int hreq_quota_begin(hconn_t *c);
/* Answers with the stored file res (Range, HEAD, the body by sendfile). */
void hreq_answer_file(hconn_t *c, const job_result_t *res);
/* Answers with a head only: 200, Content-Length length, the request's
 * extra lines. */
void hreq_answer_head(hconn_t *c, uint64_t length);
/* Answers with status, Content-Type ctype, the request's extra lines and
 * the len bytes of body (copied). */
void hreq_answer_bytes(hconn_t *c, int status, const char *ctype, const char *body, size_t len);

/* httpd_hf.c: the Hugging Face Hub endpoint, /hf/... */
void hf_handle(hconn_t *c);
/* Drops the Hub request in flight (the connection goes). */
void hf_abandon(hconn_t *c);
/* The stored file res of a request with git_sha1 set: checked in a pool
 * item, then answered (hreq_answer_file), or refused (502 hash_mismatch). */
void hf_check_git_sha1(hconn_t *c, const job_result_t *res);
/* "Name: value\r\n" appended to the request's extra lines when value is
 * set and has no control character (the Hub's values pass in answers). 0
 * or -1 (no memory). */
int hf_add_line(hreq_t *r, const char *name, const char *value);

/* httpd_hf_api.c: the Hub's API routes, /hf/api/... */
void hf_api_handle(hconn_t *c);
/* Drops the API request in flight (the connection goes): its HTTP request
 * is aborted; a pool item still out frees it when it is back. */
void hf_api_abandon(hconn_t *c);
/* Whether a request to target may carry a body (POST .../paths-info/{rev}):
 * read from the head, before the body. */
int hf_api_takes_body(const char *target);

/* The generic form's URL from a request target: "/https://host/path?q",
 * or "/https:/host/path" as clients that merge slashes send it. 0, or -1
 * when the target is no such form (or the URL does not fit cap). */
int hreq_generic_url(const char *target, char *url, size_t cap);

#endif
