/* Unit tests of daemon/cache/linkcheck.c: a look-up answers within its
 * deadline or is given up on, and a file system that never answers costs
 * at most LINKCHECK_STUCK_MAX threads. */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "linkcheck.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

START_TEST(linkcheck_reads_a_link_and_its_target)
{
    char dir[] = "/tmp/linkcheck-XXXXXX", link[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/l", dir);
    ck_assert_int_eq(symlink("/somewhere/else", link), 0);
    linkcheck_t lc;
    ck_assert_int_eq(linkcheck_read(link, 1000, NULL, &lc), 0);
    ck_assert(S_ISLNK(lc.st.st_mode));
    ck_assert_str_eq(lc.target, "/somewhere/else");
    ck_assert_int_eq(linkcheck_read(dir, 1000, NULL, &lc), 0);
    ck_assert(S_ISDIR(lc.st.st_mode));
    ck_assert_str_eq(lc.target, "");
    unlink(link);
    ck_assert_int_eq(linkcheck_read(link, 1000, NULL, &lc), -ENOENT);
    rmdir(dir);
}
END_TEST

static atomic_int released;

/* A file system that answers only when the test lets it. */
static int look_hangs(const char *path, linkcheck_t *out)
{
    (void)path;
    while (!atomic_load(&released))
        usleep(1000);
    memset(out, 0, sizeof *out);
    return 0;
}

START_TEST(linkcheck_gives_up_on_a_look_up_that_hangs)
{
    linkcheck_t lc;
    double t0 = now_s();
    ck_assert_int_eq(linkcheck_read("/x", 100, look_hangs, &lc), -ETIMEDOUT);
    ck_assert_double_lt(now_s() - t0, 1.0);
    ck_assert_uint_eq(linkcheck_stuck(), 1);
    for (int i = 1; i < LINKCHECK_STUCK_MAX; i++)
        ck_assert_int_eq(linkcheck_read("/x", 10, look_hangs, &lc), -ETIMEDOUT);
    ck_assert_uint_eq(linkcheck_stuck(), LINKCHECK_STUCK_MAX);
    /* No more threads for it: at once, without waiting. */
    t0 = now_s();
    ck_assert_int_eq(linkcheck_read("/x", 1000, look_hangs, &lc), -EAGAIN);
    ck_assert_double_lt(now_s() - t0, 0.5);
    /* The file system answers: the stuck look-ups end, and new ones go. */
    atomic_store(&released, 1);
    for (int i = 0; i < 2000 && linkcheck_stuck(); i++)
        usleep(1000);
    ck_assert_uint_eq(linkcheck_stuck(), 0);
    ck_assert_int_eq(linkcheck_read("/", 1000, NULL, &lc), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("linkcheck");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, linkcheck_reads_a_link_and_its_target);
    tcase_add_test(tc, linkcheck_gives_up_on_a_look_up_that_hangs);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
