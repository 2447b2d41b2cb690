/* waiters: a job's waiters, and what each is told: how far the partial is
 * written, progress, and the outcome (each waiter's own expected digest
 * checked here). Loop thread. Calls nothing above it: job.c, jobs.c and
 * cancel.c call these. */
#include "errcode.h"
#include "job_internal.h"
#include "wipe.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* STATS' errors by code: each failure a waiter is told is counted in its
 * row's bucket. */
static const char *const error_codes[JOBS_NERROR_CODES] = {JOBS_ERROR_CODES};

const char *jobs_error_code_name(unsigned i)
{
    return i < JOBS_NERROR_CODES ? error_codes[i] : NULL;
}

/* The bucket's index in errors_by_code: the row's bucket column
 * (errcode.h), in JOBS_ERROR_CODES' order; "other" is the last. */
static unsigned bucket_of(const char *code)
{
    const char *bucket = errcode_of(code)->bucket;
    unsigned i = 0;
    while (i < JOBS_NERROR_CODES - 1 && strcmp(error_codes[i], bucket) != 0)
        i++;
    return i;
}

void jobs_count_error(jobs_t *js, const char *code)
{
    js->stats.errors++;
    js->stats.errors_by_code[bucket_of(code)]++;
}

/* Twice the slots (16 at first), the uids moved over: 0 or -ENOMEM. */
static int served_grow(jobs_t *js)
{
    unsigned cap = js->served_cap ? 2 * js->served_cap : 16;
    struct jobs_served *t = calloc(cap, sizeof *t);
    if (!t)
        return -ENOMEM;
    for (unsigned k = 0; k < js->served_cap; k++) {
        if (!js->served[k].used)
            continue;
        unsigned i = (unsigned)js->served[k].uid & (cap - 1);
        while (t[i].used)
            i = (i + 1) & (cap - 1);
        t[i] = js->served[k];
    }
    free(js->served);
    js->served = t;
    js->served_cap = cap;
    return 0;
}

/* The uid's slot, found or taken; NULL for a new uid when the table is at
 * JOBS_SERVED_UIDS (or cannot grow). The table is never full: grown at
 * half, so a probe always ends at a free slot. */
static struct jobs_served *served_slot(jobs_t *js, uid_t uid)
{
    int may_add = 2 * (js->served_n + 1) <= js->served_cap ||
                  (js->served_n < JOBS_SERVED_UIDS && served_grow(js) == 0);
    if (!js->served_cap)
        return NULL;
    unsigned i = (unsigned)uid & (js->served_cap - 1);
    while (js->served[i].used && js->served[i].uid != uid)
        i = (i + 1) & (js->served_cap - 1);
    if (js->served[i].used)
        return &js->served[i];
    if (!may_add)
        return NULL;
    js->served[i].used = 1;
    js->served[i].uid = uid;
    js->served_n++;
    return &js->served[i];
}

void jobs_count_served(jobs_t *js, uid_t uid, uint64_t bytes)
{
    js->stats.bytes_served += bytes;
    struct jobs_served *s = served_slot(js, uid);
    if (s)
        s->bytes += bytes;
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
            w->on_written(w, job->pipe.on_disk, job->pipe.durable);
    }
}

static void job_notify_progress(job_t *job, const job_progress_t *p)
{
    list_node_t *n, *tmp;
    list_foreach_safe(&job->waiters, n, tmp)
    {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        w->on_progress(w, p);
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
            jobs_count_served(js, w->uid, r.size);
        wipe_free(w->cred_block); /* a vouched waiter's own: before, as w may go in on_finish */
        w->cred_block = NULL;
        w->on_finish(w, &r);
    }
}

/* A job a vouched request started failed (code) for its owner's
 * credentials (a token refused, a link that expired for them, ...): a
 * vouched waiter of other credentials did not ask with those, so it does
 * not fail with them; it goes on in a job of its own with its own headers
 * (jobs.c, through js->restart_waiter). Wrong bytes (hash_mismatch), a
 * cancel and a shutdown are everyone's. Called once the job is off the
 * table, so the waiter cannot find it again. */
void job_restart_vouched(job_t *job, const char *code)
{
    const errcode_t *e = errcode_of(code);
    if (!job->vouched[0] || e->not_failure || e->id == EC_SHUTTING_DOWN || e->id == EC_CANCELLED ||
        e->id == EC_HASH_MISMATCH)
        return;
    list_node_t *n, *tmp;
    list_foreach_safe(&job->waiters, n, tmp)
    {
        job_waiter_t *w = list_entry(n, job_waiter_t, node);
        if (w->vouched && w->expected[0] && strcmp(w->cred_tag, job->cred_tag) != 0)
            job->js->restart_waiter(job, w);
    }
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
void job_collect_waiters(job_t *job)
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

/* The progress tick's report: the rate, smoothed, and the waiters told
 * when the bytes grew or the state changed. */
void job_tell_progress(job_t *job, uint64_t now)
{
    const hubd_config_t *cfg = job->js->cfg;
    uint64_t done = job->pipe.received;
    uint64_t inst = (done - job->last_done) * (1000 / PROGRESS_INTERVAL_MS);
    /* Smoothed over about a second, so the figure a user reads is steady. */
    job->rate = job->rate ? (job->rate * 7 + inst * 3) / 10 : inst;
    job_progress_t p = {.done = done,
                        .total = job->file.total,
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
    job_notify_progress(job, &p);
}

/* The blob fd the DONE replies share (job.h). */
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
