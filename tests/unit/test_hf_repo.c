/* Unit tests for hf_repo (HFREPO's pure parts): repo ids, the API URL,
 * and the Hub's JSON made into the listing. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
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

#define SHA40 "0123456789abcdef0123456789abcdef01234567"
#define BLOB1 "1111111111111111111111111111111111111111"
#define BLOB2 "2222222222222222222222222222222222222222"
#define SHA64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

/* json's listing, compared with want (its lines), or its error. */
static void listing_is(const char *json, const char *want)
{
    hf_listing_t l;
    int rc = hf_repo_listing(json, strlen(json), &l);
    ck_assert_msg(rc == 0, "%s: %s", json, l.error ? l.error : "?");
    char *text = strndup(l.lines ? l.lines : "", l.lines_len);
    ck_assert_str_eq(text, want);
    free(text);
    hf_listing_free(&l);
}

static void refused_with(const char *json, size_t n, const char *why)
{
    hf_listing_t l;
    ck_assert_int_eq(hf_repo_listing(json, n, &l), -EINVAL);
    ck_assert_ptr_nonnull(l.error);
    ck_assert_str_eq(l.error, why);
    ck_assert_ptr_null(l.lines);
}

#define NO_FILE "a file of the Hub's answer has no rfilename, blobId or size"
#define NO_SHA "the Hub's answer has no sha (40 hex digits) or no siblings"
#define NOT_JSON "the Hub's answer is not JSON"

START_TEST(hf_repo_listing_in_any_order)
{
    /* a sibling's keys in any order, lfs's too; "sha" and "id" after
     * "siblings": the lines are written, the commit checked at the end */
    const char *json = "{\"siblings\":["
                       "{\"size\":100,\"lfs\":{\"size\":100,\"sha256\":\"" SHA64 "\"},"
                       "\"blobId\":\"" BLOB2 "\",\"rfilename\":\"w.bin\"},"
                       "{\"blobId\":\"" BLOB1 "\",\"rfilename\":\"c.json\",\"size\":12}],"
                       "\"id\":\"org/new\",\"sha\":\"" SHA40 "\"}";
    hf_listing_t l;
    ck_assert_int_eq(hf_repo_listing(json, strlen(json), &l), 0);
    ck_assert_str_eq(l.commit, SHA40);
    ck_assert_str_eq(l.id, "org/new");
    ck_assert_uint_eq(l.files, 2);
    ck_assert_uint_eq(l.size, 112);
    hf_listing_free(&l);
    listing_is(json, "path=w.bin size=100 blob=" BLOB2 " sha256=" SHA64 "\n"
                     "path=c.json size=12 blob=" BLOB1 "\n");
    /* no "size": lfs's; a later key of the same name wins, as in a tree */
    listing_is("{\"sha\":\"x\",\"siblings\":[{\"rfilename\":\"a\",\"rfilename\":\"b\",\"blobId\":"
               "\"" BLOB1 "\",\"lfs\":{\"size\":7}}],\"sha\":\"" SHA40 "\"}",
               "path=b size=7 blob=" BLOB1 "\n");
    /* the sha missing at the end, after good siblings */
    refused_with(
        "{\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1 "\",\"size\":1}]}",
        strlen("{\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1 "\",\"size\":1}]}"),
        NO_SHA);
}
END_TEST

START_TEST(hf_repo_listing_skips_what_it_does_not_read)
{
    /* unknown keys, whatever they hold and however deep, even under the
     * names the listing reads */
    const char *json =
        "{\"cardData\":{\"sha\":\"nope\",\"siblings\":[{\"rfilename\":\"x\"}],\"deep\":[[[{}]]]},"
        "\"sha\":\"" SHA40 "\",\"tags\":[\"a\",1,null,true,{\"id\":\"evil/x\"}],"
        "\"siblings\":[{\"rfilename\":\"a\",\"extra\":{\"rfilename\":\"b\",\"size\":-1,"
        "\"lfs\":{\"sha256\":\"bad\"}},\"blobId\":\"" BLOB1 "\",\"size\":3,"
        "\"lfs\":{\"pointerSize\":134,\"nested\":{\"size\":[1]},\"size\":3}}],"
        "\"spaces\":[],\"id\":{\"not\":\"a string\"}}";
    hf_listing_t l;
    ck_assert_int_eq(hf_repo_listing(json, strlen(json), &l), 0);
    ck_assert_str_eq(l.id, ""); /* not a string: no new name */
    hf_listing_free(&l);
    listing_is(json, "path=a size=3 blob=" BLOB1 "\n");
    /* "lfs" that is not an object: no sha256, no size of its own */
    listing_is("{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1
               "\",\"size\":1,\"lfs\":[{\"sha256\":\"bad\"}]}]}",
               "path=a size=1 blob=" BLOB1 "\n");
    /* a root that is an array is JSON without a sha; a scalar is not
     * what the Hub answers (the tree parser took neither) */
    refused_with("[1,2]", 5, NO_SHA);
    refused_with("\"x\"", 3, NOT_JSON);
    refused_with("{\"sha\":\"" SHA40 "\",\"siblings\":[]} x",
                 strlen("{\"sha\":\"" SHA40 "\",\"siblings\":[]} x"), NOT_JSON);
}
END_TEST

START_TEST(hf_repo_listing_sizes_are_integers)
{
    static const char *const bad[] = {"-1", "1.0", "1e3", "9223372036854775808", "\"5\"", "null"};
    char json[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int n = snprintf(json, sizeof json,
                         "{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\","
                         "\"blobId\":\"" BLOB1 "\",\"size\":%s}]}",
                         bad[i]);
        refused_with(json, (size_t)n, NO_FILE);
    }
    /* "size" present but bad: lfs's size does not stand in for it */
    snprintf(json, sizeof json,
             "{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1
             "\",\"size\":null,\"lfs\":{\"size\":3}}]}");
    refused_with(json, strlen(json), NO_FILE);
    listing_is("{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1
               "\",\"size\":9223372036854775807},{\"rfilename\":\"b\",\"blobId\":\"" BLOB1
               "\",\"size\":-0}]}",
               "path=a size=9223372036854775807 blob=" BLOB1 "\npath=b size=0 blob=" BLOB1 "\n");
    /* strings the tree parser refused with the whole answer: a NUL in a
     * path, a sha256 that is not 64 hex digits, a path too long */
    snprintf(json, sizeof json,
             "{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\\u0000b\",\"blobId\":\"" BLOB1
             "\",\"size\":1}]}");
    refused_with(json, strlen(json), NO_FILE);
    snprintf(json, sizeof json,
             "{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1
             "\",\"size\":1,\"lfs\":{\"sha256\":\"ABC\"}}]}");
    refused_with(json, strlen(json), NO_FILE);
    size_t long_path = 20000;
    char *big = malloc(long_path + 256);
    int k = sprintf(big, "{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"");
    memset(big + k, 'p', long_path);
    sprintf(big + k + long_path, "\",\"blobId\":\"" BLOB1 "\",\"size\":1}]}");
    refused_with(big, strlen(big), "a file's path is too long for a protocol line");
    free(big);
}
END_TEST

START_TEST(hf_repo_listing_stops_at_the_first_bad_sibling)
{
    /* A lying Hub's siblings of `{}`: refused at the first one, before the
     * rest is read (what follows it is not even JSON here) */
    const char *head = "{\"sha\":\"" SHA40 "\",\"siblings\":[{},";
    size_t n = 16u << 20;
    char *json = malloc(n);
    size_t k = strlen(head);
    memcpy(json, head, k);
    memset(json + k, '!', n - k);
    refused_with(json, n, NO_FILE);
    /* 16 MiB of them, whole: refused the same */
    for (; k + 3 < n - 2; k += 3)
        memcpy(json + k, "{},", 3);
    memcpy(json + k, "{}", 2);
    memcpy(json + k + 2, "]}", 2);
    refused_with(json, k + 4, NO_FILE);
    free(json);
    /* a sibling that is not an object */
    refused_with("{\"sha\":\"" SHA40 "\",\"siblings\":[1]}",
                 strlen("{\"sha\":\"" SHA40 "\",\"siblings\":[1]}"), NO_FILE);
    /* two lists: the first's lines are written already */
    refused_with("{\"sha\":\"" SHA40 "\",\"siblings\":[],\"siblings\":[]}",
                 strlen("{\"sha\":\"" SHA40 "\",\"siblings\":[],\"siblings\":[]}"),
                 "the Hub's answer has two siblings lists");
}
END_TEST

START_TEST(hf_repo_listing_to_writes_as_it_reads)
{
    /* the lines go to the caller's file: nothing of them in out */
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    const char *json =
        "{\"sha\":\"" SHA40 "\",\"siblings\":[{\"rfilename\":\"a\",\"blobId\":\"" BLOB1
        "\",\"size\":1},{\"rfilename\":\"b\",\"blobId\":\"" BLOB2 "\",\"size\":2}]}";
    hf_listing_t l;
    ck_assert_int_eq(hf_repo_listing_to(json, strlen(json), f, &l), 0);
    ck_assert_ptr_null(l.lines);
    ck_assert_uint_eq(l.files, 2);
    ck_assert_uint_eq(l.bytes, 2 * strlen("path=a size=1 blob=" BLOB1 "\n"));
    char buf[256];
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = '\0';
    ck_assert_str_eq(buf, "path=a size=1 blob=" BLOB1 "\npath=b size=2 blob=" BLOB2 "\n");
    fclose(f);
    /* deeper than the tree parser read: not JSON, and no stack of 100 000 */
    size_t depth = 100000;
    char *deep = malloc(depth + 16);
    int k = sprintf(deep, "{\"x\":");
    memset(deep + k, '[', depth);
    refused_with(deep, k + depth, NOT_JSON);
    free(deep);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_repo");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, hf_repo_id_rules);
    tcase_add_test(tc, hf_repo_api_url_encodes_the_revision);
    tcase_add_test(tc, hf_repo_listing_lines);
    tcase_add_test(tc, hf_repo_listing_in_any_order);
    tcase_add_test(tc, hf_repo_listing_skips_what_it_does_not_read);
    tcase_add_test(tc, hf_repo_listing_sizes_are_integers);
    tcase_add_test(tc, hf_repo_listing_stops_at_the_first_bad_sibling);
    tcase_add_test(tc, hf_repo_listing_to_writes_as_it_reads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
