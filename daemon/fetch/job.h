/* job: one download, shared by every request that wants the same bytes.
 *
 * jobs_fetch() resolves a request against the cache and the running jobs:
 * a blob with the expected digest, or a complete entry for the URL, is a hit;
 * a running job for the same URL (and credentials, or for a vouched request
 * the same vouched digest) takes the request as one more waiter; otherwise a new job is queued.
 * Each waiter's expected digest fails only that waiter: the download is kept when any waiter takes
 * it. A job streams the body through SHA-256 and into tmp/<id>.part in the thread pool, then
 * commits it (store_commit, db_record_download) before any waiter hears DONE.
 *
 * Loop thread only. Each waiter gets on_start once (possibly from inside
 * jobs_fetch; skipped only when the fetch fails before it starts), then
 * on_progress (and on_written, if set) any number of times, then on_finish
 * exactly once (never from inside jobs_fetch) unless it leaves first with
 * jobs_cancel. */
#ifndef HUBD_JOB_H
#define HUBD_JOB_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "cache.h"
#include "config.h"
#include "cred.h"
#include "db.h"
#include "list.h"
#include "netpolicy.h"
#include "proxy.h"
#include "store.h"
#include "tls.h"
#include "worktrack.h"

typedef struct jobs jobs_t;
typedef struct job job_t;
typedef struct job_hit job_hit_t;
typedef struct job_waiter job_waiter_t;

typedef enum { FETCH_HIT, FETCH_QUEUED, FETCH_ATTACHED } fetch_kind_t;

/* A read-only blob fd shared by the DONE replies of one download (or one
 * hit): each reply holds a reference until its line has left with the fd,
 * so a thousand waiters of one file cost hubd one descriptor, not a
 * thousand. Loop thread only. job_fd_new takes fd (closed on failure:
 * NULL); the last unref closes it. */
typedef struct job_fd {
    int fd;
    unsigned refs;
} job_fd_t;

job_fd_t *job_fd_new(int fd);
job_fd_t *job_fd_ref(job_fd_t *f);
void job_fd_unref(job_fd_t *f); /* NULL is fine */

typedef struct job_result {
    const char *err_code; /* NULL on success, else a PROTOCOL.md error code */
    const char *err_msg;
    const char *path;   /* the blob */
    const char *sha256; /* its digest, 64 hex digits */
    uint64_t size;
    job_fd_t *fd;      /* the blob, valid during the call: job_fd_ref() to keep it */
    fetch_kind_t kind; /* how this waiter was served */
} job_result_t;

/* Where a download is, for its waiters: bytes, and what it is doing. */
typedef struct job_progress {
    uint64_t done;
    int64_t total;     /* -1 unknown */
    uint64_t rate;     /* bytes per second */
    const char *state; /* connecting downloading retrying committing (STATUS's names) */
    /* retrying: the failed attempts so far and the most there may be, the
     * time until the next one, and why the last one failed. */
    unsigned attempt, attempts_max;
    uint64_t retry_in_ms;
    const char *reason;
} job_progress_t;

struct job_waiter {
    /* Set by the caller before jobs_fetch. */
    void (*on_start)(job_waiter_t *w, fetch_kind_t kind, uint64_t job_id);
    /* The bytes grew, or the state changed (at most every 100 ms). */
    void (*on_progress)(job_waiter_t *w, const job_progress_t *p);
    void (*on_finish)(job_waiter_t *w, const job_result_t *res);
    /* Optional (NULL: not told): the download's partial file holds its
     * first `written` bytes, the first `durable` of them fdatasync'ed and
     * recorded (they survive a crash), so a reader can follow the file as
     * it lands. Called after each write item and each checkpoint, between
     * on_start and on_finish; `written` goes back to 0 when the download
     * restarts from byte 0. */
    void (*on_written)(job_waiter_t *w, uint64_t written, uint64_t durable);
    uid_t uid;   /* who asks: a new job counts toward this uid's max_jobs_per_user */
    int refresh; /* FETCH refresh=1: a cached URL is revalidated with the origin first */
    /* The origin's own metadata, asked with this request's credentials,
     * named the expected sha256 as the URL's content (the /hf route: the
     * Hub's X-Linked-Etag to this client's token). Such a request may have
     * that blob whoever's credentials fetched it, and may join a running
     * download of the same URL and digest started by another vouched
     * request with other credentials (keeping its own headers, to go on
     * alone if that download fails for its owner). Ignored without an
     * expected sha256. Never set from what a client alone says. */
    int vouched;
    /* Private to the jobs module (daemon/fetch/); jobs_fetch clears each
     * (waiter_reset in jobs.c: a field added here is cleared there). */
    job_t *job;              /* the job waited on, or NULL */
    job_hit_t *hit;          /* the cache look-up in flight, or NULL */
    fetch_kind_t kind;       /* what on_start said */
    int restarted;           /* moved to a job of its own: no second on_start */
    int no_swarm;            /* moved after the swarm brought bytes of another digest */
    char expected[65];       /* this waiter's expected digest, "" if none */
    char cred_tag[65];       /* its credential tag, "" without secret headers */
    char *cred_block;        /* its header lines, until a new job takes them (a vouched
                                waiter in a job of other credentials keeps them) */
    struct job_reval *reval; /* the entry to revalidate, until a new job takes it */
    list_node_t node;        /* in job->waiters */
};

/* Error codes counted apart in STATS (the rest count as "other"). */
#define JOBS_ERROR_CODES                                                                           \
    "dns", "connect", "timeout", "tls", "tls_verify", "http_parse", "truncated", "redirect",       \
        "hash_mismatch", "no_space", "io", "shutting_down", "internal", "bad_url",                 \
        "unsupported_scheme", "http_4xx", "http_5xx", "forbidden", "bad_request", "too_large",     \
        "other"
#define JOBS_NERROR_CODES 21

typedef struct jobs_stats {
    uint64_t hits, misses, attached;
    uint64_t bytes_from_origin, bytes_served;
    uint64_t errors;
    uint64_t errors_by_code[JOBS_NERROR_CODES]; /* in the order of JOBS_ERROR_CODES */
    uint64_t evicted, evicted_bytes;
    uint64_t bad_blobs; /* found changed or corrupt (hits, background verification): quarantined */
    uint64_t segmented; /* downloads fetched over several connections */
    uint64_t segment_retries;   /* a connection's range asked for again (failure, stall) */
    uint64_t segment_fallbacks; /* segmented downloads that fell back to one stream */
    uint64_t revalidated;       /* revalidations the origin answered 304 (served as hits) */
    uint64_t commits;           /* downloads committed (recorded, or failed at the commit) */
    uint64_t commit_groups;     /* the group items that did it: commits share transactions */
    uint64_t commit_name_syncs; /* groups whose names one syncfs made durable (commit.c) */
    uint64_t hits_on_loop;      /* hits answered with no pool item (jobs.c: hit_on_loop) */
    unsigned active, queued;
} jobs_stats_t;

/* Uids whose bytes served are counted apart (jobs_served_by_uid). */
#define JOBS_SERVED_UIDS 4096

/* The bytes served to each uid since the start (hits and downloads handed
 * out, as STATS bytes_served counts them; a uid past the first
 * JOBS_SERVED_UIDS counts in that total only): fn once per uid, in no
 * order. Loop thread. */
void jobs_served_by_uid(const jobs_t *js, void (*fn)(void *arg, uid_t uid, uint64_t bytes),
                        void *arg);
/* The downloads transferring now (STATS jobs_active), by the uid that
 * started each: fn once per uid. Loop thread. */
void jobs_active_by_uid(const jobs_t *js, void (*fn)(void *arg, uid_t uid, unsigned n), void *arg);

#define JOB_INFO_USERS 8
typedef struct job_info {
    uint64_t id;
    const char *url;
    const char *state; /* queued resuming connecting body retrying committing */
    uint64_t done;
    int64_t total; /* -1 unknown */
    uint64_t rate; /* bytes per second */
    unsigned waiters;
    unsigned connections;        /* open to the origin (or mirror) for it now */
    int mine;                    /* the uid asking created it or waits on it */
    uid_t users[JOB_INFO_USERS]; /* who asked: its creator, then its waiters' uids, each once */
    unsigned nusers;             /* of them (a longer list is cut) */
    const char *source;          /* "mirror", "origin" or "swarm": where its bytes come from now */
    const char *mirror; /* the mirror's scheme://host[:port] when source is "mirror", else NULL */
} job_info_t;

int jobs_new(uv_loop_t *loop, const hubd_config_t *cfg, store_t *store, db_t *db, tls_ctx_t *tls,
             jobs_t **out);

/* Starts a fetch. sha256 is NULL or 64 lowercase hex digits; headers are
 * the client's "Name: value" request headers (cred.h checks them). A fetch
 * with credentials shares jobs and entries only with the same credentials,
 * except a vouched one (w->vouched): a hit on the expected digest whoever
 * fetched it, and a running download of the same URL and vouched digest.
 * Returns 0, or -EINVAL (bad URL or header, unsupported scheme, stopping)
 * or -ENOMEM with *code and *msg set, and then no callback comes. */
int jobs_fetch(jobs_t *js, const char *url, const char *sha256, const char *const *headers,
               size_t nheaders, job_waiter_t *w, const char **code, const char **msg);

/* The HTTP client downloads use (its proxies and network policy): for the
 * HTTP front's own requests to the Hub (metadata, not files). */
struct http_client *jobs_http(jobs_t *js);

/* Start-up: the network policy of every request and connection. */
void jobs_set_policy(jobs_t *js, const netpolicy_t *policy);
/* The forward proxies downloads go through (proxy.h); not owned. */
void jobs_set_proxies(jobs_t *js, const proxy_settings_t *proxies);

/* Start-up: the per-cache secret of credential tags. */
void jobs_set_secret(jobs_t *js, const cred_secret_t *secret);
/* The credential tag a fetch with these headers would have ("" without
 * any; cred.h): 0, or -EINVAL/-ENOMEM as jobs_fetch would fail. */
int jobs_cred_tag(jobs_t *js, const char *const *headers, size_t nheaders, char tag[65]);

/* The waiter leaves (its client went away): no more callbacks for it. The
 * job keeps running for the others, and for the cache. */
void jobs_cancel(job_waiter_t *w);

/* CANCEL: ends the running or queued job `id` (id 0: the one of canonical
 * URL `url` that uid created or waits on, else any of it) with ERR
 * code=cancelled to every waiter, and discards its partial. Allowed to an
 * admin, and to uid when it created the job or waits on it and no other
 * uid waits on it. 0, -ENOENT (no such job), or -EPERM; out says which
 * job, its waiters and how many of them are other uids'. */
typedef struct jobs_cancelled {
    uint64_t job;
    unsigned waiters, others;
} jobs_cancelled_t;
int jobs_cancel_job(jobs_t *js, uint64_t id, const char *url, uid_t uid, int admin,
                    jobs_cancelled_t *out);

/* INTERRUPT (a client's Ctrl-C): the waiter leaves, as with jobs_cancel,
 * and its job stops when it was the last waiter, no waiter left it running
 * by hanging up (a --warm fetch, a killed client, the front's HEAD), and
 * its bytes are not all in. Like shutting_down, and unlike every other
 * job_fail code, its code (interrupted) keeps the partial file when the
 * origin gave a validator (ETag or Last-Modified), so that the same
 * request resumes it. A hang-up never
 * stops a job: only this explicit request does. out says what happened;
 * out->job is 0 when the waiter was in no job (a hit, a question). */
typedef struct jobs_left {
    uint64_t job;     /* the job left, or 0 */
    int stopped;      /* it stopped (interrupted) */
    int resumable;    /* stopped: its partial (or an earlier run's) is kept */
    int let_run;      /* not stopped because a waiter that hung up left it running */
    unsigned waiters; /* not stopped: the waiters it goes on for */
    uint64_t done;    /* its bytes so far */
} jobs_left_t;
void jobs_leave(job_waiter_t *w, jobs_left_t *out);

/* The partial file the waiter's job writes (tmp/<id>.part), for a reader
 * that follows it as on_written says it grows: its first `written` bytes
 * are the download's. The commit links that same file as the blob, so a
 * descriptor opened on it stays good. 0, or -ENOENT when the waiter waits
 * on no job (a hit, or before on_start). */
int jobs_partial_path(const job_waiter_t *w, char *buf, size_t cap);

void jobs_stats(const jobs_t *js, jobs_stats_t *out);
/* The name of errors_by_code[i]. */
const char *jobs_error_code_name(unsigned i);

/* Evicts, in the pool, one run at a time, least recently used unpinned
 * blobs (never `keep`, which may be NULL) down to max_cache_size less what
 * the running downloads will hold, and down to what keeps min_free_space
 * free once they are written. A no-op with neither configured. */
void jobs_evict(jobs_t *js, const char *keep);

/* GC: an admin's collection down to target bytes (cache_gc), in the
 * eviction coordinator's turn: an eviction run on its way (a reload that
 * lowered max_cache_size, a download short of room) is waited for, its
 * blobs counted in the answer, and then the GC evicts the rest in the
 * pool; no run starts while it is out (one asked meanwhile runs after it).
 * So the answer's size is the cache's as it stands after both. done gets
 * rc 0 and the result, or -ECANCELED (a shutdown), -ENOSPC, another
 * negative errno; once, on the loop, unless jobs_gc_cancel came first.
 * Returns 0, -EBUSY (a GC is out: one at a time), -ECANCELED (shutting
 * down) or -ENOMEM, and then done is never called. */
typedef struct jobs_gc jobs_gc_t;
typedef struct jobs_gc_result {
    cache_gc_result_t gc; /* evicted and freed include the run waited for */
    int waited;           /* an eviction run was on its way: the GC waited for it */
} jobs_gc_result_t;
typedef void (*jobs_gc_cb)(void *arg, int rc, const jobs_gc_result_t *r);
int jobs_gc(jobs_t *js, uint64_t target, jobs_gc_cb done, void *arg, jobs_gc_t **out);
/* done is not called any more (its asker went away); the GC goes on to
 * its end, since it changes the cache, and frees itself. */
void jobs_gc_cancel(jobs_gc_t *gc);
/* A GC is out (waiting for its turn or evicting). */
int jobs_gc_busy(const jobs_t *js);

/* SIGHUP: settings may have changed (limits, max_cache_size). */
void jobs_reload(jobs_t *js);

/* What a shutdown waits for: pool items outside this module (admin verbs,
 * the verifier, session hits) hold it while in flight. */
worktrack_t *jobs_work(jobs_t *js);
/* STATUS, a page at a time: up to max running or queued jobs with ids
 * above `after`, in ascending id order; `mine` is about uid. Returns how
 * many were given to fn. */
unsigned jobs_page(jobs_t *js, uint64_t after, unsigned max, uid_t uid,
                   void (*fn)(void *arg, const job_info_t *info), void *arg);

/* ---- The cluster swarm, as the downloads see it ----------------------------
 *
 * The layer above (daemon/fleet/) may take a download whose digest is known
 * up front and bring its bytes from other nodes instead of the origin. It
 * writes them into the job's own partial file, so the blob is the same one
 * file (one copy per machine), and the job checks the digest of the whole
 * file and commits it as any download: no client sees a byte before that.
 * Loop thread only.
 *
 * A swarm download holds no download slot (max_downloads, max_per_host,
 * max_jobs_per_user: it asks no origin; given back to the origin, it takes
 * one again), shows as "downloading" with source "swarm", and stays out of
 * low_speed_limit (it may wait for a seed). The taker owns it from take() returning 1 until it
 * calls one of jobs_swarm_finished, _origin or _fail; if the job ends first (cancelled, shutting
 * down), drop() tells it, and it calls nothing more. */
typedef struct jobs_swarm_req {
    uint64_t id;           /* the job's, for the log */
    const char *sha256;    /* the digest its first request expects */
    const char *url;       /* its canonical URL */
    int credentials;       /* asked with credentials: its URL is not for other nodes to fetch */
    const char *part_path; /* its partial file: the taker creates it (mode 0600) and fills it */
} jobs_swarm_req_t;

typedef struct jobs_swarm_ops {
    /* A download with a known digest and nothing to resume goes active:
     * 1 if the swarm takes it, 0 to fetch it from the origin now. */
    int (*take)(void *arg, job_t *job, const jobs_swarm_req_t *req);
    /* The job ended while the swarm held it: forget it. */
    void (*drop)(void *arg, job_t *job);
    /* A download was committed (from the origin or the swarm): the blob at
     * path may be seeded. */
    void (*committed)(void *arg, const char *sha256, uint64_t size, const char *path);
} jobs_swarm_ops_t;

/* Start-up: the swarm's hooks (NULL: none, as without a cluster). */
void jobs_set_swarm(jobs_t *js, const jobs_swarm_ops_t *ops, void *arg);
/* The taker's reports: the partial exists and the file has size bytes;
 * done of them are in; all are in (the job checks and commits them); the
 * swarm cannot bring it (the job asks the origin, from byte 0); or the
 * download fails with a PROTOCOL.md code. The last three end the hold. */
void jobs_swarm_sized(job_t *job, uint64_t size);
void jobs_swarm_progress(job_t *job, uint64_t done);
void jobs_swarm_finished(job_t *job);
void jobs_swarm_origin(job_t *job, const char *why);
void jobs_swarm_fail(job_t *job, const char *code, const char *msg);
/* Whether the download numbered id is queued or running. */
int jobs_running(const jobs_t *js, uint64_t id);

/* Start-up: number jobs (and so new partial files) above every partial id
 * that the cache already records. */
void jobs_set_first_id(jobs_t *js, uint64_t above);

/* First step of a shutdown: refuse new fetches and fail every job with
 * shutting_down, so each waiter hears ERR while its session is still open. */
void jobs_stop(jobs_t *js);

/* Last step: (stops if not yet done, then) frees everything once the pool
 * work in flight has come back; then calls done(arg) if given. */
void jobs_shutdown(jobs_t *js, void (*done)(void *arg), void *arg);

#endif
