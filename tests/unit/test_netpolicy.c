/* Unit tests for netpolicy: CIDR lists, host lists, IPv4-mapped addresses. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "netpolicy.h"

static struct sockaddr_storage ss;

static const struct sockaddr *addr(const char *text)
{
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
        v4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
        v6->sin6_family = AF_INET6;
    else
        ck_abort_msg("bad test address %s", text);
    return (const struct sockaddr *)&ss;
}

static netpolicy_t *policy(const char *deny, const char *allow, const char *allow_hosts,
                           const char *deny_hosts)
{
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    if (deny)
        ck_assert_int_eq(config_set(&cfg, "deny_networks", deny), 0);
    if (allow)
        ck_assert_int_eq(config_set(&cfg, "allow_networks", allow), 0);
    if (allow_hosts)
        ck_assert_int_eq(config_set(&cfg, "allow_hosts", allow_hosts), 0);
    if (deny_hosts)
        ck_assert_int_eq(config_set(&cfg, "deny_hosts", deny_hosts), 0);
    netpolicy_t *p = NULL;
    ck_assert_int_eq(netpolicy_new(&cfg, &p), 0);
    config_free(&cfg);
    return p;
}

START_TEST(defaults_deny_link_local_and_metadata)
{
    netpolicy_t *p = policy(NULL, NULL, NULL, NULL);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("169.254.169.254")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("169.254.0.1")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("fe80::1")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("febf:ffff::1")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("fd00:ec2::254")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("100.100.100.200")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("0.0.0.0")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("::")), 0);
    /* The IPv4 range written as IPv4-mapped IPv6 is the same address. */
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("::ffff:169.254.169.254")), 0);
    /* Other IPv6 forms that carry an IPv4 address a network may route to. */
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("::169.254.169.254")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("::ffff:0:169.254.169.254")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("64:ff9b::a9fe:a9fe")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("64:ff9b:1::a9fe:a9fe")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("2002:a9fe:a9fe::1")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("64:ff9b::808:808")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("2002:808:808::1")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("169.255.0.1")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("127.0.0.1")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("::1")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("fec0::1")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("2001:db8::1")), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "anything.example"), 1);
    netpolicy_free(p);
}
END_TEST

START_TEST(prefixes_and_exceptions)
{
    netpolicy_t *p = policy("10.0.0.0/9, 192.168.1.7, 2001:db8::/33", "10.1.2.0/24", NULL, NULL);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("10.127.255.255")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("10.128.0.0")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("10.1.2.3")), 1); /* the exception */
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("192.168.1.7")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("192.168.1.8")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("2001:db8:7fff::1")), 0);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("2001:db8:8000::1")), 1);
    ck_assert_int_eq(netpolicy_addr_ok(p, addr("169.254.169.254")), 1); /* list replaced */
    netpolicy_free(p);
}
END_TEST

START_TEST(host_lists)
{
    netpolicy_t *p = policy(NULL, NULL, "models.example, *.cdn.example", "bad.cdn.example");
    ck_assert_int_eq(netpolicy_host_ok(p, "models.example"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "MODELS.example"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "x.models.example"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "eu.cdn.example"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "cdn.example"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "evilcdn.example"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "bad.cdn.example"), 0);  /* deny wins */
    ck_assert_int_eq(netpolicy_host_ok(p, "bad.cdn.example."), 0); /* the same name */
    ck_assert_int_eq(netpolicy_host_ok(p, "models.example."), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "other.example"), 0);
    netpolicy_free(p);
}
END_TEST

START_TEST(bad_lists_are_refused)
{
    static const char *const bad[] = {"10.0.0.0/33", "fe80::/129", "10.0.0.0/", "10.0.0/8",
                                      "example.org", "::1/-1",     "1.2.3.4/8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(netpolicy_check_networks(bad[i]) == -EINVAL, "%s", bad[i]);
    ck_assert_int_eq(netpolicy_check_networks(" 10.0.0.0/8 ,, ::1 "), 0);
    ck_assert_int_eq(netpolicy_check_networks(""), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("netpolicy");
    TCase *tc = tcase_create("netpolicy");
    tcase_add_test(tc, defaults_deny_link_local_and_metadata);
    tcase_add_test(tc, prefixes_and_exceptions);
    tcase_add_test(tc, host_lists);
    tcase_add_test(tc, bad_lists_are_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
