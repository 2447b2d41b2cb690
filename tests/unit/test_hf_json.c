/* Unit tests for hf_json: the xet hints taken out of the Hub's JSON at any
 * depth, non-JSON passed as it is, and Link values pointed at the front. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hf_json.h"

#define UP "http://127.0.0.1:9000"
#define FRONT "http://127.0.0.1:8399/hf"

/* in, filtered, compared with want (compact JSON) */
static void filtered_is(const char *in, const char *want)
{
    char *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(hf_json_filter(in, strlen(in), &out, &n), 0);
    ck_assert_uint_eq(n, strlen(want));
    ck_assert_msg(memcmp(out, want, n) == 0, "%.*s", (int)n, out);
    free(out);
}

START_TEST(hf_strip_xet_at_any_depth)
{
    filtered_is("{\"id\": \"org/x\", \"xetEnabled\": true, \"sha\": \"1\"}",
                "{\"id\":\"org/x\",\"sha\":\"1\"}");
    /* objects in arrays in objects, in arrays */
    filtered_is("[{\"path\":\"a\",\"xetHash\":\"h\",\"lfs\":{\"oid\":\"o\",\"xetHash\":\"h\"}},"
                "{\"n\":[[{\"xetEnabled\":false,\"k\":1}]]}]",
                "[{\"path\":\"a\",\"lfs\":{\"oid\":\"o\"}},{\"n\":[[{\"k\":1}]]}]");
    /* only keys: a value "xetHash" stays */
    filtered_is("{\"name\":\"xetHash\",\"a\":[\"xetEnabled\"]}",
                "{\"name\":\"xetHash\",\"a\":[\"xetEnabled\"]}");
    filtered_is("[]", "[]");
    filtered_is("\"s\"", "\"s\""); /* any value */
    json_error_t err;
    json_t *v = json_loads("{\"xetHash\":1,\"b\":{\"xetHash\":2,\"xetEnabled\":3}}", 0, &err);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(hf_strip_xet(v), 3);
    ck_assert_uint_eq(json_object_size(v), 1);
    json_decref(v);
}
END_TEST

START_TEST(hf_json_not_json_passes)
{
    char *out = NULL;
    size_t n = 0;
    static const char page[] = "<html>Bad gateway</html>";
    ck_assert_int_eq(hf_json_filter(page, sizeof page - 1, &out, &n), 1);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(hf_json_filter("", 0, &out, &n), 1);
    ck_assert_int_eq(hf_json_filter("{\"a\":", 5, &out, &n), 1);
    /* nested deeper than jansson's limit: refused, not a stack overflow */
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    ck_assert_int_eq(hf_json_filter(deep, depth, &out, &n), 1);
    free(deep);
}
END_TEST

static void link_is(const char *in, const char *want)
{
    char *out = NULL;
    ck_assert_int_eq(hf_link_rewrite(in, UP, FRONT, &out), 0);
    if (!want)
        ck_assert_ptr_null(out);
    else
        ck_assert_str_eq(out ? out : "(null)", want);
    free(out);
}

START_TEST(hf_link_points_at_the_front)
{
    link_is("<" UP "/api/models/org/m/tree/main?recursive=true&cursor=Mg%3D%3D>; rel=\"next\"",
            "<" FRONT "/api/models/org/m/tree/main?recursive=true&cursor=Mg%3D%3D>; rel=\"next\"");
    link_is("</api/datasets/d/tree/main?cursor=x>; rel=\"next\"",
            "<" FRONT "/api/datasets/d/tree/main?cursor=x>; rel=\"next\"");
    /* xet relations and other hosts are dropped */
    link_is("<" UP "/api/models/o/x/xet-read-token/1>; rel=\"xet-auth\", "
            "<http://cas.example/v1/r/1>; rel=\"xet-reconstruction-info\"",
            NULL);
    link_is("<http://elsewhere.example/api/models/a/tree/main>; rel=\"next\", <" UP
            "/api/models/a/tree/main?cursor=1>; rel=\"next\"",
            "<" FRONT "/api/models/a/tree/main?cursor=1>; rel=\"next\"");
    link_is("garbage", NULL);
    link_is("<" UP "/a,b>; rel=\"next\"; title=\"x, y\"",
            "<" FRONT "/a,b>; rel=\"next\"; title=\"x, y\"");
    char *out = NULL;
    ck_assert_int_eq(hf_url_rewrite("/api/models/new/m", 17, UP, FRONT, &out), 0);
    ck_assert_str_eq(out, FRONT "/api/models/new/m");
    free(out);
    ck_assert_int_eq(hf_url_rewrite("http://127.0.0.1:9001/x", 23, UP, FRONT, &out), 0);
    ck_assert_ptr_null(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_json");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, hf_strip_xet_at_any_depth);
    tcase_add_test(tc, hf_json_not_json_passes);
    tcase_add_test(tc, hf_link_points_at_the_front);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
