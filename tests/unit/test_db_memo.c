/* Unit tests for daemon/cache/db_memo.c: the loop's look-ups of a hit,
 * remembered until a commit changes a row they read. A repeated look-up is
 * answered from memory (db_memo_answers counts it), and every change that
 * could alter its answer is seen by the very next look-up: a URL moved to
 * other bytes, a revalidation, a blob's file re-recorded, an entry or a
 * blob forgotten, a gated blob's last entry for a tag removed. The hits'
 * own uses (accessed, seq) change nothing a look-up reads, and do not undo
 * the memo; nor does an update that writes the values already there. The fixture is db_fixture.h's.
 */
#include "db_fixture.h"

#include <check.h>
#include <errno.h>

/* Looks url up twice: the second answer comes from memory. */
static void remembered(const char *url, const char *cred, const char *sha, uint64_t size)
{
    find_entry_is(url, cred, sha, size);
    uint64_t before = db_memo_answers(db);
    find_entry_is(url, cred, sha, size);
    ck_assert_uint_eq(db_memo_answers(db), before + 1);
}

START_TEST(memo_answers_a_repeated_look_up_of_each_kind)
{
    char a[65];
    make_sha(a, 0xa1);
    record("http://h/a", "", a, 10, "\"e\"", NULL);
    remembered("http://h/a", "", a, 10);

    uint64_t size = 0, before = db_memo_answers(db);
    db_blob_stat_t st;
    ck_assert_int_eq(db_find_blob_stat(db, a, NULL, &size, &st), 0);
    ck_assert_int_eq(db_find_blob_stat(db, a, NULL, &size, &st), 0);
    ck_assert_int_eq(db_find_blob_stat(db, a, "", &size, &st), 0);
    ck_assert_int_eq(db_find_blob_stat(db, a, "", &size, &st), 0);
    ck_assert_uint_eq(size, 10);
    ck_assert_uint_eq(db_memo_answers(db), before + 2); /* one per kind: any, for a tag */

    /* The meta comes back whole from memory. */
    char sha[65];
    db_entry_meta_t meta;
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/a", "", sha, &size, &meta), 0);
    ck_assert_str_eq(meta.etag, "\"e\"");
    ck_assert_str_eq(meta.last_modified, "");

    /* Another tag is another question: a gated blob is not anyone's. */
    ck_assert_int_eq(db_find_entry(db, "http://h/a", "tag", sha, &size), -ENOENT);
}
END_TEST

START_TEST(memo_sees_a_url_moved_to_other_bytes)
{
    char a[65], b[65];
    make_sha(a, 0xa2);
    make_sha(b, 0xb2);
    record("http://h/m", "", a, 10, NULL, NULL);
    remembered("http://h/m", "", a, 10);
    record("http://h/m", "", b, 20, NULL, NULL);
    find_entry_is("http://h/m", "", b, 20);
}
END_TEST

START_TEST(memo_sees_a_revalidation)
{
    char a[65], sha[65];
    uint64_t size;
    db_entry_meta_t meta;
    make_sha(a, 0xa3);
    record("http://h/r", "", a, 10, NULL, NULL);
    remembered("http://h/r", "", a, 10);
    ck_assert_int_eq(db_entry_validated(db, "http://h/r", "", 4242424242), 0);
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/r", "", sha, &size, &meta), 0);
    ck_assert_int_eq(meta.validated, 4242424242);
}
END_TEST

START_TEST(memo_sees_a_file_recorded_again)
{
    char a[65], sha[65];
    uint64_t size;
    db_entry_meta_t meta;
    db_blob_stat_t st, rec = {.ino = 77, .mtime_ns = 88, .ctime_ns = 99};
    make_sha(a, 0xa4);
    record("http://h/f", "", a, 10, NULL, NULL);
    remembered("http://h/f", "", a, 10);
    ck_assert_int_eq(db_find_blob_stat(db, a, NULL, &size, &st), 0);
    ck_assert_int_eq(db_find_blob_stat(db, a, "", &size, &st), 0);
    ck_assert_int_eq(db_set_blob_stat(db, a, &rec), 0);
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/f", "", sha, &size, &meta), 0);
    ck_assert_uint_eq(meta.stat.ino, 77);
    ck_assert_int_eq(meta.stat.ctime_ns, 99);
    ck_assert_int_eq(db_find_blob_stat(db, a, NULL, &size, &st), 0);
    ck_assert_int_eq(st.mtime_ns, 88);
    ck_assert_int_eq(db_find_blob_stat(db, a, "", &size, &st), 0);
    ck_assert_uint_eq(st.ino, 77);
}
END_TEST

START_TEST(memo_sees_an_entry_and_a_blob_forgotten)
{
    char a[65], gone[65], sha[65];
    uint64_t size;
    int blob_gone = 1;
    make_sha(a, 0xa5);
    /* Gated: fetched with credentials, under two tags (the second keeps
     * the blob when the first's entry goes). */
    record("http://h/x", "tag", a, 10, NULL, NULL);
    record("http://h/y", "other", a, 10, NULL, NULL);
    remembered("http://h/x", "tag", a, 10);
    ck_assert_int_eq(db_find_blob_for(db, a, "tag", &size), 0);
    ck_assert_int_eq(db_find_blob_for(db, a, "tag", &size), 0);
    ck_assert_int_eq(db_find_blob(db, a, &size), 0);
    ck_assert_int_eq(db_find_blob(db, a, &size), 0);

    /* The entry removed, its blob kept: the tag no longer opens the blob
     * by its digest, and the URL is a miss. */
    ck_assert_int_eq(db_remove_entry(db, "http://h/x", "tag", NULL, gone, &blob_gone), 0);
    ck_assert_int_eq(blob_gone, 0);
    ck_assert_int_eq(db_find_entry(db, "http://h/x", "tag", sha, &size), -ENOENT);
    ck_assert_int_eq(db_find_blob_for(db, a, "tag", &size), -ENOENT);
    ck_assert_int_eq(db_find_blob_for(db, a, "other", &size), 0);
    ck_assert_int_eq(db_find_blob(db, a, &size), 0);

    /* The blob forgotten: nobody finds it by its digest. */
    ck_assert_int_eq(db_forget_blob(db, a, 0), 0);
    ck_assert_int_eq(db_find_blob(db, a, &size), -ENOENT);
    ck_assert_int_eq(db_find_blob_for(db, a, "other", &size), -ENOENT);
}
END_TEST

START_TEST(memo_survives_the_hits_own_uses)
{
    char a[65];
    make_sha(a, 0xa6);
    record("http://h/u", "", a, 10, NULL, NULL);
    remembered("http://h/u", "", a, 10);
    for (int i = 0; i < 5; i++)
        ck_assert_int_ge(db_touch_queue(db, a, "http://h/u", "", 1000 + (uid_t)i), 0);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_eq(db_touch(db, a, "http://h/u", "", 7), 0);
    uint64_t before = db_memo_answers(db);
    find_entry_is("http://h/u", "", a, 10);
    ck_assert_uint_eq(db_memo_answers(db), before + 1);
}
END_TEST

/* A verification records the identity it found: the same as before, it
 * leaves the memo alone (the verifier does this every few ms, and undid
 * every remembered answer each time); another, the next look-up sees it. */
START_TEST(memo_survives_an_update_to_the_same_values)
{
    char a[65], sha[65];
    uint64_t size;
    db_entry_meta_t meta;
    db_blob_stat_t st, other = {.ino = 123, .mtime_ns = 456, .ctime_ns = 789};
    make_sha(a, 0xa7);
    record("http://h/v", "", a, 10, NULL, NULL);
    ck_assert_int_eq(db_get_blob_stat(db, a, &st), 0);
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/v", "", sha, &size, &meta), 0);
    remembered("http://h/v", "", a, 10);
    ck_assert_int_eq(db_set_verified(db, a, 1000, &st), 0);
    ck_assert_int_eq(db_set_blob_stat(db, a, &st), 0);
    ck_assert_int_eq(db_entry_validated(db, "http://h/v", "", meta.validated), 0); /* as was */
    uint64_t before = db_memo_answers(db);
    find_entry_is("http://h/v", "", a, 10);
    ck_assert_uint_eq(db_memo_answers(db), before + 1);

    ck_assert_int_eq(db_set_verified(db, a, 2000, &other), 0);
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/v", "", sha, &size, &meta), 0);
    ck_assert_uint_eq(meta.stat.ino, 123);
    ck_assert_int_eq(meta.stat.mtime_ns, 456);
}
END_TEST

static Suite *memo_suite(void)
{
    Suite *s = suite_create("db_memo");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, memo_answers_a_repeated_look_up_of_each_kind);
    tcase_add_test(tc, memo_sees_a_url_moved_to_other_bytes);
    tcase_add_test(tc, memo_sees_a_revalidation);
    tcase_add_test(tc, memo_sees_a_file_recorded_again);
    tcase_add_test(tc, memo_sees_an_entry_and_a_blob_forgotten);
    tcase_add_test(tc, memo_survives_the_hits_own_uses);
    tcase_add_test(tc, memo_survives_an_update_to_the_same_values);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return db_fixture_run(memo_suite());
}
