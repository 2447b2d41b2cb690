/* Unit tests for daemon/base/workers.c: the pool's size from the setting,
 * the environment's UV_THREADPOOL_SIZE and the cores, and which wins. */
#include "workers.h"

#include <check.h>
#include <stdlib.h>

START_TEST(workers_automatic_is_the_cores_plus_two_within_4_to_128)
{
    ck_assert_uint_eq(workers_auto(1), 4);
    ck_assert_uint_eq(workers_auto(2), 4);
    ck_assert_uint_eq(workers_auto(3), 5);
    ck_assert_uint_eq(workers_auto(16), 18);
    ck_assert_uint_eq(workers_auto(126), 128);
    ck_assert_uint_eq(workers_auto(512), 128);
    ck_assert_uint_eq(workers_auto(0), 4); /* the cores unknown */
}
END_TEST

START_TEST(workers_the_setting_wins_then_the_environment_then_the_cores)
{
    workers_from_t from;
    int bad;
    ck_assert_uint_eq(workers_choose(3, "12", 8, &from, &bad), 3);
    ck_assert_int_eq(from, WORKERS_FROM_SETTING);
    ck_assert_int_eq(bad, 0);
    ck_assert_uint_eq(workers_choose(0, "12", 8, &from, &bad), 12);
    ck_assert_int_eq(from, WORKERS_FROM_ENV);
    ck_assert_uint_eq(workers_choose(0, NULL, 8, &from, &bad), 10);
    ck_assert_int_eq(from, WORKERS_FROM_CORES);
    ck_assert_uint_eq(workers_choose(1024, NULL, 8, &from, &bad), 1024);
    ck_assert_str_eq(workers_from_name(WORKERS_FROM_SETTING), "worker_threads");
    ck_assert_str_eq(workers_from_name(WORKERS_FROM_ENV), "UV_THREADPOOL_SIZE");
    ck_assert_str_eq(workers_from_name(WORKERS_FROM_CORES), "automatic");
}
END_TEST

START_TEST(workers_an_environment_that_is_no_count_is_passed_over)
{
    static const char *const bad_env[] = {"",  "0", "x", "8x", "-3", "1025", "99999999999999999999",
                                          " 4"};
    for (size_t i = 0; i < sizeof bad_env / sizeof bad_env[0]; i++) {
        workers_from_t from;
        int bad = 0;
        ck_assert_uint_eq(workers_choose(0, bad_env[i], 2, &from, &bad), 4);
        ck_assert_int_eq(from, WORKERS_FROM_CORES);
        ck_assert_msg(bad, "'%s' taken for a count", bad_env[i]);
        ck_assert_uint_eq(workers_choose(6, bad_env[i], 2, &from, &bad),
                          6); /* said, all the same */
        ck_assert_int_eq(bad, 1);
    }
    workers_from_t from;
    int bad;
    ck_assert_uint_eq(workers_choose(0, "1", 2, &from, &bad), 1);
    ck_assert_uint_eq(workers_choose(0, "1024", 2, &from, &bad), 1024);
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(workers_apply_sets_the_environment_libuv_reads)
{
    unsetenv("UV_THREADPOOL_SIZE");
    unsigned n;
    workers_from_t from;
    int bad;
    ck_assert_int_eq(workers_apply(7, &n, &from, &bad), 0);
    ck_assert_uint_eq(n, 7);
    ck_assert_str_eq(getenv("UV_THREADPOOL_SIZE"), "7");
    setenv("UV_THREADPOOL_SIZE", "5", 1);
    ck_assert_int_eq(workers_apply(0, &n, &from, &bad), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(from, WORKERS_FROM_ENV);
    ck_assert_str_eq(getenv("UV_THREADPOOL_SIZE"), "5");
}
END_TEST

static Suite *workers_suite(void)
{
    Suite *s = suite_create("workers");
    TCase *tc = tcase_create("choose");
    tcase_add_test(tc, workers_automatic_is_the_cores_plus_two_within_4_to_128);
    tcase_add_test(tc, workers_the_setting_wins_then_the_environment_then_the_cores);
    tcase_add_test(tc, workers_an_environment_that_is_no_count_is_passed_over);
    tcase_add_test(tc, workers_apply_sets_the_environment_libuv_reads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(workers_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
