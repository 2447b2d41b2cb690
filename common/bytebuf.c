#include "bytebuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bytebuf_init(bytebuf_t *b, size_t cap)
{
    *b = (bytebuf_t){.cap = cap};
}

void bytebuf_free(bytebuf_t *b)
{
    free(b->data);
    bytebuf_init(b, b->cap);
}

int bytebuf_reserve(bytebuf_t *b, size_t n)
{
    if (b->cap && (n > b->cap || b->len > b->cap - n))
        return -ENOBUFS;
    if (b->off + b->len + n <= b->alloc)
        return 0;
    /* Slide the kept bytes to the front before growing: a consumer that
     * keeps up never makes the buffer grow. */
    if (b->off) {
        memmove(b->data, b->data + b->off, b->len);
        b->off = 0;
        if (b->len + n <= b->alloc)
            return 0;
    }
    size_t want = b->alloc ? b->alloc : 256;
    while (want < b->len + n)
        want *= 2;
    if (b->cap && want > b->cap)
        want = b->cap;
    char *p = realloc(b->data, want);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->alloc = want;
    return 0;
}

int bytebuf_append(bytebuf_t *b, const void *p, size_t n)
{
    int rc = bytebuf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(bytebuf_tail(b), p, n);
    b->len += n;
    return 0;
}

int bytebuf_printf(bytebuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    int rc = bytebuf_reserve(b, (size_t)n + 1); /* vsnprintf writes the NUL too */
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf(bytebuf_tail(b), (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void bytebuf_consume(bytebuf_t *b, size_t n)
{
    b->off += n;
    b->len -= n;
    if (b->len == 0)
        b->off = 0;
}

void bytebuf_clear(bytebuf_t *b)
{
    b->off = b->len = 0;
}
