/* Unit tests of daemon/access/served.c: the (uid, sha256) pairs of recent
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

/* The hash index over the ring agrees with what the ring holds, pair by
 * pair, through renewals, drops and chains that collide (few buckets'
 * worth of uids and blobs, far more notes than SERVED_MAX). Every note
 * takes the ring's next slot (a renewed pair leaves a hole), so a pair is
 * held while fewer than SERVED_MAX notes came after its last one. */
#define UIDS 17
#define BLOBS 600
static unsigned last_note[UIDS][BLOBS]; /* 1 + the ordinal of its last note; 0: never */

START_TEST(served_index_agrees_with_the_ring)
{
    memset(&m, 0, sizeof m);
    memset(last_note, 0, sizeof last_note);
    srand(7);
    char x[65];
    for (unsigned n = 1; n <= 30000; n++) {
        unsigned uid = (unsigned)rand() % UIDS, blob = (unsigned)rand() % BLOBS;
        sha_of(x, blob);
        served_note(&m, uid, x, n);
        last_note[uid][blob] = n;
        if (n % 5000 == 0)
            for (unsigned u = 0; u < UIDS; u++)
                for (unsigned b = 0; b < BLOBS; b++) {
                    sha_of(x, b);
                    int held = last_note[u][b] && n - last_note[u][b] < SERVED_MAX;
                    ck_assert_int_eq(served_recent(&m, u, x, n), held);
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
    tcase_add_test(tc, served_index_agrees_with_the_ring);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
