/* served: which uid was lately answered DONE for which blob, in memory.
 *
 * HOLD of a private blob grants its uid read access by name (grant.h);
 * only a uid that was itself given the bytes (a DONE with their fd, so
 * its credentials were accepted for them) may have that. This map is how
 * HOLD knows: a DONE notes (uid, sha256); a pair is good for
 * SERVED_TTL_MS, and the map keeps the SERVED_MAX latest pairs (the
 * oldest noted is dropped first). A pair noted again is renewed.
 *
 * Loop thread only. A pair is found through a hash index over the ring
 * (every DONE notes one: a scan of all SERVED_MAX pairs cost a hit 5-10
 * us). Zeroed memory is an empty map. */
#ifndef HUBD_SERVED_H
#define HUBD_SERVED_H

#include <stdint.h>
#include <sys/types.h>

#define SERVED_MAX 4096     /* at most 65535: chains hold 1 + a slot in 16 bits */
#define SERVED_BUCKETS 8192 /* a power of two */
#define SERVED_TTL_MS (10 * 60 * 1000)

typedef struct served_pair {
    uint64_t at;     /* when noted (uv_now, ms); 0: an empty slot */
    uid_t uid;       /* who was answered */
    uint8_t sha[32]; /* the blob */
    uint16_t chain;  /* 1 + the next slot in its bucket's chain; 0 ends it */
} served_pair_t;

typedef struct served {
    served_pair_t v[SERVED_MAX];     /* a ring: next is the oldest once full */
    uint16_t bucket[SERVED_BUCKETS]; /* 1 + the first slot of each chain; 0: none */
    unsigned next;                   /* the slot the next new pair takes */
} served_t;

/* A DONE for blob sha256 (64 hex digits; others are ignored) to uid at
 * now_ms. */
void served_note(served_t *m, uid_t uid, const char *sha256, uint64_t now_ms);

/* 1 when uid was answered DONE for sha256 within SERVED_TTL_MS of now_ms. */
int served_recent(const served_t *m, uid_t uid, const char *sha256, uint64_t now_ms);

#endif
