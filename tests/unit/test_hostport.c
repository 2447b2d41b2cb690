/* Unit tests for hostport: http_listen's loopback "host:port" lists (issue
 * 13) and the checks the TCP listener makes of sockets systemd passes. */
#include "hostport.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The list parsed, each address formatted back, joined by ", ". */
static int parse_fmt(const char *text, char *out, size_t cap, const char **why)
{
    struct sockaddr_storage a[HOSTPORT_MAX_ADDRS];
    size_t n = 99;
    char item[HOSTPORT_TEXT_MAX];
    int rc = hostport_parse_list(text, a, HOSTPORT_MAX_ADDRS, &n, item, sizeof item, why);
    out[0] = '\0';
    if (rc) {
        snprintf(out, cap, "%s", item);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        char one[HOSTPORT_TEXT_MAX];
        ck_assert_int_gt(hostport_format((struct sockaddr *)&a[i], one, sizeof one), 0);
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", i ? ", " : "", one);
    }
    return 0;
}

START_TEST(hostport_parses_the_three_forms)
{
    static const struct {
        const char *text, *want;
    } ok[] = {
        {"127.0.0.1:8399", "127.0.0.1:8399"},
        {"127.0.0.1:8399, [::1]:8399", "127.0.0.1:8399, [::1]:8399"},
        {" \t127.1.2.3:1 ,[::1]:65535\t", "127.1.2.3:1, [::1]:65535"},
        {"localhost:80", "127.0.0.1:80, [::1]:80"}, /* both, without a lookup */
        {"LocalHost:80", "127.0.0.1:80, [::1]:80"},
        {"[::ffff:127.0.0.1]:81", "127.0.0.1:81"}, /* IPv4-mapped: the IPv4 address */
        {"[0:0:0:0:0:0:0:1]:82", "[::1]:82"},
        {"localhost:1, 127.0.0.2:1", "127.0.0.1:1, [::1]:1, 127.0.0.2:1"},
        {"", ""},     /* off */
        {"  \t", ""}, /* off */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char got[512];
        const char *why = "unset";
        ck_assert_msg(parse_fmt(ok[i].text, got, sizeof got, &why) == 0, "'%s': %s", ok[i].text,
                      why);
        ck_assert_msg(strcmp(got, ok[i].want) == 0, "'%s' gave '%s'", ok[i].text, got);
        ck_assert_ptr_null(why);
    }
}
END_TEST

/* Each refusal names the item as written and says why. */
START_TEST(hostport_refuses_with_item_and_reason)
{
    static const struct {
        const char *text, *item, *why_has;
    } bad[] = {
        {"0.0.0.0:8399", "0.0.0.0:8399", "is not a loopback address: the HTTP front serves"},
        {"127.0.0.1:1, 192.168.1.1:80", "192.168.1.1:80", "is not a loopback address"},
        {"[::]:1", "[::]:1", "is not a loopback address"},
        {"[::ffff:10.0.0.1]:1", "[::ffff:10.0.0.1]:1", "is not a loopback address"},
        {"[::127.0.0.1]:1", "[::127.0.0.1]:1", "is not a loopback address"},
        {"example.org:80", "example.org:80", "is not an IPv4 address, [IPv6 address] or localhost"},
        {"127.1:80", "127.1:80",
         "is not an IPv4 address, [IPv6 address] or localhost"}, /* dotted quads only */
        {"::1:8399", "::1:8399", "without brackets"},
        {"127.0.0.1", "127.0.0.1", "has no port"},
        {"[::1]", "[::1]", "has no port"},
        {"[::1]8399", "[::1]8399", "not an IPv6 address in brackets"},
        {"[::1:8399", "[::1:8399", "not an IPv6 address in brackets"},
        {"[127.0.0.1]:1", "[127.0.0.1]:1", "not an IPv6 address in brackets"},
        {"[::1%lo]:1", "[::1%lo]:1", "not an IPv6 address in brackets"},
        {"127.0.0.1:0", "127.0.0.1:0", "bad port"},
        {"127.0.0.1:65536", "127.0.0.1:65536", "bad port"},
        {"127.0.0.1:+80", "127.0.0.1:+80", "bad port"},
        {"127.0.0.1:", "127.0.0.1:", "bad port"},
        {"127.0.0.1:080000", "127.0.0.1:080000", "bad port"},
        {"127.0.0.1:1,", "127.0.0.1:1,", "empty item"},
        {"127.0.0.1:1, ,[::1]:1", "127.0.0.1:1, ,[::1]:1", "empty item"},
        {",", ",", "empty item"},
        {"127.0.0.1:1, localhost:1", "localhost:1", "listed twice"},
        {"[::1]:5, [0::1]:5", "[0::1]:5", "listed twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char item[512];
        const char *why = NULL;
        ck_assert_msg(parse_fmt(bad[i].text, item, sizeof item, &why) == -EINVAL, "'%s'",
                      bad[i].text);
        ck_assert_msg(strcmp(item, bad[i].item) == 0, "'%s': item '%s'", bad[i].text, item);
        ck_assert_msg(why && strstr(why, bad[i].why_has), "'%s': %s", bad[i].text, why);
    }
    /* Same address, other port: two listeners, not a duplicate. */
    char got[512];
    const char *why;
    ck_assert_int_eq(parse_fmt("127.0.0.1:1, 127.0.0.1:2", got, sizeof got, &why), 0);
}
END_TEST

START_TEST(hostport_caps_the_items)
{
    char text[512] = "", got[512];
    const char *why = NULL;
    for (int i = 1; i <= HOSTPORT_MAX_ITEMS; i++) /* 8 localhost items: 16 addresses */
        snprintf(text + strlen(text), sizeof text - strlen(text), "%slocalhost:%d",
                 i > 1 ? ", " : "", i);
    ck_assert_int_eq(parse_fmt(text, got, sizeof got, &why), 0);
    strcat(text, ", 127.0.0.1:99");
    ck_assert_int_eq(parse_fmt(text, got, sizeof got, &why), -E2BIG);
    ck_assert_str_eq(got, "127.0.0.1:99");
    ck_assert_ptr_nonnull(strstr(why, "at most 8"));

    /* A caller's smaller array is respected. */
    struct sockaddr_storage one[1];
    size_t n;
    char item[HOSTPORT_TEXT_MAX];
    ck_assert_int_eq(hostport_parse_list("localhost:1", one, 1, &n, item, sizeof item, &why),
                     -E2BIG);
}
END_TEST

START_TEST(hostport_loopback_and_format)
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(8399)};
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(8399)};
    char buf[HOSTPORT_TEXT_MAX];
    inet_pton(AF_INET, "127.255.0.1", &in.sin_addr);
    ck_assert_int_eq(hostport_is_loopback((struct sockaddr *)&in), 1);
    ck_assert_int_eq(hostport_format((struct sockaddr *)&in, buf, sizeof buf), 16);
    ck_assert_str_eq(buf, "127.255.0.1:8399");
    inet_pton(AF_INET, "0.0.0.0", &in.sin_addr);
    ck_assert_int_eq(hostport_is_loopback((struct sockaddr *)&in), 0);
    inet_pton(AF_INET, "128.0.0.1", &in.sin_addr);
    ck_assert_int_eq(hostport_is_loopback((struct sockaddr *)&in), 0);
    in6.sin6_addr = in6addr_loopback;
    ck_assert_int_eq(hostport_is_loopback((struct sockaddr *)&in6), 1);
    hostport_format((struct sockaddr *)&in6, buf, sizeof buf);
    ck_assert_str_eq(buf, "[::1]:8399");
    inet_pton(AF_INET6, "::ffff:127.0.0.9", &in6.sin6_addr); /* a v6 socket's v4 peer */
    ck_assert_int_eq(hostport_is_loopback((struct sockaddr *)&in6), 1);
    in6.sin6_addr = in6addr_any;
    ck_assert_int_eq(hostport_is_loopback((struct sockaddr *)&in6), 0);
    ck_assert_int_eq(hostport_format((struct sockaddr *)&in6, buf, 5), -E2BIG);
    struct sockaddr un = {.sa_family = AF_UNIX};
    ck_assert_int_eq(hostport_is_loopback(&un), 0);
    ck_assert_int_eq(hostport_format(&un, buf, sizeof buf), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostport");
    TCase *tc = tcase_create("hostport");
    tcase_add_test(tc, hostport_parses_the_three_forms);
    tcase_add_test(tc, hostport_refuses_with_item_and_reason);
    tcase_add_test(tc, hostport_caps_the_items);
    tcase_add_test(tc, hostport_loopback_and_format);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
