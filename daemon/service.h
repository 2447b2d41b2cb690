/* service: what systemd hands hubd and wants to hear from it.
 *
 * Socket activation (LISTEN_FDS): the listening socket arrives as fd 3 and
 * hubd must neither bind nor remove it. Type=notify: READY=1 once clients
 * can be served, STATUS= lines, RELOADING=1/READY=1 around a SIGHUP, and
 * STOPPING=1 when a shutdown starts. Outside systemd every call is a no-op.
 * Loop thread (or start-up) only. */
#ifndef HUBD_SERVICE_H
#define HUBD_SERVICE_H

/* The one passed Unix stream socket, -1 when none was passed, or a
 * negative errno (-EINVAL: more than one, or not a Unix stream socket). */
int service_listen_fd(void);

void service_ready(void);
void service_reloading(void);
void service_stopping(void);
void service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
