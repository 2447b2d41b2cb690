/* disposition: what a response head means for the request that got it, and
 * the retry rules around it.
 *
 * Pure functions: no I/O, no libuv, no clock, no globals; the transfer
 * hands the verdict to its owner, which applies it and the retry schedule
 * (job.c, segments.c); which codes are worth a retry is errcode.h's table.
 * Any thread; the unit tests call them directly. */
#ifndef HUBD_DISPOSITION_H
#define HUBD_DISPOSITION_H

#include <stddef.h>
#include <stdint.h>

#include "url.h"

typedef enum {
    DISP_NONE,         /* no response head yet */
    DISP_TAKE,         /* deliver the body: it is the file from the offset asked for */
    DISP_REDIRECT,     /* drain the body, then follow `location` */
    DISP_STATUS,       /* drain the body, then end the attempt with http_<status> */
    DISP_RESTART,      /* what we have is not a prefix of this body: start over at byte 0 */
    DISP_FAIL,         /* fail the job now with code and msg */
    DISP_NOT_MODIFIED, /* a conditional request's 304: the cached file is current */
} disp_kind_t;

/* The parts of a response head that decide (http_response_t's fields). */
typedef struct disp_head {
    int status;
    int64_t content_length;                                    /* -1 when not announced */
    const char *location, *etag, *content_range, *retry_after; /* NULL when absent */
    int from_proxy; /* a forward proxy answered (plain http in absolute form) */
} disp_head_t;

/* The request the head answers. */
typedef struct disp_request {
    const url_t *url;       /* the hop asked (a relative Location resolves against it) */
    uint64_t offset;        /* the Range start asked for; 0: the whole file (or its first range) */
    uint64_t end;           /* the Range's end asked for (exclusive); 0: to the end of the file */
    int64_t total;          /* the file's length known before, -1 unknown */
    const char *etag;       /* the ETag held for the partial, NULL if none */
    unsigned redirects;     /* redirects followed so far */
    unsigned max_redirects; /* the configured bound */
    int conditional;        /* it carried If-None-Match / If-Modified-Since (a revalidation) */
} disp_request_t;

typedef struct disposition {
    disp_kind_t kind;
    int status;              /* the response's */
    int64_t total;           /* TAKE: the file's length, -1 unknown */
    int new_validators;      /* TAKE: a whole file: its ETag and Last-Modified replace ours */
    unsigned retry_after_ms; /* STATUS: Retry-After in ms, 0 if none or unusable */
    char *location;          /* REDIRECT: the absolute URL (malloc'd: disposition_clear) */
    const char *code;        /* FAIL: the error code */
    const char *why;         /* RESTART: the reason, for the log */
    char msg[160];           /* FAIL: the message */
} disposition_t;

/* Decides what the head h means for request r. *out must be clear (zeroed
 * or disposition_clear'ed). The rules: a 3xx redirect needs a Location
 * and stays within max_redirects; a resumed request (offset > 0) that gets
 * 200, 203 or 416 restarts, and its 206 must carry the Content-Range,
 * length and ETag of the range asked for (else restart); a first request
 * that asked for a range (offset 0, end set) takes a 200 as the whole file
 * and a 206 with a known length as its first range (its validators are
 * the file's), and restarts on a 416 (an empty file) or a range of
 * unknown length; any other status but 200 and 203 ends the attempt once
 * drained. */
void disposition_of(const disp_head_t *h, const disp_request_t *r, disposition_t *out);

/* Where a download's length may go: what it is judged against. */
typedef struct disp_room {
    uint64_t max_file_size; /* 0: no limit */
    uint64_t fs_size;       /* the cache's file system's size in bytes, 0: unknown */
    uint64_t floor;         /* bytes kept free there (min_free_space, or its share) */
} disp_room_t;

/* Whether a download of `length` bytes may go on: a length its origin
 * announced (announced: a Content-Length or a Content-Range total), judged
 * before anything is sized by it, or the bytes a body has reached. NULL
 * when it may; "too_large" above max_file_size; "no_space" when it is
 * larger than the cache's whole file system less the floor, which no
 * eviction can make room for (smaller, it waits for the write item's
 * check of the free space, pipeline.h). msg (len bytes) then says why,
 * naming the length. */
const char *disposition_length(uint64_t length, int announced, const disp_room_t *room, char *msg,
                               size_t len);

/* Frees what a disposition holds and makes it DISP_NONE. */
void disposition_clear(disposition_t *d);

/* Retry-After in milliseconds: delta-seconds below a day; 0 for none, an
 * HTTP date (not honoured) or anything else. */
unsigned disposition_retry_after_ms(const char *value);

/* Whether a failure with this error code is worth another attempt: its
 * row's retry column (errcode.h): the network, timeouts, a cut body (also a
 * TLS record cut short), 5xx, 408, 429. The rest (4xx, bad responses, TLS
 * handshakes and verification, disk) would fail again. */
int disposition_is_transient(const char *code);

/* The wait before the attempt after `attempts` failed ones: base_ms doubled
 * per attempt (until max_ms is reached), with jitter in [d/2, d] taken from
 * rnd, at least retry_after_ms, at most max_ms. */
uint64_t disposition_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned attempts,
                                unsigned retry_after_ms, uint64_t rnd);

/* What to do with a failed attempt: one rule for a job's own transfer, a
 * segment's connection and a segment's silent connection. */
typedef enum {
    RETRY_FAIL,  /* the download fails (msg_after/msg_deadline say how to word it) */
    RETRY_AGAIN, /* again after delay_ms (rewind first: resolve the URL again) */
} retry_verdict_t;

typedef struct retry_in {
    const char *code;         /* the failure's (errcode.h decides whether it is transient) */
    unsigned attempts;        /* failed attempts before this one */
    unsigned retries;         /* the most retries (config retries) */
    int shutting_down;        /* hubd is stopping: no retry */
    int lane;                 /* a segment's connection (else the job's own transfer) */
    int hopeless;             /* job's: refused REFUSALS_MAX times in a row, nothing received */
    unsigned want;            /* lane: connections wanted now */
    unsigned retry_after_ms;  /* what the response asked for (0: nothing) */
    uint64_t base_ms, max_ms; /* retry_delay, retry_max_delay */
    uint64_t rnd;             /* for the jitter */
    uint64_t elapsed_ms, deadline_ms; /* job's: since the fetch started, and deadline (0: none) */
} retry_in_t;

typedef struct retry_out {
    retry_verdict_t verdict;
    uint64_t delay_ms;
    int after_n;  /* RETRY_FAIL: the message ends "(after N attempts)", N = attempts + 1 */
    int deadline; /* RETRY_FAIL: "(deadline reached after N attempts)" */
    int rewind;   /* RETRY_AGAIN: resolve the file's URL again first (a signed link expired) */
    int fewer;    /* RETRY_AGAIN: the server is busy: one connection fewer is wanted */
} retry_out_t;

/* The rules. A job's own transfer: a code that is not transient, a
 * shutdown, spent retries or a hopeless refusal fail it; so does a delay
 * that would reach the deadline. A lane: a final code fails the download
 * unless it asks to resolve the URL again (retried after a rewind, not
 * waiting for the expired link's Retry-After); a
 * shutdown or spent retries fail it; a throttle (429, 503) with more than
 * one connection wanted asks for one fewer. Otherwise again after the
 * backoff (disposition_backoff_ms). */
void retry_decide(const retry_in_t *in, retry_out_t *out);

/* Whether a redirect from `from` to the absolute URL `to` may be followed:
 * 0 with *next parsed (url_free it), or -EINVAL with the reason in msg
 * (an unusable URL, or a downgrade from https to http). */
int disposition_follow(const url_t *from, const char *to, url_t *next, char *msg, size_t len);

#endif
