/* sweep: start-up's check of the blobs against their rows, in the
 * background, so that a start takes no time that grows with the cache.
 *
 * reconcile_start does at start-up only what cannot wait (the partials,
 * tmp/); the rows and files under blobs/ are checked here while hubd
 * serves, one folder at a time in the thread pool (reconcile_folder, 257
 * steps, each under the writer's lock for a 256th of the cache), so the
 * socket answers at once at any size; then, if the start skipped it (a
 * clean stop before), the database's quick_check (db_check_pages). The
 * outcome goes to the log.
 *
 * Loop thread API. The owner calls sweep_stop when the daemon stops (before
 * the jobs module's worktrack is drained: a step in flight holds it). */
#ifndef HUBD_SWEEP_H
#define HUBD_SWEEP_H

#include <uv.h>

#include "db.h"
#include "store.h"
#include "worktrack.h"

typedef struct sweep sweep_t;

/* pages: run db_check_pages after the folders. 0, or -ENOMEM. */
int sweep_start(uv_loop_t *loop, worktrack_t *work, store_t *store, db_t *db, int pages,
                sweep_t **out);
/* No more steps; frees itself once a step in flight is back. NULL: none. */
void sweep_stop(sweep_t *s);

#endif
