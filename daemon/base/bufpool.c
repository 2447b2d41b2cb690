/* bufpool: a free list of equal buffers, so steady-state downloads do not
 * touch malloc and freshly faulted pages on every read. */
#include "bufpool.h"

#include <assert.h>
#include <stdlib.h>

void bufpool_init(bufpool_t *p, size_t size, unsigned max_free)
{
    p->size = size;
    p->free = NULL;
    p->nfree = 0;
    p->max_free = max_free;
    p->live = 0;
}

void bufpool_destroy(bufpool_t *p)
{
    assert(p->live == 0);
    while (p->free) {
        buf_t *b = p->free;
        p->free = b->next_free;
        free(b);
    }
    p->nfree = 0;
}

buf_t *bufpool_get(bufpool_t *p)
{
    buf_t *b = p->free;
    if (b) {
        p->free = b->next_free;
        p->nfree--;
    } else {
        /* Header and data in one block; data 64-byte aligned for the hasher. */
        size_t head = (sizeof(buf_t) + 63) & ~(size_t)63;
        b = aligned_alloc(64, (head + p->size + 63) & ~(size_t)63);
        if (!b)
            return NULL;
        b->data = (char *)b + head;
    }
    b->next_free = NULL;
    b->refs = 1;
    b->len = 0;
    p->live++;
    return b;
}

void buf_ref(buf_t *b)
{
    assert(b->refs > 0);
    b->refs++;
}

void buf_unref(bufpool_t *p, buf_t *b)
{
    assert(b->refs > 0);
    if (--b->refs > 0)
        return;
    p->live--;
    if (p->nfree < p->max_free) {
        b->next_free = p->free;
        p->free = b;
        p->nfree++;
    } else {
        free(b);
    }
}
