/* Unit tests for principal and quota: access decisions taken from a
 * principal (allowed users and groups, admin group, root and hubd's own
 * uid), and the per-uid counters. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "principal.h"
#include "quota.h"

/* Neither root nor the test's own uid, nor in the root group. */
#define STRANGER 4321
#define OTHER_GID 4322

static principal_t peer(uid_t uid, gid_t gid)
{
    principal_t p;
    principal_from_peercred(&p, uid, gid, 77, NULL, 0);
    return p;
}

static void load(principal_acl_t *acl, const char *key, const char *value, const char *key2,
                 const char *value2)
{
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    if (key)
        ck_assert_int_eq(config_set(&cfg, key, value), 0);
    if (key2)
        ck_assert_int_eq(config_set(&cfg, key2, value2), 0);
    principal_acl_load(acl, &cfg);
    config_free(&cfg);
}

START_TEST(principal_from_peercred_keeps_the_primary_gid)
{
    principal_t p = peer(STRANGER, OTHER_GID);
    ck_assert_uint_eq(p.uid, STRANGER);
    ck_assert_uint_eq(p.ngids, 1);
    ck_assert_uint_eq(principal_gid(&p), OTHER_GID);
    ck_assert_int_eq(p.pid, 77);
    ck_assert_int_eq(p.source, PRINCIPAL_PEERCRED);
    principal_t none = {.uid = STRANGER};
    ck_assert_uint_eq(principal_gid(&none), (gid_t)-1);
}
END_TEST

START_TEST(principal_anyone_connects_without_allow_lists)
{
    principal_acl_t acl = {0};
    load(&acl, NULL, NULL, NULL, NULL);
    principal_t p = peer(STRANGER, OTHER_GID);
    ck_assert(!acl.restricted);
    ck_assert(principal_may_connect(&acl, &p));
    principal_acl_free(&acl);
}
END_TEST

START_TEST(principal_allow_users_by_number)
{
    principal_acl_t acl = {0};
    load(&acl, "allow_users", "1000, 4321", NULL, NULL);
    principal_t in = peer(STRANGER, OTHER_GID), out = peer(STRANGER + 10, OTHER_GID);
    principal_t root = peer(0, OTHER_GID), self = peer(geteuid(), OTHER_GID);
    ck_assert(acl.restricted);
    ck_assert(principal_may_connect(&acl, &in));
    ck_assert(!principal_may_connect(&acl, &out));
    ck_assert(principal_may_connect(&acl, &root));
    ck_assert(principal_may_connect(&acl, &self));
    principal_acl_free(&acl);
}
END_TEST

START_TEST(principal_allow_groups_by_gid)
{
    principal_acl_t acl = {0};
    load(&acl, "allow_groups", "root", NULL, NULL);
    principal_t in = peer(STRANGER, 0), out = peer(STRANGER, OTHER_GID);
    ck_assert(principal_may_connect(&acl, &in));
    ck_assert(!principal_may_connect(&acl, &out));
    /* A principal known by uid alone (no gids) is matched by uid only. */
    principal_t bare = {.uid = STRANGER};
    ck_assert(!principal_may_connect(&acl, &bare));
    principal_acl_free(&acl);
}
END_TEST

START_TEST(principal_unknown_names_allow_nobody_else)
{
    principal_acl_t acl = {0};
    load(&acl, "allow_users", "no-such-user-of-hubd", "allow_groups", "no-such-group-of-hubd");
    principal_t p = peer(STRANGER, OTHER_GID), root = peer(0, 0);
    ck_assert(acl.restricted);
    ck_assert(!principal_may_connect(&acl, &p));
    ck_assert(principal_may_connect(&acl, &root));
    principal_acl_free(&acl);
}
END_TEST

START_TEST(principal_admins_are_root_self_and_the_admin_group)
{
    principal_acl_t acl = {0};
    load(&acl, NULL, NULL, NULL, NULL);
    principal_t root = peer(0, OTHER_GID), self = peer(geteuid(), OTHER_GID);
    principal_t member = peer(STRANGER, 0), stranger = peer(STRANGER, OTHER_GID);
    ck_assert(principal_is_admin(&acl, &root));
    ck_assert(principal_is_admin(&acl, &self));
    ck_assert(!principal_is_admin(&acl, &member)); /* no admin group configured */
    load(&acl, "admin_group", "root", NULL, NULL); /* reload replaces */
    ck_assert(principal_is_admin(&acl, &member));
    ck_assert(!principal_is_admin(&acl, &stranger));
    load(&acl, "admin_group", "no-such-group-of-hubd", NULL, NULL);
    ck_assert(!principal_is_admin(&acl, &member));
    ck_assert(principal_is_admin(&acl, &root));
    principal_acl_free(&acl);
}
END_TEST

START_TEST(principal_supplementary_groups_count_and_then_exactly)
{
    principal_acl_t acl = {0};
    load(&acl, "admin_group", "root", NULL, NULL);
    /* The admin group among its supplementary groups (SO_PEERGROUPS): it
     * joined it and logged in again, no SIGHUP needed. */
    gid_t in[] = {OTHER_GID + 1, 0}, out[] = {OTHER_GID + 1};
    principal_t joined, other;
    principal_from_peercred(&joined, STRANGER, OTHER_GID, 77, in, 2);
    principal_from_peercred(&other, STRANGER, OTHER_GID, 77, out, 1);
    ck_assert(joined.groups_exact);
    ck_assert_uint_eq(joined.ngids, 3); /* the primary first, then the others */
    ck_assert_uint_eq(principal_gid(&joined), OTHER_GID);
    ck_assert(principal_is_admin(&acl, &joined));
    ck_assert(!principal_is_admin(&acl, &other));
    principal_acl_free(&acl);

    /* A group's listed members (as loaded) count only when the peer's
     * groups are not known exactly: one removed from the group is out. */
    uid_t member = STRANGER;
    principal_set_t set = {.members = &member, .nmembers = 1};
    principal_t unknown = peer(STRANGER, OTHER_GID);
    ck_assert(principal_set_has(&set, &unknown));
    ck_assert(!principal_set_has(&set, &other));
}
END_TEST

START_TEST(quota_waiting_requests_per_uid)
{
    quota_t q = {0};
    principal_t a = peer(STRANGER, OTHER_GID), a2 = peer(STRANGER, 0);
    principal_t b = peer(STRANGER + 1, OTHER_GID);
    unsigned waiting = 99;
    ck_assert_int_eq(quota_request_begin(&q, &a, 2, &waiting), 0);
    ck_assert_uint_eq(waiting, 0);
    ck_assert_int_eq(quota_request_begin(&q, &a2, 2, &waiting), 0); /* same uid */
    ck_assert_int_eq(quota_request_begin(&q, &a, 2, &waiting), -EAGAIN);
    ck_assert_uint_eq(waiting, 2);
    ck_assert_int_eq(quota_request_begin(&q, &b, 2, &waiting), 0); /* another uid */
    quota_request_end(&q, &a);
    ck_assert_int_eq(quota_request_begin(&q, &a, 2, &waiting), 0);
    for (int i = 0; i < 100; i++) /* 0: no limit */
        ck_assert_int_eq(quota_request_begin(&q, &b, 0, &waiting), 0);
    quota_free(&q);
}
END_TEST

/* A uid in a user's subordinate range (subuid_file) is that user for the
 * per-user bounds: its many uids share one quota. Lines that do not parse,
 * and names nobody has, give no range. */
START_TEST(quota_subordinate_uids_count_as_their_user)
{
    char path[] = "/tmp/subuid-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "# ranges\n"
                       "1000:100000:65536\n"
                       "root:300000:10\n"
                       "no-such-user-here:400000:65536\n"
                       "1001:x:5\n"
                       "1002:500000:0\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    principal_acl_t acl = {0};
    load(&acl, "subuid_file", path, NULL, NULL);
    unlink(path);
    principal_t sub1 = peer(100000, OTHER_GID), sub2 = peer(165535, OTHER_GID),
                past = peer(165536, OTHER_GID), owner = peer(1000, OTHER_GID),
                rootsub = peer(300009, OTHER_GID), unknown = peer(400001, OTHER_GID),
                zero = peer(500000, OTHER_GID);
    principal_t *all[] = {&sub1, &sub2, &past, &owner, &rootsub, &unknown, &zero};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        principal_charge(&acl, all[i]);
    ck_assert_uint_eq(sub1.charged, 1000);
    ck_assert_uint_eq(sub2.charged, 1000);
    ck_assert_uint_eq(past.charged, 165536);
    ck_assert_uint_eq(owner.charged, 1000);
    ck_assert_uint_eq(rootsub.charged, 0);
    ck_assert_uint_eq(unknown.charged, 400001);
    ck_assert_uint_eq(zero.charged, 500000);
    quota_t q = {0};
    unsigned waiting;
    ck_assert_int_eq(quota_request_begin(&q, &sub1, 2, &waiting), 0);
    ck_assert_int_eq(quota_request_begin(&q, &owner, 2, &waiting), 0);
    ck_assert_int_eq(quota_request_begin(&q, &sub2, 2, &waiting), -EAGAIN);
    ck_assert_int_eq(quota_request_begin(&q, &past, 2, &waiting), 0);
    quota_free(&q);
    principal_acl_free(&acl);
    /* Without the file: every uid is its own. */
    load(&acl, "subuid_file", "", NULL, NULL);
    principal_charge(&acl, &sub1);
    ck_assert_uint_eq(sub1.charged, 100000);
    principal_acl_free(&acl);
}
END_TEST

START_TEST(quota_pinned_descriptors_per_uid)
{
    quota_t q = {0};
    principal_t a = peer(STRANGER, OTHER_GID), b = peer(STRANGER + 1, OTHER_GID);
    ck_assert_int_eq(quota_fd_unpin(&q, &a), 0); /* nothing pinned: no underflow */
    for (int i = 0; i < QUOTA_USER_MAX_FDS; i++) {
        ck_assert(!quota_fds_full(&q, &a));
        quota_fd_pin(&q, &a);
    }
    ck_assert(quota_fds_full(&q, &a));
    ck_assert(!quota_fds_full(&q, &b));
    ck_assert_int_eq(quota_fd_unpin(&q, &a), 1); /* from full: wake the others */
    ck_assert(!quota_fds_full(&q, &a));
    ck_assert_int_eq(quota_fd_unpin(&q, &a), 0);
    quota_free(&q);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("principal");
    TCase *tc = tcase_create("principal");
    tcase_add_test(tc, principal_from_peercred_keeps_the_primary_gid);
    tcase_add_test(tc, principal_anyone_connects_without_allow_lists);
    tcase_add_test(tc, principal_allow_users_by_number);
    tcase_add_test(tc, principal_allow_groups_by_gid);
    tcase_add_test(tc, principal_unknown_names_allow_nobody_else);
    tcase_add_test(tc, principal_admins_are_root_self_and_the_admin_group);
    tcase_add_test(tc, principal_supplementary_groups_count_and_then_exactly);
    tcase_add_test(tc, quota_waiting_requests_per_uid);
    tcase_add_test(tc, quota_pinned_descriptors_per_uid);
    tcase_add_test(tc, quota_subordinate_uids_count_as_their_user);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
