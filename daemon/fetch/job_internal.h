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
#include "bgwork.h"
#include "bufpool.h"
#include "http.h"
#include "sha256.h"
#include "url.h"
#include "verifier.h"
#include "cache.h"
#include "disposition.h"
#include "pipeline.h"
#include "transfer.h"
#include "segments.h"

#include <stdint.h>

#define PROGRESS_INTERVAL_MS 100 /* PROGRESS at most 10 per second */
#define COMMIT_GROUP_MAX 256     /* jobs in one group commit (one transaction; commit.c) */

/* The states of a job. Every change goes through job_set_state(), which
 * checks it against the table in job.c (each row says why it is allowed).
 *
 *   QUEUED --slot free--> RESUMING --partial re-hashed--> CONNECTING
 *   QUEUED --slot free, nothing to resume----------------> CONNECTING
 *   QUEUED --slot free, the cluster swarm takes it-------> SWARM
 *   SWARM --every byte in: re-hash the whole file--> RESUMING
 *   SWARM --the swarm cannot bring it--------------> CONNECTING (from byte 0)
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
    JOB_SWARM,      /* other nodes of the cluster bring its bytes (swarm.c) */
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
    JOB_PAUSED = 1u << 2,     /* reading stopped (job->pause says why) */
    JOB_SHORT_WAIT = 1u << 3, /* short of room: waiting for an eviction run (short_runs) */
    JOB_LET_RUN = 1u << 4,    /* a waiter hung up (jobs_cancel): it goes on for the cache, and
                                 an INTERRUPT of the others does not stop it */
    JOB_PARK = 1u << 5,       /* stopped (shutdown, INTERRUPT): the partial is kept to resume */
    JOB_CLEANING = 1u << 6,   /* the discard or park item started (or the job went) */
    JOB_SLOT_FREED = 1u << 7, /* in js->active, committing: holds no slot (jobs_release_slot) */
};

/* job->items: the job's own pool items in flight (the pipeline's are
 * job->pipe.items), one bit per work slot (commit.c). */
enum {
    JOB_ITEM_REHASH = 1u << 3, /* rehash_work: owns pipe.sha and pipe.fd */
    JOB_ITEM_COMMIT = 1u << 4, /* commit_work: owns pipe.sha and pipe.fd */
};

/* Why a job's reading is paused: the body's way to disk is full
 * (max_inflight), or max_rate is spent. Reading goes on when no reason is
 * left (job_set_pause applies the change to its transfer and lanes). */
enum { PAUSE_BACKPRESSURE = 1u, PAUSE_RATE = 2u };

struct jobs {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    store_t *store;
    db_t *db;
    bufpool_t pool;
    http_client_t *http;
    list_t active;        /* jobs past QUEUED and not finished, newest first (job_t.node) */
    unsigned slots_freed; /* of them, committing ones that hold no slot (JOB_SLOT_FREED) */
    list_t all;           /* every job not yet freed, failed ones too (job_t.all_node) */
    list_t queue;         /* QUEUED jobs, oldest first (job_t.node) */
    uint64_t next_id;
    worktrack_t work; /* jobs, hits and pool items a shutdown waits for */
    jobs_stats_t stats;
    /* Bytes served per uid (jobs_count_served): open addressing, linear
     * probing, grown at half full up to JOBS_SERVED_UIDS slots' worth of
     * uids; a uid past that counts in stats.bytes_served only. */
    struct jobs_served *served;
    unsigned served_cap, served_n;   /* slots (a power of two, or 0), uids in them */
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
    /* Hits served on the loop (jobs.c), answered on the loop's next turn
     * (the idle handle runs then): never inside the FETCH that asked. */
    uv_idle_t hits_idle;
    list_t hits_ready; /* job_hit_t by ready_node, in the order served */
    int hits_closed;   /* the idle handle is closed (jobs_stop): hits go to the pool */
    /* Hits' uses, queued by db_touch, written every second (uses.c). */
    uv_timer_t uses_timer;
    uv_work_t uses_work;
    int uses_out;    /* the write is in the pool */
    int uses_again;  /* asked for while one was out: another when it is back */
    int uses_closed; /* the timer was closed (jobs_stop) */
    int shutting_down;
    int starting_queued; /* inside jobs_start_queued: do not re-enter */
    int start_again;     /* jobs_start_queued was asked again meanwhile */
    /* Eviction: one item at a time, on the background thread (bgwork.h);
     * asked again while busy, it runs again. */
    bgwork_t *bg;
    bgwork_item_t evict_item;
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
    uint64_t evict_fs_size; /* the item's finding: the file system's size (0: unknown) */
    /* The periodic check of the holds' links (holdcheck.c). */
    uv_timer_t holdcheck_timer;
    bgwork_item_t holdcheck_item;
    unsigned holdcheck_ms; /* the timer's interval now (0: stopped) */
    int holdcheck_out;     /* the item is queued or running */
    int holdcheck_dropped; /* the item's finding: holds dropped, or a negative errno */
    int holdcheck_closed;  /* the timer was closed (jobs_stop) */
    /* Group commit (commit.c): ready jobs wait here while a group item is
     * out; the next group takes them all, at most COMMIT_GROUP_MAX (one
     * group is out at a time: its slot is here, nothing to allocate). */
    list_t commit_queue;
    int commit_group_out;
    uv_work_t commit_group_work;
    size_t commit_group_n;
    int commit_group_syncfs; /* the group item's names went durable by one syncfs */
    job_t *commit_group[COMMIT_GROUP_MAX];
    uint64_t fs_size; /* the cache's file system's size: at start-up, then each run's */
    char evict_keep[65], next_keep[65];
    cache_evict_result_t evict_res;
    int evict_rc;
    jobs_gc_t *gc; /* the admin's GC out (evict.c: waits for the run, then in the pool), or NULL */
    void (*shutdown_cb)(void *);
    void *shutdown_arg;
    /* How the layers below report up (set by jobs_new; never called by
     * name from below): an eviction run is back (evict.c), the max_rate
     * bucket refilled (sched.c), a waiter to go on in a job of its own and
     * the waiters of a revalidation the origin answered 304 (job.c asks the
     * front door). */
    void (*after_evict)(jobs_t *js);
    void (*rate_refilled)(jobs_t *js);
    void (*restart_waiter)(job_t *job, job_waiter_t *w);
    void (*not_modified)(job_t *job); /* a revalidation's 304: the waiters get the cache's */
    /* The cluster swarm's hooks (job.h), or NULL; and how swarm.c hands a
     * job back to job.c: re-hash the partial it filled (code NULL), fetch
     * from the origin (code NULL, origin set), or fail with code. */
    const jobs_swarm_ops_t *swarm;
    void *swarm_arg;
    void (*swarm_back)(job_t *job, int origin, const char *code, const char *msg);
};

struct job {
    jobs_t *js;
    uint64_t id;
    uint64_t part_id;       /* its partial is tmp/<part_id>.part and partials row part_id */
    job_state_t state;      /* only job_set_state() changes it */
    unsigned flags;         /* JOB_IN_QUEUE etc.: the loop's sub-states */
    unsigned pause;         /* PAUSE_*: why reading is paused (JOB_PAUSED: any) */
    unsigned items;         /* JOB_ITEM_*: its own pool items in flight */
    char *key;              /* canonical URL asked for: the dedup and cache key */
    char *host_key;         /* "host:port" of key, for max_per_host */
    char *cred_headers;     /* the client's "Name: value\r\n" lines: sent only to the origin
                               of the URL asked for (transfer_start checks every hop) */
    transfer_file_t file;   /* what its transfers ask for: key, cred_headers, the length,
                               validators and reval (owned here) */
    transfer_t xfer;        /* its main transfer: the HTTP exchange for the bytes it lacks */
    pipeline_t pipe;        /* its body's way to disk */
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
    char vouched[65];  /* created by a vouched request (job.h): the digest its origin named to
                          those credentials, which vouched requests of others may join; or "" */
    uid_t owner;       /* the uid whose request created it */
    list_t waiters;    /* job_waiter_t.node, the newest first */
    unsigned nwaiters;
    list_node_t node;     /* in js->active or js->queue */
    list_node_t all_node; /* in js->all */
    uint64_t short_runs;  /* the eviction run that must complete before giving up */

    /* Crash safety: resuming a recorded partial, parking one. */
    uint64_t resume_len;  /* a recorded partial's durable bytes, to re-hash first */
    char *resume_ranges;  /* and its finished ranges past them (db.h), or NULL */
    uint64_t resume_keep; /* the bytes its file must hold (the rehash item's copy) */
    int rehash_rc;        /* outcome of the re-hash item */
    int rehash_fd;        /* and the partial it opened */
    char *park_ranges;    /* segmented: the ranges the park item records, or NULL */
    uint64_t parked;      /* the bytes the park item kept durable (0: none) */

    /* The items at the ends of a job's life (commit.c), one slot each. */
    uv_work_t rehash_work;  /* re-hash a recorded partial before resuming it */
    uv_work_t commit_work;  /* fsync, link, record */
    uv_work_t discard_work; /* a failed job's partial goes */
    uv_work_t park_work;    /* a stopped job's partial is kept to resume */
    int commit_rc;
    int ro_fd;
    char digest[65];
    /* The group commit (commit.c): after its own item (fsync), a job waits
     * in js->commit_queue for the group item that links and records it
     * with others; commit_after is job.c's callback for either outcome. */
    uv_after_work_cb commit_after;
    list_node_t commit_node; /* in js->commit_queue */
    int commit_digested;     /* job->digest holds the hash's final (sha is spent) */
    int commit_ready;        /* the group item links and records it */
    int commit_unsynced;     /* a small file not yet fsync'ed: the group's syncfs does */
    int commit_created;      /* the group item's: its blob's name is new, */
    int commit_new_dir;      /* and so is its two-letter folder */

    /* Progress and timing (uv_now milliseconds). */
    uint64_t t_start; /* the request started */
    /* The limits a reload could lower, as they were when it went active:
     * a SIGHUP applies them to downloads that start after it, never kills
     * one already running (a lowered max_file_size would fail it at its
     * next body byte, a shorter deadline at its next tick). */
    uint64_t max_file_size;
    unsigned deadline_ms;
    uint64_t t_body; /* the last body byte arrived */
    uv_timer_t timer;
    uint64_t last_done;
    uint64_t rate;
    const char *shown_state; /* the state the waiters were last told */
    unsigned shown_attempts; /* and the failed attempts then */
    char retry_reason[160];  /* why the last attempt failed */
    uint64_t retry_at;       /* uv_now of the next attempt while retrying */
    uint64_t slow_t0;        /* start of the low_speed_time window */
    uint64_t slow_from;      /* received at its start */

    /* The cluster swarm (swarm.c). */
    char swarm_sha[65]; /* the digest its first request expected: what the swarm knows it by */
    int swarm_held;     /* the swarm brings its bytes (jobs_swarm_ops_t owns it) */
    int swarm_sized;    /* the swarm made its partial */
    int swarm_brought;  /* its bytes are the swarm's (a mismatch goes to the origin) */
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
    int rec_known;   /* rec was read by the look-up that found the blob */
    db_blob_stat_t rec;
    int fd;
    int rc;
    list_node_t ready_node; /* in js->hits_ready: served on the loop, answered next turn */
};

/* The validator for If-Range (transfer_file_validator). */
static inline const char *job_validator(const job_t *job)
{
    return transfer_file_validator(&job->file);
}

/* sched.c: the queue and the global, per-host and per-uid limits. A layer
 * below job.c: it reports up only through jobs_t's callbacks. */
unsigned jobs_host_connections(jobs_t *js, const char *host_key);
/* Every download's connections to host_key, and the queued downloads that
 * wait for nothing but a connection to it (segplan_may_connect). */
void jobs_host_load(jobs_t *js, const char *host_key, unsigned *conns, unsigned *waiting);
void job_unlist(job_t *job);
/* The oldest queued job the global, per-host and per-user limits let
 * start now, taken off the queue; NULL when none. */
job_t *jobs_next_startable(jobs_t *js);
int jobs_uid_at_limit(const jobs_t *js, uid_t uid);
void jobs_enqueue(job_t *job);
/* A job taken off the queue goes into js->active. */
void jobs_mark_active(job_t *job);
/* Its bytes are all in and its connections gone (it commits): it stays in
 * js->active but no longer counts against max_downloads, max_per_host or
 * its user's max_jobs_per_user (the caller then starts what may start). */
void jobs_release_slot(job_t *job);
/* A job the swarm gave back to the origin counts against the limits again
 * (at once, past them if need be: it was started once already). */
void jobs_retake_slot(job_t *job);
/* n body bytes came for a job: counted against max_rate. Returns 1 when
 * the bucket is spent: the job is to pause (PAUSE_RATE) until
 * js->rate_refilled is called; -1 when max_rate is off (a pause for it is
 * lifted); 0 otherwise. */
int jobs_rate_take(jobs_t *js, size_t n);
void jobs_rate_init(jobs_t *js);
void jobs_rate_reload(jobs_t *js); /* SIGHUP */
void jobs_rate_close(jobs_t *js);

/* holdcheck.c: holds whose links are gone dropped every hold_check_interval,
 * on the background thread; reload re-arms the timer. */
void jobs_holdcheck_init(jobs_t *js);
void jobs_holdcheck_reload(jobs_t *js);
void jobs_holdcheck_close(jobs_t *js);

/* uses.c: the hits' uses (db_touch) written every second, in the pool. */
void jobs_uses_init(jobs_t *js);
void jobs_uses_close(jobs_t *js);
/* The queued uses written in the pool now (one write out at a time: asked
 * meanwhile, another follows it). */
void jobs_uses_write(jobs_t *js);

/* stats.c: STATS counters and STATUS pages */
void jobs_count_error(jobs_t *js, const char *code);
/* bytes handed to uid (a hit, a download's waiter): STATS bytes_served and
 * the uid's share of it. */
void jobs_count_served(jobs_t *js, uid_t uid, uint64_t bytes);
struct jobs_served {
    uid_t uid;
    int used;
    uint64_t bytes;
};

/* waiters.c: a job's waiters and what they are told */
void job_waiter_unlink(job_t *job, job_waiter_t *w);
void job_waiter_link(job_t *job, job_waiter_t *w);
void job_notify_all(job_t *job, const job_result_t *res);
void job_notify_written(job_t *job);
/* A failure (code) of a job a vouched request started: its vouched waiters
 * of other credentials go on alone (js->restart_waiter), unless the code
 * is everyone's (hash_mismatch, cancelled, shutting_down). */
void job_restart_vouched(job_t *job, const char *code);
/* The progress tick's report (the rate, and the waiters told when the
 * bytes grew or the state changed). */
void job_tell_progress(job_t *job, uint64_t now);
/* What the commit item keeps and records, from the waiters now: it reads
 * these, the loop does not touch them while it runs. */
void job_collect_waiters(job_t *job);

/* job_state.c: the transition table; the one place a job's state changes.
 * A refused transition is a bug: said in the log (fatal in a debug build),
 * and the job keeps its state. */
void job_set_state(job_t *job, job_state_t to);

/* job.c: one job's life, the one place that decides it: its creation and
 * start, the state table, what its transfer, lanes, pipeline and pool items
 * report, the retry of an attempt, failure, restart from byte 0, the
 * commit, discard and park, and its end. */
void job_fail(job_t *job, const char *code, const char *msg);
/* Reading stops or goes on for reason (PAUSE_*): applied to its transfer
 * and lanes when the set of reasons becomes empty or not. */
void job_set_pause(job_t *job, unsigned reason, int on);
/* What a job's main transfer and pipeline report to (jobs.c makes jobs
 * with them). */
extern const transfer_cbs_t job_xfer_cbs;
extern const pipeline_ops_t job_pipe_ops;
/* Moves the job on: cleans up a failed one, restarts a restarting one once
 * idle, moves the pipeline, checkpoints, hands chunks out, and starts the
 * commit once the body is all on disk and hashed. */
void job_step(job_t *job);
/* Starts queued jobs while the limits allow (sched.c picks them). */
void jobs_start_queued(jobs_t *js);
/* The reports of the layers below (jobs_t's callbacks, set by jobs_new). */
void job_after_evict(jobs_t *js);
void job_rate_refilled(jobs_t *js);

/* swarm.c: the cluster swarm's side of a job, a layer below job.c (it
 * reports back through js->swarm_back). job_swarm_take: whether the swarm
 * takes a job going active (then it is in JOB_SWARM); job_swarm_end: the
 * job ended (failed), the swarm is told if it held it;
 * job_swarm_committed: a download was committed. */
int job_swarm_take(job_t *job);
void job_swarm_end(job_t *job);
void job_swarm_committed(job_t *job, const char *path, uint64_t size);
/* job.c's js->swarm_back. */
void job_swarm_back(job_t *job, int origin, const char *code, const char *msg);

/* commit.c: the pool items at the ends of a job's life. Each reports back
 * by its completion callback (job.c's), never by calling up. */
void job_commit_queue(job_t *job, uv_after_work_cb after);
void job_rehash_queue(job_t *job, uv_after_work_cb after);
void job_discard_queue(job_t *job, uv_after_work_cb after);
void job_park_queue(job_t *job, uv_after_work_cb after);

/* evict.c: the eviction coordinator (reports through js->after_evict) */
void jobs_drop_oversized(jobs_t *js, const char *sha, uint64_t size);
void jobs_evict_run(jobs_t *js, const char *keep, int force);
/* The cache's file system's size, for jobs_length_refused: at start-up
 * (the loop does not run yet), then from each eviction run. */
void jobs_fs_size_init(jobs_t *js);
/* disposition_length against max_file_size (the job's: job_t), the file
 * system's size and the floor kept free there: NULL, or the code with msg
 * set. No I/O: the loop judges a length the moment a head announces it. */
const char *jobs_length_refused(const jobs_t *js, uint64_t max_file_size, uint64_t length,
                                int announced, char *msg, size_t len);

#endif
