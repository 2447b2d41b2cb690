/* db_forget: a blob's rows go (its holds, entries and the blob), for an
 * admin's removal one at a time and for eviction many in one transaction
 * (each blob's own transaction, with its fsync, made eviction 0.5-1.1 ms
 * a blob). */
#include "db_internal.h"

#include <errno.h>
#include <stdatomic.h>

/* Inside the open transaction: whether the blob is pinned or held (1), and
 * its rows deleted unless so when unless_pinned. -ENOENT: no such blob. */
static int forget_one(sqlite3 *h, sqlite3_stmt *const st[4], const char *sha256, int unless_pinned,
                      int *held)
{
    sqlite3_bind_text(st[0], 1, sha256, -1, SQLITE_STATIC);
    int step = sqlite3_step(st[0]);
    int pinned = step == SQLITE_ROW && sqlite3_column_int(st[0], 0);
    sqlite3_reset(st[0]);
    if (step != SQLITE_ROW && step != SQLITE_DONE)
        return db_sq_err(h, "forget a blob");
    if (step == SQLITE_DONE)
        return -ENOENT;
    if (unless_pinned && pinned) /* held in a user's cache: as pinned */
        return -EBUSY;
    /* Holds and entries first: they refer to the blob. */
    for (int i = 1; i < 4; i++) {
        sqlite3_bind_text(st[i], 1, sha256, -1, SQLITE_STATIC);
        step = sqlite3_step(st[i]);
        sqlite3_reset(st[i]);
        if (step != SQLITE_DONE)
            return db_sq_err(h, "forget a blob");
        if (i == 1 && sqlite3_changes(h) > 0)
            *held = 1;
    }
    return 0;
}

int db_forget_blobs(db_t *db, const char *const *sha256, size_t n, int unless_pinned, int *rcs)
{
    static const char *const sql[4] = {
        "SELECT pinned OR EXISTS (SELECT 1 FROM holds WHERE sha256 = ?1)"
        " FROM blobs WHERE sha256 = ?1",
        "DELETE FROM holds WHERE sha256 = ?1",
        "DELETE FROM entries WHERE sha256 = ?1",
        "DELETE FROM blobs WHERE sha256 = ?1",
    };
    sqlite3 *h = db->wr;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    sqlite3_stmt *st[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < 4 && !rc; i++)
        if (sqlite3_prepare_v2(h, sql[i], -1, &st[i], NULL) != SQLITE_OK)
            rc = db_sq_err(h, "prepare");
    /* Inside the write transaction a PIN cannot come between the check and
     * the deletes. A statement's failure fails them all. */
    int held = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        rcs[i] = forget_one(h, st, sha256[i], unless_pinned, &held);
        if (rcs[i] != -ENOENT && rcs[i] != -EBUSY)
            rc = rcs[i];
    }
    for (int i = 0; i < 4; i++)
        sqlite3_finalize(st[i]);
    rc = db_tx_end(h, rc);
    if (!rc && held)
        atomic_store(&db->holds_dirty, 1);
    return rc;
}

int db_forget_blob(db_t *db, const char *sha256, int unless_pinned)
{
    int one;
    int rc = db_forget_blobs(db, &sha256, 1, unless_pinned, &one);
    return rc ? rc : one;
}
