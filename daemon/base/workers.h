/* workers: how many threads libuv's pool has, the pool that decrypts
 * HTTPS downloads (stream_tls.c), hashes and writes their bodies, commits
 * them and runs SQLite's scans, admin requests and hits off the loop.
 *
 * libuv sizes its pool once, from UV_THREADPOOL_SIZE, at the first
 * uv_queue_work (4 threads when unset): workers_apply must run before
 * that, at start-up, and a change needs a restart. Which number wins:
 * the setting worker_threads when not 0; else an admin's
 * UV_THREADPOOL_SIZE (libuv's own knob, set on purpose); else
 * automatic, from the cores this process may run on (workers_auto). */
#ifndef HUBD_WORKERS_H
#define HUBD_WORKERS_H

#define WORKERS_MAX 1024 /* libuv's own bound on its pool (MAX_THREADPOOL_SIZE) */
#define WORKERS_AUTO_MIN 4
#define WORKERS_AUTO_MAX 128

typedef enum {
    WORKERS_FROM_SETTING, /* worker_threads */
    WORKERS_FROM_ENV,     /* UV_THREADPOOL_SIZE */
    WORKERS_FROM_CORES,   /* automatic */
} workers_from_t;

/* What automatic gives for this many cores. */
unsigned workers_auto(unsigned cores);

/* The count, from the setting (0: automatic), the environment's
 * UV_THREADPOOL_SIZE (NULL: unset) and the cores; *from says which, and
 * *env_bad is set when env was set but is no count of 1 to WORKERS_MAX
 * (it is passed over). Pure: unit_workers. */
unsigned workers_choose(unsigned setting, const char *env, unsigned cores, workers_from_t *from,
                        int *env_bad);

/* Start-up, before any pool work: chooses the count from the setting,
 * the process's environment and its cores, and sets UV_THREADPOOL_SIZE to
 * it for libuv. 0, or a negative errno (setenv failed: libuv keeps its
 * default). *n and *from as workers_choose's. */
int workers_apply(unsigned setting, unsigned *n, workers_from_t *from, int *env_bad);

/* "worker_threads", "UV_THREADPOOL_SIZE", "automatic". */
const char *workers_from_name(workers_from_t from);

#endif
