/* bufpool: reference-counted read buffers in two sizes.
 *
 * Socket reads land straight in these buffers and body bytes are hashed and
 * written from them without a copy: the connection holds one reference while
 * it reads into a buffer, and every body batch that points into it holds
 * another. Reference counts change only on the loop thread; pool threads only
 * read the bytes of buffers whose references a work item holds.
 *
 * A full buffer is `size` bytes (read_buffer_size); a small one is
 * BUFPOOL_SMALL bytes (or `size`, if that is less). A stream asks for its
 * next buffer by how fast it reads (bufpool_meter_next), so a
 * thousand slow downloads hold a thousand small buffers, not a thousand full
 * ones, and a fast one still reads in full buffers.
 *
 * Small buffers come from slabs of their own (BUFPOOL_SLAB_BYTES, mapped
 * apart from the heap), unmapped once every buffer of one is back, but for
 * a few kept: a crowd of slow streams takes and gives back thousands a
 * second, and from malloc, between the other sizes a download allocates,
 * their holes grew the heap (1,000 downloads at 8 KiB/s: 17-23 MB in use
 * and a 41 MB heap). Full buffers come from malloc, kept on a free list. */
#ifndef HUBD_BUFPOOL_H
#define HUBD_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

#define BUFPOOL_SMALL (4 * 1024)

#define BUFPOOL_SLAB_BYTES (128u << 10) /* small buffers are mapped this many bytes at a time */
#define BUFPOOL_SPARE_SLABS 4           /* empty slabs kept mapped */

struct bufslab;

typedef struct buf {
    struct buf *next_free; /* link in its free list */
    struct bufslab *slab;  /* a small buffer's slab; NULL for a full one */
    unsigned refs;         /* holders; back to the pool at 0 */
    size_t len;            /* bytes filled by reads */
    size_t cap;            /* bytes at data: the pool's size or small */
    char *data;
} buf_t;

typedef struct bufpool {
    size_t size;           /* bytes per full buffer */
    size_t small;          /* bytes per small buffer: min(size, BUFPOOL_SMALL) */
    buf_t *free;           /* full buffers kept for reuse */
    unsigned nfree;        /* their number */
    unsigned max_free;     /* beyond this, released full buffers are freed */
    struct bufslab *avail; /* slabs with a free small buffer (a list) */
    struct bufslab *spare; /* empty slabs kept (a list) */
    unsigned nspare;       /* their number, at most BUFPOOL_SPARE_SLABS */
    unsigned slabs;        /* slabs mapped, spare ones included */
    unsigned live;         /* buffers handed out and not yet returned */
} bufpool_t;

/* Keeps up to max_free released full buffers. */
void bufpool_init(bufpool_t *p, size_t size, unsigned max_free);
void bufpool_destroy(bufpool_t *p); /* all buffers must have come back */

/* A buffer of at least `want` bytes if want <= small, else a full one; with
 * refs == 1 and len == 0. NULL when out of memory. */
buf_t *bufpool_get(bufpool_t *p, size_t want);
void buf_ref(buf_t *b);
void buf_unref(bufpool_t *p, buf_t *b);

/* How fast a stream reads, to size its next buffer: full when a full
 * buffer's worth arrives within a second, small otherwise and at first. The
 * measure spans at least a second (one burst of a paced sender is not its
 * rate), and a fast stream turns full after its first `size` bytes. */
typedef struct bufpool_meter {
    uint64_t t0;  /* loop time the window began; 0: not begun */
    uint64_t got; /* bytes read in the window */
    int full;     /* the last decision */
} bufpool_meter_t;

/* n bytes were read. */
static inline void bufpool_meter_add(bufpool_meter_t *m, size_t n)
{
    m->got += n;
}
/* The size to ask for the stream's next buffer, at loop time now (ms). */
size_t bufpool_meter_next(const bufpool_t *p, bufpool_meter_t *m, uint64_t now);

#endif
