/* Unit tests of daemon/session/listings.c: HFREPO's listings are counted
 * against their user, and emptied (their blocks freed, whoever holds them
 * open) when the session that asked goes, when their user's bound needs
 * the room, or when everyone's does. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "listings.h"

static uv_loop_t loop;
static listings_t *l;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(listings_new(&loop, &l), 0);
}

static void teardown(void)
{
    listings_free(l);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* A nameless file of n bytes: hubd's writable descriptor (*wfd) and a
 * reader's (returned), as verbs_hf.c makes them. */
static int listing(size_t n, int *wfd)
{
    *wfd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    ck_assert_int_ge(*wfd, 0);
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (size_t off = 0; off < n; off += sizeof buf)
        ck_assert_int_gt(write(*wfd, buf, n - off < sizeof buf ? n - off : sizeof buf), 0);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", *wfd);
    int ro = open(proc, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(ro, 0);
    return ro;
}

static off_t size_of(int fd)
{
    uv_run(&loop, UV_RUN_DEFAULT); /* the ftruncates in the pool */
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return st.st_size;
}

static uint64_t held(void)
{
    uint64_t count, bytes;
    listings_stats(l, &count, &bytes);
    return bytes;
}

START_TEST(listings_a_users_oldest_make_room_for_its_newest)
{
    int owner, w, r[4];
    for (int i = 0; i < 3; i++) {
        r[i] = listing(4000, &w);
        ck_assert_int_eq(listings_add(l, &owner, 1000, w, 4000, 10000), 0);
    }
    /* 12,000 > 10,000: the oldest was emptied for the third. */
    ck_assert_int_eq(size_of(r[0]), 0);
    ck_assert_int_eq(size_of(r[1]), 4000);
    ck_assert_int_eq(size_of(r[2]), 4000);
    ck_assert_uint_eq(held(), 8000);
    /* Another user's listing takes nothing of this one's. */
    r[3] = listing(9000, &w);
    ck_assert_int_eq(listings_add(l, &owner, 1001, w, 9000, 10000), 0);
    ck_assert_int_eq(size_of(r[1]), 4000);
    ck_assert_uint_eq(held(), 17000);
    /* One alone larger than the bound is refused, and emptied. */
    int big = listing(20000, &w);
    ck_assert_int_eq(listings_add(l, &owner, 1000, w, 20000, 10000), -EFBIG);
    ck_assert_int_eq(size_of(big), 0);
    ck_assert_uint_eq(held(), 17000);
    for (int i = 0; i < 4; i++)
        close(r[i]);
    close(big);
}
END_TEST

START_TEST(listings_go_with_their_session_and_past_everyones_bound)
{
    int s1, s2, w;
    int a = listing(3000, &w);
    ck_assert_int_eq(listings_add(l, &s1, 1000, w, 3000, 1000000), 0);
    int b = listing(3000, &w);
    ck_assert_int_eq(listings_add(l, &s2, 1000, w, 3000, 1000000), 0);
    listings_owner_gone(l, &s1);
    ck_assert_int_eq(size_of(a), 0);
    ck_assert_int_eq(size_of(b), 3000);
    ck_assert_uint_eq(held(), 3000);
    /* Everyone's bound is LISTINGS_TOTAL_FACTOR x one user's: many users
     * (a user's subordinate uids, uncharged) empty the oldest of anyone. */
    int r[LISTINGS_TOTAL_FACTOR + 1];
    for (unsigned i = 0; i <= LISTINGS_TOTAL_FACTOR; i++) {
        r[i] = listing(1000, &w);
        ck_assert_int_eq(listings_add(l, &s2, 2000 + i, w, 1000, 1000), 0);
    }
    ck_assert_int_eq(size_of(b), 0); /* the oldest, another user's */
    ck_assert_int_eq(size_of(r[0]), 0);
    ck_assert_int_eq(size_of(r[LISTINGS_TOTAL_FACTOR]), 1000);
    ck_assert_uint_le(held(), LISTINGS_TOTAL_FACTOR * 1000);
    for (unsigned i = 0; i <= LISTINGS_TOTAL_FACTOR; i++)
        close(r[i]);
    close(a);
    close(b);
}
END_TEST

START_TEST(listings_a_user_keeps_at_most_its_count)
{
    int owner, w, r[LISTINGS_PER_UID + 1];
    for (int i = 0; i <= LISTINGS_PER_UID; i++) {
        r[i] = listing(0, &w);
        ck_assert_int_eq(listings_add(l, &owner, 1000, w, 0, 0), 0);
    }
    uint64_t count, bytes;
    listings_stats(l, &count, &bytes);
    ck_assert_uint_eq(count, LISTINGS_PER_UID);
    for (int i = 0; i <= LISTINGS_PER_UID; i++)
        close(r[i]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("listings");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, listings_a_users_oldest_make_room_for_its_newest);
    tcase_add_test(tc, listings_go_with_their_session_and_past_everyones_bound);
    tcase_add_test(tc, listings_a_user_keeps_at_most_its_count);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
