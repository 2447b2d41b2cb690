/* cache: whole-cache maintenance: eviction, verification, removal, pins.
 *
 * Every function here does blocking file and database work and runs in a
 * libuv pool thread (a job's or an admin request's work item); they share
 * nothing mutable but the database's writer connection, which serializes.
 *
 * Eviction is least recently used first over unpinned blobs. A blob goes
 * with its row and entries, then its file is unlinked: a client that holds
 * the file open (every DONE hands one out) keeps reading it. */
#ifndef HUBD_CACHE_H
#define HUBD_CACHE_H

#include <stdint.h>
#include <sys/types.h>

#include "db.h"
#include "store.h"

typedef struct cache_evict_result {
    unsigned evicted; /* blobs removed */
    uint64_t freed;   /* their bytes */
    uint64_t size;    /* the blobs' total afterwards */
} cache_evict_result_t;

/* Removes blobs until their total is at most target (or only pinned ones,
 * and `keep`, are left). keep may be NULL. Only blobs first recorded up to
 * the use sequence `fence` count and may go (UINT64_MAX: all): a run
 * whose target left room for downloads in progress must neither count nor
 * evict the blob one of them records meanwhile. */
int cache_evict(store_t *store, db_t *db, uint64_t target, const char *keep, uint64_t fence,
                cache_evict_result_t *out);

/* An admin's GC: what went, the cache's size after it, and what stayed
 * above the target by reason (counted only when the size is above it). */
typedef struct cache_gc_result {
    unsigned evicted; /* blobs removed */
    uint64_t freed;   /* their bytes */
    uint64_t size;    /* the blobs' total afterwards, as committed (STATS's cache_bytes) */
    db_kept_t kept;   /* size > target: what eviction passed over, by reason */
} cache_gc_result_t;

/* Evicts least recently used unpinned, unheld blobs, every one recorded
 * (no fence, nothing kept for a download), until the cache's committed
 * size is at most target or only what eviction passes over is left.
 * Blobs committed meanwhile count and may go: it passes again while they
 * keep it above target (a few times at most). The caller makes sure no
 * other eviction runs beside it (the coordinator, fetch/evict.c): two at
 * once pick the same victims, and each would stop early, above target.
 * -ECANCELED on a shutdown. */
int cache_gc(store_t *store, db_t *db, uint64_t target, cache_gc_result_t *out);

/* One blob that failed verification. */
typedef struct cache_bad {
    struct cache_bad *next;
    char sha256[65];
    char why[48]; /* "missing", "size differs", "content differs", ... */
} cache_bad_t;

/* Re-hashes every blob. A bad one is moved to quarantine/ (when there is a
 * file) and forgotten with its entries; *bad lists them (free with
 * cache_bad_free). */
int cache_verify(store_t *store, db_t *db, unsigned *checked, cache_bad_t **bad);
void cache_bad_free(cache_bad_t *bad);

/* Background verification of one blob: re-hashes it; a good one is marked
 * verified at `now` (unix seconds; and its file's identity recorded if none
 * was: a cache from before hubd recorded them); a bad one (content or size
 * differs, missing, not a regular file) is quarantined and forgotten:
 * -EBADMSG. -ECANCELED on a shutdown, -EAGAIN when the file could not be
 * opened now (out of descriptors: nothing is said about the blob). */
int cache_verify_one(store_t *store, db_t *db, const char *sha256, uint64_t size, int64_t now);

/* A blob whose bytes are not what its name says (changed on disk): its row
 * and entries are forgotten and its file moved to quarantine/ for a person
 * to look at. Takes the writer's lock (recursive: callers may hold it). */
int cache_quarantine(store_t *store, db_t *db, const char *sha256, const char *why);

/* Removes one blob unless it is pinned (-EBUSY then). */
int cache_drop(store_t *store, db_t *db, const char *sha256);

/* <cache_dir>/reserve: room kept for the database (1% of the file system,
 * 256 KiB to 8 MiB), so that removing
 * blobs (rm, gc, eviction) works on a full disk, when SQLite cannot write
 * even a delete otherwise. Released by a removal that finds the disk full;
 * made again (at start-up, and after removals) when there is room. */
int cache_reserve_make(store_t *store);

/* A shutdown: evictions and verifications in flight stop at the next blob
 * (or chunk), so the daemon exits in bounded time. */
void cache_cancel_all(void);

/* The users whose HF caches hold a blob (their uids, by uid: the first
 * CACHE_HOLDERS_MAX of `total`). */
#define CACHE_HOLDERS_MAX 8
typedef struct cache_holders {
    uid_t uid[CACHE_HOLDERS_MAX];
    unsigned total; /* uids holding it, all of them */
} cache_holders_t;

/* Removes a blob (by digest: every entry naming it) or an entry (by URL:
 * the blob too when it was its last entry). *removed_blob says whether a
 * blob went. -ENOENT when nothing matched. Unless `force`, a blob that
 * users' HF caches hold (their links would dangle) is not removed:
 * -EBUSY, and *held says whose; an entry whose blob stays needs no force. */
int cache_remove(store_t *store, db_t *db, const char *url_or_sha, int force, cache_holders_t *held,
                 int *removed_blob);

/* Removes url's entry fetched with these credentials (cred_tag, "" for
 * none) while it still names the blob sha256, and the blob when it was its
 * last entry (*removed_blob): what a check found wrong in a stored file is
 * forgotten, and a newer download of the URL is not. -ENOENT when nothing
 * matched. Pool threads. */
int cache_forget(store_t *store, db_t *db, const char *url, const char *cred_tag,
                 const char *sha256, int *removed_blob);

#endif
