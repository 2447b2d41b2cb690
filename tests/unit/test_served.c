/* Unit tests of daemon/front/served.c: the (uid, sha256) pairs of recent
 * DONE lines that HOLD of a private blob needs. */
#include "served.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static served_t m; /* 180 KB: not on the stack */

static void sha_of(char out[65], unsigned n)
{
    snprintf(out, 65, "%064x", n);
}

START_TEST(served_pair_is_per_uid_and_blob)
{
    char a[65], b[65];
    sha_of(a, 1);
    sha_of(b, 2);
    memset(&m, 0, sizeof m);
    ck_assert_int_eq(served_recent(&m, 1000, a, 5000), 0);
    served_note(&m, 1000, a, 5000);
    ck_assert_int_eq(served_recent(&m, 1000, a, 5000), 1);
    ck_assert_int_eq(served_recent(&m, 1001, a, 5000), 0); /* another uid */
    ck_assert_int_eq(served_recent(&m, 1000, b, 5000), 0); /* another blob */
    /* Upper-case hex names the same blob; garbage names none. */
    char up[65];
    snprintf(up, sizeof up, "%064X", 1u);
    ck_assert_int_eq(served_recent(&m, 1000, up, 5000), 1);
    served_note(&m, 1000, "zz", 5000);
    ck_assert_int_eq(served_recent(&m, 1000, "zz", 5000), 0);
}
END_TEST

START_TEST(served_pair_lasts_ten_minutes_and_is_renewed)
{
    char a[65];
    sha_of(a, 1);
    memset(&m, 0, sizeof m);
    served_note(&m, 1000, a, 1000);
    ck_assert_int_eq(served_recent(&m, 1000, a, 1000 + SERVED_TTL_MS), 1);
    ck_assert_int_eq(served_recent(&m, 1000, a, 1001 + SERVED_TTL_MS), 0);
    served_note(&m, 1000, a, 1000 + SERVED_TTL_MS);
    ck_assert_int_eq(served_recent(&m, 1000, a, 1000 + 2 * SERVED_TTL_MS), 1);
}
END_TEST

START_TEST(served_map_drops_the_oldest_pair)
{
    char a[65], x[65];
    sha_of(a, 0xa);
    memset(&m, 0, sizeof m);
    served_note(&m, 7, a, 100);
    served_note(&m, 8, a, 100);
    served_note(&m, 7, a, 101); /* renewed: now the newest */
    for (unsigned i = 0; i < SERVED_MAX - 1; i++) {
        sha_of(x, 0x100000 + i);
        served_note(&m, 9, x, 200);
    }
    ck_assert_int_eq(served_recent(&m, 8, a, 300), 0); /* the oldest went */
    ck_assert_int_eq(served_recent(&m, 7, a, 300), 1);
    sha_of(x, 0x100000 + SERVED_MAX - 2);
    ck_assert_int_eq(served_recent(&m, 9, x, 300), 1);
    served_note(&m, 9, a, 400); /* one more: 7's pair is the oldest now */
    ck_assert_int_eq(served_recent(&m, 7, a, 400), 0);
}
END_TEST

/* The hash index over the ring agrees with a plain scan of it, pair by
 * pair, through renewals, drops and chains that collide (few buckets'
 * worth of uids and blobs, far more notes than SERVED_MAX). */
static struct {
    uint64_t at;
    unsigned uid, blob;
} model[SERVED_MAX];
static unsigned model_next;

static void model_note(unsigned uid, unsigned blob, uint64_t at)
{
    for (unsigned i = 0; i < SERVED_MAX; i++)
        if (model[i].at && model[i].uid == uid && model[i].blob == blob)
            model[i].at = 0;
    model[model_next].at = at;
    model[model_next].uid = uid;
    model[model_next].blob = blob;
    model_next = (model_next + 1) % SERVED_MAX;
}

static int model_recent(unsigned uid, unsigned blob, uint64_t now)
{
    for (unsigned i = 0; i < SERVED_MAX; i++)
        if (model[i].at && model[i].uid == uid && model[i].blob == blob)
            return now - model[i].at <= SERVED_TTL_MS;
    return 0;
}

START_TEST(served_index_agrees_with_a_scan)
{
    memset(&m, 0, sizeof m);
    memset(model, 0, sizeof model);
    model_next = 0;
    srand(7);
    char x[65];
    for (unsigned n = 1; n <= 30000; n++) {
        unsigned uid = (unsigned)rand() % 17, blob = (unsigned)rand() % 600;
        sha_of(x, blob);
        served_note(&m, uid, x, n);
        model_note(uid, blob, n);
        if (n % 1000 == 0)
            for (unsigned u = 0; u < 17; u++)
                for (unsigned b = 0; b < 600; b++) {
                    sha_of(x, b);
                    ck_assert_int_eq(served_recent(&m, u, x, n), model_recent(u, b, n));
                }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("served");
    TCase *tc = tcase_create("served");
    tcase_add_test(tc, served_pair_is_per_uid_and_blob);
    tcase_add_test(tc, served_pair_lasts_ten_minutes_and_is_renewed);
    tcase_add_test(tc, served_map_drops_the_oldest_pair);
    tcase_add_test(tc, served_index_agrees_with_a_scan);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
