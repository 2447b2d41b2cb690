/* Unit tests for the HTTP front's pure parts: the generic form's URL
 * from a request target, and the status an error code answers with. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "httpd_internal.h"

START_TEST(generic_url_forms)
{
    static const struct {
        const char *target, *url;
    } ok[] = {
        {"/https://example.org/model.bin", "https://example.org/model.bin"},
        {"/http://127.0.0.1:8080/a?x=1&y=2", "http://127.0.0.1:8080/a?x=1&y=2"},
        {"/https:/example.org/m.bin", "https://example.org/m.bin"}, /* slashes merged */
        {"/HTTPS://example.org/", "HTTPS://example.org/"},          /* url_parse folds case */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char url[256];
        ck_assert_msg(hreq_generic_url(ok[i].target, url, sizeof url) == 0, "%s", ok[i].target);
        ck_assert_str_eq(url, ok[i].url);
    }
    static const char *const bad[] = {"/",         "/x",          "/ftp://example.org/a", "/https:",
                                      "/https://", "/https:///a", "/httpsx://a",          "/hf/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char url[256];
        ck_assert_msg(hreq_generic_url(bad[i], url, sizeof url) != 0, "%s", bad[i]);
    }
    char small[16];
    ck_assert_int_ne(hreq_generic_url("/https://example.org/long/path", small, sizeof small), 0);
}
END_TEST

START_TEST(status_of_codes)
{
    static const struct {
        const char *code;
        int status;
    } cases[] = {
        {NULL, 200},         {"http_404", 404},
        {"http_401", 401},   {"http_403", 403},
        {"http_410", 410},   {"http_500", 502},
        {"http_400", 502},   {"http_416", 502},
        {"timeout", 504},    {"tls_verify", 502},
        {"tls", 502},        {"connect", 502},
        {"dns", 502},        {"forbidden", 403},
        {"bad_url", 400},    {"hash_mismatch", 502},
        {"no_space", 507},   {"proxy", 502},
        {"proxy_auth", 502}, {"shutting_down", 503},
        {"internal", 500},   {"too_many_requests", 429},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(httpd_status_of(cases[i].code) == cases[i].status, "%s",
                      cases[i].code ? cases[i].code : "(none)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("httpd");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, generic_url_forms);
    tcase_add_test(tc, status_of_codes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
