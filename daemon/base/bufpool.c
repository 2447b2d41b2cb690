/* bufpool: a free list of equal buffers per size, so steady-state downloads
 * do not touch malloc and freshly faulted pages on every read. */
#include "bufpool.h"

#include <assert.h>
#include <stdlib.h>

void bufpool_init(bufpool_t *p, size_t size, unsigned max_free)
{
    p->size = size;
    p->small = size < BUFPOOL_SMALL ? size : BUFPOOL_SMALL;
    for (int i = 0; i < 2; i++)
        p->cls[i] = (bufpool_class_t){.free = NULL, .nfree = 0, .max_free = max_free};
    p->live = 0;
}

void bufpool_destroy(bufpool_t *p)
{
    assert(p->live == 0);
    for (int i = 0; i < 2; i++) {
        while (p->cls[i].free) {
            buf_t *b = p->cls[i].free;
            p->cls[i].free = b->next_free;
            free(b);
        }
        p->cls[i].nfree = 0;
    }
}

static bufpool_class_t *class_of(bufpool_t *p, size_t cap)
{
    return &p->cls[cap == p->small ? 0 : 1];
}

buf_t *bufpool_get(bufpool_t *p, size_t want)
{
    size_t cap = want <= p->small ? p->small : p->size;
    bufpool_class_t *c = class_of(p, cap);
    buf_t *b = c->free;
    if (b) {
        c->free = b->next_free;
        c->nfree--;
    } else {
        /* Header and data in one block; data 64-byte aligned for the hasher. */
        size_t head = (sizeof(buf_t) + 63) & ~(size_t)63;
        b = aligned_alloc(64, (head + cap + 63) & ~(size_t)63);
        if (!b)
            return NULL;
        b->data = (char *)b + head;
        b->cap = cap;
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
    bufpool_class_t *c = class_of(p, b->cap);
    if (c->nfree < c->max_free) {
        b->next_free = c->free;
        c->free = b;
        c->nfree++;
    } else {
        free(b);
    }
}

size_t bufpool_meter_next(const bufpool_t *p, bufpool_meter_t *m, uint64_t now)
{
    if (!m->t0) {
        *m = (bufpool_meter_t){.t0 = now ? now : 1};
        return p->small;
    }
    uint64_t span = now - m->t0;
    if (span >= 1000 || m->got >= p->size) {
        /* got / span * 1000 >= size, without dividing */
        m->full = m->got * 1000 >= (uint64_t)p->size * (span >= 1000 ? span : 1000);
        m->t0 = now ? now : 1;
        m->got = 0;
    }
    return m->full ? p->size : p->small;
}
