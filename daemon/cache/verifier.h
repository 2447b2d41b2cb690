/* verifier: background re-verification of the cache's blobs.
 *
 * Each blob is read back and re-hashed at least once per verify_interval,
 * the least recently verified first, one at a time in the thread pool (so
 * it takes at most one pool thread, and rests as long as each check took:
 * at most half of one thread's time). A blob whose bytes are not what its
 * name says is quarantined and forgotten (cache_verify_one), so a disk that
 * rots or a file edited by hand is caught even if nobody fetches it; hits
 * check the file's identity cheaply in between.
 *
 * Loop thread API. verifier_stop is part of the jobs module's shutdown: a
 * check in flight stops at its next chunk (cache_cancel_all) and the jobs
 * module waits for it (its worktrack). */
#ifndef HUBD_VERIFIER_H
#define HUBD_VERIFIER_H

#include <uv.h>

#include "config.h"
#include "db.h"
#include "store.h"
#include "worktrack.h"

typedef struct verifier verifier_t;

/* Starts the schedule (its first look one second after start). Returns 0
 * or -ENOMEM. */
int verifier_start(uv_loop_t *loop, const hubd_config_t *cfg, worktrack_t *work, store_t *store,
                   db_t *db, verifier_t **out);

/* Blobs found bad so far (STATS). */
unsigned long verifier_bad(const verifier_t *v);

/* No more checks; frees itself once its handle is closed and any check in
 * flight is back. */
void verifier_stop(verifier_t *v);

#endif
