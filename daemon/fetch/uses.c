/* uses: the hits' uses of blobs and entries, queued in memory by db_touch
 * (db_uses.c), written every USES_FLUSH_MS in one transaction in the pool,
 * so that a hit writes nothing itself and a crash loses at most about a
 * second of them (they are hints: the eviction order, `accessed`, and who
 * asked for an entry). A timer that finds the last write still out skips a
 * turn. After jobs_stop, main writes what is left before db_close. */
#include "job_internal.h"

#define USES_FLUSH_MS 1000

static void uses_work(uv_work_t *w)
{
    jobs_t *js = w->data;
    db_uses_flush(js->db); /* a failure is logged there */
}

static void uses_done(uv_work_t *w, int status)
{
    (void)status;
    jobs_t *js = w->data;
    js->uses_out = 0;
    if (js->uses_again)
        jobs_uses_write(js);
    worktrack_release(&js->work);
}

void jobs_uses_write(jobs_t *js)
{
    if (js->uses_out) { /* asked while one is out: once more when it is back */
        js->uses_again = 1;
        return;
    }
    js->uses_again = 0;
    if (js->uses_closed || db_uses_pending(js->db) == 0)
        return;
    js->uses_work.data = js;
    worktrack_hold(&js->work);
    js->uses_out = 1;
    if (uv_queue_work(js->loop, &js->uses_work, uses_work, uses_done)) {
        js->uses_out = 0;
        worktrack_release(&js->work);
    }
}

static void on_uses_timer(uv_timer_t *t)
{
    jobs_uses_write(t->data);
}

void jobs_uses_init(jobs_t *js)
{
    uv_timer_init(js->loop, &js->uses_timer);
    js->uses_timer.data = js;
    uv_timer_start(&js->uses_timer, on_uses_timer, USES_FLUSH_MS, USES_FLUSH_MS);
    uv_unref((uv_handle_t *)&js->uses_timer); /* it never keeps the loop alive */
    worktrack_hold(&js->work);                /* released when the timer is closed */
}

static void on_uses_timer_closed(uv_handle_t *h)
{
    jobs_t *js = h->data;
    worktrack_release(&js->work);
}

void jobs_uses_close(jobs_t *js)
{
    if (js->uses_closed)
        return;
    js->uses_closed = 1;
    uv_close((uv_handle_t *)&js->uses_timer, on_uses_timer_closed);
}
