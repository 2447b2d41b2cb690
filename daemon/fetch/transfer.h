/* transfer: one HTTP exchange for a byte range of one URL, distinct from the
 * job (one file: its waiters, hash, partial and commit) that owns it.
 *
 * A transfer owns its request (http_req_t), follows the redirects of its
 * URL, decides what a response head means (disposition.h) and counts its
 * failed attempts, retrying the transient ones after a backoff. It hands
 * what it gets to its job through job_internal.h: the head taken
 * (job_take_head), the body's bytes (job_take_body), the body's end
 * (job_body_ended), a restart from byte 0 or a failure. A job owns one
 * such transfer, for the rest of the file from the first byte it does not
 * have (or, when the file may be segmented, for its first chunk); a
 * segmented download's other connections are transfers of its lanes
 * (segments.h), which hand what they get to the lane instead.
 *
 * A job whose URL matches a `mirror` rule (mirror.h) starts at the
 * mirror's URL instead; credentials go there only if the rule says so. A
 * failed attempt there (any error or 4xx/5xx status) falls back to the
 * job's own URL at once, resuming, unless mirror_fallback is off; from
 * then on the transfer stays on the origin.
 *
 * Loop thread only. Lives inside its job (transfer_init when the job is
 * made, transfer_free when it goes); the job's retry_timer paces it. */
#ifndef HUBD_TRANSFER_H
#define HUBD_TRANSFER_H

#include <stdint.h>

#include "disposition.h"
#include "http.h"
#include "url.h"

struct job;
struct seg_lane;

typedef struct transfer {
    struct job *job;        /* the owner, which it feeds */
    url_t url;              /* the current hop: the job's URL, then where redirects lead */
    unsigned redirects;     /* hops followed since the attempt started */
    uint64_t offset;        /* the Range start of the request (0: the whole file) */
    uint64_t end;           /* the Range end (exclusive), 0: to the end of the file */
    struct seg_lane *lane;  /* a segmented download's lane that owns it, NULL: the job's */
    http_req_t *req;        /* in flight, or NULL */
    disposition_t disp;     /* what the response head in flight means (DISP_NONE before) */
    unsigned attempts;      /* failed attempts so far */
    unsigned refused;       /* of them, connections refused (transfer_error) */
    int refused_now;        /* the attempt ending now was refused (http_req_refused) */
    const char *begin_code; /* why the request could not start (reported a turn later) */
    char begin_msg[400];
    const struct mirror_rule *mirror; /* the rule in use (the config's), NULL: the origin */
    char *mirror_url;                 /* the job's URL rewritten by it (malloc'd) */
    char *mirror_shown;               /* its scheme://host[:port], for STATUS and messages */
} transfer_t;

/* Starts idle at u (taken), or at the URL a mirror rule makes of it. */
void transfer_init(transfer_t *t, struct job *job, const url_t *u);

/* Frees what it holds; no request may be in flight. */
void transfer_free(transfer_t *t);

/* Sends the request for the bytes [offset, end) (end 0: to the end of the
 * file; offset 0 and end 0: the whole file), with If-Range when the job
 * has a validator. A request that cannot start fails the job (or the
 * lane's attempt) from the next loop turn (this may run inside jobs_fetch,
 * which never calls back itself). */
void transfer_start(transfer_t *t, uint64_t offset, uint64_t end);

/* Drops the request in flight, if any: no callback of it comes. */
void transfer_abort(transfer_t *t);

/* Back to the first hop (the mirror's URL while it is used, else the
 * job's) with the request dropped, for another attempt. */
void transfer_rewind(transfer_t *t);

/* Backpressure: stop or resume reading the body. */
void transfer_set_paused(transfer_t *t, int paused);

/* A failed attempt (code as in PROTOCOL.md): retried after a backoff with
 * jitter (at least what Retry-After asked, within retry_max_delay and the
 * deadline), resuming at the first byte the job does not have; or, when
 * the failure is permanent or the attempts are spent, the job fails. */
void transfer_error(transfer_t *t, const char *code, const char *msg);

/* Where the bytes are asked for now: "mirror" (then *shown is the mirror's
 * scheme://host[:port]) or "origin" (*shown NULL). */
const char *transfer_source(const transfer_t *t, const char **shown);

#endif
