/* job: one job's life on the loop thread: its creation, its state changes
 * (the transition table), its waiters, what its transfer hands it (a head
 * taken, the end of the body), the single failure path, restarts from byte
 * 0, progress and the deadline and low-speed checks. */
#include "errcode.h"
#include "job_internal.h"
#include "log.h"
#include "wipe.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One of the job's handles (its timers, its lanes' timers) is closed:
 * the job goes with the last. */
void job_handle_closed(job_t *job)
{
    if (--job->handles_open > 0)
        return;
    jobs_t *js = job->js;
    list_remove(&job->all_node);
    db_partial_free(&job->ckpt);
    transfer_free(&job->xfer);
    free(job->accepts);
    free(job->uids);
    free(job->key);
    free(job->host_key);
    wipe_free(job->cred_headers);
    free(job->etag);
    free(job->last_modified);
    free(job->reval);
    free(job->resume_ranges);
    free(job->park_ranges);
    free(job);
    worktrack_release(&js->work);
}

static void job_on_timer_closed(uv_handle_t *h)
{
    job_handle_closed(h->data);
}

void job_free(job_t *job)
{
    assert(!job->items && !job->xfer.req && list_empty(&job->waiters));
    segs_reset(job);
    uv_close((uv_handle_t *)&job->timer, job_on_timer_closed);
    uv_close((uv_handle_t *)&job->retry_timer, job_on_timer_closed);
}

void job_waiter_unlink(job_t *job, job_waiter_t *w)
{
    list_remove(&w->node);
    w->job = NULL;
    job->nwaiters--;
}

void job_waiter_link(job_t *job, job_waiter_t *w)
{
    w->job = job;
    list_push_front(&job->waiters, &w->node); /* the newest first */
    job->nwaiters++;
}

/* Tells the waiters that want it how far the partial file is written and
 * durable. A waiter may leave (jobs_cancel) from its callback. */
void job_notify_written(job_t *job)
{
    list_node_t *n, *tmp;
    list_foreach_safe(&job->waiters, n, tmp)
    {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        if (w->on_written)
            w->on_written(w, job->on_disk, job->durable);
    }
}

/* Tells every waiter the outcome and detaches them. Each waiter with its own
 * expected digest is checked here: waiters of one URL may expect different
 * digests, and each hears about its own (a hash_mismatch result carries the
 * digest the download had in sha256). */
void job_notify_all(job_t *job, const job_result_t *res)
{
    jobs_t *js = job->js;
    list_node_t *n;
    while ((n = list_first(&job->waiters)) != NULL) {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        job_waiter_unlink(job, w);
        job_result_t r = *res;
        r.kind = w->kind;
        char msg[400];
        int mismatch = res->err_code ? errcode_of(res->err_code)->id == EC_HASH_MISMATCH
                                     : w->expected[0] && strcmp(w->expected, res->sha256) != 0;
        if (mismatch && w->expected[0] && res->sha256) {
            /* A mirror's bytes are checked as the origin's are; the
             * message says where the wrong ones came from. */
            const char *shown;
            transfer_source(&job->xfer, &shown);
            snprintf(msg, sizeof msg, "expected sha256 %s, got %s%s%s", w->expected, res->sha256,
                     shown ? " from the mirror " : "", shown ? shown : "");
            r.err_code = "hash_mismatch";
            r.err_msg = msg;
        }
        if (r.err_code)
            jobs_count_error(js, r.err_code);
        else
            js->stats.bytes_served += r.size;
        w->on_finish(w, &r);
    }
}

/* max_file_size: a length announced (or reached) above it fails the job
 * before it fills the disk. Returns 1 when it did. */
int job_too_large(job_t *job, int64_t size)
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

/* The validator for If-Range: a strong ETag, else Last-Modified (RFC 9110
 * 13.1.5: a weak ETag cannot be used). NULL when there is none. */
const char *job_validator(const job_t *job)
{
    if (job->etag && strncmp(job->etag, "W/", 2) != 0)
        return job->etag;
    return job->last_modified;
}

/* The response cannot continue what we have: drop it all once the pipeline
 * is idle (job_pump) and request the whole file again, at once. Not counted
 * as a failed attempt: the next response is a plain 200. */
void job_restart_from_zero(job_t *job, const char *why)
{
    log_warn("job %llu: %s: restarting %s from byte 0%s", (unsigned long long)job->id, why,
             job->key, job->seg ? " as one stream" : "");
    if (job->seg)
        job->js->stats.segment_fallbacks++;
    segs_stop(job);
    job->no_segments = 1; /* ranges of this file are not to be trusted again */
    transfer_rewind(&job->xfer);
    job_set_state(job, JOB_RESTARTING);
    job_seal(job);
    job->etag = (free(job->etag), NULL);
    job->last_modified = (free(job->last_modified), NULL);
    job_pump(job);
}

/* The single failure path: waiters hear now, the job leaves the table (a new
 * fetch starts afresh), and memory and the partial go once the pool is done.
 * digest: what the download hashed to, for a hash_mismatch (else NULL). */
void job_fail_digest(job_t *job, const char *code, const char *msg, const char *digest)
{
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return;
    jobs_t *js = job->js;
    job_set_state(job, JOB_FAILED);
    atomic_store(&job->failed, 1);
    /* Stopped, not broken (shutting_down): what is on disk is good to
     * resume from. Any other failure discards it (a new fetch starts
     * afresh). */
    const errcode_t *e = errcode_of(code);
    if (e->resumable && job_validator(job) != NULL)
        job->flags |= JOB_PARK;
    if (!e->not_failure) /* the end of a revalidation (not_modified) is no failure */
        log_warn("job %llu: %s failed: %s: %s", (unsigned long long)job->id, job->key, code, msg);
    job_unlist(job);
    uv_timer_stop(&job->timer);
    uv_timer_stop(&job->retry_timer);
    transfer_abort(&job->xfer);
    segs_stop(job);
    job_result_t res = {.err_code = code, .err_msg = msg, .sha256 = digest};
    job_notify_all(job, &res);
    if (!(job->items & JOB_ITEM_COMMIT)) /* else after_commit comes back to clean up */
        job_pump(job);
    jobs_start_queued(js);
}

void job_fail(job_t *job, const char *code, const char *msg)
{
    job_fail_digest(job, code, msg, NULL);
}

void job_not_modified(job_t *job)
{
    jobs_t *js = job->js;
    job_reval_t *rv = job->reval;
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
         * again (after_hit) with them. */
        w->cred_block = job->cred_headers ? strdup(job->cred_headers) : NULL;
        w->restarted = 1; /* it heard QUEUED or ATTACHED: no second on_start */
        if (jobs_serve_cached(js, w, job->key, rv->sha, rv->size, 1)) {
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

/* curl's --speed-limit and --speed-time: a body that brings fewer than
 * low_speed_limit bytes per second over low_speed_time ends the attempt as
 * a timeout (retried, resuming where it stopped). Only time in which we
 * wanted the server's bytes counts: the window starts again whenever we are
 * not reading (backpressure, between attempts, the body done). Returns 1
 * when the job was failed or set to retry. */
static int job_check_speed(job_t *job, uint64_t now)
{
    const hubd_config_t *cfg = job->js->cfg;
    if (!cfg->low_speed_limit || !cfg->low_speed_time_ms || job->state != JOB_BODY ||
        !job->xfer.req || (job->flags & JOB_PAUSED) || !job->slow_t0) {
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
    transfer_error(&job->xfer, "timeout", msg);
    return 1;
}

void job_on_progress_tick(uv_timer_t *t)
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
    segs_tick(job, now);
    job_seal_stale(job, now);
    uint64_t done = job->received;
    uint64_t inst = (done - job->last_done) * (1000 / PROGRESS_INTERVAL_MS);
    /* Smoothed over about a second, so the figure a user reads is steady. */
    job->rate = job->rate ? (job->rate * 7 + inst * 3) / 10 : inst;
    job_progress_t p = {.done = done,
                        .total = job->total,
                        .rate = job->rate,
                        .state = job_state_names[job->state],
                        .attempt = job->xfer.attempts,
                        .attempts_max = cfg->retries + 1};
    /* Told when the bytes grow, and when the state changes: a user sees
     * "connecting" and "retrying in 2 s (why)", not silence. */
    if (done == job->last_done && job->state != JOB_COMMITTING && p.state == job->shown_state &&
        p.attempt == job->shown_attempts)
        return;
    job->last_done = done;
    job->shown_state = p.state;
    job->shown_attempts = p.attempt;
    if (job->state == JOB_RETRY_WAIT) {
        p.retry_in_ms = job->retry_at > now ? job->retry_at - now : 0;
        p.reason = job->retry_reason;
    }
    list_node_t *n, *tmp;
    list_foreach_safe(&job->waiters, n, tmp)
    {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        w->on_progress(w, &p);
    }
}

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
void job_adopt_partial(job_t *job)
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
    job->total = p.total;
    job->etag = p.etag;
    job->last_modified = p.last_modified;
    if (!job_validator(job)) { /* never recorded so; do not trust it */
        job->etag = (free(job->etag), NULL);
        job->last_modified = (free(job->last_modified), NULL);
        job->part_id = job->id;
        job->resume_len = 0;
        job->resume_ranges = (free(job->resume_ranges), NULL);
        job->total = -1;
    }
}

/* A new job for u (taken on success) and w's credentials, owned by w->uid,
 * in the list of all jobs but not yet queued; it takes over a partial that
 * the cache records for the URL. Returns 0 or -ENOMEM (u still the
 * caller's). */
int job_new(jobs_t *js, url_t *u, job_waiter_t *w, job_t **out)
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
    /* Last of u's readers: a mirror rule may put another URL in its place. */
    transfer_init(&job->xfer, job, u);
    memcpy(job->cred_tag, w->cred_tag, sizeof job->cred_tag);
    job->owner = w->uid;
    job->cred_headers = w->cred_block; /* the job sends them to the first origin */
    w->cred_block = NULL;
    job->reval = w->reval; /* asked as a condition of its first request */
    w->reval = NULL;
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
    list_push_front(&js->all, &job->all_node);

    job->state = JOB_QUEUED; /* the first state: no transition */
    *out = job;
    return 0;
}

/* The transition table: allowed[from] is the set of states a job may go to
 * from `from`. A row not listed is refused (DONE and FAILED are final). */
#define TO(s) (1u << (s))
static const unsigned allowed[JOB_NSTATES] = {
    /* A free slot: re-hash a recorded partial first, or ask the origin;
     * a shutdown fails the queue. */
    [JOB_QUEUED] = TO(JOB_RESUMING) | TO(JOB_CONNECTING) | TO(JOB_FAILED),
    /* The partial re-hashed (or unusable: all again) asks for the rest; a
     * partial with every byte goes straight to the commit; one with ranges
     * past its prefix has lanes fetch the gaps (BODY). */
    [JOB_RESUMING] = TO(JOB_CONNECTING) | TO(JOB_BODY_DONE) | TO(JOB_BODY) | TO(JOB_FAILED),
    /* A head: taken (BODY), a redirect's next hop (CONNECTING again), a
     * transient failure (RETRY_WAIT), or a response that cannot continue
     * the bytes we have (RESTARTING). */
    [JOB_CONNECTING] = TO(JOB_CONNECTING) | TO(JOB_BODY) | TO(JOB_RETRY_WAIT) | TO(JOB_RESTARTING) |
                       TO(JOB_FAILED),
    /* The body ends well, or is cut (retried, resuming after what came);
     * a first range done, the rest is asked for (CONNECTING); a segment's
     * answer does not fit the others (RESTARTING). */
    [JOB_BODY] = TO(JOB_BODY_DONE) | TO(JOB_RETRY_WAIT) | TO(JOB_CONNECTING) | TO(JOB_RESTARTING) |
                 TO(JOB_FAILED),
    /* The backoff is over: resume, or start over without a validator. */
    [JOB_RETRY_WAIT] = TO(JOB_CONNECTING) | TO(JOB_RESTARTING) | TO(JOB_FAILED),
    /* The old attempt's items are back and its bytes dropped: from byte 0. */
    [JOB_RESTARTING] = TO(JOB_CONNECTING) | TO(JOB_FAILED),
    /* Hashed and written to the last byte (and room found): commit. */
    [JOB_BODY_DONE] = TO(JOB_COMMITTING) | TO(JOB_FAILED),
    /* Durable and recorded; or not kept, or a shutdown came meanwhile. */
    [JOB_COMMITTING] = TO(JOB_DONE) | TO(JOB_FAILED),
};
#undef TO

int job_transition_ok(job_state_t from, job_state_t to)
{
    return from < JOB_NSTATES && to < JOB_NSTATES && (allowed[from] >> to & 1u);
}

/* The one place a job's state changes. A refused transition is a bug of
 * this module: said in the log (and fatal in a debug build), and the job
 * keeps its state. */
void job_set_state(job_t *job, job_state_t to)
{
    if (!job_transition_ok(job->state, to)) {
        log_err("job %llu: refused state change %s -> %s", (unsigned long long)job->id,
                job_state_names[job->state], job_state_names[to]);
        assert(!"job state transition not in the table");
        return;
    }
    job->state = to;
}

/* The job's transfer asks for the bytes from the first one it lacks: all of
 * them are sealed, or the job restarted from 0. A new download asks for
 * its first chunk only (segments.h): a large file then goes on over
 * several connections. */
void job_begin_request(job_t *job)
{
    job_set_state(job, JOB_CONNECTING);
    transfer_start(&job->xfer, job->received, job->received ? 0 : segs_first_end(job));
}

/* The transfer took a response head (disposition DISP_TAKE): the body of
 * a file of total bytes (-1 unknown) follows; a whole file's validators
 * replace ours. Returns 0 to read the body, -1 when the job failed. */
int job_take_head(job_t *job, int64_t total, int new_validators, const char *etag,
                  const char *last_modified)
{
    job_set_state(job, JOB_BODY);
    job->total = total;
    if (job->reval) { /* not 304: a new version comes, the entry will be replaced */
        log_info("job %llu: %s changed at the origin: downloading it again",
                 (unsigned long long)job->id, job->key);
        free(job->reval);
        job->reval = NULL;
    }
    if (new_validators) {
        free(job->etag);
        free(job->last_modified);
        job->etag = etag ? strdup(etag) : NULL;
        job->last_modified = last_modified ? strdup(last_modified) : NULL;
    }
    if (job_too_large(job, job->total))
        return -1;
    jobs_evict(job->js, NULL); /* make room before writing, not after */
    if (job->xfer.offset == 0 && job->xfer.end && segs_begin(job) == 0 && job->seg) {
        job->js->stats.segmented++;
        segs_pump(job); /* the other connections start now, beside the first */
    }
    return 0;
}

/* The response ended well: the file is complete if its length says so. */
void job_body_ended(job_t *job)
{
    if (job->seg) { /* the first chunk is in: the lanes do the rest */
        segs_main_ended(job);
        return;
    }
    if (job->xfer.end && job->received == job->xfer.end && job->total >= 0 &&
        job->received < (uint64_t)job->total) {
        /* The first range of a file too small to segment: the rest, as one
         * stream; without a validator the two could be different files. */
        if (!job_validator(job)) {
            job_restart_from_zero(job, "no validator to join the rest to the first range");
            return;
        }
        job_seal(job);
        job_begin_request(job);
        return;
    }
    if (job->total >= 0 && job->received != (uint64_t)job->total) {
        /* A 206 that stopped short of its range (or a server that lied
         * about the total): never commit a prefix as the file. */
        char m[200];
        snprintf(m, sizeof m, "the response ended at byte %llu of %lld",
                 (unsigned long long)job->received, (long long)job->total);
        transfer_error(&job->xfer, "truncated", m);
        return;
    }
    job_seal(job);
    job_set_state(job, JOB_BODY_DONE);
    job->t_body = uv_now(job->js->loop);
    job_pump(job);
}
