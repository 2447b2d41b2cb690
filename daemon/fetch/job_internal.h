/* job_internal.h: private to the files of daemon/fetch/ (the jobs module).
 *
 * The structs the module's files share: jobs_t (the table, the queue, the
 * eviction coordinator's state), job_t (one download), batch_t (a run of
 * body slices on its way through the hash and write items) and job_hit_t
 * (a cache look-up in the pool). Loop thread only, except where a field
 * says which pool item owns it. */
#ifndef HUBD_JOB_INTERNAL_H
#define HUBD_JOB_INTERNAL_H

#include "job.h"
#include "bufpool.h"
#include "http.h"
#include "sha256.h"
#include "url.h"
#include "verifier.h"
#include "cache.h"
#include "disposition.h"
#include "transfer.h"
#include "segments.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#define BATCH_MAX_IOV 64
#define WORK_MAX_BATCHES 32        /* batches one work item takes at most */
#define PROGRESS_INTERVAL_MS 100   /* PROGRESS at most 10 per second */
#define BATCH_MAX_AGE_MS 1000      /* a slow stream's batch is handed on after this */
#define WRITEBACK_CHUNK (8u << 20) /* start disk writeback every 8 MiB */
/* A checkpoint (fdatasync, then the partials row) at most this far apart in
 * bytes or in time. What a crash can cost is then bounded by 32 MiB (plus
 * max_inflight) or a quarter second of transfer, whichever is more: under
 * 1.2x of a 256 MiB file, while a fast link pays one fdatasync of data
 * already given to writeback (WRITEBACK_CHUNK) per 32 MiB and a slow one
 * four small ones a second. */
#define CHECKPOINT_BYTES (32u << 20)
#define CHECKPOINT_MS 250
#define REHASH_CHUNK (1u << 20)

/* The states of a job. Every change goes through job_set_state(), which
 * checks it against the table in job.c (each row says why it is allowed).
 *
 *   QUEUED --slot free--> RESUMING --partial re-hashed--> CONNECTING
 *   QUEUED --slot free, nothing to resume----------------> CONNECTING
 *   RESUMING --every byte was there--> BODY_DONE
 *
 *   CONNECTING --3xx (next hop)--> CONNECTING
 *   CONNECTING --head taken------> BODY --body ended well--> BODY_DONE
 *   BODY_DONE --pipeline drained--> COMMITTING --blob and row durable--> DONE
 *
 *   CONNECTING, BODY --transient failure--> RETRY_WAIT --backoff--> CONNECTING
 *   CONNECTING --response cannot continue our bytes--> RESTARTING
 *   RETRY_WAIT --no validator to resume with---------> RESTARTING
 *   RESTARTING --pipeline idle, all dropped--> CONNECTING (from byte 0)
 *
 *   any but DONE --error--> FAILED (waiters told now; freed once the pool
 *                                   work is back)
 *
 * STATUS shows RETRY_WAIT and RESTARTING as "retrying", BODY_DONE as "body". */
typedef enum {
    JOB_QUEUED,     /* waiting for a download slot */
    JOB_RESUMING,   /* re-hashing a recorded partial before asking for the rest */
    JOB_CONNECTING, /* request sent or being sent, no response head taken yet */
    JOB_BODY,       /* the body arrives */
    JOB_RETRY_WAIT, /* a transient failure: waiting to try again (resuming) */
    JOB_RESTARTING, /* dropping all we have once the pipeline is idle, then from byte 0 */
    JOB_BODY_DONE,  /* the response ended well: the pipeline drains before the commit */
    JOB_COMMITTING, /* the commit item is in flight */
    JOB_DONE,       /* committed, waiters told */
    JOB_FAILED,     /* waiters told; the partial goes (or is parked) once the pool is done */
    JOB_NSTATES
} job_state_t;

extern const char *const job_state_names[JOB_NSTATES];

/* Whether a job may go from one state to the other (the table in job.c). */
int job_transition_ok(job_state_t from, job_state_t to);

/* job->flags: sub-states of the loop thread's, never read in the pool. */
enum {
    JOB_IN_QUEUE = 1u << 0,   /* in js's queue */
    JOB_IN_ACTIVE = 1u << 1,  /* in js->active */
    JOB_PAUSED = 1u << 2,     /* reading stopped for backpressure */
    JOB_SHORT_WAIT = 1u << 3, /* short of room: waiting for an eviction run (short_runs) */
    JOB_TMP_MADE = 1u << 4,   /* a write item has run: tmp/<id>.part may exist */
    JOB_PARK = 1u << 5,       /* failed by a shutdown: the partial is kept to resume */
    JOB_CLEANING = 1u << 6,   /* the discard or park item started (or the job went) */
};

/* job->items: the job's pool items in flight, one bit per work slot. */
enum {
    JOB_ITEM_HASH = 1u << 0,   /* hash_work: owns sha */
    JOB_ITEM_WRITE = 1u << 1,  /* write_work: owns fd and the write hand-over fields */
    JOB_ITEM_SYNC = 1u << 2,   /* sync_work: fdatasync beside the write item, ckpt */
    JOB_ITEM_REHASH = 1u << 3, /* rehash_work: owns sha and fd */
    JOB_ITEM_COMMIT = 1u << 4, /* commit_work: owns sha and fd */
};
/* The items of the body's way to disk: none may be in flight to restart. */
#define JOB_ITEMS_DATA (JOB_ITEM_HASH | JOB_ITEM_WRITE | JOB_ITEM_SYNC | JOB_ITEM_REHASH)

/* A cached entry a job asks the origin about first (If-None-Match,
 * If-Modified-Since): a 304 serves it, a body replaces it. */
typedef struct job_reval {
    char sha[65];
    uint64_t size;
    char etag[256];         /* "" when none */
    char last_modified[64]; /* "" when none */
} job_reval_t;

typedef struct batch {
    struct batch *next;
    uint64_t offset; /* file offset of the first byte */
    uint64_t t0;     /* loop time of its first bytes (pipeline_batch_stale) */
    size_t bytes;    /* sum of iov lengths */
    int niov, nbufs;
    struct iovec iov[BATCH_MAX_IOV];
    buf_t *bufs[BATCH_MAX_IOV]; /* one reference each */
    int hashed, written;        /* pipeline stages done */
    seg_chunk_t *chunk;         /* a segmented download's chunk it is part of, else NULL */
    int from_lane;              /* a lane's: hashed later from the file, not from memory */
} batch_t;

struct jobs {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    store_t *store;
    db_t *db;
    bufpool_t pool;
    http_client_t *http;
    list_t active; /* jobs past QUEUED and not finished, newest first (job_t.node) */
    list_t all;    /* every job not yet freed, failed ones too (job_t.all_node) */
    list_t queue;  /* QUEUED jobs, oldest first (job_t.node) */
    uint64_t next_id;
    worktrack_t work; /* jobs, hits and pool items a shutdown waits for */
    jobs_stats_t stats;
    cred_secret_t secret;            /* keys credential tags */
    const proxy_settings_t *proxies; /* the forward proxies (not owned), or NULL */
    verifier_t *verifier;            /* background re-verification, NULL once stopped */
    /* max_rate: a token bucket for every download's body bytes. Over it,
     * the jobs that read are paused (PAUSE_RATE) until the timer finds
     * the bucket refilled. */
    int64_t rate_tokens;
    uint64_t rate_t; /* uv_now of the last refill */
    uv_timer_t rate_timer;
    int rate_waiting; /* the timer is armed */
    int rate_closed;  /* the timer was closed (jobs_stop) */
    int shutting_down;
    int starting_queued; /* inside jobs_start_queued: do not re-enter */
    int start_again;     /* jobs_start_queued was asked again meanwhile */
    /* Eviction: one item at a time; asked again while busy, it runs again. */
    uv_work_t evict_work;
    int evict_busy, evict_again;
    uint64_t evict_runs;      /* runs completed: a download short of space waits for one */
    uint64_t evict_target;    /* the item's copies: max_cache_size less what downloads hold, */
    uint64_t evict_remaining; /* what they have still to write, */
    uint64_t evict_fence;     /* the use sequence when it was computed, */
    uint64_t evict_lack;      /* the item's findings: room no eviction can make, */
    int evict_short_after;    /* and whether the downloads are still short after it */
    uint64_t lack_logged;     /* uv_now of the last warning about it */
    uint64_t evict_floor;     /* and the free-space floor */
    unsigned evict_floor_pct;
    char evict_keep[65], next_keep[65];
    cache_evict_result_t evict_res;
    int evict_rc;
    void (*shutdown_cb)(void *);
    void *shutdown_arg;
};

struct job {
    jobs_t *js;
    uint64_t id;
    uint64_t part_id;       /* its partial is tmp/<part_id>.part and partials row part_id */
    job_state_t state;      /* only job_set_state() changes it */
    unsigned flags;         /* JOB_IN_QUEUE etc.: the loop's sub-states */
    unsigned pause;         /* PAUSE_*: why reading is paused (JOB_PAUSED: any) */
    unsigned items;         /* JOB_ITEM_*: pool items in flight */
    char *key;              /* canonical URL asked for: the dedup and cache key */
    char *host_key;         /* "host:port" of key, for max_per_host */
    char *cred_headers;     /* the client's "Name: value\r\n" lines: sent only to the origin
                               of the URL asked for (transfer_start checks every hop) */
    transfer_t xfer;        /* its main transfer: the HTTP exchange for the bytes it lacks */
    segs_t *seg;            /* its other connections when segmented (segments.h), or NULL */
    int no_segments;        /* fell back to one stream: never segmented again */
    uv_timer_t retry_timer; /* the transfer's backoff; a failed start's report */
    int handles_open;       /* timers not yet closed */
    /* What the commit keeps: set on the loop when the commit starts, from
     * the waiters then, read by the commit item. A download is committed
     * (under its real digest) when any waiter takes it: one without an
     * expected digest, or one whose digest it has; or when none is left. */
    int accept_any;
    char (*accepts)[65]; /* the waiters' expected digests otherwise */
    size_t naccepts;
    uid_t *uids; /* the entry's requesters: the owner and the waiters' uids */
    size_t nuids;
    char cred_tag[65]; /* its credentials' tag: entries and partials are keyed by it */
    uid_t owner;       /* the uid whose request created it */
    list_t waiters;    /* job_waiter_t.node, the newest first */
    unsigned nwaiters;
    list_node_t node;     /* in js->active or js->queue */
    list_node_t all_node; /* in js->all */

    /* Body pipeline. */
    int64_t total;       /* Content-Length, -1 unknown */
    int64_t total_hint;  /* total as of the last work submission: the write item's copy */
    uint64_t floor_hint; /* min_free_space then (the write item's copy) */
    unsigned floor_pct_hint;
    int space_short;       /* the write item found the floor would be crossed */
    int truncate_file;     /* the next write item empties the partial first (and clears it) */
    uint64_t short_runs;   /* the run that must complete before giving up */
    uint64_t received;     /* body bytes from the network */
    uint64_t sealed;       /* bytes in sealed batches (next batch's offset) */
    uint64_t queued_bytes; /* bytes in batches not yet freed */
    batch_t *cur;          /* being filled */
    batch_t *head, *tail;  /* sealed, not yet both hashed and written */
    batch_t *hash_next;    /* first sealed batch not yet given to a hash item */
    batch_t *write_next;   /* same for write items */
    uv_work_t hash_work;
    uv_work_t write_work;
    batch_t *hash_first, *write_first; /* what the item in flight covers */
    int hash_count, write_count;
    sha256_ctx_t sha; /* owned by the hash item in flight, else the loop */
    uint64_t hashed;  /* bytes through sha, from byte 0 */
    int hd_fd;        /* the prefix hash item's (segments): file, range and outcome */
    uint64_t hd_from, hd_len;
    int hd_rc;
    int fd;           /* partial file; owned by the write item in flight */
    int write_err;    /* first write error (negative errno) */
    uint64_t written; /* bytes written, for sync_file_range */
    uint64_t flushed; /* bytes already given to writeback */
    char *etag, *last_modified;
    job_reval_t *reval; /* revalidating a cached entry until a body starts, else NULL */

    /* Crash safety: checkpoints of the partial and resuming one. */
    uint64_t resume_len;  /* a recorded partial's durable bytes, to re-hash first */
    char *resume_ranges;  /* and its finished ranges past them (db.h), or NULL */
    uint64_t resume_keep; /* the bytes its file must hold (the rehash item's copy) */
    char *park_ranges;    /* segmented: the ranges the park item records, or NULL */
    uint64_t ckpt_sum;    /* segmented: bytes written in all, as the checkpoint in flight saw */
    uint64_t durable_sum; /* the same as of the last checkpoint recorded */
    int ckpt_saved;       /* the checkpoint item recorded its row */
    int rehash_rc;        /* outcome of the re-hash item */
    uint64_t durable;     /* bytes fdatasync'ed and recorded (the loop's copy) */
    uint64_t on_disk;     /* bytes written, as of the last write item back */
    uint64_t t_ckpt;      /* uv_now of the last checkpoint started */
    uv_work_t sync_work;  /* the checkpoint item */
    int sync_err;         /* its fdatasync failed (negative errno) */
    db_partial_t ckpt;    /* what its row records (copies), owned by that item */
    uint64_t ckpt_done;   /* what the checkpoint made durable, 0 if it did not */
    atomic_int failed;    /* set with state FAILED: a checkpoint in flight records nothing */

    /* The items at the ends of a job's life (commit.c), one slot each. */
    uv_work_t rehash_work;  /* re-hash a recorded partial before resuming it */
    uv_work_t commit_work;  /* fsync, link, record */
    uv_work_t discard_work; /* a failed job's partial goes */
    uv_work_t park_work;    /* a stopped job's partial is kept to resume */
    int commit_rc;
    int ro_fd;
    char digest[65];

    /* Progress and timing (uv_now milliseconds). */
    uint64_t t_start; /* the request started */
    uint64_t t_body;  /* the last body byte arrived */
    uv_timer_t timer;
    uint64_t last_done;
    uint64_t rate;
    const char *shown_state; /* the state the waiters were last told */
    unsigned shown_attempts; /* and the failed attempts then */
    char retry_reason[160];  /* why the last attempt failed (transfer_error) */
    uint64_t retry_at;       /* uv_now of the next attempt while retrying */
    uint64_t slow_t0;        /* start of the low_speed_time window */
    uint64_t slow_from;      /* received at its start */
};

struct job_hit {
    uv_work_t work;
    jobs_t *js;
    job_waiter_t *w; /* NULL once the waiter left */
    char *url;       /* canonical */
    char sha[65];
    char cred_tag[65];
    uid_t uid; /* who asked: a requester of the entry */
    uint64_t size;
    int by_entry;    /* found through the URL's entry (touch it too) */
    int revalidated; /* the origin said 304: the entry is marked current */
    int fd;
    int rc;
};

/* jobs.c: the front door (hits, single flight, restarted waiters) */
void job_waiter_restart(job_t *job, job_waiter_t *w);

/* sched.c: the queue and the global, per-host and per-uid limits */
unsigned jobs_host_connections(jobs_t *js, const char *host_key);
unsigned jobs_host_queued(jobs_t *js, const char *host_key);
void job_unlist(job_t *job);
void jobs_start_queued(jobs_t *js);
int jobs_uid_at_limit(const jobs_t *js, uid_t uid);
void jobs_enqueue(job_t *job);

/* stats.c: STATS counters and STATUS pages */
void jobs_count_error(jobs_t *js, const char *code);

/* job.c: one job's life: waiters, the request and its head, failure,
 * restart, progress (the retry of an attempt is transfer.c's) */
void job_free(job_t *job);
void job_handle_closed(job_t *job);
void job_waiter_unlink(job_t *job, job_waiter_t *w);
void job_waiter_link(job_t *job, job_waiter_t *w);
void job_notify_all(job_t *job, const job_result_t *res);
void job_notify_written(job_t *job);
int job_too_large(job_t *job, int64_t size);
const char *job_validator(const job_t *job);
void job_restart_from_zero(job_t *job, const char *why);
void job_fail_digest(job_t *job, const char *code, const char *msg, const char *digest);
void job_fail(job_t *job, const char *code, const char *msg);
void job_on_progress_tick(uv_timer_t *t);
void job_adopt_partial(job_t *job);
void job_set_state(job_t *job, job_state_t to);
void job_begin_request(job_t *job);
int job_take_head(job_t *job, int64_t total, int new_validators, const char *etag,
                  const char *last_modified);
void job_body_ended(job_t *job);
int job_new(jobs_t *js, url_t *u, job_waiter_t *w, job_t **out);

/* jobs.c: serves the waiter the cached blob sha of url as a hit (opened
 * in the pool; revalidated: the entry is marked current). The waiter has
 * had its on_start. 0, or -ENOMEM. */
int jobs_serve_cached(jobs_t *js, job_waiter_t *w, const char *url, const char sha[65],
                      uint64_t size, int revalidated);
/* job.c: a revalidation answered 304: every waiter gets the cached file,
 * and the job ends without a download. */
void job_not_modified(job_t *job);

/* pipeline.c: batches, hash and write items, checkpoints */
uint64_t job_space_floor(const struct statvfs *v, uint64_t bytes, unsigned pct);
void job_seal(job_t *job);
void job_add_batch(job_t *job, batch_t *b);
void job_drop_batches(job_t *job);
void job_pump(job_t *job);
void job_take_body(job_t *job, buf_t *buf, const char *p, size_t n);
/* Why a job's reading is paused: the body's way to disk is full
 * (max_inflight), or max_rate is spent. Reading goes on when no reason is
 * left (job_set_pause applies the change to its transfer and lanes). */
enum { PAUSE_BACKPRESSURE = 1u, PAUSE_RATE = 2u };
void job_set_pause(job_t *job, unsigned reason, int on);
/* sched.c: n body bytes came for job: counted against max_rate (and the
 * job paused when it is spent). */
void jobs_rate_take(jobs_t *js, job_t *job, size_t n);
void jobs_rate_init(jobs_t *js);
void jobs_rate_reload(jobs_t *js); /* SIGHUP */
void jobs_rate_close(jobs_t *js);
/* Seals and hands on the job's batches (its own and its lanes') that are
 * pipeline_batch_stale: called every progress tick. */
void job_seal_stale(job_t *job, uint64_t now);

/* The pipeline's decisions, pure functions of their arguments: */
/* Appends n bytes at p, in buf, to b: one iovec with the last one when they
 * follow it in memory. Returns 1 when buf is new to b: the caller takes a
 * reference for it. b must not be full (pipeline_batch_full). */
int pipeline_batch_add(batch_t *b, const buf_t *buf, const char *p, size_t n);
/* Whether b is to be sealed: about read_buffer_size bytes, or no room for
 * another iovec or buffer. */
int pipeline_batch_full(const batch_t *b, size_t read_buffer_size);
/* Whether b (NULL: none) holds bytes that came BATCH_MAX_AGE_MS or more
 * before now: a slow stream's batch, handed on so that its buffers go back
 * to the pool instead of waiting for read_buffer_size bytes. */
int pipeline_batch_stale(const batch_t *b, uint64_t now);
/* Backpressure with hysteresis: stop reading above max_inflight queued
 * bytes, read again at half of it. */
int pipeline_should_pause(uint64_t queued, size_t max_inflight);
int pipeline_should_resume(uint64_t queued, size_t max_inflight);
/* A checkpoint is due: bytes on disk not yet durable, and CHECKPOINT_BYTES
 * of them or CHECKPOINT_MS since the last one (now, t_ckpt: uv_now). */
int pipeline_checkpoint_due(uint64_t on_disk, uint64_t durable, uint64_t now, uint64_t t_ckpt);
/* Start writeback of what was written since `flushed`: every WRITEBACK_CHUNK. */
int pipeline_writeback_due(uint64_t written, uint64_t flushed);
/* Hands the sealed batches from *next on (at most WORK_MAX_BATCHES) to one
 * work item: *first is its first, *next moves past its last. Returns how many. */
int pipeline_take_batches(batch_t **next, batch_t **first);
/* The room a write item needs: its count batches from first, or the rest of
 * a file of total bytes from first's offset when that is more. */
uint64_t pipeline_room_wanted(const batch_t *first, int count, int64_t total);
extern const char job_short_of_space_msg[];

/* commit.c: the commit, discard, park and rehash items */
void job_start_commit(job_t *job);
void job_cleanup(job_t *job);
void job_start_rehash(job_t *job);
int job_hash_file(int fd, uint64_t from, uint64_t len, sha256_ctx_t *sha);

/* evict.c: the eviction coordinator */
void jobs_drop_oversized(jobs_t *js, const char *sha, uint64_t size);
void jobs_evict_run(jobs_t *js, const char *keep, int force);

#endif
