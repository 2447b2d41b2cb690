/* http: an HTTP/1.1 client on libuv streams, responses parsed by llhttp.
 *
 * One request at a time per connection; idle connections are kept per
 * (proxy, origin) and reused. A request goes: the dialer (dialer.h: DNS,
 * TCP to the origin or to the forward proxy proxy_for() picks, a CONNECT
 * tunnel for https through a proxy, TLS for https) -> write (to a proxy,
 * plain http in absolute form) -> parse. Body bytes
 * are handed to the caller as slices of pooled, reference-counted read
 * buffers (bufpool.h): no copy on the loop thread.
 *
 * Timeouts (config.h): connect, per address; first byte; idle, between
 * reads; header_timeout, from sending the request to the final response's
 * headers, 1xx responses included. Each fails the request with "timeout".
 *
 * Everything here runs on the loop thread. Callbacks are never called from
 * inside http_request() or http_req_abort(). After on_done the request is
 * freed; after http_req_abort no callback comes. */
#ifndef HUBD_HTTP_H
#define HUBD_HTTP_H

#include <stdint.h>
#include <uv.h>

#include "bufpool.h"
#include "config.h"
#include "netpolicy.h"
#include "proxy.h"
#include "tls.h"
#include "url.h"

typedef struct http_client http_client_t;
typedef struct http_req http_req_t;

/* Response headers a caller asks for by name, beyond those every response
 * reports (http_response_t): at most HTTP_MAX_WANTED per request, their
 * values handed back in the order asked. The HTTP client knows no header
 * of any particular server: its callers name the ones they pass on. */
#define HTTP_MAX_WANTED 8

typedef struct http_want {
    const char *name; /* the header's name, any case; not copied (a static string) */
    int list;         /* its lines are one list (RFC 9110 5.3, as Link): joined with ", "
                         within the value bound; else the last line is kept */
} http_want_t;

typedef struct http_response {
    int status;             /* final status (1xx responses are skipped, headers and all) */
    int64_t content_length; /* -1 when not announced */
    const char *location;   /* header values, NULL when absent; valid */
    const char *etag;       /*   until the request's on_done returns   */
    const char *last_modified;
    const char *content_range; /* of a 206 */
    const char *retry_after;   /* of a 429 or 503 */
    /* The values of the headers the request wanted (http_req_opts_t), in
     * its order, NULL when absent; a line longer than 8 KiB is dropped. */
    const char *wanted[HTTP_MAX_WANTED];
    const char *content_type; /* Content-Type, NULL when absent */
    int from_proxy;           /* sent to a forward proxy in absolute form: its 407 is its own */
} http_response_t;

enum http_body_mode {
    HTTP_BODY_DELIVER, /* call on_body for each slice */
    HTTP_BODY_DISCARD, /* read and drop it (small bodies keep the connection) */
};

typedef struct http_req_cbs {
    /* Status and headers are in. Returns an http_body_mode. */
    int (*on_headers)(http_req_t *req, const http_response_t *resp, void *data);
    /* A slice [p, p+n) of buf. Take a buf_ref() to keep it past the call. */
    void (*on_body)(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data);
    /* The exchange ended: err_code NULL on success (the whole body arrived),
     * else a protocol error code (PROTOCOL.md) and a message for people. */
    void (*on_done)(http_req_t *req, const char *err_code, const char *err_msg, void *data);
} http_req_cbs_t;

/* tls: the shared TLS configuration for https:// origins (not owned). */
int http_client_new(uv_loop_t *loop, const hubd_config_t *cfg, bufpool_t *pool, tls_ctx_t *tls,
                    http_client_t **out);
/* Closes idle connections and frees the client once every connection is
 * gone, then calls done(arg) (never from inside this call). Every request
 * must have ended (on_done) or been aborted before. */
void http_client_close(http_client_t *c, void (*done)(void *arg), void *arg);

/* The network policy every request (host) and connection (address)
 * follows; NULL: none. Not owned. */
void http_client_set_policy(http_client_t *c, const netpolicy_t *policy);

/* The forward proxies requests go through (proxy.h), decided per request,
 * so per redirect hop; NULL: all direct. Not owned. */
void http_client_set_proxies(http_client_t *c, const proxy_settings_t *proxies);

/* Starts GET u. extra_headers: "Name: value\r\n" lines or NULL. Returns
 * -EACCES when the policy forbids u's host (no callback then); an address
 * the policy forbids fails the request with code "forbidden": an address
 * connected to, or, through a proxy, a host that is an IP literal
 * (netpolicy_literal_ok), before the proxy is asked; and any hop whose
 * host and port name hubd's own HTTP front (netpolicy_host_is_self). */
int http_request(http_client_t *c, const url_t *u, const char *extra_headers,
                 const http_req_cbs_t *cbs, void *data, http_req_t **out);

/* What a request carries besides its URL. */
typedef struct http_req_opts {
    const char *method;        /* NULL: GET */
    const char *extra_headers; /* "Name: value\r\n" lines (a body's Content-Type), or NULL */
    const void *body;          /* the request body (copied; Content-Length is added), or NULL */
    size_t body_len;
    const http_want_t *wanted; /* response headers to keep (copied), or NULL */
    size_t nwanted;            /* at most HTTP_MAX_WANTED */
} http_req_opts_t;

/* As http_request, with the method, headers, body and wanted response
 * headers of o. A request that meets a stale pooled connection before any
 * byte of response is sent again on a new one, as a GET is: use another
 * method only for requests safe to repeat (the Hub's paths-info is a
 * read). */
int http_request_opts(http_client_t *c, const url_t *u, const http_req_opts_t *o,
                      const http_req_cbs_t *cbs, void *data, http_req_t **out);

/* Backpressure: stop (1) or resume (0) reading the response. While paused
 * the idle timeout does not run: the wait is ours, not the server's. */
void http_req_set_paused(http_req_t *req, int paused);

/* In on_done with code "connect": whether every address of the origin (or
 * proxy) refused the connection: nothing listens there. */
int http_req_refused(const http_req_t *req);

/* Ends the request now; its connection is closed, no callback follows. */
void http_req_abort(http_req_t *req);

/* Fuzzing only (tests/fuzz/fuzz_http.c): feeds data as one response, read
 * by read (reads[i] bytes each, the rest as a last read; then EOF), through
 * the same parser settings, callbacks and read path as a plain connection,
 * with no socket, for a request that wanted the nwanted (at most
 * HTTP_MAX_WANTED) headers of wanted. cbs must not pause, abort is fine.
 * Returns 0, -1 if setting up failed. */
int http_fuzz_response(const uint8_t *data, size_t len, const size_t *reads, size_t nreads,
                       const http_want_t *wanted, size_t nwanted, const http_req_cbs_t *cbs,
                       void *cbdata);

#endif
