/* Unit tests for the HTTP/1 client over a fake stream (stream.h): the test
 * is the stream's peer. Its writes are captured and its reads are fed by the
 * test, so the seam between http.c and the stream kinds is tested without a
 * socket. http.c is included, as h2o's tests do, to reach conn_new and the
 * stream callbacks; stream_tls.c too, to drive a TLS stream over the fake
 * from the loop's side (no handshake: its state is set as after one). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fake_stream.h"
#include "http.c"
#include "stream_tls.c"

/* ---- a client with one pooled connection on the fake ---------------------- */

static uv_loop_t loop;
static hubd_config_t cfg;
static bufpool_t pool;
static http_client_t *client;

typedef struct result {
    int headers, status, done;
    int64_t content_length;
    char body[4096];
    size_t body_len;
    const char *code;
    char msg[512];
} result_t;

static result_t res;

static int on_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    (void)req;
    (void)data;
    res.headers++;
    res.status = resp->status;
    res.content_length = resp->content_length;
    return HTTP_BODY_DELIVER;
}

static void on_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    (void)req;
    (void)data;
    ck_assert(p >= buf->data && p + n <= buf->data + buf->len); /* a slice of its buffer */
    ck_assert_uint_le(res.body_len + n, sizeof res.body);
    memcpy(res.body + res.body_len, p, n);
    res.body_len += n;
}

static void on_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    (void)req;
    (void)data;
    res.done++;
    res.code = code;
    snprintf(res.msg, sizeof res.msg, "%s", msg ? msg : "");
}

static const http_req_cbs_t cbs = {on_headers, on_body, on_done};

/* A client whose pool holds one idle connection for pool key (an origin,
 * and " via " a proxy) on a fake stream, returned. */
static fake_stream_t *setup_on(const char *key)
{
    memset(&res, 0, sizeof res);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(config_defaults(&cfg), 0);
    bufpool_init(&pool, 4096, 4);
    ck_assert_int_eq(http_client_new(&loop, &cfg, &pool, NULL, &client), 0);
    fake_stream_t *f = fake_new(&loop, &pool);
    http_conn_t *conn = conn_new(client, key);
    ck_assert_ptr_nonnull(conn);
    conn->stream = &f->base;
    stream_set_cbs(&f->base, &conn_stream_cbs, conn);
    conn_make_idle(conn);
    conn->reused = 0; /* a failure is reported, not retried on a new connection */
    return f;
}

/* ... to http://127.0.0.1:80, direct. */
static fake_stream_t *setup(void)
{
    return setup_on("http://127.0.0.1:80");
}

static http_req_t *get(const char *text)
{
    url_t u;
    const char *why;
    ck_assert_int_eq(url_parse(text, &u, &why), 0);
    http_req_t *req = NULL;
    ck_assert_int_eq(http_request(client, &u, NULL, &cbs, NULL, &req), 0);
    url_free(&u);
    return req;
}

static void client_closed(void *arg)
{
    *(int *)arg = 1;
}

/* Closes the client and checks that the loop ends with no handle open. */
static void teardown(void)
{
    int closed = 0;
    http_client_close(client, client_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(closed, 1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_uint_eq(pool.live, 0);
    bufpool_destroy(&pool);
    config_free(&cfg);
}

/* ---- tests ------------------------------------------------------------- */

START_TEST(http_request_goes_out_on_the_pooled_stream)
{
    fake_stream_t *f = setup();
    get("http://127.0.0.1/a/b?c");
    ck_assert_uint_eq(client->idle.n, 0);
    f->written[f->wlen] = '\0';
    ck_assert_str_eq(f->written, "GET /a/b?c HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: "
                                 "hubd/0.1.0\r\nAccept: */*\r\nAccept-Encoding: identity\r\n\r\n");
    ck_assert(f->reading);
    const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    fake_send(f, resp, sizeof resp - 1);
    ck_assert_int_eq(res.done, 1);
    ck_assert_ptr_null(res.code);
    ck_assert_uint_eq(client->idle.n, 1); /* kept alive */
    teardown();
}
END_TEST

/* A POST carries its body after the head, with its Content-Length; the
 * answer's Content-Type and the Link lines it wanted (joined) reach
 * on_headers. */
static char seen_ctype[64], seen_link[256];

static int on_headers_keep(http_req_t *req, const http_response_t *resp, void *data)
{
    snprintf(seen_ctype, sizeof seen_ctype, "%s", resp->content_type ? resp->content_type : "-");
    snprintf(seen_link, sizeof seen_link, "%s", resp->wanted[0] ? resp->wanted[0] : "-");
    return on_headers(req, resp, data);
}

START_TEST(http_post_sends_its_body)
{
    static const http_req_cbs_t keep_cbs = {on_headers_keep, on_body, on_done};
    fake_stream_t *f = setup();
    url_t u;
    ck_assert_int_eq(url_parse("http://127.0.0.1/api/models/a/b/paths-info/main", &u, NULL), 0);
    static const char body[] = "{\"paths\": [\"x\"]}";
    http_req_t *req = NULL;
    static const http_want_t link[] = {{"Link", 1}};
    http_req_opts_t o = {.method = "POST",
                         .extra_headers = "Content-Type: application/json\r\n",
                         .body = body,
                         .body_len = sizeof body - 1,
                         .wanted = link,
                         .nwanted = 1};
    ck_assert_int_eq(http_request_opts(client, &u, &o, &keep_cbs, NULL, &req), 0);
    url_free(&u);
    f->written[f->wlen] = '\0';
    ck_assert_str_eq(f->written,
                     "POST /api/models/a/b/paths-info/main HTTP/1.1\r\nHost: "
                     "127.0.0.1\r\nUser-Agent: hubd/0.1.0\r\nAccept: "
                     "*/*\r\nAccept-Encoding: identity\r\nContent-Length: "
                     "16\r\nContent-Type: application/json\r\n\r\n{\"paths\": [\"x\"]}");
    const char resp[] =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLink: <a>; "
        "rel=\"next\"\r\nLink: <b>; rel=\"xet-auth\"\r\nContent-Length: 2\r\n\r\n[]";
    fake_send(f, resp, sizeof resp - 1);
    ck_assert_int_eq(res.done, 1);
    ck_assert_ptr_null(res.code);
    ck_assert_str_eq(seen_ctype, "application/json");
    ck_assert_str_eq(seen_link, "<a>; rel=\"next\", <b>; rel=\"xet-auth\"");
    ck_assert_uint_eq(res.body_len, 2);
    teardown();
}
END_TEST

static const char *const responses[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nETag: \"x\"\r\n\r\nhello world",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
};

/* Whatever the read sizes, a response gives the same result: cut it in two
 * at every byte. */
START_TEST(http_response_split_at_every_byte)
{
    const char *resp = responses[_i];
    size_t len = strlen(resp);
    for (size_t cut = 1; cut < len; cut++) {
        fake_stream_t *f = setup();
        get("http://127.0.0.1/f");
        fake_send(f, resp, cut);
        ck_assert_int_eq(res.done, 0);
        fake_send(f, resp + cut, len - cut);
        ck_assert_int_eq(res.headers, 1);
        ck_assert_int_eq(res.status, 200);
        ck_assert_int_eq(res.done, 1);
        ck_assert_ptr_null(res.code);
        ck_assert_uint_eq(res.body_len, 11);
        ck_assert(memcmp(res.body, "hello world", 11) == 0);
        ck_assert_uint_eq(client->idle.n, 1);
        teardown();
    }
}
END_TEST

/* An end the stream cannot vouch for (TLS without close_notify) truncates a
 * body read to the close, with the stream's words in the message. */
START_TEST(http_unverified_end_truncates)
{
    fake_stream_t *f = setup();
    get("http://127.0.0.1/f");
    const char resp[] = "HTTP/1.1 200 OK\r\n\r\nsome of it";
    fake_send(f, resp, sizeof resp - 1);
    f->fault = (stream_fault_t){.code = "truncated", .msg = "the fake ended"};
    fake_end(f, STREAM_EOF_UNVERIFIED);
    ck_assert_int_eq(res.done, 1);
    ck_assert_str_eq(res.code, "truncated");
    ck_assert_str_eq(res.msg, "the fake ended before the response was complete");
    ck_assert_uint_eq(client->idle.n, 0);
    teardown();
}
END_TEST

/* The same end when the stream vouches for it completes that body. */
START_TEST(http_clean_end_completes_a_body_read_to_the_close)
{
    fake_stream_t *f = setup();
    get("http://127.0.0.1/f");
    const char resp[] = "HTTP/1.1 200 OK\r\n\r\nall of it";
    fake_send(f, resp, sizeof resp - 1);
    fake_end(f, UV_EOF);
    ck_assert_int_eq(res.done, 1);
    ck_assert_ptr_null(res.code);
    ck_assert_uint_eq(res.body_len, 9);
    teardown();
}
END_TEST

/* A stream's own failure: the peer's becomes "truncated" once part of the
 * response is in; ours (local) keeps its code. */
START_TEST(http_stream_fault_codes)
{
    for (int local = 0; local < 2; local++) {
        fake_stream_t *f = setup();
        get("http://127.0.0.1/f");
        const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc";
        fake_send(f, resp, sizeof resp - 1);
        f->fault = (stream_fault_t){.code = local ? "internal" : "tls", .msg = "m", .local = local};
        fake_end(f, STREAM_EFAULT);
        ck_assert_int_eq(res.done, 1);
        ck_assert_str_eq(res.code, local ? "internal" : "truncated");
        ck_assert_str_eq(res.msg, "m");
        teardown();
    }
}
END_TEST

/* Paused, the client stops the stream's reads; resumed, it starts them. */
START_TEST(http_pause_stops_reading)
{
    fake_stream_t *f = setup();
    http_req_t *req = get("http://127.0.0.1/f");
    http_req_set_paused(req, 1);
    ck_assert(!f->reading);
    http_req_set_paused(req, 0);
    ck_assert(f->reading);
    http_req_abort(req);
    ck_assert_int_eq(res.done, 0);
    teardown();
}
END_TEST

/* ---- the TLS stream over the fake ---------------------------------------- */

static void tls_user_on_read(stream_t *s, ssize_t n, buf_t *buf, const char *p)
{
    (void)s;
    (void)n;
    (void)buf;
    (void)p;
}

static void tls_user_on_write_error(stream_t *s, int err)
{
    (void)s;
    (void)err;
}

static const stream_cbs_t tls_user_cbs = {.on_read = tls_user_on_read,
                                          .on_write_error = tls_user_on_write_error};

static void tls_closed(void *arg)
{
    *(int *)arg = 1;
}

/* A request resumed while its TLS stream's spill is full (decryption is
 * behind) must not start the inner reads again: only stls_kick does, once
 * the backlog is below TLS_SPILL_MAX. Else each pause and resume of a slow
 * download lets one more read into a spill already at its bound. */
START_TEST(stls_resume_keeps_a_full_spill_stopped)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(config_defaults(&cfg), 0);
    bufpool_init(&pool, 4096, 4);
    tls_ctx_t *ctx = NULL;
    char err[600] = "";
    ck_assert_msg(tls_ctx_new(&cfg, &ctx, err, sizeof err) == 0, "%s", err);
    fake_stream_t *f = fake_new(&loop, &pool);
    stream_t *s = NULL;
    ck_assert_int_eq(
        stream_tls_new(&f->base, ctx, "localhost", "https://localhost:443", &loop, &pool, &s), 0);
    stream_set_cbs(s, &tls_user_cbs, NULL);
    stream_tls_t *st = (stream_tls_t *)s;
    st->handshaking = 0; /* as after the handshake: reading, into the spill */
    st->reading = 1;
    f->reading = 1;
    st->decrypt_in_flight = 1; /* an item is out, so the spill stays queued */
    while (f->reading) {       /* the peer sends until the spill is full */
        char *p = NULL;
        size_t room = 0;
        f->base.cbs->alloc(&f->base, &p, &room);
        ck_assert_ptr_nonnull(p);
        memset(p, 0x17, room);
        f->base.cbs->on_read(&f->base, (ssize_t)room, NULL, p);
    }
    ck_assert(st->spill_full);
    ck_assert_uint_ge(st->spill_len, TLS_SPILL_MAX);
    stream_read_stop(s);                       /* the request pauses, */
    ck_assert_int_eq(stream_read_start(s), 0); /* and resumes */
    ck_assert_msg(!f->reading, "the inner stream reads into a full spill");
    st->decrypt_in_flight = 0; /* the item never was: nothing to wait for */
    int closed = 0;
    stream_close(s, tls_closed, &closed);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(closed, 1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_uint_eq(pool.live, 0);
    tls_ctx_free(ctx);
    bufpool_destroy(&pool);
    config_free(&cfg);
}
END_TEST

static const char *no_env(const char *name)
{
    (void)name;
    return NULL;
}

/* Plain http through a proxy: the request goes on the connection pooled
 * for (origin, proxy), in absolute form, with the proxy's credentials;
 * the response is read as any. */
START_TEST(http_through_a_proxy_in_absolute_form)
{
    proxy_settings_t ps;
    char err[200];
    ck_assert_int_eq(proxy_settings_init(&ps, "http://alice:s3cret@127.0.0.1:3128", NULL, no_env,
                                         err, sizeof err),
                     0);
    fake_stream_t *f = setup_on("http://127.0.0.1:80 via http://127.0.0.1:3128");
    http_client_set_proxies(client, &ps);
    get("http://127.0.0.1/x?y=1");
    static const char head[] = "GET http://127.0.0.1/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    ck_assert_uint_ge(f->wlen, sizeof head - 1);
    ck_assert_msg(memcmp(f->written, head, sizeof head - 1) == 0, "%.*s", (int)f->wlen, f->written);
    f->written[f->wlen < sizeof f->written ? f->wlen : sizeof f->written - 1] = '\0';
    ck_assert_ptr_nonnull(
        strstr(f->written, "\r\nProxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n"));
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    fake_send(f, resp, sizeof resp - 1);
    ck_assert_int_eq(res.done, 1);
    ck_assert_ptr_null(res.code);
    ck_assert_uint_eq(res.body_len, 2);
    teardown();
    proxy_settings_free(&ps);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, http_request_goes_out_on_the_pooled_stream);
    tcase_add_loop_test(tc, http_response_split_at_every_byte, 0,
                        (int)(sizeof responses / sizeof responses[0]));
    tcase_add_test(tc, http_unverified_end_truncates);
    tcase_add_test(tc, http_clean_end_completes_a_body_read_to_the_close);
    tcase_add_test(tc, http_stream_fault_codes);
    tcase_add_test(tc, http_pause_stops_reading);
    tcase_add_test(tc, stls_resume_keeps_a_full_spill_stopped);
    tcase_add_test(tc, http_through_a_proxy_in_absolute_form);
    tcase_add_test(tc, http_post_sends_its_body);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
