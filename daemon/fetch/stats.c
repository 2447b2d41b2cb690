/* stats: STATS and the STATUS pages of the jobs in memory (the error
 * counters are waiters.c's, the states' names job_state.c's: the files
 * below job.c count and name, this one only reads). Loop thread. */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jobs_stats(const jobs_t *js, jobs_stats_t *out)
{
    *out = js->stats;
    if (js->verifier)
        out->bad_blobs += verifier_bad(js->verifier);
}

void jobs_served_by_uid(const jobs_t *js, void (*fn)(void *arg, uid_t uid, uint64_t bytes),
                        void *arg)
{
    for (unsigned i = 0; i < js->served_cap; i++)
        if (js->served[i].used)
            fn(arg, js->served[i].uid, js->served[i].bytes);
}

/* Each owner once, at its first job in the list, with the count of its
 * jobs: the active list is bounded by max_downloads and the per-uid limits. */
void jobs_active_by_uid(const jobs_t *js, void (*fn)(void *arg, uid_t uid, unsigned n), void *arg)
{
    const list_t *l = &js->active;
    for (const list_node_t *a = list_first(l); a; a = list_next(l, a)) {
        uid_t uid = list_entry(a, job_t, node)->owner;
        const list_node_t *b = list_first(l);
        while (b != a && list_entry(b, job_t, node)->owner != uid)
            b = list_next(l, b);
        if (b != a)
            continue; /* counted at its first job */
        unsigned n = 0;
        for (; b; b = list_next(l, b))
            n += list_entry(b, job_t, node)->owner == uid;
        fn(arg, uid, n);
    }
}

static void info_of(const job_t *j, uid_t uid, job_info_t *info)
{
    info->id = j->id;
    info->url = j->key;
    info->state = job_state_names[j->state];
    info->done = j->pipe.received;
    info->total = j->file.total;
    info->rate = j->rate;
    info->waiters = j->nwaiters;
    info->connections = segs_connections(j);
    info->source = transfer_source(&j->xfer, &info->mirror);
    if (j->state == JOB_SWARM)
        info->source = "swarm", info->mirror = NULL;
    info->mine = j->owner == uid;
    info->users[0] = j->owner;
    info->nusers = 1;
    for (const list_node_t *n = list_first(&j->waiters); n; n = list_next(&j->waiters, n)) {
        uid_t w = list_entry(n, job_waiter_t, node)->uid;
        info->mine |= w == uid;
        unsigned k = 0;
        while (k < info->nusers && info->users[k] != w)
            k++;
        if (k == info->nusers && k < JOB_INFO_USERS)
            info->users[info->nusers++] = w;
    }
}

/* The listed job with the smallest id above `after`, or NULL. A scan of
 * the jobs in memory (bounded by the per-uid limits), no I/O. */
static job_t *job_after(jobs_t *js, uint64_t after)
{
    job_t *best = NULL;
    list_t *lists[2] = {&js->active, &js->queue};
    for (int i = 0; i < 2; i++)
        for (list_node_t *n = list_first(lists[i]); n; n = list_next(lists[i], n)) {
            job_t *j = list_entry(n, job_t, node);
            if (j->id > after && (!best || j->id < best->id))
                best = j;
        }
    return best;
}

unsigned jobs_page(jobs_t *js, uint64_t after, unsigned max, uid_t uid,
                   void (*fn)(void *arg, const job_info_t *info), void *arg)
{
    unsigned n = 0;
    job_t *j;
    while (n < max && (j = job_after(js, after)) != NULL) {
        job_info_t info;
        info_of(j, uid, &info);
        fn(arg, &info);
        after = j->id;
        n++;
    }
    return n;
}
