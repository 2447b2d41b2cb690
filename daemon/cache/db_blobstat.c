/* db_blobstat: the identity recorded for a blob's file (inode, mtime and
 * ctime in ns), which a hit compares with the file it opened, and its
 * recording (at commit, by verification). Read on three connections: the
 * writer's (under its lock, as a commit holds it) and the pool readers' (a
 * hit in the pool: it never waits for a commit). A hit served on the loop
 * has it from the look-up that found the blob (db_find_blob_stat,
 * db_find_entry_meta): one statement on the loop's reader, not two, each
 * with its WAL read locks. */
#include "db_internal.h"

#include <errno.h>

void db_column_stat(sqlite3_stmt *st, int col, db_blob_stat_t *out)
{
    out->ino = (uint64_t)sqlite3_column_int64(st, col);
    out->mtime_ns = sqlite3_column_int64(st, col + 1);
    out->ctime_ns = sqlite3_column_int64(st, col + 2);
}

/* One blob's recorded identity, on connection h with its statement st
 * (prepared on h, or NULL: prepared here). */
static int blob_stat_on(sqlite3 *h, sqlite3_stmt *st, const char *sha256, db_blob_stat_t *out)
{
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = -ENOENT, own = !st;
    if (own && sqlite3_prepare_v2(h, "SELECT ino, mtime_ns, ctime_ns FROM blobs WHERE sha256 = ?1",
                                  -1, &st, NULL) != SQLITE_OK) {
        rc = db_sq_err(h, "blob stat");
    } else {
        sqlite3_bind_text(st, 1, sha256, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            db_column_stat(st, 0, out);
            rc = 0;
        }
        if (own)
            sqlite3_finalize(st);
        else {
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
        }
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_get_blob_stat(db_t *db, const char *sha256, db_blob_stat_t *out)
{
    return blob_stat_on(db->wr, NULL, sha256, out);
}

int db_read_blob_stat(db_t *db, const char *sha256, db_blob_stat_t *out)
{
    return blob_stat_on(db->rp, db->blob_stat, sha256, out);
}

int db_set_blob_stats(db_t *db, const char *const *sha256, const db_blob_stat_t *bs, size_t n)
{
    sqlite3 *h = db->wr;
    int rc = db_tx_begin(h);
    if (rc) /* no transaction, and the writer's lock was let go */
        return rc;
    for (size_t i = 0; i < n && !rc; i++)
        rc = db_exec(h, "UPDATE blobs SET ino = ?2, mtime_ns = ?3, ctime_ns = ?4 WHERE sha256 = ?1",
                     "tiii", sha256[i], (int64_t)bs[i].ino, bs[i].mtime_ns, bs[i].ctime_ns);
    return db_tx_end(h, rc);
}

int db_set_blob_stat(db_t *db, const char *sha256, const db_blob_stat_t *bs)
{
    return db_set_blob_stats(db, &sha256, bs, 1);
}
