/* Unit tests for common/bytebuf.c and common/list.h: the byte buffer's cap
 * (no peer may make its holder keep more) and the intrusive list. */
#include "bytebuf.h"
#include "list.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

START_TEST(bytebuf_cap_refuses_and_keeps)
{
    bytebuf_t b;
    bytebuf_init(&b, 8);
    ck_assert_int_eq(bytebuf_append(&b, "abcdef", 6), 0);
    ck_assert_int_eq(bytebuf_append(&b, "xyz", 3), -ENOBUFS);
    ck_assert_uint_eq(bytebuf_len(&b), 6); /* nothing of a refused append */
    ck_assert_int_eq(memcmp(bytebuf_data(&b), "abcdef", 6), 0);
    bytebuf_consume(&b, 4);
    ck_assert_int_eq(bytebuf_append(&b, "uvwxyz", 6), 0); /* room again once consumed */
    ck_assert_uint_eq(bytebuf_len(&b), 8);
    ck_assert_int_eq(memcmp(bytebuf_data(&b), "efuvwxyz", 8), 0);
    ck_assert_uint_le(b.alloc, 8);
    bytebuf_free(&b);
}
END_TEST

START_TEST(bytebuf_grows_and_prints)
{
    bytebuf_t b;
    bytebuf_init(&b, 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(bytebuf_printf(&b, "%d,", i), 0);
    ck_assert_uint_eq(bytebuf_len(&b), 10 * 2 + 90 * 3 + 900 * 4);
    ck_assert_int_eq(memcmp(bytebuf_data(&b), "0,1,2,", 6), 0);
    bytebuf_consume(&b, bytebuf_len(&b));
    ck_assert_uint_eq(b.off, 0); /* empty: back to the start */
    bytebuf_free(&b);
}
END_TEST

typedef struct item {
    int v;
    list_node_t link;
} item_t;

START_TEST(list_order_and_unlink)
{
    list_t l;
    list_init(&l);
    item_t it[4];
    for (int i = 0; i < 4; i++) {
        it[i].v = i;
        list_node_init(&it[i].link);
        ck_assert(!list_linked(&it[i].link));
    }
    list_push_back(&l, &it[1].link);
    list_push_back(&l, &it[2].link);
    list_push_front(&l, &it[0].link);
    list_push_back(&l, &it[3].link);
    ck_assert_uint_eq(list_length(&l), 4);
    int want = 0;
    for (list_node_t *n = list_first(&l); n; n = list_next(&l, n))
        ck_assert_int_eq(list_entry(n, item_t, link)->v, want++);
    list_remove(&it[2].link);
    list_remove(&it[2].link); /* twice: no harm */
    ck_assert(!list_linked(&it[2].link));
    list_node_t *n, *tmp;
    int sum = 0;
    list_foreach_safe(&l, n, tmp)
    {
        sum += list_entry(n, item_t, link)->v;
        list_remove(n);
    }
    ck_assert_int_eq(sum, 0 + 1 + 3);
    ck_assert(list_empty(&l));
    ck_assert_ptr_null(list_pop_front(&l));
    ck_assert_ptr_null(list_last(&l));
}
END_TEST

static Suite *bytebuf_suite(void)
{
    Suite *s = suite_create("bytebuf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bytebuf_cap_refuses_and_keeps);
    tcase_add_test(tc, bytebuf_grows_and_prints);
    tcase_add_test(tc, list_order_and_unlink);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bytebuf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
