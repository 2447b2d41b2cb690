/* Unit tests for pool: the keep-alive pool's bookkeeping. */
#include <check.h>
#include <stdlib.h>

#include "pool.h"

START_TEST(pool_takes_most_recent_of_its_origin)
{
    pool_t p;
    pool_entry_t a1, a2, b;
    pool_init(&p, 8);
    pool_entry_init(&a1, "http://a:80");
    pool_entry_init(&a2, "http://a:80");
    pool_entry_init(&b, "https://a:443");
    ck_assert_ptr_null(pool_put(&p, &a1));
    ck_assert_ptr_null(pool_put(&p, &b));
    ck_assert_ptr_null(pool_put(&p, &a2));
    ck_assert_uint_eq(p.n, 3);
    ck_assert_ptr_eq(pool_take(&p, "http://a:80"), &a2);
    ck_assert_ptr_eq(pool_take(&p, "http://a:80"), &a1);
    ck_assert_ptr_null(pool_take(&p, "http://a:80"));
    ck_assert_ptr_null(pool_take(&p, "http://b:80"));
    ck_assert_ptr_eq(pool_take(&p, "https://a:443"), &b);
    ck_assert_uint_eq(p.n, 0);
}
END_TEST

START_TEST(pool_over_cap_hands_back_the_oldest)
{
    pool_t p;
    pool_entry_t e[3];
    pool_init(&p, 2);
    for (int i = 0; i < 3; i++)
        pool_entry_init(&e[i], "http://a:80");
    ck_assert_ptr_null(pool_put(&p, &e[0]));
    ck_assert_ptr_null(pool_put(&p, &e[1]));
    ck_assert_ptr_eq(pool_put(&p, &e[2]), &e[0]);
    ck_assert_uint_eq(p.n, 2);
    pool_remove(&p, &e[0]); /* not in: nothing happens */
    ck_assert_uint_eq(p.n, 2);
    pool_remove(&p, &e[2]);
    ck_assert_uint_eq(p.n, 1);
    ck_assert_ptr_eq(pool_any(&p), &e[1]);
    pool_remove(&p, &e[1]);
    ck_assert_ptr_null(pool_any(&p));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, pool_takes_most_recent_of_its_origin);
    tcase_add_test(tc, pool_over_cap_hands_back_the_oldest);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
