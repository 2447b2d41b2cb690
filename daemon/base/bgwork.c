/* bgwork: the background thread of lower CPU priority (bgwork.h). */
#include "bgwork.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct bgwork {
    uv_thread_t thread;
    uv_mutex_t lock;
    uv_cond_t wake;
    uv_async_t async;          /* the thread's "done" to the loop */
    bgwork_item_t *queue;      /* lock: queued, first to run first */
    bgwork_item_t **queue_end; /* lock: where the next one goes */
    bgwork_item_t *done;       /* lock: run, last run first (reversed on the loop) */
    int stopping;              /* lock: the thread ends once queue is empty */
    unsigned pending;          /* loop: queued and not yet done */
};

/* Down by BGWORK_NICE from where the thread starts (hubd's own value),
 * never past 19. A failure leaves it where it was: only the preference
 * is lost. */
static void lower_priority(void)
{
    pid_t tid = gettid();
    errno = 0;
    int now = getpriority(PRIO_PROCESS, (id_t)tid);
    if (now == -1 && errno)
        return;
    int want = now + BGWORK_NICE > 19 ? 19 : now + BGWORK_NICE;
    if (want > now && setpriority(PRIO_PROCESS, (id_t)tid, want) != 0)
        log_warn("background work runs at the loop's priority: setpriority: %s", strerror(errno));
}

static void thread_main(void *arg)
{
    bgwork_t *bg = arg;
    pthread_setname_np(pthread_self(), "hubd-bg");
    lower_priority();
    uv_mutex_lock(&bg->lock);
    for (;;) {
        while (!bg->queue && !bg->stopping)
            uv_cond_wait(&bg->wake, &bg->lock);
        bgwork_item_t *it = bg->queue;
        if (!it)
            break; /* stopping, and nothing left */
        bg->queue = it->next;
        if (!bg->queue)
            bg->queue_end = &bg->queue;
        uv_mutex_unlock(&bg->lock);
        it->work(it);
        uv_mutex_lock(&bg->lock);
        it->next = bg->done;
        bg->done = it;
        uv_async_send(&bg->async);
    }
    uv_mutex_unlock(&bg->lock);
}

/* The items run since the last call, in the order they were queued. */
static void on_async(uv_async_t *a)
{
    bgwork_t *bg = a->data;
    uv_mutex_lock(&bg->lock);
    bgwork_item_t *last_first = bg->done;
    bg->done = NULL;
    uv_mutex_unlock(&bg->lock);
    bgwork_item_t *in_order = NULL;
    while (last_first) {
        bgwork_item_t *it = last_first;
        last_first = it->next;
        it->next = in_order;
        in_order = it;
    }
    while (in_order) {
        bgwork_item_t *it = in_order;
        in_order = it->next;
        assert(bg->pending > 0);
        if (--bg->pending == 0)
            uv_unref((uv_handle_t *)&bg->async);
        it->done(it); /* may queue another, or free the item */
    }
}

int bgwork_start(uv_loop_t *loop, bgwork_t **out)
{
    bgwork_t *bg = calloc(1, sizeof *bg);
    if (!bg)
        return -ENOMEM;
    bg->queue_end = &bg->queue;
    int rc = uv_mutex_init(&bg->lock);
    if (rc)
        goto no_mutex;
    if ((rc = uv_cond_init(&bg->wake)) != 0)
        goto no_cond;
    if ((rc = uv_async_init(loop, &bg->async, on_async)) != 0)
        goto no_async;
    bg->async.data = bg;
    /* Like a pool item, an item out keeps the loop alive; nothing else. */
    uv_unref((uv_handle_t *)&bg->async);
    if ((rc = uv_thread_create(&bg->thread, thread_main, bg)) != 0) {
        /* The handle is closed on the loop; the rest goes with it. */
        bg->stopping = 1;
        bgwork_stop(bg);
        return rc;
    }
    *out = bg;
    return 0;
no_async:
    uv_cond_destroy(&bg->wake);
no_cond:
    uv_mutex_destroy(&bg->lock);
no_mutex:
    free(bg);
    return rc;
}

void bgwork_queue(bgwork_t *bg, bgwork_item_t *item, bgwork_fn work, bgwork_fn done)
{
    item->work = work;
    item->done = done;
    item->next = NULL;
    if (bg->pending++ == 0)
        uv_ref((uv_handle_t *)&bg->async);
    uv_mutex_lock(&bg->lock);
    *bg->queue_end = item;
    bg->queue_end = &item->next;
    uv_cond_signal(&bg->wake);
    uv_mutex_unlock(&bg->lock);
}

unsigned bgwork_pending(const bgwork_t *bg)
{
    return bg->pending;
}

static void on_closed(uv_handle_t *h)
{
    bgwork_t *bg = h->data;
    uv_cond_destroy(&bg->wake);
    uv_mutex_destroy(&bg->lock);
    free(bg);
}

void bgwork_stop(bgwork_t *bg)
{
    assert(bg->pending == 0); /* the owner waited for its items */
    uv_mutex_lock(&bg->lock);
    int started = !bg->stopping; /* bgwork_start's failure sets it first */
    bg->stopping = 1;
    uv_cond_signal(&bg->wake);
    uv_mutex_unlock(&bg->lock);
    if (started)
        uv_thread_join(&bg->thread); /* idle: it ends at once */
    uv_close((uv_handle_t *)&bg->async, on_closed);
}
