/* Unit tests for hf_meta's pure parts: a resolve path and URL read into
 * their parts, the memory's keys, and the Hub's ETag and Content-Range. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_meta.h"

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

int main(void)
{
    Suite *s = suite_create("hf_meta");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, hf_meta_where_parse_forms);
    tcase_add_test(tc, hf_meta_where_of_url_only_under_the_upstream);
    tcase_add_test(tc, hf_meta_etag_and_range);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
