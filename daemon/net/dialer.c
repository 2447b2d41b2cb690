/* dialer: connector, then tunnel and TLS as the route needs (see the
 * header). */
#include "dialer.h"
#include "connector.h"
#include "errcode.h"
#include "stream_tls.h"
#include "stream_tunnel.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    DIAL_CONNECT, /* the connector is at work */
    DIAL_TUNNEL,  /* CONNECT sent to the proxy, its answer awaited */
    DIAL_TLS,     /* TLS handshake with the origin */
    DIAL_DONE,    /* the result was given */
} dial_state_t;

struct dialer {
    dial_state_t state;
    uv_loop_t *loop;
    bufpool_t *pool;
    tls_ctx_t *tls;
    int https;
    char *host;   /* the origin's, for TLS */
    char *origin; /* "scheme://host:port" */
    const proxy_t *proxy;
    connector_t *connector; /* while connecting; owned */
    stream_t *stream;       /* the stack so far; owned until handed over */
    uv_timer_t timer;       /* the steps after the TCP connect */
    int refused;            /* the connect failed: every address refused */
    unsigned closes_pending;
    int closing;
    dialer_done_cb cb;
    void *arg;
    void (*close_cb)(void *);
    void *close_arg;
};

static void dialer_maybe_free(dialer_t *d)
{
    if (!d->closing || d->closes_pending)
        return;
    void (*cb)(void *) = d->close_cb;
    void *arg = d->close_arg;
    free(d->host);
    free(d->origin);
    free(d);
    cb(arg);
}

static void on_part_closed(void *arg)
{
    dialer_t *d = arg;
    d->closes_pending--;
    dialer_maybe_free(d);
}

static void on_timer_closed(uv_handle_t *h)
{
    on_part_closed(h->data);
}

/* The one way a result leaves: the stack on success (handed over), else it
 * stays the dialer's until dialer_close. */
static void dial_finish(dialer_t *d, const char *code, const char *msg)
{
    assert(d->state != DIAL_DONE);
    d->state = DIAL_DONE;
    uv_timer_stop(&d->timer);
    stream_t *s = NULL;
    if (!code) {
        s = d->stream;
        d->stream = NULL;
    }
    d->cb(d, s, code, msg, d->arg);
}

static void dial_fail_uv(dialer_t *d, const char *code, const char *what, int uverr)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s: %s", what, d->proxy ? d->proxy->label : d->origin,
             uv_strerror(uverr));
    dial_finish(d, code, msg);
}

/* Reads and write failures of the stack's top while it is being set up
 * (the caller's callbacks take over with the stream). */
static void dial_on_read(stream_t *s, ssize_t n, buf_t *buf, const char *p)
{
    dialer_t *d = s->data;
    (void)buf;
    (void)p;
    if (d->state == DIAL_DONE)
        return;
    if (n == STREAM_EFAULT) {
        const stream_fault_t *f = stream_fault(s);
        dial_finish(d, f->code, f->msg);
        return;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s during set-up",
             n < 0 ? "the connection ended" : "unexpected data from",
             d->proxy ? d->proxy->label : d->origin);
    dial_finish(d, d->state == DIAL_TUNNEL ? "proxy" : "connect", msg);
}

static void dial_on_write_error(stream_t *s, int err)
{
    dialer_t *d = s->data;
    if (d->state != DIAL_DONE)
        dial_fail_uv(d, d->state == DIAL_TUNNEL ? "proxy" : "connect", "sending to", err);
}

static const stream_cbs_t dial_cbs = {
    .on_read = dial_on_read,
    .on_write_error = dial_on_write_error,
};

/* A failure of the TLS handshake. Through a tunnel the proxy chose what
 * answered (its own certificate, if it intercepts; its own plain answer,
 * if it does not pass the tunnel through): the message names it first, so
 * that no cut of the message loses it. */
static void dial_tls_fail(dialer_t *d, const char *code, const char *msg)
{
    if (!d->proxy) {
        dial_finish(d, code, msg);
        return;
    }
    char m[1024];
    snprintf(m, sizeof m, "through the proxy %s: %s", d->proxy->label, msg);
    dial_finish(d, code, m);
}

static void on_timeout(uv_timer_t *t)
{
    dialer_t *d = t->data;
    char msg[512];
    if (d->state == DIAL_TUNNEL) {
        snprintf(msg, sizeof msg, "the proxy %s did not answer CONNECT for %s in time",
                 d->proxy->label, d->origin);
        dial_finish(d, "proxy", msg);
    } else if (d->state == DIAL_TLS) {
        snprintf(msg, sizeof msg, "TLS handshake with %s timed out", d->origin);
        dial_tls_fail(d, "timeout", msg);
    }
}

static void on_handshake(stream_t *s, const char *code, const char *msg)
{
    dialer_t *d = s->data;
    if (d->state != DIAL_TLS)
        return;
    if (code)
        dial_tls_fail(d, code, msg);
    else
        dial_finish(d, NULL, NULL);
}

static void step_tls(dialer_t *d)
{
    stream_t *tls;
    if (stream_tls_new(d->stream, d->tls, d->host, d->origin, d->loop, d->pool, &tls)) {
        dial_finish(d, "internal", "cannot set up TLS");
        return;
    }
    d->stream = tls;
    d->state = DIAL_TLS;
    stream_set_cbs(tls, &dial_cbs, d);
    stream_tls_handshake(tls, on_handshake); /* may call back from inside */
}

static void on_tunnel_open(stream_t *s, const char *code, const char *msg)
{
    dialer_t *d = s->data;
    if (d->state != DIAL_TUNNEL)
        return; /* the result was given (timed out): the caller closes */
    if (code)
        dial_finish(d, code, msg);
    else
        step_tls(d);
}

/* "host:port" for CONNECT: the origin as its authority (IPv6 bracketed). */
static void step_tunnel(dialer_t *d)
{
    const char *hp = strstr(d->origin, "://") + 3; /* origin is scheme://host:port */
    stream_t *tun;
    if (stream_tunnel_new(d->stream, hp, d->proxy->authz, d->proxy->label, &tun)) {
        dial_finish(d, "internal", "out of memory");
        return;
    }
    d->stream = tun;
    d->state = DIAL_TUNNEL;
    stream_set_cbs(tun, &dial_cbs, d);
    int rc = stream_tunnel_open(tun, on_tunnel_open);
    if (rc)
        dial_fail_uv(d, "proxy", "sending CONNECT to", rc);
}

static void on_connected(connector_t *cn, stream_t *tcp, const char *code, const char *msg,
                         void *arg)
{
    dialer_t *d = arg;
    uint64_t deadline = connector_deadline(cn);
    /* Through a proxy the refusal is the proxy's, reported as "proxy" and
     * retried as before: only the origin's own refusal counts. */
    d->refused = code && !d->proxy && connector_refused(cn);
    d->closes_pending++;
    connector_close(cn, on_part_closed, d);
    d->connector = NULL;
    /* Through a proxy a connect failure is the proxy's; the policy's
     * refusal of its address stays what it is. */
    if (code && d->proxy && errcode_of(code)->id != EC_FORBIDDEN) {
        char m[600];
        snprintf(m, sizeof m, "cannot reach the proxy: %s", msg);
        dial_finish(d, "proxy", m);
        return;
    }
    if (code) {
        dial_finish(d, code, msg);
        return;
    }
    d->stream = tcp;
    stream_set_cbs(tcp, &dial_cbs, d);
    if (!d->https) { /* plain http, direct or to the proxy in absolute form */
        dial_finish(d, NULL, NULL);
        return;
    }
    uint64_t now = uv_now(d->loop); /* still under the connect timeout of the address */
    uv_timer_start(&d->timer, on_timeout, deadline > now ? deadline - now : 0, 0);
    if (d->proxy)
        step_tunnel(d);
    else
        step_tls(d);
}

int dialer_start(const dialer_opts_t *o, dialer_done_cb cb, void *arg, dialer_t **out)
{
    dialer_t *d = calloc(1, sizeof *d);
    if (!d)
        return UV_ENOMEM;
    d->loop = o->loop;
    d->pool = o->pool;
    d->tls = o->tls;
    d->https = o->https;
    d->proxy = o->proxy;
    d->cb = cb;
    d->arg = arg;
    d->host = strdup(o->host);
    d->origin = strdup(o->origin);
    if (!d->host || !d->origin) {
        free(d->host);
        free(d->origin);
        free(d);
        return UV_ENOMEM;
    }
    const proxy_t *px = o->proxy;
    connector_opts_t co = {
        .loop = o->loop,
        .pool = o->pool,
        .policy = o->policy,
        .host = px ? px->host : o->host,
        .port = px ? px->port : o->port,
        .label = px ? px->label : o->origin,
        .timeout_ms = o->timeout_ms,
    };
    int rc = connector_start(&co, on_connected, d, &d->connector);
    if (rc) {
        free(d->host);
        free(d->origin);
        free(d);
        return rc;
    }
    uv_timer_init(o->loop, &d->timer);
    d->timer.data = d;
    *out = d;
    return 0;
}

int dialer_refused(const dialer_t *d)
{
    return d->refused;
}

void dialer_close(dialer_t *d, void (*cb)(void *arg), void *arg)
{
    d->closing = 1;
    d->close_cb = cb;
    d->close_arg = arg;
    if (d->state != DIAL_DONE)
        d->state = DIAL_DONE; /* no result after this */
    d->closes_pending++;
    uv_close((uv_handle_t *)&d->timer, on_timer_closed);
    if (d->connector) {
        d->closes_pending++;
        connector_close(d->connector, on_part_closed, d);
        d->connector = NULL;
    }
    if (d->stream) {
        d->closes_pending++;
        stream_close(d->stream, on_part_closed, d);
        d->stream = NULL;
    }
}
