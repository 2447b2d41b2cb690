/* linkcheck: a look-up of a user's link within a deadline (linkcheck.h).
 * Each look-up is a request shared by the caller and a detached thread;
 * whichever lets go of it last frees it. */
#include "linkcheck.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct lc_req {
    atomic_int refs; /* the caller's and the thread's: the last frees */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    int done;          /* under mu: the thread has answered */
    int abandoned;     /* under mu: the caller went on without it */
    linkcheck_fn look;
    int rc;
    linkcheck_t out;
    char path[PATH_MAX];
} lc_req_t;

static atomic_uint stuck; /* abandoned look-ups not yet answered */

static int look_default(const char *path, linkcheck_t *out)
{
    out->target[0] = '\0';
    if (lstat(path, &out->st))
        return -errno;
    if (!S_ISLNK(out->st.st_mode))
        return 0;
    ssize_t n = readlink(path, out->target, sizeof out->target - 1);
    if (n < 0)
        return -errno;
    out->target[n] = '\0';
    return 0;
}

static void req_unref(lc_req_t *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static void *lc_thread(void *arg)
{
    lc_req_t *r = arg;
    linkcheck_t out;
    int rc = r->look(r->path, &out);
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    r->out = out;
    r->done = 1;
    if (r->abandoned)
        atomic_fetch_sub(&stuck, 1);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    req_unref(r);
    return NULL;
}

/* A new request, with a condition variable on the monotonic clock. */
static lc_req_t *req_new(const char *path, linkcheck_fn look)
{
    lc_req_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->mu, NULL);
    atomic_init(&r->refs, 2);
    r->look = look;
    memcpy(r->path, path, strlen(path) + 1);
    return r;
}

int linkcheck_read(const char *path, unsigned timeout_ms, linkcheck_fn look, linkcheck_t *out)
{
    if (strlen(path) >= PATH_MAX)
        return -ENAMETOOLONG;
    if (atomic_load(&stuck) >= LINKCHECK_STUCK_MAX)
        return -EAGAIN;
    lc_req_t *r = req_new(path, look ? look : look_default);
    if (!r)
        return -ENOMEM;
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024); /* a look-up and a copy of its answer */
    int e = pthread_create(&t, &attr, lc_thread, r);
    pthread_attr_destroy(&attr);
    if (e) {
        atomic_store(&r->refs, 1);
        req_unref(r);
        return -e;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    int rc;
    pthread_mutex_lock(&r->mu);
    while (!r->done && pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT)
        ;
    if (r->done) {
        rc = r->rc;
        *out = r->out;
    } else {
        r->abandoned = 1;
        atomic_fetch_add(&stuck, 1);
        rc = -ETIMEDOUT;
    }
    pthread_mutex_unlock(&r->mu);
    req_unref(r);
    return rc;
}

unsigned linkcheck_stuck(void)
{
    return atomic_load(&stuck);
}
