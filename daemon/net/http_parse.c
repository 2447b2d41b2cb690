/* http_parse: llhttp's callbacks for a response, the header phase's limits,
 * the few headers every response reports and those its caller wanted. */
#include "http_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_MAX_HEADER_BYTES (64 * 1024) /* header phase of a request, 1xx responses included */
#define HTTP_MAX_HEADERS 128              /* header lines in it, likewise */
#define HTTP_MAX_INFORMATIONAL 16         /* 1xx responses before the final one */
#define HTTP_MAX_VALUE 8192               /* one header value we keep */
#define HTTP_DISCARD_MAX (64 * 1024)      /* larger unwanted bodies close the connection */

/* Drops the header values kept from a response. Each message begins with
 * this: a 1xx's ETag or Location is not the final response's, and taking it
 * for one would, say, resume the file on a validator it never had. */
void http_req_forget_headers(http_req_t *req)
{
    free(req->location);
    free(req->etag);
    free(req->last_modified);
    free(req->content_range);
    free(req->retry_after);
    req->location = req->etag = req->last_modified = req->content_range = req->retry_after = NULL;
    free(req->content_type);
    req->content_type = NULL;
    for (size_t i = 0; i < req->nwanted; i++) {
        free(req->wanted_value[i]);
        req->wanted_value[i] = NULL;
    }
}

static http_req_t *parser_req(llhttp_t *p)
{
    http_conn_t *conn = p->data;
    return conn->req && !conn->req->aborted ? conn->req : NULL;
}

static int parse_fail(llhttp_t *p, const char *code, const char *msg)
{
    http_conn_t *conn = p->data;
    conn->fail_code = code;
    conn->fail_msg = msg;
    return -1;
}

static int on_message_begin(llhttp_t *p)
{
    http_req_t *req = parser_req(p);
    if (!req)
        return -1;
    /* The header limits are not reset here: they are the request's (see
     * req_start_response). What a message says is its own, though. */
    http_req_forget_headers(req);
    req->transfer_codings = 0;
    req->field_len = req->value_len = 0;
    return 0;
}

static int count_header_bytes(llhttp_t *p, http_req_t *req, size_t n)
{
    req->header_bytes += n;
    if (req->header_bytes > HTTP_MAX_HEADER_BYTES)
        return parse_fail(p, "http_parse", "response header section too large");
    return 0;
}

/* Status lines count toward the header bytes as well: a reason phrase is as
 * long as the server likes. */
static int on_status(llhttp_t *p, const char *at, size_t n)
{
    (void)at;
    http_req_t *req = parser_req(p);
    if (!req || count_header_bytes(p, req, n))
        return -1;
    return 0;
}

static const char te_unsupported[] =
    "the response's transfer coding is not supported (hubd decodes a single chunked alone)";

/* Whether a Transfer-Encoding value is "chunked" alone (any case, optional
 * whitespace around it). */
static int is_chunked_alone(const char *v, size_t n)
{
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    return n == 7 && strncasecmp(v, "chunked", 7) == 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    http_req_t *req = parser_req(p);
    if (!req || count_header_bytes(p, req, n))
        return -1;
    for (size_t i = 0; i < n; i++, req->field_len++)
        if (req->field_len < sizeof req->field - 1)
            req->field[req->field_len] =
                (char)((at[i] >= 'A' && at[i] <= 'Z') ? at[i] + 32 : at[i]);
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    http_req_t *req = parser_req(p);
    if (!req || count_header_bytes(p, req, n))
        return -1;
    if (req->value_len + n > HTTP_MAX_VALUE - 1) {
        req->value_len = HTTP_MAX_VALUE; /* too long to keep: dropped if it is one of ours */
        return 0;
    }
    if (!req->value && !(req->value = malloc(HTTP_MAX_VALUE)))
        return parse_fail(p, "internal", "out of memory");
    memcpy(req->value + req->value_len, at, n);
    req->value_len += n;
    return 0;
}

/* Keeps the few headers every response reports and those the request
 * wanted (http_req_opts_t); the rest only count toward the header size
 * limit. */
static int on_header_value_complete(llhttp_t *p)
{
    http_req_t *req = parser_req(p);
    if (!req)
        return -1;
    char **slot = NULL;
    int list = 0; /* slot's lines are one list: joined */
    if (++req->nheaders > HTTP_MAX_HEADERS)
        return parse_fail(p, "http_parse", "more than 128 response header lines");
    if (req->field_len < sizeof req->field) {
        req->field[req->field_len] = '\0';
        /* We ask for identity; a body encoded anyway is not the file, and
         * hubd never decompresses what a server sends. */
        if (strcmp(req->field, "content-encoding") == 0 &&
            !(req->value_len == 8 && strncasecmp(req->value, "identity", 8) == 0))
            return parse_fail(p, "http_parse",
                              "the response has a Content-Encoding (hubd asks for identity)");
        /* llhttp takes a list ending in chunked (gzip, chunked) and undoes
         * the chunked part only: the rest of the coding would be stored as
         * the file. chunked is the one transfer coding hubd decodes. */
        if (strcmp(req->field, "transfer-encoding") == 0) {
            if (++req->transfer_codings > 1 || req->value_len >= HTTP_MAX_VALUE ||
                !is_chunked_alone(req->value ? req->value : "", req->value_len))
                return parse_fail(p, "http_parse", te_unsupported);
        }
        if (strcmp(req->field, "location") == 0)
            slot = &req->location;
        else if (strcmp(req->field, "etag") == 0)
            slot = &req->etag;
        else if (strcmp(req->field, "last-modified") == 0)
            slot = &req->last_modified;
        else if (strcmp(req->field, "content-range") == 0)
            slot = &req->content_range;
        else if (strcmp(req->field, "retry-after") == 0)
            slot = &req->retry_after;
        else if (strcmp(req->field, "content-type") == 0)
            slot = &req->content_type;
        for (size_t i = 0; i < req->nwanted && !slot; i++)
            if (strcasecmp(req->field, req->wanted[i].name) == 0) {
                slot = &req->wanted_value[i];
                list = req->wanted[i].list;
            }
    }
    if (list && *slot && req->value_len < HTTP_MAX_VALUE) {
        /* A list's lines are one list (RFC 9110 5.3, RFC 8288 for Link):
         * joined, within the same bound (a line that would pass it is
         * dropped). */
        char *both = NULL;
        if (strlen(*slot) + 2 + req->value_len < HTTP_MAX_VALUE &&
            asprintf(&both, "%s, %.*s", *slot, (int)req->value_len, req->value) < 0)
            return parse_fail(p, "internal", "out of memory");
        if (both) {
            free(*slot);
            *slot = both;
        }
        slot = NULL;
    }
    if (slot && req->value_len < HTTP_MAX_VALUE) {
        free(*slot);
        if (!(*slot = strndup(req->value ? req->value : "", req->value_len)))
            return parse_fail(p, "internal", "out of memory");
    }
    req->field_len = req->value_len = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    http_conn_t *conn = p->data;
    http_req_t *req = parser_req(p);
    if (!req)
        return -1;
    /* The scratch for values is done with: a slow body should not keep
     * HTTP_MAX_VALUE bytes for each of a thousand downloads. */
    free(req->value);
    req->value = NULL;
    req->value_len = 0;
    req->status = llhttp_get_status_code(p);
    if (req->status < 100 || req->status > 599) /* llhttp takes any 3 digits */
        return parse_fail(p, "http_parse", "the response's status is not an HTTP status");
    /* The framing is llhttp's: a Transfer-Encoding we took for chunked that
     * llhttp did not ("chunked" and a tab, which it reads as another coding
     * and so reads the body to the close) would leave the chunk sizes in
     * the file. */
    if (req->transfer_codings && !(p->flags & F_CHUNKED))
        return parse_fail(p, "http_parse", te_unsupported);
    if (req->status < 200) { /* 1xx: informational, the real response follows */
        if (++req->ninformational > HTTP_MAX_INFORMATIONAL)
            return parse_fail(p, "http_parse",
                              "more than 16 informational (1xx) responses before the final one");
        return 0;
    }
    /* The header phase is over: from here only the idle timeout applies
     * (http.c's conn_feed re-arms the timer when llhttp returns). */
    req->headers_done = 1;
    /* llhttp reads Content-Length as a uint64; lengths are int64 from here
     * on, with -1 for unknown. A larger one would turn negative (found by
     * fuzz_http), and no file is that large anyway. */
    if ((p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED) &&
        p->content_length > (uint64_t)INT64_MAX)
        return parse_fail(p, "http_parse", "the response's Content-Length is too large");
    http_response_t resp = {
        .status = req->status,
        .content_length = (p->flags & F_CONTENT_LENGTH) ? (int64_t)p->content_length : -1,
        .location = req->location,
        .etag = req->etag,
        .last_modified = req->last_modified,
        .content_range = req->content_range,
        .retry_after = req->retry_after,
        .from_proxy = req->absolute,
    };
    for (size_t i = 0; i < req->nwanted; i++)
        resp.wanted[i] = req->wanted_value[i];
    resp.content_type = req->content_type;
    if (p->flags & F_CHUNKED)
        resp.content_length = -1;
    int mode = req->cbs.on_headers(req, &resp, req->data);
    if (req->aborted || conn->req != req)
        return -1;
    req->discard = mode == HTTP_BODY_DISCARD;
    if (req->discard && resp.content_length != 0 &&
        (resp.content_length < 0 || resp.content_length > HTTP_DISCARD_MAX)) {
        /* Not worth reading to keep the connection: end here and close it. */
        req->message_done = 1;
        return -1;
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    http_conn_t *conn = p->data;
    http_req_t *req = parser_req(p);
    if (!req)
        return -1;
    if (req->status < 200) /* a 1xx has no body: these bytes are not the file */
        return parse_fail(p, "http_parse", "an informational response with a body");
    if (!req->discard)
        req->cbs.on_body(req, conn->rbuf, at, n, req->data);
    return req->aborted ? -1 : 0;
}

static int on_message_complete(llhttp_t *p)
{
    http_req_t *req = parser_req(p);
    if (!req)
        return -1;
    if (req->status < 200)
        return 0;
    req->message_done = 1;
    return HPE_PAUSED; /* stop here: bytes after the message are not ours */
}

void http_parse_settings_init(llhttp_settings_t *s)
{
    llhttp_settings_init(s);
    s->on_message_begin = on_message_begin;
    s->on_status = on_status;
    s->on_header_field = on_header_field;
    s->on_header_value = on_header_value;
    s->on_header_value_complete = on_header_value_complete;
    s->on_headers_complete = on_headers_complete;
    s->on_body = on_body;
    s->on_message_complete = on_message_complete;
}
