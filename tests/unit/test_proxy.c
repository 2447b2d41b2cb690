/* Unit tests for proxy.h: proxy URLs as curl reads them, where the settings
 * come from (config or environment), the choice per URL, and that no
 * message or description ever holds the password. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "proxy.h"

START_TEST(proxy_parse_forms)
{
    static const struct {
        const char *text, *host, *port, *label, *authz;
    } ok[] = {
        {"http://127.0.0.1:3128", "127.0.0.1", "3128", "http://127.0.0.1:3128", NULL},
        {"127.0.0.1:3128", "127.0.0.1", "3128", "http://127.0.0.1:3128", NULL},   /* no scheme */
        {"http://127.0.0.1", "127.0.0.1", "1080", "http://127.0.0.1:1080", NULL}, /* curl's */
        {"HTTP://LocalHost:8080/", "localhost", "8080", "http://localhost:8080", NULL},
        {"http://[::1]:3128", "::1", "3128", "http://[::1]:3128", NULL},
        {"http://127.1:3128/any/path", "127.0.0.1", "3128", "http://127.0.0.1:3128", NULL},
        {"http://alice:s3cret@127.0.0.1:3128", "127.0.0.1", "3128", "http://127.0.0.1:3128",
         "Basic YWxpY2U6czNjcmV0"},
        /* percent-escapes decoded: "a@b" and "p:w%" */
        {"http://a%40b:p%3Aw%25@127.0.0.1:3128", "127.0.0.1", "3128", "http://127.0.0.1:3128",
         "Basic YUBiOnA6dyU="},
        {"http://alice@127.0.0.1:3128", "127.0.0.1", "3128", "http://127.0.0.1:3128",
         "Basic YWxpY2U6"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        proxy_t p;
        const char *why = NULL;
        ck_assert_msg(proxy_parse(ok[i].text, &p, &why) == 0, "%s: %s", ok[i].text, why);
        ck_assert_str_eq(p.host, ok[i].host);
        ck_assert_str_eq(p.port, ok[i].port);
        ck_assert_str_eq(p.label, ok[i].label);
        if (ok[i].authz)
            ck_assert_str_eq(p.authz, ok[i].authz);
        else
            ck_assert_ptr_null(p.authz);
        proxy_free(&p);
    }
}
END_TEST

START_TEST(proxy_parse_refusals)
{
    static const struct {
        const char *text;
        int rc;
    } bad[] = {
        {"https://127.0.0.1:3128", -EPROTONOSUPPORT},
        {"socks5://127.0.0.1:1080", -EPROTONOSUPPORT},
        {"http://", -EINVAL},
        {"http://user:pw@", -EINVAL},
        {"http://127.0.0.1:notaport", -EINVAL},
        {"http://127.0.0.1:99999", -EINVAL},
        {"http://127.0.0.1:0", -EINVAL},
        {"http://u:p%zz@127.0.0.1:3128", -EINVAL},
        {"http://u:p%00@127.0.0.1:3128", -EINVAL},
        {"http://1.2.3.256:3128", -EINVAL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        proxy_t p;
        const char *why = NULL;
        ck_assert_msg(proxy_parse(bad[i].text, &p, &why) == bad[i].rc, "%s", bad[i].text);
        ck_assert_ptr_nonnull(why);
        proxy_free(&p);
    }
}
END_TEST

/* A fake environment: name=value pairs. */
static const char *const *env;

static const char *get(const char *name)
{
    for (const char *const *e = env; e && *e; e += 2)
        if (strcmp(e[0], name) == 0)
            return e[1];
    return NULL;
}

static const proxy_t *route(const proxy_settings_t *ps, const char *text)
{
    url_t u;
    ck_assert_int_eq(url_parse(text, &u, NULL), 0);
    const proxy_t *p = proxy_for(ps, &u);
    url_free(&u);
    return p;
}

START_TEST(proxy_settings_from_the_environment)
{
    static const char *const e[] = {"http_proxy",  "http://127.0.0.1:3128",
                                    "HTTPS_PROXY", "http://bob:pw@127.0.0.2:3129",
                                    "NO_PROXY",    "localhost,10.0.0.0/8,.internal",
                                    NULL};
    env = e;
    proxy_settings_t ps;
    char err[300];
    ck_assert_int_eq(proxy_settings_init(&ps, NULL, NULL, get, err, sizeof err), 0);
    ck_assert_str_eq(route(&ps, "http://127.0.0.9/x")->label, "http://127.0.0.1:3128");
    ck_assert_str_eq(route(&ps, "https://127.0.0.9/x")->label, "http://127.0.0.2:3129");
    ck_assert_ptr_null(route(&ps, "https://localhost/x"));
    ck_assert_ptr_null(route(&ps, "https://10.1.2.3/x"));
    ck_assert_ptr_null(route(&ps, "http://models.internal/x"));
    char d[1024];
    proxy_settings_describe(&ps, d, sizeof d);
    ck_assert_ptr_nonnull(strstr(d, "http://bob:***@127.0.0.2:3129"));
    ck_assert_ptr_null(strstr(d, "pw"));
    ck_assert_ptr_nonnull(strstr(d, "environment"));
    proxy_settings_free(&ps);
}
END_TEST

/* HTTP_PROXY in upper case is what a CGI server sets from a request's
 * "Proxy:" header: curl ignores it, so does hubd. */
START_TEST(proxy_settings_ignore_upper_case_http_proxy)
{
    static const char *const e[] = {"HTTP_PROXY", "http://127.0.0.1:3128", NULL};
    env = e;
    proxy_settings_t ps;
    char err[300];
    ck_assert_int_eq(proxy_settings_init(&ps, NULL, NULL, get, err, sizeof err), 0);
    ck_assert_ptr_null(route(&ps, "http://127.0.0.9/x"));
    ck_assert_ptr_null(route(&ps, "https://127.0.0.9/x"));
    proxy_settings_free(&ps);
}
END_TEST

/* The config wins: its proxy for both schemes, its no_proxy; an empty
 * proxy is none, whatever the environment says. */
START_TEST(proxy_settings_from_the_config)
{
    static const char *const e[] = {"https_proxy", "http://127.0.0.1:3128", "no_proxy", "127.0.0.9",
                                    NULL};
    env = e;
    proxy_settings_t ps;
    char err[300];
    ck_assert_int_eq(
        proxy_settings_init(&ps, "http://127.0.0.3:8080", "localhost", get, err, sizeof err), 0);
    ck_assert_str_eq(route(&ps, "https://127.0.0.9/x")->label, "http://127.0.0.3:8080");
    ck_assert_str_eq(route(&ps, "http://127.0.0.9/x")->label, "http://127.0.0.3:8080");
    ck_assert_ptr_null(route(&ps, "http://localhost/x"));
    proxy_settings_free(&ps);
    ck_assert_int_eq(proxy_settings_init(&ps, "", NULL, get, err, sizeof err), 0);
    ck_assert_ptr_null(route(&ps, "https://127.0.0.8/x"));
    proxy_settings_free(&ps);
}
END_TEST

START_TEST(proxy_settings_bad_environment_names_the_variable_not_the_value)
{
    static const char *const e[] = {"https_proxy", "https://carol:hunter2@127.0.0.1:3128", NULL};
    env = e;
    proxy_settings_t ps;
    char err[300];
    ck_assert_int_ne(proxy_settings_init(&ps, NULL, NULL, get, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "https_proxy"));
    ck_assert_ptr_null(strstr(err, "hunter2"));
}
END_TEST

/* The config file: a bad proxy is refused without quoting it, a good one
 * is printed by --check-config with its password masked. */
START_TEST(proxy_config_keys_keep_the_password_out)
{
    hubd_config_t cfg;
    char err[600];
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_int_ne(
        config_load_string(&cfg, "proxy = https://dave:opensesame@127.0.0.1:1\n", err, sizeof err),
        0);
    ck_assert_ptr_nonnull(strstr(err, "proxy"));
    ck_assert_ptr_null(strstr(err, "opensesame"));
    ck_assert_int_eq(config_load_string(&cfg,
                                        "proxy = http://dave:opensesame@127.0.0.1:3128\n"
                                        "no_proxy = localhost, .internal\n",
                                        err, sizeof err),
                     0);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    config_print(&cfg, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(out, "proxy = http://dave:***@127.0.0.1:3128\n"));
    ck_assert_ptr_nonnull(strstr(out, "no_proxy = localhost, .internal\n"));
    ck_assert_ptr_null(strstr(out, "opensesame"));
    free(out);
    config_free(&cfg);
}
END_TEST

/* A password with an unescaped '/', '?' or '#' ends the authority early:
 * the part before it must not become the proxy's host or port (label,
 * logs, --check-config), and the rest is not silently dropped. */
START_TEST(proxy_parse_unescaped_slash_in_password_is_refused)
{
    static const char *const texts[] = {
        "http://alice:1234/5678@127.0.0.1:3128",
        "http://alice:9999?x@127.0.0.1:3128",
        "http://alice:8080#frag@proxy.example:3128",
        "http://proxy.example:/",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        proxy_t p;
        const char *why = NULL;
        int rc = proxy_parse(texts[i], &p, &why);
        ck_assert_msg(rc == -EINVAL, "%s: accepted as %s", texts[i], rc ? "?" : p.label);
        proxy_free(&p);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proxy");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, proxy_parse_forms);
    tcase_add_test(tc, proxy_parse_refusals);
    tcase_add_test(tc, proxy_parse_unescaped_slash_in_password_is_refused);
    tcase_add_test(tc, proxy_settings_from_the_environment);
    tcase_add_test(tc, proxy_settings_ignore_upper_case_http_proxy);
    tcase_add_test(tc, proxy_settings_from_the_config);
    tcase_add_test(tc, proxy_settings_bad_environment_names_the_variable_not_the_value);
    tcase_add_test(tc, proxy_config_keys_keep_the_password_out);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
