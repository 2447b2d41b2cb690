/* worktrack: counts the things in flight that a shutdown must wait for
 * (jobs, cache hits being opened, pool items of the admin verbs and the
 * verifier), and says once when the last has gone after a drain began.
 *
 * Each holder calls worktrack_hold when it starts and worktrack_release
 * exactly once when it is done (its callback has run, or it was freed).
 * worktrack_drain(t, cb, arg) asks for cb once the count is zero; it is
 * called from the releasing call (or from drain itself when nothing is in
 * flight). Loop thread only. */
#ifndef HUBD_WORKTRACK_H
#define HUBD_WORKTRACK_H

typedef struct worktrack {
    unsigned live;
    int draining;
    void (*idle_cb)(void *arg);
    void *idle_arg;
} worktrack_t;

static inline void worktrack_init(worktrack_t *t)
{
    *t = (worktrack_t){0};
}

static inline void worktrack_hold(worktrack_t *t)
{
    t->live++;
}

/* Releases one hold; runs the drain callback when it was the last. */
void worktrack_release(worktrack_t *t);

/* cb(arg) once nothing is in flight; at most one drain per tracker. */
void worktrack_drain(worktrack_t *t, void (*cb)(void *arg), void *arg);

#endif
