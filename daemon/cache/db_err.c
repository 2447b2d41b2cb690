/* db_err: SQLite's errors as hubd's (db_internal.h), for every db_*.c
 * file: a leaf, so that they share it without calling each other. */
#include "db_internal.h"
#include "log.h"

#include <errno.h>
#include <sqlite3.h>

int db_sq_err(sqlite3 *h, const char *what)
{
    log_err("sqlite: %s: %s", what, h ? sqlite3_errmsg(h) : "out of memory");
    return h && sqlite3_errcode(h) == SQLITE_FULL ? -ENOSPC : -EIO;
}
