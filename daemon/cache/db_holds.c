/* db_holds: the holds table (schema v6): which user's HF cache links to
 * which blob, so that eviction leaves it. Writer connection, pool threads;
 * the counts STATS shows are kept in memory (db->holds, db->held_bytes). */
#include "db.h"
#include "db_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int prepare(sqlite3 *h, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v2(h, sql, -1, st, NULL) == SQLITE_OK ? 0 : db_sq_err(h, sql);
}

/* The caller holds the writer's mutex. */
static int recount_locked(db_t *db)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    int rc = prepare(h,
                     "SELECT (SELECT count(*) FROM holds), (SELECT coalesce(sum(size), 0)"
                     " FROM blobs WHERE sha256 IN (SELECT sha256 FROM holds))",
                     &st);
    if (rc)
        return rc;
    if (sqlite3_step(st) == SQLITE_ROW) {
        atomic_store(&db->holds, (uint64_t)sqlite3_column_int64(st, 0));
        atomic_store(&db->held_bytes, (uint64_t)sqlite3_column_int64(st, 1));
    } else {
        rc = db_sq_err(h, "counting holds");
    }
    sqlite3_finalize(st);
    return rc;
}

int db_holds_refresh(db_t *db)
{
    if (!atomic_exchange(&db->holds_dirty, 0))
        return 0;
    sqlite3_mutex_enter(sqlite3_db_mutex(db->wr));
    int rc = recount_locked(db);
    sqlite3_mutex_leave(sqlite3_db_mutex(db->wr));
    if (rc)
        atomic_store(&db->holds_dirty, 1);
    return rc;
}

void db_holds_stats(db_t *db, uint64_t *holds, uint64_t *held_bytes)
{
    *holds = atomic_load(&db->holds);
    *held_bytes = atomic_load(&db->held_bytes);
}

int db_hold_add(db_t *db, const db_hold_t *hd)
{
    sqlite3 *h = db->wr;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    /* Inside the transaction: an eviction or RM of the blob cannot come
     * between the check and the row (its delete takes the same lock). */
    rc = db_exec(h,
                 "INSERT INTO holds(uid, label, link, sha256, created)"
                 " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM blobs WHERE sha256 = ?4)"
                 " ON CONFLICT(uid, label, link) DO UPDATE SET sha256 = excluded.sha256,"
                 " created = excluded.created",
                 "itttii", (int64_t)hd->uid, hd->label, hd->link, hd->sha256, hd->created);
    if (!rc && sqlite3_changes(h) == 0)
        rc = -ENOENT;
    if (!rc)
        rc = recount_locked(db);
    return db_tx_end(h, rc);
}

/* Digests collected inside a transaction, handed out after it. */
typedef struct shas {
    char (*v)[65];
    size_t n, cap;
} shas_t;

static int shas_add(shas_t *s, const char *sha)
{
    if (!sha || strlen(sha) != 64)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        void *p = realloc(s->v, cap * sizeof *s->v);
        if (!p)
            return -ENOMEM;
        s->v = p;
        s->cap = cap;
    }
    memcpy(s->v[s->n++], sha, 65);
    return 0;
}

int db_hold_release(db_t *db, uid_t uid, const char *label, unsigned *released,
                    void (*fn)(void *arg, const char *sha256), void *arg)
{
    sqlite3 *h = db->wr;
    shas_t gone = {0};
    *released = 0;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    /* The label's blobs that no other hold of uid keeps: their grants go. */
    rc = prepare(h,
                 "SELECT DISTINCT sha256 FROM holds a WHERE uid = ?1 AND label = ?2"
                 " AND NOT EXISTS (SELECT 1 FROM holds b WHERE b.uid = ?1 AND b.label <> ?2"
                 " AND b.sha256 = a.sha256)",
                 &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, (int64_t)uid);
        sqlite3_bind_text(st, 2, label, -1, SQLITE_STATIC);
        int r;
        while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW)
            rc = shas_add(&gone, (const char *)sqlite3_column_text(st, 0));
        if (!rc && r != SQLITE_DONE)
            rc = db_sq_err(h, "releasing holds");
        sqlite3_finalize(st);
    }
    if (!rc)
        rc = db_exec(h, "DELETE FROM holds WHERE uid = ?1 AND label = ?2", "it", (int64_t)uid,
                     label);
    if (!rc)
        *released = (unsigned)sqlite3_changes(h);
    if (!rc)
        rc = recount_locked(db);
    rc = db_tx_end(h, rc);
    for (size_t i = 0; !rc && fn && i < gone.n; i++)
        fn(arg, gone.v[i]);
    free(gone.v);
    if (rc)
        *released = 0;
    return rc;
}

int db_hold_drop(db_t *db, const db_hold_t *hd, int *still_held)
{
    sqlite3 *h = db->wr;
    *still_held = 0;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    rc = db_exec(h,
                 "DELETE FROM holds WHERE uid = ?1 AND label = ?2 AND link = ?3 AND sha256 = ?4"
                 " AND created = ?5",
                 "itttii", (int64_t)hd->uid, hd->label, hd->link, hd->sha256, hd->created);
    if (!rc && sqlite3_changes(h) == 0)
        rc = -ENOENT;
    sqlite3_stmt *st;
    if (!rc &&
        !(rc = prepare(h, "SELECT 1 FROM holds WHERE sha256 = ?1 AND uid = ?2 LIMIT 1", &st))) {
        sqlite3_bind_text(st, 1, hd->sha256, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (int64_t)hd->uid);
        int r = sqlite3_step(st);
        *still_held = r == SQLITE_ROW;
        if (r != SQLITE_ROW && r != SQLITE_DONE)
            rc = db_sq_err(h, "dropping a hold");
        sqlite3_finalize(st);
    }
    if (!rc)
        rc = recount_locked(db);
    return db_tx_end(h, rc);
}

int db_holds_each(db_t *db, unsigned max, int64_t created_before,
                  void (*fn)(void *arg, const db_hold_t *h), void *arg)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = prepare(h,
                     "SELECT h.uid, h.label, h.sha256, h.link, h.created FROM holds h"
                     " JOIN blobs b USING (sha256) WHERE h.created <= ?2"
                     " ORDER BY b.seq, b.rowid LIMIT ?1",
                     &st);
    if (!rc) {
        sqlite3_bind_int(st, 1, (int)max);
        sqlite3_bind_int64(st, 2, created_before);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            db_hold_t hd = {
                .uid = (uid_t)sqlite3_column_int64(st, 0),
                .label = (const char *)sqlite3_column_text(st, 1),
                .sha256 = (const char *)sqlite3_column_text(st, 2),
                .link = (const char *)sqlite3_column_text(st, 3),
                .created = sqlite3_column_int64(st, 4),
            };
            if (hd.label && hd.sha256 && hd.link)
                fn(arg, &hd);
        }
        rc = r == SQLITE_DONE ? 0 : db_sq_err(h, "listing holds");
        sqlite3_finalize(st);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_holds_list(db_t *db, int64_t uid, void (*fn)(void *arg, const db_hold_sum_t *s), void *arg)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    /* size: each blob once per (uid, label), though two links may name it. */
    int rc = prepare(h,
                     "SELECT uid, label, count(*), (SELECT coalesce(sum(b.size), 0) FROM blobs b"
                     " WHERE b.sha256 IN (SELECT sha256 FROM holds i WHERE i.uid = o.uid"
                     " AND i.label = o.label)) FROM holds o WHERE ?1 < 0 OR uid = ?1"
                     " GROUP BY uid, label ORDER BY uid, label",
                     &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, uid);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            db_hold_sum_t s = {
                .uid = (uid_t)sqlite3_column_int64(st, 0),
                .label = (const char *)sqlite3_column_text(st, 1),
                .files = (uint64_t)sqlite3_column_int64(st, 2),
                .size = (uint64_t)sqlite3_column_int64(st, 3),
            };
            if (s.label)
                fn(arg, &s);
        }
        rc = r == SQLITE_DONE ? 0 : db_sq_err(h, "listing holds");
        sqlite3_finalize(st);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}
