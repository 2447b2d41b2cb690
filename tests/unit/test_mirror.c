/* Unit tests for mirror: the rule syntax, longest-prefix matching and the
 * rewrite (the cache key itself never changes: that is fetch's part). */
#include "mirror.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

START_TEST(mirror_rule_parses_words)
{
    mirror_rule_t r;
    const char *why = NULL;
    ck_assert_int_eq(
        mirror_rule_parse("  HTTPS://LocalHost:443/  http://127.0.0.1:8080/hf/\t", &r, &why), 0);
    ck_assert_str_eq(r.prefix, "https://localhost/"); /* canonical: matches cache keys */
    ck_assert_str_eq(r.replacement, "http://127.0.0.1:8080/hf/");
    ck_assert_int_eq(r.credentials, 0);
    char buf[200];
    mirror_rule_format(&r, buf, sizeof buf);
    ck_assert_str_eq(buf, "https://localhost/ http://127.0.0.1:8080/hf/");
    mirror_rule_free(&r);

    ck_assert_int_eq(
        mirror_rule_parse("http://127.0.0.2/x http://127.0.0.1/ credentials", &r, &why), 0);
    ck_assert_int_eq(r.credentials, 1);
    mirror_rule_format(&r, buf, sizeof buf);
    ck_assert_str_eq(buf, "http://127.0.0.2/x http://127.0.0.1/ credentials");
    mirror_rule_free(&r);
}
END_TEST

START_TEST(mirror_rule_refuses_bad_rules)
{
    static const char *const bad[] = {
        "",
        "https://127.0.0.2/",                                    /* no replacement */
        "https://127.0.0.2/ http://127.0.0.1/ creds",            /* unknown flag */
        "https://127.0.0.2/ http://127.0.0.1/ credentials more", /* too many words */
        "ftp://a.test/ http://127.0.0.1/",                       /* not http(s) */
        "https://127.0.0.2/ /relative/",                         /* not absolute */
        "127.0.0.2 http://127.0.0.1/",
        "https://127.0.0.2/ http://127.0.0.1/ CREDENTIALS",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mirror_rule_t r;
        const char *why = NULL;
        ck_assert_msg(mirror_rule_parse(bad[i], &r, &why) == -EINVAL, "'%s'", bad[i]);
        ck_assert_ptr_nonnull(why);
        ck_assert_ptr_null(r.prefix);
        ck_assert_ptr_null(r.replacement);
    }
}
END_TEST

static mirror_rule_t rule(const char *text)
{
    mirror_rule_t r;
    const char *why;
    ck_assert_int_eq(mirror_rule_parse(text, &r, &why), 0);
    return r;
}

START_TEST(mirror_longest_prefix_wins)
{
    mirror_rule_t rules[] = {
        rule("https://127.0.0.1/ http://127.0.0.1:1/all/"),
        rule("https://127.0.0.1/org/big/ http://127.0.0.1:2/big/"),
        rule("https://127.0.0.1/org/ http://127.0.0.1:3/org/"),
        rule("https://127.0.0.1/org/ http://127.0.0.1:4/second/"), /* an equal: the first wins */
    };
    size_t n = sizeof rules / sizeof rules[0];
    ck_assert_ptr_eq(mirror_match(rules, n, "https://127.0.0.1/x"), &rules[0]);
    ck_assert_ptr_eq(mirror_match(rules, n, "https://127.0.0.1/org/big/f.bin"), &rules[1]);
    ck_assert_ptr_eq(mirror_match(rules, n, "https://127.0.0.1/org/small"), &rules[2]);
    ck_assert_ptr_null(mirror_match(rules, n, "http://127.0.0.1/x"));  /* other scheme */
    ck_assert_ptr_null(mirror_match(rules, n, "https://127.0.0.10/")); /* the prefix ends in "/" */
    ck_assert_ptr_null(mirror_match(rules, 0, "https://127.0.0.1/x"));

    char *out;
    ck_assert_int_eq(mirror_rewrite(&rules[1], "https://127.0.0.1/org/big/f.bin?rev=1", &out), 0);
    ck_assert_str_eq(out, "http://127.0.0.1:2/big/f.bin?rev=1"); /* the rest, query and all */
    free(out);
    ck_assert_int_eq(mirror_rewrite(&rules[0], "https://127.0.0.1/", &out), 0);
    ck_assert_str_eq(out, "http://127.0.0.1:1/all/");
    free(out);
    for (size_t i = 0; i < n; i++)
        mirror_rule_free(&rules[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mirror");
    TCase *tc = tcase_create("mirror");
    tcase_add_test(tc, mirror_rule_parses_words);
    tcase_add_test(tc, mirror_rule_refuses_bad_rules);
    tcase_add_test(tc, mirror_longest_prefix_wins);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
