/* http: the HTTP/1.1 client: requests, connections and their timers, the
 * read path from a stream into llhttp, and the public API (http.h).
 *
 * A connection is made of parts it owns: a dialer while connecting, then a
 * stream (TCP, TLS over it, or TLS over a proxy's tunnel: dialer.h), and
 * its timer. It talks to its stream only through stream.h, so nothing here
 * knows whether the bytes are encrypted or tunnelled; a proxy shows only in
 * the request's text (absolute form) and its pool key. conn_close is its
 * one close path; the memory goes when the close callbacks of all its
 * parts are in (closes_pending). */
#include "http_internal.h"
#include "log.h"
#include "stream_tcp.h"
#include "wipe.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_MAX_IDLE 32 /* pooled idle connections, all origins */
#define HUBD_USER_AGENT "hubd/" HUBD_VERSION

static void conn_close(http_conn_t *conn);
static void req_connect_new(http_req_t *req);
static const stream_cbs_t conn_stream_cbs;

/* ---- request life ---------------------------------------------------- */

static void req_free(http_req_t *req)
{
    /* The head holds the client's credential headers, and through a proxy
     * its password. */
    wipe_free_n(req->head, req->head_len);
    free(req->key);
    free(req->origin);
    free(req->host);
    free(req->value);
    http_req_forget_headers(req);
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

static void on_deferred(uv_timer_t *t);

/* The one place a request ends with a callback. The connection must already
 * be detached (idle, closing, or handed back). */
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
    char msg[1024];
    snprintf(msg, sizeof msg, "%s %s: %s", what, conn->pooled.key, uv_strerror(uverr));
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
    if (conn->state != CONN_CLOSING || conn->closes_pending > 0)
        return;
    http_client_t *c = conn->client;
    free(conn);
    c->nconns--;
    if (c->closing && c->nconns == 0)
        client_free(c);
}

/* A part of the connection (connector, stream) is closed. */
static void on_part_closed(void *arg)
{
    http_conn_t *conn = arg;
    conn->closes_pending--;
    conn_maybe_free(conn);
}

static void on_timer_closed(uv_handle_t *h)
{
    on_part_closed(h->data);
}

static void conn_close_dialer(http_conn_t *conn)
{
    conn->closes_pending++;
    dialer_close(conn->dialer, on_part_closed, conn);
    conn->dialer = NULL;
}

/* The single close path of a connection: idempotent, safe inside callbacks
 * (memory goes only when the last close callback has run). */
static void conn_close(http_conn_t *conn)
{
    if (conn->state == CONN_CLOSING)
        return;
    if (conn->state == CONN_IDLE)
        pool_remove(&conn->client->idle, &conn->pooled);
    conn->state = CONN_CLOSING;
    conn->closes_pending++;
    uv_close((uv_handle_t *)&conn->timer, on_timer_closed);
    if (conn->dialer)
        conn_close_dialer(conn);
    if (conn->stream) {
        conn->closes_pending++;
        stream_close(conn->stream, on_part_closed, conn);
        conn->stream = NULL;
    }
}

static void on_timeout(uv_timer_t *t)
{
    http_conn_t *conn = t->data;
    switch (conn->state) {
    case CONN_CONNECTING: /* the dialer keeps its own time */
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

static void timer_arm(http_conn_t *conn, uint64_t ms)
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

/* Made before the CA bundle was last reloaded: its server was verified
 * against a bundle no longer in force (a CA taken out of it must not stay
 * trusted on the connections it let in), so it serves no other request. */
static int conn_outdated(const http_conn_t *conn)
{
    const http_client_t *c = conn->client;
    return conn->https && c->tls && conn->tls_generation != tls_ctx_generation(c->tls);
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
    conn->rbuf = NULL;
    stream_release(conn->stream);
    stream_read_start(conn->stream); /* to notice a close */
    timer_arm(conn, c->cfg->keepalive_ms);
    pool_entry_t *evicted = pool_put(&c->idle, &conn->pooled);
    if (evicted)
        conn_close(list_entry(evicted, http_conn_t, pooled));
}

/* A connection with its timer, serving req on origin key; no parts yet. */
static http_conn_t *conn_new(http_client_t *c, const char *key)
{
    http_conn_t *conn = calloc(1, sizeof *conn);
    if (!conn)
        return NULL;
    c->nconns++;
    conn->client = c;
    pool_entry_init(&conn->pooled, key);
    conn->tls_generation = c->tls ? tls_ctx_generation(c->tls) : 0;
    uv_timer_init(c->loop, &conn->timer);
    conn->timer.data = conn;
    llhttp_init(&conn->parser, HTTP_RESPONSE, &c->settings);
    conn->parser.data = conn;
    return conn;
}

/* ---- reading ----------------------------------------------------------- */

/* The response is complete: hand the connection back (or close it) first, so
 * that on_done may start the next request on it (a redirect to the same
 * origin), then tell the caller. */
static void conn_message_done(http_conn_t *conn, int keep)
{
    http_req_t *req = conn->req;
    conn->req = NULL;
    req->conn = NULL;
    /* Bytes beyond the response, or a write still out, mean a connection
     * that is not reused (a confused server, or a half-sent request). */
    if (keep && stream_reusable(conn->stream) && llhttp_should_keep_alive(&conn->parser) &&
        !conn->client->closing && !conn_outdated(conn))
        conn_make_idle(conn);
    else
        conn_close(conn);
    req_finish(req, NULL, NULL);
}

/* The stream ended (n < 0, see stream.h). */
static void conn_on_end(http_conn_t *conn, ssize_t n)
{
    http_req_t *req = conn->req;
    if (conn->state != CONN_ACTIVE || !req) {
        conn_close(conn);
        return;
    }
    if (n == STREAM_EFAULT) {
        const stream_fault_t *f = stream_fault(conn->stream);
        conn_fail(conn, !f->local && req->got_response ? "truncated" : f->code, f->msg);
        return;
    }
    if (n == STREAM_EOF_UNVERIFIED && !req->message_done) {
        /* An end anyone on the path could forge: then only a response whose
         * length was announced and fully read counts. */
        if (!req->got_response) {
            conn_fail(conn, "connect", "the server closed the connection without a response");
            return;
        }
        char msg[300];
        snprintf(msg, sizeof msg, "%s before the response was complete",
                 stream_fault(conn->stream)->msg);
        conn_fail(conn, "truncated", msg);
        return;
    }
    if (n == UV_EOF || n == STREAM_EOF_UNVERIFIED) {
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
    conn_fail_uv(conn, req->got_response ? "truncated" : "connect", "reading from", (int)n);
}

/* Response bytes [p, p+n), inside conn->rbuf, through llhttp. Returns 1 when
 * the request is over (the connection may be idle, closed, or failed), 0 to
 * go on reading. */
static int conn_feed(http_conn_t *conn, const char *p, size_t n)
{
    http_req_t *req = conn->req;
    int had_headers = req->headers_done;
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
        char msg[1024];
        snprintf(msg, sizeof msg, "bad response from %s: %s", conn->pooled.key,
                 conn->fail_msg ? conn->fail_msg : llhttp_get_error_reason(&conn->parser));
        conn_fail(conn, conn->fail_code ? conn->fail_code : "http_parse", msg);
        return 1;
    }
    /* The final response's headers came in this read: the header deadline
     * no longer applies, only the idle timeout (the callbacks since then
     * may have paused the request: the timer decides that too). */
    if (!had_headers && req->headers_done && conn->req == req)
        conn_arm_response_timer(conn, conn->client->cfg->idle_timeout_ms);
    return 0;
}

/* The peer sent something: on an idle connection that is not a state we can
 * trust; on an active one it restarts the idle timeout. */
static void conn_on_activity(stream_t *s)
{
    http_conn_t *conn = s->data;
    if (conn->state != CONN_ACTIVE || !conn->req) {
        conn_close(conn);
        return;
    }
    conn_arm_response_timer(conn, conn->client->cfg->idle_timeout_ms);
}

static void conn_on_read(stream_t *s, ssize_t n, buf_t *buf, const char *p)
{
    http_conn_t *conn = s->data;
    if (n < 0) {
        conn_on_end(conn, n);
        return;
    }
    if (conn->state != CONN_ACTIVE || !conn->req) {
        conn_close(conn);
        return;
    }
    conn->rbuf = buf;
    conn_feed(conn, p, (size_t)n);
}

static void conn_on_write_error(stream_t *s, int err)
{
    conn_fail_uv(s->data, "connect", "sending to", err);
}

static const stream_cbs_t conn_stream_cbs = {
    .on_read = conn_on_read,
    .on_activity = conn_on_activity,
    .on_write_error = conn_on_write_error,
};

/* ---- connecting and sending -------------------------------------------- */

static void conn_start_request(http_conn_t *conn, http_req_t *req)
{
    conn->state = CONN_ACTIVE;
    conn->req = req;
    req->conn = conn;
    req_start_response(req, uv_now(conn->client->loop));
    conn->fail_code = NULL;
    /* until the first byte of the response; then the idle timeout */
    conn_arm_response_timer(conn, conn->client->cfg->first_byte_timeout_ms);
    char *head = malloc(req->head_len);
    int rc = UV_ENOMEM;
    if (head) {
        memcpy(head, req->head, req->head_len);
        rc = stream_write(conn->stream, head, req->head_len);
    }
    if (rc == 0 && req->paused) /* reading may be on from the handshake or the pool */
        stream_read_stop(conn->stream);
    else if (rc == 0)
        rc = stream_read_start(conn->stream);
    if (rc)
        conn_fail_uv(conn, "connect", "sending the request to", rc);
}

static void on_dialed(dialer_t *d, stream_t *stream, const char *code, const char *msg, void *arg)
{
    http_conn_t *conn = arg;
    if (code && conn->req)
        conn->req->refused = dialer_refused(d);
    conn_close_dialer(conn); /* done: its close is counted like the others */
    if (code) {
        conn_fail(conn, code, msg);
        return;
    }
    conn->stream = stream;
    stream_set_cbs(stream, &conn_stream_cbs, conn);
    if (!conn->req) { /* the request went away while we connected */
        conn_close(conn);
        return;
    }
    conn_start_request(conn, conn->req);
}

static void req_connect_new(http_req_t *req)
{
    http_client_t *c = req->client;
    http_conn_t *conn = conn_new(c, req->key);
    if (!conn) {
        req_finish(req, "internal", "out of memory");
        return;
    }
    conn->state = CONN_CONNECTING;
    conn->req = req;
    conn->https = strncmp(req->origin, "https:", 6) == 0;
    req->conn = conn;
    dialer_opts_t o = {
        .loop = c->loop,
        .pool = c->pool,
        .policy = c->policy,
        .tls = c->tls,
        .https = conn->https,
        .host = req->host,
        .port = req->port,
        .origin = req->origin,
        .proxy = req->proxy,
        .timeout_ms = c->cfg->connect_timeout_ms,
    };
    int rc = dialer_start(&o, on_dialed, conn, &conn->dialer);
    if (rc) {
        conn->req = NULL;
        req->conn = NULL;
        conn_close(conn);
        req_finish(req, req->proxy ? "proxy" : "dns", uv_strerror(rc));
    }
}

/* Finishing a request synchronously would call on_done from inside
 * http_request(); instead a failed start is reported by return value. */
int http_request(http_client_t *c, const url_t *u, const char *extra_headers,
                 const http_req_cbs_t *cbs, void *data, http_req_t **out)
{
    http_req_opts_t o = {.extra_headers = extra_headers};
    return http_request_opts(c, u, &o, cbs, data, out);
}

int http_request_opts(http_client_t *c, const url_t *u, const http_req_opts_t *o,
                      const http_req_cbs_t *cbs, void *data, http_req_t **out)
{
    assert(o->nwanted <= HTTP_MAX_WANTED);
    const char *method = o->method ? o->method : "GET";
    const void *body = o->body;
    size_t len = o->body_len;
    if (c->policy && !netpolicy_host_ok(c->policy, u->host))
        return -EACCES; /* checked for every hop: transfer.c asks anew after a redirect */
    http_req_t *req = calloc(1, sizeof *req);
    if (!req)
        return -ENOMEM;
    req->client = c;
    req->cbs = *cbs;
    req->data = data;
    if (o->nwanted)
        memcpy(req->wanted, o->wanted, o->nwanted * sizeof *o->wanted);
    req->nwanted = o->nwanted;
    /* Decided per request, hence per redirect hop: each may go direct. */
    const proxy_t *px = req->proxy = proxy_for(c->proxies, u);
    int absolute = req->absolute = px && strcmp(u->scheme, "http") == 0; /* else tunnel, direct */
    char hostport[300];
    if (url_hostport(u, hostport, sizeof hostport) < 0)
        goto nomem;
    if (asprintf(&req->origin, "%s://%s%s%s:%u", u->scheme, u->ipv6 ? "[" : "", u->host,
                 u->ipv6 ? "]" : "", u->port) < 0)
        req->origin = NULL;
    req->host = strdup(u->host);
    if (!req->origin || !req->host)
        goto nomem;
    /* Pooled per (proxy, origin): a connection through one proxy to one
     * origin serves that pair only. */
    if (asprintf(&req->key, "%s%s%s", req->origin, px ? " via " : "", px ? px->label : "") < 0) {
        req->key = NULL;
        goto nomem;
    }
    snprintf(req->port, sizeof req->port, "%u", u->port);
    const char *extra = o->extra_headers ? o->extra_headers : "";
    /* To a proxy in absolute form, with its credentials: those go in this
     * request to the proxy only (through a tunnel, only in the CONNECT). */
    const char *pa = absolute && px->authz ? px->authz : NULL;
    char clen[48] = "";
    if (body)
        snprintf(clen, sizeof clen, "Content-Length: %zu\r\n", len);
    int n =
        asprintf(&req->head,
                 "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: " HUBD_USER_AGENT
                 "\r\nAccept: */*\r\nAccept-Encoding: identity\r\n%s%s%s%s%s\r\n",
                 method, absolute ? u->canonical : u->target, hostport,
                 pa ? "Proxy-Authorization: " : "", pa ? pa : "", pa ? "\r\n" : "", clen, extra);
    if (n < 0) {
        req->head = NULL;
        goto nomem;
    }
    req->head_len = (size_t)n;
    if (body && len) { /* the body follows the head in the one text written */
        char *whole = realloc(req->head, req->head_len + len);
        if (!whole)
            goto nomem;
        memcpy(whole + req->head_len, body, len);
        req->head = whole;
        req->head_len += len;
    }

    *out = req;
    req->starting = 1; /* no on_done from inside this call */
    if (c->policy && netpolicy_host_is_self(c->policy, u->host, u->port)) {
        /* hubd's own HTTP front, by an address or localhost: a fetch that
         * went back in would hold a download slot while the one it asks
         * for waits for another. Refused on every hop, through
         * a proxy too; a name is checked again once resolved (connector). */
        char msg[400];
        snprintf(msg, sizeof msg,
                 "%s:%u is hubd's own HTTP front (http_listen): hubd never fetches from itself",
                 u->host, (unsigned)u->port);
        req_finish(req, "forbidden", msg);
    } else if (px && c->policy && !netpolicy_literal_ok(c->policy, u->host)) {
        /* Through a proxy hubd connects to the proxy's address only, so the
         * connector never sees this one: a literal needs no DNS and is
         * checked here, before the proxy is asked (on every hop). */
        char msg[400];
        snprintf(msg, sizeof msg,
                 "the network policy denies the address %s (deny_networks); the proxy %s was "
                 "not asked",
                 u->host, px->label);
        req_finish(req, "forbidden", msg);
    } else {
        pool_entry_t *e; /* most recently used first */
        while ((e = pool_take(&c->idle, req->key)) &&
               conn_outdated(list_entry(e, http_conn_t, pooled)))
            conn_close(list_entry(e, http_conn_t, pooled));
        if (e)
            conn_start_request(list_entry(e, http_conn_t, pooled), req);
        else
            req_connect_new(req);
    }
    req->starting = 0;
    return 0;
nomem:
    req_free(req);
    return -ENOMEM;
}

int http_req_refused(const http_req_t *req)
{
    return req->refused;
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
        stream_read_stop(conn->stream);
        uv_timer_stop(&conn->timer);
    } else {
        conn_arm_response_timer(conn, conn->client->cfg->idle_timeout_ms);
        stream_read_start(conn->stream); /* may deliver what is held already */
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
        return; /* conn_feed finishes the teardown after llhttp returns */
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

void http_client_set_proxies(http_client_t *c, const proxy_settings_t *proxies)
{
    c->proxies = proxies;
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
    pool_init(&c->idle, HTTP_MAX_IDLE);
    uv_timer_init(loop, &c->defer);
    c->defer.data = c;
    http_parse_settings_init(&c->settings);
    *out = c;
    return 0;
}

void http_client_close(http_client_t *c, void (*done)(void *arg), void *arg)
{
    c->closing = 1;
    c->close_cb = done;
    c->close_arg = arg;
    pool_entry_t *e;
    while ((e = pool_any(&c->idle)))
        conn_close(list_entry(e, http_conn_t, pooled));
    if (c->nconns == 0)
        client_free(c);
}

/* ---- fuzzing (tests/fuzz/fuzz_http.c) ---------------------------------- */

/* One response through the production read path of a plain connection:
 * stream_tcp's read path (hence conn_feed, llhttp with the client's settings
 * and every parser callback) for each read of reads[i] bytes (the rest of
 * data as a last read), then an EOF if the request is still open. The
 * connection is a real one on a socket-less TCP stream on a private loop,
 * which only runs the close callbacks at the end: no I/O. Returns 0, or -1
 * if setting up failed. Added for the fuzzer only; nothing in hubd calls it. */
int http_fuzz_response(const uint8_t *data, size_t len, const size_t *reads, size_t nreads,
                       const http_want_t *wanted, size_t nwanted, const http_req_cbs_t *cbs,
                       void *cbdata)
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
    http_conn_t *conn = NULL;
    stream_t *s = NULL;
    if (!req || http_client_new(&loop, &cfg, &pool, NULL, &c) ||
        !(conn = conn_new(c, "http://fuzz.invalid:80")) || stream_tcp_new(&loop, &pool, &s)) {
        free(req);
        if (conn)
            conn_close(conn);
        if (c)
            http_client_close(c, free, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        bufpool_destroy(&pool);
        return -1;
    }
    req->client = c;
    req->cbs = *cbs;
    req->data = cbdata;
    if (nwanted)
        memcpy(req->wanted, wanted, nwanted * sizeof *wanted);
    req->nwanted = nwanted; /* as http_request_opts */
    conn->stream = s;       /* no socket: reads come from data below */
    stream_set_cbs(s, &conn_stream_cbs, conn);
    conn->state = CONN_ACTIVE;
    conn->req = req;
    req->conn = conn;
    req_start_response(req, uv_now(&loop)); /* as conn_start_request */
    size_t off = 0;
    for (size_t i = 0; conn->req && off < len; i++) {
        size_t want = i < nreads && reads[i] ? reads[i] : len - off;
        off += stream_tcp_inject(s, (const char *)data + off, want < len - off ? want : len - off);
    }
    if (conn->req)
        stream_tcp_inject(s, NULL, 0);
    http_client_close(c, free, NULL); /* free(NULL): nothing to tell */
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    bufpool_destroy(&pool);
    return 0;
}
