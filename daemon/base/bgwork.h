/* bgwork: one thread of lower CPU priority for the cache's upkeep
 * (eviction runs), beside libuv's pool.
 *
 * Why: on a busy machine the kernel shares the CPUs between hubd's loop,
 * its clients and its pool threads as equals, and a loop thread that has
 * just served a burst of hits is owed the least. A pool thread evicting
 * 900 blobs then ran ahead of the loop and its client in slices of 3 ms,
 * and hits took 2-4 ms each on 2 cores (bench/README.md). This thread runs
 * at BGWORK_NICE above hubd's own nice value (at most 19), so the loop and
 * the pool's commits go first, and the upkeep keeps its share however busy
 * the machine is (a ninth of the weight of each nice-0 task on its CPU; at
 * SCHED_IDLE it would be starved, and a download short of room waits for
 * it). Lowering a thread's priority needs no privilege; raising it again
 * would, which is why the work has a thread of its own rather than
 * lowering a pool thread for a while.
 *
 * Items run one at a time, in the order queued, each's work on the thread
 * and its done on the loop, in the same order. The owner queues only while
 * it holds the bgwork_t and stops it once no item is out (its done has
 * run): bgwork_stop joins an idle thread and frees everything once the
 * loop has closed its handle. Loop thread only, but for the work. */
#ifndef HUBD_BGWORK_H
#define HUBD_BGWORK_H

#include <uv.h>

#define BGWORK_NICE 10 /* added to hubd's nice value for the thread */

typedef struct bgwork bgwork_t;
typedef struct bgwork_item bgwork_item_t;

/* work runs on the thread; done runs on the loop after it. */
typedef void (*bgwork_fn)(bgwork_item_t *item);

struct bgwork_item {
    bgwork_item_t *next; /* bgwork's */
    bgwork_fn work, done;
    void *data; /* the owner's */
};

/* 0, or a negative errno (the thread or the handle could not be made). */
int bgwork_start(uv_loop_t *loop, bgwork_t **out);
/* Queues it: its work runs once those queued before have run. */
void bgwork_queue(bgwork_t *bg, bgwork_item_t *item, bgwork_fn work, bgwork_fn done);
/* Items queued and not yet done. */
unsigned bgwork_pending(const bgwork_t *bg);
/* With none pending: ends the thread; the rest is freed on the loop. */
void bgwork_stop(bgwork_t *bg);

#endif
