/* db_totals: the blobs' total size and count, kept as rows come and go, so
 * that STATS (on the loop, at every scrape) reads two atomics instead of
 * summing the table (2-3 ms at 20k blobs, 17 ms at 100k, on the loop).
 *
 * Every change to blobs goes through the writer connection. TEMP triggers
 * on it call hubd_blob_delta(size, count) for each row inserted, deleted
 * or resized, whatever statement did it (a commit, eviction, RM, GC, a
 * rebuild): the deltas add up in the transaction's pending sums. The
 * commit hook runs before the COMMIT is durable, and a COMMIT can still
 * fail after it (a full disk: RM then frees room and tries again), so it
 * only sets the sums aside; the WAL hook, which SQLite calls once a commit
 * has taken place, makes them the totals, and the rollback hook drops
 * them. So the totals are those of what is committed. A change by another
 * connection is not seen: db_totals_check finds and mends that. The
 * triggers are TEMP, made at open outside any transaction: nothing on disk
 * to migrate. The same hooks bump the generation of the loop's look-up
 * memo (db_memo.c), whose triggers mark the transaction in the same way. */
#include "db.h"
#include "db_internal.h"

#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>

static const char triggers[] =
    "CREATE TEMP TRIGGER IF NOT EXISTS blob_totals_add AFTER INSERT ON blobs BEGIN"
    " SELECT hubd_blob_delta(new.size, 1); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS blob_totals_del AFTER DELETE ON blobs BEGIN"
    " SELECT hubd_blob_delta(-old.size, -1); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS blob_totals_size AFTER UPDATE OF size ON blobs"
    " WHEN old.size <> new.size BEGIN SELECT hubd_blob_delta(new.size - old.size, 0); END;";

/* Called by SQLite inside a statement on the writer (its mutex held). */
static void blob_delta(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    db_t *db = sqlite3_user_data(ctx);
    (void)argc;
    db->pending_bytes += sqlite3_value_int64(argv[0]);
    db->pending_blobs += sqlite3_value_int64(argv[1]);
    sqlite3_result_null(ctx);
}

/* SQLite's own default (sqlite3_wal_autocheckpoint), which a WAL hook of
 * ours replaces: a passive checkpoint once the WAL holds this many pages. */
#define AUTOCHECKPOINT_PAGES 1000

static int on_commit(void *arg)
{
    db_t *db = arg;
    db->committing_bytes += db->pending_bytes;
    db->committing_blobs += db->pending_blobs;
    db->pending_bytes = db->pending_blobs = 0;
    db->committing_lookups |= db->pending_lookups;
    db->pending_lookups = 0;
    return 0; /* the commit goes on */
}

/* A commit took place (WAL mode always: db.c refuses any other). */
static int on_wal(void *arg, sqlite3 *h, const char *name, int pages)
{
    db_t *db = arg;
    if (db->committing_bytes || db->committing_blobs) {
        atomic_fetch_add(&db->total_bytes, (uint64_t)db->committing_bytes);
        atomic_fetch_add(&db->total_blobs, (uint64_t)db->committing_blobs);
    }
    db->committing_bytes = db->committing_blobs = 0;
    if (db->committing_lookups) /* after the commit is visible: db_memo.c */
        atomic_fetch_add(&db->lookup_gen, 1);
    db->committing_lookups = 0;
    if (pages >= AUTOCHECKPOINT_PAGES)
        sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

static void on_rollback(void *arg)
{
    db_t *db = arg;
    db->pending_bytes = db->pending_blobs = 0;
    db->committing_bytes = db->committing_blobs = 0;
    db->pending_lookups = db->committing_lookups = 0;
}

/* The totals by a scan of the table, on h. */
static int scan(sqlite3 *h, uint64_t *bytes, uint64_t *blobs)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, "SELECT coalesce(sum(size), 0), count(*) FROM blobs", -1, &st,
                           NULL) != SQLITE_OK)
        return db_sq_err(h, "summing the blobs");
    int rc = sqlite3_step(st) == SQLITE_ROW ? 0 : db_sq_err(h, "summing the blobs");
    if (!rc) {
        *bytes = (uint64_t)sqlite3_column_int64(st, 0);
        *blobs = (uint64_t)sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc;
}

/* The totals row (schema v7), kept by its triggers. */
static int read_kept(sqlite3 *h, uint64_t *bytes, uint64_t *blobs)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, "SELECT bytes, blobs FROM totals WHERE id = 1", -1, &st, NULL) !=
        SQLITE_OK)
        return db_sq_err_or_corrupt(h, "reading the blobs' totals");
    int rc = sqlite3_step(st) == SQLITE_ROW ? 0 : db_sq_err_or_corrupt(h, "the blobs' totals");
    if (!rc) {
        *bytes = (uint64_t)sqlite3_column_int64(st, 0);
        *blobs = (uint64_t)sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc;
}

int db_totals_init(db_t *db)
{
    sqlite3 *h = db->wr;
    int rc = db_temp_triggers(h, "hubd_blob_delta", 2, blob_delta, db, triggers);
    if (rc)
        return rc;
    sqlite3_commit_hook(h, on_commit, db);
    sqlite3_wal_hook(h, on_wal, db);
    sqlite3_rollback_hook(h, on_rollback, db);
    /* Read from the row its triggers keep (no scan: start-up's time does
     * not grow with the cache). Under the writer's mutex: no commit can
     * land between the read and the store. */
    uint64_t bytes = 0, blobs = 0;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    rc = read_kept(h, &bytes, &blobs);
    if (!rc) {
        atomic_store(&db->total_bytes, bytes);
        atomic_store(&db->total_blobs, blobs);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_cache_size(db_t *db, uint64_t *bytes, uint64_t *count)
{
    *bytes = atomic_load(&db->total_bytes);
    *count = atomic_load(&db->total_blobs);
    return 0;
}

int db_totals_check(db_t *db, uint64_t *was_bytes, uint64_t *was_blobs)
{
    sqlite3 *h = db->wr;
    uint64_t bytes = 0, blobs = 0, kept_bytes = 0, kept_blobs = 0;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = scan(h, &bytes, &blobs);
    if (!rc)
        rc = read_kept(h, &kept_bytes, &kept_blobs);
    if (!rc && (kept_bytes != bytes || kept_blobs != blobs)) /* the row, mended too */
        rc = db_exec(h, "UPDATE totals SET bytes = ?1, blobs = ?2", "ii", (int64_t)bytes,
                     (int64_t)blobs);
    if (!rc) {
        *was_bytes = atomic_exchange(&db->total_bytes, bytes);
        *was_blobs = atomic_exchange(&db->total_blobs, blobs);
        rc = *was_bytes != bytes || *was_blobs != blobs || kept_bytes != bytes ||
             kept_blobs != blobs;
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}
