/* bufpool: fixed-size, reference-counted read buffers.
 *
 * Socket reads land straight in these buffers and body bytes are hashed and
 * written from them without a copy: the connection holds one reference while
 * it reads into a buffer, and every body batch that points into it holds
 * another. Reference counts change only on the loop thread; pool threads only
 * read the bytes of buffers whose references a work item holds. */
#ifndef HUBD_BUFPOOL_H
#define HUBD_BUFPOOL_H

#include <stddef.h>

typedef struct buf {
    struct buf *next_free; /* link in the pool's free list */
    unsigned refs;         /* holders; back to the pool at 0 */
    size_t len;            /* bytes filled by reads */
    char *data;            /* pool->size bytes */
} buf_t;

typedef struct bufpool {
    size_t size;       /* bytes per buffer */
    buf_t *free;       /* unused buffers kept for reuse */
    unsigned nfree;    /* length of the free list */
    unsigned max_free; /* beyond this, released buffers are freed */
    unsigned live;     /* buffers handed out and not yet returned */
} bufpool_t;

void bufpool_init(bufpool_t *p, size_t size, unsigned max_free);
void bufpool_destroy(bufpool_t *p); /* all buffers must have come back */

/* A buffer with refs == 1 and len == 0, or NULL when out of memory. */
buf_t *bufpool_get(bufpool_t *p);
void buf_ref(buf_t *b);
void buf_unref(bufpool_t *p, buf_t *b);

#endif
