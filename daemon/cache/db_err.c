/* db_err: SQLite's errors as hubd's, and the helpers that run statements
 * and transactions (db_internal.h), for every db_*.c file: a leaf, so that
 * they share it without calling each other. */
#include "db_internal.h"
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <sqlite3.h>

int db_sq_err(sqlite3 *h, const char *what)
{
    log_err("sqlite: %s: %s", what, h ? sqlite3_errmsg(h) : "out of memory");
    return h && sqlite3_errcode(h) == SQLITE_FULL ? -ENOSPC : -EIO;
}

int db_exec(sqlite3 *h, const char *sql, const char *types, ...)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sq_err(h, sql);
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 't') {
            const char *s = va_arg(ap, const char *);
            if (s)
                sqlite3_bind_text(st, i + 1, s, -1, SQLITE_TRANSIENT);
        } else {
            sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
        }
    }
    va_end(ap);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : db_sq_err(h, sql);
}

/* A write transaction on the writer connection. It holds the connection's
 * mutex from begin to end, so another pool thread cannot interleave its
 * statements into it. */
int db_tx_begin(sqlite3 *h)
{
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = db_exec(h, "BEGIN IMMEDIATE", "");
    if (rc)
        sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

/* Commits when rc is 0, else rolls back; returns the outcome. */
int db_tx_end(sqlite3 *h, int rc)
{
    if (!rc)
        rc = db_exec(h, "COMMIT", "");
    if (rc)
        db_exec(h, "ROLLBACK", "");
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

/* SQLite found the file damaged, or not a database at all. */
int db_is_corrupt(int sqlite_rc)
{
    return (sqlite_rc & 0xff) == SQLITE_CORRUPT || (sqlite_rc & 0xff) == SQLITE_NOTADB;
}

/* A failed statement on h: -EUCLEAN when SQLite says the file is corrupt
 * (db_open's caller sets it aside and rebuilds), else as sq_err. */
int db_sq_err_or_corrupt(sqlite3 *h, const char *what)
{
    if (h && db_is_corrupt(sqlite3_errcode(h))) {
        log_err("sqlite: %s: %s", what, sqlite3_errmsg(h));
        return -EUCLEAN;
    }
    return db_sq_err(h, what);
}
