/* Unit tests for connector (and stream_tcp under it) on loopback: a
 * connected stream, the policy's refusal, a refused port, and a close
 * before the result. Each test ends with a loop that closes with nothing
 * left open. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "connector.h"
#include "stream_tcp.h"

static uv_loop_t loop;
static bufpool_t pool;
static uv_tcp_t server;
static char port[8], label[64];
static int accepted, results, closes;
static const char *code;
static char msg[512];
static stream_t *got;

static void on_client_closed(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *s, int status)
{
    ck_assert_int_eq(status, 0);
    uv_tcp_t *c = malloc(sizeof *c);
    uv_tcp_init(&loop, c);
    ck_assert_int_eq(uv_accept(s, (uv_stream_t *)c), 0);
    accepted++;
    uv_close((uv_handle_t *)c, on_client_closed);
}

/* A loopback listener; listen 0: bound, then closed, for a refused port. */
static void setup(int listen)
{
    accepted = results = closes = 0;
    code = NULL;
    got = NULL;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    bufpool_init(&pool, 4096, 4);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(&loop, &server);
    ck_assert_int_eq(uv_tcp_bind(&server, (const struct sockaddr *)&a, 0), 0);
    struct sockaddr_in bound;
    int len = sizeof bound;
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len);
    snprintf(port, sizeof port, "%u", ntohs(bound.sin_port));
    snprintf(label, sizeof label, "http://127.0.0.1:%s", port);
    if (listen)
        ck_assert_int_eq(uv_listen((uv_stream_t *)&server, 8, on_connection), 0);
    else
        uv_close((uv_handle_t *)&server, NULL);
}

static void on_closed(void *arg)
{
    (void)arg;
    closes++;
}

static void on_done(connector_t *c, stream_t *tcp, const char *code_, const char *msg_, void *arg)
{
    (void)arg;
    results++;
    got = tcp;
    code = code_;
    snprintf(msg, sizeof msg, "%s", msg_ ? msg_ : "");
    connector_close(c, on_closed, NULL);
    if (tcp)
        stream_close(tcp, on_closed, NULL);
}

static void run(const netpolicy_t *policy)
{
    connector_opts_t o = {.loop = &loop,
                          .pool = &pool,
                          .policy = policy,
                          .host = "127.0.0.1",
                          .port = port,
                          .label = label,
                          .timeout_ms = 5000};
    connector_t *c;
    ck_assert_int_eq(connector_start(&o, on_done, NULL, &c), 0);
    while (results == 0 && uv_run(&loop, UV_RUN_ONCE))
        ;
}

static void teardown(void)
{
    if (!uv_is_closing((uv_handle_t *)&server))
        uv_close((uv_handle_t *)&server, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_uint_eq(pool.live, 0);
    bufpool_destroy(&pool);
}

START_TEST(connector_yields_a_connected_stream)
{
    setup(1);
    run(NULL);
    ck_assert_int_eq(results, 1);
    ck_assert_ptr_null(code);
    ck_assert_ptr_nonnull(got);
    teardown();
    ck_assert_int_eq(closes, 2); /* the connector and the stream */
    ck_assert_int_eq(accepted, 1);
}
END_TEST

START_TEST(connector_policy_refuses_the_address)
{
    hubd_config_t cfg;
    netpolicy_t *policy;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_int_eq(config_set(&cfg, "deny_networks", "127.0.0.0/8"), 0);
    ck_assert_int_eq(netpolicy_new(&cfg, &policy), 0);
    setup(1);
    run(policy);
    ck_assert_int_eq(results, 1);
    ck_assert_str_eq(code, "forbidden");
    ck_assert_str_eq(msg, "127.0.0.1 resolves only to addresses the network policy denies "
                          "(127.0.0.1): see deny_networks");
    teardown();
    ck_assert_int_eq(closes, 1);
    ck_assert_int_eq(accepted, 0);
    netpolicy_free(policy);
    config_free(&cfg);
}
END_TEST

START_TEST(connector_refused_port)
{
    setup(0);
    run(NULL);
    ck_assert_int_eq(results, 1);
    ck_assert_str_eq(code, "connect");
    char want[128];
    snprintf(want, sizeof want, "cannot connect to %s: connection refused", label);
    ck_assert_str_eq(msg, want);
    teardown();
    ck_assert_int_eq(closes, 1);
}
END_TEST

/* Closed while the lookup is out: no result, one close callback, and the
 * late DNS answer is still waited for. */
START_TEST(connector_close_before_the_result)
{
    setup(1);
    connector_opts_t o = {.loop = &loop,
                          .pool = &pool,
                          .host = "127.0.0.1",
                          .port = port,
                          .label = label,
                          .timeout_ms = 5000};
    connector_t *c;
    ck_assert_int_eq(connector_start(&o, on_done, NULL, &c), 0);
    connector_close(c, on_closed, NULL);
    ck_assert_int_eq(closes, 0); /* never from inside */
    teardown();
    ck_assert_int_eq(results, 0);
    ck_assert_int_eq(closes, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("connector");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, connector_yields_a_connected_stream);
    tcase_add_test(tc, connector_policy_refuses_the_address);
    tcase_add_test(tc, connector_refused_port);
    tcase_add_test(tc, connector_close_before_the_result);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
