/* Unit tests for the CONNECT tunnel (stream_tunnel.h) over a fake stream
 * whose peer, the test, plays the proxy: what is sent, how each answer is
 * read (split at every byte too), and the pass-through once open. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_stream.h"
#include "stream_tunnel.h"

static uv_loop_t loop;
static bufpool_t pool;

typedef struct opened {
    int calls;
    const char *code;
    char msg[1024];
} opened_t;

static opened_t op;

static void on_open(stream_t *s, const char *code, const char *msg)
{
    (void)s;
    op.calls++;
    op.code = code;
    snprintf(op.msg, sizeof op.msg, "%s", msg ? msg : "");
}

/* The user's side once open: reads land in its own memory (as TLS's do). */
static char user_mem[4096];
static size_t user_len;
static int user_allocs;

static void user_alloc(stream_t *s, char **p, size_t *room)
{
    (void)s;
    user_allocs++;
    *p = user_mem + user_len;
    *room = sizeof user_mem - user_len;
}

static void user_on_read(stream_t *s, ssize_t n, buf_t *buf, const char *p)
{
    (void)s;
    (void)buf;
    if (n > 0) {
        ck_assert_ptr_eq(p, user_mem + user_len); /* where alloc said: no copy */
        user_len += (size_t)n;
    }
}

static void user_on_write_error(stream_t *s, int err)
{
    (void)s;
    (void)err;
}

static const stream_cbs_t user_cbs = {
    .alloc = user_alloc,
    .on_read = user_on_read,
    .on_write_error = user_on_write_error,
};

static stream_t *tun;

/* A tunnel to 127.0.0.1:443 through a fake proxy, opened: returns the fake. */
static fake_stream_t *start(const char *authz)
{
    memset(&op, 0, sizeof op);
    user_len = 0;
    user_allocs = 0;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    bufpool_init(&pool, 4096, 4);
    fake_stream_t *f = fake_new(&loop, &pool);
    ck_assert_int_eq(
        stream_tunnel_new(&f->base, "127.0.0.1:443", authz, "http://127.0.0.1:3128", &tun), 0);
    stream_set_cbs(tun, &user_cbs, NULL);
    ck_assert_int_eq(stream_tunnel_open(tun, on_open), 0);
    ck_assert_int_eq(op.calls, 0); /* never from inside the call */
    return f;
}

static void closed(void *arg)
{
    *(int *)arg = 1;
}

static void finish(void)
{
    int done = 0;
    stream_close(tun, closed, &done);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_uint_eq(pool.live, 0);
    bufpool_destroy(&pool);
}

/* The peer's answer, in reads cut at cut (0: one read). */
static void answer(fake_stream_t *f, const char *text, size_t cut)
{
    size_t n = strlen(text);
    if (cut && cut < n) {
        fake_send(f, text, cut);
        if (op.calls)
            return; /* decided on the first part */
        text += cut;
        n -= cut;
    }
    fake_send(f, text, n);
}

START_TEST(tunnel_sends_connect_with_the_proxy_credentials)
{
    fake_stream_t *f = start("Basic YWxpY2U6czNjcmV0");
    static const char want[] = "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n"
                               "Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n";
    ck_assert_uint_eq(f->wlen, sizeof want - 1);
    ck_assert(memcmp(f->written, want, sizeof want - 1) == 0);
    finish();
}
END_TEST

START_TEST(tunnel_without_credentials_sends_none)
{
    fake_stream_t *f = start(NULL);
    static const char want[] = "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n";
    ck_assert_uint_eq(f->wlen, sizeof want - 1);
    ck_assert(memcmp(f->written, want, sizeof want - 1) == 0);
    finish();
}
END_TEST

static const char established[] = "HTTP/1.1 200 Connection established\r\nVia: 1.1 squid\r\n\r\n";

/* Any cut of the 200: open once, then bytes both ways pass through, into
 * the user's memory. */
START_TEST(tunnel_opens_on_200_split_anywhere)
{
    size_t cut = (size_t)_i;
    fake_stream_t *f = start(NULL);
    answer(f, established, cut);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_msg(op.code == NULL, "%s", op.msg);
    ck_assert_msg(!f->reading, "reads wait for the user");
    size_t sent = f->wlen;
    char *hello = strdup("client hello");
    ck_assert_int_eq(stream_write(tun, hello, 12), 0);
    ck_assert_uint_eq(f->wlen, sent + 12);
    ck_assert_int_eq(stream_read_start(tun), 0);
    ck_assert(f->reading);
    ck_assert_ptr_nonnull(f->base.cbs->alloc); /* the user's alloc, handed down */
    char *p = NULL;
    size_t room = 0;
    f->base.cbs->alloc(&f->base, &p, &room);
    memcpy(p, "server hello", 12);
    f->base.cbs->on_read(&f->base, 12, NULL, p);
    ck_assert_uint_eq(user_len, 12);
    ck_assert(memcmp(user_mem, "server hello", 12) == 0);
    ck_assert(stream_reusable(tun));
    finish();
}
END_TEST

/* A user that starts reading while the answer is read (before its open
 * callback) reads once the tunnel is open, not never. */
START_TEST(tunnel_read_started_early_starts_once_open)
{
    fake_stream_t *f = start(NULL);
    ck_assert_int_eq(stream_read_start(tun), 0);
    answer(f, established, 0);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_msg(op.code == NULL, "%s", op.msg);
    ck_assert_msg(f->reading, "the early read_start was forgotten");
    ck_assert_ptr_nonnull(f->base.cbs->alloc);
    finish();
}
END_TEST

START_TEST(tunnel_407_is_proxy_auth)
{
    fake_stream_t *f = start("Basic c2VjcmV0");
    answer(f,
           "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic "
           "realm=\"x\"\r\nContent-Length: 5\r\n\r\nnope!",
           (size_t)_i);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy_auth");
    ck_assert_ptr_nonnull(strstr(op.msg, "http://127.0.0.1:3128"));
    ck_assert_ptr_nonnull(strstr(op.msg, "407 Proxy Authentication Required"));
    ck_assert_ptr_null(strstr(op.msg, "c2VjcmV0")); /* the credentials are never shown */
    finish();
}
END_TEST

/* A 4xx is the proxy's rules saying no: proxy_refused, final (a
 * refused CONNECT was tried six times). */
START_TEST(tunnel_refused_is_proxy_refused_with_the_status)
{
    fake_stream_t *f = start(NULL);
    answer(f, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", (size_t)_i);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy_refused");
    ck_assert_ptr_nonnull(strstr(op.msg, "refused the tunnel: 403 Forbidden"));
    ck_assert_ptr_nonnull(strstr(op.msg, "127.0.0.1:443"));
    finish();
}
END_TEST

/* A 5xx is the proxy's trouble (its upstream, its load): proxy, transient. */
START_TEST(tunnel_5xx_is_proxy_with_the_status)
{
    fake_stream_t *f = start(NULL);
    answer(f, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", (size_t)_i);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy");
    ck_assert_ptr_nonnull(strstr(op.msg, "failed to open the tunnel: 502 Bad Gateway"));
    ck_assert_ptr_null(strstr(op.msg, "refused")); /* no rule said no: it may pass */
    finish();
}
END_TEST

/* Neither 2xx nor an error: a 101, a 3xx (a captive portal's redirect).
 * No tunnel, said as such, not as a refusal; proxy, transient. */
START_TEST(tunnel_other_status_is_proxy_not_opened)
{
    static const char *const answers[] = {
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
        "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:8/login\r\nContent-Length: 0\r\n\r\n",
    };
    static const char *const said[] = {"101 Switching Protocols", "302 Found"};
    fake_stream_t *f = start(NULL);
    answer(f, answers[_i], 0);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy");
    ck_assert_ptr_nonnull(strstr(op.msg, "did not open the tunnel: "));
    ck_assert_ptr_nonnull(strstr(op.msg, said[_i]));
    finish();
}
END_TEST

START_TEST(tunnel_end_before_the_answer_is_proxy)
{
    fake_stream_t *f = start(NULL);
    fake_send(f, "HTTP/1.1 200", 12);
    fake_end(f, UV_EOF);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy");
    ck_assert_ptr_nonnull(strstr(op.msg, "closed the connection"));
    finish();
}
END_TEST

/* The origin speaks only after the client's first TLS record: bytes behind
 * the proxy's answer are not the origin's. */
START_TEST(tunnel_bytes_after_the_answer_are_refused)
{
    fake_stream_t *f = start(NULL);
    char text[200];
    snprintf(text, sizeof text, "%sEXTRA", established);
    answer(f, text, 0);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy");
    finish();
}
END_TEST

START_TEST(tunnel_endless_headers_are_cut)
{
    fake_stream_t *f = start(NULL);
    fake_send(f, "HTTP/1.1 200 OK\r\n", 17);
    char line[1000];
    memset(line, 'a', sizeof line);
    memcpy(line, "X-A: ", 5);
    memcpy(line + sizeof line - 2, "\r\n", 2);
    for (int i = 0; i < 40 && !op.calls; i++)
        fake_send(f, line, sizeof line);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy");
    ck_assert_ptr_nonnull(strstr(op.msg, "16 KiB"));
    finish();
}
END_TEST

START_TEST(tunnel_garbage_is_proxy)
{
    fake_stream_t *f = start(NULL);
    fake_send(f, "SSH-2.0-OpenSSH\r\n", 17);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_str_eq(op.code, "proxy");
    ck_assert_ptr_nonnull(strstr(op.msg, "bad answer"));
    finish();
}
END_TEST

/* RFC 9110 15.2: a client must parse 1xx answers before the final one. */
START_TEST(tunnel_skips_1xx_before_200)
{
    fake_stream_t *f = start(NULL);
    answer(f, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 Connection established\r\n\r\n", 0);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_msg(op.code == NULL, "%s", op.msg);
    finish();
}
END_TEST

/* RFC 9110 9.3.6: Content-Length / Transfer-Encoding in a 2xx to CONNECT are ignored. */
START_TEST(tunnel_200_with_framing_headers_opens)
{
    static const char *const answers[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.0 200 OK\r\n\r\n",
    };
    fake_stream_t *f = start(NULL);
    answer(f, answers[_i], 0);
    ck_assert_int_eq(op.calls, 1);
    ck_assert_msg(op.code == NULL, "%d: %s", _i, op.msg);
    finish();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tunnel");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, tunnel_sends_connect_with_the_proxy_credentials);
    tcase_add_test(tc, tunnel_without_credentials_sends_none);
    tcase_add_loop_test(tc, tunnel_opens_on_200_split_anywhere, 0, (int)sizeof established - 1);
    tcase_add_test(tc, tunnel_read_started_early_starts_once_open);
    tcase_add_loop_test(tc, tunnel_407_is_proxy_auth, 0, 60);
    tcase_add_loop_test(tc, tunnel_refused_is_proxy_refused_with_the_status, 0, 30);
    tcase_add_loop_test(tc, tunnel_5xx_is_proxy_with_the_status, 0, 30);
    tcase_add_loop_test(tc, tunnel_other_status_is_proxy_not_opened, 0, 2);
    tcase_add_test(tc, tunnel_end_before_the_answer_is_proxy);
    tcase_add_test(tc, tunnel_bytes_after_the_answer_are_refused);
    tcase_add_test(tc, tunnel_endless_headers_are_cut);
    tcase_add_test(tc, tunnel_garbage_is_proxy);
    tcase_add_test(tc, tunnel_skips_1xx_before_200);
    tcase_add_loop_test(tc, tunnel_200_with_framing_headers_opens, 0, 4);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
