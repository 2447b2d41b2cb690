/* stream_tunnel: a CONNECT tunnel through an HTTP proxy (RFC 9110 9.3.6) as
 * a kind of stream (stream.h), on top of another one: TCP to the proxy.
 *
 * Opening sends `CONNECT host:port` (with the proxy's Proxy-Authorization,
 * if any) and reads the proxy's answer with llhttp; a 2xx opens the
 * tunnel, and from then on the stream carries the inner stream's bytes
 * both ways unchanged, so TLS to the origin (stream_tls.h) stacks on it and
 * the proxy sees only ciphertext. Reads are handed through as they come,
 * into the user's memory when the user has an alloc callback (TLS does):
 * no copy.
 *
 * Owns its inner stream (closed with it). Loop thread only. */
#ifndef HUBD_STREAM_TUNNEL_H
#define HUBD_STREAM_TUNNEL_H

#include "stream.h"

/* The end of opening: code NULL when the tunnel is open, else "proxy_auth"
 * (a 407), "proxy_refused" (another 4xx: final) or "proxy" (any other
 * answer, a bad one, or none) and a message that names the proxy and
 * quotes its status line. */
typedef void (*stream_tunnel_open_cb)(stream_t *s, const char *code, const char *msg);

/* A tunnel to authority ("host:port", IPv6 in brackets) through the proxy
 * at the other end of inner, which it takes over on success (on failure
 * inner stays the caller's). authz: the Proxy-Authorization value, or NULL;
 * copied, sent once, never shown. proxy: the proxy's label, for messages.
 * 0 or -ENOMEM. */
int stream_tunnel_new(stream_t *inner, const char *authority, const char *authz, const char *proxy,
                      stream_t **out);

/* Sends the CONNECT and reads the answer; cb comes later, never from inside
 * this call. The caller's callbacks (stream_set_cbs) must be set. 0, or a
 * libuv error (then no callback comes). */
int stream_tunnel_open(stream_t *s, stream_tunnel_open_cb cb);

#endif
