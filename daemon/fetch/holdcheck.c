/* holdcheck: the holds whose links are gone, dropped every
 * hold_check_interval on the background thread (bgwork.h), so that a
 * user's deleted HF cache gives back its holds, grants and rows even when
 * no eviction has to run (eviction checks them too, first: cache.c). One
 * check out at a time: a turn that finds it still out is skipped. Loop
 * thread (the item: the background thread). */
#include "holds.h"
#include "job_internal.h"
#include "log.h"

#include <string.h>

static void check_run(bgwork_item_t *it)
{
    jobs_t *js = it->data;
    js->holdcheck_dropped = holds_prune(js->store, js->db, HOLDS_CHECK_MAX);
}

static void check_done(bgwork_item_t *it)
{
    jobs_t *js = it->data;
    js->holdcheck_out = 0;
    if (js->holdcheck_dropped > 0)
        log_info("holds: %d whose links are gone dropped", js->holdcheck_dropped);
    else if (js->holdcheck_dropped < 0)
        log_warn("holds: cannot check their links: %s", strerror(-js->holdcheck_dropped));
    worktrack_release(&js->work);
}

static void on_holdcheck_timer(uv_timer_t *t)
{
    jobs_t *js = t->data;
    if (js->holdcheck_out || js->shutting_down)
        return;
    js->holdcheck_out = 1;
    worktrack_hold(&js->work); /* jobs_shutdown waits for it */
    js->holdcheck_item.data = js;
    bgwork_queue(js->bg, &js->holdcheck_item, check_run, check_done);
}

/* The timer at the interval of the settings (0: stopped). */
static void arm(jobs_t *js)
{
    unsigned every = js->cfg->hold_check_interval_ms;
    if (every == js->holdcheck_ms)
        return;
    js->holdcheck_ms = every;
    uv_timer_stop(&js->holdcheck_timer);
    if (every)
        uv_timer_start(&js->holdcheck_timer, on_holdcheck_timer, every, every);
}

void jobs_holdcheck_init(jobs_t *js)
{
    uv_timer_init(js->loop, &js->holdcheck_timer);
    js->holdcheck_timer.data = js;
    uv_unref((uv_handle_t *)&js->holdcheck_timer); /* it never keeps the loop alive */
    worktrack_hold(&js->work);                     /* released when the timer is closed */
    arm(js);
}

void jobs_holdcheck_reload(jobs_t *js)
{
    if (!js->holdcheck_closed)
        arm(js);
}

static void on_holdcheck_closed(uv_handle_t *h)
{
    jobs_t *js = h->data;
    worktrack_release(&js->work);
}

void jobs_holdcheck_close(jobs_t *js)
{
    if (js->holdcheck_closed)
        return;
    js->holdcheck_closed = 1;
    uv_close((uv_handle_t *)&js->holdcheck_timer, on_holdcheck_closed);
}
