/* memtrim: malloc_trim in the pool after a burst of clients (memtrim.h). */
#include "memtrim.h"
#include "log.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>

struct memtrim_item {
    uv_work_t work;
    memtrim_t *owner; /* NULL once the owner closed: the item frees itself */
};

static void on_later(uv_timer_t *t);

int memtrim_init(memtrim_t *m, uv_loop_t *loop)
{
    *m = (memtrim_t){.loop = loop};
    m->later = malloc(sizeof *m->later);
    if (!m->later)
        return -ENOMEM;
    uv_timer_init(loop, m->later);
    uv_unref((uv_handle_t *)m->later); /* a put-off trim never keeps the loop alive */
    m->later->data = m;
    return 0;
}

static void trim_work(uv_work_t *w)
{
    (void)w;
    malloc_trim(0);
}

static void maybe_trim(memtrim_t *m);

static void trim_done(uv_work_t *w, int status)
{
    (void)status;
    memtrim_item_t *it = w->data;
    memtrim_t *m = it->owner;
    free(it);
    if (m) {
        m->item = NULL;
        maybe_trim(m); /* the burst's tail may have gone meanwhile */
    }
}

/* A trim when enough clients went since the peak (a burst's end), or, once
 * after such a trim, when more went since (its tail: the clients that left
 * after the first half); and the last one was long enough ago. When only
 * the gap is missing, one when it is over. */
static void maybe_trim(memtrim_t *m)
{
    int burst = m->peak - m->live >= MEMTRIM_MIN_DROP && m->live <= m->peak / 2;
    if (m->item || !(burst || (m->tail && m->gone)))
        return;
    uint64_t now = uv_now(m->loop);
    if (m->last && now - m->last < MEMTRIM_GAP_MS) {
        if (!uv_is_active((uv_handle_t *)m->later))
            uv_timer_start(m->later, on_later, MEMTRIM_GAP_MS - (now - m->last), 0);
        return;
    }
    memtrim_item_t *it = malloc(sizeof *it);
    if (!it)
        return;
    it->owner = m;
    it->work.data = it;
    if (uv_queue_work(m->loop, &it->work, trim_work, trim_done)) {
        free(it);
        return;
    }
    log_debug("memory of %u clients gone goes back (malloc_trim)",
              burst ? m->peak - m->live : m->gone);
    m->item = it;
    m->last = now;
    m->tail = burst; /* a burst's trim is followed by one for its tail */
    m->gone = 0;     /* clients that go from now on count towards the next */
    m->peak = m->live;
}

static void on_later(uv_timer_t *t)
{
    maybe_trim(t->data);
}

void memtrim_note(memtrim_t *m, int delta)
{
    if (delta > 0) {
        m->live += (unsigned)delta;
        if (m->live > m->peak)
            m->peak = m->live;
        return;
    }
    m->live -= (unsigned)-delta;
    m->gone += (unsigned)-delta;
    maybe_trim(m);
}

static void on_later_closed(uv_handle_t *h)
{
    free(h);
}

void memtrim_close(memtrim_t *m)
{
    if (m->item)
        m->item->owner = NULL;
    m->item = NULL;
    if (m->later)
        uv_close((uv_handle_t *)m->later, on_later_closed);
    m->later = NULL;
}
