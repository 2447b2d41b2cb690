/* connector: from a host name to a connected TCP stream.
 *
 * DNS (uv_getaddrinfo, in the thread pool), then each resolved address in
 * turn: the network policy's check (netpolicy_addr_ok; a name that resolves
 * only to denied addresses fails with "forbidden"), and a connect under its
 * own timeout (the DNS lookup has one too). Yields a connected stream_tcp
 * (stream_tcp.h) or an error code (PROTOCOL.md) and a message.
 *
 * The caller owns the connector and ends it with connector_close, also
 * after the result (the stream is the caller's from then on). Loop thread. */
#ifndef HUBD_CONNECTOR_H
#define HUBD_CONNECTOR_H

#include <stdint.h>
#include <uv.h>

#include "bufpool.h"
#include "netpolicy.h"
#include "stream.h"

typedef struct connector connector_t;

/* The result, once: tcp connected and code NULL, or tcp NULL and code and
 * msg set. Never from inside connector_start or after connector_close. */
typedef void (*connector_done_cb)(connector_t *c, stream_t *tcp, const char *code, const char *msg,
                                  void *arg);

typedef struct connector_opts {
    uv_loop_t *loop;
    bufpool_t *pool;           /* for the stream's read buffers */
    const netpolicy_t *policy; /* NULL: no limits; not owned */
    const char *host, *port;   /* what to resolve */
    const char *label;         /* "scheme://host:port", for messages */
    unsigned timeout_ms;       /* for the lookup, and for each address */
} connector_opts_t;

/* Starts resolving. 0, or a libuv error (then there is nothing to close). */
int connector_start(const connector_opts_t *o, connector_done_cb cb, void *arg, connector_t **out);

/* uv_now() time when the connect timeout of the last address tried runs
 * out: a TLS handshake after it is still under that timeout. */
uint64_t connector_deadline(const connector_t *c);

/* After a failure: whether every address refused the connection
 * (ECONNREFUSED: nothing listens there), as opposed to a timeout or an
 * unreachable network. */
int connector_refused(const connector_t *c);

/* Cancels what is under way; cb(arg) once every handle and the DNS answer
 * are back and the memory is gone (never from inside this call). */
void connector_close(connector_t *c, void (*cb)(void *arg), void *arg);

#endif
