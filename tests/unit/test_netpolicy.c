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

/* deny_hosts = 127.0.0.1 denies that address in every spelling a URL can
 * give it, and "[::ffff:127.0.0.1]". url_parse
 * writes IPv4 hosts as dotted quads, but the policy does not rely on it. */
START_TEST(host_lists_compare_addresses_as_addresses)
{
    static const char *const loopback[] = {
        "127.0.0.1",       "127.1",      "2130706433", "0x7f000001",       "017700000001",
        "0x7f.0.0.1",      "127.0.0.1.", "0177.0.1",   "::ffff:127.0.0.1", "::FFFF:7f00:0001",
        "[::ffff:7f00:1]",
    };
    netpolicy_t *p = policy(NULL, NULL, NULL, "127.0.0.1, ::1");
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++)
        ck_assert_msg(netpolicy_host_ok(p, loopback[i]) == 0, "%s", loopback[i]);
    ck_assert_int_eq(netpolicy_host_ok(p, "0:0::1"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "[0:0:0:0:0:0:0:1]"), 0);
    /* Other addresses, and names, are not these. */
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.2"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "127.2"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "::2"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "localhost"), 1); /* a name: deny_networks' job */
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.1.example"), 1);
    netpolicy_free(p);

    /* A list item in another spelling is the same address too. */
    static const char *const items[] = {"2130706433",         "127.1",         "0x7f.0.0.1",
                                        "[::ffff:127.0.0.1]", "::ffff:7f00:1", "127.0.0.1."};
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        p = policy(NULL, NULL, NULL, items[i]);
        ck_assert_msg(netpolicy_host_ok(p, "127.0.0.1") == 0, "deny_hosts = %s", items[i]);
        ck_assert_msg(netpolicy_host_ok(p, "::ffff:127.0.0.1") == 0, "deny_hosts = %s", items[i]);
        ck_assert_msg(netpolicy_host_ok(p, "127.0.0.2") == 1, "deny_hosts = %s", items[i]);
        netpolicy_free(p);
    }

    /* The IPv6 forms that carry an IPv4 address (netpolicy_addr_ok checks
     * them as that address) are denied with it. */
    p = policy(NULL, NULL, NULL, "192.0.2.7");
    ck_assert_int_eq(netpolicy_host_ok(p, "::192.0.2.7"), 0);         /* IPv4-compatible */
    ck_assert_int_eq(netpolicy_host_ok(p, "::ffff:0:192.0.2.7"), 0);  /* SIIT */
    ck_assert_int_eq(netpolicy_host_ok(p, "64:ff9b::c000:207"), 0);   /* NAT64 */
    ck_assert_int_eq(netpolicy_host_ok(p, "64:ff9b:1::c000:207"), 0); /* local NAT64 */
    ck_assert_int_eq(netpolicy_host_ok(p, "2002:c000:207::1"), 0);    /* 6to4 */
    ck_assert_int_eq(netpolicy_host_ok(p, "64:ff9b::c000:208"), 1);
    netpolicy_free(p);
}
END_TEST

/* allow_hosts admits an address in any spelling, an IPv4-mapped one for
 * its IPv4 item and the other way round; names match names only. */
START_TEST(allow_hosts_compare_addresses_as_addresses)
{
    netpolicy_t *p =
        policy(NULL, NULL, "127.0.0.1, ::ffff:192.0.2.1, [2001:db8::1], *.example", NULL);
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.1"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "127.1"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "::ffff:127.0.0.1"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "192.0.2.1"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "2001:db8:0::1"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "a.example"), 1);
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.2"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "2001:db8::2"), 0);
    /* Only the address itself: not the IPv6 forms that carry it. */
    ck_assert_int_eq(netpolicy_host_ok(p, "::127.0.0.1"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "64:ff9b::7f00:1"), 0);
    /* A host no URL can have is not allowed. */
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.256"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "a.1"), 0);
    netpolicy_free(p);

    /* A name pattern never matches an address: "*.0.0.1" is not a way to
     * write 127.0.0.1, and the configuration refuses it. */
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_int_eq(config_set(&cfg, "allow_hosts", "*.0.0.1, 127.0.0.1.example"), -EINVAL);
    config_free(&cfg);
    p = policy(NULL, NULL, "127.0.0.1.example", NULL);
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.1"), 0);
    ck_assert_int_eq(netpolicy_host_ok(p, "127.0.0.1.example"), 1);
    netpolicy_free(p);
}
END_TEST

/* Items no URL's host can be are refused, so a typo is not a silent
 * never-match (config_set can check deny_hosts and allow_hosts with it). */
/* Through a proxy hubd resolves nothing: a literal host is judged by the
 * address check itself, in every spelling url_parse reads (each
 * of these reached the proxy). */
START_TEST(literals_are_checked_as_addresses)
{
    netpolicy_t *p = policy(NULL, NULL, NULL, NULL);
    static const char *const denied[] = {
        "169.254.169.254",
        "2852039166",
        "0xa9fea9fe",
        "169.254.43518",
        "fe80::1",
        "[fe80::1]",
        "::ffff:169.254.169.254",
        "[::ffff:a9fe:a9fe]",
        "64:ff9b::a9fe:a9fe",
        "100.100.100.200",
        "0.0.0.0",
        "0",
        "fd00:ec2::254",
    };
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        ck_assert_msg(netpolicy_literal_ok(p, denied[i]) == 0, "%s", denied[i]);
    static const char *const allowed[] = {"127.0.0.1",
                                          "127.1",
                                          "::1",
                                          "10.0.0.1",
                                          "100.64.0.1",
                                          "example.org",
                                          "metadata.google.internal"};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        ck_assert_msg(netpolicy_literal_ok(p, allowed[i]) == 1, "%s", allowed[i]);
    ck_assert_int_eq(netpolicy_literal_ok(p, "1.2.3.256"), 0); /* no URL's host */
    netpolicy_free(p);
    /* allow_networks makes its exceptions for literals too. */
    p = policy(NULL, "169.254.169.254/32", NULL, NULL);
    ck_assert_int_eq(netpolicy_literal_ok(p, "2852039166"), 1);
    ck_assert_int_eq(netpolicy_literal_ok(p, "169.254.0.1"), 0);
    netpolicy_free(p);
}
END_TEST

static void sa4(struct sockaddr_storage *ss, const char *a, unsigned port)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof *ss);
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    ck_assert_int_eq(inet_pton(AF_INET, a, &in->sin_addr), 1);
}

static void sa6(struct sockaddr_storage *ss, const char *a, unsigned port)
{
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    memset(ss, 0, sizeof *ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    ck_assert_int_eq(inet_pton(AF_INET6, a, &in6->sin6_addr), 1);
}

START_TEST(own_listeners_are_refused_in_every_spelling)
{
    netpolicy_t *p = policy(NULL, NULL, NULL, NULL);
    ck_assert_int_eq(netpolicy_host_is_self(p, "127.0.0.1", 8399), 0); /* none set yet */
    struct sockaddr_storage own[2];
    sa4(&own[0], "127.0.0.1", 8399);
    sa6(&own[1], "::1", 8400);
    netpolicy_set_self(p, own, 2);
    static const char *const self[] = {
        "127.0.0.1",        "127.1",      "2130706433",  "0x7f.1", "127.0.0.2", "0.0.0.0",
        "::ffff:127.0.0.1", "::1",        "[::1]",       "::",     "localhost", "LocalHost",
        "a.b.localhost",    "localhost.", "a.localhost."};
    for (size_t i = 0; i < sizeof self / sizeof self[0]; i++) {
        ck_assert_msg(netpolicy_host_is_self(p, self[i], 8399) == 1, "%s", self[i]);
        ck_assert_msg(netpolicy_host_is_self(p, self[i], 8400) == 1, "%s", self[i]);
        ck_assert_msg(netpolicy_host_is_self(p, self[i], 8401) == 0, "%s", self[i]);
    }
    static const char *const other[] = {
        "10.0.0.1", "example.org", "localhost.example", "::2", "192.0.2.1", "localhost..", "."};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        ck_assert_msg(netpolicy_host_is_self(p, other[i], 8399) == 0, "%s", other[i]);
    /* After DNS: the address connected to, with its port. */
    struct sockaddr_storage ss;
    sa4(&ss, "127.0.0.1", 8399);
    ck_assert_int_eq(netpolicy_is_self(p, (struct sockaddr *)&ss), 1);
    sa4(&ss, "127.0.1.1", 8400);
    ck_assert_int_eq(netpolicy_is_self(p, (struct sockaddr *)&ss), 1);
    sa6(&ss, "::ffff:127.0.0.1", 8399);
    ck_assert_int_eq(netpolicy_is_self(p, (struct sockaddr *)&ss), 1);
    sa6(&ss, "::1", 8399);
    ck_assert_int_eq(netpolicy_is_self(p, (struct sockaddr *)&ss), 1);
    sa4(&ss, "127.0.0.1", 80);
    ck_assert_int_eq(netpolicy_is_self(p, (struct sockaddr *)&ss), 0);
    sa4(&ss, "192.0.2.1", 8399);
    ck_assert_int_eq(netpolicy_is_self(p, (struct sockaddr *)&ss), 0);
    netpolicy_free(p);
}
END_TEST

START_TEST(bad_host_lists_are_refused)
{
    static const char *const bad[] = {"10.0.0.256",   "*.0.0.1", "models.example, a.1",
                                      "127.0.0.1:80", "[::1",    "[1.2.3.4]",
                                      "1.2.3.4.5",    "::1::2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(netpolicy_check_hosts(bad[i]) == -EINVAL, "%s", bad[i]);
    ck_assert_int_eq(netpolicy_check_hosts(" models.example ,, *.cdn.example, 127.1, "
                                           "2130706433, [::1], ::ffff:10.0.0.1, host. "),
                     0);
    ck_assert_int_eq(netpolicy_check_hosts(""), 0);
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
    tcase_add_test(tc, host_lists_compare_addresses_as_addresses);
    tcase_add_test(tc, allow_hosts_compare_addresses_as_addresses);
    tcase_add_test(tc, literals_are_checked_as_addresses);
    tcase_add_test(tc, own_listeners_are_refused_in_every_spelling);
    tcase_add_test(tc, bad_host_lists_are_refused);
    tcase_add_test(tc, bad_lists_are_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
