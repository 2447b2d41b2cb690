/* sched: the queue of jobs waiting for a download slot, and the global,
 * per-host and per-uid limits that decide when one starts. Loop thread. */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void list_remove(job_t **head, job_t **tail, job_t *job)
{
    if (job->prev)
        job->prev->next = job->next;
    else
        *head = job->next;
    if (job->next)
        job->next->prev = job->prev;
    else if (tail)
        *tail = job->prev;
    job->next = job->prev = NULL;
}

/* Off the table: new fetches of this URL no longer find the job. */
void job_unlist(job_t *job)
{
    jobs_t *js = job->js;
    if (job->flags & JOB_IN_ACTIVE) {
        list_remove(&js->active, NULL, job);
        job->flags &= ~JOB_IN_ACTIVE;
        js->stats.active--;
    }
    if (job->flags & JOB_IN_QUEUE) {
        list_remove(&js->queue_head, &js->queue_tail, job);
        job->flags &= ~JOB_IN_QUEUE;
        js->stats.queued--;
    }
}

static unsigned active_for_host(jobs_t *js, const char *host_key)
{
    unsigned n = 0;
    for (job_t *j = js->active; j; j = j->next)
        if (strcmp(j->host_key, host_key) == 0)
            n++;
    return n;
}

static unsigned active_for_owner(jobs_t *js, uid_t uid)
{
    unsigned n = 0;
    for (job_t *j = js->active; j; j = j->next)
        n += j->owner == uid;
    return n;
}

static void job_activate(job_t *job)
{
    jobs_t *js = job->js;
    job->flags |= JOB_IN_ACTIVE;
    job->next = js->active;
    job->prev = NULL;
    if (js->active)
        js->active->prev = job;
    js->active = job;
    js->stats.active++;
    uv_timer_start(&job->timer, job_on_progress_tick, PROGRESS_INTERVAL_MS, PROGRESS_INTERVAL_MS);
    job->t_start = job->t_ckpt = uv_now(js->loop);
    if (job->resume_len)
        job_start_rehash(job);
    else
        job_begin_request(job);
}

/* Starts queued jobs, oldest first, while the global and per-host limits
 * allow; a job whose host is full waits without blocking other hosts. */
void jobs_start_queued(jobs_t *js)
{
    if (js->starting_queued) { /* a job failed while starting: rescan after */
        js->start_again = 1;
        return;
    }
    js->starting_queued = 1;
    do {
        js->start_again = 0;
        job_t *job = js->queue_head;
        while (job && js->stats.active < js->cfg->max_downloads && !js->shutting_down) {
            /* A full host, or a user at max_jobs_per_user, waits without
             * holding up the others behind it in the queue. */
            unsigned per_user = js->cfg->max_jobs_per_user;
            if (active_for_host(js, job->host_key) >= js->cfg->max_per_host ||
                (per_user && active_for_owner(js, job->owner) >= per_user)) {
                job = job->next;
                continue;
            }
            job_unlist(job);
            job_activate(job);
            job = js->queue_head; /* activation may have changed the queue */
        }
    } while (js->start_again);
    js->starting_queued = 0;
}

/* Whether uid created max_requests_per_user jobs still queued or running:
 * a client that asks and hangs up leaves its job running, so the jobs one
 * uid created are bounded too. */
int jobs_uid_at_limit(const jobs_t *js, uid_t uid)
{
    unsigned max = js->cfg->max_requests_per_user, mine = 0;
    job_t *lists[2] = {js->active, js->queue_head};
    for (int i = 0; max && i < 2; i++)
        for (job_t *j = lists[i]; j; j = j->next)
            mine += j->owner == uid;
    return max && mine >= max;
}

/* A new job goes to the end of the queue. */
void jobs_enqueue(job_t *job)
{
    jobs_t *js = job->js;
    job->flags |= JOB_IN_QUEUE;
    job->prev = js->queue_tail;
    if (js->queue_tail)
        js->queue_tail->next = job;
    else
        js->queue_head = job;
    js->queue_tail = job;
    js->stats.queued++;
}
