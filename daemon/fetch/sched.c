/* sched: the queue of jobs waiting for a download slot, the global,
 * per-host and per-uid limits that decide when one starts (job.c starts
 * the ones jobs_next_startable picks), and the max_rate bucket. A layer
 * below job.c: it reports up only through js->rate_refilled. Loop thread. */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Off the table: new fetches of this URL no longer find the job. */
void job_unlist(job_t *job)
{
    jobs_t *js = job->js;
    if (job->flags & JOB_IN_ACTIVE) {
        list_remove(&job->node);
        job->flags &= ~JOB_IN_ACTIVE;
        js->stats.active--;
        if (job->flags & JOB_SLOT_FREED) {
            job->flags &= ~JOB_SLOT_FREED;
            js->slots_freed--;
        }
    }
    if (job->flags & JOB_IN_QUEUE) {
        list_remove(&job->node);
        job->flags &= ~JOB_IN_QUEUE;
        js->stats.queued--;
    }
}

/* Connections to host_key of the active downloads: one each, or as many
 * as a segmented one has open (at least one: it is about to ask). */
unsigned jobs_host_connections(jobs_t *js, const char *host_key)
{
    unsigned n = 0;
    for (list_node_t *p = list_first(&js->active); p; p = list_next(&js->active, p)) {
        job_t *j = list_entry(p, job_t, node);
        if (!(j->flags & JOB_SLOT_FREED) && strcmp(j->host_key, host_key) == 0) {
            unsigned c = j->seg ? segs_connections(j) : 1;
            n += c ? c : 1;
        }
    }
    return n;
}

static unsigned active_for_owner(jobs_t *js, uid_t uid)
{
    unsigned n = 0;
    for (list_node_t *p = list_first(&js->active); p; p = list_next(&js->active, p)) {
        const job_t *j = list_entry(p, job_t, node);
        n += j->owner == uid && !(j->flags & JOB_SLOT_FREED);
    }
    return n;
}

/* Active jobs that hold a download slot: not those committing, whose
 * bytes are in. A job waiting for its commit group holds no connection;
 * counted, it kept the next download from starting, so that a flood of
 * small files went half downloading, half committing, and each group
 * took half of max_jobs_per_user. */
static unsigned downloading(const jobs_t *js)
{
    return js->stats.active - js->slots_freed;
}

void jobs_release_slot(job_t *job)
{
    jobs_t *js = job->js;
    if ((job->flags & (JOB_IN_ACTIVE | JOB_SLOT_FREED)) != JOB_IN_ACTIVE)
        return;
    job->flags |= JOB_SLOT_FREED;
    js->slots_freed++;
}

void jobs_retake_slot(job_t *job)
{
    if (!(job->flags & JOB_SLOT_FREED))
        return;
    job->flags &= ~JOB_SLOT_FREED;
    job->js->slots_freed--;
}

/* Whether a queued job waits for something other than a connection to its
 * host: a download slot (max_downloads), or its user's max_jobs_per_user.
 * Such a job has no claim on the host's connections yet. */
static int held_elsewhere(jobs_t *js, const job_t *job)
{
    unsigned per_user = js->cfg->max_jobs_per_user;
    return downloading(js) >= js->cfg->max_downloads || js->shutting_down ||
           (per_user && active_for_owner(js, job->owner) >= per_user);
}

void jobs_host_load(jobs_t *js, const char *host_key, unsigned *conns, unsigned *waiting)
{
    unsigned n = 0;
    for (list_node_t *p = list_first(&js->queue); p; p = list_next(&js->queue, p)) {
        job_t *j = list_entry(p, job_t, node);
        n += strcmp(j->host_key, host_key) == 0 && !held_elsewhere(js, j);
    }
    *conns = jobs_host_connections(js, host_key);
    *waiting = n;
}

void jobs_mark_active(job_t *job)
{
    jobs_t *js = job->js;
    job->flags |= JOB_IN_ACTIVE;
    list_push_front(&js->active, &job->node); /* newest first */
    js->stats.active++;
}

job_t *jobs_next_startable(jobs_t *js)
{
    if (downloading(js) >= js->cfg->max_downloads || js->shutting_down)
        return NULL;
    unsigned per_user = js->cfg->max_jobs_per_user;
    /* The last host and user found full stay full through this scan:
     * each counts over the active jobs, and a queue of one user's small
     * files asked both of every job, one scan per job started. */
    const char *full_host = NULL;
    const job_t *full_owner = NULL;
    for (list_node_t *n = list_first(&js->queue); n; n = list_next(&js->queue, n)) {
        job_t *job = list_entry(n, job_t, node);
        /* A full host, or a user at max_jobs_per_user, waits without
         * holding up the others behind it in the queue. */
        if ((full_owner && full_owner->owner == job->owner) ||
            (full_host && strcmp(full_host, job->host_key) == 0))
            continue;
        if (per_user && active_for_owner(js, job->owner) >= per_user) {
            full_owner = job;
            continue;
        }
        if (jobs_host_connections(js, job->host_key) >= js->cfg->max_per_host) {
            full_host = job->host_key;
            continue;
        }
        job_unlist(job);
        return job;
    }
    return NULL;
}

/* Whether uid created max_requests_per_user jobs still queued or running:
 * a client that asks and hangs up leaves its job running, so the jobs one
 * uid created are bounded too. */
int jobs_uid_at_limit(const jobs_t *js, uid_t uid)
{
    unsigned max = js->cfg->max_requests_per_user, mine = 0;
    const list_t *lists[2] = {&js->active, &js->queue};
    for (int i = 0; max && i < 2; i++)
        for (const list_node_t *n = list_first(lists[i]); n; n = list_next(lists[i], n))
            mine += list_entry(n, job_t, node)->owner == uid;
    return max && mine >= max;
}

/* A new job goes to the end of the queue. */
void jobs_enqueue(job_t *job)
{
    jobs_t *js = job->js;
    job->flags |= JOB_IN_QUEUE;
    list_push_back(&js->queue, &job->node);
    js->stats.queued++;
}

/* ---- max_rate -------------------------------------------------------------- */

#define RATE_BURST_MS 100 /* the bucket holds this much of max_rate (64 KiB at least) */

static void rate_refill(jobs_t *js, uint64_t now)
{
    uint64_t rate = js->cfg->max_rate;
    if (!rate) { /* no cap (a SIGHUP may just have lifted it): no debt either */
        js->rate_tokens = 0;
        js->rate_t = now;
        return;
    }
    int64_t cap = (int64_t)(rate * RATE_BURST_MS / 1000);
    cap = cap > 65536 ? cap : 65536;
    /* A debt is paid at the rate, and the bucket fills up to cap: no step
     * needs to be longer than that takes (nor can the product overflow). */
    uint64_t full = (uint64_t)(cap - js->rate_tokens) * 1000 / rate + 1;
    uint64_t dt = now - js->rate_t < full ? now - js->rate_t : full;
    js->rate_tokens += (int64_t)(rate * dt / 1000);
    js->rate_t = now;
    if (js->rate_tokens > cap)
        js->rate_tokens = cap;
}

/* The bucket has something again: every job paused for the rate reads. */
static void on_rate_timer(uv_timer_t *t)
{
    jobs_t *js = t->data;
    js->rate_waiting = 0;
    rate_refill(js, uv_now(js->loop));
    if (js->cfg->max_rate && js->rate_tokens < 0) {
        uint64_t wait = (uint64_t)(-js->rate_tokens) * 1000 / js->cfg->max_rate;
        js->rate_waiting = 1;
        uv_timer_start(&js->rate_timer, on_rate_timer, wait ? wait : 1, 0);
        return;
    }
    js->rate_refilled(js); /* every job paused for the rate reads again */
}

int jobs_rate_take(jobs_t *js, size_t n)
{
    uint64_t rate = js->cfg->max_rate;
    if (!rate) /* max_rate was turned off (SIGHUP): a pause for it is lifted */
        return -1;
    rate_refill(js, uv_now(js->loop));
    js->rate_tokens -= (int64_t)n;
    if (js->rate_tokens >= 0 || js->rate_closed)
        return 0;
    /* Spent: this job stops reading until the bucket is refilled (the
     * others stop as they too take bytes from it). */
    if (!js->rate_waiting) {
        uint64_t wait = (uint64_t)(-js->rate_tokens) * 1000 / rate;
        js->rate_waiting = 1;
        uv_timer_start(&js->rate_timer, on_rate_timer, wait ? wait : 1, 0);
    }
    return 1;
}

void jobs_rate_reload(jobs_t *js)
{
    /* A new max_rate (or none): the paused jobs are judged by it now, not
     * when a wait worked out with the old one ends. */
    if (!js->rate_waiting || js->rate_closed)
        return;
    uv_timer_stop(&js->rate_timer);
    on_rate_timer(&js->rate_timer);
}

void jobs_rate_init(jobs_t *js)
{
    uv_timer_init(js->loop, &js->rate_timer);
    js->rate_timer.data = js;
    js->rate_t = uv_now(js->loop);
    worktrack_hold(&js->work); /* released when the timer is closed */
}

static void on_rate_timer_closed(uv_handle_t *h)
{
    jobs_t *js = h->data;
    worktrack_release(&js->work);
}

void jobs_rate_close(jobs_t *js)
{
    if (js->rate_closed)
        return;
    js->rate_closed = 1;
    uv_close((uv_handle_t *)&js->rate_timer, on_rate_timer_closed);
}
