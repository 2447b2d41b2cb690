/* commit: the pool items at the end (or the start) of a job's life, each
 * its own function: the commit (fsync, link, row), the discard of a failed
 * job's partial, the park of a stopped one (kept to resume), and the
 * re-hash of a recorded partial before resuming it. Each reports back by
 * the completion callback job.c gives it; what the outcome means is
 * job.c's to decide. The items own the pipeline's sha and fd while in
 * flight (no hash or write item is). */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Owns sha and fd (it stands for both the hash and the write item). */
static void rehash_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    int fd = -1;
    int rc = store_tmp_reopen(js->store, job->part_id, job->resume_keep, &fd);
    if (!rc)
        rc = pipeline_hash_file(fd, 0, job->resume_len, &job->pipe.sha);
    if (rc) {
        if (fd >= 0)
            close(fd);
        db_forget_partial(js->db, job->part_id); /* what it described is not there */
        job->rehash_rc = rc;
        return;
    }
    job->rehash_fd = fd; /* the loop gives it to the pipeline (pipeline_resumed) */
}

static void commit_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    pipeline_t *p = &job->pipe;
    uint8_t digest[32];
    sha256_final(&p->sha, digest);
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
        store_discard(js->store, p->fd, job->part_id);
        p->fd = -1;
        job->commit_rc = -EBADMSG;
        return;
    }
    int rc = 0, created = 0;
    if (p->fd < 0) /* an empty body: no write item ever ran */
        rc = store_tmp_create(js->store, job->part_id, &p->fd);
    else if (p->truncate_file && ftruncate(p->fd, 0)) /* restarted, then empty */
        rc = -errno;
    /* The file is what was received, not a byte more: a partial resumed
     * with ranges, then fetched as one shorter stream, may have kept bytes
     * past the new end. */
    if (!rc && ftruncate(p->fd, (off_t)p->received))
        rc = -errno;
    /* The data's fsync before the lock: a large file's takes seconds, in
     * which hits, checkpoints and other commits would wait. */
    if (!rc && fsync(p->fd))
        rc = -errno;
    /* Link, row, the tmp name's unlink and the file's identity all under
     * the writer's lock: eviction (row, then unlink) cannot interleave, and
     * a hit, which compares the file with the recorded identity under the
     * same lock, never sees the link count (so the ctime) still changing. */
    db_lock(js->db);
    if (!rc) {
        rc = store_commit(js->store, p->fd, job->part_id, job->digest, job->cred_tag[0] != 0,
                          &job->ro_fd, &created);
        p->fd = -1;
    }
    if (!rc) {
        db_record_t rec = {
            .url = job->key,
            .cred_tag = job->cred_tag,
            .sha256 = job->digest,
            .size = p->received,
            .etag = job->file.etag,
            .last_modified = job->file.last_modified,
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
    store_discard(js->store, p->fd, job->part_id);
    p->fd = -1;
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
    store_discard(job->js->store, job->pipe.fd, job->part_id);
    job->pipe.fd = -1;
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
    pipeline_t *pp = &job->pipe;
    job->parked = pp->durable;
    if (pp->fd < 0 || pp->truncate_file || pp->write_err ||
        (pp->written == 0 && !job->park_ranges)) {
        job->parked = 0;
        discard_partial(job);
        return;
    }
    if ((pp->written > pp->durable || job->park_ranges) && fdatasync(pp->fd) == 0) {
        db_partial_t p = {.etag = job->file.etag,
                          .last_modified = job->file.last_modified,
                          .total = job->file.total,
                          .durable = pp->written,
                          .ranges = job->park_ranges};
        if (db_save_partial(js->db, job->part_id, job->key, job->cred_tag, &p) == 0)
            job->parked = pp->written;
    }
    close(pp->fd);
    pp->fd = -1;
}

static void queue(job_t *job, uv_work_t *w, uv_work_cb work, uv_after_work_cb after)
{
    w->data = job;
    uv_queue_work(job->js->loop, w, work, after);
}

void job_commit_queue(job_t *job, uv_after_work_cb after)
{
    assert(!job->pipe.items); /* the item owns sha and fd */
    job->items |= JOB_ITEM_COMMIT;
    queue(job, &job->commit_work, commit_work, after);
}

void job_rehash_queue(job_t *job, uv_after_work_cb after)
{
    job->items |= JOB_ITEM_REHASH; /* the item owns sha and fd */
    queue(job, &job->rehash_work, rehash_work, after);
}

void job_discard_queue(job_t *job, uv_after_work_cb after)
{
    queue(job, &job->discard_work, discard_work, after);
}

void job_park_queue(job_t *job, uv_after_work_cb after)
{
    queue(job, &job->park_work, park_work, after);
}
