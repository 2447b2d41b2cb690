/* tcp_listener: the loopback TCP sockets of the HTTP front.
 *
 * The HTTP front is another way in to the same fetch front door as the Unix
 * socket (listener.h); this module only gets its listening sockets to it.
 * Either it binds the addresses of http_listen (already parsed and checked
 * by the config: hostport.h), IPv6 ones IPV6_V6ONLY so that [::1] never
 * takes IPv4 traffic, or, under socket activation, it adopts the TCP
 * sockets systemd passed and binds nothing. Each passed socket must be a
 * listening TCP socket bound to a loopback address: hubd serves its own
 * machine, and a socket unit edited to listen on 0.0.0.0 is refused rather
 * than served. Any failure names the address and stops the start-up.
 *
 * Loop thread only. The listener owns its handles: tcp_listener_close
 * closes them all and frees it from the last close callback, then calls
 * done. */
#ifndef HUBD_TCP_LISTENER_H
#define HUBD_TCP_LISTENER_H

#include <stddef.h>
#include <sys/socket.h>
#include <uv.h>

typedef struct tcp_listener tcp_listener_t;

/* A client waits on one of the sockets. The callback accepts it with
 * tcp_listener_accept, once, before it returns (a socket whose client is
 * not accepted stops being polled, as libuv does). Accept errors are logged
 * here and never reach the callback. */
typedef void (*tcp_listener_cb)(void *arg, tcp_listener_t *l);

/* Listens on the nfds sockets systemd passed (fds; nfds > 0: addrs is not
 * looked at) or else binds the n addresses in addrs. Logs "HTTP front
 * listening on 127.0.0.1:8399, [::1]:8399" (what: "HTTP front"; the
 * metrics endpoint's listener is another, with no passed sockets). 0, or a negative errno, logged
 * with the address (and nothing is left open: the handles close when the
 * loop runs). -EINVAL when there is nothing to listen on, or a passed
 * socket is not a listening TCP socket on a loopback address. */
int tcp_listener_start(uv_loop_t *loop, const char *what, const struct sockaddr_storage *addrs,
                       size_t n, const int *fds, size_t nfds, tcp_listener_cb cb, void *arg,
                       tcp_listener_t **out);

/* Accepts the waiting client into `client` (initialised with uv_tcp_init on
 * the same loop). Only from the callback. 0, or a negative errno: then the
 * caller closes client. */
int tcp_listener_accept(tcp_listener_t *l, uv_tcp_t *client);

/* The addresses the sockets are bound to, as the kernel says (a passed
 * socket's, a port 0 made real), at most cap of them into out: how many. */
size_t tcp_listener_addrs(const tcp_listener_t *l, struct sockaddr_storage *out, size_t cap);

/* Closes every socket and frees the listener, then calls done(arg) (may be
 * NULL). Passed sockets are closed too: systemd keeps its own copies. */
void tcp_listener_close(tcp_listener_t *l, void (*done)(void *arg), void *arg);

#endif
