/* Unit tests of daemon/cache/grant.c: read grants as ACL entries, bounded
 * to GRANT_MAX_USERS named users per blob. Skipped where TMPDIR's file
 * system keeps no ACLs. */
#include "grant.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static char path[256];

static int make_blob(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/hubd-grant.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchmod(fd, 0400), 0);
    return fd;
}

static int acl_present(void)
{
    return getxattr(path, "system.posix_acl_access", NULL, 0) >= 0;
}

START_TEST(grant_bounded_to_32_users_and_removed_to_0400)
{
    int fd = make_blob();
    int rc = grant_add(fd, 2000, GRANT_MAX_USERS);
    if (rc == -EOPNOTSUPP || rc == -ENOTSUP) {
        fprintf(stderr, "grant: no ACLs on %s: skipped\n", path);
        close(fd);
        unlink(path);
        return;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(grant_add(fd, 2000, GRANT_MAX_USERS), 0); /* again: nothing new */
    for (uid_t u = 2001; u < 2000 + GRANT_MAX_USERS; u++)
        ck_assert_int_eq(grant_add(fd, u, GRANT_MAX_USERS), 0);
    ck_assert_int_eq(grant_count(fd), GRANT_MAX_USERS);
    /* The 33rd uid gets none: the client copies. */
    ck_assert_int_eq(grant_add(fd, 3000, GRANT_MAX_USERS), -ENOSPC);
    ck_assert_int_eq(grant_count(fd), GRANT_MAX_USERS);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0440); /* the mask r--, other nothing */
    /* A second file of the same bytes takes the grants over. */
    char path2[300];
    snprintf(path2, sizeof path2, "%s.2", path);
    int fd2 = open(path2, O_RDWR | O_CREAT | O_EXCL, 0400);
    ck_assert_int_ge(fd2, 0);
    ck_assert_int_eq(grant_copy(fd, fd2), 0);
    ck_assert_int_eq(grant_count(fd2), GRANT_MAX_USERS);
    close(fd2);
    unlink(path2);
    for (uid_t u = 2000; u < 2000 + GRANT_MAX_USERS; u++)
        ck_assert_int_eq(grant_remove(fd, u), 0);
    ck_assert_int_eq(grant_remove(fd, 2000), 0); /* none: fine */
    ck_assert_int_eq(grant_count(fd), 0);
    ck_assert_int_eq(acl_present(), 0);
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0400);
    close(fd);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grant");
    TCase *tc = tcase_create("grant");
    tcase_add_test(tc, grant_bounded_to_32_users_and_removed_to_0400);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
