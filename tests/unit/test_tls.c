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

/* Feeds answer to a fresh handshake (after its ClientHello); the result
 * and the message. */
static int handshake_on(const char *answer, size_t len, const char **code, char *msg, size_t msglen)
{
    tls_ctx_t *ctx = NULL;
    char err[600] = "";
    ck_assert_int_eq(tls_ctx_new(&cfg, &ctx, err, sizeof err), 0);
    tls_conn_t *c = NULL;
    ck_assert_int_eq(tls_conn_new(ctx, "127.0.0.1", "https://127.0.0.1:443", &c), 0);
    ck_assert_int_eq(tls_conn_handshake(c, code, msg, msglen), TLS_WANT_INPUT);
    size_t n;
    free(tls_conn_take_output(c, &n));
    char *p;
    size_t room;
    ck_assert_int_eq(tls_conn_input_space(c, &p, &room), 0);
    ck_assert_uint_ge(room, len);
    memcpy(p, answer, len);
    tls_conn_input_commit(c, len);
    int rc = tls_conn_handshake(c, code, msg, msglen);
    tls_conn_free(c);
    tls_ctx_free(ctx);
    return rc;
}

/* A plain HTTP answer to the ClientHello (an http:// server on the port,
 * or a proxy that says 200 and then answers itself): the
 * message says what answered, not mbedTLS's "invalid SSL record". */
START_TEST(tls_plain_http_answer_is_named)
{
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nproxy bytes\n";
    const char *code = NULL;
    char msg[400] = "";
    ck_assert_int_lt(handshake_on(answer, sizeof answer - 1, &code, msg, sizeof msg), 0);
    ck_assert_str_eq(code, "tls");
    ck_assert_msg(strstr(msg, "127.0.0.1: the answer is not TLS but begins \"HTTP/1.1 200 OK\" ("),
                  "%s", msg);
    ck_assert_ptr_null(strstr(msg, "invalid SSL record"));
}
END_TEST

/* Bytes that are a TLS record keep mbedTLS's own reason (an alert, here). */
START_TEST(tls_record_answer_keeps_its_reason)
{
    static const char alert[] = {21, 3, 3, 0, 2, 2, 40}; /* fatal handshake_failure */
    const char *code = NULL;
    char msg[400] = "";
    ck_assert_int_lt(handshake_on(alert, sizeof alert, &code, msg, sizeof msg), 0);
    ck_assert_str_eq(code, "tls");
    ck_assert_msg(strstr(msg, "TLS handshake with 127.0.0.1: ") == msg, "%s", msg);
    ck_assert_ptr_null(strstr(msg, "not TLS"));
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
    tcase_add_test(tc, tls_plain_http_answer_is_named);
    tcase_add_test(tc, tls_record_answer_keeps_its_reason);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
