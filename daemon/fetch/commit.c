/* commit: the pool items at the end (or the start) of a job's life, each
 * its own function: the commit (fsync, link, row), the discard of a failed
 * job's partial, the park of a stopped one (kept to resume), and the
 * re-hash of a recorded partial before resuming it. */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void after_commit(uv_work_t *req, int status);
static void after_rehash(uv_work_t *req, int status);
#include <unistd.h>

/* Reads back len bytes of the partial from byte from into the hash: a
 * recorded partial before resuming it, a segmented download's prefix. */
int job_hash_file(int fd, uint64_t from, uint64_t len, sha256_ctx_t *sha)
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

/* Owns sha and fd (it stands for both the hash and the write item). */
static void rehash_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    int fd = -1;
    int rc = store_tmp_reopen(js->store, job->part_id, job->resume_keep, &fd);
    if (!rc)
        rc = job_hash_file(fd, 0, job->resume_len, &job->sha);
    if (rc) {
        if (fd >= 0)
            close(fd);
        db_forget_partial(js->db, job->part_id); /* what it described is not there */
        job->rehash_rc = rc;
        return;
    }
    job->fd = fd;
    job->written = job->flushed = job->hashed = job->resume_len;
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
    /* The file is what was received, not a byte more: a partial resumed
     * with ranges, then fetched as one shorter stream, may have kept bytes
     * past the new end. */
    if (!rc && ftruncate(job->fd, (off_t)job->received))
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

/* The partial and its row go: row first, as in commit_work. */
static void discard_partial(job_t *job)
{
    db_forget_partial(job->js->db, job->part_id);
    store_discard(job->js->store, job->fd, job->part_id);
    job->fd = -1;
}

/* The discard item: a failed job's partial goes. */
static void discard_work(uv_work_t *req)
{
    discard_partial(req->data);
}

/* A job stopped by a shutdown keeps what it wrote: one last checkpoint, and
 * the next fetch of the URL (after a restart) resumes from it. Bytes that a
 * restart from zero has not yet replaced, or a failed write, are not kept. */
static void park_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    if (job->fd < 0 || job->truncate_file || job->write_err ||
        (job->written == 0 && !job->park_ranges)) {
        discard_partial(job);
        return;
    }
    if ((job->written > job->durable || job->park_ranges) && fdatasync(job->fd) == 0) {
        db_partial_t p = {.etag = job->etag,
                          .last_modified = job->last_modified,
                          .total = job->total,
                          .durable = job->written,
                          .ranges = job->park_ranges};
        if (db_save_partial(js->db, job->part_id, job->key, job->cred_tag, &p) == 0)
            job->durable = job->written;
    }
    close(job->fd);
    job->fd = -1;
}

/* Back from the discard or the park item: the job goes. */
static void after_cleanup(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    if ((job->flags & JOB_PARK) && job->durable > 0)
        log_info("job %llu: kept the first %llu bytes of %s to resume after the restart",
                 (unsigned long long)job->id, (unsigned long long)job->durable, job->key);
    job_free(job);
}

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
    for (list_node_t *n = list_first(&job->waiters); n; n = list_next(&job->waiters, n)) {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        if (job->uids)
            uid_add(job, w->uid);
        if (!w->expected[0])
            job->accept_any = 1;
        else if (job->accepts)
            memcpy(job->accepts[job->naccepts++], w->expected, 65);
    }
}

void job_start_commit(job_t *job)
{
    job_collect_waiters(job);
    job_set_state(job, JOB_COMMITTING);
    job->commit_work.data = job;
    job->items |= JOB_ITEM_COMMIT;
    uv_queue_work(job->js->loop, &job->commit_work, commit_work, after_commit);
}

/* After a failure: once no item is in flight, drop the batches and the
 * partial file, then free the job. */
void job_cleanup(job_t *job)
{
    if (job->items || (job->flags & JOB_CLEANING))
        return;
    job_drop_batches(job);
    job->flags |= JOB_CLEANING;
    if (!(job->flags & JOB_TMP_MADE) && job->fd < 0) {
        job_free(job);
        return;
    }
    if (job->flags & JOB_PARK) {
        if (job->seg) /* what the lanes wrote past the prefix is kept too */
            job->park_ranges = segs_ranges(job);
        job->park_work.data = job;
        uv_queue_work(job->js->loop, &job->park_work, park_work, after_cleanup);
    } else {
        job->discard_work.data = job;
        uv_queue_work(job->js->loop, &job->discard_work, discard_work, after_cleanup);
    }
}

static void after_commit(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->items &= ~JOB_ITEM_COMMIT;
    jobs_t *js = job->js;
    if (job->state == JOB_FAILED) { /* shut down while committing */
        if (job->ro_fd >= 0)
            close(job->ro_fd);
        job->flags &= ~JOB_TMP_MADE; /* the commit consumed or removed the partial */
        job_cleanup(job);
        return;
    }
    if (job->commit_rc == -EBADMSG) {
        /* Not kept: every waiter when the commit started expected another
         * digest. One that attached since and would have taken these
         * bytes did not fail: it goes on in a job of its own. */
        job->flags &= ~JOB_TMP_MADE;
        job_unlist(job);
        list_node_t *n, *tmp;
        list_foreach_safe(&job->waiters, n, tmp)
        {
            job_waiter_t *w = list_entry(n, job_waiter_t, node);
            if (!w->expected[0] || strcmp(w->expected, job->digest) == 0)
                job_waiter_restart(job, w);
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
        job->flags &= ~JOB_TMP_MADE;
        job_fail(job, job->commit_rc == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    uint64_t now = uv_now(js->loop);
    log_info("job %llu: stored %s (%llu bytes, sha256 %s) in %.3f s, of which %.3f s after the "
             "last byte (hash, write, fsync, commit)",
             (unsigned long long)job->id, job->key, (unsigned long long)job->received, job->digest,
             (double)(now - job->t_start) / 1000, (double)(now - job->t_body) / 1000);
    job_set_state(job, JOB_DONE);
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

void job_start_rehash(job_t *job)
{
    /* The file keeps its recorded ranges past the prefix too; ranges that
     * do not parse are dropped (only the prefix is trusted then). */
    int64_t keep = db_partial_keep(job->resume_len, job->resume_ranges);
    if (keep < 0 || (job->total >= 0 && keep > job->total)) {
        job->resume_ranges = (free(job->resume_ranges), NULL);
        keep = (int64_t)job->resume_len;
    }
    job->resume_keep = (uint64_t)keep;
    job_set_state(job, JOB_RESUMING);
    job->items |= JOB_ITEM_REHASH; /* the item owns sha and fd */
    job->flags |= JOB_TMP_MADE;
    job->rehash_work.data = job;
    uv_queue_work(job->js->loop, &job->rehash_work, rehash_work, after_rehash);
}

static void after_rehash(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->items &= ~JOB_ITEM_REHASH;
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
        job->resume_ranges = (free(job->resume_ranges), NULL);
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
        job_set_state(job, JOB_BODY_DONE);
        job->t_body = uv_now(job->js->loop);
        job_pump(job);
        return;
    }
    /* Ranges past the prefix: the lanes fetch the gaps. */
    if (job->resume_ranges && segs_resume(job, job->resume_ranges))
        return;
    job_begin_request(job);
}
