/* hub_req: one request to the Hugging Face Hub, the one way hubd asks
 * it anything: the metadata question about a file (hf_meta.c),
 * HFREPO's repo listing (verbs_hf.c) and the /hf/api routes
 * (httpd_hf_api.c). A request goes through the downloads' HTTP client
 * (jobs_http: proxies, network policy) with the caller's header lines
 * (the client's credentials), keeps the response headers the caller wants
 * (http_want_t), follows the Hub's relative redirects (a renamed repo: the
 * same origin) up to max_hops, and gathers the body up to body_max, charged
 * to a byte budget when the caller has one (hub_budget(): the daemon's),
 * at most 1 MiB a turn of the loop. It answers once, through a callback:
 * the final response (a redirect not followed is one: an LFS file's, to
 * its CDN), or why there is none (PROTOCOL.md's codes: dns, connect,
 * timeout, redirect, too_large, busy, ...).
 *
 * Calls go one way: the three askers call this module, which calls only
 * http.c and answers through the callback they registered.
 *
 * Loop thread only. The callback never comes from inside hub_req_start or
 * hub_req_abort (http.h's rule). A request's memory may outlive its end by
 * one turn of the loop (its timer's close). */
#ifndef HUBD_HUB_REQ_H
#define HUBD_HUB_REQ_H

#include "bytebuf.h"
#include "http.h"

#include <stddef.h>
#include <stdint.h>

#define HUB_REQ_MAX_HOPS 5 /* relative redirects (renamed repos) the askers follow */

/* Which answers' bodies are gathered. */
typedef enum {
    HUB_BODY_NONE, /* none: read and dropped (a redirect's, an error's text) */
    HUB_BODY_OK,   /* a 200's only */
    HUB_BODY_ANY,  /* whatever the status (the /hf/api routes pass it on) */
} hub_body_t;

/* Bytes of hubd's memory that the Hub's answers may take, from their
 * first byte read until their asker has let them go (parsed in its pool
 * item, and what the parse made, written or sent), shared by the requests
 * that name it: a request whose body would take it past max fails with
 * "busy". Each byte of a body is charged its cost (hub_req_opts_t.cost):
 * the byte, and what parsing it may take besides. The owner starts it
 * zeroed with max set; loop thread. */
typedef struct hub_budget {
    size_t used; /* bytes charged now */
    size_t max;  /* the bound */
} hub_budget_t;

#define HUB_BUDGET (64u << 20) /* hub_budget()'s max, bytes */

/* The daemon's one budget (HUB_BUDGET), across all users: HFREPO's
 * listings (verbs_hf.c) and the /hf/api routes' answers
 * (httpd_hf_api.c) are charged to it, so that what the Hub's answers cost
 * hubd is bounded whoever asked and however. A static of this module, not
 * a server's: a pool item whose session or connection went may end after
 * its server is freed, and gives its bytes back then (on the loop). Loop
 * thread only. */
hub_budget_t *hub_budget(void);

/* Bytes a caller took with a body (hub_answer_take_body) go back. */
void hub_budget_release(hub_budget_t *b, size_t n);

typedef struct hub_req_opts {
    const char *method;        /* NULL: GET */
    const char *headers;       /* "Name: value\r\n" lines (copied), or NULL */
    const void *body;          /* the request's body (copied), or NULL: with one, no
                                  redirect is followed (it would have to be sent again) */
    size_t body_len;           /* of it */
    const http_want_t *wanted; /* response headers kept (not copied: static), or NULL */
    size_t nwanted;            /* at most HTTP_MAX_WANTED */
    unsigned max_hops;         /* same-origin redirects followed; 0: a redirect is the answer */
    hub_body_t keep;           /* which bodies are gathered */
    size_t body_max;           /* their bound: a longer one fails with "too_large" */
    hub_budget_t *budget;      /* charged with the body as it comes, or NULL */
    unsigned cost;             /* bytes charged a byte of body: the byte, and what parsing
                                  it may hold besides (HF_REPO_COST...); 0 counts as 1 */
    uv_loop_t *loop;           /* the body is taken at most 1 MiB a turn of this loop (the
                                  others are served between), or NULL: as it comes */
} hub_req_opts_t;

/* The final response, valid during the callback only. */
typedef struct hub_answer {
    int status;                          /* the Hub's */
    int64_t content_length;              /* -1 when not announced */
    const char *location;                /* each NULL when absent */
    const char *etag;                    /*   */
    const char *content_range;           /*   */
    const char *content_type;            /*   */
    const char *wanted[HTTP_MAX_WANTED]; /* the values of opts.wanted, in its order */
    bytebuf_t body;                      /* gathered (hub_body_t), else empty */
    size_t charged;                      /* for body, to the budget: its bytes times the
                                            cost (internal) */
} hub_answer_t;

/* Moves the answer's body to *out (to be bytebuf_free'd by the caller):
 * the bytes still charged to the request's budget (the body's length
 * times its cost), which the caller gives back with hub_budget_release
 * once it has let the body (and what it made of it) go. */
size_t hub_answer_take_body(hub_answer_t *a, bytebuf_t *out);

/* The request's end. code NULL: a is the Hub's final answer (any status,
 * a redirect not followed too); else code and msg say why there is none
 * (a is NULL). The request is freed after the call returns. */
typedef void (*hub_req_cb)(void *arg, const char *code, const char *msg, hub_answer_t *a);

typedef struct hub_req hub_req_t;

/* Asks url through http. 0 and *out (for hub_req_abort) until cb is
 * called once; else -EINVAL (url does not parse: *why, when why is not
 * NULL), -EACCES (the network policy refuses the Hub's host) or -ENOMEM,
 * and no callback. */
int hub_req_start(struct http_client *http, const char *url, const hub_req_opts_t *o, hub_req_cb cb,
                  void *arg, hub_req_t **out, const char **why);

/* The asker goes: the request is aborted, no callback comes, its charge to
 * the budget goes back, the handle is freed. */
void hub_req_abort(hub_req_t *r);

/* The Hub's refusal in its own words: code "http_NNN", and msg its
 * "X-Error-Code: X-Error-Message" (either alone when the other is NULL),
 * else "the Hub answered HTTP NNN". Pure. */
void hub_refusal(int status, const char *error_code, const char *error_message, char code[16],
                 char *msg, size_t cap);

#endif
