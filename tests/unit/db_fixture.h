/* db_fixture: the fixture and helpers of the unit tests of daemon/db.c
 * (test_db, test_db_partial, test_db_files).
 *
 * Every test gets a fresh database in its own directory under one mkdtemp()
 * root, which db_fixture_run() removes after the run whatever happened (a
 * test that fails in a forked child never reaches its teardown). The tests
 * look at the file through a separate sqlite3 connection too: to check the
 * schema, and to set `accessed` by hand so ordering is tested without
 * sleeping. A header of static functions: each test program is one
 * translation unit; the helpers that not every program calls are inline,
 * so one left unused is no warning. */
#ifndef HUBD_TEST_DB_FIXTURE_H
#define HUBD_TEST_DB_FIXTURE_H

#include "db.h"

#include <check.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[256]; /* mkdtemp() root of all test dirs; db_fixture_run() removes it */
static char dir[300];  /* this test's directory */
static char path[320]; /* this test's database file */
static db_t *db;       /* opened on path by the fixture */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_tree(const char *p)
{
    nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "%s/t.XXXXXX", root);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/hubd.db", dir);
    ck_assert_int_eq(db_open(path, &db), 0);
    ck_assert_ptr_nonnull(db);
}

static void teardown(void)
{
    db_close(db);
    db = NULL;
    rm_tree(dir);
}

/* ---- a second, independent connection on the file ---------------------- */

static inline sqlite3 *raw_open(void)
{
    sqlite3 *h = NULL;

    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(h, 10000);
    return h;
}

/* Runs SQL built with sqlite3_mprintf's format (%Q quotes a string). */
static inline void raw_exec(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3 *h = raw_open();
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_free(sql);
    sqlite3_close(h);
}

/* The first column of the first row as text (malloc'd, NULL for SQL NULL);
 * the query must return a row. */
static inline char *raw_text(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3 *h = raw_open();
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(h));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "%s: no row", sql);
    const unsigned char *t = sqlite3_column_text(st, 0);
    char *out = t ? strdup((const char *)t) : NULL;
    sqlite3_finalize(st);
    sqlite3_free(sql);
    sqlite3_close(h);
    return out;
}

static inline int64_t raw_int(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3 *h = raw_open();
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(h));
    ck_assert_msg(sqlite3_step(st) == SQLITE_ROW, "%s: no row", sql);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_free(sql);
    sqlite3_close(h);
    return v;
}

/* ---- helpers ------------------------------------------------------------ */

/* A distinct, valid-looking digest for each n: 64 lowercase hex digits. */
static inline void make_sha(char out[65], unsigned n)
{
    snprintf(out, 65, "%064x", n);
}

static inline void record(const char *url, const char *cred, const char *sha, uint64_t size,
                          const char *etag, const char *lm)
{
    db_record_t r = {
        .url = url,
        .cred_tag = cred,
        .sha256 = sha,
        .size = size,
        .etag = etag,
        .last_modified = lm,
    };
    ck_assert_int_eq(db_record_download(db, &r), 0);
}

static inline void find_entry_is(const char *url, const char *cred, const char *sha, uint64_t size)
{
    char got[65];
    uint64_t got_size = 0;

    memset(got, 'X', sizeof got);
    ck_assert_msg(db_find_entry(db, url, cred, got, &got_size) == 0, "%s [%s] not found", url,
                  cred);
    ck_assert_str_eq(got, sha);
    ck_assert_uint_eq(got_size, size);
}

static inline void save_partial(uint64_t id, const char *url, const char *etag, uint64_t durable)
{
    db_partial_t p = {.etag = (char *)etag, .total = 1000, .durable = durable};
    ck_assert_int_eq(db_save_partial(db, id, url, "", &p), 0);
}

/* A test program's whole run, in a fresh root: its main() returns this. */
static int db_fixture_run(Suite *suite)
{
    const char *tmp = getenv("TMPDIR");
    SRunner *sr;
    int failed;

    snprintf(root, sizeof root, "%s/hubd-test-db.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    rm_tree(root);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
