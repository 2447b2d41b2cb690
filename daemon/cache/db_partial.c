/* db_partial: the partials table, downloads that can be resumed after a
 * restart (schema v2). The lookup by URL runs on the loop thread (reader
 * connection); the rest in the pool (writer connection). */
#include "db.h"
#include "db_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *dup_col(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* A partial from the row's columns etag, last_modified, total, durable,
 * ranges, the first at column `col`. 0 or -ENOMEM (then out holds nothing). */
static int partial_from_row(sqlite3_stmt *st, int col, uint64_t id, db_partial_t *out)
{
    memset(out, 0, sizeof *out);
    out->id = id;
    out->etag = dup_col(st, col);
    out->last_modified = dup_col(st, col + 1);
    out->total = sqlite3_column_int64(st, col + 2);
    out->durable = (uint64_t)sqlite3_column_int64(st, col + 3);
    out->ranges = dup_col(st, col + 4);
    if ((sqlite3_column_type(st, col) != SQLITE_NULL && !out->etag) ||
        (sqlite3_column_type(st, col + 1) != SQLITE_NULL && !out->last_modified) ||
        (sqlite3_column_type(st, col + 4) != SQLITE_NULL && !out->ranges)) {
        db_partial_free(out);
        return -ENOMEM;
    }
    return 0;
}

int db_find_partial(db_t *db, const char *url, const char *cred_tag, db_partial_t *out)
{
    sqlite3_stmt *st = db->find_part;
    sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, cred_tag, -1, SQLITE_STATIC);
    int rc = -ENOENT;
    if (sqlite3_step(st) == SQLITE_ROW)
        rc = partial_from_row(st, 1, (uint64_t)sqlite3_column_int64(st, 0), out);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

void db_partial_free(db_partial_t *p)
{
    free(p->etag);
    free(p->last_modified);
    free(p->ranges);
    p->etag = p->last_modified = p->ranges = NULL;
}

int db_ranges_next(const char **r, uint64_t *a, uint64_t *b)
{
    const char *s = *r;
    if (!s || !*s)
        return 0;
    char *e;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long x = strtoull(s, &e, 10), y;
    if (*e != '-' || e[1] < '0' || e[1] > '9')
        return -1;
    y = strtoull(e + 1, &e, 10);
    if ((*e && (*e != ',' || e[1] < '0' || e[1] > '9')) || y <= x || y > INT64_MAX)
        return -1;
    *a = x;
    *b = y;
    *r = *e ? e + 1 : e;
    return 1;
}

int64_t db_partial_keep(uint64_t durable, const char *ranges)
{
    uint64_t end = durable, a, b;
    int rc;
    while ((rc = db_ranges_next(&ranges, &a, &b)) == 1) {
        if (a < end)
            return -1; /* ascending, apart, past durable */
        end = b;
    }
    return rc < 0 ? -1 : (int64_t)end;
}

int db_save_partial(db_t *db, uint64_t id, const char *url, const char *cred_tag,
                    const db_partial_t *p)
{
    int64_t now = (int64_t)time(NULL);
    sqlite3 *h = db->wr;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    /* Ids only grow: an older partial of the same URL (a job that is going
     * away) yields to a newer one, and a newer one's row is never pushed
     * aside by an older one's late checkpoint. The id's own row must be of
     * this URL (ids are never reused; this is a guard, not a case). */
    rc = db_exec(h, "DELETE FROM partials WHERE url = ?1 AND cred_tag = ?2 AND id < ?3", "tti", url,
                 cred_tag, (int64_t)id);
    if (!rc)
        rc = db_exec(h,
                     "INSERT INTO partials(id, url, cred_tag, etag, last_modified, total,"
                     " durable, updated, ranges) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9"
                     " WHERE NOT EXISTS (SELECT 1 FROM partials WHERE url = ?2 AND"
                     " cred_tag = ?3 AND id > ?1)"
                     " ON CONFLICT(id) DO UPDATE SET etag = excluded.etag,"
                     " last_modified = excluded.last_modified, total = excluded.total,"
                     " durable = excluded.durable, updated = excluded.updated,"
                     " ranges = excluded.ranges WHERE url = excluded.url",
                     "ittttiiit", (int64_t)id, url, cred_tag, p->etag, p->last_modified, p->total,
                     (int64_t)p->durable, now, p->ranges);
    return db_tx_end(h, rc);
}

int db_forget_partial(db_t *db, uint64_t id)
{
    sqlite3 *h = db->wr;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = db_exec(h, "DELETE FROM partials WHERE id = ?1", "i", (int64_t)id);
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_get_partial(db_t *db, uint64_t id, char **url, char **cred_tag, db_partial_t *out)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->wr,
                           "SELECT url, cred_tag, etag, last_modified, total, durable, ranges"
                           " FROM partials WHERE id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return db_sq_err(db->wr, "reading a partial");
    sqlite3_bind_int64(st, 1, (int64_t)id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *url = dup_col(st, 0);
        *cred_tag = dup_col(st, 1);
        rc = partial_from_row(st, 2, id, out);
        if (!rc && (!*url || !*cred_tag)) {
            db_partial_free(out);
            rc = -ENOMEM;
        }
        if (rc) {
            free(*url);
            free(*cred_tag);
            *url = *cred_tag = NULL;
        }
    } else {
        rc = rc == SQLITE_DONE ? -ENOENT : db_sq_err(db->wr, "reading a partial");
    }
    sqlite3_finalize(st);
    return rc;
}

int db_each_partial(db_t *db, void (*fn)(void *arg, uint64_t id, uint64_t keep), void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->wr, "SELECT id, durable, ranges FROM partials", -1, &st, NULL) !=
        SQLITE_OK)
        return db_sq_err_or_corrupt(db->wr, "listing partials");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        uint64_t durable = (uint64_t)sqlite3_column_int64(st, 1);
        int64_t keep = db_partial_keep(durable, (const char *)sqlite3_column_text(st, 2));
        fn(arg, (uint64_t)sqlite3_column_int64(st, 0), keep < 0 ? durable : (uint64_t)keep);
    }
    sqlite3_finalize(st);
    /* Stopping early would make reconcile remove the files of rows it
     * never saw. */
    return rc == SQLITE_DONE ? 0 : db_sq_err_or_corrupt(db->wr, "listing partials");
}
