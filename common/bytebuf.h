/* bytebuf: a growable byte buffer with a hard cap.
 *
 * The one way hubd and hubctl gather bytes of unknown length (a reply
 * being built, a line being read): it grows by doubling up to cap and
 * refuses past it, so no peer can make the holder keep unbounded memory.
 * Bytes are consumed from the front (bytebuf_consume) without moving the rest
 * until more room is needed. */
#ifndef HUBD_BYTEBUF_H
#define HUBD_BYTEBUF_H

#include <stddef.h>

typedef struct bytebuf {
    char *data; /* data[off .. off+len) holds the bytes */
    size_t off;
    size_t len;
    size_t alloc; /* bytes allocated at data */
    size_t cap;   /* most bytes ever held; 0 = no limit */
} bytebuf_t;

void bytebuf_init(bytebuf_t *b, size_t cap);
void bytebuf_free(bytebuf_t *b);

/* The bytes held, and how many. */
static inline char *bytebuf_data(const bytebuf_t *b)
{
    return b->data + b->off;
}
static inline size_t bytebuf_len(const bytebuf_t *b)
{
    return b->len;
}

/* Makes room for n more bytes at bytebuf_tail: 0, -ENOBUFS past cap, -ENOMEM. */
int bytebuf_reserve(bytebuf_t *b, size_t n);
/* Where the next bytes go (after bytebuf_reserve), and how many were put there. */
static inline char *bytebuf_tail(const bytebuf_t *b)
{
    return b->data + b->off + b->len;
}
static inline void bytebuf_commit(bytebuf_t *b, size_t n)
{
    b->len += n;
}

/* Appends n bytes: 0, -ENOBUFS or -ENOMEM (then nothing is appended). */
int bytebuf_append(bytebuf_t *b, const void *p, size_t n);
/* Appends printf output, as bytebuf_append (needs one byte spare for the NUL). */
int bytebuf_printf(bytebuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops the first n bytes (n <= bytebuf_len). */
void bytebuf_consume(bytebuf_t *b, size_t n);
void bytebuf_clear(bytebuf_t *b);

#endif
