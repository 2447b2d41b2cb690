/* jobs: the front door. jobs_fetch resolves a request against the cache
 * (a hit is confirmed on the loop where its blob's path is cached, else
 * in the pool) and the running jobs (single flight: one
 * job per URL and credentials); the rest of the public jobs_* API, start-up
 * and shutdown. Loop thread only. */
#include "job_internal.h"
#include "log.h"
#include "wipe.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Last step of a shutdown: the HTTP client's connections hold read buffers,
 * so the pool goes only after the client is gone. */
static void on_http_closed(void *arg)
{
    jobs_t *js = arg;
    void (*cb)(void *) = js->shutdown_cb;
    void *cb_arg = js->shutdown_arg;
    bufpool_destroy(&js->pool);
    free(js->served);
    free(js);
    if (cb)
        cb(cb_arg);
}

/* Everything in flight has gone after jobs_shutdown: the HTTP client goes
 * next, then js. */
static void on_jobs_drained(void *arg)
{
    jobs_t *js = arg;
    bgwork_stop(js->bg); /* its one user, eviction, holds the tracker while out */
    js->bg = NULL;
    http_client_close(js->http, on_http_closed, js);
}

static int jobs_serve_cached(jobs_t *js, job_waiter_t *w, const char *url, const char sha[65],
                             uint64_t size, const db_blob_stat_t *rec, int by_entry,
                             int revalidated);

/* Whether a job not yet freed (failed ones too) still uses partial id. */
static int part_in_use(const jobs_t *js, uint64_t id)
{
    for (const list_node_t *n = list_first(&js->all); n; n = list_next(&js->all, n))
        if (list_entry(n, job_t, all_node)->part_id == id)
            return 1;
    return 0;
}

/* A partial recorded by an earlier run (or an earlier job) of this URL:
 * the job takes it over, to re-hash and resume it when it starts. */
static void adopt_partial(job_t *job)
{
    jobs_t *js = job->js;
    db_partial_t p;
    if (db_find_partial(js->db, job->key, job->cred_tag, &p) != 0)
        return;
    if ((p.durable == 0 && !p.ranges) ||
        part_in_use(js, p.id)) { /* a failed job is still removing it */
        db_partial_free(&p);
        return;
    }
    job->part_id = p.id;
    job->resume_len = p.durable;
    job->resume_ranges = p.ranges;
    job->file.total = p.total;
    job->file.etag = p.etag;
    job->file.last_modified = p.last_modified;
    if (!job_validator(job)) { /* never recorded so; do not trust it */
        job->file.etag = (free(job->file.etag), NULL);
        job->file.last_modified = (free(job->file.last_modified), NULL);
        job->part_id = job->id;
        job->resume_len = 0;
        job->resume_ranges = (free(job->resume_ranges), NULL);
        job->file.total = -1;
    }
}

/* Whether w's expected digest was vouched for by the origin (job.h). */
static int waiter_vouched(const job_waiter_t *w)
{
    return w->vouched && w->expected[0];
}

/* A new job for u (taken on success) and w's credentials, owned by w->uid,
 * in the list of all jobs but not yet queued; it takes over a partial that
 * the cache records for the URL. Returns 0 or -ENOMEM (u still the
 * caller's). */
static int job_new(jobs_t *js, url_t *u, job_waiter_t *w, job_t **out)
{
    job_t *job = calloc(1, sizeof *job);
    if (!job)
        return -ENOMEM;
    job->js = js;
    job->id = job->part_id = ++js->next_id;
    list_init(&job->waiters);
    job->key = strdup(u->canonical);
    size_t hl = strlen(u->host) + 8;
    job->host_key = malloc(hl);
    if (!job->key || !job->host_key) {
        free(job->key);
        free(job->host_key);
        free(job);
        return -ENOMEM;
    }
    snprintf(job->host_key, hl, "%s:%u", u->host, u->port);
    memcpy(job->cred_tag, w->cred_tag, sizeof job->cred_tag);
    if (!w->no_swarm) /* else the swarm brought other bytes once: the origin's */
        memcpy(job->swarm_sha, w->expected, sizeof job->swarm_sha);
    if (waiter_vouched(w)) /* vouched requests of other credentials may join it */
        memcpy(job->vouched, w->expected, sizeof job->vouched);
    job->owner = w->uid;
    job->cred_headers = w->cred_block; /* the job sends them to the first origin */
    w->cred_block = NULL;
    job->file.key = job->key;
    job->file.cred_headers = job->cred_headers;
    job->file.total = -1;
    job->file.reval = w->reval; /* asked as a condition of its first request */
    w->reval = NULL;
    /* Last of u's readers: a mirror rule may put another URL in its place. */
    transfer_init(&job->xfer, &job_xfer_cbs, job, &job->file, js->http, js->cfg, job->id, u, 1);
    pipeline_init(&job->pipe, js->loop, js->cfg, js->store, js->db, &js->pool,
                  &js->stats.bytes_from_origin, &job_pipe_ops, job);
    job->ro_fd = -1;
    uv_timer_init(js->loop, &job->timer);
    uv_timer_init(js->loop, &job->retry_timer);
    job->timer.data = job->retry_timer.data = job;
    job->handles_open = 2;
    worktrack_hold(&js->work);
    js->stats.misses++;
    adopt_partial(job);
    job->pipe.part_id = job->part_id; /* the checkpoint rows' */
    job->pipe.key = job->key;
    job->pipe.cred_tag = job->cred_tag;
    job->pipe.total = &job->file.total;
    list_push_front(&js->all, &job->all_node);

    job->state = JOB_QUEUED; /* the first state: no transition */
    *out = job;
    return 0;
}

/* A running job for the same URL and the same credentials (a request
 * without them must never share a gated download). Only the same URL: a
 * job of another URL that promises the same digest could be slow, fail or
 * lie (another user's job), and an attacher must not wait on, or fail
 * with, what it did not ask for. A digest already in the cache is a hit
 * whatever its URL. A vouched waiter may also join a job of the same URL
 * that a vouched request of other credentials started for the same digest:
 * the origin named those bytes to both (a gated file comes down once per
 * machine), and the bytes are checked against that digest. Not a waiter
 * moved from a failed job: it goes on in a job of its own. */
static job_t *job_find(jobs_t *js, const char *key, const job_waiter_t *w)
{
    int vouched = waiter_vouched(w) && !w->restarted;
    list_t *lists[2] = {&js->active, &js->queue};
    for (int i = 0; i < 2; i++)
        for (list_node_t *n = list_first(lists[i]); n; n = list_next(lists[i], n)) {
            job_t *j = list_entry(n, job_t, node);
            if (strcmp(j->key, key) != 0)
                continue;
            if (strcmp(j->cred_tag, w->cred_tag) == 0 ||
                (vouched && strcmp(j->vouched, w->expected) == 0))
                return j;
        }
    return NULL;
}

/* Attaches w to a running job for the same URL, or queues a new job. Takes
 * u. A waiter moved from a failed job (w->restarted) hears no second
 * on_start. Returns 0, or -ENOMEM or -EAGAIN (too many jobs for the uid)
 * with no callback made. */
static int jobs_start_download(jobs_t *js, url_t *u, job_waiter_t *w)
{
    job_t *job = job_find(js, u->canonical, w);
    if (job) {
        url_free(u);
        if (strcmp(job->cred_tag, w->cred_tag) == 0) { /* the job has them already */
            wipe_free(w->cred_block);
            w->cred_block = NULL;
        }               /* else vouched: kept, to go on alone should the job fail for its owner */
        free(w->reval); /* a running download is as fresh as a revalidation */
        w->reval = NULL;
        js->stats.attached++;
        if (!w->restarted)
            w->kind = FETCH_ATTACHED;
        job_waiter_link(job, w);
        if (!w->restarted)
            w->on_start(w, FETCH_ATTACHED, job->id);
        return 0;
    }
    if (jobs_uid_at_limit(js, w->uid)) {
        url_free(u);
        free(w->reval);
        w->reval = NULL;
        return -EAGAIN;
    }
    if (job_new(js, u, w, &job))
        goto fail;
    jobs_enqueue(job);

    job_waiter_link(job, w);
    log_info("job %llu: fetching %s", (unsigned long long)job->id, job->key);
    if (!w->restarted) {
        w->kind = FETCH_QUEUED;
        w->on_start(w, FETCH_QUEUED, job->id);
    }
    jobs_start_queued(js);
    return 0;
fail:
    url_free(u);
    free(w->reval);
    w->reval = NULL;
    return -ENOMEM;
}

/* A waiter whose job failed for a reason that is not its own (another
 * waiter's expected digest, or a vouched waiter's job that failed for the
 * other credentials that started it) goes on in a job of its own for the
 * same URL, with its own headers (a vouched waiter kept them), else the
 * job's (the same tag); its client sees progress go on, and one final
 * line. */
static void job_waiter_restart(job_t *job, job_waiter_t *w)
{
    jobs_t *js = job->js;
    job_waiter_unlink(job, w);
    int own = w->cred_block != NULL;
    if (!own && job->cred_headers && strcmp(job->cred_tag, w->cred_tag) == 0)
        w->cred_block = strdup(job->cred_headers);
    url_t u;
    int rc = -ENOMEM;
    int have = own || !w->cred_tag[0] || w->cred_block;
    if (have && url_parse(job->key, &u, NULL) == 0) {
        w->restarted = 1;
        rc = jobs_start_download(js, &u, w);
    }
    if (rc == 0) {
        log_info("job %llu: a waiter it did not fail goes on in job %llu%s",
                 (unsigned long long)job->id, (unsigned long long)w->job->id,
                 own ? " with its own credentials" : "");
        return;
    }
    wipe_free(w->cred_block);
    w->cred_block = NULL;
    job_result_t res = {.err_code = rc == -EAGAIN ? "too_many_requests" : "internal",
                        .err_msg = rc == -EAGAIN ? "its job was not kept, and this uid has "
                                                   "max_requests_per_user downloads running"
                                                 : "cannot start the download again",
                        .kind = w->kind};
    jobs_count_error(js, res.err_code);
    w->on_finish(w, &res);
}

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
/* Opens the hit's blob and says whether its file is not the one recorded
 * at commit (1), or 0. Without the writer's lock (locked 0) the identity is
 * read on the pool readers' connection, which waits for no commit; a commit
 * of the same digest in its middle (the file replaced, its identity not yet
 * recorded) may then look like a change, so a change is looked at again
 * under the lock, as the commit holds it (locked 1). */
static int hit_open(job_hit_t *hit, int locked)
{
    jobs_t *js = hit->js;
    struct stat st;
    db_blob_stat_t rec;
    if (locked)
        db_lock(js->db);
    hit->rc = store_open_blob(js->store, hit->sha, hit->size, &hit->fd, &st);
    int changed = 0;
    if (!hit->rc &&
        (locked ? db_get_blob_stat(js->db, hit->sha, &rec)
                : db_read_blob_stat(js->db, hit->sha, &rec)) == 0 &&
        rec.ino) {
        db_blob_stat_t now = db_blob_stat_of(&st);
        changed = memcmp(&now, &rec, sizeof now) != 0;
    }
    if (locked)
        db_unlock(js->db);
    if (changed) {
        close(hit->fd);
        hit->fd = -1;
    }
    return changed;
}

static void hit_work(uv_work_t *req)
{
    job_hit_t *hit = req->data;
    jobs_t *js = hit->js;
    if (hit_open(hit, 0) && hit_open(hit, 1)) {
        int rc = cache_verify_one(js->store, js->db, hit->sha, hit->size, (int64_t)time(NULL));
        hit->rc = rc == -EBADMSG ? -ESTALE : rc ? rc : -EAGAIN;
        if (!rc) /* the same bytes in another file: open that one */
            hit->rc = store_open_blob(js->store, hit->sha, hit->size, &hit->fd, NULL);
    }
    if (!hit->rc)
        db_touch(js->db, hit->sha, hit->by_entry ? hit->url : NULL, hit->cred_tag, hit->uid);
    if (!hit->rc && hit->revalidated)
        db_entry_validated(js->db, hit->url, hit->cred_tag, (int64_t)time(NULL));
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
        wipe_free(w->cred_block);
        w->cred_block = NULL;
    }
    /* A waiter served after a revalidation had its on_start (QUEUED). */
    int started = w && w->restarted;
    if (w && hit->rc == 0 && js->shutting_down) {
        job_result_t res = {.err_code = "shutting_down", .err_msg = "hubd is stopping"};
        if (!started)
            w->on_start(w, FETCH_HIT, 0);
        w->on_finish(w, &res);
    } else if (w && hit->rc == 0) {
        char path[PATH_MAX];
        store_blob_path(js->store, hit->sha, path, sizeof path);
        js->stats.hits++;
        jobs_count_served(js, w->uid, hit->size);
        w->kind = FETCH_HIT;
        if (!started)
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
            rc = jobs_start_download(js, &u, w);
        if (rc) { /* a shutdown, a full queue for this uid, or no memory */
            job_result_t res = {.err_code = js->shutting_down ? "shutting_down" : "internal",
                                .err_msg = js->shutting_down ? "hubd is stopping"
                                                             : "cannot start the download again"};
            wipe_free(w->cred_block); /* before on_finish: the waiter may be freed in it */
            w->cred_block = NULL;
            w->on_finish(w, &res);
        }
    }
    if (hit->rc == 0 && hit->fd >= 0)
        close(hit->fd);
    free(hit->url);
    free(hit);
    worktrack_release(&js->work);
}

void jobs_set_policy(jobs_t *js, const netpolicy_t *policy)
{
    http_client_set_policy(js->http, policy);
}

struct http_client *jobs_http(jobs_t *js)
{
    return js->http;
}

void jobs_set_proxies(jobs_t *js, const proxy_settings_t *proxies)
{
    http_client_set_proxies(js->http, proxies);
    js->proxies = proxies;
}

void jobs_set_secret(jobs_t *js, const cred_secret_t *secret)
{
    js->secret = *secret;
}

int jobs_cred_tag(jobs_t *js, const char *const *headers, size_t nheaders, char tag[65])
{
    char *block = NULL;
    const char *why = NULL;
    int rc = cred_build(&js->secret, headers, nheaders, &block, tag, &why);
    wipe_free(block);
    return rc;
}

/* The jobs module's fields of a waiter (job.h, "private"), cleared before
 * its first use: the caller set only the public ones. Named one by one,
 * not by their offset in the struct, so that the order of the fields can
 * change. */
static void waiter_reset(job_waiter_t *w)
{
    w->job = NULL;
    w->hit = NULL;
    w->kind = FETCH_HIT;
    w->restarted = 0;
    w->no_swarm = 0;
    w->expected[0] = '\0';
    w->cred_tag[0] = '\0';
    w->cred_block = NULL;
    w->reval = NULL;
    list_node_init(&w->node);
}

int jobs_fetch(jobs_t *js, const char *url, const char *sha256, const char *const *headers,
               size_t nheaders, job_waiter_t *w, const char **code, const char **msg)
{
    url_t u;
    const char *why = NULL;
    waiter_reset(w);
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
     * request's credentials (or none) got, or anyone's for a vouched
     * request (the origin named it to these credentials); else this URL's entry for those
     * credentials. Both are confirmed by opening the file: on the loop
     * where its path is cached (hit_on_loop), else in the pool. */
    char sha[65];
    uint64_t size = 0;
    int by_entry = 0;
    db_entry_meta_t meta;
    db_blob_stat_t rec;
    int found = sha256 && db_find_blob_stat(js->db, sha256, waiter_vouched(w) ? NULL : w->cred_tag,
                                            &size, &rec) == 0;
    if (found) {
        memcpy(sha, w->expected, sizeof sha);
    } else if (db_find_entry_meta(js->db, u.canonical, w->cred_tag, sha, &size, &meta) == 0 &&
               (!sha256 || strcmp(sha, sha256) == 0)) {
        found = by_entry = 1;
        rec = meta.stat;
        /* Asked to, or older than revalidate_after: the origin is asked
         * whether it is still current first (a digest asked for and held
         * needs no network: that bytes are right is known). */
        int64_t age_ms = ((int64_t)time(NULL) - meta.validated) * 1000;
        if (!sha256 &&
            (w->refresh ||
             (js->cfg->revalidate_after_ms && age_ms >= (int64_t)js->cfg->revalidate_after_ms)) &&
            (w->reval = calloc(1, sizeof *w->reval)) != NULL) {
            memcpy(w->reval->sha, sha, sizeof sha);
            w->reval->size = size;
            memcpy(w->reval->etag, meta.etag, sizeof meta.etag);
            memcpy(w->reval->last_modified, meta.last_modified, sizeof meta.last_modified);
            found = 0;
        }
    }
    /* Found by digest, the entry is not touched (by_entry 0). */
    if (found && jobs_serve_cached(js, w, u.canonical, sha, size, &rec, by_entry, 0) == 0) {
        url_free(&u);
        return 0;
    }
    /* A miss, a revalidation, or no memory to serve the hit: a download. */
    rc = jobs_start_download(js, &u, w);
    if (rc == 0)
        return 0;
    wipe_free(w->cred_block);
    w->cred_block = NULL;
    *code = rc == -EAGAIN ? "too_many_requests" : "internal";
    *msg = rc == -EAGAIN ? "this uid has max_requests_per_user downloads running or queued"
                         : "out of memory";
    return rc;
}

/* A hit on the loop: where the blob's path is in the kernel's lookup
 * cache (no disk read: store_open_blob_cached) and its file is the one
 * recorded (read on the loop's reader by the look-up that found the blob),
 * the hit needs no pool item, whose two thread wake-ups cost more CPU than
 * the rest of the hit. Anything else (not cached, another file, a
 * revalidation to record) goes to the pool as before, which decides. 1 if
 * served. */
static int hit_on_loop(job_hit_t *hit)
{
    jobs_t *js = hit->js;
    struct stat st;
    if (hit->revalidated || !hit->rec_known || js->hits_closed ||
        store_open_blob_cached(js->store, hit->sha, hit->size, &hit->fd, &st) != 0)
        return 0;
    db_blob_stat_t now = db_blob_stat_of(&st);
    if (hit->rec.ino && memcmp(&now, &hit->rec, sizeof now) != 0) {
        close(hit->fd);
        hit->fd = -1;
        return 0;
    }
    hit->rc = 0;
    return 1;
}

/* The hits served on the loop since its last turn: their uses queued (by
 * now the caller set by_entry), then answered as a pool item's are. */
static void on_hits_ready(uv_idle_t *idle)
{
    jobs_t *js = idle->data;
    list_node_t *n;
    int write = 0;
    while ((n = list_pop_front(&js->hits_ready)) != NULL) {
        job_hit_t *hit = list_entry(n, job_hit_t, ready_node);
        if (hit->w && !js->shutting_down) /* as after_hit counts hits */
            js->stats.hits_on_loop++;
        /* A full queue (or one past its bound) is written in the pool now. */
        write |= db_touch_queue(js->db, hit->sha, hit->by_entry ? hit->url : NULL, hit->cred_tag,
                                hit->uid) != 0;
        after_hit(&hit->work, 0);
    }
    uv_idle_stop(idle);
    if (write)
        jobs_uses_write(js);
}

static int jobs_serve_cached(jobs_t *js, job_waiter_t *w, const char *url, const char sha[65],
                             uint64_t size, const db_blob_stat_t *rec, int by_entry,
                             int revalidated)
{
    job_hit_t *hit = calloc(1, sizeof *hit);
    if (!hit || !(hit->url = strdup(url))) {
        free(hit);
        return -ENOMEM;
    }
    hit->js = js;
    hit->w = w;
    memcpy(hit->sha, sha, sizeof hit->sha);
    memcpy(hit->cred_tag, w->cred_tag, sizeof hit->cred_tag);
    hit->uid = w->uid;
    hit->size = size;
    hit->by_entry = by_entry; /* before the pool item reads it */
    hit->revalidated = revalidated;
    if (rec) {
        hit->rec = *rec;
        hit->rec_known = 1;
    }
    hit->fd = -1;
    hit->work.data = hit;
    w->hit = hit;
    worktrack_hold(&js->work);
    if (hit_on_loop(hit)) {
        list_push_back(&js->hits_ready, &hit->ready_node);
        uv_idle_start(&js->hits_idle, on_hits_ready);
        return 0;
    }
    uv_queue_work(js->loop, &hit->work, hit_work, after_hit);
    return 0;
}

/* A revalidation answered 304: every waiter gets the cached file, and the
 * job ends without a download. */
static void job_not_modified(job_t *job)
{
    jobs_t *js = job->js;
    job_reval_t *rv = job->file.reval;
    log_info("job %llu: %s not modified at the origin (304): serving the cached %s",
             (unsigned long long)job->id, job->key, rv->sha);
    js->stats.revalidated++;
    job_unlist(job); /* a waiter restarted below must not find it again */
    list_node_t *n;
    while ((n = list_first(&job->waiters)) != NULL) {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        if (w->expected[0] && strcmp(w->expected, rv->sha) != 0) {
            /* It joined asking for other bytes than the cached ones: a
             * download of its own, checked against what it expects. */
            job_waiter_restart(job, w);
            continue;
        }
        job_waiter_unlink(job, w);
        /* Its headers go with it: should the blob be gone, it downloads
         * again (after_hit) with them (a vouched waiter kept its own). */
        if (!w->cred_block && job->cred_headers)
            w->cred_block = strdup(job->cred_headers);
        w->restarted = 1; /* it heard QUEUED or ATTACHED: no second on_start */
        if (jobs_serve_cached(js, w, job->key, rv->sha, rv->size, NULL, 1, 1)) {
            wipe_free(w->cred_block);
            w->cred_block = NULL;
            job_result_t res = {
                .err_code = "internal", .err_msg = "out of memory", .kind = w->kind};
            jobs_count_error(js, res.err_code);
            w->on_finish(w, &res);
        }
    }
    job_fail(job, "not_modified", "the cached file is current"); /* no waiter hears it */
}

int jobs_partial_path(const job_waiter_t *w, char *buf, size_t cap)
{
    if (!w->job)
        return -ENOENT;
    store_tmp_path(w->job->js->store, w->job->part_id, buf, cap);
    return 0;
}

void jobs_cancel(job_waiter_t *w)
{
    wipe_free(w->cred_block);
    w->cred_block = NULL;
    free(w->reval);
    w->reval = NULL;
    if (w->hit) {
        w->hit->w = NULL;
        w->hit = NULL;
    }
    if (w->job) {
        w->job->flags |= JOB_LET_RUN; /* whoever hung up left it to the cache */
        job_waiter_unlink(w->job, w);
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
    list_init(&js->active);
    list_init(&js->all);
    list_init(&js->queue);
    list_init(&js->commit_queue);
    js->store = store;
    js->db = db;
    /* Keep enough free buffers for every job's in-flight window. */
    unsigned keep = (unsigned)(cfg->max_inflight / cfg->read_buffer_size) * 2 + 8;
    bufpool_init(&js->pool, cfg->read_buffer_size, keep);
    /* Eviction's thread. Where no thread can be made, libuv's pool could
     * not be either (it aborts): hubd does not start. */
    int rc = bgwork_start(loop, &js->bg);
    if (rc) {
        free(js);
        return rc;
    }
    if ((rc = http_client_new(loop, cfg, &js->pool, tls, &js->http)) != 0) {
        bgwork_stop(js->bg); /* frees itself on the loop */
        free(js);
        return rc;
    }
    js->after_evict = job_after_evict;
    js->rate_refilled = job_rate_refilled;
    js->restart_waiter = job_waiter_restart;
    js->swarm_back = job_swarm_back;
    js->not_modified = job_not_modified;
    jobs_rate_init(js);
    jobs_uses_init(js);
    jobs_holdcheck_init(js);
    list_init(&js->hits_ready);
    uv_idle_init(loop, &js->hits_idle);
    js->hits_idle.data = js;
    worktrack_hold(&js->work); /* released when the idle handle is closed */
    if ((rc = verifier_start(loop, cfg, &js->work, store, db, &js->verifier)) != 0) {
        js->verifier = NULL; /* only this feature is lost: said so, and hubd serves */
        log_err("background verification not started: %s", strerror(-rc));
    }
    /* Start-up: the loop does not run yet, the disk may be asked. */
    jobs_fs_size_init(js);
    int r = cache_reserve_make(store);
    if (r)
        log_warn("cannot keep room for removals on a full disk (%s/reserve): %s", store_dir(store),
                 strerror(-r));
    *out = js;
    return 0;
}

void jobs_reload(jobs_t *js)
{
    jobs_rate_reload(js);
    jobs_holdcheck_reload(js);
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

static void on_hits_idle_closed(uv_handle_t *h)
{
    jobs_t *js = h->data;
    worktrack_release(&js->work);
}

void jobs_stop(jobs_t *js)
{
    js->shutting_down = 1;
    jobs_rate_close(js);
    if (!js->hits_closed) { /* the hits served meanwhile are answered first */
        on_hits_ready(&js->hits_idle);
        js->hits_closed = 1;
        uv_close((uv_handle_t *)&js->hits_idle, on_hits_idle_closed);
    }
    jobs_uses_close(js);
    jobs_holdcheck_close(js);
    cache_cancel_all();
    if (js->verifier) {
        verifier_stop(js->verifier);
        js->verifier = NULL;
    }
    list_node_t *n;
    while ((n = list_first(&js->queue)) != NULL)
        job_fail(list_entry(n, job_t, node), "shutting_down", "hubd is stopping");
    while ((n = list_first(&js->active)) != NULL)
        job_fail(list_entry(n, job_t, node), "shutting_down", "hubd is stopping");
}

void jobs_shutdown(jobs_t *js, void (*done)(void *arg), void *arg)
{
    jobs_stop(js);
    js->shutdown_cb = done;
    js->shutdown_arg = arg;
    worktrack_drain(&js->work, on_jobs_drained, js);
}
