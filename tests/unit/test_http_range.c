/* Unit tests for http_range: RFC 9110's examples and the edges clients
 * hit (bytes=0-0, suffixes longer than the file, empty files). */
#include <check.h>
#include <stdlib.h>

#include "http_range.h"

typedef struct {
    const char *value;
    uint64_t size;
    range_kind_t kind;
    uint64_t first, last;
} range_case_t;

static const range_case_t cases[] = {
    {NULL, 100, RANGE_NONE, 0, 0},
    {"bytes=0-0", 100, RANGE_ONE, 0, 0}, /* huggingface_hub's probe */
    {"bytes=0-499", 10000, RANGE_ONE, 0, 499},
    {"bytes=500-999", 10000, RANGE_ONE, 500, 999},
    {"bytes=-500", 10000, RANGE_ONE, 9500, 9999},
    {"bytes=9500-", 10000, RANGE_ONE, 9500, 9999},
    {"bytes=0-", 10000, RANGE_ONE, 0, 9999},
    {"bytes=9000-20000", 10000, RANGE_ONE, 9000, 9999}, /* the end clipped */
    {"bytes=-20000", 10000, RANGE_ONE, 0, 9999},        /* a suffix longer than the file */
    {"BYTES=5-6", 10, RANGE_ONE, 5, 6},                 /* the unit, case aside */
    {"bytes=10000-", 10000, RANGE_UNSATISFIABLE, 0, 0},
    {"bytes=20000-30000", 10000, RANGE_UNSATISFIABLE, 0, 0},
    {"bytes=-0", 10000, RANGE_UNSATISFIABLE, 0, 0},
    {"bytes=0-0", 0, RANGE_UNSATISFIABLE, 0, 0},
    {"bytes=-5", 0, RANGE_UNSATISFIABLE, 0, 0},
    {"bytes=5-4", 10, RANGE_NONE, 0, 0},     /* invalid: ignored */
    {"bytes=0-1,5-6", 10, RANGE_NONE, 0, 0}, /* several: the whole file */
    {"items=0-1", 10, RANGE_NONE, 0, 0},     /* another unit */
    {"bytes=-", 10, RANGE_NONE, 0, 0},
    {"bytes=a-b", 10, RANGE_NONE, 0, 0},
    {"bytes=99999999999999999999-", 10, RANGE_NONE, 0, 0}, /* no number we serve */
};

START_TEST(http_range_cases)
{
    const range_case_t *c = &cases[_i];
    uint64_t first = 0, last = 0;
    range_kind_t k = http_range_parse(c->value, c->size, &first, &last);
    ck_assert_msg(k == c->kind, "%s of %llu: kind %d, want %d", c->value ? c->value : "(none)",
                  (unsigned long long)c->size, k, c->kind);
    if (k == RANGE_ONE) {
        ck_assert_uint_eq(first, c->first);
        ck_assert_uint_eq(last, c->last);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_range");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, http_range_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
