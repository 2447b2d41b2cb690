/* pipeline: the body's way to disk (see pipeline.h). The batches, the hash,
 * prefix hash, write and checkpoint items, backpressure; each item's
 * completion applies its effects to the counters, then reports to the
 * owner (pipeline_ops_t). Loop thread, and the items in the pool. */
#include "pipeline.h"
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

void pipeline_batch_init(batch_t *b)
{
    b->iov = b->iov_in;
    b->bufs = b->bufs_in;
    b->room = BATCH_FIRST_IOV;
}

int pipeline_batch_reserve(batch_t *b)
{
    assert(b->niov < BATCH_MAX_IOV && b->nbufs < BATCH_MAX_IOV); /* not full: sealed before */
    if (b->niov < b->room && b->nbufs < b->room)
        return 0;
    struct iovec *iov = malloc(BATCH_MAX_IOV * (sizeof *iov + sizeof *b->bufs));
    if (!iov)
        return -ENOMEM;
    buf_t **bufs = (buf_t **)(iov + BATCH_MAX_IOV);
    memcpy(iov, b->iov, sizeof *iov * (size_t)b->niov);
    memcpy(bufs, b->bufs, sizeof *bufs * (size_t)b->nbufs);
    pipeline_batch_release(b);
    b->iov = iov;
    b->bufs = bufs;
    b->room = BATCH_MAX_IOV;
    return 0;
}

void pipeline_batch_release(batch_t *b)
{
    if (b->iov != b->iov_in)
        free(b->iov);
    pipeline_batch_init(b);
}

int pipeline_batch_add(batch_t *b, const buf_t *buf, const char *p, size_t n)
{
    assert(b->niov < b->room && b->nbufs < b->room); /* pipeline_batch_reserve */
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
           (on_disk - durable >= CHECKPOINT_BYTES ||
            (now - t_ckpt >= CHECKPOINT_MS && on_disk - durable >= CHECKPOINT_MIN_BYTES));
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

void pipeline_init(pipeline_t *p, uv_loop_t *loop, const hubd_config_t *cfg, store_t *store,
                   db_t *db, bufpool_t *pool, uint64_t *from_origin, const pipeline_ops_t *ops,
                   void *owner)
{
    memset(p, 0, sizeof *p);
    p->loop = loop;
    p->cfg = cfg;
    p->store = store;
    p->db = db;
    p->pool = pool;
    p->from_origin = from_origin;
    p->ops = ops;
    p->owner = owner;
    p->fd = -1;
    atomic_init(&p->abandoned, 0);
    sha256_init(&p->sha);
}

uint64_t pipeline_space_floor(const struct statvfs *v, uint64_t bytes, unsigned pct)
{
    return pct ? (uint64_t)v->f_blocks * v->f_frsize / 100 * pct : bytes;
}

int pipeline_hash_file(int fd, uint64_t from, uint64_t len, sha256_ctx_t *sha)
{
    uint8_t *buf = malloc(REHASH_CHUNK);
    if (!buf)
        return -ENOMEM;
    posix_fadvise(fd, (off_t)from, (off_t)len, POSIX_FADV_SEQUENTIAL);
    uint64_t off = from, end = from + len;
    int rc = 0;
    while (off < end) {
        size_t want = end - off < REHASH_CHUNK ? (size_t)(end - off) : REHASH_CHUNK;
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

static void hash_work(uv_work_t *req)
{
    pipeline_t *p = req->data;
    batch_t *b = p->hash_first;
    for (int i = 0; i < p->hash_count; i++) {
        for (int k = 0; k < b->niov && !b->from_file; k++)
            sha256_update(&p->sha, b->iov[k].iov_base, b->iov[k].iov_len);
        /* Not past the last one: the loop thread may be linking a new tail. */
        if (i + 1 < p->hash_count)
            b = b->next;
    }
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
    pipeline_t *p = req->data;
    if (p->write_err)
        return;
    if (p->fd < 0) {
        int rc = store_tmp_create(p->store, p->part_id, &p->fd);
        if (rc) {
            p->write_err = rc;
            return;
        }
        p->fresh_file = 1;
    }
    /* Room: after this item (and, the length known, after the rest of the
     * download) the file system must keep min_free_space (or just not be
     * full). Only flagged: the owner asks eviction for room first, and
     * fails the download if a run that started later could not make it;
     * so a download that cannot fit fails before writing most of it, and
     * one that can is not failed while eviction is still freeing room. */
    struct statvfs v;
    p->space_short = 0;
    if (fstatvfs(p->fd, &v) == 0) {
        uint64_t want = pipeline_room_wanted(p->write_first, p->write_count, p->total_hint);
        p->space_short = (uint64_t)v.f_bavail * v.f_frsize <
                         pipeline_space_floor(&v, p->floor_hint, p->floor_pct_hint) + want;
    }
    if (p->truncate_file) { /* a restart from byte 0: drop the old bytes */
        p->truncate_file = 0;
        if (ftruncate(p->fd, 0)) {
            p->write_err = -errno;
            return;
        }
        db_forget_partial(p->db, p->part_id); /* it described those */
        p->fresh_file = 1;
    }
    batch_t *b = p->write_first;
    for (int i = 0; i < p->write_count; i++) {
        int rc = write_batch(p->fd, b);
        if (rc) {
            p->write_err = rc;
            return;
        }
        if (b->tag) /* segmented: the loop counts the prefix (after_write) */
            sync_file_range(p->fd, (off_t)b->offset, (off_t)b->bytes, SYNC_FILE_RANGE_WRITE);
        else
            p->written = b->offset + b->bytes;
        if (i + 1 < p->write_count) /* as in hash_work */
            b = b->next;
    }
    /* Start writeback now, so the fsync at commit finds little left to do
     * and the disk works while the network does. Advisory: errors ignored. */
    if (pipeline_writeback_due(p->written, p->flushed)) {
        sync_file_range(p->fd, (off_t)p->flushed, (off_t)(p->written - p->flushed),
                        SYNC_FILE_RANGE_WRITE);
        p->flushed = p->written;
    }
}

/* The checkpoint item. It runs beside the write item on the same fd (never
 * closed or truncated while it is in flight): fdatasync makes durable at
 * least the ckpt.durable bytes written before it started. Data first, then
 * the row: the row never promises bytes that a crash could take back. */
static void sync_work(uv_work_t *req)
{
    pipeline_t *p = req->data;
    if (fdatasync(p->fd)) {
        p->sync_err = -errno; /* pages may be lost: the download is not sound */
        return;
    }
    /* A download that failed meanwhile may already have a successor for
     * its URL: its row must not push the successor's aside. */
    if (!atomic_load(&p->abandoned) &&
        db_save_partial(p->db, p->part_id, p->key, p->cred_tag, &p->ckpt) == 0) {
        p->ckpt_done = p->ckpt.durable;
        p->ckpt_saved = 1;
    }
}

static void batch_free(pipeline_t *p, batch_t *b)
{
    for (int i = 0; i < b->nbufs; i++)
        buf_unref(p->pool, b->bufs[i]);
    pipeline_batch_release(b);
    free(b);
}

static void add_batch(pipeline_t *p, batch_t *b)
{
    assert(b && !b->next && b->bytes > 0); /* sealed, with bytes, not yet linked */
    if (p->tail)
        p->tail->next = b;
    else
        p->head = b;
    p->tail = b;
    if (!p->hash_next && !b->from_file)
        p->hash_next = b;
    if (!p->write_next)
        p->write_next = b;
}

void pipeline_seal(pipeline_t *p, pipeline_cursor_t *c)
{
    batch_t *b = c->cur;
    if (!b)
        return;
    c->cur = NULL;
    b->tag = c->tag;
    if (c == &p->main) {
        b->offset = p->sealed;
        p->sealed += b->bytes;
    } else {
        b->offset = c->off;
        b->from_file = 1;
        b->hashed = 1; /* not by the memory hash item: by the prefix hash */
    }
    add_batch(p, b);
}

void pipeline_clock(pipeline_t *p, uint64_t now)
{
    p->t_ckpt = now;
}

void pipeline_segmented(pipeline_t *p, void *main_tag)
{
    pipeline_seal(p, &p->main);
    p->segmented = 1;
    p->main.tag = main_tag;
}

int pipeline_seal_stale(pipeline_t *p, pipeline_cursor_t *c, uint64_t now)
{
    if (!pipeline_batch_stale(c->cur, now))
        return 0;
    pipeline_seal(p, c);
    return 1;
}

/* Segmented: the hash follows the written prefix. Once the main cursor's
 * bytes are hashed from memory, the rest is read back from the file (the
 * page cache), at most 64 MiB an item. */
static void hash_prefix_work(uv_work_t *req)
{
    pipeline_t *p = req->data;
    p->hd_rc = pipeline_hash_file(p->hd_fd, p->hd_from, p->hd_len, &p->sha);
}

static void start_prefix_hash(pipeline_t *p)
{
    if (!p->segmented || (p->items & PIPE_HASH) || p->main.cur || p->main.tag ||
        p->hashed < p->sealed || p->fd < 0)
        return;
    uint64_t prefix = p->ops->prefix(p->owner);
    if (prefix <= p->hashed)
        return;
    p->hd_fd = p->fd;
    p->hd_from = p->hashed;
    p->hd_len = prefix - p->hashed < (64u << 20) ? prefix - p->hashed : (64u << 20);
    p->items |= PIPE_HASH;
    p->hash_work.data = p;
    uv_queue_work(p->loop, &p->hash_work, hash_prefix_work, after_hash_prefix);
}

int pipeline_checkpoint_wanted(const pipeline_t *p, uint64_t on_disk_sum, uint64_t durable_sum,
                               uint64_t now)
{
    return !(p->items & PIPE_SYNC) &&
           pipeline_checkpoint_due(on_disk_sum, durable_sum, now, p->t_ckpt);
}

void pipeline_checkpoint(pipeline_t *p, db_partial_t *row, uint64_t on_disk_sum, uint64_t now)
{
    assert(!(p->items & PIPE_SYNC) && p->fd >= 0); /* one at a time, on a file written to */
    db_partial_free(&p->ckpt);
    p->ckpt = *row;
    p->ckpt.durable = p->on_disk;
    memset(row, 0, sizeof *row);
    p->ckpt_sum = on_disk_sum;
    p->t_ckpt = now;
    p->items |= PIPE_SYNC;
    p->sync_work.data = p;
    uv_queue_work(p->loop, &p->sync_work, sync_work, after_sync);
}

/* A batch this small is hashed here, on the loop: a pool item's round
 * trip (two thread wake-ups) costs more CPU than its hash (a few us with
 * SHA-NI). A small file's body then needs one item, its write. In order:
 * only when no hash item is in flight. */
#define HASH_ON_LOOP_MAX (16u << 10)

static void skip_from_file(pipeline_t *p)
{
    while (p->hash_next && p->hash_next->from_file) /* hashed from the file, later */
        p->hash_next = p->hash_next->next;
}

static void hash_small_batches(pipeline_t *p)
{
    for (skip_from_file(p);
         !(p->items & PIPE_HASH) && p->hash_next && p->hash_next->bytes <= HASH_ON_LOOP_MAX;
         skip_from_file(p)) {
        batch_t *b = p->hash_next;
        assert(!b->hashed);
        for (int k = 0; k < b->niov; k++)
            sha256_update(&p->sha, b->iov[k].iov_base, b->iov[k].iov_len);
        b->hashed = 1;
        p->hashed += b->bytes;
        p->hash_next = b->next;
    }
}

static void submit_work(pipeline_t *p)
{
    hash_small_batches(p);
    if (!(p->items & PIPE_HASH) && p->hash_next) {
        assert(!p->hash_next->hashed); /* each batch is hashed once, in order */
        p->hash_count = pipeline_take_batches(&p->hash_next, &p->hash_first);
        p->items |= PIPE_HASH;
        p->hash_work.data = p;
        uv_queue_work(p->loop, &p->hash_work, hash_work, after_hash);
    } else {
        start_prefix_hash(p);
    }
    if (!(p->items & PIPE_WRITE) && p->write_next) {
        assert(!p->write_next->written);
        p->write_count = pipeline_take_batches(&p->write_next, &p->write_first);
        p->items |= PIPE_WRITE;
        p->total_hint = *p->total; /* the write item's copies, handed over with it */
        p->floor_hint = p->cfg->min_free_space;
        p->floor_pct_hint = p->cfg->min_free_percent;
        p->tmp_made = 1;
        p->write_work.data = p;
        uv_queue_work(p->loop, &p->write_work, write_work, after_write);
    }
}

void pipeline_drop(pipeline_t *p)
{
    assert(!(p->items & (PIPE_HASH | PIPE_WRITE))); /* they point into the batches */
    if (p->main.cur) {
        batch_free(p, p->main.cur);
        p->main.cur = NULL;
    }
    while (p->head) {
        batch_t *b = p->head;
        p->head = b->next;
        batch_free(p, b);
    }
    p->tail = p->hash_next = p->write_next = NULL;
}

void pipeline_restart(pipeline_t *p)
{
    assert(!p->items && !p->head && !p->main.cur); /* idle, dropped */
    sha256_init(&p->sha);
    p->received = p->sealed = p->queued_bytes = p->hashed = 0;
    p->written = p->flushed = 0;
    p->durable = p->on_disk = p->durable_sum = 0; /* the truncating write forgets the row */
    p->segmented = 0;
    p->main.tag = NULL;
    p->truncate_file = p->tmp_made;
}

void pipeline_resumed(pipeline_t *p, int fd, uint64_t len)
{
    p->tmp_made = 1; /* the partial is there, to resume, park or discard */
    if (fd < 0) {    /* it could not be re-hashed: from byte 0 */
        sha256_init(&p->sha);
        return;
    }
    p->fd = fd;
    p->fresh_file = 0; /* it may hold ranges past its prefix */
    p->written = p->flushed = p->hashed = len;
    p->received = p->sealed = p->durable = p->on_disk = len;
}

void pipeline_resumed_ranges(pipeline_t *p, uint64_t extra, uint64_t prefix)
{
    p->received += extra;
    p->written = p->on_disk = prefix;
}

int pipeline_drained(const pipeline_t *p)
{
    return !p->head && !p->main.cur && !(p->items & (PIPE_HASH | PIPE_WRITE | PIPE_SYNC));
}

void pipeline_pump(pipeline_t *p)
{
    /* Before the frees: a small last batch whose write came back first is
     * hashed here and freed in this same pump. After them, it stayed
     * (hashed and written) at the head, and a job whose body was all in
     * had no other pump coming: it never reached its commit. */
    hash_small_batches(p);
    while (p->head && p->head->hashed && p->head->written) {
        batch_t *b = p->head;
        p->head = b->next;
        if (!p->head)
            p->tail = NULL;
        /* A lane's batch (hashed later, from the file) may be where the last
         * hash item left hash_next: the hash skips it, so it can go first. */
        if (p->hash_next == b)
            p->hash_next = b->next;
        assert(p->write_next != b); /* written: the write items are past it */
        p->queued_bytes -= b->bytes;
        batch_free(p, b);
    }
    submit_work(p);
    if (p->paused && pipeline_should_resume(p->queued_bytes, p->cfg->max_inflight)) {
        p->paused = 0;
        p->ops->set_paused(p->owner, 0);
    }
}

int pipeline_append(pipeline_t *p, pipeline_cursor_t *c, uint64_t off, buf_t *buf, const char *ptr,
                    size_t n)
{
    *p->from_origin += n;
    p->received += n;
    p->queued_bytes += n;
    batch_t *b = c->cur;
    if (!b) {
        if (!(b = c->cur = calloc(1, sizeof *b)))
            return -ENOMEM;
        pipeline_batch_init(b);
        b->t0 = uv_now(p->loop);
        c->off = off;
    }
    if (pipeline_batch_reserve(b))
        return -ENOMEM;
    if (pipeline_batch_add(b, buf, ptr, n))
        buf_ref(buf); /* the batch's reference */
    if (pipeline_batch_full(b, p->cfg->read_buffer_size)) {
        pipeline_seal(p, c);
        pipeline_pump(p);
    }
    if (!p->paused && pipeline_should_pause(p->queued_bytes, p->cfg->max_inflight)) {
        /* Seal and hand on what c holds first: the work item that then
         * completes is what starts reading again (pipeline_pump), so
         * pausing cannot stall. */
        pipeline_seal(p, c);
        pipeline_pump(p);
        p->paused = 1;
        p->ops->set_paused(p->owner, 1);
    }
    return 0;
}

static void after_hash(uv_work_t *req, int status)
{
    pipeline_t *p = req->data;
    (void)status; /* never cancelled: uv_cancel is not used on these */
    batch_t *b = p->hash_first;
    for (int i = 0; i < p->hash_count; i++, b = b->next) {
        if (!b->from_file)
            p->hashed += b->bytes;
        b->hashed = 1;
    }
    p->items &= ~PIPE_HASH;
    pipeline_done_t d = {.item = PIPE_HASH};
    p->ops->item_done(p->owner, &d);
}

static void after_hash_prefix(uv_work_t *req, int status)
{
    pipeline_t *p = req->data;
    (void)status;
    p->items &= ~PIPE_HASH;
    pipeline_done_t d = {.item = PIPE_HASH};
    char msg[200];
    if (p->hd_rc) {
        snprintf(msg, sizeof msg, "reading the download back for its hash: %s",
                 strerror(-p->hd_rc));
        d.code = "io";
        d.msg = msg;
    } else {
        p->hashed += p->hd_len;
    }
    p->ops->item_done(p->owner, &d);
}

static void after_write(uv_work_t *req, int status)
{
    pipeline_t *p = req->data;
    (void)status;
    batch_t *b = p->write_first;
    for (int i = 0; i < p->write_count; i++, b = b->next) {
        b->written = 1;
        if (b->tag && !p->write_err)
            p->ops->tag_written(p->owner, b->tag, b->bytes);
    }
    p->items &= ~PIPE_WRITE;
    if (p->segmented) /* what a reader may follow: the bytes without a gap from 0 */
        p->written = p->ops->prefix(p->owner);
    p->on_disk = p->written;
    pipeline_done_t d = {.item = PIPE_WRITE, .grew = 1};
    char msg[256];
    if (p->write_err) {
        snprintf(msg, sizeof msg, "writing the download to the cache: %s", strerror(-p->write_err));
        d.code = p->write_err == -ENOSPC ? "no_space" : "io";
        d.msg = msg;
    }
    p->ops->item_done(p->owner, &d);
}

static void after_sync(uv_work_t *req, int status)
{
    pipeline_t *p = req->data;
    (void)status;
    p->items &= ~PIPE_SYNC;
    db_partial_free(&p->ckpt);
    if (p->ckpt_saved) {
        p->ckpt_saved = 0;
        p->durable_sum = p->ckpt_sum;
    }
    pipeline_done_t d = {.item = PIPE_SYNC};
    if (p->ckpt_done) {
        p->durable = p->ckpt_done;
        p->ckpt_done = 0;
        log_debug("partial %llu: checkpoint: %llu bytes durable", (unsigned long long)p->part_id,
                  (unsigned long long)p->durable);
        d.grew = !p->sync_err;
    }
    char msg[256];
    if (p->sync_err) {
        snprintf(msg, sizeof msg, "syncing the download to the cache: %s", strerror(-p->sync_err));
        d.code = p->sync_err == -ENOSPC ? "no_space" : "io";
        d.msg = msg;
    }
    p->ops->item_done(p->owner, &d);
}
