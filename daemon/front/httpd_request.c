/* httpd_request: what a request to the HTTP front asks, and its answer
 * (see httpd.h): the head read by llhttp within bounds, the checks that
 * keep a browser's page from driving the front, the generic form
 * `/<URL>` through jobs_fetch, and the answer's head. */
#include "http_range.h"
#include "errcode.h"
#include "httpd_internal.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Request headers that carry credentials: passed on to the origin, where
 * they scope the entry as FETCH's header= does. The rest (User-Agent,
 * Accept...) is the client's business, not the origin's. */
static const char *const cred_names[] = {"Authorization", "Cookie", "Private-Token", "X-Api-Key",
                                         "X-Auth-Token"};

/* ---- reading the head -------------------------------------------------- */

static hreq_t *req_of(llhttp_t *p)
{
    return &((hconn_t *)p->data)->req;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    if (r->target_len + n > HTTPD_TARGET_MAX) {
        r->target_too_long = 1;
        return 0;
    }
    memcpy(r->target + r->target_len, at, n);
    r->target_len += n;
    r->target[r->target_len] = '\0';
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    for (size_t i = 0; i < n; i++, r->field_len++)
        if (r->field_len + 1 < sizeof r->field) {
            char ch = at[i];
            r->field[r->field_len] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    if (r->value_len + n >= sizeof r->value) {
        r->value_too_long = 1;
        return 0;
    }
    memcpy(r->value + r->value_len, at, n);
    r->value_len += n;
    return 0;
}

/* The value, whole, or "?" when it does not fit (nor did it fit the
 * request's bounds): a cut Range or Host would mean something else, and an
 * Origin dropped for its length would read as none. "?" is no Host, Origin
 * or Sec-Fetch-Site the front accepts, and no Range it serves. */
static void keep(char *slot, size_t cap, const hreq_t *r, int too_long)
{
    size_t n = r->value_len;
    while (n && (r->value[n - 1] == ' ' || r->value[n - 1] == '\t'))
        n--; /* trailing whitespace is not the value's (RFC 9110 5.5) */
    if (too_long || n >= cap) {
        snprintf(slot, cap, "?");
        return;
    }
    memcpy(slot, r->value, n);
    slot[n] = '\0';
}

/* A header line is in: keep what the front looks at. */
static int on_header_value_complete(llhttp_t *p)
{
    hreq_t *r = req_of(p);
    int too_long = r->value_too_long || r->field_len >= sizeof r->field;
    r->field[r->field_len < sizeof r->field ? r->field_len : sizeof r->field - 1] = '\0';
    r->value[r->value_len] = '\0';
    if (++r->nheaders > HTTPD_MAX_HEADERS) {
        llhttp_set_error_reason(p, "more than 64 header lines");
        return -1;
    }
    if (strcmp(r->field, "host") == 0) /* a second Host is no Host the front accepts */
        keep(r->host, sizeof r->host, r, too_long || r->host[0]);
    else if (strcmp(r->field, "origin") == 0)
        keep(r->origin, sizeof r->origin, r, too_long);
    else if (strcmp(r->field, "sec-fetch-site") == 0)
        keep(r->fetch_site, sizeof r->fetch_site, r, too_long);
    else if (strcmp(r->field, "range") == 0)
        keep(r->range, sizeof r->range, r, too_long);
    else if (strcmp(r->field, "content-type") == 0)
        keep(r->content_type, sizeof r->content_type, r, too_long);
    for (size_t i = 0; i < sizeof cred_names / sizeof cred_names[0] && !too_long; i++) {
        if (strcasecmp(r->field, cred_names[i]) != 0 || r->ncred == HTTPD_MAX_CRED)
            continue;
        if (asprintf(&r->cred[r->ncred], "%s: %s", cred_names[i], r->value) >= 0)
            r->ncred++;
    }
    r->field_len = r->value_len = 0;
    r->value_too_long = 0;
    return 0;
}

/* Stops at the end of the head: GET and HEAD have no body, and a request
 * with one is answered and the connection closed (its body is never read).
 * The one exception, the Hub's POST paths-info, has its body read here,
 * within HTTPD_BODY_MAX and with a Content-Length only (so that its size
 * is known before any byte is kept): llhttp goes on through on_body and
 * pauses at on_message_complete. Any other body, too large or chunked, is
 * refused by hreq_handle from the head. */
static int on_headers_complete(llhttp_t *p)
{
    hreq_t *r = req_of(p);
    r->method = llhttp_get_method(p);
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->content_length = p->content_length;
    r->has_body = r->chunked || p->content_length > 0;
    if (r->has_body && !r->chunked && r->method == HTTP_POST && !r->target_too_long &&
        r->content_length <= HTTPD_BODY_MAX && hf_api_takes_body(r->target)) {
        bytebuf_init(&r->body, HTTPD_BODY_MAX);
        r->reading_body = 1;
        return 0;
    }
    r->complete = 1;
    return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    if (!r->reading_body || bytebuf_append(&r->body, at, n)) {
        llhttp_set_error_reason(p, "the request body does not fit");
        return -1;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    hreq_t *r = req_of(p);
    if (r->reading_body) {
        r->reading_body = 0;
        r->body_done = 1;
        r->complete = 1;
    }
    return HPE_PAUSED;
}

void hreq_settings_init(llhttp_settings_t *s)
{
    llhttp_settings_init(s);
    s->on_url = on_url;
    s->on_header_field = on_header_field;
    s->on_header_value = on_header_value;
    s->on_header_value_complete = on_header_value_complete;
    s->on_headers_complete = on_headers_complete;
    s->on_body = on_body;
    s->on_message_complete = on_message_complete;
}

void hreq_reset(hreq_t *r)
{
    for (unsigned i = 0; i < r->ncred; i++)
        free(r->cred[i]);
    free(r->extra);
    free(r->pinned);
    bytebuf_free(&r->body);
    memset(r, 0, sizeof *r);
}

/* ---- answers ------------------------------------------------------------ */

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 507:
        return "Insufficient Storage";
    default:
        return "Error";
    }
}

int httpd_status_of(const char *code)
{
    return errcode_front_status(code); /* the table's front column */
}

/* Hands a finished head (and short body) to the connection to send. */
static void answer(hconn_t *c, char *text, int len, int close_after)
{
    if (len < 0) {
        hconn_close(c);
        return;
    }
    free(c->out);
    c->out = text;
    c->out_len = (size_t)len;
    c->out_off = 0;
    if (close_after)
        c->keep_alive = 0;
    hconn_send(c);
}

void hreq_answer_text(hconn_t *c, int status, const char *code, const char *msg, int close_after)
{
    char line[512];
    size_t n = 0;
    for (const char *m = msg; *m && n + 1 < sizeof line; m++) /* one line, printable */
        line[n++] = (unsigned char)*m < 0x20 ? ' ' : *m;
    line[n] = '\0';
    char *text = NULL;
    int len = asprintf(
        &text,
        "HTTP/1.1 %d %s\r\nServer: hubd\r\nContent-Type: text/plain; "
        "charset=utf-8\r\nContent-Length: %zu\r\n%s%s%s%s%s%s%s%s\r\n%s%s",
        status, reason(status), c->req.method == HTTP_HEAD ? (size_t)0 : n + 1,
        c->req.extra ? c->req.extra : "", code ? "X-Hubd-Error: " : "", code ? code : "",
        code ? "\r\n" : "", status == 405 ? "Allow: " : "",
        status == 405 ? (c->req.allow ? c->req.allow : "GET, HEAD") : "",
        status == 405 ? "\r\n" : "", close_after || !c->keep_alive ? "Connection: close\r\n" : "",
        c->req.method == HTTP_HEAD ? "" : line, c->req.method == HTTP_HEAD ? "" : "\n");
    answer(c, text, len, close_after);
}

/* The file is in the cache: its head, and its body (GET) from the blob. */
void hreq_answer_file(hconn_t *c, const job_result_t *res)
{
    static const char *const sources[] = {"hit", "download", "attached"};
    uint64_t first = 0, last = res->size ? res->size - 1 : 0;
    range_kind_t rk =
        http_range_parse(c->req.range[0] ? c->req.range : NULL, res->size, &first, &last);
    char *text = NULL;
    int len;
    if (rk == RANGE_UNSATISFIABLE) {
        len = asprintf(&text,
                       "HTTP/1.1 416 %s\r\nServer: hubd\r\nContent-Range: bytes */%llu\r\n"
                       "Content-Length: 0\r\n%s%s\r\n",
                       reason(416), (unsigned long long)res->size, c->req.extra ? c->req.extra : "",
                       c->keep_alive ? "" : "Connection: close\r\n");
        answer(c, text, len, 0);
        return;
    }
    uint64_t length = rk == RANGE_ONE ? last - first + 1 : res->size;
    char crange[96] = "";
    if (rk == RANGE_ONE)
        snprintf(crange, sizeof crange, "Content-Range: bytes %llu-%llu/%llu\r\n",
                 (unsigned long long)first, (unsigned long long)last,
                 (unsigned long long)res->size);
    len = asprintf(&text,
                   "HTTP/1.1 %d %s\r\nServer: hubd\r\nContent-Type: application/octet-stream\r\n"
                   "Content-Length: %llu\r\n%sAccept-Ranges: bytes\r\n%s%s%s"
                   "X-Hubd-Sha256: %s\r\nX-Hubd-Source: %s\r\n%s%s\r\n",
                   rk == RANGE_ONE ? 206 : 200, reason(rk == RANGE_ONE ? 206 : 200),
                   (unsigned long long)length, crange, c->req.own_etag ? "" : "ETag: \"",
                   c->req.own_etag ? "" : res->sha256, c->req.own_etag ? "" : "\"\r\n", res->sha256,
                   sources[res->kind], c->req.extra ? c->req.extra : "",
                   c->keep_alive ? "" : "Connection: close\r\n");
    if (c->req.method != HTTP_HEAD && length > 0) {
        c->body = job_fd_ref(res->fd);
        c->body_off = first;
        c->body_left = length;
        c->body_limit = first + length;
    }
    answer(c, text, len, 0);
}

/* ---- the fetch ------------------------------------------------------------ */

static hconn_t *conn_of_waiter(job_waiter_t *w)
{
    return container_of(w, hconn_t, w);
}

static void on_start(job_waiter_t *w, fetch_kind_t kind, uint64_t job_id)
{
    (void)w;
    (void)kind;
    (void)job_id;
}

/* What of a streamed download may go out: what is written, but not the
 * last HTTPD_HOLD_BACK bytes until the commit, so that no client ever has
 * the whole of a file whose SHA-256 then does not match: it is cut short
 * instead, and fails. */
static uint64_t stream_limit(const hconn_t *c)
{
    uint64_t total = (uint64_t)c->total;
    uint64_t cap = total > HTTPD_HOLD_BACK ? total - HTTPD_HOLD_BACK : 0;
    return c->written < cap ? c->written : cap;
}

/* The head of a download's answer as soon as its length is known and its
 * first bytes are on disk: the body then follows the partial file (the
 * same inode the commit links as the blob). A Range, or a length not
 * announced (a chunked origin), waits for the whole file instead. */
static void maybe_stream(hconn_t *c)
{
    if (c->streaming || c->total < 0 || c->written == 0 || c->req.range[0] ||
        c->req.method != HTTP_GET || c->req.git_sha1[0]) /* a SHA-1 to check: whole first */
        return;
    char path[4096];
    if (jobs_partial_path(&c->w, path, sizeof path))
        return;
    /* An open, not a read: the file was just made by this daemon. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    job_fd_t *body = fd >= 0 ? job_fd_new(fd) : NULL;
    if (!body) {
        log_warn("http front: cannot follow %s (%s): the answer waits for the whole file", path,
                 strerror(errno));
        return;
    }
    char *text = NULL;
    int len = asprintf(
        &text,
        "HTTP/1.1 200 %s\r\nServer: hubd\r\nContent-Type: application/octet-stream\r\n"
        "Content-Length: %lld\r\nAccept-Ranges: bytes\r\nX-Hubd-Source: %s\r\n%s%s\r\n",
        reason(200), (long long)c->total, c->w.kind == FETCH_ATTACHED ? "attached" : "download",
        c->req.extra ? c->req.extra : "", c->keep_alive ? "" : "Connection: close\r\n");
    if (len < 0) {
        job_fd_unref(body);
        return;
    }
    c->streaming = 1;
    c->body = body;
    c->body_off = 0;
    c->body_left = (uint64_t)c->total;
    c->body_limit = stream_limit(c);
    answer(c, text, len, 0);
}

static void on_progress(job_waiter_t *w, const job_progress_t *p)
{
    hconn_t *c = conn_of_waiter(w);
    if (p->total < 0 || c->total >= 0)
        return;
    c->total = p->total;
    if (c->req.method == HTTP_HEAD) {
        /* A HEAD is answered from the announced length: the download goes
         * on for the cache, without this request. */
        hreq_abandon(c);
        hreq_answer_head(c, (uint64_t)p->total);
        return;
    }
    maybe_stream(c);
}

/* The partial file grew (or went back to 0: the download restarted, and
 * what was sent may not be the file's any more). */
static void on_written(job_waiter_t *w, uint64_t written, uint64_t durable)
{
    hconn_t *c = conn_of_waiter(w);
    (void)durable;
    if (c->streaming && written < c->written) {
        /* The download restarted from byte 0 (the file changed upstream):
         * the head announced the old length and bytes of the old file may
         * be out, or going out in an item, so the answer is cut short. */
        log_info("http front uid %u: the download restarted after %llu bytes were sent: the "
                 "answer is cut short",
                 (unsigned)c->who.uid, (unsigned long long)c->body_off);
        hconn_close(c);
        return;
    }
    c->written = written;
    if (!c->streaming) {
        maybe_stream(c);
        return;
    }
    c->body_limit = stream_limit(c);
    hconn_more_body(c);
}

static void on_finish(job_waiter_t *w, const job_result_t *res)
{
    hconn_t *c = conn_of_waiter(w);
    c->waiting = 0;
    hreq_abandon(c); /* the quota's count */
    if (c->streaming) {
        /* The head is out: a failure can only cut the body short, so the
         * client fails rather than keep a wrong or partial file. */
        if (res->err_code || res->size != (uint64_t)c->total) {
            log_info("http front uid %u: %s: the streamed answer is cut short",
                     (unsigned)c->who.uid, res->err_code ? res->err_code : "length changed");
            hconn_close(c);
            return;
        }
        c->body_limit = (uint64_t)c->total; /* verified: the tail may go */
        hconn_more_body(c);
        return;
    }
    if (res->err_code) {
        hreq_answer_text(c, httpd_status_of(res->err_code), res->err_code,
                         res->err_msg ? res->err_msg : res->err_code, 0);
        return;
    }
    if (c->req.git_sha1[0]) {
        hf_check_git_sha1(c, res);
        return;
    }
    hreq_answer_file(c, res);
}

void hreq_answer_head(hconn_t *c, uint64_t length)
{
    char *text = NULL;
    int len =
        asprintf(&text,
                 "HTTP/1.1 200 %s\r\nServer: hubd\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: %llu\r\nAccept-Ranges: bytes\r\n%s%s\r\n",
                 reason(200), (unsigned long long)length, c->req.extra ? c->req.extra : "",
                 c->keep_alive ? "" : "Connection: close\r\n");
    answer(c, text, len, 0);
}

void hreq_answer_bytes(hconn_t *c, int status, const char *ctype, const char *body, size_t len)
{
    char *head = NULL;
    int hl = asprintf(&head,
                      "HTTP/1.1 %d %s\r\nServer: hubd\r\nContent-Type: %s\r\n"
                      "Content-Length: %zu\r\n%s%s\r\n",
                      status, reason(status), ctype, len, c->req.extra ? c->req.extra : "",
                      c->keep_alive ? "" : "Connection: close\r\n");
    size_t blen = c->req.method == HTTP_HEAD ? 0 : len;
    char *text = hl < 0 ? NULL : realloc(head, (size_t)hl + blen);
    if (!text) {
        free(head);
        hconn_close(c);
        return;
    }
    memcpy(text + hl, body, blen);
    answer(c, text, hl + (int)blen, 0);
}

void hreq_abandon(hconn_t *c)
{
    hf_abandon(c);
    hf_api_abandon(c);
    if (c->waiting) {
        c->waiting = 0;
        jobs_cancel(&c->w);
    }
    if (c->quota_counted) {
        c->quota_counted = 0;
        quota_request_end(c->srv->d.quota, &c->who);
    }
}

/* ---- the request's checks and routes --------------------------------------- */

/* Whether Host names this listener: 127.0.0.1, [::1] or localhost, with
 * its port (or none, on port 80). Any other name is what DNS rebinding
 * sends: a page of evil.example whose name now resolves to 127.0.0.1. */
static int host_is_ours(const hconn_t *c)
{
    unsigned port = c->local.ss_family == AF_INET6
                        ? ntohs(((const struct sockaddr_in6 *)&c->local)->sin6_port)
                        : ntohs(((const struct sockaddr_in *)&c->local)->sin_port);
    static const char *const names[] = {"127.0.0.1", "[::1]", "localhost"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s:%u", names[i], port);
        if (strcasecmp(c->req.host, want) == 0 ||
            (port == 80 && strcasecmp(c->req.host, names[i]) == 0))
            return 1;
    }
    return 0;
}

/* A browser's page may send requests here; the front answers only those
 * that are not cross-site: no Origin or the front's own, and no
 * Sec-Fetch-Site other than same-origin or none (typed by the user). */
static int from_a_page_elsewhere(const hconn_t *c)
{
    const hreq_t *r = &c->req;
    if (r->origin[0]) {
        char own[300];
        snprintf(own, sizeof own, "http://%s", r->host);
        if (strcasecmp(r->origin, own) != 0)
            return 1;
    }
    return r->fetch_site[0] && strcasecmp(r->fetch_site, "same-origin") != 0 &&
           strcasecmp(r->fetch_site, "none") != 0;
}

int hreq_generic_url(const char *target, char *url, size_t cap)
{
    const char *t = target + 1;
    size_t sl = strncasecmp(t, "https:", 6) == 0 ? 6 : strncasecmp(t, "http:", 5) == 0 ? 5 : 0;
    if (!sl || t[sl] != '/')
        return -1;
    const char *rest = t + sl + (t[sl + 1] == '/' ? 2 : 1);
    if (!*rest || *rest == '/')
        return -1;
    int n = snprintf(url, cap, "%.*s//%s", (int)sl, t, rest);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

void hreq_handle(hconn_t *c)
{
    hreq_t *r = &c->req;
    c->keep_alive = llhttp_should_keep_alive(&c->parser) && (!r->has_body || r->body_done);
    if (c->refuse_status) {
        hreq_answer_text(c, c->refuse_status, c->refuse_code, c->refuse_msg, 1);
        return;
    }
    if (!host_is_ours(c)) {
        hreq_answer_text(c, 403, "forbidden",
                         "Host must name this listener (127.0.0.1, [::1] or localhost, with its "
                         "port)",
                         1);
        return;
    }
    if (from_a_page_elsewhere(c)) {
        log_warn("http front uid %u: refused a cross-site request (Origin %s, Sec-Fetch-Site %s)",
                 (unsigned)c->who.uid, r->origin[0] ? r->origin : "-",
                 r->fetch_site[0] ? r->fetch_site : "-");
        hreq_answer_text(c, 403, "forbidden", "cross-site requests are refused", 1);
        return;
    }
    int api = strncmp(r->target, "/hf/api/", 8) == 0;
    if (r->method != HTTP_GET && r->method != HTTP_HEAD && !(api && r->method == HTTP_POST)) {
        hreq_answer_text(c, 405, "bad_request", "the front answers GET and HEAD", 1);
        return;
    }
    if (r->has_body && !r->body_done && api && hf_api_takes_body(r->target) &&
        r->method == HTTP_POST) {
        if (r->chunked)
            hreq_answer_text(c, 411, "bad_request",
                             "the front reads a request body with a Content-Length only", 1);
        else
            hreq_answer_text(c, 413, "bad_request", "a paths-info body is at most 1 MiB here", 1);
        return;
    }
    if (r->has_body && !r->body_done && api && r->method == HTTP_POST) {
        r->allow = "GET"; /* a POST elsewhere under /hf/api: its body is not read */
        hreq_answer_text(c, 405, "bad_request", "the Hub's API is asked with GET", 1);
        return;
    }
    if (r->has_body && !r->body_done) {
        hreq_answer_text(c, 413, "bad_request",
                         "the front reads no request body but a paths-info POST's", 1);
        return;
    }
    if (r->target_too_long) {
        hreq_answer_text(c, 414, "bad_request", "the request target is longer than 8 KiB", 1);
        return;
    }
    if (strcmp(r->target, "/hf") == 0 || strncmp(r->target, "/hf/", 4) == 0) {
        c->state = HC_FETCH; /* the Hub is asked first */
        hf_handle(c);
        return;
    }
    char url[HTTPD_TARGET_MAX + 2];
    if (r->target[0] != '/' || hreq_generic_url(r->target, url, sizeof url)) {
        hreq_answer_text(c, 404, "bad_url",
                         "ask for /<absolute http or https URL>, e.g. "
                         "/https://example.org/model.bin",
                         0);
        return;
    }
    hreq_fetch(c, url, NULL);
}

int hreq_quota_begin(hconn_t *c)
{
    httpd_t *h = c->srv;
    unsigned waiting;
    if (quota_request_begin(h->d.quota, &c->who, h->d.cfg->max_requests_per_user, &waiting)) {
        char msg[160];
        snprintf(msg, sizeof msg, "uid %u has %u requests waiting already (max_requests_per_user)",
                 (unsigned)c->who.uid, waiting);
        hreq_answer_text(c, 429, "too_many_requests", msg, 0);
        return -1;
    }
    c->quota_counted = 1;
    return 0;
}

void hreq_fetch(hconn_t *c, const char *url, const char *sha256)
{
    httpd_t *h = c->srv;
    hreq_t *r = &c->req;
    if (hreq_quota_begin(c))
        return;
    memset(&c->w, 0, sizeof c->w);
    c->w.on_start = on_start;
    c->w.on_progress = on_progress;
    c->w.on_finish = on_finish;
    c->w.on_written = on_written;
    c->w.uid = c->who.uid;
    c->total = -1;
    c->written = 0;
    c->streaming = 0;
    c->state = HC_FETCH;
    c->waiting = 1;
    const char *code, *msg;
    if (jobs_fetch(h->d.jobs, url, sha256, (const char *const *)r->cred, r->ncred, &c->w, &code,
                   &msg)) {
        c->waiting = 0;
        hreq_abandon(c);
        hreq_answer_text(c, httpd_status_of(code), code, msg, 0);
        return;
    }
    log_debug("http front uid %u: %s %s", (unsigned)c->who.uid,
              r->method == HTTP_HEAD ? "HEAD" : "GET", url);
}
