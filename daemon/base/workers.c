/* workers: the size of libuv's thread pool, chosen at start-up. */
#include "workers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

/* Each HTTPS download decrypts one item at a time (stream_tls.c keeps one
 * out per connection), so one thread a core lets as many downloads decrypt
 * at once as the machine has cores. The same pool does the disk's and
 * SQLite's work (writes, fsync, commits, hits' opens, the admin's
 * requests), which mostly waits on the disk: 2 threads more, so that a
 * commit's fsync does not hold a core's decryption back. Never fewer than
 * libuv's own 4 (what hubd had before); at most 128: past that a thread
 * adds memory and lock contention, not speed. */
unsigned workers_auto(unsigned cores)
{
    unsigned n = cores + 2;
    if (n < WORKERS_AUTO_MIN)
        n = WORKERS_AUTO_MIN;
    return n > WORKERS_AUTO_MAX ? WORKERS_AUTO_MAX : n;
}

/* A count as UV_THREADPOOL_SIZE holds one: 1 to WORKERS_MAX, digits only
 * (libuv reads it with atoi, where "8x" is 8 and "x" is 0, then 1). */
static int env_count(const char *s, unsigned *out)
{
    unsigned long v = 0;
    if (!s || !*s)
        return -EINVAL;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > WORKERS_MAX)
            return -EINVAL;
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v < 1 || v > WORKERS_MAX)
        return -ERANGE;
    *out = (unsigned)v;
    return 0;
}

unsigned workers_choose(unsigned setting, const char *env, unsigned cores, workers_from_t *from,
                        int *env_bad)
{
    unsigned n;
    *env_bad = env && env_count(env, &n) != 0;
    if (setting) {
        *from = WORKERS_FROM_SETTING;
        return setting;
    }
    if (env && !*env_bad) {
        *from = WORKERS_FROM_ENV;
        return n;
    }
    *from = WORKERS_FROM_CORES;
    return workers_auto(cores);
}

int workers_apply(unsigned setting, unsigned *n, workers_from_t *from, int *env_bad)
{
    *n = workers_choose(setting, getenv("UV_THREADPOOL_SIZE"), uv_available_parallelism(), from,
                        env_bad);
    char text[16];
    snprintf(text, sizeof text, "%u", *n);
    return setenv("UV_THREADPOOL_SIZE", text, 1) ? -errno : 0;
}

const char *workers_from_name(workers_from_t from)
{
    switch (from) {
    case WORKERS_FROM_SETTING:
        return "worker_threads";
    case WORKERS_FROM_ENV:
        return "UV_THREADPOOL_SIZE";
    case WORKERS_FROM_CORES:
        break;
    }
    return "automatic";
}
