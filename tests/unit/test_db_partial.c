/* Unit tests for daemon/db.c: the partials table, where a download in
 * progress checkpoints what of its file is durable (its prefix and, for a
 * segmented one, the finished ranges past it) so that it resumes after a
 * restart. The fixture is db_fixture.h's. */
#include "db_fixture.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>

START_TEST(db_partial_save_find_forget)
{
    db_partial_t p;

    ck_assert_int_eq(db_find_partial(db, "http://h/p", "", &p), -ENOENT);
    save_partial(7, "http://h/p", "\"v1\"", 100);
    save_partial(7, "http://h/p", "\"v1\"", 300); /* moves forward in place */
    ck_assert_int_eq(db_find_partial(db, "http://h/p", "", &p), 0);
    ck_assert_uint_eq(p.id, 7);
    ck_assert_uint_eq(p.durable, 300);
    ck_assert_int_eq(p.total, 1000);
    ck_assert_str_eq(p.etag, "\"v1\"");
    ck_assert_ptr_null(p.last_modified);
    db_partial_free(&p);
    /* Another credential tag is another partial. */
    ck_assert_int_eq(db_find_partial(db, "http://h/p", "t", &p), -ENOENT);

    /* A newer partial of the same URL replaces the older row. */
    save_partial(9, "http://h/p", "\"v2\"", 50);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM partials"), 1);
    ck_assert_int_eq(db_find_partial(db, "http://h/p", "", &p), 0);
    ck_assert_uint_eq(p.id, 9);
    db_partial_free(&p);

    /* An older id's late checkpoint does not push the newer row aside. */
    save_partial(7, "http://h/p", "\"v1\"", 400);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM partials"), 1);
    ck_assert_int_eq(db_find_partial(db, "http://h/p", "", &p), 0);
    ck_assert_uint_eq(p.id, 9);
    ck_assert_uint_eq(p.durable, 50);
    db_partial_free(&p);

    ck_assert_int_eq(db_forget_partial(db, 9), 0);
    ck_assert_int_eq(db_find_partial(db, "http://h/p", "", &p), -ENOENT);
}
END_TEST

/* A segmented download's partial keeps its finished ranges past the
 * prefix (schema v4); what its file must hold is read from them. */
START_TEST(db_partial_ranges)
{
    db_partial_t p, in = {.etag = "\"v\"", .total = 100, .durable = 10, .ranges = "20-30,40-50"};
    ck_assert_int_eq(db_save_partial(db, 3, "http://h/r", "", &in), 0);
    ck_assert_int_eq(db_find_partial(db, "http://h/r", "", &p), 0);
    ck_assert_str_eq(p.ranges, "20-30,40-50");
    db_partial_free(&p);
    in.ranges = NULL; /* a later checkpoint with none: none */
    ck_assert_int_eq(db_save_partial(db, 3, "http://h/r", "", &in), 0);
    ck_assert_int_eq(db_find_partial(db, "http://h/r", "", &p), 0);
    ck_assert_ptr_null(p.ranges);
    db_partial_free(&p);

    ck_assert_int_eq(db_partial_keep(10, NULL), 10);
    ck_assert_int_eq(db_partial_keep(10, ""), 10);
    ck_assert_int_eq(db_partial_keep(10, "20-30,40-50"), 50);
    ck_assert_int_eq(db_partial_keep(0, "0-5"), 5);
    static const char *const bad[] = {"5-30", "20-30,25-50", "30-20", "20-20",       "a-b",
                                      "20-",  "20-30,",      "-5",    "20-30;40-50", "20-30,40"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(db_partial_keep(10, bad[i]) == -1, "%s", bad[i]);
}
END_TEST

/* The start-up check reads a partial by id, with its URL and tag. */
START_TEST(db_partial_get_by_id)
{
    db_partial_t p;
    char *url = NULL, *tag = NULL;

    ck_assert_int_eq(db_get_partial(db, 5, &url, &tag, &p), -ENOENT);
    db_partial_t in = {
        .last_modified = "Tue, 01 Dec 2026 10:00:00 GMT", .total = -1, .durable = 64};
    ck_assert_int_eq(db_save_partial(db, 5, "http://h/g", "0123abcd", &in), 0);
    ck_assert_int_eq(db_get_partial(db, 5, &url, &tag, &p), 0);
    ck_assert_str_eq(url, "http://h/g");
    ck_assert_str_eq(tag, "0123abcd");
    ck_assert_uint_eq(p.id, 5);
    ck_assert_ptr_null(p.etag);
    ck_assert_str_eq(p.last_modified, "Tue, 01 Dec 2026 10:00:00 GMT");
    ck_assert_int_eq(p.total, -1);
    ck_assert_uint_eq(p.durable, 64);
    db_partial_free(&p);
    free(url);
    free(tag);
}
END_TEST

START_TEST(db_commit_removes_its_partial)
{
    char a[65];
    db_partial_t p;

    make_sha(a, 0x5);
    save_partial(3, "http://h/c", "\"x\"", 10);
    save_partial(4, "http://h/other", "\"y\"", 10);
    db_record_t r = {
        .url = "http://h/c", .cred_tag = "", .sha256 = a, .size = 1000, .partial_id = 3};
    ck_assert_int_eq(db_record_download(db, &r), 0);
    ck_assert_int_eq(db_find_partial(db, "http://h/c", "", &p), -ENOENT);
    ck_assert_int_eq(db_find_partial(db, "http://h/other", "", &p), 0);
    db_partial_free(&p);
}
END_TEST

static Suite *db_partial_suite(void)
{
    Suite *s = suite_create("db_partial");
    TCase *tc = tcase_create("db_partial");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, db_partial_save_find_forget);
    tcase_add_test(tc, db_partial_ranges);
    tcase_add_test(tc, db_partial_get_by_id);
    tcase_add_test(tc, db_commit_removes_its_partial);
    /* Each commit fsyncs (synchronous=FULL). */
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return db_fixture_run(db_partial_suite());
}
