/* served: the (uid, sha256) pairs of recent DONE lines, a ring. */
#include "served.h"
#include "sha256.h"

#include <string.h>

static served_pair_t *find(const served_t *m, uid_t uid, const uint8_t sha[32])
{
    for (unsigned i = 0; i < SERVED_MAX; i++) {
        const served_pair_t *p = &m->v[i];
        if (p->at && p->uid == uid && memcmp(p->sha, sha, 32) == 0)
            return (served_pair_t *)p;
    }
    return NULL;
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
        p->at = 0;
    p = &m->v[m->next];
    m->next = (m->next + 1) % SERVED_MAX;
    p->at = now_ms;
    p->uid = uid;
    memcpy(p->sha, raw, 32);
}

int served_recent(const served_t *m, uid_t uid, const char *sha256, uint64_t now_ms)
{
    uint8_t raw[32];
    if (!sha256 || strlen(sha256) != 64 || sha256_parse_hex(sha256, raw))
        return 0;
    const served_pair_t *p = find(m, uid, raw);
    return p && now_ms - p->at <= SERVED_TTL_MS;
}
