/* tcp_listener: bind (or adopt) loopback TCP sockets, listen, accept. */
#include "tcp_listener.h"
#include "hostport.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tcp_listener {
    const char *what; /* for the log: "HTTP front", "metrics endpoint" */
    tcp_listener_cb cb;
    void *arg;
    uv_tcp_t *ready;         /* the socket whose client waits; set only during cb */
    size_t n;                /* handles initialised in tcp[] */
    size_t open;             /* of those, not yet closed back: the last one frees */
    int closing;             /* tcp_listener_close was called */
    void (*done)(void *arg); /* tcp_listener_close's */
    void *done_arg;
    uv_tcp_t tcp[]; /* one per address or passed socket; data: the listener */
};

static void on_connection(uv_stream_t *server, int status)
{
    tcp_listener_t *l = server->data;
    if (status < 0) {
        log_warn("%s: accept: %s", l->what, uv_strerror(status));
        return;
    }
    l->ready = (uv_tcp_t *)server;
    l->cb(l->arg, l);
    l->ready = NULL; /* l lives on even if cb closed it: freed in close callbacks */
}

int tcp_listener_accept(tcp_listener_t *l, uv_tcp_t *client)
{
    if (!l->ready) /* not from the callback: no socket is known to have a client */
        return -EAGAIN;
    return uv_accept((uv_stream_t *)l->ready, (uv_stream_t *)client);
}

/* A socket systemd passed: a listening TCP socket on a loopback address, or
 * refused. service.c sorted it as an AF_INET/AF_INET6 stream socket; this
 * is the HTTP front's own check, since a socket unit edited to listen on
 * 0.0.0.0 (or a TCP socket that is not listening) must not be served.
 * name gets its address for the log. */
static int check_passed(int fd, char *name, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int type = 0, proto = 0, accepting = 0;
    socklen_t il = sizeof type;
    snprintf(name, cap, "fd %d", fd);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &il) != 0 ||
        (il = sizeof proto, getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &il)) != 0 ||
        (il = sizeof accepting, getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &il)) != 0) {
        log_err("HTTP front: the socket systemd passed (fd %d): %s", fd, strerror(errno));
        return -EINVAL;
    }
    if ((ss.ss_family != AF_INET && ss.ss_family != AF_INET6) || type != SOCK_STREAM ||
        proto != IPPROTO_TCP || !accepting) {
        log_err("HTTP front: the socket systemd passed (fd %d) is not a listening TCP socket", fd);
        return -EINVAL;
    }
    hostport_format((struct sockaddr *)&ss, name, cap);
    if (!hostport_is_loopback((struct sockaddr *)&ss)) {
        log_err("HTTP front: the socket systemd passed listens on %s, not a loopback address: "
                "the HTTP front serves this machine only (ListenStream= of hubd.socket)",
                name);
        return -EINVAL;
    }
    return 0;
}

/* Our own socket: libuv's bind sets SO_REUSEADDR (a restart need not wait
 * out the last run's TIME_WAIT connections); IPv6 ones are IPV6_V6ONLY, so
 * [::1] is only ::1 whatever net.ipv6.bindv6only says. */
static int bind_own(uv_tcp_t *h, const struct sockaddr_storage *ss)
{
    unsigned flags = ss->ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0;
    return uv_tcp_bind(h, (const struct sockaddr *)ss, flags);
}

int tcp_listener_start(uv_loop_t *loop, const char *what, const struct sockaddr_storage *addrs,
                       size_t n, const int *fds, size_t nfds, tcp_listener_cb cb, void *arg,
                       tcp_listener_t **out)
{
    size_t count = nfds ? nfds : n;
    if (!count)
        return -EINVAL;
    tcp_listener_t *l = calloc(1, sizeof *l + count * sizeof l->tcp[0]);
    if (!l)
        return -ENOMEM;
    l->what = what;
    l->cb = cb;
    l->arg = arg;
    char names[HOSTPORT_MAX_ADDRS * (HOSTPORT_TEXT_MAX + 2)] = "";
    int rc = 0;
    for (size_t i = 0; i < count && !rc; i++) {
        char name[HOSTPORT_TEXT_MAX];
        if (nfds && (rc = check_passed(fds[i], name, sizeof name)) != 0)
            break;
        if (!nfds)
            hostport_format((const struct sockaddr *)&addrs[i], name, sizeof name);
        uv_tcp_t *h = &l->tcp[i];
        uv_tcp_init(loop, h); /* AF_UNSPEC: cannot fail */
        h->data = l;
        l->n++;
        l->open++;
        rc = nfds ? uv_tcp_open(h, fds[i]) : bind_own(h, &addrs[i]);
        /* A bind's EADDRINUSE is reported by uv_listen (libuv delays it). */
        if (!rc)
            rc = uv_listen((uv_stream_t *)h, 128, on_connection);
        if (rc) {
            log_err("%s: cannot listen on %s: %s", what, name, uv_strerror(rc));
            break;
        }
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", name);
    }
    if (rc) {
        tcp_listener_close(l, NULL, NULL); /* open handles: freed in their callbacks */
        return rc;
    }
    log_info("%s listening on %s%s", what, names, nfds ? " (the sockets systemd passed)" : "");
    *out = l;
    return 0;
}

size_t tcp_listener_addrs(const tcp_listener_t *l, struct sockaddr_storage *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n && n < cap; i++) {
        int len = sizeof out[n];
        if (uv_tcp_getsockname(&l->tcp[i], (struct sockaddr *)&out[n], &len) == 0)
            n++;
    }
    return n;
}

static void free_listener(tcp_listener_t *l)
{
    void (*done)(void *) = l->done;
    void *arg = l->done_arg;
    free(l);
    if (done)
        done(arg);
}

static void on_closed(uv_handle_t *h)
{
    tcp_listener_t *l = h->data;
    if (--l->open == 0)
        free_listener(l);
}

void tcp_listener_close(tcp_listener_t *l, void (*done)(void *arg), void *arg)
{
    assert(!l->closing);
    l->closing = 1;
    l->done = done;
    l->done_arg = arg;
    l->cb = NULL;
    if (l->open == 0) { /* start failed before any handle: nothing to wait for */
        free_listener(l);
        return;
    }
    for (size_t i = 0; i < l->n; i++)
        uv_close((uv_handle_t *)&l->tcp[i], on_closed);
}
