#include "worktrack.h"

#include <assert.h>
#include <stddef.h>

void worktrack_release(worktrack_t *t)
{
    assert(t->live > 0);
    t->live--;
    if (t->draining && t->live == 0 && t->idle_cb) {
        void (*cb)(void *) = t->idle_cb;
        t->idle_cb = NULL; /* once */
        cb(t->idle_arg);
    }
}

void worktrack_drain(worktrack_t *t, void (*cb)(void *arg), void *arg)
{
    assert(!t->draining);
    t->draining = 1;
    t->idle_cb = cb;
    t->idle_arg = arg;
    t->live++; /* so the count reaches zero here when nothing is in flight */
    worktrack_release(t);
}
