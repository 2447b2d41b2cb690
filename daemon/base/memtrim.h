/* memtrim: gives the memory of a burst of clients back to the kernel.
 *
 * glibc keeps freed heap memory for reuse: after thousands of clients have
 * come and gone, their memory stays in hubd's RSS although nothing uses
 * it. A server counts its clients here; when they fall to half of their
 * peak since the last trim, by at least MEMTRIM_MIN_DROP, malloc_trim runs
 * (and once more for the burst's tail, the clients that go after that) in
 * the thread pool (it walks every arena, which takes a while on a big
 * heap: never on the loop), one at a time, at most once a second (a burst
 * that ends within the second is trimmed when the second is over).
 *
 * The owner calls memtrim_note(+1) for each client it accepts and (-1) for
 * each it frees, and memtrim_close before it frees the memtrim_t: a trim
 * still in the pool then finishes on its own. Loop thread only. */
#ifndef HUBD_MEMTRIM_H
#define HUBD_MEMTRIM_H

#include <stdint.h>
#include <uv.h>

#define MEMTRIM_MIN_DROP 256 /* clients gone since the peak before a trim is worth it */
#define MEMTRIM_GAP_MS 1000  /* at most one trim per this */

typedef struct memtrim_item memtrim_item_t;

typedef struct memtrim {
    uv_loop_t *loop;
    unsigned live;        /* clients open now */
    unsigned peak;        /* most open since the last trim began */
    unsigned gone;        /* clients gone since the last trim began */
    int tail;             /* the last trim was a burst's: one more for its tail */
    uint64_t last;        /* loop time the last trim began; 0: none yet */
    memtrim_item_t *item; /* the trim in the pool, or NULL */
    uv_timer_t *later;    /* a trim put off by the gap (malloc'd, unref'd); NULL: none */
} memtrim_t;

/* 0 or -ENOMEM. */
int memtrim_init(memtrim_t *m, uv_loop_t *loop);
/* A client came (delta > 0) or went (delta < 0). */
void memtrim_note(memtrim_t *m, int delta);
/* The owner goes: a trim in the pool no longer reports to it, and the
 * timer closes on its own. */
void memtrim_close(memtrim_t *m);

#endif
