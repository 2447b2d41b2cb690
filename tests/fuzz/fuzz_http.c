/* fuzz_http: HTTP responses through hubd's response path (daemon/net/http.c).
 *
 * The input is the bytes a server sends. http_fuzz_response() feeds them to
 * a connection on a socket-less TCP stream through the stream's read path
 * (stream_tcp_inject), so llhttp runs with hubd's settings and callbacks
 * (header capture and its limits, body slices, chunked bodies, keep-alive
 * decision, the end of the message and EOF handling) exactly as for a
 * socket. The input is cut into up to 8 reads whose sizes, and what the
 * callbacks do, come from a hash of the input, so the committed seeds stay
 * plain HTTP responses.
 *
 * The callbacks act like job.c's: 200, 203 and 206 bodies are delivered,
 * others discarded; a Location is resolved against the request's URL, a
 * Content-Range and a Retry-After are read; the request wants a list
 * header (Link, its lines joined) and a single one (the last line kept),
 * as the HTTP front's Hub routes do. Checks: header values are
 * strings under the 8 KiB limit, body slices lie inside their read buffer,
 * on_done comes exactly once (never after an abort), and a delivered body
 * that ended well has its announced Content-Length.
 */
#include "http.h"
#include "url.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

typedef struct {
    unsigned abort_in_headers; /* abort from on_headers (job_fail does) */
    unsigned abort_after;      /* abort in the Nth body slice; 0: never */
    int headers_seen, mode, aborted, done_calls, ok;
    int64_t content_length;
    uint64_t body;
    size_t slices;
    const url_t *base;
} fuzz_state_t;

/* Response headers the request asks for: one a list, one not. */
static const http_want_t fuzz_wanted[] = {{"Link", 1}, {"X-Repo-Commit", 0}};

static void check_value(const char *v)
{
    if (v)
        CHECK(strlen(v) < 8192);
}

static int on_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    fuzz_state_t *st = data;
    CHECK(!st->headers_seen && st->done_calls == 0);
    st->headers_seen = 1;
    CHECK(resp->status >= 200 && resp->status <= 999);
    CHECK(resp->content_length >= -1);
    st->content_length = resp->content_length;
    for (size_t i = 0; i < sizeof fuzz_wanted / sizeof fuzz_wanted[0]; i++)
        check_value(resp->wanted[i]);
    check_value(resp->location);
    check_value(resp->etag);
    check_value(resp->last_modified);
    check_value(resp->content_range);
    check_value(resp->retry_after);
    if (resp->location && *resp->location) { /* as job.c follows a redirect */
        char *to = NULL;
        if (url_resolve(st->base, resp->location, &to) == 0) {
            url_t u;
            if (url_parse(to, &u, NULL) == 0)
                url_free(&u);
            free(to);
        }
    }
    if (resp->content_range) {
        unsigned long long a, b, c;
        (void)sscanf(resp->content_range, "bytes %llu-%llu/%llu", &a, &b, &c);
    }
    if (resp->retry_after) {
        char *end;
        (void)strtoul(resp->retry_after, &end, 10);
    }
    if (st->abort_in_headers) {
        st->aborted = 1;
        http_req_abort(req);
        return HTTP_BODY_DISCARD;
    }
    int s = resp->status;
    st->mode = s == 200 || s == 203 || s == 206 ? HTTP_BODY_DELIVER : HTTP_BODY_DISCARD;
    return st->mode;
}

static void on_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    fuzz_state_t *st = data;
    CHECK(st->headers_seen && !st->aborted && st->mode == HTTP_BODY_DELIVER);
    CHECK(buf && n > 0 && p >= buf->data && p + n <= buf->data + buf->len);
    volatile char sink = p[0] ^ p[n - 1]; /* the bytes are readable */
    (void)sink;
    st->body += n;
    if (st->content_length >= 0)
        CHECK(st->body <= (uint64_t)st->content_length);
    if (++st->slices == st->abort_after) {
        st->aborted = 1;
        http_req_abort(req);
    }
}

static void on_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    (void)req;
    fuzz_state_t *st = data;
    CHECK(!st->aborted);
    st->done_calls++;
    if (code) {
        CHECK(code[0] && msg && msg[0]);
        return;
    }
    st->ok = 1;
    CHECK(st->headers_seen);
    if (st->mode == HTTP_BODY_DELIVER && st->content_length >= 0)
        CHECK(st->body == (uint64_t)st->content_length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static url_t base;
    static const http_req_cbs_t cbs = {on_headers, on_body, on_done};
    if (!base.mem)
        CHECK(url_parse("http://origin.example:8080/models/v1/w.bin?rev=2", &base, NULL) == 0);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    size_t reads[8], nreads = (size_t)(h & 7); /* 0: one read of everything */
    for (size_t i = 0; i < nreads; i++) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(h >> 33);
        reads[i] = 1 + (r & 1 ? r % 16 : r % (len + 1));
    }
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    fuzz_state_t st = {
        .abort_in_headers = (h >> 40) % 16 == 0,
        .abort_after = (h >> 48) % 8 == 0 ? 1 + (unsigned)(h >> 56) % 4 : 0,
        .base = &base,
    };
    CHECK(http_fuzz_response(data, len, reads, nreads, fuzz_wanted,
                             sizeof fuzz_wanted / sizeof fuzz_wanted[0], &cbs, &st) == 0);
    CHECK(st.done_calls == (st.aborted ? 0 : 1));
    return 0;
}
