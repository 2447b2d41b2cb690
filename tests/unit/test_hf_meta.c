/* Unit tests for hf_meta: a resolve path and URL read into their parts,
 * the memory's keys, the Hub's ETag and Content-Range, and the memory
 * itself: each answer is its uid's and tag's, and shared fairly. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_meta.h"

#include <uv.h>

START_TEST(hf_meta_where_parse_forms)
{
    hf_where_t w;
    ck_assert_int_eq(hf_where_parse("org/name/resolve/main/dir/f.bin?x=1", &w), 0);
    ck_assert_str_eq(w.prefix, "");
    ck_assert_str_eq(w.repo, "org/name");
    ck_assert_str_eq(w.rev, "main");
    ck_assert_str_eq(w.path, "dir/f.bin");
    char key[512], file_key[1024];
    hf_where_keys(&w, key, file_key);
    ck_assert_str_eq(key, "org/name@main");
    ck_assert_str_eq(file_key, "org/name@main/dir/f.bin");
    hf_where_free(&w);
    ck_assert_int_eq(hf_where_parse("datasets/org/d/resolve/refs%2Fpr%2F1/a.csv", &w), 0);
    ck_assert_str_eq(w.prefix, "datasets/");
    ck_assert_str_eq(w.rev, "refs%2Fpr%2F1");
    hf_where_free(&w);
    ck_assert_int_eq(hf_where_parse("models/gpt2/resolve/v1/config.json", &w), 0);
    ck_assert_str_eq(w.prefix, "");
    ck_assert_str_eq(w.repo, "gpt2");
    hf_where_free(&w);
    static const char *const bad[] = {"org/name/resolve/main", "org/name/resolve/main/",
                                      "/resolve/main/f",       "org/name/raw/main/f",
                                      "org/name/resolve//f",   ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(hf_where_parse(bad[i], &w) != 0, "%s", bad[i]);
}
END_TEST

START_TEST(hf_meta_where_of_url_only_under_the_upstream)
{
    hf_where_t w;
    ck_assert_int_eq(
        hf_where_of_url("http://127.0.0.1:8080", "http://127.0.0.1:8080/org/n/resolve/c/f", &w), 1);
    ck_assert_str_eq(w.repo, "org/n");
    hf_where_free(&w);
    ck_assert_int_eq(hf_where_of_url("https://127.0.0.1:9/mirror",
                                     "https://127.0.0.1:9/mirror/o/n/resolve/r/f", &w),
                     1);
    ck_assert_str_eq(w.repo, "o/n");
    hf_where_free(&w);
    /* another origin, another path, not a resolve URL */
    ck_assert_int_eq(
        hf_where_of_url("http://127.0.0.1:8080", "http://127.0.0.1:8081/org/n/resolve/c/f", &w), 0);
    ck_assert_int_eq(hf_where_of_url("https://127.0.0.1:9/mirror",
                                     "https://127.0.0.1:9/mirrorx/o/n/resolve/r/f", &w),
                     0);
    ck_assert_int_eq(hf_where_of_url("http://127.0.0.1:8080", "http://127.0.0.1:8080/api/x", &w),
                     0);
    ck_assert_int_eq(hf_where_of_url(NULL, "http://127.0.0.1:8080/o/n/resolve/r/f", &w), 0);
}
END_TEST

START_TEST(hf_meta_etag_and_range)
{
    char out[65];
    const char *hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF";
    char quoted[80];
    snprintf(quoted, sizeof quoted, "W/\"%s\"", hex);
    ck_assert_int_eq(hf_sha256_of_etag(quoted, out), 0);
    ck_assert_str_eq(out, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(hf_sha256_of_etag("\"abc\"", out), -1);
    ck_assert_int_eq(hf_sha256_of_etag(NULL, out), -1);
    ck_assert_int_eq(hf_range_total("bytes 0-0/1234"), 1234);
    ck_assert_int_eq(hf_range_total("bytes 0-0/*"), -1);
    ck_assert_int_eq(hf_range_total("bytes 0-0/12x"), -1);
    ck_assert_int_eq(hf_range_total(NULL), -1);
}
END_TEST

/* Dot segments, in any spelling, are no resolve path: the Hub would read
 * another repo or revision than the parts say. */
START_TEST(hf_meta_where_refuses_dot_segments)
{
    hf_where_t w;
    const char *bad[] = {
        "org/model/resolve/main/x/../../"
        "2222222222222222222222222222222222222222"
        "/c.json",
        "org/model/resolve/main/x/%2e%2e/%2E%2e/v1/c.json", "org/model/resolve/main/./c.json",
        "org/../other/model/resolve/main/c.json", "org/model/resolve/main/c.json/.."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(hf_where_parse(bad[i], &w) == -1, "%s", bad[i]);
    ck_assert_int_eq(hf_where_parse("org/model/resolve/main/dir/.hidden/c..json", &w), 0);
    hf_where_free(&w);
}
END_TEST

static const char *commit_of(int i)
{
    static char c[41];
    snprintf(c, sizeof c, "%040d", i);
    return c;
}

/* An answer is read back only by the uid and tag it was remembered for. */
START_TEST(hf_meta_memory_is_per_uid_and_tag)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    hf_meta_t *m;
    ck_assert_int_eq(hf_meta_new(&loop, &m), 0);
    hf_meta_rev_remember(m, 1000, "", "org/model@main", commit_of(1));
    ck_assert_str_eq(hf_meta_rev_lookup(m, 1000, "", "org/model@main"), commit_of(1));
    ck_assert_ptr_null(hf_meta_rev_lookup(m, 1001, "", "org/model@main"));
    ck_assert_ptr_null(hf_meta_rev_lookup(m, 1000, "tag", "org/model@main"));
    ck_assert_ptr_null(hf_meta_rev_lookup(m, 1000, "", "org/model@v1"));
    /* Another uid's answer for the same key is its own entry. */
    hf_meta_rev_remember(m, 1001, "", "org/model@main", commit_of(2));
    ck_assert_str_eq(hf_meta_rev_lookup(m, 1000, "", "org/model@main"), commit_of(1));
    ck_assert_str_eq(hf_meta_rev_lookup(m, 1001, "", "org/model@main"), commit_of(2));
    /* Not a commit: not remembered. */
    hf_meta_rev_remember(m, 1002, "", "org/model@main", "main");
    ck_assert_ptr_null(hf_meta_rev_lookup(m, 1002, "", "org/model@main"));
    hf_meta_free(m);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/* One uid's burst replaces its own oldest answers, never another's; many
 * uids at once (a user's subordinate uids) take a slot only from a uid
 * that holds two more than they do, so a quiet user keeps its answer. */
START_TEST(hf_meta_memory_is_shared_fairly)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    hf_meta_t *m;
    ck_assert_int_eq(hf_meta_new(&loop, &m), 0);
    char key[64];
    hf_meta_rev_remember(m, 1000, "", "victim@main", commit_of(1));
    for (int i = 0; i < 1000; i++) { /* one uid, many keys */
        snprintf(key, sizeof key, "org/r%d@main", i);
        hf_meta_rev_remember(m, 2000, "", key, commit_of(2));
    }
    ck_assert_str_eq(hf_meta_rev_lookup(m, 1000, "", "victim@main"), commit_of(1));
    ck_assert_str_eq(hf_meta_rev_lookup(m, 2000, "", "org/r999@main"), commit_of(2));
    ck_assert_ptr_null(hf_meta_rev_lookup(m, 2000, "", "org/r0@main")); /* its own oldest went */
    for (int u = 0; u < 1000; u++) { /* many uids, a key each: the table fills */
        snprintf(key, sizeof key, "org/s%d@main", u);
        hf_meta_rev_remember(m, (uid_t)(100000 + u), "", key, commit_of(3));
    }
    ck_assert_str_eq(hf_meta_rev_lookup(m, 1000, "", "victim@main"), commit_of(1));
    /* The one that held most gave up slots to them, down to its share. */
    int kept = 0;
    for (int i = 984; i < 1000; i++) {
        snprintf(key, sizeof key, "org/r%d@main", i);
        kept += hf_meta_rev_lookup(m, 2000, "", key) != NULL;
    }
    ck_assert_int_le(kept, 2);
    hf_meta_free(m);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_meta");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, hf_meta_where_parse_forms);
    tcase_add_test(tc, hf_meta_where_of_url_only_under_the_upstream);
    tcase_add_test(tc, hf_meta_etag_and_range);
    tcase_add_test(tc, hf_meta_where_refuses_dot_segments);
    tcase_add_test(tc, hf_meta_memory_is_per_uid_and_tag);
    tcase_add_test(tc, hf_meta_memory_is_shared_fairly);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
