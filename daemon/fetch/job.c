/* job: one job's life, decided in one place (docs/ARCHITECTURE.md walks
 * it): its start (jobs.c makes it; job_state.c checks each state change),
 * the failure path, restarts from byte 0, the retry of a failed attempt,
 * the commit, discard and park, and its end. The layers below report here
 * and never call up: its main
 * transfer through transfer_cbs_t (head, body, end, failure), its lanes
 * through segs_ops_t, its pipeline through pipeline_ops_t, its pool items
 * (commit.c) through their completion callbacks, the scheduler and the
 * eviction coordinator through jobs_t's callbacks. */
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

#define REFUSALS_MAX 3 /* connections refused in a row, nothing received: the end */

static const segs_ops_t job_segs_ops;
static void job_begin_request(job_t *job);
static void job_cleanup(job_t *job);
static void xfer_failure(transfer_t *t, const char *code, const char *msg);
static void on_retry_timer(uv_timer_t *timer);

static const char short_of_space_msg[] =
    "the cache's file system has too little room left for the download and min_free_space, "
    "and evicting what can be evicted does not make it";

/* ---- its end: handles, memory -------------------------------------------- */

/* One of the job's handles (its timers, its lanes' timers) is closed:
 * the job goes with the last. */
static void job_handle_closed(job_t *job)
{
    if (--job->handles_open > 0)
        return;
    jobs_t *js = job->js;
    list_remove(&job->all_node);
    db_partial_free(&job->pipe.ckpt);
    transfer_free(&job->xfer);
    free(job->accepts);
    free(job->uids);
    free(job->key);
    free(job->host_key);
    wipe_free(job->cred_headers);
    free(job->file.etag);
    free(job->file.last_modified);
    free(job->file.reval);
    free(job->resume_ranges);
    free(job->park_ranges);
    free(job);
    worktrack_release(&js->work);
}

static void job_on_timer_closed(uv_handle_t *h)
{
    job_handle_closed(h->data);
}

static void job_free(job_t *job)
{
    assert(!job->items && !job->pipe.items && !job->xfer.req && list_empty(&job->waiters));
    segs_reset(job);
    uv_close((uv_handle_t *)&job->timer, job_on_timer_closed);
    uv_close((uv_handle_t *)&job->retry_timer, job_on_timer_closed);
}

static void forget_validators(job_t *job)
{
    job->file.etag = (free(job->file.etag), NULL);
    job->file.last_modified = (free(job->file.last_modified), NULL);
}

/* What the main transfer holds goes to the pipeline as a sealed batch. */
static void seal_main(job_t *job)
{
    pipeline_seal(&job->pipe, &job->pipe.main);
}

/* A length announced (before anything is sized by it), or reached, above
 * max_file_size or more than the file system can hold fails the job
 * (too_large, no_space) before it fills the disk or memory. Returns 1
 * when it did. */
static int job_refuse_length(job_t *job, int64_t size, int announced)
{
    char msg[300];
    const char *code = size < 0 ? NULL
                                : jobs_length_refused(job->js, job->max_file_size, (uint64_t)size,
                                                      announced, msg, sizeof msg);
    if (code)
        job_fail(job, code, msg);
    return code != NULL;
}

/* ---- failure and restart ------------------------------------------------- */

/* The response cannot continue what we have: drop it all once the pipeline
 * is idle (job_step) and request the whole file again, at once. Not counted
 * as a failed attempt: the next response is a plain 200. */
static void job_restart_from_zero(job_t *job, const char *why)
{
    log_warn("job %llu: %s: restarting %s from byte 0%s", (unsigned long long)job->id, why,
             job->key, job->seg ? " as one stream" : "");
    if (job->seg)
        job->js->stats.segment_fallbacks++;
    segs_stop(job);
    job->no_segments = 1; /* ranges of this file are not to be trusted again */
    transfer_rewind(&job->xfer);
    job_set_state(job, JOB_RESTARTING);
    seal_main(job);
    forget_validators(job);
    job_step(job);
}

/* The single failure path: waiters hear now, the job leaves the table (a new
 * fetch starts afresh), and memory and the partial go once the pool is done.
 * digest: what the download hashed to, for a hash_mismatch (else NULL). */
static void job_fail_digest(job_t *job, const char *code, const char *msg, const char *digest)
{
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return;
    jobs_t *js = job->js;
    job_set_state(job, JOB_FAILED);
    job_swarm_end(job); /* the swarm lets go of its partial before the discard */
    atomic_store(&job->pipe.abandoned, 1);
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
    job_restart_vouched(job, code); /* other credentials' waiters go on alone */
    job_result_t res = {.err_code = code, .err_msg = msg, .sha256 = digest};
    job_notify_all(job, &res);
    if (!(job->items & JOB_ITEM_COMMIT)) /* else after_commit comes back to clean up */
        job_step(job);
    jobs_start_queued(js);
}

void job_fail(job_t *job, const char *code, const char *msg)
{
    job_fail_digest(job, code, msg, NULL);
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
        job->slow_from = job->pipe.received;
        return 0;
    }
    uint64_t span = now - job->slow_t0;
    if (span < cfg->low_speed_time_ms)
        return 0;
    uint64_t got = job->pipe.received - job->slow_from;
    job->slow_t0 = now;
    job->slow_from = job->pipe.received;
    if (got * 1000 >= (uint64_t)cfg->low_speed_limit * span)
        return 0;
    char msg[200];
    snprintf(msg, sizeof msg,
             "%llu bytes in %.1f s, below low_speed_limit (%u bytes/s over low_speed_time)",
             (unsigned long long)got, (double)span / 1000, cfg->low_speed_limit);
    xfer_failure(&job->xfer, "timeout", msg);
    return 1;
}

/* Seals and hands on the batches (the main transfer's and the lanes')
 * that are pipeline_batch_stale: every progress tick. */
static void seal_stale(job_t *job, uint64_t now)
{
    if (job->state != JOB_BODY)
        return;
    int sealed = segs_seal_stale(job, now);
    sealed |= pipeline_seal_stale(&job->pipe, &job->pipe.main, now);
    if (sealed)
        job_step(job);
}

static void job_on_progress_tick(uv_timer_t *t)
{
    job_t *job = t->data;
    uint64_t now = uv_now(job->js->loop);
    if (job->deadline_ms && job->state != JOB_COMMITTING &&
        now - job->t_start >= job->deadline_ms) {
        char msg[100];
        snprintf(msg, sizeof msg, "the deadline of %u ms for the whole fetch passed",
                 job->deadline_ms);
        job_fail(job, "timeout", msg);
        return;
    }
    if (job_check_speed(job, now))
        return;
    segs_tick(job, now);
    seal_stale(job, now);
    job_tell_progress(job, now);
}

/* ---- its creation and start ---------------------------------------------- */

static void after_rehash(uv_work_t *req, int status);

/* A recorded partial is re-hashed before the rest is asked for. */
static void start_rehash(job_t *job)
{
    /* The file keeps its recorded ranges past the prefix too; ranges that
     * do not parse are dropped (only the prefix is trusted then). */
    int64_t keep = db_partial_keep(job->resume_len, job->resume_ranges);
    if (keep < 0 || (job->file.total >= 0 && keep > job->file.total)) {
        job->resume_ranges = (free(job->resume_ranges), NULL);
        keep = (int64_t)job->resume_len;
    }
    job->resume_keep = (uint64_t)keep;
    job_set_state(job, JOB_RESUMING);
    job_rehash_queue(job, after_rehash);
}

static void after_rehash(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    job->items &= ~JOB_ITEM_REHASH;
    uint64_t len = job->resume_len;
    /* The partial is the pipeline's now (to resume, park or discard). */
    pipeline_resumed(&job->pipe, job->rehash_rc ? -1 : job->rehash_fd, len);
    if (job->state == JOB_FAILED) {
        job_step(job);
        return;
    }
    if (job->rehash_rc) {
        log_warn("job %llu: cannot resume the partial of %s (%s): downloading it all",
                 (unsigned long long)job->id, job->key, strerror(-job->rehash_rc));
        job->resume_len = 0;
        job->resume_ranges = (free(job->resume_ranges), NULL);
        job->file.total = -1;
        forget_validators(job);
        job_begin_request(job);
        return;
    }
    job->last_done = len;
    log_info("job %llu: resuming %s at byte %llu of its partial (re-hashed in %.3f s)",
             (unsigned long long)job->id, job->key, (unsigned long long)len,
             (double)(uv_now(job->js->loop) - job->t_start) / 1000);
    if (job->file.total >= 0 && len == (uint64_t)job->file.total) {
        /* Every byte was there: a crash came between the last write and the
         * commit. Nothing to ask the origin for. */
        job_set_state(job, JOB_BODY_DONE);
        job->t_body = uv_now(job->js->loop);
        job_step(job);
        return;
    }
    /* Ranges past the prefix: the lanes fetch the gaps. */
    if (job->resume_ranges && segs_resume(job, job->resume_ranges, &job_segs_ops)) {
        job_set_state(job, JOB_BODY);
        segs_pump(job);
        return;
    }
    job_begin_request(job);
}

/* A free slot: the job goes active, with its progress timer. */
static void job_activate(job_t *job)
{
    jobs_t *js = job->js;
    jobs_mark_active(job);
    uv_timer_start(&job->timer, job_on_progress_tick, PROGRESS_INTERVAL_MS, PROGRESS_INTERVAL_MS);
    job->t_start = uv_now(js->loop);
    job->max_file_size = js->cfg->max_file_size;
    job->deadline_ms = js->cfg->deadline_ms;
    pipeline_clock(&job->pipe, job->t_start); /* checkpoints count from now */
    if (job->resume_len || job->resume_ranges) {
        start_rehash(job);
    } else if (!job_swarm_take(job)) {
        job_begin_request(job);
    } else if (job->state == JOB_SWARM) {
        /* Its slot to the next: the files this node seeds must not wait
         * behind those it waits for, on every node at once. */
        jobs_release_slot(job);
        jobs_start_queued(js);
    }
}

/* The swarm let go of a job: the partial it filled is re-hashed whole,
 * then committed (unreadable: the origin); or the origin, from byte 0; or
 * a failure. */
void job_swarm_back(job_t *job, int origin, const char *code, const char *msg)
{
    if (code) {
        job_fail(job, code, msg);
    } else if (origin) {
        job_begin_request(job);
    } else {
        job->resume_len = (uint64_t)job->file.total;
        job->resume_ranges = (free(job->resume_ranges), NULL);
        start_rehash(job);
    }
}

void jobs_start_queued(jobs_t *js)
{
    if (js->starting_queued) { /* a job failed while starting: rescan after */
        js->start_again = 1;
        return;
    }
    js->starting_queued = 1;
    do {
        js->start_again = 0;
        job_t *job;
        while ((job = jobs_next_startable(js)) != NULL)
            job_activate(job);
    } while (js->start_again);
    js->starting_queued = 0;
}

/* ---- its main transfer (transfer_cbs_t) ------------------------------------ */

/* A request that could not start, reported a turn later. */
static void on_begin_failed(uv_timer_t *timer);

/* The job's transfer asks for the bytes from the first one it lacks: all of
 * them are sealed, or the job restarted from 0. A new download asks for
 * its first chunk only (segments.h): a large file then goes on over
 * several connections. */
static void job_begin_request(job_t *job)
{
    job_set_state(job, JOB_CONNECTING);
    uint64_t from = job->pipe.received;
    if (transfer_start(&job->xfer, from, from ? 0 : segs_first_end(job), 1))
        uv_timer_start(&job->retry_timer, on_begin_failed, 0, 0);
}

/* A failed attempt on the mirror: the transfer goes to the job's own URL
 * at once (no backoff, not counted as an attempt), resuming after the
 * bytes it has, as a retry would (If-Range guards the join; a validator
 * the origin does not share restarts from byte 0). Returns 1 when it fell
 * back; 0 when the transfer is not on the mirror, or mirror_fallback is
 * off, or a shutdown is under way: the failure is then the job's. */
static int fall_back(job_t *job, const char *code, const char *msg)
{
    if (!job->xfer.mirror_url || !job->js->cfg->mirror_fallback || job->js->shutting_down)
        return 0;
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return 1;
    transfer_fall_back(&job->xfer, code, msg, job->pipe.received);
    job_set_state(job, JOB_RETRY_WAIT);
    seal_main(job); /* what arrived is kept: the origin is asked for the rest */
    uv_timer_start(&job->retry_timer, on_retry_timer, 0, 0);
    job_step(job);
    return 1;
}

static void on_begin_failed(uv_timer_t *timer)
{
    job_t *job = timer->data;
    if (!fall_back(job, job->xfer.begin_code, job->xfer.begin_msg))
        job_fail(job, job->xfer.begin_code, job->xfer.begin_msg);
}

static void on_retry_timer(uv_timer_t *timer)
{
    job_t *job = timer->data;
    if (job->state != JOB_RETRY_WAIT)
        return;
    if (job->pipe.received > 0 && !job_validator(job)) {
        /* Nothing to tie a range to the same file: safer to start over. */
        job_set_state(job, JOB_RESTARTING);
        job_step(job);
        return;
    }
    job_begin_request(job);
}

/* The transfer took a response head (DISP_TAKE): the body of a file of
 * total bytes (-1 unknown) follows; a whole file's validators replace
 * ours. Returns 0 to read the body, -1 when the job failed. */
static int take_head(job_t *job, int64_t total, int new_validators, const char *etag,
                     const char *last_modified)
{
    job_set_state(job, JOB_BODY);
    job->file.total = total;
    if (job->file.reval) { /* not 304: a new version comes, the entry will be replaced */
        log_info("job %llu: %s changed at the origin: downloading it again",
                 (unsigned long long)job->id, job->key);
        free(job->file.reval);
        job->file.reval = NULL;
    }
    if (new_validators) {
        forget_validators(job);
        job->file.etag = etag ? strdup(etag) : NULL;
        job->file.last_modified = last_modified ? strdup(last_modified) : NULL;
    }
    if (job_refuse_length(job, job->file.total, 1)) /* before eviction or segments count on it */
        return -1;
    jobs_evict(job->js, NULL); /* make room before writing, not after */
    if (job->xfer.offset == 0 && job->xfer.end && segs_begin(job, &job_segs_ops) == 0 && job->seg) {
        job->js->stats.segmented++;
        segs_pump(job); /* the other connections start now, beside the first */
    }
    return 0;
}

/* A response head, and what disposition_of() says it means. */
static int xfer_head(transfer_t *t, const disposition_t *d, const http_response_t *resp)
{
    job_t *job = t->owner;
    switch (d->kind) {
    case DISP_FAIL:
        if (!fall_back(job, d->code, d->msg))
            job_fail(job, d->code, d->msg);
        return HTTP_BODY_DISCARD;
    case DISP_RESTART:
        job_restart_from_zero(job, d->why);
        return HTTP_BODY_DISCARD;
    case DISP_REDIRECT:     /* followed once the body is drained (xfer_end) */
    case DISP_STATUS:       /* failed then (xfer_failure), so that the connection is kept */
    case DISP_NOT_MODIFIED: /* served from the cache then (xfer_end) */
    case DISP_NONE:
        return HTTP_BODY_DISCARD;
    case DISP_TAKE:
        break;
    }
    return take_head(job, d->total, d->new_validators, resp->etag, resp->last_modified)
               ? HTTP_BODY_DISCARD
               : HTTP_BODY_DELIVER;
}

/* n body bytes came: max_rate counts them (a spent bucket pauses the job,
 * a max_rate turned off lifts the pause). */
static void take_rate(job_t *job, size_t n)
{
    int r = jobs_rate_take(job->js, n);
    if (r > 0)
        job_set_pause(job, PAUSE_RATE, 1);
    else if (r < 0 && (job->pause & PAUSE_RATE))
        job_set_pause(job, PAUSE_RATE, 0);
}

/* n body bytes at p, in the pooled read buffer buf: into the pipeline
 * through its main cursor. */
static void xfer_body(transfer_t *t, buf_t *buf, const char *p, size_t n)
{
    job_t *job = t->owner;
    segs_main_body(job, n);
    if (job_refuse_length(job, (int64_t)(job->pipe.received + n), 0)) /* chunked, or a lie */
        return;
    if (pipeline_append(&job->pipe, &job->pipe.main, 0, buf, p, n)) {
        job_fail(job, "internal", "out of memory");
        return;
    }
    take_rate(job, n);
}

/* Whether a report of the main transfer comes too late: the job failed, or
 * restarts, or waits to retry (the request was ours to drop). */
static int xfer_gone(const job_t *job)
{
    return job->state == JOB_FAILED || job->state == JOB_DONE || job->state == JOB_RESTARTING ||
           job->state == JOB_RETRY_WAIT;
}

/* The response ended well: the file is complete if its length says so. */
static void body_ended(job_t *job)
{
    if (job->seg) { /* the first chunk is in: the lanes do the rest */
        segs_main_ended(job);
        if (job->state == JOB_BODY_DONE) /* the lanes were done first: the hash may go on */
            job_step(job);
        return;
    }
    uint64_t got = job->pipe.received;
    int64_t total = job->file.total;
    if (job->xfer.end && got == job->xfer.end && total >= 0 && got < (uint64_t)total) {
        /* The first range of a file too small to segment: the rest, as one
         * stream; without a validator the two could be different files. */
        if (!job_validator(job)) {
            job_restart_from_zero(job, "no validator to join the rest to the first range");
            return;
        }
        seal_main(job);
        job_begin_request(job);
        return;
    }
    if (total >= 0 && got != (uint64_t)total) {
        /* A 206 that stopped short of its range (or a server that lied
         * about the total): never commit a prefix as the file. */
        char m[200];
        snprintf(m, sizeof m, "the response ended at byte %llu of %lld", (unsigned long long)got,
                 (long long)total);
        xfer_failure(&job->xfer, "truncated", m);
        return;
    }
    seal_main(job);
    job_set_state(job, JOB_BODY_DONE);
    job->t_body = uv_now(job->js->loop);
    job_step(job);
}

static void xfer_end(transfer_t *t)
{
    job_t *job = t->owner;
    if (xfer_gone(job))
        return;
    if (t->disp.kind == DISP_REDIRECT)
        job_begin_request(job); /* at the next hop */
    else if (t->disp.kind == DISP_NOT_MODIFIED)
        job->js->not_modified(job);
    else
        body_ended(job);
}

/* A failed attempt (code as in PROTOCOL.md): retried after a backoff with
 * jitter (at least what Retry-After asked, within retry_max_delay and the
 * deadline), resuming at the first byte the job does not have; or, when
 * retry_decide says so, the job fails. A segmented download's lanes fetch
 * the rest of the main transfer's chunk instead; a mirror's failure falls
 * back to the origin. */
static void xfer_failure(transfer_t *t, const char *code, const char *msg)
{
    job_t *job = t->owner;
    int refused = t->refused_now; /* every address refused: nothing listens there */
    t->refused_now = 0;
    if (xfer_gone(job))
        return;
    if (job->seg && segs_main_failed(job, code, msg))
        return; /* the lanes fetch the rest of its chunk */
    jobs_t *js = job->js;
    const hubd_config_t *cfg = js->cfg;
    char final[600], named[500];
    if (fall_back(job, code, msg))
        return;
    if (t->mirror_url) { /* mirror_fallback = no: say whose failure it is */
        snprintf(named, sizeof named, "the mirror %s: %s", t->mirror_shown, msg);
        msg = named;
    }
    /* Refused on every attempt, and not a byte received: nothing listens
     * there, and the rest of the backoff budget would only keep the user
     * waiting. REFUSALS_MAX in a row (about 1.5 s) end it. */
    t->refused = refused ? t->refused + 1 : 0;
    uint64_t now = uv_now(js->loop);
    retry_in_t in = {
        .code = code,
        .attempts = t->attempts,
        .retries = cfg->retries,
        .shutting_down = js->shutting_down,
        .hopeless =
            t->refused >= REFUSALS_MAX && t->refused == t->attempts + 1 && !job->pipe.received,
        .retry_after_ms = t->disp.retry_after_ms,
        .base_ms = cfg->retry_delay_ms,
        .max_ms = cfg->retry_max_delay_ms,
        .rnd = (uint64_t)random(),
        .elapsed_ms = now - job->t_start,
        .deadline_ms = job->deadline_ms,
    };
    retry_out_t out;
    retry_decide(&in, &out);
    if (out.verdict == RETRY_FAIL) {
        if (out.after_n || out.deadline) {
            snprintf(final, sizeof final,
                     out.deadline ? "%s (deadline reached after %u attempts)"
                                  : "%s (after %u attempts)",
                     msg, t->attempts + 1);
            msg = final;
        }
        job_fail(job, code, msg);
        return;
    }
    t->attempts++;
    transfer_rewind(t); /* the Retry-After is spent with the disposition */
    job_set_state(job, JOB_RETRY_WAIT);
    snprintf(job->retry_reason, sizeof job->retry_reason, "%.159s",
             msg); /* a status line shows it */
    job->retry_at = now + out.delay_ms;
    seal_main(job); /* what arrived is kept: the next request resumes after it */
    log_warn("job %llu: attempt %u of %s failed: %s: %s; retrying in %llu ms from byte %llu",
             (unsigned long long)job->id, t->attempts, job->key, code, msg,
             (unsigned long long)out.delay_ms, (unsigned long long)job->pipe.received);
    uv_timer_start(&job->retry_timer, on_retry_timer, out.delay_ms, 0);
    job_step(job);
}

const transfer_cbs_t job_xfer_cbs = {xfer_head, xfer_body, xfer_end, xfer_failure};

/* ---- its pipeline (pipeline_ops_t) and its steps ---------------------------- */

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

/* The write item found that the download would eat into min_free_space:
 * ask eviction for room, and fail the job (no_space) when a run started
 * since could not make it. Returns 1 when the job failed. */
static int short_of_space(job_t *job)
{
    jobs_t *js = job->js;
    if (!job->pipe.space_short || job->state == JOB_FAILED) {
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
    job_fail(job, "no_space", short_of_space_msg);
    return 1;
}

/* Downloads short of room that waited for a run started after they asked:
 * still short, they fail; else they go on (to their commit). */
void job_after_evict(jobs_t *js)
{
    list_node_t *n, *tmp;
    list_foreach_safe(&js->active, n, tmp) /* job_fail unlists j */
    {
        job_t *j = list_entry(n, job_t, node);
        if (js->shutting_down)
            break;
        if (!(j->flags & JOB_SHORT_WAIT) || js->evict_runs <= j->short_runs)
            continue;
        if (js->evict_short_after) {
            job_fail(j, "no_space", short_of_space_msg);
        } else {
            j->flags &= ~JOB_SHORT_WAIT;
            job_step(j);
        }
    }
}

/* The max_rate bucket has something again: every job paused for it reads. */
void job_rate_refilled(jobs_t *js)
{
    list_node_t *n, *tmp;
    list_foreach_safe(&js->active, n, tmp)
    {
        job_t *job = list_entry(n, job_t, node);
        if (job->pause & PAUSE_RATE)
            job_set_pause(job, PAUSE_RATE, 0);
    }
}

static void pipe_item_done(void *owner, const pipeline_done_t *d)
{
    job_t *job = owner;
    if (d->code && job->state != JOB_FAILED) {
        job_fail(job, d->code, d->msg);
        return;
    }
    if (d->item == PIPE_WRITE && short_of_space(job))
        return;
    /* Not the old attempt's bytes while restarting: they are dropped, and
     * the restart tells written 0 (job_step). */
    if (d->grew && job->state != JOB_FAILED && job->state != JOB_RESTARTING)
        job_notify_written(job);
    job_step(job);
}

static void pipe_tag_written(void *owner, void *tag, uint64_t bytes)
{
    (void)owner;
    segs_chunk_written(tag, bytes);
}

static uint64_t pipe_prefix(void *owner)
{
    return segs_prefix(owner);
}

static void pipe_set_paused(void *owner, int paused)
{
    job_set_pause(owner, PAUSE_BACKPRESSURE, paused);
}

const pipeline_ops_t job_pipe_ops = {pipe_item_done, pipe_tag_written, pipe_prefix,
                                     pipe_set_paused};

/* Starts a checkpoint of what is on disk when one is due and none is in
 * flight (and the commit is not about to make it moot). Only a partial with
 * a validator can be resumed, so only such is recorded. */
static void checkpoint(job_t *job)
{
    pipeline_t *p = &job->pipe;
    uint64_t now = uv_now(job->js->loop);
    /* Segmented: what counts is every byte written, the ranges past the
     * prefix too. */
    uint64_t on_disk = job->seg ? segs_written_sum(job) : p->on_disk;
    uint64_t durable = job->seg ? p->durable_sum : p->durable;
    if (job->state == JOB_RESTARTING || job->state == JOB_BODY_DONE ||
        job->state == JOB_COMMITTING || job->state == JOB_DONE || job->state == JOB_FAILED ||
        !job_validator(job) || !pipeline_checkpoint_wanted(p, on_disk, durable, now))
        return;
    db_partial_t row = {.total = job->file.total};
    row.etag = job->file.etag ? strdup(job->file.etag) : NULL;
    row.last_modified = job->file.last_modified ? strdup(job->file.last_modified) : NULL;
    if ((job->file.etag && !row.etag) || (job->file.last_modified && !row.last_modified)) {
        db_partial_free(&row);
        return; /* no memory: try again after the next write */
    }
    row.ranges = job->seg ? segs_ranges(job) : NULL; /* NULL: the prefix alone, safe */
    pipeline_checkpoint(p, &row, on_disk, now);
}

static void start_commit(job_t *job);

void job_step(job_t *job)
{
    if (job->state == JOB_FAILED) {
        job_cleanup(job);
        return;
    }
    if (job->state == JOB_RESTARTING) {
        /* Once no item of the old attempt is in flight, drop all it left and
         * start the hash and the file over; until then submit nothing. */
        if (job->pipe.items || (job->items & JOB_ITEM_REHASH))
            return;
        segs_reset(job);
        pipeline_drop(&job->pipe);
        pipeline_restart(&job->pipe);
        job->last_done = 0;
        job->file.total = -1;
        job_notify_written(job); /* written (and durable) are 0 again */
        job_begin_request(job);
        return;
    }
    pipeline_pump(&job->pipe);
    checkpoint(job);
    segs_pump(job); /* the hash moved on: chunks within the budget again */
    /* Not while short of room: the eviction run it asked for decides
     * (job_after_evict) whether there is room for it to be kept. A
     * segmented download also waits for the hash to reach its end. */
    if (job->state == JOB_BODY_DONE && pipeline_drained(&job->pipe) &&
        !(job->items & JOB_ITEM_REHASH) && !(job->flags & JOB_SHORT_WAIT) &&
        (!job->seg || job->pipe.hashed == (uint64_t)job->file.total))
        start_commit(job);
}

/* ---- the commit, the discard and the park (commit.c's items) ---------------- */

static void after_commit(uv_work_t *req, int status);

static void start_commit(job_t *job)
{
    job_collect_waiters(job);
    job_set_state(job, JOB_COMMITTING);
    job_commit_queue(job, after_commit);
    jobs_release_slot(job); /* its slot to the next queued download */
    jobs_start_queued(job->js);
}

/* Back from the discard or the park item: the job goes. */
static void after_cleanup(uv_work_t *req, int status)
{
    job_t *job = req->data;
    (void)status;
    if ((job->flags & JOB_PARK) && job->parked > 0)
        log_info("job %llu: kept the first %llu bytes of %s to resume", (unsigned long long)job->id,
                 (unsigned long long)job->parked, job->key);
    job_free(job);
}

/* After a failure: once no item is in flight, drop the batches and the
 * partial file (or keep it, parked, to resume), then free the job. */
static void job_cleanup(job_t *job)
{
    if (job->items || job->pipe.items || (job->flags & JOB_CLEANING))
        return;
    pipeline_drop(&job->pipe);
    job->flags |= JOB_CLEANING;
    if (!job->pipe.tmp_made && job->pipe.fd < 0) {
        job_free(job);
        return;
    }
    if (job->flags & JOB_PARK) {
        if (job->seg) /* what the lanes wrote past the prefix is kept too */
            job->park_ranges = segs_ranges(job);
        job_park_queue(job, after_cleanup);
    } else {
        job_discard_queue(job, after_cleanup);
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
        job->pipe.tmp_made = 0; /* the commit consumed or removed the partial */
        job_cleanup(job);
        return;
    }
    if (job->commit_rc == -EBADMSG) {
        /* Not kept: every waiter when the commit started expected another
         * digest. One that attached since and would have taken these
         * bytes did not fail: it goes on in a job of its own. */
        job->pipe.tmp_made = 0;
        job_unlist(job);
        list_node_t *n, *tmp;
        list_foreach_safe(&job->waiters, n, tmp)
        {
            job_waiter_t *w = list_entry(n, job_waiter_t, node);
            /* The swarm's bytes are not the digest asked for (a member
             * named another file's torrent): once more from the origin. */
            int swarm = job->swarm_brought && strcmp(w->expected, job->swarm_sha) == 0;
            w->no_swarm = swarm;
            if (swarm || !w->expected[0] || strcmp(w->expected, job->digest) == 0)
                js->restart_waiter(job, w);
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
        job->pipe.tmp_made = 0;
        job_fail(job, job->commit_rc == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    uint64_t now = uv_now(js->loop), size = job->pipe.received;
    log_info("job %llu: stored %s (%llu bytes, sha256 %s) in %.3f s, of which %.3f s after the "
             "last byte (hash, write, fsync, commit)",
             (unsigned long long)job->id, job->key, (unsigned long long)size, job->digest,
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
        .size = size,
        .fd = fd,
        .err_code = fd ? NULL : "internal", /* no memory to hand the file out */
        .err_msg = fd ? NULL : "out of memory",
    };
    job_notify_all(job, &res);
    job->ro_fd = -1;
    job_fd_unref(fd); /* the waiters' DONE lines hold it until sent */
    job_swarm_committed(job, path, size);
    if (js->cfg->max_cache_size && size > js->cfg->max_cache_size)
        jobs_drop_oversized(js, job->digest, size);
    else
        jobs_evict(js, job->digest); /* the new blob stays: its waiters were just told */
    job_free(job);
    jobs_start_queued(js);
}

/* ---- its lanes (segs_ops_t) --------------------------------------------------- */

/* Every byte came over the lanes (theirs sealed): the body is done. */
static void segs_all_in(job_t *job)
{
    seal_main(job);
    if (job->pipe.received != (uint64_t)job->file.total) { /* a bug of segments' */
        log_err("job %llu: %llu bytes received for a file of %lld", (unsigned long long)job->id,
                (unsigned long long)job->pipe.received, (long long)job->file.total);
        job_fail(job, "internal", "the segments' bytes do not add up");
        return;
    }
    job_set_state(job, JOB_BODY_DONE);
    job->t_body = uv_now(job->js->loop);
    job_step(job);
}

static void segs_host_load(job_t *job, unsigned *conns, unsigned *waiting)
{
    jobs_host_load(job->js, job->host_key, conns, waiting);
}

static void segs_released(job_t *job)
{
    jobs_start_queued(job->js);
}

static const segs_ops_t job_segs_ops = {
    job_fail,       job_restart_from_zero, take_rate,         segs_all_in,
    segs_host_load, segs_released,         job_handle_closed,
};
