/* transfer: one HTTP exchange for a byte range of one URL, for an owner.
 *
 * A transfer owns its request (http_req_t), follows the redirects of its
 * URL (the owner asks again at the next hop) and decides what a response head means
 * (disposition.h). What it gets it hands to its owner through transfer_cbs_t, in the manner of
 * http_req_cbs_t: the head (with its disposition), the body's bytes, the
 * end of the exchange, a failure. The owner decides what each means: a
 * job's main transfer (job.c) and a segmented download's lane
 * (segments.c) are two owners of this one type, both made by
 * transfer_init. Whether to retry a failure, and when, is the owner's
 * (disposition.h's retry_decide); the transfer keeps the count of failed
 * attempts the owner gives it.
 *
 * What it asks for is the owner's file (transfer_file_t): the URL asked
 * for, its credentials (sent only to that URL's origin, never where a
 * redirect leads), the length and validators as known now (If-Range, and
 * the checks of a 206's Content-Range), and a cached entry to revalidate.
 *
 * A transfer made with use_mirror and whose URL matches a `mirror` rule
 * (mirror.h) starts at the mirror's URL instead; credentials go there only
 * if the rule says so. transfer_fall_back moves it to the file's own URL
 * for good.
 *
 * Loop thread only. Lives inside its owner (transfer_init when the owner
 * is made, transfer_free when it goes). */
#ifndef HUBD_TRANSFER_H
#define HUBD_TRANSFER_H

#include <stdint.h>

#include "config.h"
#include "disposition.h"
#include "http.h"
#include "url.h"

/* A cached entry a download asks the origin about first (If-None-Match,
 * If-Modified-Since): a 304 serves it, a body replaces it. */
typedef struct job_reval {
    char sha[65];
    uint64_t size;
    char etag[256];         /* "" when none */
    char last_modified[64]; /* "" when none */
} job_reval_t;

/* The file a transfer asks for, as its owner knows it now. */
typedef struct transfer_file {
    const char *key;          /* the canonical URL asked for: where a rewind goes back to */
    const char *cred_headers; /* the client's "Name: value\r\n" lines, or NULL */
    int64_t total;            /* the length, -1 unknown */
    char *etag, *last_modified;
    job_reval_t *reval; /* a cached entry to revalidate until a body starts, else NULL */
} transfer_file_t;

/* The validator for If-Range: a strong ETag, else Last-Modified (RFC 9110
 * 13.1.5: a weak ETag cannot be used). NULL when there is none. */
const char *transfer_file_validator(const transfer_file_t *f);

typedef struct transfer transfer_t;

/* The owner's callbacks; each may abort or restart the transfer. */
typedef struct transfer_cbs {
    /* A response head and what it means (d->kind). DISP_TAKE: return
     * HTTP_BODY_DELIVER to read the body. Any other kind: the owner may
     * act now (DISP_FAIL, DISP_RESTART); a redirect, a status and a 304
     * come to end or failure once the body is drained. */
    int (*head)(transfer_t *t, const disposition_t *d, const http_response_t *resp);
    void (*body)(transfer_t *t, buf_t *buf, const char *p, size_t n);
    /* The exchange is over: the whole body, a 304, or a redirect followed
     * (t->url is the next hop: the owner asks again), as t->disp.kind says
     * (DISP_TAKE, DISP_NOT_MODIFIED, DISP_REDIRECT). */
    void (*end)(transfer_t *t);
    /* The exchange failed (code as in PROTOCOL.md): the network, a status
     * (http_NNN), a redirect that cannot be followed, a request that could
     * not start. t->refused_now: every address refused the connection. */
    void (*failure)(transfer_t *t, const char *code, const char *msg);
} transfer_cbs_t;

struct transfer {
    const transfer_cbs_t *cbs;
    void *owner;
    const transfer_file_t *file; /* the owner's */
    http_client_t *http;
    const hubd_config_t *cfg;
    uint64_t id;            /* the job's, for the log */
    url_t url;              /* the current hop: the first one, then where redirects lead */
    unsigned redirects;     /* hops followed since the attempt started */
    uint64_t offset;        /* the Range start of the request (0: the whole file) */
    uint64_t end;           /* the Range end (exclusive), 0: to the end of the file */
    int conditional;        /* the request revalidates file->reval */
    int paused;             /* reading stopped (transfer_set_paused): a new request too */
    http_req_t *req;        /* in flight, or NULL */
    disposition_t disp;     /* what the response head in flight means (DISP_NONE before) */
    unsigned attempts;      /* failed attempts so far (the owner counts them) */
    unsigned refused;       /* of them, connections refused in a row (the owner counts) */
    int refused_now;        /* the attempt ending now was refused (http_req_refused) */
    const char *begin_code; /* why the request could not start */
    char begin_msg[400];
    const struct mirror_rule *mirror; /* the rule in use (the config's), NULL: the origin */
    char *mirror_url;                 /* the file's URL rewritten by it (malloc'd) */
    char *mirror_shown;               /* its scheme://host[:port], for STATUS and messages */
};

/* Starts idle at u (taken), or, with use_mirror, at the URL a mirror rule
 * makes of it. */
void transfer_init(transfer_t *t, const transfer_cbs_t *cbs, void *owner,
                   const transfer_file_t *file, http_client_t *http, const hubd_config_t *cfg,
                   uint64_t id, const url_t *u, int use_mirror);

/* Frees what it holds; no request may be in flight. */
void transfer_free(transfer_t *t);

/* Sends the request for the bytes [offset, end) (end 0: to the end of the
 * file; offset 0 and end 0: the whole file), with If-Range when the file
 * has a validator, and conditional on file->reval when asked. 0; or a
 * negative errno when it could not start, with begin_code and begin_msg
 * set and no callback to come: the owner reports it a turn later (this may
 * run inside jobs_fetch, which never calls back itself). */
int transfer_start(transfer_t *t, uint64_t offset, uint64_t end, int conditional);

/* Drops the request in flight, if any: no callback of it comes. */
void transfer_abort(transfer_t *t);

/* Back to the first hop (the mirror's URL while it is used, else the
 * file's) with the request dropped, for another attempt. */
void transfer_rewind(transfer_t *t);

/* Backpressure: stop or resume reading the body (of the requests to come too). */
void transfer_set_paused(transfer_t *t, int paused);

/* A failed attempt on the mirror (code, msg: why), with mirror_fallback
 * on: the transfer goes to the file's own URL for good, rewound, its
 * attempts counted afresh; from: the byte the next request asks from (for
 * the log). Returns 1 when it did; 0 when it is not on a mirror or
 * mirror_fallback is off (the failure is then the owner's). Any failure
 * counts: the network, timeouts, TLS, bad or cut responses, redirects that
 * cannot be followed, and every 4xx and 5xx status (a cache tier that
 * lacks a file, or is not allowed it, may answer any of them). */
int transfer_fall_back(transfer_t *t, const char *code, const char *msg, uint64_t from);

/* Where the bytes are asked for now: "mirror" (then *shown is the mirror's
 * scheme://host[:port]) or "origin" (*shown NULL). */
const char *transfer_source(const transfer_t *t, const char **shown);

#endif
