/* Unit tests for daemon/base/proxyenv.c: which proxy variable counts, and
 * no_proxy matching, against the cases curl documents (its --noproxy and
 * libcurl's CURLOPT_NOPROXY pages: "local.com would match local.com,
 * local.com:80, and www.local.com, but not www.notlocal.com"; CIDR since
 * 7.86.0; a lone "*") and hubd's own host forms. */
#include "proxyenv.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* A fake environment: pairs of name, value. */
static const char *const *env;

static const char *fake_get(const char *name)
{
    for (size_t i = 0; env[i]; i += 2)
        if (strcmp(env[i], name) == 0)
            return env[i + 1];
    return NULL;
}

#define ENV(...) (env = (const char *const[]){__VA_ARGS__, NULL})

START_TEST(proxyenv_http_takes_lower_case_only)
{
    ENV("HTTP_PROXY", "http://cgi-set:1");
    ck_assert_ptr_null(proxyenv_proxy("http", fake_get));
    ENV("HTTP_PROXY", "http://cgi-set:1", "http_proxy", "http://p:3128");
    ck_assert_str_eq(proxyenv_proxy("http", fake_get), "http://p:3128");
    /* all_proxy is the fallback, also in upper case. */
    ENV("HTTP_PROXY", "http://cgi-set:1", "ALL_PROXY", "http://all:1");
    ck_assert_str_eq(proxyenv_proxy("http", fake_get), "http://all:1");
}
END_TEST

START_TEST(proxyenv_https_order)
{
    ENV("HTTPS_PROXY", "http://upper:1", "https_proxy", "http://lower:1", "all_proxy",
        "http://a:1");
    ck_assert_str_eq(proxyenv_proxy("https", fake_get), "http://lower:1");
    ENV("HTTPS_PROXY", "http://upper:1", "all_proxy", "http://a:1");
    ck_assert_str_eq(proxyenv_proxy("https", fake_get), "http://upper:1");
    ENV("https_proxy", "", "all_proxy", "http://a:1", "ALL_PROXY", "http://A:1");
    ck_assert_str_eq(proxyenv_proxy("https", fake_get), "http://a:1"); /* empty is unset */
    ENV("http_proxy", "http://p:1");
    ck_assert_ptr_null(proxyenv_proxy("https", fake_get)); /* http's is not https's */
    ck_assert_ptr_null(proxyenv_proxy("ftp", fake_get));
}
END_TEST

START_TEST(proxyenv_no_proxy_variables)
{
    ENV("NO_PROXY", "b", "no_proxy", "a");
    ck_assert_str_eq(proxyenv_no_proxy(fake_get), "a");
    ENV("NO_PROXY", "b");
    ck_assert_str_eq(proxyenv_no_proxy(fake_get), "b");
    ENV("no_proxy", "");
    ck_assert_ptr_null(proxyenv_no_proxy(fake_get));
}
END_TEST

static const struct {
    const char *list, *host;
    unsigned port;
    int direct;
} cases[] = {
    /* curl's documented example */
    {"local.com", "local.com", 443, 1},
    {"local.com", "local.com", 80, 1},
    {"local.com", "www.local.com", 443, 1},
    {"local.com", "www.notlocal.com", 443, 0},
    /* leading and trailing dots, case, the host's trailing dot */
    {".local.com", "local.com", 443, 1},
    {".local.com", "a.b.local.com", 443, 1},
    {"local.com.", "www.local.com", 443, 1},
    {"LOCAL.com", "www.Local.COM", 443, 1},
    {"local.com", "www.local.com.", 443, 1},
    {".com", "www.example.com", 443, 1},
    {"example", "www.example.com", 443, 0},
    {"ample.com", "example.com", 443, 0},
    {"www.example.com", "example.com", 443, 0}, /* a subdomain item is not its parent */
    /* lists: commas and white space */
    {"localhost,.example.com,.example.de", "www.example.com", 443, 1},
    {"localhost .example.de\t example.com", "www.example.com", 443, 1},
    {" , ,localhost,,", "localhost", 80, 1},
    {"localhost,.examplecom", "www.example.com", 443, 0},
    {"", "example.com", 443, 0},
    /* the wildcard is "*" alone */
    {"*", "anything.example", 80, 1},
    {" * ", "10.1.2.3", 80, 1},
    {"*,localhost", "example.com", 80, 0},
    {"*.example.com", "www.example.com", 80, 0},
    /* ports */
    {"example.com:8080", "example.com", 8080, 1},
    {"example.com:8080", "example.com", 80, 0},
    {"example.com:x", "example.com", 80, 0},
    {"[::1]:8080", "::1", 8080, 1},
    {"[::1]:8080", "::1", 8081, 0},
    {"127.0.0.1:9", "127.0.0.1", 9, 1},
    /* addresses and CIDR (curl 7.86): any spelling of the same address */
    {"192.168.0.0/16", "192.168.7.9", 80, 1},
    {"192.168.0.0/24", "192.168.1.1", 80, 0},
    {"127.0.0.1", "127.0.0.1", 80, 1},
    {"127.0.0.0/8", "127.0.0.1", 80, 1},
    {"::1", "::1", 80, 1},
    {"[::1]", "::1", 80, 1},
    {"fd00::/8", "fd12::1", 80, 1},
    {"fd00::/8", "fe80::1", 80, 0},
    {"::ffff:10.0.0.1", "10.0.0.1", 80, 1},
    {"10.0.0.0/8", "::ffff:10.9.9.9", 80, 1},
    /* an IP host never matches a name item, nor a name an address item */
    {"localhost", "127.0.0.1", 80, 0},
    {"0.1", "127.0.0.1", 80, 0},
    {"127.0.0.1", "localhost", 80, 0},
};

START_TEST(proxyenv_no_proxy_matching)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(proxyenv_no_proxy_match(cases[i].list, cases[i].host, cases[i].port) ==
                          cases[i].direct,
                      "no_proxy \"%s\", host %s port %u: want %s", cases[i].list, cases[i].host,
                      cases[i].port, cases[i].direct ? "direct" : "proxied");
    ck_assert_int_eq(proxyenv_no_proxy_match(NULL, "example.com", 80), 0);
}
END_TEST

static Suite *proxyenv_suite(void)
{
    Suite *s = suite_create("proxyenv");
    TCase *tc = tcase_create("env");
    tcase_add_test(tc, proxyenv_http_takes_lower_case_only);
    tcase_add_test(tc, proxyenv_https_order);
    tcase_add_test(tc, proxyenv_no_proxy_variables);
    tcase_add_test(tc, proxyenv_no_proxy_matching);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(proxyenv_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
