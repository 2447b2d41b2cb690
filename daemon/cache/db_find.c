/* db_find: the loop's look-ups of a hit or a miss, on the loop's reader
 * connection: a URL's entry (db_find_entry, db_find_entry_meta) and a blob
 * by digest (db_find_blob, db_find_blob_for, db_find_blob_stat), each with
 * its blob's size and recorded identity from the one statement, and each
 * answer remembered until a commit changes a row it read (db_memo.c). */
#include "db.h"
#include "db_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

/* A text column into a fixed buffer: "" when NULL or too long to keep
 * (a validator that long is not sent back). */
static void column_copy(sqlite3_stmt *st, int col, char *out, size_t cap)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    size_t n = v ? strlen((const char *)v) : 0;
    if (n >= cap)
        n = 0;
    memcpy(out, v ? (const char *)v : "", n);
    out[n] = '\0';
}

int db_find_entry(db_t *db, const char *url, const char *cred_tag, char sha_out[65],
                  uint64_t *size_out)
{
    return db_find_entry_meta(db, url, cred_tag, sha_out, size_out, NULL);
}

int db_find_entry_meta(db_t *db, const char *url, const char *cred_tag, char sha_out[65],
                       uint64_t *size_out, db_entry_meta_t *meta)
{
    uint64_t gen;
    const db_memo_slot_t *m = db_memo_get(db, MEMO_ENTRY, url, cred_tag, &gen);
    if (m) {
        db_memo_answer(m, sha_out, size_out, NULL, meta);
        return 0;
    }
    sqlite3_stmt *st = db->find_entry;
    sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, cred_tag, -1, SQLITE_STATIC);
    int rc = -ENOENT;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *sha = sqlite3_column_text(st, 0);
        if (sha && strlen((const char *)sha) == 64) {
            db_entry_meta_t got;
            memcpy(sha_out, sha, 65);
            *size_out = (uint64_t)sqlite3_column_int64(st, 1);
            column_copy(st, 2, got.etag, sizeof got.etag);
            column_copy(st, 3, got.last_modified, sizeof got.last_modified);
            got.validated = sqlite3_column_int64(st, 4);
            db_column_stat(st, 5, &got.stat);
            if (meta)
                *meta = got;
            db_memo_put(db, MEMO_ENTRY, url, cred_tag, gen, sha_out, *size_out, &got.stat, &got);
            rc = 0;
        }
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int db_find_blob_stat(db_t *db, const char *sha256, const char *cred_tag, uint64_t *size_out,
                      db_blob_stat_t *stat_out)
{
    db_memo_kind_t kind = cred_tag ? MEMO_BLOB_FOR : MEMO_BLOB_ANY;
    const char *tag = cred_tag ? cred_tag : "";
    uint64_t gen;
    const db_memo_slot_t *m = db_memo_get(db, kind, sha256, tag, &gen);
    if (m) {
        db_memo_answer(m, NULL, size_out, stat_out, NULL);
        return 0;
    }
    sqlite3_stmt *st = cred_tag ? db->find_blob_for : db->find_blob;
    sqlite3_bind_text(st, 1, sha256, -1, SQLITE_STATIC);
    if (cred_tag)
        sqlite3_bind_text(st, 2, cred_tag, -1, SQLITE_STATIC);
    int rc = -ENOENT;
    if (sqlite3_step(st) == SQLITE_ROW) {
        db_blob_stat_t got;
        *size_out = (uint64_t)sqlite3_column_int64(st, 0);
        db_column_stat(st, 1, &got);
        if (stat_out)
            *stat_out = got;
        if (strlen(sha256) == 64)
            db_memo_put(db, kind, sha256, tag, gen, sha256, *size_out, &got, NULL);
        rc = 0;
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

int db_find_blob(db_t *db, const char *sha256, uint64_t *size_out)
{
    return db_find_blob_stat(db, sha256, NULL, size_out, NULL);
}

int db_find_blob_for(db_t *db, const char *sha256, const char *cred_tag, uint64_t *size_out)
{
    return db_find_blob_stat(db, sha256, cred_tag, size_out, NULL);
}
