/* job_state: the states a job may go through, and the one function that
 * changes a job's state, checked against the table (each row says why a
 * change is allowed). Loop thread; calls nothing above it. */
#include "job_internal.h"
#include "log.h"

#include <assert.h>

/* The names STATUS shows: the states that are sub-steps of another show
 * as that one. */
const char *const job_state_names[JOB_NSTATES] = {
    [JOB_QUEUED] = "queued",         [JOB_RESUMING] = "resuming",
    [JOB_CONNECTING] = "connecting", [JOB_BODY] = "downloading",
    [JOB_RETRY_WAIT] = "retrying",   [JOB_RESTARTING] = "retrying",
    [JOB_BODY_DONE] = "downloading", [JOB_COMMITTING] = "committing",
    [JOB_SWARM] = "downloading",     [JOB_DONE] = "done",
    [JOB_FAILED] = "failed",
};

/* The transition table: allowed[from] is the set of states a job may go to
 * from `from`. A row not listed is refused (DONE and FAILED are final). */
#define TO(s) (1u << (s))
static const unsigned allowed[JOB_NSTATES] = {
    /* A free slot: re-hash a recorded partial first, or ask the origin;
     * a shutdown fails the queue. */
    [JOB_QUEUED] = TO(JOB_RESUMING) | TO(JOB_CONNECTING) | TO(JOB_SWARM) | TO(JOB_FAILED),
    /* The cluster brought every byte (re-hashed whole before the commit),
     * or cannot bring it: the origin, from byte 0. */
    [JOB_SWARM] = TO(JOB_RESUMING) | TO(JOB_CONNECTING) | TO(JOB_FAILED),
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
