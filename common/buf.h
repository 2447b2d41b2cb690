/* buf: a growable byte buffer with a hard cap.
 *
 * The one way hubd and hubctl gather bytes of unknown length (a reply
 * being built, a line being read): it grows by doubling up to cap and
 * refuses past it, so no peer can make the holder keep unbounded memory.
 * Bytes are consumed from the front (buf_consume) without moving the rest
 * until more room is needed. */
#ifndef HUBD_BUF_H
#define HUBD_BUF_H

#include <stddef.h>

typedef struct buf {
    char *data; /* data[off .. off+len) holds the bytes */
    size_t off;
    size_t len;
    size_t alloc; /* bytes allocated at data */
    size_t cap;   /* most bytes ever held; 0 = no limit */
} buf_t;

void buf_init(buf_t *b, size_t cap);
void buf_free(buf_t *b);

/* The bytes held, and how many. */
static inline char *buf_data(const buf_t *b)
{
    return b->data + b->off;
}
static inline size_t buf_len(const buf_t *b)
{
    return b->len;
}

/* Makes room for n more bytes at buf_tail: 0, -ENOBUFS past cap, -ENOMEM. */
int buf_reserve(buf_t *b, size_t n);
/* Where the next bytes go (after buf_reserve), and how many were put there. */
static inline char *buf_tail(const buf_t *b)
{
    return b->data + b->off + b->len;
}
static inline void buf_commit(buf_t *b, size_t n)
{
    b->len += n;
}

/* Appends n bytes: 0, -ENOBUFS or -ENOMEM (then nothing is appended). */
int buf_append(buf_t *b, const void *p, size_t n);
/* Appends printf output, as buf_append. */
int buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (n <= buf_len). */
void buf_consume(buf_t *b, size_t n);
void buf_clear(buf_t *b);

#endif
