/* pipeline: the body's way to disk, on the loop thread and in the pool.
 *
 * Body slices point into pooled read buffers (bufpool.h); they are grouped
 * into batches of about read_buffer_size. Each batch goes through two work
 * items in the pool: a hash item (SHA-256, sequential, owns job->sha) and a
 * write item (pwritev at the batch's offset, owns job->fd). At most one hash
 * item and one write item per job are in flight, so neither needs a lock,
 * and the two run on different cores: measured on the project machine,
 * hashing (~1.8 GB/s with SHA-NI) and page-cache writes cost about the same,
 * so doing both in one item would halve the throughput. A batch is freed
 * when both have seen it. Above max_inflight queued bytes the job stops
 * reading. Checkpoints (fdatasync, then the partials row) bound what a crash
 * can cost.
 *
 * A segmented download (segments.h) adds its lanes' batches, at their own
 * offsets: written like the others, but not hashed from memory (they are
 * ahead of the hash); a prefix hash item reads them back from the page
 * cache once the bytes before them are in (written without a gap from 0,
 * and the main transfer's bytes hashed). */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

static void after_hash(uv_work_t *req, int status);
static void after_hash_prefix(uv_work_t *req, int status);
static void after_write(uv_work_t *req, int status);
static void after_sync(uv_work_t *req, int status);

/* ---- decisions: pure functions of their arguments (test_pipeline.c) ---- */

int pipeline_batch_add(batch_t *b, const buf_t *buf, const char *p, size_t n)
{
    assert(b->niov < BATCH_MAX_IOV && b->nbufs < BATCH_MAX_IOV); /* not full: sealed before */
    int fresh = b->nbufs == 0 || b->bufs[b->nbufs - 1] != buf;
    if (fresh)
        b->bufs[b->nbufs++] = (buf_t *)buf;
    struct iovec *last = b->niov ? &b->iov[b->niov - 1] : NULL;
    if (last && (const char *)last->iov_base + last->iov_len == p)
        last->iov_len += n; /* contiguous in the same buffer: one iovec */
    else
        b->iov[b->niov++] = (struct iovec){(void *)p, n};
    b->bytes += n;
    return fresh;
}

int pipeline_batch_full(const batch_t *b, size_t read_buffer_size)
{
    return b->bytes >= read_buffer_size || b->niov == BATCH_MAX_IOV || b->nbufs == BATCH_MAX_IOV;
}

int pipeline_batch_stale(const batch_t *b, uint64_t now)
{
    return b && b->bytes && now - b->t0 >= BATCH_MAX_AGE_MS;
}

int pipeline_should_pause(uint64_t queued, size_t max_inflight)
{
    return queued > max_inflight;
}

int pipeline_should_resume(uint64_t queued, size_t max_inflight)
{
    return queued <= max_inflight / 2;
}

int pipeline_checkpoint_due(uint64_t on_disk, uint64_t durable, uint64_t now, uint64_t t_ckpt)
{
    return on_disk > durable &&
           (on_disk - durable >= CHECKPOINT_BYTES || now - t_ckpt >= CHECKPOINT_MS);
}

int pipeline_writeback_due(uint64_t written, uint64_t flushed)
{
    return written - flushed >= WRITEBACK_CHUNK;
}

int pipeline_take_batches(batch_t **next, batch_t **first)
{
    int n = 0;
    *first = *next;
    while (*next && n < WORK_MAX_BATCHES) {
        *next = (*next)->next;
        n++;
    }
    return n;
}

uint64_t pipeline_room_wanted(const batch_t *first, int count, int64_t total)
{
    assert(first && count > 0); /* a write item's batches */
    uint64_t want = 0;
    const batch_t *c = first;
    for (int i = 0; i < count; i++, c = i < count ? c->next : c)
        want += c->bytes;
    if (total >= 0 && (uint64_t)total > first->offset + want)
        want = (uint64_t)total - first->offset;
    return want;
}

static void hash_work(uv_work_t *req)
{
    job_t *job = req->data;
    batch_t *b = job->hash_first;
    for (int i = 0; i < job->hash_count; i++) {
        for (int k = 0; k < b->niov && !b->from_lane; k++)
            sha256_update(&job->sha, b->iov[k].iov_base, b->iov[k].iov_len);
        /* Not past the last one: the loop thread may be linking a new tail. */
        if (i + 1 < job->hash_count)
            b = b->next;
    }
}

/* The free-space floor of a file system: min_free_space, or its share. */
uint64_t job_space_floor(const struct statvfs *v, uint64_t bytes, unsigned pct)
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
        uint64_t want = pipeline_room_wanted(job->write_first, job->write_count, job->total_hint);
        job->space_short = (uint64_t)v.f_bavail * v.f_frsize <
                           job_space_floor(&v, job->floor_hint, job->floor_pct_hint) + want;
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
        if (b->chunk) /* segmented: the loop counts the prefix (after_write) */
            sync_file_range(job->fd, (off_t)b->offset, (off_t)b->bytes, SYNC_FILE_RANGE_WRITE);
        else
            job->written = b->offset + b->bytes;
        if (i + 1 < job->write_count) /* as in hash_work */
            b = b->next;
    }
    /* Start writeback now, so the fsync at commit finds little left to do
     * and the disk works while the network does. Advisory: errors ignored. */
    if (pipeline_writeback_due(job->written, job->flushed)) {
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
        db_save_partial(job->js->db, job->part_id, job->key, job->cred_tag, &job->ckpt) == 0) {
        job->ckpt_done = job->ckpt.durable;
        job->ckpt_saved = 1;
    }
}

static void batch_free(jobs_t *js, batch_t *b)
{
    for (int i = 0; i < b->nbufs; i++)
        buf_unref(&js->pool, b->bufs[i]);
    free(b);
}

void job_add_batch(job_t *job, batch_t *b)
{
    assert(b && !b->next && b->bytes > 0); /* sealed, with bytes, not yet linked */
    if (job->tail)
        job->tail->next = b;
    else
        job->head = b;
    job->tail = b;
    if (!job->hash_next && !b->from_lane)
        job->hash_next = b;
    if (!job->write_next)
        job->write_next = b;
}

void job_seal(job_t *job)
{
    batch_t *b = job->cur;
    if (!b)
        return;
    job->cur = NULL;
    b->offset = job->sealed;
    b->chunk = segs_main_chunk(job);
    job->sealed += b->bytes;
    job_add_batch(job, b);
}

/* Segmented: the hash follows the written prefix. Once the main
 * transfer's bytes are hashed from memory, the rest is read back from the
 * file (the page cache), at most 64 MiB an item. */
static void hash_prefix_work(uv_work_t *req)
{
    job_t *job = req->data;
    job->hd_rc = job_hash_file(job->hd_fd, job->hd_from, job->hd_len, &job->sha);
}

static int start_prefix_hash(job_t *job)
{
    if (!job->seg || (job->items & JOB_ITEM_HASH) || job->cur || segs_main_chunk(job) ||
        job->hashed < job->sealed || job->fd < 0)
        return 0;
    uint64_t prefix = segs_prefix(job);
    if (prefix <= job->hashed)
        return 0;
    job->hd_fd = job->fd;
    job->hd_from = job->hashed;
    job->hd_len = prefix - job->hashed < (64u << 20) ? prefix - job->hashed : (64u << 20);
    job->items |= JOB_ITEM_HASH;
    job->hash_work.data = job;
    uv_queue_work(job->js->loop, &job->hash_work, hash_prefix_work, after_hash_prefix);
    return 1;
}

/* Starts a checkpoint of what is on disk when one is due and none is in
 * flight (and the commit is not about to make it moot). Only a partial with
 * a validator can be resumed, so only such is recorded. */
static void job_checkpoint(job_t *job)
{
    uint64_t now = uv_now(job->js->loop);
    /* Segmented: what counts is every byte written, the ranges past the
     * prefix too. */
    uint64_t on_disk = job->seg ? segs_written_sum(job) : job->on_disk;
    uint64_t durable = job->seg ? job->durable_sum : job->durable;
    if ((job->items & JOB_ITEM_SYNC) || job->state == JOB_RESTARTING ||
        job->state == JOB_BODY_DONE || job->state == JOB_COMMITTING || job->state == JOB_DONE ||
        job->state == JOB_FAILED || !job_validator(job) ||
        !pipeline_checkpoint_due(on_disk, durable, now, job->t_ckpt))
        return;
    db_partial_free(&job->ckpt);
    job->ckpt.etag = job->etag ? strdup(job->etag) : NULL;
    job->ckpt.last_modified = job->last_modified ? strdup(job->last_modified) : NULL;
    if ((job->etag && !job->ckpt.etag) || (job->last_modified && !job->ckpt.last_modified))
        return; /* no memory: try again after the next write */
    job->ckpt.total = job->total;
    job->ckpt.durable = job->on_disk;
    job->ckpt.ranges = job->seg ? segs_ranges(job) : NULL; /* NULL: the prefix alone, safe */
    job->ckpt_sum = on_disk;
    job->t_ckpt = now;
    job->items |= JOB_ITEM_SYNC;
    job->sync_work.data = job;
    uv_queue_work(job->js->loop, &job->sync_work, sync_work, after_sync);
}

static void submit_work(job_t *job)
{
    uv_loop_t *loop = job->js->loop;
    while (job->hash_next && job->hash_next->from_lane) /* hashed from the file, later */
        job->hash_next = job->hash_next->next;
    if (!(job->items & JOB_ITEM_HASH) && job->hash_next) {
        assert(!job->hash_next->hashed); /* each batch is hashed once, in order */
        job->hash_count = pipeline_take_batches(&job->hash_next, &job->hash_first);
        job->items |= JOB_ITEM_HASH;
        job->hash_work.data = job;
        uv_queue_work(loop, &job->hash_work, hash_work, after_hash);
    } else {
        start_prefix_hash(job);
    }
    if (!(job->items & JOB_ITEM_WRITE) && job->write_next) {
        assert(!job->write_next->written);
        job->write_count = pipeline_take_batches(&job->write_next, &job->write_first);
        job->items |= JOB_ITEM_WRITE;
        job->total_hint = job->total; /* the write item's copies, handed over with it */
        job->floor_hint = job->js->cfg->min_free_space;
        job->floor_pct_hint = job->js->cfg->min_free_percent;
        job->flags |= JOB_TMP_MADE;
        job->write_work.data = job;
        uv_queue_work(loop, &job->write_work, write_work, after_write);
    }
}

/* Frees every batch, sealed or not, hashed or not. Only with no hash or
 * write item in flight (they point into the batches). */
void job_drop_batches(job_t *job)
{
    assert(!(job->items & (JOB_ITEM_HASH | JOB_ITEM_WRITE))); /* they point into the batches */
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

/* The one function that moves the pipeline: frees finished batches, starts
 * work items, applies backpressure, and starts the commit at the end. */
void job_pump(job_t *job)
{
    if (job->state == JOB_FAILED) {
        job_cleanup(job);
        return;
    }
    if (job->state == JOB_RESTARTING) {
        /* Once no item of the old attempt is in flight, drop all it left and
         * start the hash and the file over; until then submit nothing. */
        if (job->items & JOB_ITEMS_DATA)
            return;
        job_drop_batches(job);
        segs_reset(job);
        sha256_init(&job->sha);
        job->received = job->sealed = job->queued_bytes = job->hashed = 0;
        job->written = job->flushed = job->last_done = 0;
        job->durable = job->on_disk = job->durable_sum =
            0; /* the truncating write forgets the row */
        job->total = -1;
        job->truncate_file = (job->flags & JOB_TMP_MADE) != 0;
        job_notify_written(job); /* written (and durable) are 0 again */
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
    if ((job->pause & PAUSE_BACKPRESSURE) &&
        pipeline_should_resume(job->queued_bytes, job->js->cfg->max_inflight))
        job_set_pause(job, PAUSE_BACKPRESSURE, 0);
    job_checkpoint(job);
    segs_pump(job); /* the hash moved on: chunks within the budget again */
    /* Not while short of room: the eviction run it asked for decides
     * (after_evict) whether there is room for it to be kept. A segmented
     * download also waits for the hash to reach its end. */
    if (job->state == JOB_BODY_DONE && !job->head && !job->cur && !(job->items & JOB_ITEMS_DATA) &&
        !(job->flags & JOB_SHORT_WAIT) && (!job->seg || job->hashed == (uint64_t)job->total))
        job_start_commit(job);
}

static void after_hash(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status; /* never cancelled: uv_cancel is not used on these */
    batch_t *b = job->hash_first;
    for (int i = 0; i < job->hash_count; i++, b = b->next) {
        if (!b->from_lane)
            job->hashed += b->bytes;
        b->hashed = 1;
    }
    job->items &= ~JOB_ITEM_HASH;
    job_pump(job);
}

static void after_hash_prefix(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->items &= ~JOB_ITEM_HASH;
    if (job->hd_rc && job->state != JOB_FAILED) {
        char msg[200];
        snprintf(msg, sizeof msg, "reading the download back for its hash: %s",
                 strerror(-job->hd_rc));
        job_fail(job, "io", msg);
        return;
    }
    job->hashed += job->hd_len;
    job_pump(job);
}

/* The write item found that the download would eat into min_free_space:
 * ask eviction for room, and fail the job (no_space) when a run started
 * since could not make it. Returns 1 when the job failed. */
const char job_short_of_space_msg[] =
    "the cache's file system has too little room left for the download and min_free_space, "
    "and evicting what can be evicted does not make it";

static int job_short_of_space(job_t *job)
{
    jobs_t *js = job->js;
    if (!job->space_short || job->state == JOB_FAILED) {
        job->flags &= ~JOB_SHORT_WAIT;
        return 0;
    }
    if (!(job->flags & JOB_SHORT_WAIT)) {
        job->flags |= JOB_SHORT_WAIT;
        job->short_runs = js->evict_runs + (js->evict_busy ? 1 : 0); /* one that starts later */
        jobs_evict_run(js, NULL, 1);
        return 0;
    }
    if (js->evict_runs <= job->short_runs || js->shutting_down)
        return 0;
    job_fail(job, "no_space", job_short_of_space_msg);
    return 1;
}

static void after_write(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    batch_t *b = job->write_first;
    for (int i = 0; i < job->write_count; i++, b = b->next) {
        b->written = 1;
        if (b->chunk && !job->write_err)
            segs_written(job, b);
    }
    job->items &= ~JOB_ITEM_WRITE;
    if (job->seg) /* what a reader may follow: the bytes without a gap from 0 */
        job->written = segs_prefix(job);
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
    /* Not the old attempt's bytes while restarting: they are dropped, and
     * the restart tells written 0 (job_pump). */
    if (job->state != JOB_FAILED && job->state != JOB_RESTARTING)
        job_notify_written(job);
    job_pump(job);
}

static void after_sync(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->items &= ~JOB_ITEM_SYNC;
    db_partial_free(&job->ckpt);
    if (job->ckpt_saved) {
        job->ckpt_saved = 0;
        job->durable_sum = job->ckpt_sum;
    }
    if (job->ckpt_done) {
        job->durable = job->ckpt_done;
        job->ckpt_done = 0;
        log_debug("job %llu: checkpoint: %llu bytes durable", (unsigned long long)job->id,
                  (unsigned long long)job->durable);
        if (!job->sync_err && job->state != JOB_FAILED && job->state != JOB_RESTARTING)
            job_notify_written(job);
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

/* n body bytes at p, in the pooled read buffer buf: appended to the batch
 * being filled (a reference to buf held), which is sealed and handed on
 * once full; above max_inflight queued bytes reading stops. */
void job_take_body(job_t *job, buf_t *buf, const char *p, size_t n)
{
    jobs_t *js = job->js;
    js->stats.bytes_from_origin += n;
    job->received += n;
    segs_main_body(job, n);
    if (job_too_large(job, (int64_t)job->received)) /* chunked, or a lying length */
        return;
    job->queued_bytes += n;
    batch_t *b = job->cur;
    if (!b) {
        if (!(b = job->cur = calloc(1, sizeof *b))) {
            job_fail(job, "internal", "out of memory");
            return;
        }
        b->t0 = uv_now(js->loop);
    }
    if (pipeline_batch_add(b, buf, p, n))
        buf_ref(buf); /* the batch's reference */
    if (pipeline_batch_full(b, js->cfg->read_buffer_size)) {
        job_seal(job);
        job_pump(job);
    }
    if (!(job->pause & PAUSE_BACKPRESSURE) &&
        pipeline_should_pause(job->queued_bytes, js->cfg->max_inflight) && job->state == JOB_BODY) {
        /* Seal and hand on what we hold first: the work item that then
         * completes is what resumes us (job_pump), so pausing cannot stall. */
        job_seal(job);
        job_pump(job);
        job_set_pause(job, PAUSE_BACKPRESSURE, 1);
    }
    jobs_rate_take(js, job, n);
}

void job_set_pause(job_t *job, unsigned reason, int on)
{
    unsigned before = job->pause;
    job->pause = on ? before | reason : before & ~reason;
    if (!before == !job->pause)
        return;
    if (job->pause)
        job->flags |= JOB_PAUSED;
    else
        job->flags &= ~JOB_PAUSED;
    transfer_set_paused(&job->xfer, job->pause != 0);
    segs_set_paused(job, job->pause != 0);
}

void job_seal_stale(job_t *job, uint64_t now)
{
    if (job->state != JOB_BODY)
        return;
    int sealed = segs_seal_stale(job, now);
    if (pipeline_batch_stale(job->cur, now)) {
        job_seal(job);
        sealed = 1;
    }
    if (sealed)
        job_pump(job);
}
