/* swarm: the cluster swarm's side of a job (job.h, "The cluster swarm").
 *
 * The swarm is a layer above: it is reached only through the hooks it set
 * (jobs_set_swarm), and reports back through the jobs_swarm_* calls, each
 * of which checks that the swarm still holds the job, so a report that
 * crossed the job's end is dropped here rather than acted on twice. It is
 * below job.c: what it hands back goes through js->swarm_back. */
#include "job_internal.h"
#include "log.h"

#include <limits.h>
#include <string.h>

void jobs_set_swarm(jobs_t *js, const jobs_swarm_ops_t *ops, void *arg)
{
    js->swarm = ops;
    js->swarm_arg = arg;
}

int job_swarm_take(job_t *job)
{
    jobs_t *js = job->js;
    if (!js->swarm || !job->swarm_sha[0])
        return 0;
    char part[PATH_MAX];
    store_tmp_path(js->store, job->part_id, part, sizeof part);
    jobs_swarm_req_t req = {
        .id = job->id,
        .sha256 = job->swarm_sha,
        .url = job->key,
        .credentials = job->cred_tag[0] != '\0',
        .part_path = part,
    };
    /* Held before the call: the swarm may report (even end the hold) from
     * inside take. */
    job->swarm_held = 1;
    job_set_state(job, JOB_SWARM);
    if (js->swarm->take(js->swarm_arg, job, &req))
        return 1;
    job->swarm_held = 0;
    job_set_state(job, JOB_CONNECTING); /* job_begin_request sets it again: allowed */
    return 0;
}

void job_swarm_end(job_t *job)
{
    if (!job->swarm_held)
        return;
    job->swarm_held = 0;
    if (job->js->swarm) /* gone at shutdown only after every job has failed */
        job->js->swarm->drop(job->js->swarm_arg, job);
}

void job_swarm_committed(job_t *job, const char *path, uint64_t size)
{
    jobs_t *js = job->js;
    if (js->swarm)
        js->swarm->committed(js->swarm_arg, job->digest, size, path);
}

/* Whether a report may act: the swarm holds the job, in JOB_SWARM. */
static int held(job_t *job, const char *what)
{
    if (job->swarm_held && job->state == JOB_SWARM)
        return 1;
    log_debug("job %llu: the swarm's %s came after it let go: ignored", (unsigned long long)job->id,
              what);
    return 0;
}

void jobs_swarm_sized(job_t *job, uint64_t size)
{
    if (!held(job, "size"))
        return;
    job->file.total = (int64_t)size;
    job->swarm_sized = 1;
    job->pipe.tmp_made = 1; /* a failure discards what the swarm wrote */
}

void jobs_swarm_progress(job_t *job, uint64_t done)
{
    if (!held(job, "progress"))
        return;
    /* What STATUS and the waiters' PROGRESS read; the pipeline holds no
     * batch of it (pipeline_resumed takes over at the end). */
    job->pipe.received = done;
}

void jobs_swarm_finished(job_t *job)
{
    if (!held(job, "end"))
        return;
    job->swarm_held = 0;
    if (!job->swarm_sized) {
        jobs_swarm_fail(job, "internal", "the swarm ended a download it never sized");
        return;
    }
    job->pipe.received = 0;
    job->swarm_brought = 1;
    job->js->swarm_back(job, 0, NULL, NULL);
}

void jobs_swarm_origin(job_t *job, const char *why)
{
    if (!held(job, "hand-back"))
        return;
    job->swarm_held = 0;
    log_info("job %llu: %s: fetching %s from the origin", (unsigned long long)job->id, why,
             job->key);
    /* From byte 0 into a new file: the pipeline's first write replaces
     * whatever the swarm left under the partial's name. */
    job->pipe.received = 0;
    job->pipe.tmp_made = 0;
    job->file.total = -1;
    job->swarm_sized = 0;
    jobs_retake_slot(job);
    job->js->swarm_back(job, 1, NULL, NULL);
}

void jobs_swarm_fail(job_t *job, const char *code, const char *msg)
{
    if (!held(job, "failure"))
        return;
    job->swarm_held = 0;
    job->js->swarm_back(job, 0, code, msg);
}

int jobs_running(const jobs_t *js, uint64_t id)
{
    for (const list_node_t *n = list_first(&js->all); n; n = list_next(&js->all, n)) {
        const job_t *j = list_entry(n, job_t, all_node);
        if (j->id == id)
            return j->state != JOB_DONE && j->state != JOB_FAILED;
    }
    return 0;
}
