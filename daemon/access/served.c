/* served: the (uid, sha256) pairs of recent DONE lines, a ring. */
#include "served.h"
#include "sha256.h"

#include <string.h>

/* The chain of (uid, sha): the digest's bytes are uniform already. */
static uint16_t *bucket_of(served_t *m, uid_t uid, const uint8_t sha[32])
{
    uint32_t h;
    memcpy(&h, sha, sizeof h);
    return &m->bucket[(h ^ (uint32_t)uid * 2654435761u) & (SERVED_BUCKETS - 1)];
}

static served_pair_t *find(const served_t *m, uid_t uid, const uint8_t sha[32])
{
    for (unsigned k = *bucket_of((served_t *)m, uid, sha); k; k = m->v[k - 1].chain) {
        const served_pair_t *p = &m->v[k - 1];
        if (p->at && p->uid == uid && memcmp(p->sha, sha, 32) == 0)
            return (served_pair_t *)p;
    }
    return NULL;
}

/* Slot i leaves its chain and is empty. */
static void drop(served_t *m, unsigned i)
{
    served_pair_t *p = &m->v[i];
    if (!p->at)
        return;
    for (uint16_t *link = bucket_of(m, p->uid, p->sha); *link; link = &m->v[*link - 1].chain)
        if (*link == i + 1) {
            *link = p->chain;
            break;
        }
    p->at = 0;
    p->chain = 0;
}

void served_note(served_t *m, uid_t uid, const char *sha256, uint64_t now_ms)
{
    uint8_t raw[32];
    if (!sha256 || strlen(sha256) != 64 || sha256_parse_hex(sha256, raw))
        return;
    if (now_ms == 0)
        now_ms = 1; /* 0 marks an empty slot */
    /* Renewed: it leaves its slot (a hole) for the newest, so that the ring
     * still drops the pair noted least recently. */
    served_pair_t *p = find(m, uid, raw);
    if (p)
        drop(m, (unsigned)(p - m->v));
    unsigned i = m->next;
    m->next = (m->next + 1) % SERVED_MAX;
    drop(m, i); /* the oldest pair, once the ring is full */
    p = &m->v[i];
    p->at = now_ms;
    p->uid = uid;
    memcpy(p->sha, raw, 32);
    uint16_t *head = bucket_of(m, uid, raw);
    p->chain = *head;
    *head = (uint16_t)(i + 1);
}

int served_recent(const served_t *m, uid_t uid, const char *sha256, uint64_t now_ms)
{
    uint8_t raw[32];
    if (!sha256 || strlen(sha256) != 64 || sha256_parse_hex(sha256, raw))
        return 0;
    const served_pair_t *p = find(m, uid, raw);
    return p && now_ms - p->at <= SERVED_TTL_MS;
}
