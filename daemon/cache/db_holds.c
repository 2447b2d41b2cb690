/* db_holds: the holds table (schema v6): which user's HF cache links to
 * which blob, so that eviction leaves it. Writer connection, pool threads,
 * each under the writer's lock; the counts by uid are kept by triggers (a
 * TEMP table, made by the first of them), and those STATS shows in memory too (db->holds,
 * db->held_bytes). */
#include "db.h"
#include "db_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int prepare(sqlite3 *h, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v2(h, sql, -1, st, NULL) == SQLITE_OK ? 0 : db_sq_err(h, sql);
}

/* The counts by uid, kept by SQLite itself: a TEMP table of the writer
 * connection (derived data, filled when first needed; nothing on disk to
 * migrate) and TEMP triggers on holds, so that every path that adds or
 * deletes a hold (HOLD, UNHOLD, the prune, an admin's RM, quarantine) keeps
 * them without a recount. Row -1 is the whole table: its rows, and the
 * bytes of the blobs held, each once. A blob's bytes count for a uid while
 * it holds the blob through at least one link. SQL built from the macros,
 * one clause a line. */
/* clang-format off */
#define SIZE_OF(x) "coalesce((SELECT size FROM blobs WHERE sha256 = " x "), 0)"
/* Whether the row just inserted is the only one of its blob (for the uid of
 * the hold_uids row updated, or for everyone on row -1). */
#define FIRST_OF(x, u) \
    "(SELECT count(*) FROM (SELECT 1 FROM holds WHERE sha256 = " x \
    " AND (hold_uids.uid = -1 OR uid = " u ") LIMIT 2)) = 1"
/* A number's C constant as SQL text: one value for both. */
#define SQL_NUM_(x) #x
#define SQL_NUM(x) SQL_NUM_(x)
/* What a row stores, in bytes: its label and link, and the rest of it
 * (DB_HOLD_ROW_BYTES); the table's key stores label and link once more. */
#define ROW_TEXT(r) "(length(CAST(" r ".label AS BLOB)) + length(CAST(" r ".link AS BLOB)) + " \
    SQL_NUM(DB_HOLD_ROW_BYTES) ")"
/* Whether the blob is held no more (after a delete). */
#define NONE_OF(x, u) \
    "NOT EXISTS (SELECT 1 FROM holds WHERE sha256 = " x \
    " AND (hold_uids.uid = -1 OR uid = " u "))"
static const char counts_schema[] =
    "CREATE TEMP TABLE IF NOT EXISTS hold_uids (uid INTEGER PRIMARY KEY,"
    " holds INTEGER NOT NULL, bytes INTEGER NOT NULL, text INTEGER NOT NULL);"
    "CREATE TEMP TRIGGER IF NOT EXISTS holds_counted_add AFTER INSERT ON holds BEGIN"
    " INSERT OR IGNORE INTO hold_uids VALUES (new.uid, 0, 0, 0), (-1, 0, 0, 0);"
    " UPDATE hold_uids SET holds = holds + 1, text = text + " ROW_TEXT("new") ", bytes = bytes"
    " + CASE WHEN " FIRST_OF("new.sha256", "new.uid") " THEN " SIZE_OF("new.sha256") " ELSE 0 END"
    " WHERE uid IN (new.uid, -1); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS holds_counted_del AFTER DELETE ON holds BEGIN"
    " UPDATE hold_uids SET holds = holds - 1, text = max(0, text - " ROW_TEXT("old") "),"
    " bytes = max(0, bytes"
    " - CASE WHEN " NONE_OF("old.sha256", "old.uid") " THEN " SIZE_OF("old.sha256") " ELSE 0 END)"
    " WHERE uid IN (old.uid, -1);"
    " DELETE FROM hold_uids WHERE uid = old.uid AND holds <= 0; END;"
    /* HOLD of the same uid, label and link, to another blob. */
    "CREATE TEMP TRIGGER IF NOT EXISTS holds_counted_move AFTER UPDATE OF sha256 ON holds"
    " WHEN old.sha256 <> new.sha256 BEGIN"
    " UPDATE hold_uids SET bytes = max(0, bytes"
    " - CASE WHEN " NONE_OF("old.sha256", "old.uid") " THEN " SIZE_OF("old.sha256") " ELSE 0 END)"
    " + CASE WHEN " FIRST_OF("new.sha256", "new.uid") " THEN " SIZE_OF("new.sha256") " ELSE 0 END"
    " WHERE uid IN (new.uid, -1); END;";
/* clang-format on */

/* The whole count again: when first needed, and after blob rows went without their
 * holds' triggers seeing their sizes (db_holds_refresh). */
static const char counts_rebuild[] =
    "DELETE FROM hold_uids;"
    "INSERT INTO hold_uids SELECT uid, count(*), (SELECT coalesce(sum(b.size), 0) FROM blobs b"
    " WHERE b.sha256 IN (SELECT sha256 FROM holds i WHERE i.uid = o.uid)),"
    " sum(" ROW_TEXT("o") ") FROM holds o GROUP BY uid;"
                          "INSERT INTO hold_uids SELECT -1, (SELECT count(*) FROM holds), (SELECT "
                          "coalesce(sum(size), 0)"
                          " FROM blobs WHERE sha256 IN (SELECT sha256 FROM holds)),"
                          " (SELECT coalesce(sum(" ROW_TEXT("a") "), 0) FROM holds a);";

/* A uid's row (-1: the total); zeros when it has none. The caller holds
 * the writer's mutex. */
static int counts_of(db_t *db, int64_t uid, uint64_t *holds, uint64_t *bytes, uint64_t *text)
{
    sqlite3_stmt *st;
    uint64_t ignored;
    text = text ? text : &ignored;
    *holds = *bytes = *text = 0;
    int rc = prepare(db->wr, "SELECT holds, bytes, text FROM hold_uids WHERE uid = ?1", &st);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, uid);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *holds = (uint64_t)sqlite3_column_int64(st, 0);
        *bytes = (uint64_t)sqlite3_column_int64(st, 1);
        *text = (uint64_t)sqlite3_column_int64(st, 2);
    } else if (r != SQLITE_DONE) {
        rc = db_sq_err(db->wr, "counting holds");
    }
    sqlite3_finalize(st);
    return rc;
}

/* STATS' numbers from row -1 (one look-up, not a count). */
static int publish_locked(db_t *db)
{
    uint64_t n, bytes;
    int rc = counts_of(db, -1, &n, &bytes, NULL);
    if (!rc) {
        atomic_store(&db->holds, n);
        atomic_store(&db->held_bytes, bytes);
    }
    return rc;
}

static int rebuild_locked(db_t *db)
{
    char *msg = NULL;
    int rc = 0;
    if (sqlite3_exec(db->wr, "SAVEPOINT counts", NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(db->wr, counts_rebuild, NULL, NULL, &msg) != SQLITE_OK) {
        rc = db_sq_err(db->wr, "counting holds");
        sqlite3_exec(db->wr, "ROLLBACK TO counts", NULL, NULL, NULL);
    }
    sqlite3_exec(db->wr, "RELEASE counts", NULL, NULL, NULL);
    sqlite3_free(msg);
    return rc ? rc : publish_locked(db);
}

/* Makes and fills the counts the first time a hold function runs: db.c
 * (which may delete holds before then) calls nothing here, and what the
 * triggers did not see is counted by the fill. The caller holds the
 * writer's mutex. */
static int counted_locked(db_t *db)
{
    if (db->holds_counted)
        return 0;
    char *msg = NULL;
    int rc = sqlite3_exec(db->wr, counts_schema, NULL, NULL, &msg) == SQLITE_OK
                 ? rebuild_locked(db)
                 : db_sq_err(db->wr, "creating the counts of holds");
    sqlite3_free(msg);
    db->holds_counted = !rc;
    return rc;
}

/* counted_locked before a transaction: one that rolls back would take the
 * TEMP table and triggers made inside it away. */
static int counted(db_t *db)
{
    sqlite3_mutex_enter(sqlite3_db_mutex(db->wr));
    int rc = counted_locked(db);
    sqlite3_mutex_leave(sqlite3_db_mutex(db->wr));
    return rc;
}

int db_holds_refresh(db_t *db)
{
    if (!atomic_exchange(&db->holds_dirty, 0))
        return 0;
    sqlite3_mutex_enter(sqlite3_db_mutex(db->wr));
    int rc = db->holds_counted ? rebuild_locked(db) : counted_locked(db);
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

int db_hold_fits(db_t *db, const db_hold_t *hd, const db_hold_bounds_t *b)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = counted_locked(db);
    /* Whether the row is new, whether uid holds the blob already (its
     * bytes are counted then), the blob's size, and the other rows of uid
     * on the blob (the row itself, moved from another blob, is not one). */
    if (!rc)
        rc =
            prepare(h,
                    "SELECT NOT EXISTS (SELECT 1 FROM holds WHERE uid = ?1 AND label = ?2"
                    " AND link = ?3), NOT EXISTS (SELECT 1 FROM holds WHERE sha256 = ?4"
                    " AND uid = ?1), " SIZE_OF(
                        "?4") ", (SELECT count(*) FROM holds"
                              " WHERE uid = ?1 AND sha256 = ?4 AND NOT (label = ?2 AND link = ?3))",
                    &st);
    int64_t new_row = 0, new_blob = 0, size = 0, links = 0;
    if (!rc) {
        sqlite3_bind_int64(st, 1, (int64_t)hd->uid);
        sqlite3_bind_text(st, 2, hd->label, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, hd->link, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, hd->sha256, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            new_row = sqlite3_column_int64(st, 0);
            new_blob = sqlite3_column_int64(st, 1);
            size = sqlite3_column_int64(st, 2);
            links = sqlite3_column_int64(st, 3);
        } else {
            rc = db_sq_err(h, "checking a hold's bounds");
        }
        sqlite3_finalize(st);
    }
    uint64_t n = 0, bytes = 0, text = 0;
    if (!rc)
        rc = counts_of(db, (int64_t)hd->uid, &n, &bytes, &text);
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    if (rc)
        return rc;
    uint64_t row = db_hold_row_bytes(hd);
    if (new_row && b->max_holds && n >= b->max_holds)
        return DB_HOLD_OVER_COUNT;
    if (new_row && b->max_text && row > b->max_text - (text < b->max_text ? text : b->max_text))
        return DB_HOLD_OVER_TEXT;
    if (b->max_per_blob && (uint64_t)links >= b->max_per_blob)
        return DB_HOLD_OVER_LINKS;
    if (new_blob && b->max_bytes &&
        (uint64_t)size > b->max_bytes - (bytes < b->max_bytes ? bytes : b->max_bytes))
        return DB_HOLD_OVER_BYTES;
    return 0;
}

uint64_t db_hold_row_bytes(const db_hold_t *h)
{
    return strlen(h->label) + strlen(h->link) + DB_HOLD_ROW_BYTES;
}

int db_holds_of(db_t *db, uid_t uid, uint64_t *holds, uint64_t *bytes, uint64_t *text)
{
    sqlite3_mutex_enter(sqlite3_db_mutex(db->wr));
    int rc = counted_locked(db);
    if (!rc)
        rc = counts_of(db, (int64_t)uid, holds, bytes, text);
    sqlite3_mutex_leave(sqlite3_db_mutex(db->wr));
    return rc;
}

/* The one text column of a one-row answer into out (cap bytes), or "" when
 * there is no row. */
static int text_of(sqlite3 *h, sqlite3_stmt *st, char *out, size_t cap)
{
    out[0] = '\0';
    int r = sqlite3_step(st), rc = 0;
    if (r == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    else if (r != SQLITE_ROW && r != SQLITE_DONE)
        rc = db_sq_err(h, "reading a hold");
    sqlite3_finalize(st);
    return rc;
}

int db_hold_add(db_t *db, const db_hold_t *hd, char moved_from[65])
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    moved_from[0] = '\0';
    int rc = counted(db); /* before the row: the triggers count it */
    if (rc || (rc = db_tx_begin(h)) != 0)
        return rc;
    /* The blob the row held before, if another: the uid's grant on it may
     * have to go with the row. */
    char before[65] = "";
    if (!(rc = prepare(h,
                       "SELECT sha256 FROM holds WHERE uid = ?1 AND label = ?2 AND link = ?3"
                       " AND sha256 <> ?4",
                       &st))) {
        sqlite3_bind_int64(st, 1, (int64_t)hd->uid);
        sqlite3_bind_text(st, 2, hd->label, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, hd->link, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, hd->sha256, -1, SQLITE_STATIC);
        rc = text_of(h, st, before, sizeof before);
    }
    /* Inside the transaction: an eviction or RM of the blob cannot come
     * between the check and the row (its delete takes the same lock). */
    if (!rc)
        rc = db_exec(
            h,
            "INSERT INTO holds(uid, label, link, sha256, created)"
            " SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM blobs WHERE sha256 = ?4)"
            " ON CONFLICT(uid, label, link) DO UPDATE SET sha256 = excluded.sha256,"
            " created = excluded.created",
            "itttii", (int64_t)hd->uid, hd->label, hd->link, hd->sha256, hd->created);
    if (!rc && sqlite3_changes(h) == 0)
        rc = -ENOENT;
    if (!rc && before[0] &&
        !(rc =
              prepare(h, "SELECT sha256 FROM holds WHERE uid = ?1 AND sha256 = ?2 LIMIT 1", &st))) {
        char still[65];
        sqlite3_bind_int64(st, 1, (int64_t)hd->uid);
        sqlite3_bind_text(st, 2, before, -1, SQLITE_STATIC);
        if (!(rc = text_of(h, st, still, sizeof still)) && !still[0])
            memcpy(moved_from, before, 65);
    }
    rc = db_tx_end(h, rc);
    if (rc)
        moved_from[0] = '\0';
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    publish_locked(db);
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
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

int db_hold_release(db_t *db, uid_t uid, const char *label, const char *link, unsigned *released,
                    void (*fn)(void *arg, const char *sha256), void *arg)
{
    sqlite3 *h = db->wr;
    shas_t gone = {0};
    *released = 0;
    int rc = counted(db);
    if (rc || (rc = db_tx_begin(h)) != 0)
        return rc;
    sqlite3_stmt *st;
    /* The rows released: the label's, or its one link (?3). Their blobs
     * that no other hold of uid keeps: their grants go. */
#define RELEASED(t) t ".uid = ?1 AND " t ".label = ?2 AND (?3 IS NULL OR " t ".link = ?3)"
    if (!rc)
        rc = prepare(h,
                     "SELECT DISTINCT sha256 FROM holds a WHERE " RELEASED(
                         "a") " AND NOT EXISTS (SELECT 1 FROM holds b WHERE b.uid = ?1"
                              " AND b.sha256 = a.sha256 AND NOT (" RELEASED("b") "))",
                     &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, (int64_t)uid);
        sqlite3_bind_text(st, 2, label, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, link, -1, SQLITE_STATIC); /* NULL: every link */
        int r;
        while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW)
            rc = shas_add(&gone, (const char *)sqlite3_column_text(st, 0));
        if (!rc && r != SQLITE_DONE)
            rc = db_sq_err(h, "releasing holds");
        sqlite3_finalize(st);
    }
    if (!rc)
        rc = db_exec(h, "DELETE FROM holds WHERE " RELEASED("holds"), "itt", (int64_t)uid, label,
                     link);
#undef RELEASED
    if (!rc)
        *released = (unsigned)sqlite3_changes(h);
    if (!rc)
        rc = publish_locked(db);
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
    int rc = counted(db);
    if (rc || (rc = db_tx_begin(h)) != 0)
        return rc;
    if (!rc)
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
        rc = publish_locked(db);
    return db_tx_end(h, rc);
}

int db_holds_each(db_t *db, unsigned max, int64_t created_before,
                  void (*fn)(void *arg, const db_hold_t *h), void *arg)
{
    db_uses_flush(db); /* the blobs' order of use, as the hits made it */
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    db_hold_pos_t *pos = &db->holds_next;
    /* The writer's lock: no other thread's transaction is half seen, and
     * holds_next is ours. */
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    /* Least recently used blobs first, resumed after the last hold the
     * previous call gave (then round from the start): one run sees at most
     * max holds, and a run after it sees the next ones, so that max valid
     * links cannot keep the rest from ever being checked. */
    int rc = prepare(h,
                     "SELECT h.uid, h.label, h.sha256, h.link, h.created, b.seq, b.rowid"
                     " FROM holds h JOIN blobs b USING (sha256) WHERE h.created <= ?2"
                     " ORDER BY ?3 AND (b.seq, b.rowid, h.uid, h.label, h.link)"
                     " <= (?4, ?5, ?6, ?7, ?8), b.seq, b.rowid, h.uid, h.label, h.link LIMIT ?1",
                     &st);
    if (!rc) {
        sqlite3_bind_int(st, 1, (int)max);
        sqlite3_bind_int64(st, 2, created_before);
        sqlite3_bind_int(st, 3, pos->set);
        sqlite3_bind_int64(st, 4, pos->seq);
        sqlite3_bind_int64(st, 5, pos->rowid);
        sqlite3_bind_int64(st, 6, (int64_t)pos->uid);
        sqlite3_bind_text(st, 7, pos->label, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 8, pos->link, -1, SQLITE_TRANSIENT);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            db_hold_t hd = {
                .uid = (uid_t)sqlite3_column_int64(st, 0),
                .label = (const char *)sqlite3_column_text(st, 1),
                .sha256 = (const char *)sqlite3_column_text(st, 2),
                .link = (const char *)sqlite3_column_text(st, 3),
                .created = sqlite3_column_int64(st, 4),
            };
            if (!hd.label || !hd.sha256 || !hd.link || strlen(hd.label) >= sizeof pos->label ||
                strlen(hd.link) >= sizeof pos->link)
                continue;
            fn(arg, &hd);
            pos->set = 1;
            pos->seq = sqlite3_column_int64(st, 5);
            pos->rowid = sqlite3_column_int64(st, 6);
            pos->uid = hd.uid;
            memcpy(pos->label, hd.label, strlen(hd.label) + 1);
            memcpy(pos->link, hd.link, strlen(hd.link) + 1);
        }
        rc = r == SQLITE_DONE ? 0 : db_sq_err(h, "listing holds");
        sqlite3_finalize(st);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_holds_list(db_t *db, int64_t uid, unsigned max,
                  void (*fn)(void *arg, const db_hold_sum_t *s), void *arg)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h)); /* the writer's lock, as above */
    /* size: each blob once per (uid, label), though two links may name it. */
    int rc = prepare(h,
                     "SELECT uid, label, count(*), (SELECT coalesce(sum(b.size), 0) FROM blobs b"
                     " WHERE b.sha256 IN (SELECT sha256 FROM holds i WHERE i.uid = o.uid"
                     " AND i.label = o.label)) FROM holds o WHERE ?1 < 0 OR uid = ?1"
                     " GROUP BY uid, label ORDER BY uid, label LIMIT ?2",
                     &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, uid);
        sqlite3_bind_int64(st, 2, (int64_t)max);
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

int db_rm_holders(db_t *db, const char *url_or_sha, int by_sha, uid_t *uids, unsigned cap,
                  unsigned *n)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    *n = 0;
    sqlite3_mutex_enter(sqlite3_db_mutex(h)); /* the writer's lock, as above */
    /* The blob the RM takes: the digest's, or the URL's public entry's
     * when no other entry names its blob (else only the entry goes). */
    int rc = prepare(h,
                     "WITH b(sha) AS (SELECT ?1 WHERE ?2 = 1 UNION ALL"
                     " SELECT e.sha256 FROM entries e WHERE ?2 = 0 AND e.url = ?1"
                     " AND e.cred_tag = '' AND NOT EXISTS (SELECT 1 FROM entries o"
                     " WHERE o.sha256 = e.sha256 AND NOT (o.url = e.url AND o.cred_tag = '')))"
                     " SELECT DISTINCT uid FROM holds WHERE sha256 IN (SELECT sha FROM b)"
                     " ORDER BY uid",
                     &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, url_or_sha, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, by_sha != 0);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW) {
            if (*n < cap)
                uids[*n] = (uid_t)sqlite3_column_int64(st, 0);
            ++*n;
        }
        rc = r == SQLITE_DONE ? 0 : db_sq_err(h, "listing a blob's holders");
        sqlite3_finalize(st);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

/* One row of counts for db_kept: its statement's columns, in order. */
static int kept_row(sqlite3 *h, const char *sql, uint64_t *a, uint64_t *b)
{
    sqlite3_stmt *st;
    int rc = prepare(h, sql, &st);
    if (rc)
        return rc;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *a = (uint64_t)sqlite3_column_int64(st, 0);
        *b = (uint64_t)sqlite3_column_int64(st, 1);
    } else {
        rc = db_sq_err(h, "counting what eviction keeps");
    }
    sqlite3_finalize(st);
    return rc;
}

int db_kept(db_t *db, db_kept_t *out)
{
    /* Eviction's own tests (db_lru, forget_one): a pinned blob stays
     * whether held or not, so a blob counts under pinned first. */
    static const char *const sql[3] = {
        "SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE pinned <> 0",
        "SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE pinned = 0"
        " AND sha256 IN (SELECT sha256 FROM holds)",
        "SELECT count(*), count(DISTINCT uid) FROM holds WHERE sha256 IN"
        " (SELECT sha256 FROM blobs WHERE pinned = 0)",
    };
    sqlite3 *h = db->wr;
    memset(out, 0, sizeof *out);
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = kept_row(h, sql[0], &out->pinned_blobs, &out->pinned_bytes);
    if (!rc)
        rc = kept_row(h, sql[1], &out->held_blobs, &out->held_bytes);
    if (!rc)
        rc = kept_row(h, sql[2], &out->holds, &out->holders);
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_holds_by_uid(db_t *db, unsigned max,
                    void (*fn)(void *arg, uid_t uid, uint64_t holds, uint64_t bytes), void *arg)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h)); /* the writer's lock: the TEMP table is its */
    int rc = counted_locked(db);
    if (!rc)
        rc = prepare(h,
                     "SELECT uid, holds, bytes FROM hold_uids WHERE uid >= 0 AND holds > 0"
                     " ORDER BY uid LIMIT ?1",
                     &st);
    if (!rc) {
        sqlite3_bind_int64(st, 1, (int64_t)max);
        int r;
        while ((r = sqlite3_step(st)) == SQLITE_ROW)
            fn(arg, (uid_t)sqlite3_column_int64(st, 0), (uint64_t)sqlite3_column_int64(st, 1),
               (uint64_t)sqlite3_column_int64(st, 2));
        rc = r == SQLITE_DONE ? 0 : db_sq_err(h, "counting holds by uid");
        sqlite3_finalize(st);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}
