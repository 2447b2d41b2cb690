/* Unit tests for common/textnum.c: the sizes, durations and hex digits that
 * the config file, hubctl's options and the wire protocol share. */
#include "textnum.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>

START_TEST(textnum_size_units)
{
    uint64_t v = 0;
    ck_assert_int_eq(parse_size("0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(parse_size("7k", &v), 0);
    ck_assert_uint_eq(v, 7 << 10);
    ck_assert_int_eq(parse_size("3MiB", &v), 0);
    ck_assert_uint_eq(v, 3 << 20);
    ck_assert_int_eq(parse_size("2Gi", &v), 0);
    ck_assert_uint_eq(v, 2ULL << 30);
    ck_assert_int_eq(parse_size("1tb", &v), 0);
    ck_assert_uint_eq(v, 1ULL << 40);
    ck_assert_int_eq(parse_size("16777215T", &v), 0);
    ck_assert_int_eq(parse_size("16777216T", &v), -ERANGE);
}
END_TEST

/* Each of these once parsed, or could: a trailing space folded to NUL and
 * matched the end of the unit string as a fifth unit (1 << 50). */
START_TEST(textnum_size_rejects)
{
    static const char *const bad[] = {"",     " 1", "+1",    "-1", "1 ",
                                      "1B",   "1X", "1KiBB", "K",  "99999999999999999999",
                                      "1.5M", "1K "};
    uint64_t v = 42;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(parse_size(bad[i], &v) < 0, "\"%s\" parsed", bad[i]);
    ck_assert_uint_eq(v, 42); /* untouched on failure */
    ck_assert_int_eq(parse_size(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(textnum_duration_units)
{
    unsigned v = 0;
    ck_assert_int_eq(parse_duration_ms("5", &v), 0);
    ck_assert_uint_eq(v, 5000);
    ck_assert_int_eq(parse_duration_ms("250ms", &v), 0);
    ck_assert_uint_eq(v, 250);
    ck_assert_int_eq(parse_duration_ms("2m", &v), 0);
    ck_assert_uint_eq(v, 120000);
    ck_assert_int_eq(parse_duration_ms("1d", &v), 0);
    ck_assert_uint_eq(v, 86400000);
    ck_assert_int_eq(parse_duration_ms("50d", &v), -ERANGE);
    ck_assert_int_eq(parse_duration_ms("5 s", &v), -EINVAL);
    ck_assert_int_eq(parse_duration_ms("5w", &v), -EINVAL);
    ck_assert_int_eq(parse_duration_ms("-5", &v), -EINVAL);
}
END_TEST

START_TEST(textnum_u64_strict)
{
    uint64_t v = 0;
    ck_assert_int_eq(parse_u64("18446744073709551615", &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_int_eq(parse_u64("18446744073709551616", &v), -EINVAL);
    ck_assert_int_eq(parse_u64(" 1", &v), -EINVAL);
    ck_assert_int_eq(parse_u64("1k", &v), -EINVAL);
    ck_assert_int_eq(parse_u64(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(textnum_hex)
{
    ck_assert_int_eq(hex_value('0'), 0);
    ck_assert_int_eq(hex_value('f'), 15);
    ck_assert_int_eq(hex_value('F'), 15);
    ck_assert_int_eq(hex_value('g'), -1);
    ck_assert_int_eq(hex_value(0xe9), -1); /* no locale widens it */
    ck_assert_int_eq(hex_is("00ff", 4, 1), 1);
    ck_assert_int_eq(hex_is("00FF", 4, 1), 0);
    ck_assert_int_eq(hex_is("00FF", 4, 0), 1);
    ck_assert_int_eq(hex_is("00f", 4, 0), 0);   /* short: stops at the NUL */
    ck_assert_int_eq(hex_is("00fff", 4, 0), 0); /* long */
}
END_TEST

static Suite *textnum_suite(void)
{
    Suite *s = suite_create("textnum");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, textnum_size_units);
    tcase_add_test(tc, textnum_size_rejects);
    tcase_add_test(tc, textnum_duration_units);
    tcase_add_test(tc, textnum_u64_strict);
    tcase_add_test(tc, textnum_hex);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(textnum_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
