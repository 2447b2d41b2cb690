/* dialer: from an origin and its route (direct, or through a forward proxy)
 * to a stream ready to carry an HTTP request.
 *
 * Each step stacks a stream on the last one:
 *   the connector (connector.h): DNS, the network policy's address check and
 *     TCP, to the origin, or to the proxy when there is one (then hubd never
 *     resolves the origin: the policy checks the proxy's address);
 *   for https:// through a proxy, a CONNECT tunnel (stream_tunnel.h);
 *   for https://, TLS to the origin (stream_tls.h), verified against the
 *     origin's name, whatever carries it.
 * The steps after the TCP connect run under the connect timeout of the
 * address that answered. What goes wrong on the way to a proxy is a
 * "proxy" error (or "proxy_auth" for a 407, "proxy_refused" for another
 * 4xx to CONNECT), apart from the origin's.
 *
 * The caller owns the dialer and ends it with dialer_close, also after the
 * result (the stream is the caller's from then on). Loop thread only. */
#ifndef HUBD_DIALER_H
#define HUBD_DIALER_H

#include <uv.h>

#include "bufpool.h"
#include "netpolicy.h"
#include "proxy.h"
#include "stream.h"
#include "tls.h"

typedef struct dialer dialer_t;

/* The result, once: s ready (TLS: handshake done and reading) and code
 * NULL, or s NULL and an error code (PROTOCOL.md) and message. Never from
 * inside dialer_start or after dialer_close. */
typedef void (*dialer_done_cb)(dialer_t *d, stream_t *s, const char *code, const char *msg,
                               void *arg);

typedef struct dialer_opts {
    uv_loop_t *loop;
    bufpool_t *pool;           /* for the streams' read buffers */
    const netpolicy_t *policy; /* NULL: no limits; not owned */
    tls_ctx_t *tls;            /* for https; not owned */
    int https;                 /* TLS to the origin */
    const char *host, *port;   /* the origin */
    const char *origin;        /* "scheme://host:port": messages, the TLS session slot */
    const proxy_t *proxy;      /* NULL: direct; not owned, outlives the dialer */
    unsigned timeout_ms;       /* the connect timeout (connector.h) */
} dialer_opts_t;

/* Starts. 0, or a libuv error (then there is nothing to close). */
int dialer_start(const dialer_opts_t *o, dialer_done_cb cb, void *arg, dialer_t **out);

/* After its callback said code "connect": whether every address refused
 * (connector_refused). */
int dialer_refused(const dialer_t *d);

/* Cancels what is under way and closes any stream not handed over; cb(arg)
 * once everything is closed and the memory is gone (never from inside
 * this call). */
void dialer_close(dialer_t *d, void (*cb)(void *arg), void *arg);

#endif
