/* Unit tests for daemon/cache/db_revs.c (the commit the Hub last named for
 * a revision, by credential tag and asker) and common/outage.c (which
 * error codes are the Hub's outages, when the front answers from them).
 * The fixture is db_fixture.h's. */
#include "db_fixture.h"
#include "outage.h"

#include <check.h>
#include <errno.h>

static const char c1[] = "1111111111111111111111111111111111111111";
static const char c2[] = "2222222222222222222222222222222222222222";

START_TEST(rev_by_tag_else_public)
{
    char got[41];
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "", got), -ENOENT);
    ck_assert_int_eq(db_rev_note(db, "org/m", "main", "", c1, 1000, 8), 0);
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "", got), 0);
    ck_assert_str_eq(got, c1);
    /* A token's own answer first, else what no token was told. */
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "tagA", got), 0);
    ck_assert_str_eq(got, c1);
    ck_assert_int_eq(db_rev_note(db, "org/m", "main", "tagA", c2, 1000, 8), 0);
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "tagA", got), 0);
    ck_assert_str_eq(got, c2);
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "", got), 0);
    ck_assert_str_eq(got, c1);
    /* another repo, another revision, another prefix: nothing */
    ck_assert_int_eq(db_rev_find(db, "org/n", "main", "", got), -ENOENT);
    ck_assert_int_eq(db_rev_find(db, "org/m", "v1", "", got), -ENOENT);
    ck_assert_int_eq(db_rev_find(db, "datasets/org/m", "main", "", got), -ENOENT);
    /* a newer answer replaces the older */
    ck_assert_int_eq(db_rev_note(db, "org/m", "main", "", c2, 1001, 8), 0);
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "", got), 0);
    ck_assert_str_eq(got, c2);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM hf_revs"), 2);
}
END_TEST

/* Each uid keeps its per_uid newest notes: one asking many revisions
 * pushes out its own, never another uid's. */
START_TEST(rev_share_per_uid)
{
    char rev[16], got[41];
    ck_assert_int_eq(db_rev_note(db, "org/m", "main", "", c1, 2000, 4), 0);
    for (int i = 0; i < 10; i++) {
        snprintf(rev, sizeof rev, "b%d", i);
        ck_assert_int_eq(db_rev_note(db, "org/m", rev, "", c2, 1000, 4), 0);
    }
    ck_assert_int_eq(raw_int("SELECT count(*) FROM hf_revs WHERE uid = 1000"), 4);
    ck_assert_int_eq(db_rev_find(db, "org/m", "main", "", got), 0);
    ck_assert_str_eq(got, c1);
    ck_assert_int_eq(db_rev_find(db, "org/m", "b9", "", got), 0);
    ck_assert_int_eq(db_rev_find(db, "org/m", "b0", "", got), -ENOENT);
}
END_TEST

START_TEST(outage_codes)
{
    const char *yes[] = {"dns",      "connect",  "timeout",  "tls",      "truncated",
                         "proxy",    "http_500", "http_502", "http_503", "http_504",
                         "http_599", "http_408", "http_429"};
    const char *no[] = {NULL,         "",          "http_401",  "http_403", "http_404",
                        "http_400",   "http_5",    "http_5000", "http_50x", "tls_verify",
                        "proxy_auth", "forbidden", "no_space",  "busy",     "redirect"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        ck_assert_msg(outage_code(yes[i]), "%s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        ck_assert_msg(!outage_code(no[i]), "%s", no[i] ? no[i] : "NULL");
    ck_assert(outage_status(503) && outage_status(429) && outage_status(408));
    ck_assert(!outage_status(404) && !outage_status(200) && !outage_status(600));
}
END_TEST

static Suite *db_revs_suite(void)
{
    Suite *s = suite_create("db_revs");
    TCase *tc = tcase_create("db_revs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, rev_by_tag_else_public);
    tcase_add_test(tc, rev_share_per_uid);
    tcase_add_test(tc, outage_codes);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return db_fixture_run(db_revs_suite());
}
