/* Unit tests for daemon/db.c: the database's files (their modes, a link in
 * their place), damage to them, and the blob rows a rebuild adds (issue
 * 10). The fixture is db_fixture.h's. */
#include "db_fixture.h"
#include "db_internal.h" /* db->wr: a transaction rolled back */

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static mode_t mode_of(const char *suffix)
{
    char name[400];
    struct stat st;
    snprintf(name, sizeof name, "%s%s", path, suffix);
    ck_assert_msg(lstat(name, &st) == 0, "%s: %s", name, strerror(errno));
    return st.st_mode & 07777;
}

/* SQLite gives -wal and -shm the database file's mode: hubd.db is made
 * 0600 before SQLite would make it 0644, so all three are hubd's alone. */
START_TEST(db_files_are_private)
{
    char a[65];
    make_sha(a, 0x1);
    record("http://h/secret-query?sig=1", "", a, 11, NULL, NULL);
    ck_assert_uint_eq(mode_of(""), 0600);
    ck_assert_uint_eq(mode_of("-wal"), 0600);
    ck_assert_uint_eq(mode_of("-shm"), 0600);
}
END_TEST

/* One made looser (an older hubd, a person) is made 0600 again. */
START_TEST(db_open_tightens_loose_files)
{
    char a[65], name[400];
    make_sha(a, 0x1);
    record("http://h/a", "", a, 11, NULL, NULL);
    ck_assert_int_eq(chmod(path, 0644), 0);
    snprintf(name, sizeof name, "%s-wal", path);
    ck_assert_int_eq(chmod(name, 0664), 0);
    db_close(db);
    db = NULL;
    ck_assert_int_eq(db_open(path, &db), 0);
    find_entry_is("http://h/a", "", a, 11);
    ck_assert_uint_eq(mode_of(""), 0600);
    if (access(name, F_OK) == 0)
        ck_assert_uint_eq(mode_of("-wal"), 0600);
}
END_TEST

/* A hubd.db that is a symbolic link is refused, and what it points to is
 * neither written nor chmodded. */
START_TEST(db_open_refuses_a_link)
{
    char victim[400];
    db_close(db);
    db = NULL;
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fputs("not a database", f);
    fclose(f);
    ck_assert_int_eq(chmod(victim, 0644), 0);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink(victim, path), 0);
    ck_assert_int_ne(db_open(path, &db), 0);
    ck_assert_ptr_null(db);
    struct stat st;
    ck_assert_int_eq(stat(victim, &st), 0);
    ck_assert_int_eq(st.st_size, 14);
    ck_assert_uint_eq(st.st_mode & 07777, 0644);
}
END_TEST

/* Bytes [off, off + 4096) of the closed database become garbage. */
static void damage_page(off_t off)
{
    db_close(db);
    db = NULL;
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseeko(f, off, SEEK_SET), 0);
    for (int i = 0; i < 4096; i++)
        fputc((i * 7 + 13) & 0xff, f);
    fclose(f);
}

/* Enough rows for the tables to span pages. */
static void record_many(int n)
{
    char sha[65], url[300];
    for (int i = 0; i < n; i++) {
        make_sha(sha, 0x100 + (unsigned)i);
        snprintf(url, sizeof url, "http://h/%0200d", i);
        record(url, "", sha, 1000 + (uint64_t)i, NULL, NULL);
    }
}

/* A damaged page 2 (quick_check) and garbage in page 1 (not a database at
 * all) are both -EUCLEAN: the caller sets the file aside and rebuilds. */
START_TEST(db_open_reports_corruption)
{
    record_many(40);
    damage_page(4096);
    ck_assert_int_eq(db_open(path, &db), -EUCLEAN);
    ck_assert_ptr_null(db);
    damage_page(0);
    ck_assert_int_eq(db_open(path, &db), -EUCLEAN);
    ck_assert_ptr_null(db);
}
END_TEST

static void count_blob(void *arg, const char *sha, uint64_t size)
{
    (void)sha;
    (void)size;
    (*(int *)arg)++;
}

/* A page damaged after the quick_check (here: under an open connection,
 * whose cache another connection's commit invalidates) stops db_each_blob
 * with an error, never with 0 after part of the rows: reconcile would
 * quarantine the blobs of the rows it did not see. */
START_TEST(db_each_blob_reports_a_damaged_page)
{
    record_many(200);
    db_close(db); /* checkpointed: every page is in the main file */
    db = NULL;
    ck_assert_int_eq(db_open(path, &db), 0);
    int64_t page = raw_int("SELECT max(pageno) FROM dbstat WHERE name = 'blobs' AND pagetype = "
                           "'leaf'");
    ck_assert_int_gt(page, 2);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseeko(f, (off_t)(page - 1) * 4096, SEEK_SET), 0); /* its type byte too */
    for (int i = 0; i < 4000; i++)
        fputc(0xff, f);
    fclose(f);
    raw_exec("INSERT INTO partials(id, url, durable, updated) VALUES (9, 'http://h/x', 1, 0)");
    int n = 0;
    ck_assert_int_eq(db_each_blob(db, count_blob, &n), -EUCLEAN);
    ck_assert_int_lt(n, 200);
}
END_TEST

/* A rebuild's blob rows have no entry: a public blob (only those are
 * given) is a hit by digest for any credentials, and stays one (its file
 * is 0444) when a gated entry names it too. */
START_TEST(db_added_blobs_are_found_by_digest)
{
    db_found_blob_t v[2] = {{.size = 5, .mtime = 2}, {.size = 6, .mtime = 1}};
    make_sha(v[0].sha256, 0x51);
    make_sha(v[1].sha256, 0x52);
    ck_assert_int_eq(db_add_blobs(db, v, 2), 0);
    uint64_t size = 0;
    ck_assert_int_eq(db_find_blob_for(db, v[0].sha256, "", &size), 0);
    ck_assert_uint_eq(size, 5);
    ck_assert_int_eq(db_find_blob_for(db, v[1].sha256, "tag", &size), 0);
    ck_assert_uint_eq(size, 6);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), 0);
    ck_assert_int_eq(raw_int("SELECT verified FROM blobs WHERE sha256 = %Q", v[0].sha256), 0);
    ck_assert_int_eq(raw_int("SELECT created FROM blobs WHERE sha256 = %Q", v[0].sha256), 2);
    db_blob_stat_t bs;
    ck_assert_int_eq(db_get_blob_stat(db, v[1].sha256, &bs), 0);
    ck_assert_uint_eq(bs.ino, 0); /* recorded by its first background verification */
    /* Given in order: the first is the least recently used. */
    ck_assert_int_lt(raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", v[0].sha256),
                     raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", v[1].sha256));
    record("http://h/gated", "tag", v[0].sha256, 5, NULL, NULL);
    ck_assert_int_eq(db_find_blob_for(db, v[0].sha256, "", &size), 0);
    ck_assert_int_eq(db_find_blob_for(db, v[0].sha256, "tag", &size), 0);
}
END_TEST

/* A gated file stays gated when its entry moves on: the URL's bytes change
 * and the old blob is left with no entry. Knowing its digest must still
 * open nothing (a rule of "no entry: a rebuilt public blob" would). */
START_TEST(db_a_private_blob_left_without_entry_stays_private)
{
    char p1[65], p2[65];
    uint64_t size;
    make_sha(p1, 0x61);
    make_sha(p2, 0x62);
    record("http://h/g", "tag", p1, 7, NULL, NULL);
    record("http://h/g", "tag", p2, 8, NULL, NULL); /* new bytes at the URL */
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries WHERE sha256 = %Q", p1), 0);
    ck_assert_int_eq(db_find_blob_for(db, p1, "", &size), -ENOENT);
    ck_assert_int_eq(db_find_blob_for(db, p1, "other", &size), -ENOENT);
    /* Once fetched without credentials, the bytes are public for good. */
    record("http://h/pub", "", p2, 8, NULL, NULL);
    record("http://h/pub", "", p1, 7, NULL, NULL);
    ck_assert_int_eq(db_find_blob_for(db, p2, "", &size), 0);
    ck_assert_int_eq(db_find_blob_for(db, p2, "other", &size), 0);
}
END_TEST

/* STATS' totals are counters (db_totals.c), not a scan: kept through
 * commits of new and known blobs, additions at start-up and removals,
 * untouched by a rollback, counted at open, and mended by db_totals_check
 * when a change went around them (another connection). */
START_TEST(db_totals_are_kept_as_blobs_come_and_go)
{
    uint64_t bytes = 1, n = 1, was_bytes, was_n;
    char a[65], b[65];
    make_sha(a, 0x71);
    make_sha(b, 0x72);
    ck_assert_int_eq(db_cache_size(db, &bytes, &n), 0);
    ck_assert_uint_eq(bytes, 0);
    ck_assert_uint_eq(n, 0);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "tag", b, 30, NULL, NULL);
    record("http://h/a2", "", a, 100, NULL, NULL); /* the same blob: counted once */
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 130);
    ck_assert_uint_eq(n, 2);
    db_found_blob_t v[2] = {{.size = 5, .mtime = 1}, {.size = 100, .mtime = 1}};
    make_sha(v[0].sha256, 0x73);
    memcpy(v[1].sha256, a, 65); /* known: left as it is */
    ck_assert_int_eq(db_add_blobs(db, v, 2), 0);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 135);
    ck_assert_uint_eq(n, 3);
    /* A transaction rolled back counts nothing, now or at the next commit. */
    ck_assert_int_eq(sqlite3_exec(db->wr, "BEGIN; UPDATE blobs SET size = size + 1000; ROLLBACK",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(db_totals_check(db, &was_bytes, &was_n), 0);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 135);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(db_forget_blob(db, b, 0), 0);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 105);
    ck_assert_uint_eq(n, 2);
    /* Counted at open. */
    db_close(db);
    ck_assert_int_eq(db_open(path, &db), 0);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 105);
    ck_assert_uint_eq(n, 2);
    /* A change the triggers did not see: found, said and mended. */
    raw_exec("DELETE FROM blobs WHERE sha256 = %Q", v[0].sha256);
    ck_assert_int_eq(db_totals_check(db, &was_bytes, &was_n), 1);
    ck_assert_uint_eq(was_bytes, 105);
    ck_assert_uint_eq(was_n, 2);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 100);
    ck_assert_uint_eq(n, 1);
    /* The row the start reads (schema v7) saw that delete too: its
     * triggers are the table's. */
    ck_assert_int_eq(raw_int("SELECT bytes FROM totals"), 100);
    ck_assert_int_eq(raw_int("SELECT blobs FROM totals"), 1);
    /* Open reads the row, not the table (a wrong row shows, unscanned),
     * and the check mends it. */
    db_close(db);
    raw_exec("UPDATE totals SET bytes = 7, blobs = 9");
    ck_assert_int_eq(db_open(path, &db), 0);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 7);
    ck_assert_uint_eq(n, 9);
    ck_assert_int_eq(db_totals_check(db, &was_bytes, &was_n), 1);
    db_cache_size(db, &bytes, &n);
    ck_assert_uint_eq(bytes, 100);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(raw_int("SELECT bytes FROM totals"), 100);
    ck_assert_int_eq(db_totals_check(db, &was_bytes, &was_n), 0);
}
END_TEST

static Suite *db_files_suite(void)
{
    Suite *s = suite_create("db_files");
    TCase *tc = tcase_create("db_files");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, db_files_are_private);
    tcase_add_test(tc, db_open_tightens_loose_files);
    tcase_add_test(tc, db_open_refuses_a_link);
    tcase_add_test(tc, db_open_reports_corruption);
    tcase_add_test(tc, db_each_blob_reports_a_damaged_page);
    tcase_add_test(tc, db_added_blobs_are_found_by_digest);
    tcase_add_test(tc, db_a_private_blob_left_without_entry_stays_private);
    tcase_add_test(tc, db_totals_are_kept_as_blobs_come_and_go);
    /* Each commit fsyncs (synchronous=FULL). */
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return db_fixture_run(db_files_suite());
}
