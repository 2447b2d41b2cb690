/* commit: the pool items at the end (or the start) of a job's life, each
 * its own function: the commit (the job's fsync, then a group item that
 * links and records many jobs in one transaction), the discard of a failed
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

/* A file this small is made durable by its group (one syncfs for all of
 * them) rather than by an fsync of its own: on a file system without a
 * journal each fsync is a device flush, about 0.5 ms, and a flood of small
 * files was bound by them. A larger one is fsync'ed alone, outside any
 * lock (its data takes seconds), and its syncfs would wait for it. */
#define COMMIT_SMALL (1u << 20)

/* The digest into job->digest, once (on the loop or in the prep item);
 * whether a waiter takes it. */
static int digest_wanted(job_t *job)
{
    if (!job->commit_digested) {
        uint8_t digest[32];
        sha256_final(&job->pipe.sha, digest);
        sha256_hex(digest, job->digest);
        job->commit_digested = 1;
    }
    int wanted = job->accept_any;
    for (size_t i = 0; !wanted && i < job->naccepts; i++)
        wanted = strcmp(job->accepts[i], job->digest) == 0;
    return wanted;
}

/* The first half of a commit, the job's own item, many at once: the
 * digest, whether any waiter takes it, the file cut to what was received
 * and, unless small, fsync'ed (before any lock: a large file's takes
 * seconds). On success the job is ready for a group (commit_ready); else
 * what it left goes, and commit_rc says why. */
static void commit_prep_work(uv_work_t *req)
{
    job_t *job = req->data;
    jobs_t *js = job->js;
    pipeline_t *p = &job->pipe;
    job->ro_fd = -1;
    job->commit_ready = 0;
    if (!digest_wanted(job)) {
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
    int rc = 0;
    if (p->fd < 0) /* an empty body: no write item ever ran */
        rc = store_tmp_create(js->store, job->part_id, &p->fd);
    else if (p->truncate_file && ftruncate(p->fd, 0)) /* restarted, then empty */
        rc = -errno;
    /* The file is what was received, not a byte more: a partial resumed
     * with ranges, then fetched as one shorter stream, may have kept bytes
     * past the new end. */
    if (!rc && ftruncate(p->fd, (off_t)p->received))
        rc = -errno;
    job->commit_unsynced = !rc && p->received <= COMMIT_SMALL;
    if (!rc && !job->commit_unsynced && fsync(p->fd))
        rc = -errno;
    job->commit_rc = rc;
    if (!rc) {
        job->commit_ready = 1;
        return;
    }
    db_lock(js->db); /* no recorded blob came of it: nothing to resume either */
    db_forget_partial(js->db, job->part_id);
    store_discard(js->store, p->fd, job->part_id);
    db_unlock(js->db);
    p->fd = -1;
}

/* ---- the group: link, record, name and identity for many at once ---------- */

/* A group: the jobs' slots in jobs_t (one group item is out at a time).
 * A flood of small files commits in groups of at most COMMIT_GROUP_MAX; a
 * job that comes while one is out waits for the next, which takes all
 * that waited. */
typedef struct commit_group {
    jobs_t *js;
    size_t n;
    job_t **jobs;
} commit_group_t;

static commit_group_t group_of(jobs_t *js)
{
    return (commit_group_t){.js = js, .n = js->commit_group_n, .jobs = js->commit_group};
}

/* The small files' data made durable before any of them gets a name:
 * one syncfs for two or more (one device flush), then each file's own
 * check that none of its writeback failed (syncfs reports a file system's
 * error once, maybe to another group's call): a wait without a flush of
 * its own, where the kernel can tell (store_check_synced), else its
 * fdatasync. A lone one: its fsync. Outside the lock: syncfs also writes
 * what other downloads have not yet made durable. Whether a syncfs ran and
 * succeeded (then the names' one, if any, finds little left to write). */
static int group_sync_data(commit_group_t *g)
{
    size_t unsynced = 0;
    for (size_t i = 0; i < g->n; i++)
        unsynced += !g->jobs[i]->commit_rc && g->jobs[i]->commit_unsynced;
    int rc = unsynced > 1 ? store_sync_all(g->js->store) : -EAGAIN;
    if (rc && rc != -EAGAIN)
        log_warn("syncfs of the cache: %s: each small file is synced alone", strerror(-rc));
    for (size_t i = 0; i < g->n; i++) {
        job_t *job = g->jobs[i];
        if (job->commit_rc || !job->commit_unsynced)
            continue;
        int fd = job->pipe.fd, err = rc ? -ENOTSUP : store_check_synced(g->js->store, fd);
        if (err == -ENOTSUP)
            err = (rc ? fsync(fd) : fdatasync(fd)) ? -errno : 0;
        job->commit_rc = err;
    }
    return rc == 0;
}

/* A group whose names went into this many folders or more makes them
 * durable with one syncfs (one device flush) instead of a fsync of each
 * folder (a device flush each: a flood of small files spreads over the
 * 256 folders, and 50 fsyncs made a group of 57 take 10 ms, in which no
 * other group could start). Fewer: each folder's fsync, which waits for
 * no other download's writes. */
#define GROUP_SYNCFS_DIRS 8

/* The new names made durable: each folder that got one, once (and blobs/
 * when a folder is new), or all of them by one syncfs where the group
 * spread over many folders and its data's syncfs ran (data_synced). That
 * syncfs runs under the lock, so only then: it writes what other
 * downloads wrote since the data's syncfs, a few ms before, not all they
 * hold (a group of large files, each fsync'ed alone, has none). The users
 * of the writer that wait for it (other groups, checkpoints, eviction)
 * are pool items. One that fails leaves it to each folder's fsync. */
static void group_sync_names(commit_group_t *g, int data_synced)
{
    char dirs[256] = {0};
    unsigned ndirs = 0;
    int rc = 0, new_dir = 0;
    for (size_t i = 0; i < g->n; i++) {
        const job_t *job = g->jobs[i];
        unsigned b = (unsigned)strtoul((char[]){job->digest[0], job->digest[1], 0}, NULL, 16);
        if (job->commit_rc)
            continue;
        new_dir |= job->commit_new_dir;
        ndirs += !dirs[b];
        dirs[b] = 1;
    }
    rc = data_synced && ndirs >= GROUP_SYNCFS_DIRS ? store_sync_names(g->js->store) : -EAGAIN;
    if (rc && rc != -EAGAIN && rc != -ENOTSUP)
        log_warn("syncfs of the cache for %u new names: %s: each folder is synced alone", ndirs,
                 strerror(-rc));
    g->js->commit_group_syncfs = rc == 0;
    if (rc == 0)
        return;
    rc = 0;
    for (unsigned b = 0; b < 256 && !rc; b++) {
        static const char digits[] = "0123456789abcdef";
        if (!dirs[b])
            continue;
        char hex[3] = {digits[b >> 4], digits[b & 15], 0};
        rc = store_sync_blob_dir(g->js->store, hex, new_dir);
        new_dir = 0; /* blobs/ once */
    }
    for (size_t i = 0; rc && i < g->n; i++)
        if (!g->jobs[i]->commit_rc)
            g->jobs[i]->commit_rc = rc;
}

/* Whether a job of g other than jobs[i] recorded the same digest (its
 * rename took over jobs[i]'s new name, which then must stay). */
static int recorded_by_another(const commit_group_t *g, size_t i)
{
    for (size_t j = 0; j < g->n; j++)
        if (j != i && !g->jobs[j]->commit_rc && strcmp(g->jobs[j]->digest, g->jobs[i]->digest) == 0)
            return 1;
    return 0;
}

/* The small files' data becomes durable (outside the lock); then, under
 * the writer's lock, each job's blob gets its name, the names become
 * durable together, one transaction records them all, the partials' names
 * go and one more transaction records the files' identities. The lock, as
 * one commit held it: eviction (row, then unlink) cannot interleave, and a
 * hit that looks under the lock never sees a link count (so a ctime)
 * still changing. */
static void group_work(uv_work_t *req)
{
    commit_group_t group = group_of(req->data), *g = &group;
    jobs_t *js = g->js;
    db_record_t *recs = calloc(g->n, sizeof *recs);
    int *rcs = calloc(g->n, sizeof *rcs);
    size_t *at = calloc(g->n, sizeof *at); /* recs[k] is jobs[at[k]]'s */
    const char **shas = calloc(g->n, sizeof *shas);
    db_blob_stat_t *ids = calloc(g->n, sizeof *ids);
    int nomem = !recs || !rcs || !at || !shas || !ids;
    int data_synced = group_sync_data(g);
    db_lock(js->db);
    for (size_t i = 0; i < g->n; i++) {
        job_t *job = g->jobs[i];
        pipeline_t *p = &job->pipe;
        job->commit_created = job->commit_new_dir = 0;
        if (nomem && !job->commit_rc)
            job->commit_rc = -ENOMEM;
        if (job->commit_rc) /* its data did not become durable, or no memory */
            close(p->fd);
        else
            job->commit_rc =
                store_commit(js->store, p->fd, job->part_id, job->digest, job->cred_tag[0] != 0,
                             &job->ro_fd, &job->commit_created, &job->commit_new_dir);
        p->fd = -1;
    }
    group_sync_names(g, data_synced);
    size_t m = 0;
    for (size_t i = 0; i < g->n; i++) {
        job_t *job = g->jobs[i];
        if (job->commit_rc)
            continue;
        recs[m] = (db_record_t){
            .url = job->key,
            .cred_tag = job->cred_tag,
            .sha256 = job->digest,
            .size = job->pipe.received,
            .etag = job->file.etag,
            .last_modified = job->file.last_modified,
            .partial_id = job->part_id,
            .uids = job->uids,
            .nuids = job->nuids,
        };
        at[m++] = i;
    }
    if (m)
        db_record_downloads(js->db, recs, m, rcs);
    for (size_t k = 0; k < m; k++)
        g->jobs[at[k]]->commit_rc = rcs[k];
    size_t nids = 0;
    for (size_t i = 0; i < g->n; i++) {
        job_t *job = g->jobs[i];
        if (job->commit_rc && job->commit_created && job->ro_fd >= 0 && !recorded_by_another(g, i))
            store_unlink_blob(js->store, job->digest); /* no row names the new name */
        if (job->commit_rc) /* no recorded blob came of it: nothing to resume either */
            db_forget_partial(js->db, job->part_id);
        /* The row is gone (recorded or forgotten): now the partial's name
         * can go, never before (store_commit says why). */
        store_discard(js->store, -1, job->part_id);
        struct stat st;
        if (!job->commit_rc && !nomem && fstat(job->ro_fd, &st) == 0) {
            shas[nids] = job->digest;
            ids[nids++] = db_blob_stat_of(&st);
        }
    }
    if (nids)
        db_set_blob_stats(js->db, shas, ids, nids);
    db_unlock(js->db);
    free(recs);
    free(rcs);
    free(at);
    free(shas);
    free(ids);
}

static void group_start(jobs_t *js);

static void after_group(uv_work_t *req, int status)
{
    jobs_t *js = req->data;
    size_t n = js->commit_group_n;
    js->commit_group_out = 0;
    js->commit_group_n = 0;
    js->stats.commit_groups++;
    js->stats.commit_name_syncs += js->commit_group_syncfs;
    js->stats.commits += n;
    for (size_t i = 0; i < n; i++) {
        job_t *job = js->commit_group[i];
        job->commit_after(&job->commit_work, status); /* may free the job */
    }
    group_start(js);
}

/* The jobs that waited go in one group item, if none is out. */
static void group_start(jobs_t *js)
{
    if (js->commit_group_out || list_empty(&js->commit_queue))
        return;
    size_t n = 0;
    while (n < COMMIT_GROUP_MAX && !list_empty(&js->commit_queue))
        js->commit_group[n++] = list_entry(list_pop_front(&js->commit_queue), job_t, commit_node);
    js->commit_group_n = n;
    js->commit_group_work.data = js;
    js->commit_group_out = 1;
    /* Fails only for a NULL work callback: never here. */
    uv_queue_work(js->loop, &js->commit_group_work, group_work, after_group);
}

/* Back from the job's own item: ready ones wait for a group; the others'
 * outcome goes to job.c now. */
static void after_prep(uv_work_t *req, int status)
{
    job_t *job = req->data;
    if (!job->commit_ready || status) {
        job->commit_after(req, status);
        return;
    }
    list_push_back(&job->js->commit_queue, &job->commit_node);
    group_start(job->js);
}

/* The partial and its row go: row first, as in commit_prep_work. */
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

/* A small file that the write items made and wrote once in order from
 * byte 0 needs no prep item: its length is what was received (nothing to
 * cut), its group makes it durable (a syncfs, or its fsync when alone),
 * and its digest is a few us
 * on the loop. One pool item fewer per small file. Not a digest that no
 * waiter takes (its partial is to go: the item's), an empty body (no file
 * yet) or a resumed or segmented one. */
static int prep_on_loop(job_t *job)
{
    const pipeline_t *p = &job->pipe;
    if (p->fd < 0 || !p->fresh_file || p->segmented || p->truncate_file ||
        p->written != p->received || p->received > COMMIT_SMALL || !digest_wanted(job))
        return 0;
    job->ro_fd = -1;
    job->commit_rc = 0;
    job->commit_unsynced = 1;
    job->commit_ready = 1;
    return 1;
}

void job_commit_queue(job_t *job, uv_after_work_cb after)
{
    assert(!job->pipe.items); /* the items own sha and fd */
    job->items |= JOB_ITEM_COMMIT;
    job->commit_after = after;
    job->commit_digested = 0;
    if (prep_on_loop(job)) {
        job->commit_work.data = job;
        list_push_back(&job->js->commit_queue, &job->commit_node);
        group_start(job->js);
        return;
    }
    queue(job, &job->commit_work, commit_prep_work, after_prep);
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
