/* job: the download state machine, the hash/write pipeline, and the commit.
 *
 *   QUEUED --slot free--> CONNECTING --headers 2xx--> BODY --body complete-->
 *   COMMITTING --blob and row durable--> (DONE: waiters told, job freed)
 *   CONNECTING --3xx with Location--> CONNECTING (next hop, same job)
 *   any state --error--> FAILED (waiters told now; freed once pool work is back)
 *
 * Body pipeline. Body slices point into pooled read buffers (bufpool.h); they
 * are grouped into batches of about read_buffer_size. Each batch goes through
 * two work items in the pool: a hash item (SHA-256, sequential, owns job->sha)
 * and a write item (pwritev at the batch's offset, owns job->fd). At most one
 * hash item and one write item per job are in flight, so neither needs a
 * lock, and the two run on different cores: measured on the project machine,
 * hashing (~1.8 GB/s with SHA-NI) and page-cache writes cost about the same,
 * so doing both in one item would halve the throughput. A batch is freed when
 * both have seen it. Above max_inflight queued bytes the job stops reading. */
#include "job.h"
#include "bufpool.h"
#include "cache.h"
#include "http.h"
#include "log.h"
#include "sha256.h"
#include "url.h"
#include "verifier.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BATCH_MAX_IOV 64
#define WORK_MAX_BATCHES 32        /* batches one work item takes at most */
#define PROGRESS_INTERVAL_MS 100   /* PROGRESS at most 10 per second */
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

typedef enum {
    JOB_QUEUED,
    JOB_RESUMING,   /* re-hashing a recorded partial before asking for the rest */
    JOB_CONNECTING, /* request sent or being sent, no final status yet */
    JOB_BODY,
    JOB_RETRY_WAIT, /* a transient failure: waiting to try again (resuming) */
    JOB_COMMITTING,
    JOB_DONE,
    JOB_FAILED,
} job_state_t;

static const char *const state_names[] = {"queued",   "resuming",   "connecting", "body",
                                          "retrying", "committing", "done",       "failed"};

typedef struct batch {
    struct batch *next;
    uint64_t offset; /* file offset of the first byte */
    size_t bytes;    /* sum of iov lengths */
    int niov, nbufs;
    struct iovec iov[BATCH_MAX_IOV];
    buf_t *bufs[BATCH_MAX_IOV]; /* one reference each */
    int hashed, written;        /* pipeline stages done */
} batch_t;

struct jobs {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    store_t *store;
    db_t *db;
    bufpool_t pool;
    http_client_t *http;
    job_t *active;     /* jobs past QUEUED and not finished, newest first */
    job_t *all;        /* every job not yet freed, failed ones too */
    job_t *queue_head; /* QUEUED jobs, oldest first */
    job_t *queue_tail;
    uint64_t next_id;
    worktrack_t work; /* jobs, hits and pool items a shutdown waits for */
    jobs_stats_t stats;
    cred_secret_t secret; /* keys credential tags */
    verifier_t *verifier; /* background re-verification, NULL once stopped */
    int shutting_down;
    int http_closing;    /* http_client_close called: js goes in its callback */
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
    uint64_t part_id; /* its partial is tmp/<part_id>.part and partials row part_id */
    job_state_t state;
    char *key;      /* canonical URL asked for: the dedup and cache key */
    char *host_key; /* "host:port" of key, for max_per_host */
    url_t url;      /* current hop */
    unsigned redirects;
    char *redirect_to;       /* Location of a 3xx being drained */
    char *cred_headers;      /* the client's "Name: value\r\n" lines: sent only to the origin
                                of the URL asked for (job_begin_request checks every hop) */
    int http_status;         /* an error status whose body is being drained */
    unsigned retry_after_ms; /* Retry-After of that status, 0 if none */
    unsigned attempts;       /* failed attempts so far */
    uint64_t resume_from;    /* Range start of the request in flight (0: whole) */
    int restart_pending;     /* discard what we have and start again at byte 0 */
    int truncate_file;       /* the next write item empties the partial first */
    uv_timer_t retry_timer;  /* backoff before the next attempt; a failed start's report */
    const char *begin_code;  /* why the request could not start (on_begin_failed) */
    char begin_msg[400];
    int handles_open; /* timers not yet closed */
    /* What the commit keeps: set on the loop when the commit starts, from
     * the waiters then, read by the commit item. A download is committed
     * (under its real digest) when any waiter takes it: one without an
     * expected digest, or one whose digest it has; or when none is left. */
    int accept_any;
    char (*accepts)[65]; /* the waiters' expected digests otherwise */
    size_t naccepts;
    uid_t *uids; /* the entry's requesters: the owner and the waiters' uids */
    size_t nuids;
    char cred_tag[65];     /* its credentials' tag: entries and partials are keyed by it */
    uid_t owner;           /* the uid whose request created it */
    http_req_t *req;       /* in flight, or NULL */
    job_waiter_t *waiters; /* doubly linked */
    unsigned nwaiters;
    job_t *next, *prev;         /* in active list or queue */
    job_t *all_next, *all_prev; /* in js->all */
    int in_active, in_queue;

    /* Body pipeline. */
    int64_t total;       /* Content-Length, -1 unknown */
    int64_t total_hint;  /* total as of the last work submission: the write item's copy */
    uint64_t floor_hint; /* min_free_space then (the write item's copy) */
    unsigned floor_pct_hint;
    int space_short;       /* the write item found the floor would be crossed */
    int short_wait;        /* eviction was asked for room: waiting for a run */
    uint64_t short_runs;   /* the run that must complete before giving up */
    uint64_t received;     /* body bytes from the network */
    uint64_t sealed;       /* bytes in sealed batches (next batch's offset) */
    uint64_t queued_bytes; /* bytes in batches not yet freed */
    int paused;            /* reading stopped for backpressure */
    int body_done;         /* the response ended well */
    batch_t *cur;          /* being filled */
    batch_t *head, *tail;  /* sealed, not yet both hashed and written */
    batch_t *hash_next;    /* first sealed batch not yet given to a hash item */
    batch_t *write_next;   /* same for write items */
    uv_work_t hash_work;
    uv_work_t write_work;
    batch_t *hash_first, *write_first; /* what the item in flight covers */
    int hash_count, write_count;
    int hash_busy, write_busy;
    int commit_busy;  /* the commit item is in flight: it owns sha and fd */
    sha256_ctx_t sha; /* owned by the hash item in flight, else the loop */
    int fd;           /* partial file; owned by the write item in flight */
    int tmp_made;     /* a write item has run: tmp/<id>.part may exist */
    int write_err;    /* first write error (negative errno) */
    uint64_t written; /* bytes written, for sync_file_range */
    uint64_t flushed; /* bytes already given to writeback */
    char *etag, *last_modified;

    /* Crash safety: checkpoints of the partial and resuming one. */
    uint64_t resume_len; /* a recorded partial's durable bytes, to re-hash first */
    int rehash_rc;       /* outcome of the re-hash item */
    uint64_t durable;    /* bytes fdatasync'ed and recorded (the loop's copy) */
    uint64_t on_disk;    /* bytes written, as of the last write item back */
    uint64_t t_ckpt;     /* uv_now of the last checkpoint started */
    uv_work_t sync_work; /* the checkpoint item */
    int sync_busy;       /* it is in flight (it uses fd beside the write item) */
    int sync_err;        /* its fdatasync failed (negative errno) */
    db_partial_t ckpt;   /* what its row records (copies), owned by that item */
    uint64_t ckpt_done;  /* what the checkpoint made durable, 0 if it did not */
    int park;            /* on failure keep the partial for a later fetch (shutdown) */
    atomic_int failed;   /* set with state FAILED: a checkpoint in flight records nothing */

    /* Commit. */
    uv_work_t commit_work;
    int commit_rc;
    int ro_fd;
    char digest[65];
    int cleanup_queued; /* the discard work item was started */

    /* Progress and timing (uv_now milliseconds). */
    uint64_t t_start; /* the request started */
    uint64_t t_body;  /* the last body byte arrived */
    uv_timer_t timer;
    uint64_t last_done;
    uint64_t rate;
    uint64_t slow_t0;   /* start of the low_speed_time window */
    uint64_t slow_from; /* received at its start */
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
    int by_entry; /* found through the URL's entry (touch it too) */
    int fd;
    int rc;
};

static void job_fail(job_t *job, const char *code, const char *msg);
static void job_fail_digest(job_t *job, const char *code, const char *msg, const char *digest);
static void waiter_restart(job_t *job, job_waiter_t *w);
static void job_pump(job_t *job);
static void jobs_start_queued(jobs_t *js);
static void job_begin_request(job_t *job);
static void job_error(job_t *job, const char *code, const char *msg);
static void job_restart_from_zero(job_t *job, const char *why);
static void job_start_rehash(job_t *job);
static void jobs_drop_oversized(jobs_t *js, const char *sha, uint64_t size);
static void jobs_evict_run(jobs_t *js, const char *keep, int force);

/* ---- life and lists ------------------------------------------------------ */

/* Last step of a shutdown: the HTTP client's connections hold read buffers,
 * so the pool goes only after the client is gone. */
static void on_http_closed(void *arg)
{
    jobs_t *js = arg;
    void (*cb)(void *) = js->shutdown_cb;
    void *cb_arg = js->shutdown_arg;
    bufpool_destroy(&js->pool);
    free(js);
    if (cb)
        cb(cb_arg);
}

/* Everything in flight has gone after jobs_shutdown: the HTTP client goes
 * next, then js. */
static void on_jobs_drained(void *arg)
{
    jobs_t *js = arg;
    js->http_closing = 1;
    http_client_close(js->http, on_http_closed, js);
}

static void jobs_release(jobs_t *js)
{
    worktrack_release(&js->work);
}

static void job_on_timer_closed(uv_handle_t *h)
{
    job_t *job = h->data;
    if (--job->handles_open > 0)
        return;
    jobs_t *js = job->js;
    if (job->all_prev)
        job->all_prev->all_next = job->all_next;
    else
        js->all = job->all_next;
    if (job->all_next)
        job->all_next->all_prev = job->all_prev;
    db_partial_free(&job->ckpt);
    url_free(&job->url);
    free(job->accepts);
    free(job->uids);
    free(job->key);
    free(job->host_key);
    free(job->redirect_to);
    free(job->cred_headers);
    free(job->etag);
    free(job->last_modified);
    free(job);
    jobs_release(js);
}

static void job_free(job_t *job)
{
    assert(!job->hash_busy && !job->write_busy && !job->sync_busy && !job->commit_busy &&
           !job->req && !job->waiters);
    uv_close((uv_handle_t *)&job->timer, job_on_timer_closed);
    uv_close((uv_handle_t *)&job->retry_timer, job_on_timer_closed);
}

static void list_remove(job_t **head, job_t **tail, job_t *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        *head = job->next;
    if (job->next)
        job->next->prev = job->prev;
    else if (tail)
        *tail = job->prev;
    job->next = job->prev = NULL;
}

/* Off the table: new fetches of this URL no longer find the job. */
static void job_unlist(job_t *job)
{
    jobs_t *js = job->js;
    if (job->in_active) {
        list_remove(&js->active, NULL, job);
        job->in_active = 0;
        js->stats.active--;
    }
    if (job->in_queue) {
        list_remove(&js->queue_head, &js->queue_tail, job);
        job->in_queue = 0;
        js->stats.queued--;
    }
}

static void waiter_unlink(job_t *job, job_waiter_t *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        job->waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
    w->job = NULL;
    job->nwaiters--;
}

static void waiter_link(job_t *job, job_waiter_t *w)
{
    w->job = job;
    w->prev = NULL;
    w->next = job->waiters;
    if (job->waiters)
        job->waiters->prev = w;
    job->waiters = w;
    job->nwaiters++;
}

static const char *const error_codes[JOBS_NERROR_CODES] = {JOBS_ERROR_CODES};

const char *jobs_error_code_name(unsigned i)
{
    return i < JOBS_NERROR_CODES ? error_codes[i] : NULL;
}

static void count_error(jobs_t *js, const char *code)
{
    unsigned i = 0;
    js->stats.errors++;
    if (strncmp(code, "http_4", 6) == 0)
        code = "http_4xx";
    else if (strncmp(code, "http_5", 6) == 0)
        code = "http_5xx";
    while (i < JOBS_NERROR_CODES - 1 && strcmp(error_codes[i], code) != 0)
        i++;
    js->stats.errors_by_code[i]++;
}

/* Tells every waiter the outcome and detaches them. Each waiter with its own
 * expected digest is checked here: waiters of one URL may expect different
 * digests, and each hears about its own (a hash_mismatch result carries the
 * digest the download had in sha256). */
static void job_notify_all(job_t *job, const job_result_t *res)
{
    jobs_t *js = job->js;
    while (job->waiters) {
        job_waiter_t *w = job->waiters;
        waiter_unlink(job, w);
        job_result_t r = *res;
        r.kind = w->kind;
        char msg[200];
        int mismatch = res->err_code ? strcmp(res->err_code, "hash_mismatch") == 0
                                     : w->expected[0] && strcmp(w->expected, res->sha256) != 0;
        if (mismatch && w->expected[0] && res->sha256) {
            snprintf(msg, sizeof msg, "expected sha256 %s, got %s", w->expected, res->sha256);
            r.err_code = "hash_mismatch";
            r.err_msg = msg;
        }
        if (r.err_code)
            count_error(js, r.err_code);
        else
            js->stats.bytes_served += r.size;
        w->on_finish(w, &r);
    }
}

/* ---- pool work: hash, write, commit, discard ---------------------------- */

static void hash_work(uv_work_t *req)
{
    job_t *job = req->data;
    batch_t *b = job->hash_first;
    for (int i = 0; i < job->hash_count; i++) {
        for (int k = 0; k < b->niov; k++)
            sha256_update(&job->sha, b->iov[k].iov_base, b->iov[k].iov_len);
        /* Not past the last one: the loop thread may be linking a new tail. */
        if (i + 1 < job->hash_count)
            b = b->next;
    }
}

/* The free-space floor of a file system: min_free_space, or its share. */
static uint64_t space_floor(const struct statvfs *v, uint64_t bytes, unsigned pct)
{
    return pct ? (uint64_t)v->f_blocks * v->f_frsize / 100 * pct : bytes;
}

static int write_batch(int fd, batch_t *b)
{
    struct iovec iov[BATCH_MAX_IOV];
    memcpy(iov, b->iov, sizeof(struct iovec) * (size_t)b->niov);
    struct iovec *v = iov;
    int n = b->niov;
    off_t off = (off_t)b->offset;
    while (n > 0) {
        ssize_t w = pwritev(fd, v, n, off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        off += w;
        /* Short write: skip what went out and go on with the rest. */
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static void write_work(uv_work_t *req)
{
    job_t *job = req->data;
    if (job->write_err)
        return;
    if (job->fd < 0) {
        int rc = store_tmp_create(job->js->store, job->part_id, &job->fd);
        if (rc) {
            job->write_err = rc;
            return;
        }
    }
    /* Room: after this item (and, the length known, after the rest of the
     * download) the file system must keep min_free_space (or just not be
     * full). Only flagged: the loop asks eviction for room first, and
     * fails the job if a run that started later could not make it; so a
     * download that cannot fit fails before writing most of it, and one
     * that can is not failed while eviction is still freeing room. */
    struct statvfs v;
    job->space_short = 0;
    if (fstatvfs(job->fd, &v) == 0) {
        uint64_t want = 0;
        batch_t *c = job->write_first;
        for (int i = 0; i < job->write_count; i++, c = i < job->write_count ? c->next : c)
            want += c->bytes;
        if (job->total_hint >= 0 && (uint64_t)job->total_hint > job->write_first->offset + want)
            want = (uint64_t)job->total_hint - job->write_first->offset;
        job->space_short = (uint64_t)v.f_bavail * v.f_frsize <
                           space_floor(&v, job->floor_hint, job->floor_pct_hint) + want;
    }
    if (job->truncate_file) { /* a restart from byte 0: drop the old bytes */
        job->truncate_file = 0;
        if (ftruncate(job->fd, 0)) {
            job->write_err = -errno;
            return;
        }
        db_forget_partial(job->js->db, job->part_id); /* it described those */
    }
    batch_t *b = job->write_first;
    for (int i = 0; i < job->write_count; i++) {
        int rc = write_batch(job->fd, b);
        if (rc) {
            job->write_err = rc;
            return;
        }
        job->written = b->offset + b->bytes;
        if (i + 1 < job->write_count) /* as in hash_work */
            b = b->next;
    }
    /* Start writeback now, so the fsync at commit finds little left to do
     * and the disk works while the network does. Advisory: errors ignored. */
    if (job->written - job->flushed >= WRITEBACK_CHUNK) {
        sync_file_range(job->fd, (off_t)job->flushed, (off_t)(job->written - job->flushed),
                        SYNC_FILE_RANGE_WRITE);
        job->flushed = job->written;
    }
}

/* The checkpoint item. It runs beside the write item on the same fd (never
 * closed or truncated while it is in flight): fdatasync makes durable at
 * least the ckpt.durable bytes written before it started. Data first, then
 * the row: the row never promises bytes that a crash could take back. */
static void sync_work(uv_work_t *req)
{
    job_t *job = req->data;
    if (fdatasync(job->fd)) {
        job->sync_err = -errno; /* pages may be lost: the download is not sound */
        return;
    }
    /* A job that failed meanwhile may already have a successor for its
     * URL: its row must not push the successor's aside. */
    if (!atomic_load(&job->failed) &&
        db_save_partial(job->js->db, job->part_id, job->key, job->cred_tag, &job->ckpt) == 0)
        job->ckpt_done = job->ckpt.durable;
}

/* Reads back the first len bytes of the partial into the hash. */
static int hash_file(int fd, uint64_t len, sha256_ctx_t *sha)
{
    uint8_t *buf = malloc(REHASH_CHUNK);
    if (!buf)
        return -ENOMEM;
    posix_fadvise(fd, 0, (off_t)len, POSIX_FADV_SEQUENTIAL);
    uint64_t off = 0;
    int rc = 0;
    while (off < len) {
        size_t want = len - off < REHASH_CHUNK ? (size_t)(len - off) : REHASH_CHUNK;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -ESTALE;
            break;
        }
        sha256_update(sha, buf, (size_t)n);
        off += (uint64_t)n;
    }
    free(buf);
    return rc;
}

/* Owns sha and fd (it stands for both the hash and the write item). */
static void rehash_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    int fd = -1;
    int rc = store_tmp_reopen(js->store, job->part_id, job->resume_len, &fd);
    if (!rc)
        rc = hash_file(fd, job->resume_len, &job->sha);
    if (rc) {
        if (fd >= 0)
            close(fd);
        db_forget_partial(js->db, job->part_id); /* what it described is not there */
        job->rehash_rc = rc;
        return;
    }
    job->fd = fd;
    job->written = job->flushed = job->resume_len;
}

static void commit_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    uint8_t digest[32];
    sha256_final(&job->sha, digest);
    sha256_hex(digest, job->digest);
    job->ro_fd = -1;
    int wanted = job->accept_any;
    for (size_t i = 0; !wanted && i < job->naccepts; i++)
        wanted = strcmp(job->accepts[i], job->digest) == 0;
    if (!wanted) {
        /* Every waiter expected other bytes. The partial (and its row) go
         * too: resuming it would only give the same bytes again. Row
         * first: a crash between the two leaves an unrecorded file, which
         * the start-up check removes. */
        db_forget_partial(js->db, job->part_id);
        store_discard(js->store, job->fd, job->part_id);
        job->fd = -1;
        job->commit_rc = -EBADMSG;
        return;
    }
    int rc = 0, created = 0;
    if (job->fd < 0) /* an empty body: no write item ever ran */
        rc = store_tmp_create(js->store, job->part_id, &job->fd);
    else if (job->truncate_file && ftruncate(job->fd, 0)) /* restarted, then empty */
        rc = -errno;
    /* The data's fsync before the lock: a large file's takes seconds, in
     * which hits, checkpoints and other commits would wait. */
    if (!rc && fsync(job->fd))
        rc = -errno;
    /* Link, row, the tmp name's unlink and the file's identity all under
     * the writer's lock: eviction (row, then unlink) cannot interleave, and
     * a hit, which compares the file with the recorded identity under the
     * same lock, never sees the link count (so the ctime) still changing. */
    db_lock(js->db);
    if (!rc) {
        rc = store_commit(js->store, job->fd, job->part_id, job->digest, job->cred_tag[0] != 0,
                          &job->ro_fd, &created);
        job->fd = -1;
    }
    if (!rc) {
        db_record_t rec = {
            .url = job->key,
            .cred_tag = job->cred_tag,
            .sha256 = job->digest,
            .size = job->received,
            .etag = job->etag,
            .last_modified = job->last_modified,
            .partial_id = job->part_id,
            .uids = job->uids,
            .nuids = job->nuids,
        };
        rc = db_record_download(js->db, &rec);
        if (rc && created) /* no row names the new name: it goes, not to quarantine */
            store_unlink_blob(js->store, job->digest);
    }
    if (rc) /* no recorded blob came of it: nothing to resume either */
        db_forget_partial(js->db, job->part_id);
    /* The row is gone (recorded or forgotten): now the partial's name can
     * go, never before (store_commit says why), and its fd if a step
     * before store_commit failed. */
    store_discard(js->store, job->fd, job->part_id);
    job->fd = -1;
    struct stat st;
    if (!rc && fstat(job->ro_fd, &st) == 0) {
        db_blob_stat_t bs = db_blob_stat_of(&st);
        db_set_blob_stat(js->db, job->digest, &bs);
    }
    db_unlock(js->db);
    job->commit_rc = rc;
}

static void discard_work(uv_work_t *req)
{
    job_t *job = req->data;
    db_forget_partial(job->js->db, job->part_id); /* row first, as in commit_work */
    store_discard(job->js->store, job->fd, job->part_id);
    job->fd = -1;
}

/* A job stopped by a shutdown keeps what it wrote: one last checkpoint, and
 * the next fetch of the URL (after a restart) resumes from it. Bytes that a
 * restart from zero has not yet replaced, or a failed write, are not kept. */
static void park_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    if (job->fd < 0 || job->truncate_file || job->write_err || job->written == 0) {
        discard_work(req);
        return;
    }
    if (job->written > job->durable && fdatasync(job->fd) == 0) {
        db_partial_t p = {.etag = job->etag,
                          .last_modified = job->last_modified,
                          .total = job->total,
                          .durable = job->written};
        if (db_save_partial(js->db, job->part_id, job->key, job->cred_tag, &p) == 0)
            job->durable = job->written;
    }
    close(job->fd);
    job->fd = -1;
}

static void after_discard(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    if (job->park && job->durable > 0)
        log_info("job %llu: kept the first %llu bytes of %s to resume after the restart",
                 (unsigned long long)job->id, (unsigned long long)job->durable, job->key);
    job_free(job);
}

/* ---- the pipeline on the loop thread ----------------------------------- */

static void batch_free(jobs_t *js, batch_t *b)
{
    for (int i = 0; i < b->nbufs; i++)
        buf_unref(&js->pool, b->bufs[i]);
    free(b);
}

static void job_seal(job_t *job)
{
    batch_t *b = job->cur;
    if (!b)
        return;
    job->cur = NULL;
    b->offset = job->sealed;
    job->sealed += b->bytes;
    if (job->tail)
        job->tail->next = b;
    else
        job->head = b;
    job->tail = b;
    if (!job->hash_next)
        job->hash_next = b;
    if (!job->write_next)
        job->write_next = b;
}

static void after_hash(uv_work_t *req, int status);
static void after_write(uv_work_t *req, int status);
static void after_sync(uv_work_t *req, int status);
static const char *job_validator(const job_t *job);

/* Starts a checkpoint of what is on disk when one is due and none is in
 * flight (and the commit is not about to make it moot). Only a partial with
 * a validator can be resumed, so only such is recorded. */
static void job_checkpoint(job_t *job)
{
    uint64_t now = uv_now(job->js->loop);
    if (job->sync_busy || job->restart_pending || job->body_done || job->state == JOB_FAILED ||
        job->state == JOB_COMMITTING || !job_validator(job) || job->on_disk <= job->durable ||
        (job->on_disk - job->durable < CHECKPOINT_BYTES && now - job->t_ckpt < CHECKPOINT_MS))
        return;
    db_partial_free(&job->ckpt);
    job->ckpt.etag = job->etag ? strdup(job->etag) : NULL;
    job->ckpt.last_modified = job->last_modified ? strdup(job->last_modified) : NULL;
    if ((job->etag && !job->ckpt.etag) || (job->last_modified && !job->ckpt.last_modified))
        return; /* no memory: try again after the next write */
    job->ckpt.total = job->total;
    job->ckpt.durable = job->on_disk;
    job->t_ckpt = now;
    job->sync_busy = 1;
    job->sync_work.data = job;
    uv_queue_work(job->js->loop, &job->sync_work, sync_work, after_sync);
}

/* Hands the sealed batches from *next on to one work item. */
static int take_batches(batch_t **next, batch_t **first)
{
    int n = 0;
    *first = *next;
    while (*next && n < WORK_MAX_BATCHES) {
        *next = (*next)->next;
        n++;
    }
    return n;
}

static void submit_work(job_t *job)
{
    uv_loop_t *loop = job->js->loop;
    if (!job->hash_busy && job->hash_next) {
        job->hash_count = take_batches(&job->hash_next, &job->hash_first);
        job->hash_busy = 1;
        job->hash_work.data = job;
        uv_queue_work(loop, &job->hash_work, hash_work, after_hash);
    }
    if (!job->write_busy && job->write_next) {
        job->write_count = take_batches(&job->write_next, &job->write_first);
        job->write_busy = 1;
        job->total_hint = job->total; /* the write item's copies, handed over with it */
        job->floor_hint = job->js->cfg->min_free_space;
        job->floor_pct_hint = job->js->cfg->min_free_percent;
        job->tmp_made = 1;
        job->write_work.data = job;
        uv_queue_work(loop, &job->write_work, write_work, after_write);
    }
}

static void after_commit(uv_work_t *req, int status);

static void uid_add(job_t *job, uid_t uid)
{
    for (size_t i = 0; i < job->nuids; i++)
        if (job->uids[i] == uid)
            return;
    job->uids[job->nuids++] = uid;
}

/* What the commit item keeps and records, from the waiters now: it reads
 * these, the loop does not touch them while it runs. Without memory the
 * download is kept (accept_any), as no waiter's own check is lost: each one
 * still compares the digest with its expectation when told. */
static void job_collect_waiters(job_t *job)
{
    free(job->accepts);
    free(job->uids);
    job->accepts = calloc(job->nwaiters + 1, sizeof *job->accepts);
    job->uids = calloc(job->nwaiters + 1, sizeof *job->uids);
    job->naccepts = job->nuids = 0;
    job->accept_any = job->nwaiters == 0 || !job->accepts;
    if (job->uids)
        uid_add(job, job->owner);
    for (job_waiter_t *w = job->waiters; w; w = w->next) {
        if (job->uids)
            uid_add(job, w->uid);
        if (!w->expected[0])
            job->accept_any = 1;
        else if (job->accepts)
            memcpy(job->accepts[job->naccepts++], w->expected, 65);
    }
}

static void job_start_commit(job_t *job)
{
    job_collect_waiters(job);
    job->state = JOB_COMMITTING;
    job->commit_work.data = job;
    job->commit_busy = 1;
    uv_queue_work(job->js->loop, &job->commit_work, commit_work, after_commit);
}

/* Frees every batch, sealed or not, hashed or not. Only with no hash or
 * write item in flight (they point into the batches). */
static void job_drop_batches(job_t *job)
{
    if (job->cur) {
        batch_free(job->js, job->cur);
        job->cur = NULL;
    }
    while (job->head) {
        batch_t *b = job->head;
        job->head = b->next;
        batch_free(job->js, b);
    }
    job->tail = job->hash_next = job->write_next = NULL;
}

/* After a failure: once no item is in flight, drop the batches and the
 * partial file, then free the job. */
static void job_cleanup(job_t *job)
{
    if (job->hash_busy || job->write_busy || job->sync_busy || job->commit_busy ||
        job->cleanup_queued)
        return;
    job_drop_batches(job);
    job->cleanup_queued = 1;
    if (!job->tmp_made && job->fd < 0) {
        job_free(job);
        return;
    }
    job->commit_work.data = job;
    uv_queue_work(job->js->loop, &job->commit_work, job->park ? park_work : discard_work,
                  after_discard);
}

/* The one function that moves the pipeline: frees finished batches, starts
 * work items, applies backpressure, and starts the commit at the end. */
static void job_pump(job_t *job)
{
    if (job->state == JOB_FAILED) {
        job_cleanup(job);
        return;
    }
    if (job->restart_pending) {
        /* Once no item of the old attempt is in flight, drop all it left and
         * start the hash and the file over; until then submit nothing. */
        if (job->hash_busy || job->write_busy || job->sync_busy)
            return;
        job_drop_batches(job);
        job->restart_pending = 0;
        sha256_init(&job->sha);
        job->received = job->sealed = job->queued_bytes = 0;
        job->written = job->flushed = job->last_done = 0;
        job->durable = job->on_disk = 0; /* the write item that truncates forgets the row */
        job->total = -1;
        job->truncate_file = job->tmp_made;
        job_begin_request(job);
        return;
    }
    while (job->head && job->head->hashed && job->head->written) {
        batch_t *b = job->head;
        job->head = b->next;
        if (!job->head)
            job->tail = NULL;
        job->queued_bytes -= b->bytes;
        batch_free(job->js, b);
    }
    submit_work(job);
    if (job->paused && job->queued_bytes <= job->js->cfg->max_inflight / 2) {
        job->paused = 0;
        if (job->req)
            http_req_set_paused(job->req, 0);
    }
    job_checkpoint(job);
    /* Not while short of room: the eviction run it asked for decides
     * (after_evict) whether there is room for it to be kept. */
    if (job->body_done && !job->head && !job->cur && !job->hash_busy && !job->write_busy &&
        !job->sync_busy && !job->short_wait && job->state == JOB_BODY)
        job_start_commit(job);
}

static void after_hash(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status; /* never cancelled: uv_cancel is not used on these */
    batch_t *b = job->hash_first;
    for (int i = 0; i < job->hash_count; i++, b = b->next)
        b->hashed = 1;
    job->hash_busy = 0;
    job_pump(job);
}

/* The write item found that the download would eat into min_free_space:
 * ask eviction for room, and fail the job (no_space) when a run started
 * since could not make it. Returns 1 when the job failed. */
static const char short_of_space_msg[] =
    "the cache's file system has too little room left for the download and min_free_space, "
    "and evicting what can be evicted does not make it";

static int job_short_of_space(job_t *job)
{
    jobs_t *js = job->js;
    if (!job->space_short || job->state == JOB_FAILED) {
        job->short_wait = 0;
        return 0;
    }
    if (!job->short_wait) {
        job->short_wait = 1;
        job->short_runs = js->evict_runs + (js->evict_busy ? 1 : 0); /* one that starts later */
        jobs_evict_run(js, NULL, 1);
        return 0;
    }
    if (js->evict_runs <= job->short_runs || js->shutting_down)
        return 0;
    job_fail(job, "no_space", short_of_space_msg);
    return 1;
}

static void after_write(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    batch_t *b = job->write_first;
    for (int i = 0; i < job->write_count; i++, b = b->next)
        b->written = 1;
    job->write_busy = 0;
    job->on_disk = job->written;
    if (job->write_err && job->state != JOB_FAILED) {
        char msg[256];
        snprintf(msg, sizeof msg, "writing the download to the cache: %s",
                 strerror(-job->write_err));
        job_fail(job, job->write_err == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    if (job_short_of_space(job))
        return;
    job_pump(job);
}

static void after_sync(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->sync_busy = 0;
    db_partial_free(&job->ckpt);
    if (job->ckpt_done) {
        job->durable = job->ckpt_done;
        job->ckpt_done = 0;
        log_debug("job %llu: checkpoint: %llu bytes durable", (unsigned long long)job->id,
                  (unsigned long long)job->durable);
    }
    if (job->sync_err && job->state != JOB_FAILED) {
        char msg[256];
        snprintf(msg, sizeof msg, "syncing the download to the cache: %s",
                 strerror(-job->sync_err));
        job_fail(job, job->sync_err == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    job_pump(job);
}

static void after_commit(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->commit_busy = 0;
    jobs_t *js = job->js;
    if (job->state == JOB_FAILED) { /* shut down while committing */
        if (job->ro_fd >= 0)
            close(job->ro_fd);
        job->tmp_made = 0; /* the commit consumed or removed the partial */
        job_cleanup(job);
        return;
    }
    if (job->commit_rc == -EBADMSG) {
        /* Not kept: every waiter when the commit started expected another
         * digest. One that attached since and would have taken these
         * bytes did not fail: it goes on in a job of its own. */
        job->tmp_made = 0;
        job_unlist(job);
        for (job_waiter_t *w = job->waiters, *next; w; w = next) {
            next = w->next;
            if (!w->expected[0] || strcmp(w->expected, job->digest) == 0)
                waiter_restart(job, w);
        }
        job_fail_digest(job, "hash_mismatch", "the download's digest is not the one expected",
                        job->digest);
        return;
    }
    if (job->commit_rc) {
        char msg[256];
        snprintf(msg, sizeof msg, "committing to the cache: %s", strerror(-job->commit_rc));
        if (job->ro_fd >= 0)
            close(job->ro_fd);
        job->tmp_made = 0;
        job_fail(job, job->commit_rc == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    uint64_t now = uv_now(js->loop);
    log_info("job %llu: stored %s (%llu bytes, sha256 %s) in %.3f s, of which %.3f s after the "
             "last byte (hash, write, fsync, commit)",
             (unsigned long long)job->id, job->key, (unsigned long long)job->received, job->digest,
             (double)(now - job->t_start) / 1000, (double)(now - job->t_body) / 1000);
    job->state = JOB_DONE;
    job_unlist(job);
    uv_timer_stop(&job->timer);
    char path[PATH_MAX];
    store_blob_path(js->store, job->digest, path, sizeof path);
    job_fd_t *fd = job_fd_new(job->ro_fd);
    job_result_t res = {
        .path = path,
        .sha256 = job->digest,
        .size = job->received,
        .fd = fd,
        .err_code = fd ? NULL : "internal", /* no memory to hand the file out */
        .err_msg = fd ? NULL : "out of memory",
    };
    job_notify_all(job, &res);
    job->ro_fd = -1;
    job_fd_unref(fd); /* the waiters' DONE lines hold it until sent */
    if (js->cfg->max_cache_size && job->received > js->cfg->max_cache_size)
        jobs_drop_oversized(js, job->digest, job->received);
    else
        jobs_evict(js, job->digest); /* the new blob stays: its waiters were just told */
    job_free(job);
    jobs_start_queued(js);
}

/* ---- HTTP callbacks ----------------------------------------------------- */

static int is_redirect(int status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* max_file_size: a length announced (or reached) above it fails the job
 * before it fills the disk. Returns 1 when it did. */
static int job_too_large(job_t *job, int64_t size)
{
    uint64_t max = job->js->cfg->max_file_size;
    if (!max || size < 0 || (uint64_t)size <= max)
        return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "the file is larger than max_file_size (%llu bytes)",
             (unsigned long long)max);
    job_fail(job, "too_large", msg);
    return 1;
}

static int on_http_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    job_t *job = data;
    (void)req;
    if (is_redirect(resp->status)) {
        char msg[160];
        if (!resp->location || !*resp->location) {
            snprintf(msg, sizeof msg, "HTTP %d redirect without a Location", resp->status);
            job_fail(job, "redirect", msg);
            return HTTP_BODY_DISCARD;
        }
        if (job->redirects >= job->js->cfg->max_redirects) {
            snprintf(msg, sizeof msg, "more than %u redirects", job->js->cfg->max_redirects);
            job_fail(job, "redirect", msg);
            return HTTP_BODY_DISCARD;
        }
        free(job->redirect_to);
        int rc = url_resolve(&job->url, resp->location, &job->redirect_to);
        if (rc) {
            job->redirect_to = NULL;
            job_fail(job, "redirect", "redirect to an unusable Location");
        }
        return HTTP_BODY_DISCARD;
    }
    if (job->resume_from > 0 &&
        (resp->status == 200 || resp->status == 203 || resp->status == 416)) {
        /* The server ignored the Range, or If-Range found the file changed:
         * what we have is not a prefix of this body. Start over. */
        job_restart_from_zero(job, "the server sent the whole file (or refused the range)");
        return HTTP_BODY_DISCARD;
    }
    if (resp->status == 206 && job->resume_from > 0) {
        unsigned long long start, end, total;
        int n = resp->content_range
                    ? sscanf(resp->content_range, "bytes %llu-%llu/%llu", &start, &end, &total)
                    : 0;
        /* The file's length is the one already known, whatever this
         * response says (a "*" length: unknown to the server): a range that does
         * not reach it is not the end of the file. */
        int64_t length = n == 3 ? (int64_t)total : job->total;
        if (n < 2 || start != job->resume_from || end < start ||
            (job->etag && resp->etag && strcmp(job->etag, resp->etag) != 0) ||
            (n == 3 && (total > INT64_MAX || (job->total >= 0 && (int64_t)total != job->total))) ||
            (length >= 0 && end >= (unsigned long long)length) ||
            (resp->content_length >= 0 && (uint64_t)resp->content_length != end - start + 1)) {
            job_restart_from_zero(job, "the range sent is not the one asked for");
            return HTTP_BODY_DISCARD;
        }
        if (length < 0) {
            /* Neither response said how long the file is: where this range
             * ends proves nothing. The whole file, then, to its real end. */
            job_restart_from_zero(job, "a range of a file of unknown length");
            return HTTP_BODY_DISCARD;
        }
        /* A range that ends before the file does is taken; on_http_done
         * then finds the file short (truncated: retried, resuming). */
        job->state = JOB_BODY;
        job->total = length;
        if (job_too_large(job, job->total))
            return HTTP_BODY_DISCARD;
        jobs_evict(job->js, NULL); /* room for the rest, before writing it */
        return HTTP_BODY_DELIVER;
    }
    if (resp->status != 200 && resp->status != 203) {
        /* Fail once the (small) body is read, so the connection is kept. */
        job->http_status = resp->status;
        job->retry_after_ms = 0;
        if (resp->retry_after) { /* seconds; an HTTP date is not honoured */
            char *end;
            unsigned long secs = strtoul(resp->retry_after, &end, 10);
            if (end != resp->retry_after && *end == '\0' && secs < 86400)
                job->retry_after_ms = (unsigned)secs * 1000;
        }
        return HTTP_BODY_DISCARD;
    }
    job->state = JOB_BODY;
    job->total = resp->content_length;
    free(job->etag);
    free(job->last_modified);
    job->etag = resp->etag ? strdup(resp->etag) : NULL;
    job->last_modified = resp->last_modified ? strdup(resp->last_modified) : NULL;
    if (job_too_large(job, job->total))
        return HTTP_BODY_DISCARD;
    jobs_evict(job->js, NULL); /* make room before writing, not after */
    return HTTP_BODY_DELIVER;
}

static void on_http_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    job_t *job = data;
    jobs_t *js = job->js;
    js->stats.bytes_from_origin += n;
    job->received += n;
    if (job_too_large(job, (int64_t)job->received)) /* chunked, or a lying length */
        return;
    job->queued_bytes += n;
    batch_t *b = job->cur;
    if (!b && !(b = job->cur = calloc(1, sizeof *b))) {
        job_fail(job, "internal", "out of memory");
        return;
    }
    if (b->nbufs == 0 || b->bufs[b->nbufs - 1] != buf) {
        buf_ref(buf);
        b->bufs[b->nbufs++] = buf;
    }
    struct iovec *last = b->niov ? &b->iov[b->niov - 1] : NULL;
    if (last && (const char *)last->iov_base + last->iov_len == p)
        last->iov_len += n; /* contiguous in the same buffer: one iovec */
    else
        b->iov[b->niov++] = (struct iovec){(void *)p, n};
    b->bytes += n;
    if (b->bytes >= js->cfg->read_buffer_size || b->niov == BATCH_MAX_IOV ||
        b->nbufs == BATCH_MAX_IOV) {
        job_seal(job);
        job_pump(job);
    }
    if (!job->paused && job->queued_bytes > js->cfg->max_inflight && job->state == JOB_BODY) {
        /* Seal and hand on what we hold first: the work item that then
         * completes is what resumes us (job_pump), so pausing cannot stall. */
        job_seal(job);
        job_pump(job);
        job->paused = 1;
        http_req_set_paused(req, 1);
    }
}

static void on_http_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    job_t *job = data;
    (void)req;
    job->req = NULL;
    if (job->state == JOB_FAILED || job->state == JOB_RETRY_WAIT)
        return; /* failed or restarting from a callback: the request was ours to drop */
    if (code) {
        job_error(job, code, msg);
        return;
    }
    if (job->http_status) {
        char status_code[16], status_msg[300];
        snprintf(status_code, sizeof status_code, "http_%d", job->http_status);
        snprintf(status_msg, sizeof status_msg, "%s answered HTTP %d", job->url.canonical,
                 job->http_status);
        job->http_status = 0;
        job_error(job, status_code, status_msg);
        return;
    }
    if (job->redirect_to) {
        url_t next;
        const char *why = NULL;
        int rc = url_parse(job->redirect_to, &next, &why);
        char m[300];
        if (rc) {
            snprintf(m, sizeof m, "redirect to an unusable URL: %s", why ? why : "bad URL");
            job_fail(job, "redirect", m);
            return;
        }
        if (strcmp(job->url.scheme, "https") == 0 && strcmp(next.scheme, "http") == 0) {
            /* A downgrade would hand the rest of the exchange, and the bytes
             * we store, to anyone on the path. */
            snprintf(m, sizeof m, "refused a redirect from https to http (%s)", next.canonical);
            url_free(&next);
            job_fail(job, "redirect", m);
            return;
        }
        log_debug("job %llu: redirect %u to %s", (unsigned long long)job->id, job->redirects + 1,
                  next.canonical);
        url_free(&job->url);
        job->url = next;
        free(job->redirect_to);
        job->redirect_to = NULL;
        job->redirects++;
        job_begin_request(job);
        return;
    }
    if (job->total >= 0 && job->received != (uint64_t)job->total) {
        /* A 206 that stopped short of its range (or a server that lied
         * about the total): never commit a prefix as the file. */
        char m[200];
        snprintf(m, sizeof m, "the response ended at byte %llu of %lld",
                 (unsigned long long)job->received, (long long)job->total);
        job_error(job, "truncated", m);
        return;
    }
    job_seal(job);
    job->body_done = 1;
    job->t_body = uv_now(job->js->loop);
    job_pump(job);
}

static const http_req_cbs_t job_http_cbs = {on_http_headers, on_http_body, on_http_done};

/* The validator for If-Range: a strong ETag, else Last-Modified (RFC 9110
 * 13.1.5: a weak ETag cannot be used). NULL when there is none. */
static const char *job_validator(const job_t *job)
{
    if (job->etag && strncmp(job->etag, "W/", 2) != 0)
        return job->etag;
    return job->last_modified;
}

static void on_begin_failed(uv_timer_t *t)
{
    job_t *job = t->data;
    job_fail(job, job->begin_code, job->begin_msg);
}

static void job_begin_request(job_t *job)
{
    job->state = JOB_CONNECTING;
    job->resume_from = job->received; /* all of it is sealed, or the job restarted */
    char *hdrs = NULL;
    /* Credentials are for the origin they were given for: never sent to
     * another scheme, host or port a redirect leads to. They are kept, not
     * dropped: a retry goes back to the first origin, which needs them. */
    const char *cred = "";
    url_t first;
    if (job->cred_headers && url_parse(job->key, &first, NULL) == 0) {
        if (url_same_origin(&job->url, &first))
            cred = job->cred_headers;
        url_free(&first);
    }
    const char *validator = job_validator(job);
    int n = job->resume_from > 0 ? asprintf(&hdrs, "Range: bytes=%llu-\r\nIf-Range: %s\r\n%s",
                                            (unsigned long long)job->resume_from, validator, cred)
                                 : asprintf(&hdrs, "%s", cred);
    int rc = n < 0 ? -ENOMEM : 0;
    if (!rc)
        rc = http_request(job->js->http, &job->url, hdrs, &job_http_cbs, job, &job->req);
    free(hdrs);
    if (!rc)
        return;
    /* Failed from the next loop iteration: this may run inside jobs_fetch
     * (a new job that starts at once), which never calls back itself. */
    job->req = NULL;
    job->begin_code = rc == -EACCES ? "forbidden" : "internal";
    if (rc == -EACCES)
        snprintf(job->begin_msg, sizeof job->begin_msg,
                 "the network policy does not allow the host %s (allow_hosts, deny_hosts)",
                 job->url.host);
    else
        snprintf(job->begin_msg, sizeof job->begin_msg, "cannot start the request");
    uv_timer_start(&job->retry_timer, on_begin_failed, 0, 0);
}

/* Transient failures: the network, timeouts, a cut body (also a TLS record
 * cut short), 5xx, 408, 429. The rest (4xx, bad responses, TLS handshakes
 * and verification, disk) would fail again. */
static int is_transient(const char *code)
{
    static const char *const codes[] = {"connect", "timeout",  "truncated",
                                        "tls",     "http_408", "http_429"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strcmp(code, codes[i]) == 0)
            return 1;
    return strncmp(code, "http_5", 6) == 0;
}

static void on_retry_timer(uv_timer_t *t)
{
    job_t *job = t->data;
    if (job->state != JOB_RETRY_WAIT)
        return;
    if (job->received > 0 && !job_validator(job)) {
        /* Nothing to tie a range to the same file: safer to start over. */
        job->restart_pending = 1;
        job_pump(job);
        return;
    }
    job_begin_request(job);
}

/* Back to the URL that was asked for, with the request (if any) dropped. */
static void job_rewind(job_t *job)
{
    if (job->req) {
        http_req_abort(job->req);
        job->req = NULL;
    }
    free(job->redirect_to);
    job->redirect_to = NULL;
    job->http_status = 0;
    job->redirects = 0;
    url_t u;
    if (url_parse(job->key, &u, NULL) == 0) {
        url_free(&job->url);
        job->url = u;
    }
    job->state = JOB_RETRY_WAIT;
}

/* The response cannot continue what we have: drop it all once the pipeline
 * is idle (job_pump) and request the whole file again, at once. Not counted
 * as a failed attempt: the next response is a plain 200. */
static void job_restart_from_zero(job_t *job, const char *why)
{
    log_warn("job %llu: %s: restarting %s from byte 0", (unsigned long long)job->id, why, job->key);
    job_rewind(job);
    job_seal(job);
    job->etag = (free(job->etag), NULL);
    job->last_modified = (free(job->last_modified), NULL);
    job->restart_pending = 1;
    job_pump(job);
}

/* A failed attempt: retry after a backoff with jitter (at least what
 * Retry-After asked, within retry_max_delay and the deadline), resuming at
 * the first byte we do not have; or, when the failure is permanent or the
 * attempts are spent, fail the job. */
static void job_error(job_t *job, const char *code, const char *msg)
{
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return;
    jobs_t *js = job->js;
    const hubd_config_t *cfg = js->cfg;
    char final[600];
    if (!is_transient(code) || js->shutting_down || job->attempts >= cfg->retries) {
        if (job->attempts > 0 && is_transient(code)) {
            snprintf(final, sizeof final, "%s (after %u attempts)", msg, job->attempts + 1);
            msg = final;
        }
        job_fail(job, code, msg);
        return;
    }
    uint64_t delay = cfg->retry_delay_ms;
    for (unsigned i = 0; i < job->attempts && delay < cfg->retry_max_delay_ms; i++)
        delay *= 2;
    delay = delay / 2 + (uint64_t)random() % (delay / 2 + 1); /* jitter: [d/2, d] */
    if (job->retry_after_ms > delay)
        delay = job->retry_after_ms;
    if (delay > cfg->retry_max_delay_ms)
        delay = cfg->retry_max_delay_ms;
    uint64_t now = uv_now(js->loop);
    if (cfg->deadline_ms && now + delay - job->t_start >= cfg->deadline_ms) {
        snprintf(final, sizeof final, "%s (deadline reached after %u attempts)", msg,
                 job->attempts + 1);
        job_fail(job, code, final);
        return;
    }
    job->attempts++;
    job->retry_after_ms = 0;
    job_rewind(job);
    job_seal(job); /* what arrived is kept: the next request resumes after it */
    log_warn("job %llu: attempt %u of %s failed: %s: %s; retrying in %llu ms from byte %llu",
             (unsigned long long)job->id, job->attempts, job->key, code, msg,
             (unsigned long long)delay, (unsigned long long)job->received);
    uv_timer_start(&job->retry_timer, on_retry_timer, delay, 0);
    job_pump(job);
}

/* The single failure path: waiters hear now, the job leaves the table (a new
 * fetch starts afresh), and memory and the partial go once the pool is done.
 * digest: what the download hashed to, for a hash_mismatch (else NULL). */
static void job_fail_digest(job_t *job, const char *code, const char *msg, const char *digest)
{
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return;
    jobs_t *js = job->js;
    job->state = JOB_FAILED;
    atomic_store(&job->failed, 1);
    /* Stopped, not broken: what is on disk is good to resume from. Any
     * other failure discards it (a new fetch starts afresh). */
    job->park = strcmp(code, "shutting_down") == 0 && job_validator(job) != NULL;
    log_warn("job %llu: %s failed: %s: %s", (unsigned long long)job->id, job->key, code, msg);
    job_unlist(job);
    uv_timer_stop(&job->timer);
    uv_timer_stop(&job->retry_timer);
    if (job->req) {
        http_req_abort(job->req);
        job->req = NULL;
    }
    job_result_t res = {.err_code = code, .err_msg = msg, .sha256 = digest};
    job_notify_all(job, &res);
    if (!job->commit_busy) /* else after_commit comes back to clean up */
        job_pump(job);
    jobs_start_queued(js);
}

static void job_fail(job_t *job, const char *code, const char *msg)
{
    job_fail_digest(job, code, msg, NULL);
}

/* ---- progress ------------------------------------------------------------ */

/* curl's --speed-limit and --speed-time: a body that brings fewer than
 * low_speed_limit bytes per second over low_speed_time ends the attempt as
 * a timeout (retried, resuming where it stopped). Only time in which we
 * wanted the server's bytes counts: the window starts again whenever we are
 * not reading (backpressure, between attempts, the body done). Returns 1
 * when the job was failed or set to retry. */
static int job_check_speed(job_t *job, uint64_t now)
{
    const hubd_config_t *cfg = job->js->cfg;
    if (!cfg->low_speed_limit || !cfg->low_speed_time_ms || job->state != JOB_BODY || !job->req ||
        job->paused || !job->slow_t0) {
        job->slow_t0 = now; /* the window (re)starts now */
        job->slow_from = job->received;
        return 0;
    }
    uint64_t span = now - job->slow_t0;
    if (span < cfg->low_speed_time_ms)
        return 0;
    uint64_t got = job->received - job->slow_from;
    job->slow_t0 = now;
    job->slow_from = job->received;
    if (got * 1000 >= (uint64_t)cfg->low_speed_limit * span)
        return 0;
    char msg[200];
    snprintf(msg, sizeof msg,
             "%llu bytes in %.1f s, below low_speed_limit (%u bytes/s over low_speed_time)",
             (unsigned long long)got, (double)span / 1000, cfg->low_speed_limit);
    job_error(job, "timeout", msg);
    return 1;
}

static void on_progress_tick(uv_timer_t *t)
{
    job_t *job = t->data;
    const hubd_config_t *cfg = job->js->cfg;
    uint64_t now = uv_now(job->js->loop);
    if (cfg->deadline_ms && job->state != JOB_COMMITTING &&
        now - job->t_start >= cfg->deadline_ms) {
        char msg[100];
        snprintf(msg, sizeof msg, "the deadline of %u ms for the whole fetch passed",
                 cfg->deadline_ms);
        job_fail(job, "timeout", msg);
        return;
    }
    if (job_check_speed(job, now))
        return;
    uint64_t done = job->received;
    uint64_t inst = (done - job->last_done) * (1000 / PROGRESS_INTERVAL_MS);
    /* Smoothed over about a second, so the figure a user reads is steady. */
    job->rate = job->rate ? (job->rate * 7 + inst * 3) / 10 : inst;
    if (done == job->last_done && job->state != JOB_COMMITTING)
        return;
    job->last_done = done;
    for (job_waiter_t *w = job->waiters, *next; w; w = next) {
        next = w->next;
        w->on_progress(w, done, job->total, job->rate);
    }
}

/* ---- scheduling ---------------------------------------------------------- */

static unsigned active_for_host(jobs_t *js, const char *host_key)
{
    unsigned n = 0;
    for (job_t *j = js->active; j; j = j->next)
        if (strcmp(j->host_key, host_key) == 0)
            n++;
    return n;
}

static unsigned active_for_owner(jobs_t *js, uid_t uid)
{
    unsigned n = 0;
    for (job_t *j = js->active; j; j = j->next)
        n += j->owner == uid;
    return n;
}

static void job_activate(job_t *job)
{
    jobs_t *js = job->js;
    job->in_active = 1;
    job->next = js->active;
    job->prev = NULL;
    if (js->active)
        js->active->prev = job;
    js->active = job;
    js->stats.active++;
    uv_timer_start(&job->timer, on_progress_tick, PROGRESS_INTERVAL_MS, PROGRESS_INTERVAL_MS);
    job->t_start = job->t_ckpt = uv_now(js->loop);
    if (job->resume_len)
        job_start_rehash(job);
    else
        job_begin_request(job);
}

/* Whether a job not yet freed (failed ones too) still uses partial id. */
static int part_in_use(const jobs_t *js, uint64_t id)
{
    for (const job_t *j = js->all; j; j = j->all_next)
        if (j->part_id == id)
            return 1;
    return 0;
}

/* A partial recorded by an earlier run (or an earlier job) of this URL:
 * the job takes it over, to re-hash and resume it when it starts. */
static void job_adopt_partial(job_t *job)
{
    jobs_t *js = job->js;
    db_partial_t p;
    if (db_find_partial(js->db, job->key, job->cred_tag, &p) != 0)
        return;
    if (p.durable == 0 || part_in_use(js, p.id)) { /* a failed job is still removing it */
        db_partial_free(&p);
        return;
    }
    job->part_id = p.id;
    job->resume_len = p.durable;
    job->total = p.total;
    job->etag = p.etag;
    job->last_modified = p.last_modified;
    if (!job_validator(job)) { /* never recorded so; do not trust it */
        job->etag = (free(job->etag), NULL);
        job->last_modified = (free(job->last_modified), NULL);
        job->part_id = job->id;
        job->resume_len = 0;
        job->total = -1;
    }
}

static void after_rehash(uv_work_t *req, int status);

static void job_start_rehash(job_t *job)
{
    job->state = JOB_RESUMING;
    job->hash_busy = job->write_busy = 1; /* the item owns sha and fd */
    job->tmp_made = 1;
    job->hash_work.data = job;
    uv_queue_work(job->js->loop, &job->hash_work, rehash_work, after_rehash);
}

static void after_rehash(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->hash_busy = job->write_busy = 0;
    if (job->state == JOB_FAILED) {
        job_pump(job);
        return;
    }
    uint64_t len = job->resume_len;
    if (job->rehash_rc) {
        log_warn("job %llu: cannot resume the partial of %s (%s): downloading it all",
                 (unsigned long long)job->id, job->key, strerror(-job->rehash_rc));
        sha256_init(&job->sha);
        job->resume_len = 0;
        job->total = -1;
        job->etag = (free(job->etag), NULL);
        job->last_modified = (free(job->last_modified), NULL);
        job_begin_request(job);
        return;
    }
    job->received = job->sealed = job->durable = job->on_disk = job->last_done = len;
    log_info("job %llu: resuming %s at byte %llu of its partial (re-hashed in %.3f s)",
             (unsigned long long)job->id, job->key, (unsigned long long)len,
             (double)(uv_now(job->js->loop) - job->t_start) / 1000);
    if (job->total >= 0 && len == (uint64_t)job->total) {
        /* Every byte was there: a crash came between the last write and the
         * commit. Nothing to ask the origin for. */
        job->state = JOB_BODY;
        job->body_done = 1;
        job->t_body = uv_now(job->js->loop);
        job_pump(job);
        return;
    }
    job_begin_request(job);
}

/* Starts queued jobs, oldest first, while the global and per-host limits
 * allow; a job whose host is full waits without blocking other hosts. */
static void jobs_start_queued(jobs_t *js)
{
    if (js->starting_queued) { /* a job failed while starting: rescan after */
        js->start_again = 1;
        return;
    }
    js->starting_queued = 1;
    do {
        js->start_again = 0;
        job_t *job = js->queue_head;
        while (job && js->stats.active < js->cfg->max_downloads && !js->shutting_down) {
            /* A full host, or a user at max_jobs_per_user, waits without
             * holding up the others behind it in the queue. */
            unsigned per_user = js->cfg->max_jobs_per_user;
            if (active_for_host(js, job->host_key) >= js->cfg->max_per_host ||
                (per_user && active_for_owner(js, job->owner) >= per_user)) {
                job = job->next;
                continue;
            }
            job_unlist(job);
            job_activate(job);
            job = js->queue_head; /* activation may have changed the queue */
        }
    } while (js->start_again);
    js->starting_queued = 0;
}

/* A running job for the same URL and the same credentials (a request
 * without them must never share a gated download). Only the same URL: a
 * job of another URL that promises the same digest could be slow, fail or
 * lie (another user's job), and an attacher must not wait on, or fail
 * with, what it did not ask for. A digest already in the cache is a hit
 * whatever its URL. */
static job_t *job_find(jobs_t *js, const char *key, const char *cred_tag)
{
    job_t *lists[2] = {js->active, js->queue_head};
    for (int i = 0; i < 2; i++)
        for (job_t *j = lists[i]; j; j = j->next)
            if (strcmp(j->cred_tag, cred_tag) == 0 && strcmp(j->key, key) == 0)
                return j;
    return NULL;
}

/* Attaches w to a running job for the same URL, or queues a new job. Takes
 * u. A waiter moved from a failed job (w->restarted) hears no second
 * on_start. Returns 0, or -ENOMEM or -EAGAIN (too many jobs for the uid)
 * with no callback made. */
static int start_download(jobs_t *js, url_t *u, job_waiter_t *w)
{
    job_t *job = job_find(js, u->canonical, w->cred_tag);
    if (job) {
        url_free(u);
        free(w->cred_block); /* the job has the same credentials already */
        w->cred_block = NULL;
        js->stats.attached++;
        if (!w->restarted)
            w->kind = FETCH_ATTACHED;
        waiter_link(job, w);
        if (!w->restarted)
            w->on_start(w, FETCH_ATTACHED, job->id);
        return 0;
    }
    /* A client that asks and hangs up leaves its job running: so the jobs
     * one uid created (queued or transferring) are bounded too. */
    unsigned max = js->cfg->max_requests_per_user, mine = 0;
    job_t *lists[2] = {js->active, js->queue_head};
    for (int i = 0; max && i < 2; i++)
        for (job_t *j = lists[i]; j; j = j->next)
            mine += j->owner == w->uid;
    if (max && mine >= max) {
        url_free(u);
        return -EAGAIN;
    }
    job = calloc(1, sizeof *job);
    if (!job)
        goto fail;
    job->js = js;
    job->id = job->part_id = ++js->next_id;
    job->url = *u;
    job->key = strdup(u->canonical);
    size_t hl = strlen(u->host) + 8;
    job->host_key = malloc(hl);
    if (!job->key || !job->host_key) {
        free(job->key);
        free(job->host_key);
        free(job);
        goto fail;
    }
    snprintf(job->host_key, hl, "%s:%u", u->host, u->port);
    memcpy(job->cred_tag, w->cred_tag, sizeof job->cred_tag);
    job->owner = w->uid;
    job->cred_headers = w->cred_block; /* the job sends them to the first origin */
    w->cred_block = NULL;
    job->fd = -1;
    job->ro_fd = -1;
    job->total = -1;
    sha256_init(&job->sha);
    uv_timer_init(js->loop, &job->timer);
    uv_timer_init(js->loop, &job->retry_timer);
    job->timer.data = job->retry_timer.data = job;
    job->handles_open = 2;
    worktrack_hold(&js->work);
    js->stats.misses++;
    job_adopt_partial(job);
    job->all_next = js->all;
    if (js->all)
        js->all->all_prev = job;
    js->all = job;

    job->state = JOB_QUEUED;
    job->in_queue = 1;
    job->prev = js->queue_tail;
    if (js->queue_tail)
        js->queue_tail->next = job;
    else
        js->queue_head = job;
    js->queue_tail = job;
    js->stats.queued++;

    waiter_link(job, w);
    log_info("job %llu: fetching %s", (unsigned long long)job->id, job->key);
    if (!w->restarted) {
        w->kind = FETCH_QUEUED;
        w->on_start(w, FETCH_QUEUED, job->id);
    }
    jobs_start_queued(js);
    return 0;
fail:
    url_free(u);
    return -ENOMEM;
}

/* A waiter whose job failed for a reason that is not its own (another
 * waiter's expected digest) goes on in a job of its own for the same URL,
 * with the same headers; its client sees progress go on, and one final
 * line. */
static void waiter_restart(job_t *job, job_waiter_t *w)
{
    jobs_t *js = job->js;
    waiter_unlink(job, w);
    free(w->cred_block);
    w->cred_block = job->cred_headers ? strdup(job->cred_headers) : NULL;
    url_t u;
    int rc = -ENOMEM;
    if ((!job->cred_headers || w->cred_block) && url_parse(job->key, &u, NULL) == 0) {
        w->restarted = 1;
        rc = start_download(js, &u, w);
    }
    if (rc == 0) {
        log_info("job %llu: a waiter whose expectation it did not fail goes on in job %llu",
                 (unsigned long long)job->id, (unsigned long long)w->job->id);
        return;
    }
    free(w->cred_block);
    w->cred_block = NULL;
    job_result_t res = {.err_code = rc == -EAGAIN ? "too_many_requests" : "internal",
                        .err_msg = rc == -EAGAIN ? "its job was not kept, and this uid has "
                                                   "max_requests_per_user downloads running"
                                                 : "cannot start the download again",
                        .kind = w->kind};
    count_error(js, res.err_code);
    w->on_finish(w, &res);
}

/* ---- cache hits ---------------------------------------------------------- */

/* Opens the blob and checks, cheaply, that its file is still the one
 * committed: same inode, size, mtime and ctime (an edit in place keeps the
 * size, never the times). Under the writer's lock: a commit of the same
 * digest replaces the file and records its identity under it too. One that
 * differs is re-hashed before anything is said of it (a backup restored,
 * `cp -a` to a new disk or a `chown -R` change the identity, not the
 * bytes): good, its new identity is recorded and it is served; bad, it is
 * quarantined and forgotten, and the request downloads again. A blob whose
 * identity is not recorded yet (a cache from before) gets it from the
 * background verification. */
static void hit_work(uv_work_t *req)
{
    job_hit_t *hit = req->data;
    jobs_t *js = hit->js;
    struct stat st;
    db_blob_stat_t rec;
    int changed = 0;
    db_lock(js->db);
    hit->rc = store_open_blob(js->store, hit->sha, hit->size, &hit->fd, &st);
    if (!hit->rc && db_get_blob_stat(js->db, hit->sha, &rec) == 0 && rec.ino) {
        db_blob_stat_t now = db_blob_stat_of(&st);
        changed = memcmp(&now, &rec, sizeof now) != 0;
    }
    db_unlock(js->db);
    if (changed) {
        close(hit->fd);
        hit->fd = -1;
        int rc = cache_verify_one(js->store, js->db, hit->sha, hit->size, (int64_t)time(NULL));
        hit->rc = rc == -EBADMSG ? -ESTALE : rc ? rc : -EAGAIN;
        if (!rc) /* the same bytes in another file: open that one */
            hit->rc = store_open_blob(js->store, hit->sha, hit->size, &hit->fd, NULL);
    }
    if (!hit->rc)
        db_touch(js->db, hit->sha, hit->by_entry ? hit->url : NULL, hit->cred_tag, hit->uid);
}

static void after_hit(uv_work_t *req, int status)
{
    (void)status;
    job_hit_t *hit = req->data;
    jobs_t *js = hit->js;
    job_waiter_t *w = hit->w;
    if (w)
        w->hit = NULL;
    if (w && hit->rc == 0) { /* served without a job: its headers are not needed */
        free(w->cred_block);
        w->cred_block = NULL;
    }
    if (w && hit->rc == 0 && js->shutting_down) {
        job_result_t res = {.err_code = "shutting_down", .err_msg = "hubd is stopping"};
        w->on_start(w, FETCH_HIT, 0);
        w->on_finish(w, &res);
    } else if (w && hit->rc == 0) {
        char path[PATH_MAX];
        store_blob_path(js->store, hit->sha, path, sizeof path);
        js->stats.hits++;
        js->stats.bytes_served += hit->size;
        w->kind = FETCH_HIT;
        w->on_start(w, FETCH_HIT, 0);
        job_fd_t *fd = job_fd_new(hit->fd);
        hit->fd = -1; /* the wrapper's now */
        job_result_t res = {.path = path,
                            .sha256 = hit->sha,
                            .size = hit->size,
                            .fd = fd,
                            .kind = FETCH_HIT,
                            .err_code = fd ? NULL : "internal",
                            .err_msg = fd ? NULL : "out of memory"};
        w->on_finish(w, &res);
        job_fd_unref(fd);
    } else if (w) {
        /* The row said yes but the file is gone or wrong: download again. */
        if (hit->rc == -ESTALE)
            js->stats.bad_blobs++;
        log_warn("blob %s listed but not usable (%s): fetching again", hit->sha,
                 hit->rc == -ESTALE ? "changed on disk since its commit: quarantined"
                                    : strerror(-hit->rc));
        url_t u;
        int rc = -EINVAL;
        if (!js->shutting_down && url_parse(hit->url, &u, NULL) == 0)
            rc = start_download(js, &u, w);
        if (rc) { /* a shutdown, a full queue for this uid, or no memory */
            job_result_t res = {.err_code = js->shutting_down ? "shutting_down" : "internal",
                                .err_msg = js->shutting_down ? "hubd is stopping"
                                                             : "cannot start the download again"};
            free(w->cred_block); /* before on_finish: the waiter may be freed in it */
            w->cred_block = NULL;
            w->on_finish(w, &res);
        }
    }
    if (hit->rc == 0 && hit->fd >= 0)
        close(hit->fd);
    free(hit->url);
    free(hit);
    jobs_release(js);
}

/* ---- public -------------------------------------------------------------- */

void jobs_set_policy(jobs_t *js, const netpolicy_t *policy)
{
    http_client_set_policy(js->http, policy);
}

void jobs_set_secret(jobs_t *js, const cred_secret_t *secret)
{
    js->secret = *secret;
}

int jobs_fetch(jobs_t *js, const char *url, const char *sha256, const char *const *headers,
               size_t nheaders, job_waiter_t *w, const char **code, const char **msg)
{
    url_t u;
    const char *why = NULL;
    memset(&w->job, 0, sizeof *w - offsetof(job_waiter_t, job));
    if (js->shutting_down) {
        *code = "shutting_down";
        *msg = "hubd is stopping";
        return -EINVAL;
    }
    int rc = url_parse(url, &u, &why);
    if (rc) {
        *code = rc == -EPROTONOSUPPORT ? "unsupported_scheme" : "bad_url";
        *msg = why ? why : "bad URL";
        return -EINVAL;
    }
    if (sha256)
        snprintf(w->expected, sizeof w->expected, "%s", sha256);
    rc = cred_build(&js->secret, headers, nheaders, &w->cred_block, w->cred_tag, &why);
    if (rc) {
        url_free(&u);
        *code = rc == -EINVAL ? "bad_request" : "internal";
        *msg = rc == -EINVAL ? why : "cannot build the request headers";
        return -EINVAL;
    }

    /* A blob with the expected digest, whatever its URL, that the
     * request's credentials (or none) got; else this URL's entry for those
     * credentials. Both are confirmed by opening the file in the pool. */
    char sha[65];
    uint64_t size = 0;
    int by_entry = 0;
    int found = sha256 && db_find_blob_for(js->db, sha256, w->cred_tag, &size) == 0;
    if (found) {
        memcpy(sha, w->expected, sizeof sha);
    } else if (db_find_entry(js->db, u.canonical, w->cred_tag, sha, &size) == 0 &&
               (!sha256 || strcmp(sha, sha256) == 0)) {
        found = by_entry = 1;
    }
    job_hit_t *hit = found ? calloc(1, sizeof *hit) : NULL;
    if (hit && !(hit->url = strdup(u.canonical))) {
        free(hit);
        hit = NULL;
    }
    if (!hit) { /* a miss (or no memory to serve the hit: download instead) */
        rc = start_download(js, &u, w);
        if (rc == 0)
            return 0;
        free(w->cred_block);
        w->cred_block = NULL;
        *code = rc == -EAGAIN ? "too_many_requests" : "internal";
        *msg = rc == -EAGAIN ? "this uid has max_requests_per_user downloads running or queued"
                             : "out of memory";
        return rc;
    }
    url_free(&u);
    hit->js = js;
    hit->w = w;
    memcpy(hit->sha, sha, sizeof sha);
    memcpy(hit->cred_tag, w->cred_tag, sizeof hit->cred_tag);
    hit->uid = w->uid;
    hit->size = size;
    hit->by_entry = by_entry;
    hit->fd = -1;
    hit->work.data = hit;
    w->hit = hit;
    worktrack_hold(&js->work);
    uv_queue_work(js->loop, &hit->work, hit_work, after_hit);
    return 0;
}

void jobs_cancel(job_waiter_t *w)
{
    free(w->cred_block);
    w->cred_block = NULL;
    if (w->hit) {
        w->hit->w = NULL;
        w->hit = NULL;
    }
    if (w->job)
        waiter_unlink(w->job, w);
}

void jobs_stats(const jobs_t *js, jobs_stats_t *out)
{
    *out = js->stats;
    if (js->verifier)
        out->bad_blobs += verifier_bad(js->verifier);
}

static void info_of(const job_t *j, uid_t uid, job_info_t *info)
{
    info->id = j->id;
    info->url = j->key;
    info->state = state_names[j->state];
    info->done = j->received;
    info->total = j->total;
    info->rate = j->rate;
    info->waiters = j->nwaiters;
    info->mine = j->owner == uid;
    for (const job_waiter_t *w = j->waiters; w && !info->mine; w = w->next)
        info->mine = w->uid == uid;
}

/* The listed job with the smallest id above `after`, or NULL. A scan of
 * the jobs in memory (bounded by the per-uid limits), no I/O. */
static job_t *job_after(jobs_t *js, uint64_t after)
{
    job_t *best = NULL;
    job_t *lists[2] = {js->active, js->queue_head};
    for (int i = 0; i < 2; i++)
        for (job_t *j = lists[i]; j; j = j->next)
            if (j->id > after && (!best || j->id < best->id))
                best = j;
    return best;
}

unsigned jobs_page(jobs_t *js, uint64_t after, unsigned max, uid_t uid,
                   void (*fn)(void *arg, const job_info_t *info), void *arg)
{
    unsigned n = 0;
    job_t *j;
    while (n < max && (j = job_after(js, after)) != NULL) {
        job_info_t info;
        info_of(j, uid, &info);
        fn(arg, &info);
        after = j->id;
        n++;
    }
    return n;
}

job_fd_t *job_fd_new(int fd)
{
    job_fd_t *f = malloc(sizeof *f);
    if (!f) {
        close(fd);
        return NULL;
    }
    f->fd = fd;
    f->refs = 1;
    return f;
}

job_fd_t *job_fd_ref(job_fd_t *f)
{
    f->refs++;
    return f;
}

void job_fd_unref(job_fd_t *f)
{
    if (f && --f->refs == 0) {
        close(f->fd);
        free(f);
    }
}

int jobs_new(uv_loop_t *loop, const hubd_config_t *cfg, store_t *store, db_t *db, tls_ctx_t *tls,
             jobs_t **out)
{
    jobs_t *js = calloc(1, sizeof *js);
    if (!js)
        return -ENOMEM;
    js->loop = loop;
    js->cfg = cfg;
    js->store = store;
    js->db = db;
    /* Keep enough free buffers for every job's in-flight window. */
    unsigned keep = (unsigned)(cfg->max_inflight / cfg->read_buffer_size) * 2 + 8;
    bufpool_init(&js->pool, cfg->read_buffer_size, keep);
    int rc = http_client_new(loop, cfg, &js->pool, tls, &js->http);
    if (rc) {
        free(js);
        return rc;
    }
    if ((rc = verifier_start(loop, cfg, &js->work, store, db, &js->verifier)) != 0) {
        js->verifier = NULL; /* only this feature is lost: said so, and hubd serves */
        log_err("background verification not started: %s", strerror(-rc));
    }
    int r = cache_reserve_make(store); /* start-up: the loop does not run yet */
    if (r)
        log_warn("cannot keep room for removals on a full disk (%s/reserve): %s", store_dir(store),
                 strerror(-r));
    *out = js;
    return 0;
}

/* ---- eviction --------------------------------------------------------- */

/* The item: down to max_cache_size less what the running downloads will
 * hold, and (with a floor) to what leaves min_free_space free once they
 * have written the rest. */
static void evict_work(uv_work_t *req)
{
    jobs_t *js = req->data;
    uint64_t target = js->evict_target, total;
    struct statvfs v;
    js->evict_lack = 0;
    if (statvfs(store_dir(js->store), &v) == 0) {
        uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
        uint64_t need = space_floor(&v, js->evict_floor, js->evict_floor_pct) + js->evict_remaining;
        if (avail < need && db_total_size(js->db, js->evict_fence, &total) == 0) {
            uint64_t lack = need - avail;
            if (lack <= total) {
                if (total - lack < target)
                    target = total - lack;
            } else {
                /* Other data holds the room: emptying the cache would not
                 * make it, so nothing goes for it (the download fails). */
                js->evict_lack = lack;
            }
        }
    }
    memset(&js->evict_res, 0, sizeof js->evict_res);
    js->evict_rc = 0;
    if (target != UINT64_MAX)
        js->evict_rc =
            cache_evict(js->store, js->db, target, js->evict_keep[0] ? js->evict_keep : NULL,
                        js->evict_fence, &js->evict_res);
    if (js->evict_res.evicted)
        cache_reserve_make(js->store); /* a full disk may have taken it */
    /* What is left now, for the downloads that wait on this run. */
    js->evict_short_after =
        statvfs(store_dir(js->store), &v) == 0 &&
        (uint64_t)v.f_bavail * v.f_frsize <
            space_floor(&v, js->evict_floor, js->evict_floor_pct) + js->evict_remaining;
}

static void evict_start(jobs_t *js, const char *keep);

/* A blob larger than the whole cache may hold: its waiters have it (each
 * DONE passed an fd), then it goes, instead of every other blob. */
typedef struct drop_req {
    uv_work_t work;
    jobs_t *js;
    char sha[65];
    int rc;
} drop_req_t;

static void drop_work(uv_work_t *w)
{
    drop_req_t *d = w->data;
    d->rc = cache_drop(d->js->store, d->js->db, d->sha);
}

static void after_drop(uv_work_t *w, int status)
{
    drop_req_t *d = w->data;
    (void)status;
    if (d->rc == 0) {
        d->js->stats.evicted++;
        log_info("blob %s is larger than max_cache_size: handed out, not kept", d->sha);
    }
    jobs_release(d->js);
    free(d);
}

static void jobs_drop_oversized(jobs_t *js, const char *sha, uint64_t size)
{
    drop_req_t *d = calloc(1, sizeof *d);
    log_debug("blob %s: %llu bytes, over max_cache_size", sha, (unsigned long long)size);
    if (!d)
        return; /* it stays until the next eviction */
    d->js = js;
    snprintf(d->sha, sizeof d->sha, "%s", sha);
    d->work.data = d;
    worktrack_hold(&js->work);
    uv_queue_work(js->loop, &d->work, drop_work, after_drop);
}

static void after_evict(uv_work_t *req, int status)
{
    jobs_t *js = req->data;
    (void)status;
    js->evict_busy = 0;
    js->evict_runs++;
    js->stats.evicted += js->evict_res.evicted;
    js->stats.evicted_bytes += js->evict_res.freed;
    if (js->evict_rc)
        log_warn("eviction stopped: %s", strerror(-js->evict_rc));
    uint64_t now = uv_now(js->loop);
    if (js->evict_lack && (!js->lack_logged || now - js->lack_logged > 60000)) {
        js->lack_logged = now;
        log_warn("the cache's file system lacks %llu bytes for min_free_space and the downloads "
                 "in progress, more than the whole cache holds: nothing evicted for it (other "
                 "files hold the room; free some, or lower min_free_space)",
                 (unsigned long long)js->evict_lack);
    }
    /* Downloads short of room that waited for a run started after they
     * asked: still short, they fail; else they go on (to their commit). */
    for (job_t *j = js->active, *next; j && !js->shutting_down; j = next) {
        next = j->next; /* job_fail unlists j */
        if (!j->short_wait || js->evict_runs <= j->short_runs)
            continue;
        if (js->evict_short_after) {
            job_fail(j, "no_space", short_of_space_msg);
        } else {
            j->short_wait = 0;
            job_pump(j);
        }
    }
    if (js->evict_again && !js->shutting_down) {
        js->evict_again = 0;
        evict_start(js, js->next_keep[0] ? js->next_keep : NULL);
    }
    jobs_release(js);
}

/* What the running downloads will hold once done (each one's length when
 * known, else what it has so far), and what they have still to write. A
 * download larger than max_cache_size alone is left out: making room for
 * it would empty the cache for nothing (it is handed out, then dropped). */
static void jobs_inflight(const jobs_t *js, uint64_t *held, uint64_t *remaining)
{
    uint64_t max = js->cfg->max_cache_size;
    *held = *remaining = 0;
    for (const job_t *j = js->active; j; j = j->next) {
        uint64_t size =
            j->total >= 0 && (uint64_t)j->total > j->received ? (uint64_t)j->total : j->received;
        /* A committing one's row may be in the blobs' total already: it
         * must not count twice (its own blob would be evicted for it). */
        if ((max && size > max) || j->state == JOB_COMMITTING)
            continue;
        *held += size;
        *remaining += size - j->received;
    }
}

/* Starts a run, with the targets as of now (the item gets its own copy). */
static void evict_start(jobs_t *js, const char *keep)
{
    const hubd_config_t *cfg = js->cfg;
    uint64_t held, remaining;
    jobs_inflight(js, &held, &remaining);
    js->evict_target = !cfg->max_cache_size         ? UINT64_MAX
                       : held < cfg->max_cache_size ? cfg->max_cache_size - held
                                                    : 0;
    js->evict_remaining = remaining;
    /* Blobs recorded after this point belong to jobs counted in `held`
     * (or to commits counted in neither, which is safe): not this run's. */
    js->evict_fence = db_use_seq(js->db);
    js->evict_floor = cfg->min_free_space;
    js->evict_floor_pct = cfg->min_free_percent;
    snprintf(js->evict_keep, sizeof js->evict_keep, "%s", keep ? keep : "");
    js->evict_busy = 1;
    worktrack_hold(&js->work); /* jobs_shutdown waits for it */
    js->evict_work.data = js;
    uv_queue_work(js->loop, &js->evict_work, evict_work, after_evict);
}

/* force: a download is short of room, whatever the settings (a full disk
 * is a floor of 0). */
static void jobs_evict_run(jobs_t *js, const char *keep, int force)
{
    const hubd_config_t *cfg = js->cfg;
    if (js->shutting_down ||
        (!force && !cfg->max_cache_size && !cfg->min_free_space && !cfg->min_free_percent))
        return;
    if (!js->evict_busy) {
        evict_start(js, keep);
        return;
    }
    /* The run in flight may have seen an older state: run once more after
     * it (its targets are taken then). */
    if (keep)
        snprintf(js->next_keep, sizeof js->next_keep, "%s", keep);
    else if (!js->evict_again)
        js->next_keep[0] = '\0';
    js->evict_again = 1;
}

void jobs_evict(jobs_t *js, const char *keep)
{
    jobs_evict_run(js, keep, 0);
}

void jobs_reload(jobs_t *js)
{
    jobs_evict(js, NULL);
    jobs_start_queued(js);
}

worktrack_t *jobs_work(jobs_t *js)
{
    return &js->work;
}

void jobs_set_first_id(jobs_t *js, uint64_t above)
{
    if (js->next_id < above)
        js->next_id = above;
}

void jobs_stop(jobs_t *js)
{
    js->shutting_down = 1;
    cache_cancel_all();
    if (js->verifier) {
        verifier_stop(js->verifier);
        js->verifier = NULL;
    }
    while (js->queue_head)
        job_fail(js->queue_head, "shutting_down", "hubd is stopping");
    while (js->active)
        job_fail(js->active, "shutting_down", "hubd is stopping");
}

void jobs_shutdown(jobs_t *js, void (*done)(void *arg), void *arg)
{
    jobs_stop(js);
    js->shutdown_cb = done;
    js->shutdown_arg = arg;
    worktrack_drain(&js->work, on_jobs_drained, js);
}
