/* admin: the cache commands of administrators (RM, PIN, UNPIN, VERIFY),
 * each one request run in the thread pool. (GC is the eviction
 * coordinator's, fetch/evict.c: it must take turns with eviction runs.)
 *
 * Loop thread API. The caller (a session) gets done() exactly once, on the
 * loop, unless it cancels first (its client went away); the request itself
 * always runs to its end, since it changes the cache. */
#ifndef HUBD_ADMIN_H
#define HUBD_ADMIN_H

#include <stdint.h>
#include <uv.h>

#include "cache.h"
#include "db.h"
#include "worktrack.h"
#include "store.h"

typedef enum { ADMIN_RM, ADMIN_PIN, ADMIN_UNPIN, ADMIN_VERIFY } admin_op_t;

typedef struct admin_result {
    int rc;                 /* 0, -ENOENT (no such URL or blob), other negative errno */
    int removed_blob;       /* RM: a blob went */
    cache_holders_t held;   /* RM, -EBUSY: whose HF caches hold the blob */
    unsigned checked;       /* VERIFY: blobs re-hashed */
    const cache_bad_t *bad; /* VERIFY: the bad ones, valid during done() */
} admin_result_t;

typedef struct admin_req admin_req_t;

/* target: a URL or a digest (RM), a digest (PIN, UNPIN); force: RM
 * removes a blob users' HF caches hold. Returns 0 or -ENOMEM (no callback
 * then). */
int admin_start(uv_loop_t *loop, worktrack_t *work, store_t *store, db_t *db, admin_op_t op,
                const char *target, int force, void (*done)(void *arg, const admin_result_t *r),
                void *arg, admin_req_t **out);

/* Whether a request is in the pool (one at a time: a whole-cache walk must
 * not take every pool thread from the downloads). */
int admin_busy(void);

/* No done() for this request any more. */
void admin_cancel(admin_req_t *req);

#endif
