/* cancel: CANCEL and INTERRUPT, a download ended on request. Loop thread. */
#include "job_internal.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The uids other than uid among j's waiters. */
static unsigned others_waiting(const job_t *j, uid_t uid)
{
    unsigned n = 0;
    for (const list_node_t *l = list_first(&j->waiters); l; l = list_next(&j->waiters, l))
        n += list_entry(l, job_waiter_t, node)->uid != uid;
    return n;
}

/* Whether uid created j or waits on it. */
static int involved(const job_t *j, uid_t uid)
{
    return j->owner == uid || others_waiting(j, uid) < j->nwaiters;
}

/* The listed (running or queued) job with this id, or of this URL: of the
 * jobs of one URL (one per set of credentials), one uid is involved in
 * first. */
static job_t *find(jobs_t *js, uint64_t id, const char *url, uid_t uid)
{
    job_t *any = NULL;
    list_t *lists[2] = {&js->active, &js->queue};
    for (int i = 0; i < 2; i++)
        for (list_node_t *n = list_first(lists[i]); n; n = list_next(lists[i], n)) {
            job_t *j = list_entry(n, job_t, node);
            if (id ? j->id != id : strcmp(j->key, url) != 0)
                continue;
            if (id || involved(j, uid))
                return j;
            any = any ? any : j;
        }
    return any;
}

int jobs_cancel_job(jobs_t *js, uint64_t id, const char *url, uid_t uid, int admin,
                    jobs_cancelled_t *out)
{
    job_t *j = find(js, id, url, uid);
    if (!j)
        return -ENOENT;
    out->job = j->id;
    out->waiters = j->nwaiters;
    out->others = others_waiting(j, uid);
    /* Not another user's download: theirs goes on whoever else asks. */
    if (!admin && (out->others || !involved(j, uid)))
        return -EPERM;
    char msg[96];
    snprintf(msg, sizeof msg, "the download was cancelled by uid %u", (unsigned)uid);
    log_info("job %llu: cancelled by uid %u (%u waiting)", (unsigned long long)j->id, (unsigned)uid,
             j->nwaiters);
    job_fail(j, "cancelled", msg); /* its partial goes: a cancel is not a pause */
    return 0;
}

void jobs_leave(job_waiter_t *w, jobs_left_t *out)
{
    job_t *j = w->job;
    memset(out, 0, sizeof *out);
    if (j) {
        out->job = j->id;
        out->done = j->pipe.received;
    }
    unsigned let_run = j ? j->flags & JOB_LET_RUN : 0;
    jobs_cancel(w);
    if (!j)
        return;
    j->flags = (j->flags & ~JOB_LET_RUN) | let_run; /* leaving on request is no hang-up */
    out->waiters = j->nwaiters;
    out->let_run = (j->flags & JOB_LET_RUN) != 0;
    /* Its bytes all in (committing), it goes on: stopping it would throw
     * away a finished download. */
    if (j->nwaiters || out->let_run || j->state >= JOB_BODY_DONE)
        return;
    /* A queued job has written nothing: an earlier run's partial, if any,
     * stays recorded for the next one. */
    out->resumable = j->state == JOB_QUEUED || job_validator(j) != NULL;
    out->stopped = 1;
    log_info("job %llu: stopped: its only client was interrupted (%s)", (unsigned long long)j->id,
             out->resumable ? "the partial is kept" : "no validator: the partial goes");
    job_fail(j, "interrupted", "the download was stopped: its only client was interrupted");
}
