/* holds: blobs linked into users' HF caches (HOLD, UNHOLD), their read
 * grants (grant.h) and the check that drops a hold whose link is gone.
 *
 * Every function does blocking file, ACL and database work: libuv pool
 * threads only. Each takes the writer's lock (db_lock) across the file
 * change and its rows, so that a hold and a removal of the same blob never
 * interleave: a held blob is never evicted, and an admin's RM takes the
 * blob with its holds. */
#ifndef HUBD_HOLDS_H
#define HUBD_HOLDS_H

#include <stdint.h>
#include <sys/types.h>

#include "db.h"
#include "store.h"

/* A hold younger than this (seconds) is not checked: HELD comes before the
 * client makes its link, and the hold must not be dropped in between. */
#define HOLDS_GRACE 120
/* Holds checked by one eviction or GC run at most (least recently used
 * blobs first: the candidates; the next run goes on after them). */
#define HOLDS_CHECK_MAX 4096

/* A uid's bounds (from the settings, copied on the loop). */
typedef struct holds_bounds {
    uint64_t max_holds;    /* hold rows of one uid; 0: none */
    uint64_t max_bytes;    /* bytes of the blobs one uid holds; 0: half of cache_max */
    uint64_t cache_max;    /* max_cache_size; 0: the half is of the file system */
    uint64_t max_text;     /* bytes one uid's rows store (labels, links); 0: none */
    uint64_t max_per_blob; /* rows of one uid on one blob; 0: none */
} holds_bounds_t;

/* h->uid holds blob h->sha256 for h->label through h->link. Allowed when
 * `served` (this uid was answered DONE for the blob lately: the caller's
 * served map), public blob or not. Past one of uid's bounds, *over says
 * which (DB_HOLD_OVER_*, db.h) and nothing is recorded. A
 * private blob gets a read grant for uid; *readable says whether uid may
 * open it by name now (0: past a bound, over GRANT_MAX_USERS, or the file
 * system keeps no ACLs; no hold is recorded then: the client copies, so
 * nothing links to the blob). 0, -ENOENT (no such blob), -EPERM (not
 * allowed), other negative errno. */
int holds_add(store_t *store, db_t *db, const holds_bounds_t *b, const db_hold_t *h, int served,
              int *readable, int *over);

/* Releases uid's holds of label, or its one hold through link (not NULL);
 * *released: how many. The grants of uid on blobs it no longer holds go. */
int holds_release(store_t *store, db_t *db, uid_t uid, const char *label, const char *link,
                  unsigned *released);

/* Checks up to max holds older than HOLDS_GRACE, of the least recently
 * used blobs first, going on where the previous call stopped: a link that is gone, is no symlink,
 * is not the uid's, or points elsewhere than the blob's store path drops its hold (and the uid's
 * grant when it has no other hold of the blob). A link that cannot be looked at (EACCES, an I/O
 * error) keeps it. Returns the holds dropped, or a negative errno. */
int holds_prune(store_t *store, db_t *db, unsigned max);

/* Whether the link still stands for blob sha256 of uid: 1 yes, 0 gone, or
 * a negative errno when it cannot be told (kept then). */
int holds_link_stands(const store_t *store, const char *link, uid_t uid, const char *sha256);

#endif
