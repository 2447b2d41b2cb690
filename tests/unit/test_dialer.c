/* Unit tests for the dialer (dialer.h) against a fake proxy on loopback. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "dialer.h"

static uv_loop_t loop;
static bufpool_t pool;
static uv_tcp_t server, peer;
static uv_timer_t answer_timer, stop_timer;
static int results;
static const char *last_code;

static void peer_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    (void)h;
    (void)s;
    static char mem[4096];
    *b = uv_buf_init(mem, sizeof mem);
}

static void peer_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    (void)n;
    (void)b;
}

static void on_written(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

/* The proxy answers, too late: after the dialer gave up on it. */
static void answer_late(uv_timer_t *t)
{
    (void)t;
    static char refusal[] = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
    uv_buf_t b = uv_buf_init(refusal, sizeof refusal - 1);
    uv_write(malloc(sizeof(uv_write_t)), (uv_stream_t *)&peer, &b, 1, on_written);
}

static void on_conn(uv_stream_t *s, int status)
{
    ck_assert_int_eq(status, 0);
    uv_tcp_init(&loop, &peer);
    ck_assert_int_eq(uv_accept(s, (uv_stream_t *)&peer), 0);
    uv_read_start((uv_stream_t *)&peer, peer_alloc, peer_read);
    uv_timer_start(&answer_timer, answer_late, 300, 0);
}

static void on_done(dialer_t *d, stream_t *s, const char *code, const char *msg, void *arg)
{
    (void)d;
    (void)s;
    (void)msg;
    (void)arg;
    results++;
    last_code = code;
    /* The header allows closing the dialer later: not here. */
}

static void stop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

static void closed(void *arg)
{
    *(int *)arg = 1;
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

START_TEST(dialer_result_comes_once_even_when_the_proxy_answers_after_the_timeout)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    bufpool_init(&pool, 4096, 4);
    uv_tcp_init(&loop, &server);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    ck_assert_int_eq(uv_tcp_bind(&server, (const struct sockaddr *)&a, 0), 0);
    ck_assert_int_eq(uv_listen((uv_stream_t *)&server, 4, on_conn), 0);
    int len = sizeof a;
    uv_tcp_getsockname(&server, (struct sockaddr *)&a, &len);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", ntohs(a.sin_port));
    proxy_t px;
    ck_assert_int_eq(proxy_parse(url, &px, NULL), 0);
    uv_timer_init(&loop, &answer_timer);
    uv_timer_init(&loop, &stop_timer);

    dialer_opts_t o = {
        .loop = &loop,
        .pool = &pool,
        .https = 1,
        .host = "example.org",
        .port = "443",
        .origin = "https://example.org:443",
        .proxy = &px,
        .timeout_ms = 100,
    };
    dialer_t *d;
    ck_assert_int_eq(dialer_start(&o, on_done, NULL, &d), 0);
    uv_timer_start(&stop_timer, stop, 600, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(results, 1); /* "proxy": no answer in time; the late 403 says nothing */
    ck_assert_str_eq(last_code, "proxy");

    int done = 0;
    dialer_close(d, closed, &done);
    uv_walk(&loop, close_handle, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    proxy_free(&px);
    bufpool_destroy(&pool);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dialer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, dialer_result_comes_once_even_when_the_proxy_answers_after_the_timeout);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
