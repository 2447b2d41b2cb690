/* fetch_internal: the state of one `hubctl fetch`, shared by fetch.c (the
 * requests and their replies) and progress.c (what the user sees while
 * they run); hf_download.c keeps one for its progress display too.
 * Private to those files. One fetch_t per run, on
 * fetch_run's stack; single-threaded. */
#ifndef HUBCTL_FETCH_INTERNAL_H
#define HUBCTL_FETCH_INTERNAL_H

#include "cli.h"
#include "conn.h"

#include <stddef.h>
#include <stdint.h>

#define SHA256_HEX 64   /* hex digits of a SHA-256 digest */
#define FETCH_WINDOW 32 /* FETCHes asked and not yet answered, at most */

typedef enum { REQ_PENDING, REQ_OK, REQ_FAILED } req_state_t;
typedef enum { VIA_NONE, VIA_HIT, VIA_QUEUED, VIA_ATTACHED } req_via_t;

/* One URL of a fetch. Its protocol id is its index + 1. */
typedef struct req {
    const char *url;   /* as given on the command line (or in -i FILE) */
    char expect[65];   /* its expected digest (-i FILE's sha256=), lower case, or "" */
    char *name;        /* last segment of the URL path, raw (may be empty) */
    char *label;       /* name (or the URL) cleaned for the progress display */
    char *dest;        /* where -o puts it, NULL without -o */
    req_state_t state; /* PENDING until DONE or ERR */
    req_via_t via;     /* what the first reply said */
    int has_progress;  /* a PROGRESS arrived */
    int has_total;     /* the last PROGRESS had a total */
    uint64_t done;     /* bytes, from the last PROGRESS */
    uint64_t total;    /* bytes, valid if has_total */
    uint64_t rate;     /* bytes per second, from the last PROGRESS */
    char phase[16];    /* its PROGRESS state= (connecting, downloading, retrying...), or "" */
    unsigned attempt;  /* retrying: failed attempts so far, of attempts at most */
    unsigned attempts;
    double retry_at;  /* retrying: when the next attempt starts (monotonic s) */
    char *reason;     /* retrying: why the last attempt failed */
    char shown[32];   /* the state (and attempt) the last plain line told */
    double last_line; /* when its last plain progress line went out (monotonic s) */
    char *path;       /* DONE: the cache path, or dest with -o */
    char *sha256;     /* DONE: digest */
    char *source;     /* DONE: hit, download or attached */
    uint64_t size;    /* DONE: bytes */
    char *code;       /* failure: ERR code, or one of hubctl's own */
    char *msg;        /* failure: text for the user */
    int exit;         /* this URL's exit code */
    int running;      /* hf download: its FETCH is out (a TTY line of its own) */
} req_t;

typedef enum {
    PROG_OFF,   /* -q, or stderr is not a terminal and no --progress */
    PROG_TTY,   /* one line redrawn in place */
    PROG_PLAIN, /* --progress to a file or pipe: a line now and then */
} prog_mode_t;

typedef struct fetch {
    const cli_t *cli;            /* options */
    char sha256[SHA256_HEX + 1]; /* --sha256, lower case, or "" */
    req_t *req;                  /* one per URL, in argument order */
    size_t n;                    /* entries of req */
    char **inputs;               /* -i FILE's lines (URL and digest), owned */
    size_t ninputs;
    conn_t *conn;     /* the session the FETCHes go on */
    size_t queued;    /* FETCHes queued so far: the first ones, FETCH_WINDOW at most unanswered */
    size_t finished;  /* requests that got DONE or ERR */
    size_t printed;   /* results written to stdout, in order */
    prog_mode_t prog; /* how progress is shown */
    int drawn;        /* a TTY progress line is on screen, not ended */
    int per_file;     /* hf download: under the total, a TTY line per running request */
    int lines;        /* TTY lines on screen (drawn): the cursor is on the last */
    double last_draw; /* when it was last drawn (monotonic s) */
    double t_start;   /* when the fetch began (monotonic s) */
    int to_stdout;    /* -o -: the file's bytes go to stdout */
} fetch_t;

#endif
