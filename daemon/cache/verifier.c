/* verifier: the background re-verification schedule (see verifier.h). */
#include "verifier.h"
#include "cache.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VERIFY_FIRST_MS 1000  /* first look after start */
#define VERIFY_IDLE_MS 60000  /* nothing due: look again after this */
#define VERIFY_REST_MIN_MS 10 /* between two checks, at least */

struct verifier {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    worktrack_t *tracker; /* held from start to free: a shutdown waits for us */
    store_t *store;
    db_t *db;
    uv_timer_t timer;
    uv_work_t work;
    int busy;    /* the check item is in flight */
    int stopped; /* verifier_stop called: the timer is closing */
    int closed;  /* the timer's close callback ran */
    /* The item's own: */
    int64_t now;      /* unix seconds when it started */
    int64_t due;      /* blobs verified before this are due */
    int found;        /* a blob was due */
    int rc;           /* cache_verify_one's outcome */
    char sha[65];     /* the blob checked */
    uint64_t t_start; /* uv_now when the item was queued */
    unsigned long bad;
};

static void maybe_free(verifier_t *v)
{
    if (!v->closed || v->busy)
        return;
    worktrack_t *work = v->tracker;
    free(v);
    worktrack_release(work);
}

static void on_closed(uv_handle_t *h)
{
    verifier_t *v = h->data;
    v->closed = 1;
    maybe_free(v);
}

/* Pool thread: the least recently verified blob, if it is due, re-hashed. */
static void check_work(uv_work_t *w)
{
    verifier_t *v = w->data;
    uint64_t size;
    v->found = db_next_to_verify(v->db, v->due, v->sha, &size) == 0;
    v->rc = v->found ? cache_verify_one(v->store, v->db, v->sha, size, v->now) : 0;
}

static void on_timer(uv_timer_t *t);

static void after_check(uv_work_t *w, int status)
{
    (void)status;
    verifier_t *v = w->data;
    v->busy = 0;
    if (v->stopped) {
        maybe_free(v);
        return;
    }
    if (v->rc == -EBADMSG) {
        v->bad++;
        log_err("background verification: blob %s did not hash to its name: quarantined", v->sha);
    } else if (v->found && !v->rc) {
        log_debug("background verification: blob %s is good", v->sha);
    }
    /* More may be due: go on after a rest as long as the check took. With
     * none due, look again well within the interval. */
    uint64_t took = uv_now(v->loop) - v->t_start;
    uint64_t idle = v->cfg->verify_interval_ms / 2;
    idle = idle < VERIFY_FIRST_MS ? VERIFY_FIRST_MS : idle > VERIFY_IDLE_MS ? VERIFY_IDLE_MS : idle;
    uv_timer_start(&v->timer, on_timer,
                   v->found ? (took > VERIFY_REST_MIN_MS ? took : VERIFY_REST_MIN_MS) : idle, 0);
}

static void on_timer(uv_timer_t *t)
{
    verifier_t *v = t->data;
    unsigned interval = v->cfg->verify_interval_ms; /* may change on SIGHUP */
    if (v->stopped || v->busy)
        return;
    if (!interval) {
        uv_timer_start(&v->timer, on_timer, VERIFY_IDLE_MS, 0);
        return;
    }
    v->now = (int64_t)time(NULL);
    v->due = v->now - (int64_t)(interval / 1000);
    v->busy = 1;
    v->t_start = uv_now(v->loop);
    v->work.data = v;
    uv_queue_work(v->loop, &v->work, check_work, after_check);
}

int verifier_start(uv_loop_t *loop, const hubd_config_t *cfg, worktrack_t *work, store_t *store,
                   db_t *db, verifier_t **out)
{
    verifier_t *v = calloc(1, sizeof *v);
    if (!v)
        return -ENOMEM;
    v->loop = loop;
    v->cfg = cfg;
    v->tracker = work;
    v->store = store;
    v->db = db;
    uv_timer_init(loop, &v->timer);
    v->timer.data = v;
    worktrack_hold(work);
    uv_timer_start(&v->timer, on_timer, VERIFY_FIRST_MS, 0);
    *out = v;
    return 0;
}

unsigned long verifier_bad(const verifier_t *v)
{
    return v->bad;
}

void verifier_stop(verifier_t *v)
{
    if (v->stopped)
        return;
    v->stopped = 1;
    uv_close((uv_handle_t *)&v->timer, on_closed);
}
