/* Unit tests for bufpool: two sizes of buffer (small ones from slabs), and the
 * meter that picks a stream's next size from how fast it reads. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bufpool.h"

#define FULL (256 * 1024)

START_TEST(bufpool_gives_small_or_full_and_reuses_each_kind)
{
    bufpool_t p;
    bufpool_init(&p, FULL, 1);
    ck_assert_uint_eq(p.small, BUFPOOL_SMALL);
    buf_t *s = bufpool_get(&p, 1);
    buf_t *f = bufpool_get(&p, BUFPOOL_SMALL + 1);
    ck_assert_uint_eq(s->cap, BUFPOOL_SMALL);
    ck_assert_uint_eq(f->cap, FULL);
    ck_assert_uint_eq(p.live, 2);
    s->data[BUFPOOL_SMALL - 1] = 1; /* the whole capacity is there */
    f->data[FULL - 1] = 1;
    buf_unref(&p, s);
    buf_unref(&p, f);
    ck_assert_uint_eq(p.live, 0);
    /* Each comes back for its own size, never for the other. */
    ck_assert_ptr_eq(bufpool_get(&p, FULL), f);
    ck_assert_ptr_eq(bufpool_get(&p, BUFPOOL_SMALL), s);
    buf_unref(&p, s);
    buf_unref(&p, f);
    bufpool_destroy(&p);

    /* A pool smaller than BUFPOOL_SMALL has one size. */
    bufpool_init(&p, 4096 / 2, 1);
    ck_assert_uint_eq(p.small, 2048);
    s = bufpool_get(&p, 100);
    ck_assert_uint_eq(s->cap, 2048);
    buf_unref(&p, s);
    ck_assert_ptr_eq(bufpool_get(&p, 4096), s);
    buf_unref(&p, s);
    bufpool_destroy(&p);
}
END_TEST

START_TEST(bufpool_small_buffers_come_from_slabs_given_back_when_empty)
{
    enum { N = 500 };
    static buf_t *got[N];
    bufpool_t p;
    bufpool_init(&p, FULL, 8);
    for (int i = 0; i < N; i++) {
        got[i] = bufpool_get(&p, 100);
        ck_assert_ptr_nonnull(got[i]);
        ck_assert_uint_eq(got[i]->cap, BUFPOOL_SMALL);
        ck_assert_uint_eq((uintptr_t)got[i]->data % 64, 0); /* for the hasher */
        memset(got[i]->data, i & 0xff, BUFPOOL_SMALL);      /* its whole capacity, its own */
    }
    for (int i = 0; i < N; i++)
        ck_assert_int_eq((unsigned char)got[i]->data[BUFPOOL_SMALL - 1], i & 0xff);
    unsigned per_slab = BUFPOOL_SLAB_BYTES / (BUFPOOL_SMALL + 64);
    ck_assert_uint_ge(p.slabs, (N + per_slab - 1) / per_slab);
    ck_assert_uint_le(p.slabs, N / (per_slab - 1) + 1); /* packed: few buffers lost a slab */
    /* Every other one back: no slab is empty, none goes. */
    unsigned slabs = p.slabs;
    for (int i = 0; i < N; i += 2)
        buf_unref(&p, got[i]);
    ck_assert_uint_eq(p.slabs, slabs);
    /* Taken again, they come from those slabs: no new one. */
    for (int i = 0; i < N; i += 2)
        got[i] = bufpool_get(&p, 1);
    ck_assert_uint_eq(p.slabs, slabs);
    /* All back: the empty slabs are unmapped but for BUFPOOL_SPARE_SLABS. */
    for (int i = 0; i < N; i++)
        buf_unref(&p, got[i]);
    ck_assert_uint_eq(p.live, 0);
    ck_assert_uint_eq(p.slabs, BUFPOOL_SPARE_SLABS);
    bufpool_destroy(&p);
    ck_assert_uint_eq(p.slabs, 0);
}
END_TEST

START_TEST(bufpool_meter_starts_small_and_turns_full_for_a_fast_stream)
{
    bufpool_t p;
    bufpool_init(&p, FULL, 0);
    bufpool_meter_t m = {0};
    ck_assert_uint_eq(bufpool_meter_next(&p, &m, 5000), BUFPOOL_SMALL);
    /* A full buffer's worth within the first second: full from then on. */
    for (size_t got = 0; got + BUFPOOL_SMALL <= FULL - BUFPOOL_SMALL; got += BUFPOOL_SMALL) {
        bufpool_meter_add(&m, BUFPOOL_SMALL);
        ck_assert_uint_eq(bufpool_meter_next(&p, &m, 5001), BUFPOOL_SMALL);
    }
    bufpool_meter_add(&m, BUFPOOL_SMALL);
    ck_assert_uint_eq(bufpool_meter_next(&p, &m, 5002), FULL);
    /* While it goes on that fast it stays full, between measures too. */
    bufpool_meter_add(&m, FULL);
    ck_assert_uint_eq(bufpool_meter_next(&p, &m, 5500), FULL);
    bufpool_meter_add(&m, 1000);
    ck_assert_uint_eq(bufpool_meter_next(&p, &m, 5900), FULL);
    /* It slows down: a second with less than a full buffer, small again. */
    bufpool_meter_add(&m, FULL - 2000);
    ck_assert_uint_eq(bufpool_meter_next(&p, &m, 7000), BUFPOOL_SMALL);
}
END_TEST

START_TEST(bufpool_meter_keeps_a_paced_stream_small)
{
    bufpool_t p;
    bufpool_init(&p, FULL, 0);
    bufpool_meter_t m = {0};
    uint64_t now = 100;
    ck_assert_uint_eq(bufpool_meter_next(&p, &m, now), BUFPOOL_SMALL);
    /* 8 KiB/s, sent as one burst a second: each burst fills two buffers at
     * once, which is not the stream's rate. */
    for (int sec = 0; sec < 30; sec++, now += 1000) {
        bufpool_meter_add(&m, BUFPOOL_SMALL);
        ck_assert_uint_eq(bufpool_meter_next(&p, &m, now), BUFPOOL_SMALL);
        bufpool_meter_add(&m, BUFPOOL_SMALL);
        ck_assert_uint_eq(bufpool_meter_next(&p, &m, now), BUFPOOL_SMALL);
    }
}
END_TEST

static Suite *bufpool_suite(void)
{
    Suite *s = suite_create("bufpool");
    TCase *tc = tcase_create("sizes");
    tcase_add_test(tc, bufpool_gives_small_or_full_and_reuses_each_kind);
    tcase_add_test(tc, bufpool_small_buffers_come_from_slabs_given_back_when_empty);
    tcase_add_test(tc, bufpool_meter_starts_small_and_turns_full_for_a_fast_stream);
    tcase_add_test(tc, bufpool_meter_keeps_a_paced_stream_small);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(bufpool_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
