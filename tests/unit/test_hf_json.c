/* Unit tests for hf_json: the xet hints taken out of the Hub's JSON at any
 * depth, non-JSON passed as it is, and Link values pointed at the front. */
#include <check.h>
#include <stdio.h>
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

START_TEST(hf_json_strips_xet_at_any_depth)
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
    /* three of them, one inside the other's sibling */
    filtered_is("{\"xetHash\":1,\"b\":{\"xetHash\":2,\"xetEnabled\":3}}", "{\"b\":{}}");
    /* a dropped member's value goes whole, whatever it holds (xet keys,
     * keys after it at its depth, nesting deeper than what is written) */
    filtered_is("{\"a\":1,\"xetHash\":{\"x\":[1,{\"xetHash\":2}],\"y\":{}},\"b\":2}",
                "{\"a\":1,\"b\":2}");
    size_t deep = 300;
    char *in = malloc(2 * deep + 64);
    int k = sprintf(in, "{\"xetEnabled\":");
    memset(in + k, '[', deep);
    memset(in + k + deep, ']', deep);
    strcpy(in + k + 2 * deep, ",\"ok\":true}");
    filtered_is(in, "{\"ok\":true}");
    free(in);
    /* the key as the parser decodes it: escapes do not hide it */
    filtered_is("{\"xet\\u0048ash\":\"h\",\"xetHash \":1}", "{\"xetHash \":1}");
    /* first, last, only member: the commas yajl_gen writes stay right */
    filtered_is("{\"xetHash\":1,\"a\":2}", "{\"a\":2}");
    filtered_is("{\"a\":2,\"xetHash\":1}", "{\"a\":2}");
    filtered_is("[{\"xetEnabled\":null}]", "[{}]");
}
END_TEST

START_TEST(hf_json_numbers_and_strings_pass_verbatim)
{
    /* numbers as the Hub wrote them: no rounding through a double or an
     * int64 (the tree parser refused both as not JSON: they passed
     * unfiltered) */
    filtered_is("[1e400, 12345678901234567890, -0.0, 1E+2, 0.1000000000000000055511151231257827]",
                "[1e400,12345678901234567890,-0.0,1E+2,0.1000000000000000055511151231257827]");
    filtered_is("{\"size\":12345678901234567890,\"xetHash\":1e400}",
                "{\"size\":12345678901234567890}");
    /* strings: NUL and control characters escaped, "\/" as '/', \u escapes
     * as their UTF-8, UTF-8 as it is */
    static const char in[] = "[\"a\\u0000b\", \"\\/x\\n\\u001f\", \"\\u00e9\\ud83d\\ude00\", "
                             "\"\xc3\xa9\"]";
    static const char want[] = "[\"a\\u0000b\",\"/x\\n\\u001F\",\"\xc3\xa9\xf0\x9f\x98\x80\","
                               "\"\xc3\xa9\"]";
    char *out = NULL;
    size_t n = 0;
    ck_assert_int_eq(hf_json_filter(in, sizeof in - 1, &out, &n), 0);
    ck_assert_uint_eq(n, sizeof want - 1);
    ck_assert_msg(memcmp(out, want, n) == 0, "%.*s", (int)n, out);
    free(out);
    /* bytes that are not UTF-8 do not make an answer pass unfiltered */
    filtered_is("{\"p\":\"\xff\xfe\",\"xetHash\":\"h\"}", "{\"p\":\"\xff\xfe\"}");
    /* the output is never longer than the input (the budget's charge) */
    filtered_is("{\"a\" : [ 1 , 2 ] }", "{\"a\":[1,2]}");
    /* room left before the output, for an HTTP head */
    ck_assert_int_eq(hf_json_filter_at("[ 1 ]", 5, 100, &out, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(memcmp(out + 100, "[1]", 3), 0);
    free(out);
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
    ck_assert_int_eq(hf_json_filter("{\"a\":1} x", 9, &out, &n), 1);        /* garbage */
    ck_assert_int_eq(hf_json_filter("{\"xetHash\":NaN}", 15, &out, &n), 1); /* not JSON */
    ck_assert_int_eq(hf_json_filter("[\"a\x01\"]", 6, &out, &n), 1);        /* raw control */
    /* nested deeper than anything is written, and not JSON: refused, not
     * a stack overflow */
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    ck_assert_int_eq(hf_json_filter(deep, depth, &out, &n), 1);
    ck_assert_ptr_null(out);
    free(deep);
}
END_TEST

/* depth arrays around an object with a xet hint: depth + 1 levels. */
static char *nested(size_t depth, const char *inner)
{
    size_t k = strlen(inner);
    char *s = malloc(2 * depth + k + 1);
    memset(s, '[', depth);
    memcpy(s + depth, inner, k);
    memset(s + depth + k, ']', depth);
    s[2 * depth + k] = '\0';
    return s;
}

START_TEST(hf_json_too_deep_to_filter_is_not_passed)
{
    /* JSON nested deeper than yajl_gen writes cannot be filtered, and must
     * not pass as it is: its xet hints would (the tree parser took JSON
     * nested deeper than 2048 for "not JSON", and let it pass) */
    char *out = NULL;
    size_t n = 0;
    char *in = nested(5000, "{\"xetHash\":1}");
    ck_assert_int_eq(hf_json_filter(in, strlen(in), &out, &n), HF_JSON_TOO_DEEP);
    ck_assert_ptr_null(out);
    free(in);
    in = nested(HF_JSON_MAX_DEPTH, "{\"xetHash\":1}"); /* the object is one level too deep */
    ck_assert_int_eq(hf_json_filter(in, strlen(in), &out, &n), HF_JSON_TOO_DEEP);
    ck_assert_ptr_null(out);
    free(in);
    /* as deep as yajl_gen writes: filtered */
    in = nested(HF_JSON_MAX_DEPTH - 1, "{\"xetHash\":1}");
    char *want = nested(HF_JSON_MAX_DEPTH - 1, "{}");
    filtered_is(in, want);
    free(in);
    free(want);
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
    tcase_add_test(tc, hf_json_strips_xet_at_any_depth);
    tcase_add_test(tc, hf_json_numbers_and_strings_pass_verbatim);
    tcase_add_test(tc, hf_json_not_json_passes);
    tcase_add_test(tc, hf_json_too_deep_to_filter_is_not_passed);
    tcase_add_test(tc, hf_link_points_at_the_front);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
