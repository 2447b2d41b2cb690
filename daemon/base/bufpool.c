/* bufpool: small buffers from slabs, full ones from a free list, so that
 * steady-state downloads do not touch malloc and freshly faulted pages on
 * every read, and a crowd's buffers do not fragment the heap. */
#include "bufpool.h"

#include <assert.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Under AddressSanitizer the slabs keep a poisoned gap after each buffer's
 * bytes, and a free buffer's bytes are poisoned, so that an overrun or a
 * use after release is reported as it would be between malloc's blocks. */
#if defined(__SANITIZE_ADDRESS__) /* gcc's spelling */
#define BUFPOOL_ASAN 1
#elif defined(__has_feature) /* clang's */
#if __has_feature(address_sanitizer)
#define BUFPOOL_ASAN 1
#endif
#endif
#ifdef BUFPOOL_ASAN
#include <sanitizer/asan_interface.h>
#define REDZONE 64
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define REDZONE 0
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)
/* A buffer's header; its data 64-byte aligned for the hasher. */
#define HEAD ALIGN64(sizeof(buf_t))

typedef struct bufslab {
    struct bufslab *prev, *next; /* in the pool's avail list, or next in its spare list */
    buf_t *free;                 /* its buffers not handed out */
    unsigned nfree, nbufs;
} bufslab_t;

void bufpool_init(bufpool_t *p, size_t size, unsigned max_free)
{
    *p = (bufpool_t){
        .size = size, .small = size < BUFPOOL_SMALL ? size : BUFPOOL_SMALL, .max_free = max_free};
}

static void slab_unmap(bufpool_t *p, bufslab_t *s)
{
    UNPOISON(s, BUFPOOL_SLAB_BYTES);
    munmap(s, BUFPOOL_SLAB_BYTES);
    p->slabs--;
}

void bufpool_destroy(bufpool_t *p)
{
    assert(p->live == 0 && !p->avail); /* every slab is empty: spare or unmapped */
    while (p->free) {
        buf_t *b = p->free;
        p->free = b->next_free;
        free(b);
    }
    p->nfree = 0;
    while (p->spare) {
        bufslab_t *s = p->spare;
        p->spare = s->next;
        slab_unmap(p, s);
    }
    p->nspare = 0;
}

static void avail_push(bufpool_t *p, bufslab_t *s)
{
    s->prev = NULL;
    s->next = p->avail;
    if (p->avail)
        p->avail->prev = s;
    p->avail = s;
}

static void avail_remove(bufpool_t *p, bufslab_t *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        p->avail = s->next;
    if (s->next)
        s->next->prev = s->prev;
}

/* A slab with every buffer free, in the avail list: a spare one, or one
 * mapped and cut into small buffers. NULL when out of memory. */
static bufslab_t *slab_new(bufpool_t *p)
{
    bufslab_t *s = p->spare;
    if (s) {
        p->spare = s->next;
        p->nspare--;
    } else {
        void *m = mmap(NULL, BUFPOOL_SLAB_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        p->slabs++;
        s = m;
        *s = (bufslab_t){0};
        size_t stride = HEAD + ALIGN64(p->small) + REDZONE;
        char *end = (char *)m + BUFPOOL_SLAB_BYTES;
        POISON((char *)m + sizeof *s, BUFPOOL_SLAB_BYTES - sizeof *s);
        for (char *at = (char *)m + ALIGN64(sizeof *s); at + stride <= end; at += stride) {
            buf_t *b = (buf_t *)at;
            UNPOISON(b, sizeof *b);
            *b = (buf_t){.next_free = s->free, .slab = s, .cap = p->small, .data = at + HEAD};
            s->free = b;
            s->nbufs++;
        }
        s->nfree = s->nbufs;
    }
    avail_push(p, s);
    return s;
}

/* An empty slab: kept, up to BUFPOOL_SPARE_SLABS, else unmapped. */
static void slab_retire(bufpool_t *p, bufslab_t *s)
{
    avail_remove(p, s);
    if (p->nspare < BUFPOOL_SPARE_SLABS) {
        s->next = p->spare;
        p->spare = s;
        p->nspare++;
    } else {
        slab_unmap(p, s);
    }
}

static buf_t *get_small(bufpool_t *p)
{
    bufslab_t *s = p->avail ? p->avail : slab_new(p);
    if (!s)
        return NULL;
    buf_t *b = s->free;
    s->free = b->next_free;
    if (--s->nfree == 0)
        avail_remove(p, s);
    UNPOISON(b->data, b->cap);
    return b;
}

static buf_t *get_full(bufpool_t *p)
{
    buf_t *b = p->free;
    if (b) {
        p->free = b->next_free;
        p->nfree--;
        return b;
    }
    b = aligned_alloc(64, ALIGN64(HEAD + p->size));
    if (b)
        *b = (buf_t){.cap = p->size, .data = (char *)b + HEAD};
    return b;
}

buf_t *bufpool_get(bufpool_t *p, size_t want)
{
    buf_t *b = want <= p->small || p->size == p->small ? get_small(p) : get_full(p);
    if (!b)
        return NULL;
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
    bufslab_t *s = b->slab;
    if (s) {
        POISON(b->data, b->cap);
        b->next_free = s->free;
        s->free = b;
        if (++s->nfree == 1)
            avail_push(p, s);
        if (s->nfree == s->nbufs)
            slab_retire(p, s);
    } else if (p->nfree < p->max_free) {
        b->next_free = p->free;
        p->free = b;
        p->nfree++;
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
