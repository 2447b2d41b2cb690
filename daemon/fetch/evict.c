/* evict: the eviction coordinator. One run at a time, asked again while
 * busy runs once more; what the running downloads will hold is subtracted
 * from max_cache_size, and downloads short of room wait for a run that
 * started after they asked (js->after_evict tells them, the one report
 * up). An admin's GC takes a turn between runs (never beside one: both
 * would pick the same victims, and each stop early, above its target).
 * Loop thread (the run's item: the background thread of bgwork.h, at a
 * lower priority than the loop's; a GC's: the pool, as the admin's other
 * requests). */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void evict_start(jobs_t *js, const char *keep);
static void gc_after_run(jobs_gc_t *gc);

/* The item: down to max_cache_size less what the running downloads will
 * hold, and (with a floor) to what leaves min_free_space free once they
 * have written the rest. */
static void evict_run(bgwork_item_t *it)
{
    jobs_t *js = it->data;
    uint64_t target = js->evict_target, total;
    struct statvfs v;
    js->evict_lack = 0;
    js->evict_fs_size = 0;
    if (statvfs(store_dir(js->store), &v) == 0) {
        uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
        js->evict_fs_size = (uint64_t)v.f_blocks * v.f_frsize;
        uint64_t need =
            pipeline_space_floor(&v, js->evict_floor, js->evict_floor_pct) + js->evict_remaining;
        if (avail < need && db_total_size(js->db, js->evict_fence, &total) == 0) {
            uint64_t lack = need - avail;
            if (lack <= total) {
                if (total - lack < target)
                    target = total - lack;
            } else {
                /* Other data holds the room: emptying the cache would not
                 * make it, so nothing goes for it (the download fails). */
                js->evict_lack = lack;
            }
        }
    }
    memset(&js->evict_res, 0, sizeof js->evict_res);
    js->evict_rc = 0;
    if (target != UINT64_MAX)
        js->evict_rc =
            cache_evict(js->store, js->db, target, js->evict_keep[0] ? js->evict_keep : NULL,
                        js->evict_fence, &js->evict_res);
    if (js->evict_res.evicted)
        cache_reserve_make(js->store); /* a full disk may have taken it */
    /* What is left now, for the downloads that wait on this run. */
    js->evict_short_after =
        statvfs(store_dir(js->store), &v) == 0 &&
        (uint64_t)v.f_bavail * v.f_frsize <
            pipeline_space_floor(&v, js->evict_floor, js->evict_floor_pct) + js->evict_remaining;
}

/* A blob larger than the whole cache may hold: its waiters have it (each
 * DONE passed an fd), then it goes, instead of every other blob. */
typedef struct drop_req {
    uv_work_t work;
    jobs_t *js;
    char sha[65];
    int rc;
} drop_req_t;

static void drop_work(uv_work_t *w)
{
    drop_req_t *d = w->data;
    d->rc = cache_drop(d->js->store, d->js->db, d->sha);
}

static void after_drop(uv_work_t *w, int status)
{
    drop_req_t *d = w->data;
    (void)status;
    if (d->rc == 0) {
        d->js->stats.evicted++;
        log_info("blob %s is larger than max_cache_size: handed out, not kept", d->sha);
    }
    worktrack_release(&d->js->work);
    free(d);
}

void jobs_drop_oversized(jobs_t *js, const char *sha, uint64_t size)
{
    drop_req_t *d = calloc(1, sizeof *d);
    log_debug("blob %s: %llu bytes, over max_cache_size", sha, (unsigned long long)size);
    if (!d)
        return; /* it stays until the next eviction */
    d->js = js;
    snprintf(d->sha, sizeof d->sha, "%s", sha);
    d->work.data = d;
    worktrack_hold(&js->work);
    uv_queue_work(js->loop, &d->work, drop_work, after_drop);
}

static void after_evict(bgwork_item_t *it)
{
    jobs_t *js = it->data;
    js->evict_busy = 0;
    js->evict_runs++;
    if (js->evict_fs_size) /* a file system grown (or shrunk) since start-up */
        js->fs_size = js->evict_fs_size;
    js->stats.evicted += js->evict_res.evicted;
    js->stats.evicted_bytes += js->evict_res.freed;
    if (js->evict_rc)
        log_warn("eviction stopped: %s", strerror(-js->evict_rc));
    uint64_t now = uv_now(js->loop);
    if (js->evict_lack && (!js->lack_logged || now - js->lack_logged > 60000)) {
        js->lack_logged = now;
        log_warn("the cache's file system lacks %llu bytes for min_free_space and the downloads "
                 "in progress, more than the whole cache holds: nothing evicted for it (other "
                 "files hold the room; free some, or lower min_free_space)",
                 (unsigned long long)js->evict_lack);
    }
    /* Downloads short of room that waited for a run started after they
     * asked judge it (evict_short_after): job.c's. */
    js->after_evict(js);
    if (js->gc) { /* its turn: a run asked meanwhile goes after it */
        gc_after_run(js->gc);
    } else if (js->evict_again && !js->shutting_down) {
        js->evict_again = 0;
        evict_start(js, js->next_keep[0] ? js->next_keep : NULL);
    }
    worktrack_release(&js->work);
}

/* What the running downloads will hold once done (each one's length when
 * known, else what it has so far), and what they have still to write. A
 * download larger than max_cache_size alone is left out: making room for
 * it would empty the cache for nothing (it is handed out, then dropped). */
static void jobs_inflight(const jobs_t *js, uint64_t *held, uint64_t *remaining)
{
    uint64_t max = js->cfg->max_cache_size;
    *held = *remaining = 0;
    for (const list_node_t *n = list_first(&js->active); n; n = list_next(&js->active, n)) {
        const job_t *j = list_entry(n, job_t, node);
        int64_t total = j->file.total;
        uint64_t got = j->pipe.received;
        uint64_t size = total >= 0 && (uint64_t)total > got ? (uint64_t)total : got;
        /* A committing one's row may be in the blobs' total already: it
         * must not count twice (its own blob would be evicted for it). */
        if ((max && size > max) || j->state == JOB_COMMITTING)
            continue;
        *held += size;
        *remaining += size - got;
    }
}

/* Starts a run, with the targets as of now (the item gets its own copy). */
static void evict_start(jobs_t *js, const char *keep)
{
    const hubd_config_t *cfg = js->cfg;
    uint64_t held, remaining;
    jobs_inflight(js, &held, &remaining);
    js->evict_target = !cfg->max_cache_size         ? UINT64_MAX
                       : held < cfg->max_cache_size ? cfg->max_cache_size - held
                                                    : 0;
    js->evict_remaining = remaining;
    /* Blobs recorded after this point belong to jobs counted in `held`
     * (or to commits counted in neither, which is safe): not this run's. */
    js->evict_fence = db_use_seq(js->db);
    js->evict_floor = cfg->min_free_space;
    js->evict_floor_pct = cfg->min_free_percent;
    snprintf(js->evict_keep, sizeof js->evict_keep, "%s", keep ? keep : "");
    js->evict_busy = 1;
    worktrack_hold(&js->work); /* jobs_shutdown waits for it */
    js->evict_item.data = js;
    bgwork_queue(js->bg, &js->evict_item, evict_run, after_evict);
}

/* ---- GC: an admin's turn ---------------------------------------------------- */

/* WAITING: an eviction run is out (on the background thread), the GC goes
 * when it is back; RUNNING: the GC's item is in the pool. */
typedef enum { GC_WAITING, GC_RUNNING } gc_state_t;

struct jobs_gc {
    uv_work_t work;
    jobs_t *js;
    gc_state_t state;
    uint64_t target; /* bytes to collect down to */
    int rc;          /* the item's: 0 or a negative errno */
    jobs_gc_result_t res;
    jobs_gc_cb done; /* NULL once cancelled */
    void *arg;
};

static void gc_work(uv_work_t *w)
{
    jobs_gc_t *gc = w->data;
    jobs_t *js = gc->js;
    cache_gc_result_t own;
    gc->rc = cache_gc(js->store, js->db, gc->target, &own);
    gc->res.gc.size = own.size;
    gc->res.gc.kept = own.kept;
    gc->res.gc.evicted += own.evicted; /* after the run's, if it waited */
    gc->res.gc.freed += own.freed;
    if (own.evicted)
        cache_reserve_make(js->store); /* a full disk may have taken it */
}

/* Answers (unless cancelled), frees the GC, and gives the turn back: a
 * run asked while it was out starts now. */
static void gc_finish(jobs_gc_t *gc)
{
    jobs_t *js = gc->js;
    js->gc = NULL;
    if (gc->done)
        gc->done(gc->arg, gc->rc, &gc->res);
    free(gc);
    if (js->evict_again && !js->shutting_down) {
        js->evict_again = 0;
        evict_start(js, js->next_keep[0] ? js->next_keep : NULL);
    }
    worktrack_release(&js->work);
}

static void after_gc(uv_work_t *w, int status)
{
    jobs_gc_t *gc = w->data;
    (void)status;
    gc_finish(gc);
}

static void gc_start(jobs_gc_t *gc)
{
    gc->state = GC_RUNNING;
    gc->work.data = gc;
    uv_queue_work(gc->js->loop, &gc->work, gc_work, after_gc);
}

/* The run the GC waited for is back (after_evict): its blobs are the GC's
 * answer's too, then the GC evicts the rest. */
static void gc_after_run(jobs_gc_t *gc)
{
    assert(gc->state == GC_WAITING);
    gc->res.gc.evicted += gc->js->evict_res.evicted;
    gc->res.gc.freed += gc->js->evict_res.freed;
    if (gc->js->shutting_down) {
        gc->rc = -ECANCELED;
        gc_finish(gc);
        return;
    }
    gc_start(gc);
}

int jobs_gc(jobs_t *js, uint64_t target, jobs_gc_cb done, void *arg, jobs_gc_t **out)
{
    if (js->shutting_down)
        return -ECANCELED;
    if (js->gc)
        return -EBUSY;
    jobs_gc_t *gc = calloc(1, sizeof *gc);
    if (!gc)
        return -ENOMEM;
    gc->js = js;
    gc->target = target;
    gc->done = done;
    gc->arg = arg;
    js->gc = gc;
    worktrack_hold(&js->work); /* jobs_shutdown waits for it */
    *out = gc;
    if (js->evict_busy) { /* after_evict gives it the turn */
        gc->state = GC_WAITING;
        gc->res.waited = 1;
        log_info("gc: waiting for the eviction run in progress");
        return 0;
    }
    gc_start(gc);
    return 0;
}

void jobs_gc_cancel(jobs_gc_t *gc)
{
    gc->done = NULL;
}

int jobs_gc_busy(const jobs_t *js)
{
    return js->gc != NULL;
}

/* force: a download is short of room, whatever the settings (a full disk
 * is a floor of 0). */
void jobs_evict_run(jobs_t *js, const char *keep, int force)
{
    const hubd_config_t *cfg = js->cfg;
    if (js->shutting_down ||
        (!force && !cfg->max_cache_size && !cfg->min_free_space && !cfg->min_free_percent))
        return;
    if (!js->evict_busy && !js->gc) {
        evict_start(js, keep);
        return;
    }
    /* The run in flight may have seen an older state, or a GC has the
     * turn: run once more after it (its targets are taken then). */
    if (keep)
        snprintf(js->next_keep, sizeof js->next_keep, "%s", keep);
    else if (!js->evict_again)
        js->next_keep[0] = '\0';
    js->evict_again = 1;
}

void jobs_evict(jobs_t *js, const char *keep)
{
    jobs_evict_run(js, keep, 0);
}

void jobs_fs_size_init(jobs_t *js)
{
    struct statvfs v;
    js->fs_size = statvfs(store_dir(js->store), &v) == 0 ? (uint64_t)v.f_blocks * v.f_frsize : 0;
}

const char *jobs_length_refused(const jobs_t *js, uint64_t max_file_size, uint64_t length,
                                int announced, char *msg, size_t len)
{
    const hubd_config_t *cfg = js->cfg;
    disp_room_t room = {.max_file_size = max_file_size, .fs_size = js->fs_size};
    /* The floor as pipeline_space_floor has it, from the size alone. */
    room.floor =
        cfg->min_free_percent ? js->fs_size / 100 * cfg->min_free_percent : cfg->min_free_space;
    return disposition_length(length, announced, &room, msg, len);
}
