/* db_err: SQLite's errors as hubd's, and the helpers that run statements
 * and transactions (db_internal.h), for every db_*.c file: a leaf, so that
 * they share it without calling each other. */
#include "db_internal.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <string.h>

int db_sq_err(sqlite3 *h, const char *what)
{
    log_err("sqlite: %s: %s", what, h ? sqlite3_errmsg(h) : "out of memory");
    return h && sqlite3_errcode(h) == SQLITE_FULL ? -ENOSPC : -EIO;
}

/* db_exec's statements, kept prepared between calls. Compiling one costs
 * more than running it (the TEMP triggers of db_totals.c and db_memo.c are
 * compiled into every statement that writes their tables): a small file's
 * commit ran seven of them, about a tenth of its CPU.
 * Keyed by connection and SQL text (its pointer, then the text itself: a
 * string built at run time may reuse a freed one's address). A statement
 * is taken out while it runs, so two threads never share one; when all
 * slots are taken it is finalized instead. db_exec_forget finalizes a
 * connection's before it closes. */
#define STMT_CACHE 48

static struct {
    sqlite3 *h;
    const char *sql;
    sqlite3_stmt *st;
} stmts[STMT_CACHE];
static pthread_mutex_t stmts_mu = PTHREAD_MUTEX_INITIALIZER;

static sqlite3_stmt *stmt_take(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *st = NULL;
    pthread_mutex_lock(&stmts_mu);
    for (size_t i = 0; i < STMT_CACHE && !st; i++) {
        if (stmts[i].st && stmts[i].h == h && stmts[i].sql == sql &&
            strcmp(sqlite3_sql(stmts[i].st), sql) == 0) {
            st = stmts[i].st;
            stmts[i].st = NULL;
        }
    }
    pthread_mutex_unlock(&stmts_mu);
    return st;
}

static void stmt_give(sqlite3 *h, const char *sql, sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    pthread_mutex_lock(&stmts_mu);
    for (size_t i = 0; i < STMT_CACHE && st; i++) {
        if (!stmts[i].st) {
            stmts[i].h = h;
            stmts[i].sql = sql;
            stmts[i].st = st;
            st = NULL;
        }
    }
    pthread_mutex_unlock(&stmts_mu);
    sqlite3_finalize(st); /* NULL: kept */
}

void db_exec_forget(sqlite3 *h)
{
    pthread_mutex_lock(&stmts_mu);
    for (size_t i = 0; i < STMT_CACHE; i++) {
        if (stmts[i].st && stmts[i].h == h) {
            sqlite3_finalize(stmts[i].st);
            stmts[i].st = NULL;
        }
    }
    pthread_mutex_unlock(&stmts_mu);
}

int db_exec(sqlite3 *h, const char *sql, const char *types, ...)
{
    sqlite3_stmt *st = stmt_take(h, sql);
    if (!st && sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
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
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_sq_err(h, sql);
    stmt_give(h, sql, st);
    return rc;
}

int db_temp_triggers(sqlite3 *h, const char *fn_name, int nargs,
                     void (*fn)(sqlite3_context *, int, sqlite3_value **), void *arg,
                     const char *sql)
{
    if (sqlite3_create_function(h, fn_name, nargs, SQLITE_UTF8, arg, fn, NULL, NULL) != SQLITE_OK)
        return db_sq_err(h, fn_name);
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg) == SQLITE_OK ? 0 : db_sq_err(h, fn_name);
    sqlite3_free(msg);
    return rc;
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
