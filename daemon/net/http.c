/* http: connections, the keep-alive pool, and response parsing. */
#include "http.h"
#include "log.h"
#include "tls.h"

#include <assert.h>
#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HTTP_MAX_HEADER_BYTES (64 * 1024) /* header phase of a request, 1xx responses included */
#define HTTP_MAX_HEADERS 128              /* header lines in it, likewise */
#define HTTP_MAX_INFORMATIONAL 16         /* 1xx responses before the final one */
#define HTTP_MAX_VALUE 8192               /* one header value we keep */
#define HTTP_MAX_IDLE 32                  /* pooled idle connections, all origins */
#define HTTP_DISCARD_MAX (64 * 1024)      /* larger unwanted bodies close the connection */
#define HUBD_USER_AGENT "hubd/0.1.0"
#define TLS_SPILL_MAX (4u << 20)   /* ciphertext queued for decryption: stop reading */
#define TLS_SPILL_ROOM (64 * 1024) /* room offered to each read */
#define TLS_WORK_MAX_OUT 1040      /* plaintext buffers per item: TLS_SPILL_MAX / 4 KiB + 2 */

typedef enum {
    CONN_RESOLVING,  /* uv_getaddrinfo in flight */
    CONN_CONNECTING, /* uv_tcp_connect to ai_cur in flight */
    CONN_HANDSHAKE,  /* https: TLS handshake in progress */
    CONN_ACTIVE,     /* request written or being written, response being read */
    CONN_IDLE,       /* in the pool, reading only to notice a close */
    CONN_CLOSING,    /* handles closing; freed when the last one is closed */
} conn_state_t;

typedef struct http_conn http_conn_t;

/* One decrypt work item: the ciphertext handed over and the empty pooled
 * buffers it fills with plaintext. */
typedef struct tls_work {
    uv_work_t req;
    http_conn_t *conn;
    char *in; /* ciphertext, owned by the item */
    size_t in_len;
    buf_t *out[TLS_WORK_MAX_OUT]; /* one reference each, from the loop */
    size_t nout;
    int status; /* TLS_WORK_* */
    char msg[300];
} tls_work_t;

struct http_client {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    bufpool_t *pool;
    http_conn_t *idle;    /* idle connections, most recently used first */
    unsigned nidle;       /* length of idle */
    unsigned nconns;      /* connections not yet freed */
    int closing;          /* http_client_close called: free at nconns == 0 */
    uv_timer_t defer;     /* runs deferred completions; its close frees the client */
    http_req_t *deferred; /* requests that ended inside http_request(), oldest first */
    void (*close_cb)(void *);
    void *close_arg;
    llhttp_settings_t settings;
    tls_ctx_t *tls;            /* shared TLS configuration; not owned */
    const netpolicy_t *policy; /* NULL: no limits; not owned */
};

struct http_conn {
    conn_state_t state;
    http_client_t *client;
    char key[288];        /* "scheme://host:port": which pool it may serve */
    uv_tcp_t tcp;         /* valid while tcp_open */
    uv_timer_t timer;     /* connect, first-byte/idle (and header deadline), keep-alive */
    uv_getaddrinfo_t gai; /* DNS request */
    uv_connect_t connect_req;
    struct addrinfo *ai;     /* resolved addresses, freed at close */
    struct addrinfo *ai_cur; /* the address being tried */
    int tcp_open;            /* tcp initialised and not yet closed */
    int pending;             /* close callbacks and DNS answers still to come */
    int last_err;            /* last connect error (libuv code) for the message */
    int denied;              /* resolved addresses the network policy refused */
    char denied_addr[64];    /* the first of them, for the message */
    llhttp_t parser;
    http_req_t *req;         /* the request this connection serves, or NULL */
    buf_t *rbuf;             /* buffer reads land in; one reference held */
    int in_execute;          /* inside llhttp_execute: defer teardown */
    int reused;              /* came from the pool: may be stale */
    unsigned writes_pending; /* uv_writes not yet completed (they own their bytes) */
    tls_conn_t *tls;         /* https only: the TLS state; NULL for http */
    int tls_eof;             /* the server sent close_notify: a clean end */
    /* https, after the handshake: ciphertext collects in spill on the loop;
     * a decrypt work item (one at a time) owns the TLS state and turns what
     * it was handed into plaintext in pooled buffers. */
    char *spill; /* ciphertext read, not yet handed to a work item */
    size_t spill_len, spill_cap;
    int spill_full;        /* reading stopped: spill is at TLS_SPILL_MAX */
    int decrypting;        /* the decrypt item is in flight */
    int tls_more;          /* the last item stopped for want of room, not input */
    ssize_t eof_pending;   /* EOF or error read while ciphertext was still queued */
    int plain_pending;     /* more decrypted bytes follow the ones being parsed */
    uint64_t t_handshake;  /* uv_now() when the TLS handshake started */
    tls_work_t work;       /* the decrypt item (valid while decrypting) */
    const char *fail_code; /* set by a parser callback that stopped the parse */
    const char *fail_msg;
    http_conn_t *next_idle; /* link in client->idle */
};

struct http_req {
    http_client_t *client;
    http_conn_t *conn; /* NULL between connections */
    http_req_cbs_t cbs;
    void *data;
    char *key;  /* pool key */
    char *host; /* for getaddrinfo */
    char port[8];
    char *head; /* request text */
    size_t head_len;
    int paused;       /* http_req_set_paused(1) in force */
    int aborted;      /* http_req_abort during llhttp_execute */
    int retried;      /* already retried a stale pooled connection */
    int got_response; /* any response byte arrived on this connection */
    int discard;      /* HTTP_BODY_DISCARD */
    int message_done; /* on_message_complete for a final status */
    int status;
    /* The header phase: from sending the request to the final response's
     * headers. Its limits cover every response to this request (1xx ones
     * too), so they are reset when the request starts on a connection,
     * never at a message begin: endless 1xx responses cannot renew them. */
    size_t header_bytes;       /* status lines and header bytes so far */
    unsigned nheaders;         /* header lines so far */
    unsigned ninformational;   /* 1xx responses so far */
    int headers_done;          /* the final response's headers are in: no deadline */
    uint64_t header_deadline;  /* uv_now() when the header phase fails (header_timeout) */
    unsigned transfer_codings; /* Transfer-Encoding lines in the current message */
    char field[64];            /* the header name being read, lower-cased */
    size_t field_len;          /* may exceed sizeof field: then it is not ours */
    char *value;               /* the header value being read (HTTP_MAX_VALUE) */
    size_t value_len;
    char *location, *etag, *last_modified, *content_range, *retry_after;
    int starting;    /* inside http_request(): completions are deferred */
    int is_deferred; /* on client->deferred */
    http_req_t *next_deferred;
    const char *deferred_code; /* the deferred outcome */
    char deferred_msg[512];
};

static void conn_start_request(http_conn_t *conn, http_req_t *req);
static void conn_close(http_conn_t *conn);
static void conn_try_next(http_conn_t *conn);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);
static int conn_write_owned(http_conn_t *conn, char *buf, size_t n);
static void conn_tls_kick(http_conn_t *conn);
static void req_connect_new(http_req_t *req);

/* ---- request life ---------------------------------------------------- */

/* Drops the header values kept from a response. Each message begins with
 * this: a 1xx's ETag or Location is not the final response's, and taking it
 * for one would, say, resume the file on a validator it never had. */
static void req_forget_headers(http_req_t *req)
{
    free(req->location);
    free(req->etag);
    free(req->last_modified);
    free(req->content_range);
    free(req->retry_after);
    req->location = req->etag = req->last_modified = req->content_range = req->retry_after = NULL;
}

static void req_free(http_req_t *req)
{
    free(req->key);
    free(req->host);
    free(req->head);
    free(req->value);
    req_forget_headers(req);
    free(req);
}

/* The request is being sent on a connection (now, in uv_now() time): the
 * state of its responses starts over, and so does the header phase, with
 * its limits and its deadline. */
static void req_start_response(http_req_t *req, uint64_t now)
{
    req->got_response = 0;
    req->message_done = 0;
    req->status = 0;
    req->header_bytes = 0;
    req->nheaders = 0;
    req->ninformational = 0;
    req->headers_done = 0;
    req->header_deadline = now + req->client->cfg->header_timeout_ms;
}

/* The one place a request ends with a callback. The connection must already
 * be detached (idle, closing, or handed back). */
static void on_deferred(uv_timer_t *t);

static void req_finish(http_req_t *req, const char *code, const char *msg)
{
    assert(req->conn == NULL);
    if (req->starting) {
        /* Inside http_request(): the caller has not even stored the request
         * yet. Report it from the next loop iteration instead. */
        http_client_t *c = req->client;
        req->deferred_code = code;
        snprintf(req->deferred_msg, sizeof req->deferred_msg, "%s", msg ? msg : "");
        http_req_t **pp = &c->deferred;
        while (*pp)
            pp = &(*pp)->next_deferred;
        *pp = req;
        req->is_deferred = 1;
        uv_timer_start(&c->defer, on_deferred, 0, 0);
        return;
    }
    if (!req->aborted)
        req->cbs.on_done(req, code, msg, req->data);
    req_free(req);
}

static void on_deferred(uv_timer_t *t)
{
    http_client_t *c = t->data;
    while (c->deferred) {
        http_req_t *req = c->deferred;
        c->deferred = req->next_deferred;
        req->is_deferred = 0;
        req_finish(req, req->deferred_code, req->deferred_code ? req->deferred_msg : NULL);
    }
}

/* Detaches the request from a connection that failed and closes it. A request
 * that was on a reused pooled connection and saw no byte of response gets one
 * more try on a fresh connection: the server may have closed the idle
 * connection just as we sent (GET is idempotent). */
static void conn_fail(http_conn_t *conn, const char *code, const char *msg)
{
    http_req_t *req = conn->req;
    int retry = req && conn->reused && !req->got_response && !req->retried;
    conn->req = NULL;
    conn_close(conn);
    if (!req)
        return;
    req->conn = NULL;
    if (retry && !req->aborted) {
        log_debug("stale pooled connection to %s, retrying on a new one", req->key);
        req->retried = 1;
        req_connect_new(req);
        return;
    }
    req_finish(req, code, msg);
}

static void conn_fail_uv(http_conn_t *conn, const char *code, const char *what, int uverr)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s: %s", what, conn->key, uv_strerror(uverr));
    conn_fail(conn, code, msg);
}

/* ---- connection life ------------------------------------------------- */

static void on_closer_closed(uv_handle_t *h)
{
    http_client_t *c = h->data;
    void (*cb)(void *) = c->close_cb;
    void *arg = c->close_arg;
    free(c);
    cb(arg);
}

static void client_free(http_client_t *c)
{
    uv_close((uv_handle_t *)&c->defer, on_closer_closed);
}

static void conn_maybe_free(http_conn_t *conn)
{
    if (conn->pending > 0)
        return;
    http_client_t *c = conn->client;
    if (conn->ai)
        uv_freeaddrinfo(conn->ai);
    if (conn->rbuf)
        buf_unref(c->pool, conn->rbuf);
    tls_conn_free(conn->tls);
    free(conn->spill);
    free(conn);
    c->nconns--;
    if (c->closing && c->nconns == 0)
        client_free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    http_conn_t *conn = h->data;
    if (h == (uv_handle_t *)&conn->tcp && conn->state != CONN_CLOSING) {
        /* A failed connect attempt: go on with the next address. */
        conn->tcp_open = 0;
        conn_try_next(conn);
        return;
    }
    conn->pending--;
    conn_maybe_free(conn);
}

static void idle_remove(http_conn_t *conn)
{
    http_client_t *c = conn->client;
    for (http_conn_t **pp = &c->idle; *pp; pp = &(*pp)->next_idle) {
        if (*pp == conn) {
            *pp = conn->next_idle;
            conn->next_idle = NULL;
            c->nidle--;
            return;
        }
    }
}

/* The single close path of a connection: idempotent, safe inside callbacks
 * (memory goes only when the last close callback has run). */
static void conn_close(http_conn_t *conn)
{
    if (conn->state == CONN_CLOSING)
        return;
    if (conn->state == CONN_IDLE)
        idle_remove(conn);
    if (conn->tls && !conn->decrypting &&
        (conn->state == CONN_ACTIVE || conn->state == CONN_IDLE)) {
        /* Best effort: the alert usually leaves in uv_write's first try,
         * before uv_close cancels what is left. */
        size_t n;
        tls_conn_close_notify(conn->tls);
        char *out = tls_conn_take_output(conn->tls, &n);
        if (out && conn_write_owned(conn, out, n) != 0)
            log_debug("close_notify to %s not sent", conn->key);
    }
    conn->state = CONN_CLOSING;
    conn->pending++; /* the timer */
    uv_close((uv_handle_t *)&conn->timer, on_handle_closed);
    if (conn->tcp_open && !uv_is_closing((uv_handle_t *)&conn->tcp)) {
        conn->pending++;
        uv_close((uv_handle_t *)&conn->tcp, on_handle_closed);
    } else if (conn->tcp_open) {
        conn->pending++; /* a failed attempt is closing: its callback counts now */
    }
}

static void on_timeout(uv_timer_t *t)
{
    http_conn_t *conn = t->data;
    switch (conn->state) {
    case CONN_RESOLVING:
        conn_fail(conn, "timeout", "DNS lookup timed out");
        break;
    case CONN_CONNECTING:
        conn->last_err = UV_ETIMEDOUT;
        if (!uv_is_closing((uv_handle_t *)&conn->tcp))
            uv_close((uv_handle_t *)&conn->tcp, on_handle_closed);
        break;
    case CONN_HANDSHAKE:
        conn_fail(conn, "timeout", "TLS handshake timed out");
        break;
    case CONN_ACTIVE:
        if (conn->req && !conn->req->headers_done &&
            uv_now(conn->client->loop) >= conn->req->header_deadline) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "no complete response headers from the server within header_timeout (%g s)",
                     conn->client->cfg->header_timeout_ms / 1000.0);
            conn_fail(conn, "timeout", msg);
            break;
        }
        conn_fail(conn, "timeout",
                  conn->req && conn->req->got_response
                      ? "no data from the server within the idle timeout"
                      : "no response from the server within the first-byte timeout");
        break;
    case CONN_IDLE:
        conn_close(conn);
        break;
    case CONN_CLOSING:
        break;
    }
}

static void timer_arm(http_conn_t *conn, unsigned ms)
{
    uv_timer_start(&conn->timer, on_timeout, ms, 0);
}

/* The timer of an active connection, the one place that decides it: ms (the
 * first-byte or the idle timeout) from now, but no later than the header
 * deadline while the final response's headers are not all in, since a
 * server that drips its headers a byte at a time, or sends 1xx responses
 * one after another, restarts the idle timeout for ever. Stopped while we
 * pause reading: that wait is ours, not the server's. on_timeout tells
 * which limit it was. */
static void conn_arm_response_timer(http_conn_t *conn, unsigned ms)
{
    http_req_t *req = conn->req;
    if (req->paused) {
        uv_timer_stop(&conn->timer);
        return;
    }
    if (!req->headers_done) {
        uint64_t now = uv_now(conn->client->loop);
        uint64_t left = req->header_deadline > now ? req->header_deadline - now : 0;
        if (left < ms)
            ms = (unsigned)left;
    }
    timer_arm(conn, ms);
}

/* Keep-alive: back to the pool with a fresh parser, the oldest idle
 * connection closed if the pool is full. */
static void conn_make_idle(http_conn_t *conn)
{
    http_client_t *c = conn->client;
    conn->state = CONN_IDLE;
    conn->reused = 1;
    llhttp_init(&conn->parser, HTTP_RESPONSE, &c->settings);
    conn->parser.data = conn;
    if (conn->rbuf) {
        buf_unref(c->pool, conn->rbuf);
        conn->rbuf = NULL;
    }
    uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read); /* EALREADY if reading */
    timer_arm(conn, c->cfg->keepalive_ms);
    conn->next_idle = c->idle;
    c->idle = conn;
    if (++c->nidle > HTTP_MAX_IDLE) {
        http_conn_t *last = c->idle;
        while (last->next_idle)
            last = last->next_idle;
        conn_close(last);
    }
}

/* ---- parser callbacks -------------------------------------------------- */

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
    req_forget_headers(req);
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

/* Keeps the few headers a download needs; the rest only count toward the
 * header size limit. */
static int on_header_value_complete(llhttp_t *p)
{
    http_req_t *req = parser_req(p);
    if (!req)
        return -1;
    char **slot = NULL;
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
    /* The header phase is over: from here only the idle timeout applies. */
    req->headers_done = 1;
    conn_arm_response_timer(conn, conn->client->cfg->idle_timeout_ms);
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
    };
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

/* ---- reading ----------------------------------------------------------- */

/* Room for response bytes at the tail of the current pooled buffer, or in a
 * new one when less than a quarter is left, so body batches are made of few,
 * full buffers. */
static int conn_rbuf_space(http_conn_t *conn, char **p, size_t *room)
{
    bufpool_t *pool = conn->client->pool;
    if (!conn->rbuf || pool->size - conn->rbuf->len < pool->size / 4) {
        if (conn->rbuf)
            buf_unref(pool, conn->rbuf);
        if (!(conn->rbuf = bufpool_get(pool)))
            return -ENOMEM;
    }
    *p = conn->rbuf->data + conn->rbuf->len;
    *room = pool->size - conn->rbuf->len;
    return 0;
}

/* Room for ciphertext in the spill buffer (loop-owned; see conn_tls_kick). */
static int spill_space(http_conn_t *conn, char **p, size_t *room)
{
    if (conn->spill_cap - conn->spill_len < TLS_SPILL_ROOM) {
        size_t cap = conn->spill_cap ? conn->spill_cap * 2 : 4 * TLS_SPILL_ROOM;
        char *n = realloc(conn->spill, cap);
        if (!n)
            return -ENOMEM;
        conn->spill = n;
        conn->spill_cap = cap;
    }
    *p = conn->spill + conn->spill_len;
    *room = conn->spill_cap - conn->spill_len;
    return 0;
}

/* Plain connections read straight into the pooled buffer. TLS connections
 * read the handshake into the TLS input buffer, and after it ciphertext into
 * the spill buffer, which a decrypt work item turns into pooled plaintext. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
    (void)suggested;
    http_conn_t *conn = h->data;
    char *p;
    size_t room;
    int rc;
    if (!conn->tls)
        rc = conn_rbuf_space(conn, &p, &room);
    else if (conn->state == CONN_HANDSHAKE)
        rc = tls_conn_input_space(conn->tls, &p, &room);
    else
        rc = spill_space(conn, &p, &room);
    *out = rc ? uv_buf_init(NULL, 0) : uv_buf_init(p, (unsigned)room);
}

/* The response is complete: hand the connection back (or close it) first, so
 * that on_done may start the next request on it (a redirect to the same
 * origin), then tell the caller. */
static void conn_message_done(http_conn_t *conn, int keep)
{
    http_req_t *req = conn->req;
    conn->req = NULL;
    req->conn = NULL;
    /* Bytes beyond the response (plaintext or ciphertext not yet decrypted)
     * mean a confused server: such a connection is not reused. */
    int extra = conn->plain_pending || conn->spill_len || conn->tls_more || conn->eof_pending ||
                conn->tls_eof || (conn->tls && tls_conn_has_pending(conn->tls));
    if (keep && !extra && !conn->writes_pending && llhttp_should_keep_alive(&conn->parser) &&
        !conn->client->closing)
        conn_make_idle(conn);
    else
        conn_close(conn);
    req_finish(req, NULL, NULL);
}

static void conn_on_eof(http_conn_t *conn, ssize_t nread)
{
    http_req_t *req = conn->req;
    if (conn->state != CONN_ACTIVE || !req) {
        if (conn->state == CONN_HANDSHAKE)
            conn_fail(conn, "tls", "the server closed the connection during the TLS handshake");
        else
            conn_close(conn);
        return;
    }
    if (nread == UV_EOF) {
        /* Without close_notify a TLS stream may have been cut by anyone on
         * the path: then only a response whose length was announced and
         * fully read counts. */
        if (conn->tls && !conn->tls_eof && !req->message_done) {
            conn_fail(conn, req->got_response ? "truncated" : "connect",
                      req->got_response ? "the TLS stream ended without close_notify before the "
                                          "response was complete"
                                        : "the server closed the connection without a response");
            return;
        }
        /* A body delimited by the close is complete now; any other is not. */
        llhttp_errno_t err = llhttp_finish(&conn->parser);
        if ((err == HPE_OK || err == HPE_PAUSED) && req->message_done) {
            conn_message_done(conn, 0);
            return;
        }
        if (!req->got_response) {
            conn_fail(conn, "connect", "the server closed the connection without a response");
            return;
        }
        conn_fail(conn, "truncated", "the connection closed before the response was complete");
        return;
    }
    conn_fail_uv(conn, req->got_response ? "truncated" : "connect", "reading from", (int)nread);
}

/* Response bytes [p, p+n), already in conn->rbuf, through llhttp. Returns 1
 * when the request is over (the connection may be idle, closed, or failed),
 * 0 to go on reading. */
static int conn_feed(http_conn_t *conn, const char *p, size_t n)
{
    http_req_t *req = conn->req;
    req->got_response = 1;
    conn->fail_code = NULL;
    conn->in_execute = 1;
    llhttp_errno_t err = llhttp_execute(&conn->parser, p, n);
    conn->in_execute = 0;

    if (req->aborted) { /* http_req_abort from a callback */
        conn->req = NULL;
        conn_close(conn);
        req_free(req);
        return 1;
    }
    if (err == HPE_PAUSED && req->message_done) {
        /* Bytes after the response mean a confused server: do not reuse. */
        const char *end = llhttp_get_error_pos(&conn->parser);
        conn_message_done(conn, end == p + n);
        return 1;
    }
    if (err == HPE_CB_HEADERS_COMPLETE && req->message_done && !conn->fail_code) {
        conn_message_done(conn, 0); /* unwanted body not read: close */
        return 1;
    }
    if (err != HPE_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "bad response from %s: %s", conn->key,
                 conn->fail_msg ? conn->fail_msg : llhttp_get_error_reason(&conn->parser));
        conn_fail(conn, conn->fail_code ? conn->fail_code : "http_parse", msg);
        return 1;
    }
    return 0;
}

/* ---- TLS decryption in the thread pool ---------------------------------- */

enum { TLS_WORK_WANT, TLS_WORK_FULL, TLS_WORK_CLOSED, TLS_WORK_ERROR };

/* Pool thread. Owns conn->tls and the buffers it was handed; touches nothing
 * else of the connection. */
static void tls_work(uv_work_t *req)
{
    tls_work_t *w = req->data;
    http_conn_t *conn = w->conn;
    size_t size = conn->client->pool->size;
    w->status = TLS_WORK_FULL;
    if (w->in_len && tls_conn_input_append(conn->tls, w->in, w->in_len)) {
        w->status = TLS_WORK_ERROR;
        snprintf(w->msg, sizeof w->msg, "out of memory");
        return;
    }
    for (size_t i = 0; i < w->nout; i++) {
        buf_t *b = w->out[i];
        while (b->len < size) {
            ssize_t n =
                tls_conn_read(conn->tls, b->data + b->len, size - b->len, w->msg, sizeof w->msg);
            if (n > 0) {
                b->len += (size_t)n;
                continue;
            }
            w->status = n == -TLS_WANT_INPUT ? TLS_WORK_WANT
                        : n == 0             ? TLS_WORK_CLOSED
                                             : TLS_WORK_ERROR;
            return;
        }
    }
}

static void after_tls_work(uv_work_t *req, int status);

/* Hands queued ciphertext to a decrypt item, when none is in flight and the
 * request wants more; with nothing queued, reports an EOF that waited for the
 * queue to empty. At most one item per connection, so the TLS state needs no
 * lock: the loop touches it again only once the item is back. */
static void conn_tls_kick(http_conn_t *conn)
{
    if (conn->decrypting || conn->state != CONN_ACTIVE || !conn->req || conn->req->paused)
        return;
    /* All the ciphertext not yet decrypted: what the TLS state holds plus the
     * spill. Reading stopped at TLS_SPILL_MAX resumes only once this is below
     * it again, so the backlog cannot move from the spill into the TLS state
     * without bound. */
    size_t backlog = conn->spill_len + tls_conn_input_pending(conn->tls);
    if (conn->spill_full && backlog < TLS_SPILL_MAX) {
        conn->spill_full = 0;
        uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    }
    if (conn->spill_len == 0 && !conn->tls_more) {
        if (conn->eof_pending) {
            ssize_t e = conn->eof_pending;
            conn->eof_pending = 0;
            conn_on_eof(conn, e);
        }
        return;
    }
    bufpool_t *pool = conn->client->pool;
    tls_work_t *w = &conn->work;
    w->conn = conn;
    /* Plaintext is never longer than the ciphertext it comes from. */
    w->nout = backlog / pool->size + 2;
    if (w->nout > TLS_WORK_MAX_OUT)
        w->nout = TLS_WORK_MAX_OUT;
    for (size_t i = 0; i < w->nout; i++) {
        if (!(w->out[i] = bufpool_get(pool))) {
            w->nout = i;
            break;
        }
    }
    if (w->nout == 0) {
        conn_fail(conn, "internal", "out of memory");
        return;
    }
    w->in = conn->spill; /* the item's now; a new spill starts empty */
    w->in_len = conn->spill_len;
    conn->spill = NULL;
    conn->spill_len = conn->spill_cap = 0;
    conn->tls_more = 0;
    conn->decrypting = 1;
    conn->pending++; /* the connection is not freed under the item */
    w->req.data = w;
    uv_queue_work(conn->client->loop, &w->req, tls_work, after_tls_work);
}

/* Loop thread: parse the plaintext, then decide what the item's end means. */
static void after_tls_work(uv_work_t *req, int status)
{
    (void)status;
    tls_work_t *w = req->data;
    http_conn_t *conn = w->conn;
    bufpool_t *pool = conn->client->pool;
    free(w->in);
    w->in = NULL;
    conn->decrypting = 0;
    conn->pending--;
    int over = conn->state != CONN_ACTIVE || !conn->req;
    /* Known before parsing, so a response that ends here is not reused while
     * records are still waiting to be decrypted (conn_message_done). */
    conn->tls_more = w->status == TLS_WORK_FULL;
    for (size_t i = 0; i < w->nout; i++) {
        buf_t *b = w->out[i];
        if (over || b->len == 0) {
            buf_unref(pool, b);
            continue;
        }
        if (conn->rbuf)
            buf_unref(pool, conn->rbuf);
        conn->rbuf = b; /* the item's reference becomes the connection's */
        conn->plain_pending = i + 1 < w->nout && w->out[i + 1]->len > 0;
        over = conn_feed(conn, b->data, b->len);
        conn->plain_pending = 0;
    }
    if (conn->state == CONN_CLOSING) {
        conn_maybe_free(conn);
        return;
    }
    if (over || conn->state != CONN_ACTIVE || !conn->req)
        return; /* the response ended (or failed) while being parsed */
    switch (w->status) {
    case TLS_WORK_ERROR:
        conn_fail(conn, conn->req->got_response ? "truncated" : "tls", w->msg);
        return;
    case TLS_WORK_CLOSED: /* close_notify: the server's clean end of the stream */
        conn->tls_eof = 1;
        conn_on_eof(conn, UV_EOF);
        return;
    default: /* FULL (tls_more is set) or WANT */
        break;
    }
    conn_tls_kick(conn);
}

static void conn_handshake_step(http_conn_t *conn);

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    http_conn_t *conn = s->data;
    (void)b;
    if (nread == 0 || conn->state == CONN_CLOSING)
        return;
    if (nread < 0) {
        if (conn->tls && conn->state == CONN_ACTIVE &&
            (conn->decrypting || conn->spill_len || conn->tls_more)) {
            /* Decide once the ciphertext already read is decrypted: it may
             * hold the end of the response and the close_notify. */
            conn->eof_pending = nread;
            uv_read_stop(s);
            conn_tls_kick(conn);
            return;
        }
        conn_on_eof(conn, nread);
        return;
    }
    if (conn->state == CONN_HANDSHAKE) {
        tls_conn_input_commit(conn->tls, (size_t)nread);
        conn_handshake_step(conn);
        return;
    }
    if (conn->tls)
        conn->spill_len += (size_t)nread;
    else
        conn->rbuf->len += (size_t)nread;
    http_req_t *req = conn->req;
    if (conn->state != CONN_ACTIVE || !req) {
        conn_close(conn); /* bytes on an idle connection: not a state we can trust */
        return;
    }
    conn_arm_response_timer(conn, conn->client->cfg->idle_timeout_ms);
    if (!conn->tls) {
        conn_feed(conn, conn->rbuf->data + conn->rbuf->len - nread, (size_t)nread);
        return;
    }
    if (conn->spill_len >= TLS_SPILL_MAX) { /* decryption is behind: stop reading */
        conn->spill_full = 1;
        uv_read_stop(s);
    }
    conn_tls_kick(conn);
}

/* ---- connecting and sending -------------------------------------------- */

typedef struct conn_write {
    uv_write_t req;
    http_conn_t *conn;
    char *buf; /* owned until the write completes */
} conn_write_t;

static void on_write(uv_write_t *w, int status)
{
    conn_write_t *cw = (conn_write_t *)w;
    http_conn_t *conn = cw->conn;
    free(cw->buf);
    free(cw);
    conn->writes_pending--;
    if (status == UV_ECANCELED || conn->state == CONN_CLOSING)
        return;
    if (status < 0)
        conn_fail_uv(conn, "connect", "sending to", status);
}

/* Writes buf (malloc'd; ours from here on, freed once written). The bytes
 * belong to the write, not to the request: a server may answer, and the
 * request end, before the write completes. */
static int conn_write_owned(http_conn_t *conn, char *buf, size_t n)
{
    conn_write_t *cw = malloc(sizeof *cw);
    if (!cw) {
        free(buf);
        return UV_ENOMEM;
    }
    cw->conn = conn;
    cw->buf = buf;
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    int rc = uv_write(&cw->req, (uv_stream_t *)&conn->tcp, &b, 1, on_write);
    if (rc) {
        free(buf);
        free(cw);
        return rc;
    }
    conn->writes_pending++;
    return 0;
}

/* Sends whatever ciphertext the TLS layer has produced. */
static int conn_tls_flush(http_conn_t *conn)
{
    size_t n;
    char *out = tls_conn_take_output(conn->tls, &n);
    return out ? conn_write_owned(conn, out, n) : 0;
}

/* Plaintext to the server: as it is, or through TLS. */
static int conn_send(http_conn_t *conn, const char *data, size_t n)
{
    if (conn->tls) {
        char msg[300];
        if (tls_conn_write(conn->tls, data, n, msg, sizeof msg))
            return UV_EPROTO;
        return conn_tls_flush(conn);
    }
    char *copy = malloc(n);
    if (!copy)
        return UV_ENOMEM;
    memcpy(copy, data, n);
    return conn_write_owned(conn, copy, n);
}

static void conn_start_request(http_conn_t *conn, http_req_t *req)
{
    conn->state = CONN_ACTIVE;
    conn->req = req;
    req->conn = conn;
    req_start_response(req, uv_now(conn->client->loop));
    conn->fail_code = NULL;
    /* until the first byte of the response; then the idle timeout */
    conn_arm_response_timer(conn, conn->client->cfg->first_byte_timeout_ms);
    int rc = conn_send(conn, req->head, req->head_len);
    if (rc == 0 && req->paused) /* reading may be on from the handshake or the pool */
        uv_read_stop((uv_stream_t *)&conn->tcp);
    else if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    if (rc == UV_EALREADY)
        rc = 0;
    if (rc)
        conn_fail_uv(conn, "connect", "sending the request to", rc);
}

/* One step of the TLS handshake, after the connect and after each read. */
static void conn_handshake_step(http_conn_t *conn)
{
    const char *code = "tls";
    char msg[512];
    int rc = tls_conn_handshake(conn->tls, &code, msg, sizeof msg);
    int wrc = conn_tls_flush(conn);
    if (rc < 0) {
        conn_fail(conn, code, msg);
        return;
    }
    if (wrc) {
        conn_fail_uv(conn, "connect", "sending the TLS handshake to", wrc);
        return;
    }
    if (rc == TLS_WANT_INPUT)
        return;
    log_debug("TLS to %s: %s handshake in %llu ms, %s", conn->key,
              tls_conn_resumed(conn->tls) ? "resumed" : "full",
              (unsigned long long)(uv_now(conn->client->loop) - conn->t_handshake),
              tls_conn_cipher(conn->tls));
    if (!conn->req) {
        conn_close(conn);
        return;
    }
    conn_start_request(conn, conn->req);
}

static void on_connect(uv_connect_t *cr, int status)
{
    http_conn_t *conn = cr->data;
    if (status == UV_ECANCELED || conn->state == CONN_CLOSING)
        return;
    if (status < 0) {
        conn->last_err = status;
        if (!uv_is_closing((uv_handle_t *)&conn->tcp))
            uv_close((uv_handle_t *)&conn->tcp, on_handle_closed);
        return;
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    http_req_t *req = conn->req;
    if (!req) { /* the request went away while we connected */
        conn_close(conn);
        return;
    }
    if (strncmp(conn->key, "https:", 6) != 0) {
        conn_start_request(conn, req);
        return;
    }
    if (tls_conn_new(conn->client->tls, req->host, conn->key, &conn->tls)) {
        conn_fail(conn, "internal", "cannot set up TLS");
        return;
    }
    conn->state = CONN_HANDSHAKE; /* still under the connect timeout */
    conn->t_handshake = uv_now(conn->client->loop);
    int rc = uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    if (rc) {
        conn_fail_uv(conn, "connect", "reading from", rc);
        return;
    }
    conn_handshake_step(conn);
}

/* Tries the next resolved address; one connect timeout per address. */
static void conn_try_next(http_conn_t *conn)
{
    conn->ai_cur = conn->ai_cur ? conn->ai_cur->ai_next : conn->ai;
    /* Every address we would connect to is checked, after DNS: a name
     * that resolves to a denied address is refused like the address. */
    const netpolicy_t *policy = conn->client->policy;
    while (conn->ai_cur &&
           ((conn->ai_cur->ai_family != AF_INET && conn->ai_cur->ai_family != AF_INET6) ||
            (policy && !netpolicy_addr_ok(policy, conn->ai_cur->ai_addr)))) {
        if ((conn->ai_cur->ai_family == AF_INET || conn->ai_cur->ai_family == AF_INET6) &&
            conn->denied++ == 0)
            uv_ip_name(conn->ai_cur->ai_addr, conn->denied_addr, sizeof conn->denied_addr);
        conn->ai_cur = conn->ai_cur->ai_next;
    }
    if (!conn->ai_cur && conn->denied && !conn->last_err) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "%s resolves only to addresses the network policy denies (%s): see "
                 "deny_networks",
                 conn->req ? conn->req->host : "the host", conn->denied_addr);
        conn_fail(conn, "forbidden", msg);
        return;
    }
    if (!conn->ai_cur) {
        conn_fail_uv(conn, conn->last_err == UV_ETIMEDOUT ? "timeout" : "connect",
                     "cannot connect to", conn->last_err ? conn->last_err : UV_ECONNREFUSED);
        return;
    }
    conn->state = CONN_CONNECTING;
    int rc = uv_tcp_init(conn->client->loop, &conn->tcp);
    if (rc) {
        conn_fail_uv(conn, "internal", "socket for", rc);
        return;
    }
    conn->tcp_open = 1;
    conn->tcp.data = conn;
    conn->connect_req.data = conn;
    rc = uv_tcp_connect(&conn->connect_req, &conn->tcp, conn->ai_cur->ai_addr, on_connect);
    if (rc) {
        conn->last_err = rc;
        uv_close((uv_handle_t *)&conn->tcp, on_handle_closed);
        return;
    }
    timer_arm(conn, conn->client->cfg->connect_timeout_ms);
}

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *ai)
{
    http_conn_t *conn = g->data;
    conn->pending--;
    conn->ai = ai;
    if (conn->state == CONN_CLOSING) {
        conn_maybe_free(conn);
        return;
    }
    if (status < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "cannot resolve %s: %s", conn->req ? conn->req->host : "?",
                 uv_strerror(status));
        conn_fail(conn, "dns", msg);
        return;
    }
    conn_try_next(conn);
}

static void req_connect_new(http_req_t *req)
{
    http_client_t *c = req->client;
    http_conn_t *conn = calloc(1, sizeof *conn);
    if (!conn) {
        req_finish(req, "internal", "out of memory");
        return;
    }
    c->nconns++;
    conn->client = c;
    snprintf(conn->key, sizeof conn->key, "%s", req->key);
    uv_timer_init(c->loop, &conn->timer);
    conn->timer.data = conn;
    llhttp_init(&conn->parser, HTTP_RESPONSE, &c->settings);
    conn->parser.data = conn;
    conn->state = CONN_RESOLVING;
    conn->req = req;
    req->conn = conn;
    conn->gai.data = conn;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(c->loop, &conn->gai, on_resolved, req->host, req->port, &hints);
    if (rc) {
        conn->req = NULL;
        req->conn = NULL;
        conn_close(conn);
        req_finish(req, "dns", uv_strerror(rc));
        return;
    }
    conn->pending++;
    timer_arm(conn, c->cfg->connect_timeout_ms);
}

/* Finishing a request synchronously would call on_done from inside
 * http_request(); instead a failed start is reported by return value. */
int http_request(http_client_t *c, const url_t *u, const char *extra_headers,
                 const http_req_cbs_t *cbs, void *data, http_req_t **out)
{
    if (c->policy && !netpolicy_host_ok(c->policy, u->host))
        return -EACCES; /* checked for every hop: job.c asks anew after a redirect */
    http_req_t *req = calloc(1, sizeof *req);
    if (!req)
        return -ENOMEM;
    req->client = c;
    req->cbs = *cbs;
    req->data = data;
    char hostport[300];
    if (url_hostport(u, hostport, sizeof hostport) < 0)
        goto nomem;
    size_t kl = strlen(u->scheme) + strlen(u->host) + 16;
    req->key = malloc(kl);
    req->host = strdup(u->host);
    if (!req->key || !req->host)
        goto nomem;
    snprintf(req->key, kl, "%s://%s%s%s:%u", u->scheme, u->ipv6 ? "[" : "", u->host,
             u->ipv6 ? "]" : "", u->port);
    snprintf(req->port, sizeof req->port, "%u", u->port);
    const char *extra = extra_headers ? extra_headers : "";
    size_t hl = strlen(u->target) + strlen(hostport) + strlen(extra) + 160;
    if (!(req->head = malloc(hl)))
        goto nomem;
    int n = snprintf(req->head, hl,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: " HUBD_USER_AGENT
                     "\r\nAccept: */*\r\nAccept-Encoding: identity\r\n%s\r\n",
                     u->target, hostport, extra);
    req->head_len = (size_t)n;

    *out = req;
    req->starting = 1; /* no on_done from inside this call */
    http_conn_t *conn = c->idle;
    while (conn && strcmp(conn->key, req->key) != 0) /* most recently used first */
        conn = conn->next_idle;
    if (conn) {
        idle_remove(conn);
        conn_start_request(conn, req);
    } else {
        req_connect_new(req);
    }
    req->starting = 0;
    return 0;
nomem:
    req_free(req);
    return -ENOMEM;
}

void http_req_set_paused(http_req_t *req, int paused)
{
    if (req->paused == paused)
        return;
    req->paused = paused;
    http_conn_t *conn = req->conn;
    if (!conn || conn->state != CONN_ACTIVE)
        return; /* applied when the request starts on a connection */
    if (paused) {
        uv_read_stop((uv_stream_t *)&conn->tcp);
        uv_timer_stop(&conn->timer);
    } else {
        uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
        conn_arm_response_timer(conn, conn->client->cfg->idle_timeout_ms);
        if (conn->tls) /* records already read may hold more of the body */
            conn_tls_kick(conn);
    }
}

void http_req_abort(http_req_t *req)
{
    req->aborted = 1;
    if (req->is_deferred) { /* ended already; only its report was pending */
        http_req_t **pp = &req->client->deferred;
        while (*pp != req)
            pp = &(*pp)->next_deferred;
        *pp = req->next_deferred;
        req_free(req);
        return;
    }
    http_conn_t *conn = req->conn;
    if (conn && conn->in_execute)
        return; /* on_read finishes the teardown after llhttp returns */
    if (conn) {
        conn->req = NULL;
        conn_close(conn);
    }
    req_free(req);
}

void http_client_set_policy(http_client_t *c, const netpolicy_t *policy)
{
    c->policy = policy;
}

int http_client_new(uv_loop_t *loop, const hubd_config_t *cfg, bufpool_t *pool, tls_ctx_t *tls,
                    http_client_t **out)
{
    http_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->cfg = cfg;
    c->pool = pool;
    c->tls = tls;
    uv_timer_init(loop, &c->defer);
    c->defer.data = c;
    llhttp_settings_init(&c->settings);
    c->settings.on_message_begin = on_message_begin;
    c->settings.on_status = on_status;
    c->settings.on_header_field = on_header_field;
    c->settings.on_header_value = on_header_value;
    c->settings.on_header_value_complete = on_header_value_complete;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_message_complete = on_message_complete;
    *out = c;
    return 0;
}

void http_client_close(http_client_t *c, void (*done)(void *arg), void *arg)
{
    c->closing = 1;
    c->close_cb = done;
    c->close_arg = arg;
    while (c->idle)
        conn_close(c->idle);
    if (c->nconns == 0)
        client_free(c);
}

/* ---- fuzzing (tests/fuzz/fuzz_http.c) ---------------------------------- */

/* One response through the production read path of a plain connection:
 * on_alloc and on_read (hence conn_feed, llhttp with the client's settings
 * and every parser callback above) for each read of reads[i] bytes (the rest
 * of data as a last read), then an EOF if the request is still open. The
 * connection is a real, socket-less one on a private loop, which only runs
 * the close callbacks at the end: no I/O. Returns 0, or -1 if setting up
 * failed. Added for the fuzzer only; nothing in hubd calls it. */
int http_fuzz_response(const uint8_t *data, size_t len, const size_t *reads, size_t nreads,
                       const http_req_cbs_t *cbs, void *cbdata)
{
    uv_loop_t loop;
    hubd_config_t cfg = {
        .idle_timeout_ms = 60000, .header_timeout_ms = 60000, .keepalive_ms = 30000};
    bufpool_t pool;
    http_client_t *c = NULL;
    if (uv_loop_init(&loop))
        return -1;
    bufpool_init(&pool, 4096, 4); /* the smallest read_buffer_size: buffers fill up and turn */
    http_req_t *req = calloc(1, sizeof *req);
    http_conn_t *conn = calloc(1, sizeof *conn);
    if (!req || !conn || http_client_new(&loop, &cfg, &pool, NULL, &c)) {
        free(req);
        free(conn);
        uv_loop_close(&loop);
        return -1;
    }
    req->client = c;
    req->cbs = *cbs;
    req->data = cbdata;
    c->nconns = 1; /* as req_connect_new */
    conn->client = c;
    snprintf(conn->key, sizeof conn->key, "http://fuzz.invalid:80");
    uv_timer_init(&loop, &conn->timer);
    conn->timer.data = conn;
    uv_tcp_init(&loop, &conn->tcp); /* no socket: reads come from data below */
    conn->tcp.data = conn;
    conn->tcp_open = 1;
    llhttp_init(&conn->parser, HTTP_RESPONSE, &c->settings);
    conn->parser.data = conn;
    conn->state = CONN_ACTIVE;
    conn->req = req;
    req->conn = conn;
    req_start_response(req, uv_now(&loop)); /* as conn_start_request */
    size_t off = 0;
    for (size_t i = 0; conn->req && off < len; i++) {
        size_t want = i < nreads && reads[i] ? reads[i] : len - off;
        uv_buf_t b;
        on_alloc((uv_handle_t *)&conn->tcp, 65536, &b);
        size_t n = want < b.len ? want : b.len; /* a read fills at most the room offered */
        if (n > len - off)
            n = len - off;
        if (b.base)
            memcpy(b.base, data + off, n);
        off += n;
        on_read((uv_stream_t *)&conn->tcp, b.base ? (ssize_t)n : UV_ENOBUFS, &b);
    }
    if (conn->req) {
        uv_buf_t b = uv_buf_init(NULL, 0);
        on_read((uv_stream_t *)&conn->tcp, UV_EOF, &b);
    }
    http_client_close(c, free, NULL); /* free(NULL): nothing to tell */
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    bufpool_destroy(&pool);
    return 0;
}
