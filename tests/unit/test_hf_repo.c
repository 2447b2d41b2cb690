/* Unit tests for hf_repo (HFREPO's pure parts): repo ids, the API URL,
 * and the Hub's JSON made into the listing. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hf_repo.h"

START_TEST(hf_repo_id_rules)
{
    static const char *const ok[] = {"gpt2", "org/name", "a-b_c.d/x.y-z", "A1/b2"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(hf_repo_id_ok(ok[i]), "%s", ok[i]);
    static const char *const bad[] = {"",     "/x",   "x/",  "a/b/c", "-a",    "a-",  ".a/b",
                                      "a--b", "a..b", "a b", "a/b?",  "a%2Fb", "a/.b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!hf_repo_id_ok(bad[i]), "%s", bad[i]);
    char longer[HF_REPO_ID_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    ck_assert(!hf_repo_id_ok(longer));
}
END_TEST

START_TEST(hf_repo_api_url_encodes_the_revision)
{
    char *u = hf_repo_api_url("http://127.0.0.1:1", "model", "org/n", "refs/pr/1");
    ck_assert_str_eq(u, "http://127.0.0.1:1/api/models/org/n/revision/refs%2Fpr%2F1?blobs=true");
    free(u);
    u = hf_repo_api_url("http://h", "dataset", "d", "v1.0 x~");
    ck_assert_str_eq(u, "http://h/api/datasets/d/revision/v1.0%20x~?blobs=true");
    free(u);
    ck_assert_str_eq(hf_repo_prefix("space"), "spaces/");
    ck_assert_ptr_null(hf_repo_prefix("other"));
}
END_TEST

START_TEST(hf_repo_listing_lines)
{
    const char *json =
        "{\"id\":\"org/new\",\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":["
        "{\"rfilename\":\"a b/c.json\",\"blobId\":\"1111111111111111111111111111111111111111\","
        "\"size\":12},"
        "{\"rfilename\":\"w.bin\",\"blobId\":\"2222222222222222222222222222222222222222\","
        "\"size\":100,\"lfs\":{\"sha256\":"
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"size\":100}}]}";
    hf_listing_t l;
    ck_assert_int_eq(hf_repo_listing(json, strlen(json), &l), 0);
    ck_assert_str_eq(l.commit, "0123456789abcdef0123456789abcdef01234567");
    ck_assert_str_eq(l.id, "org/new");
    ck_assert_uint_eq(l.files, 2);
    ck_assert_uint_eq(l.size, 112);
    char *text = strndup(l.lines, l.lines_len);
    ck_assert_str_eq(text,
                     "path=a%20b/c.json size=12 blob=1111111111111111111111111111111111111111\n"
                     "path=w.bin size=100 blob=2222222222222222222222222222222222222222 "
                     "sha256=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n");
    free(text);
    hf_listing_free(&l);
    static const char *const bad[] = {"not json", "{\"sha\":\"x\",\"siblings\":[]}",
                                      "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\"}",
                                      "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\","
                                      "\"siblings\":[{\"rfilename\":\"a\"}]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(hf_repo_listing(bad[i], strlen(bad[i]), &l), -EINVAL);
        ck_assert_ptr_nonnull(l.error);
        ck_assert_ptr_null(l.lines);
    }
    const char *empty = "{\"sha\":\"0123456789abcdef0123456789abcdef01234567\",\"siblings\":[]}";
    ck_assert_int_eq(hf_repo_listing(empty, strlen(empty), &l), 0);
    ck_assert_uint_eq(l.files, 0);
    hf_listing_free(&l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_repo");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, hf_repo_id_rules);
    tcase_add_test(tc, hf_repo_api_url_encodes_the_revision);
    tcase_add_test(tc, hf_repo_listing_lines);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
