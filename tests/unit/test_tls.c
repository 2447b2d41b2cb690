/* Unit tests for tls: the shared context's configuration errors. The
 * handshakes themselves are tested against real servers in
 * tests/integration/test_tls.py. */
#include "config.h"
#include "tls.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static hubd_config_t cfg;

static void setup(void)
{
    ck_assert_int_eq(config_defaults(&cfg), 0);
}

static void teardown(void)
{
    config_free(&cfg);
}

START_TEST(tls_ctx_defaults_load)
{
    tls_ctx_t *ctx = NULL;
    char err[600] = "";
    ck_assert_msg(tls_ctx_new(&cfg, &ctx, err, sizeof err) == 0, "%s", err);
    tls_conn_t *c = NULL;
    ck_assert_int_eq(tls_conn_new(ctx, "localhost", "https://localhost:443", &c), 0);
    /* Before any handshake there is no output and the handshake wants input
     * after sending its ClientHello. */
    const char *code = NULL;
    char msg[300];
    ck_assert_int_eq(tls_conn_handshake(c, &code, msg, sizeof msg), TLS_WANT_INPUT);
    size_t n = 0;
    char *hello = tls_conn_take_output(c, &n);
    ck_assert_ptr_nonnull(hello);
    ck_assert_uint_gt(n, 5);
    ck_assert_int_eq((unsigned char)hello[0], 22); /* a TLS handshake record */
    free(hello);
    ck_assert_ptr_null(tls_conn_take_output(c, &n));
    tls_conn_free(c);
    tls_ctx_free(ctx);
}
END_TEST

START_TEST(tls_ctx_rejects_unknown_cipher)
{
    ck_assert_int_eq(config_set(&cfg, "tls_ciphers", "aes-128-gcm,rc4-md5"), 0);
    tls_ctx_t *ctx = NULL;
    char err[600] = "";
    ck_assert_int_lt(tls_ctx_new(&cfg, &ctx, err, sizeof err), 0);
    ck_assert_ptr_null(ctx);
    ck_assert_ptr_nonnull(strstr(err, "rc4-md5"));
}
END_TEST

START_TEST(tls_ctx_missing_ca_file_is_an_error)
{
    ck_assert_int_eq(config_set(&cfg, "ca_file", "/nonexistent/ca.pem"), 0);
    tls_ctx_t *ctx = NULL;
    char err[600] = "";
    ck_assert_int_lt(tls_ctx_new(&cfg, &ctx, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/ca.pem"));
}
END_TEST

START_TEST(tls_conn_input_space_grows)
{
    tls_ctx_t *ctx = NULL;
    char err[600] = "";
    ck_assert_int_eq(tls_ctx_new(&cfg, &ctx, err, sizeof err), 0);
    tls_conn_t *c = NULL;
    ck_assert_int_eq(tls_conn_new(ctx, "127.0.0.1", "https://127.0.0.1:443", &c), 0);
    for (int i = 0; i < 10; i++) { /* nothing consumes it: space must keep coming */
        char *p;
        size_t room = 0;
        ck_assert_int_eq(tls_conn_input_space(c, &p, &room), 0);
        ck_assert_uint_ge(room, 16 * 1024);
        memset(p, 0x17, room);
        tls_conn_input_commit(c, room);
    }
    tls_conn_free(c);
    tls_ctx_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, tls_ctx_defaults_load);
    tcase_add_test(tc, tls_ctx_rejects_unknown_cipher);
    tcase_add_test(tc, tls_ctx_missing_ca_file_is_an_error);
    tcase_add_test(tc, tls_conn_input_space_grows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
