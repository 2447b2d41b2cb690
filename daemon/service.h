/* service: what systemd hands hubd and wants to hear from it.
 *
 * Socket activation (LISTEN_FDS): the listening sockets arrive from fd 3 on
 * and hubd must neither bind nor remove them: one Unix stream socket (the
 * clients' socket) and, for the HTTP front, any number of TCP ones. Type=notify: READY=1 once
 * clients can be served, STATUS= lines, RELOADING=1/READY=1 around a SIGHUP, and STOPPING=1 when a
 * shutdown starts. Outside systemd every call is a no-op. Loop thread (or start-up) only. */
#ifndef HUBD_SERVICE_H
#define HUBD_SERVICE_H

#include <stddef.h>

/* Sorts the sockets systemd passed: *unix_fd gets the one listening Unix
 * stream socket, tcp_fds[0..*ntcp) the listening TCP (AF_INET, AF_INET6
 * stream) sockets, in the unit's order. Nothing passed: 0 with *unix_fd -1
 * and *ntcp 0. A negative errno: -EINVAL when LISTEN_FDS does not parse, a
 * socket is neither kind (or not listening), or there is not exactly one
 * Unix socket; -E2BIG for more than cap TCP sockets. Whether a TCP socket
 * is on a loopback address is the HTTP front's check (tcp_listener.h). */
int service_listen_fds(int *unix_fd, int *tcp_fds, size_t cap, size_t *ntcp);

void service_ready(void);
void service_reloading(void);
void service_stopping(void);
void service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
