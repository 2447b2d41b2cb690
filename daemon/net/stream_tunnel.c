/* stream_tunnel: CONNECT through an HTTP proxy, then a pass-through stream
 * (see the header). */
#include "stream_tunnel.h"

#include <errno.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define TUNNEL_MAX_HEAD (16 * 1024) /* the proxy's answer to CONNECT, headers and all */

typedef struct stream_tunnel {
    stream_t base;
    stream_t *inner; /* owned; closed by tun_close */
    char *authority; /* "host:port" */
    char *authz;     /* Proxy-Authorization value, or NULL; freed once sent */
    char proxy[300]; /* the proxy's label, for messages */
    stream_tunnel_open_cb open_cb;
    int opening;   /* the proxy's answer is being read */
    int want_read; /* the user asked to read while it was: start once open */
    llhttp_t parser;
    llhttp_settings_t settings;
    size_t head_bytes; /* of the answer, so far */
    char reason[80];   /* the answer's reason phrase, cut, printable */
    size_t reason_len;
    int head_done; /* the answer's headers are in */
    stream_fault_t fault;
    stream_close_cb close_cb;
    void *close_arg;
} stream_tunnel_t;

/* ---- opening: CONNECT and the proxy's answer ---------------------------- */

static int on_status(llhttp_t *p, const char *at, size_t n)
{
    stream_tunnel_t *t = p->data;
    for (size_t i = 0; i < n && t->reason_len + 1 < sizeof t->reason; i++)
        t->reason[t->reason_len++] = at[i] >= 0x20 && at[i] < 0x7f ? at[i] : '?';
    t->reason[t->reason_len] = '\0';
    return 0;
}

/* The answer has no body we want: stop at its end either way (2: no body,
 * and llhttp_execute returns HPE_PAUSED_UPGRADE there). */
static int on_headers_complete(llhttp_t *p)
{
    stream_tunnel_t *t = p->data;
    int status = llhttp_get_status_code(p);
    if (status >= 100 && status < 200 && status != 101) {
        /* interim (RFC 9110 15.2): no body; the final answer follows */
        t->reason_len = 0;
        t->reason[0] = '\0';
        return 1;
    }
    t->head_done = 1;
    return 2;
}

static void forget_authz(stream_tunnel_t *t)
{
    if (t->authz) { /* a secret: not kept longer than needed */
        memset(t->authz, 0, strlen(t->authz));
        free(t->authz);
        t->authz = NULL;
    }
}

static int tun_read_start(stream_t *s);
static void open_fail(stream_tunnel_t *t, const char *code, const char *fmt, const char *what);

/* Opening is over: reading stops until the user starts it (or starts
 * now, if the user asked during the opening), then goes to the
 * pass-through callbacks. */
static void open_done(stream_tunnel_t *t, const char *code, const char *msg)
{
    t->opening = 0;
    stream_read_stop(t->inner);
    forget_authz(t);
    int rc = !code && t->want_read ? tun_read_start(&t->base) : 0;
    if (rc) {
        open_fail(t, "proxy", "cannot read from the tunnel through %s (%s) to %s", uv_strerror(rc));
        return;
    }
    t->open_cb(&t->base, code, msg);
}

static void open_fail(stream_tunnel_t *t, const char *code, const char *fmt, const char *what)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, t->proxy, what, t->authority);
    open_done(t, code, msg);
}

/* The answer's status decides. */
static void open_answered(stream_tunnel_t *t, size_t beyond)
{
    int status = llhttp_get_status_code(&t->parser);
    char what[128];
    snprintf(what, sizeof what, "%d %s", status, t->reason);
    if (status == 407) {
        open_fail(t, "proxy_auth",
                  "the proxy %s wants a user and password (%s) for the tunnel to %s: give them "
                  "in the proxy URL (http://user:password@host:port), or check them",
                  what);
        return;
    }
    if (status >= 400 && status <= 499) {
        /* The proxy's rules say no to this destination (Squid's 403): the
         * same CONNECT would be refused again, so it is not retried. Its
         * 5xx (an upstream it could not reach, an overload) may pass. */
        open_fail(t, "proxy_refused", "the proxy %s refused the tunnel: %s (CONNECT %s)", what);
        return;
    }
    if (status >= 500) { /* not a refusal: its upstream, its load; may pass */
        open_fail(t, "proxy", "the proxy %s failed to open the tunnel: %s (CONNECT %s)", what);
        return;
    }
    if (status < 200 || status > 299) { /* 101, a 3xx (a portal's redirect): no tunnel */
        open_fail(t, "proxy", "the proxy %s did not open the tunnel: %s (CONNECT %s)", what);
        return;
    }
    if (beyond) { /* the origin speaks only after our TLS ClientHello */
        open_fail(t, "proxy",
                  "the proxy %s sent bytes after its answer (%s) before the tunnel to %s was used",
                  what);
        return;
    }
    open_done(t, NULL, NULL);
}

static void open_on_read(stream_t *inner, ssize_t n, buf_t *buf, const char *p)
{
    (void)buf;
    stream_tunnel_t *t = inner->data;
    if (n < 0) {
        open_fail(t, "proxy", "the proxy %s closed the connection (%s) before answering CONNECT %s",
                  n == UV_EOF ? "end of stream" : uv_strerror((int)n));
        return;
    }
    t->head_bytes += (size_t)n;
    llhttp_errno_t err = llhttp_execute(&t->parser, p, (size_t)n);
    if (err == HPE_PAUSED_UPGRADE && t->head_done) {
        const char *end = llhttp_get_error_pos(&t->parser);
        open_answered(t, (size_t)(p + n - end));
        return;
    }
    if (err != HPE_OK) {
        open_fail(t, "proxy", "bad answer from the proxy %s (%s) to CONNECT %s",
                  llhttp_get_error_reason(&t->parser));
        return;
    }
    if (t->head_bytes > TUNNEL_MAX_HEAD)
        open_fail(t, "proxy", "the proxy %s sent more than %s of headers for CONNECT %s", "16 KiB");
}

static void open_on_write_error(stream_t *inner, int err)
{
    stream_tunnel_t *t = inner->data;
    if (t->opening)
        open_fail(t, "proxy", "cannot send CONNECT to the proxy %s (%s) for %s", uv_strerror(err));
    else
        t->base.cbs->on_write_error(&t->base, err);
}

static const stream_cbs_t open_cbs = {
    .on_read = open_on_read,
    .on_write_error = open_on_write_error,
};

int stream_tunnel_open(stream_t *s, stream_tunnel_open_cb cb)
{
    stream_tunnel_t *t = (stream_tunnel_t *)s;
    char *req = NULL;
    int n = asprintf(&req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%s\r\n", t->authority,
                     t->authority, t->authz ? "Proxy-Authorization: " : "",
                     t->authz ? t->authz : "", t->authz ? "\r\n" : "");
    if (n < 0)
        return UV_ENOMEM;
    t->open_cb = cb;
    t->opening = 1;
    stream_set_cbs(t->inner, &open_cbs, t);
    int rc = stream_write(t->inner, req, (size_t)n);
    if (!rc)
        rc = stream_read_start(t->inner);
    if (rc)
        t->opening = 0;
    return rc;
}

/* ---- the open tunnel: the inner stream's bytes, handed through ---------- */

static void pass_alloc(stream_t *inner, char **p, size_t *room)
{
    stream_tunnel_t *t = inner->data;
    t->base.cbs->alloc(&t->base, p, room);
}

static void pass_on_read(stream_t *inner, ssize_t n, buf_t *buf, const char *p)
{
    stream_tunnel_t *t = inner->data;
    t->base.cbs->on_read(&t->base, n, buf, p);
}

static void pass_on_activity(stream_t *inner)
{
    stream_tunnel_t *t = inner->data;
    if (t->base.cbs->on_activity)
        t->base.cbs->on_activity(&t->base);
}

/* With and without the user's alloc: the inner stream reads into the
 * user's memory exactly when the user reads into its own. */
static const stream_cbs_t pass_cbs_alloc = {
    .alloc = pass_alloc,
    .on_read = pass_on_read,
    .on_activity = pass_on_activity,
    .on_write_error = open_on_write_error,
};
static const stream_cbs_t pass_cbs_pooled = {
    .on_read = pass_on_read,
    .on_activity = pass_on_activity,
    .on_write_error = open_on_write_error,
};

static int tun_read_start(stream_t *s)
{
    stream_tunnel_t *t = (stream_tunnel_t *)s;
    if (t->opening) {
        t->want_read = 1; /* the answer is being read; the user's reads come after */
        return 0;
    }
    stream_set_cbs(t->inner, t->base.cbs->alloc ? &pass_cbs_alloc : &pass_cbs_pooled, t);
    return stream_read_start(t->inner);
}

static void tun_read_stop(stream_t *s)
{
    stream_tunnel_t *t = (stream_tunnel_t *)s;
    t->want_read = 0;
    if (!t->opening)
        stream_read_stop(t->inner);
}

static int tun_write(stream_t *s, char *buf, size_t n)
{
    return stream_write(((stream_tunnel_t *)s)->inner, buf, n);
}

static void on_inner_closed(void *arg)
{
    stream_tunnel_t *t = arg;
    stream_close_cb cb = t->close_cb;
    void *cb_arg = t->close_arg;
    free(t->authority);
    forget_authz(t);
    free(t);
    if (cb)
        cb(cb_arg);
}

static void tun_close(stream_t *s, stream_close_cb cb, void *arg)
{
    stream_tunnel_t *t = (stream_tunnel_t *)s;
    t->opening = 0;
    t->close_cb = cb;
    t->close_arg = arg;
    stream_close(t->inner, on_inner_closed, t);
}

static int tun_reusable(const stream_t *s)
{
    const stream_tunnel_t *t = (const stream_tunnel_t *)s;
    return !t->opening && stream_reusable(t->inner);
}

static void tun_release(stream_t *s)
{
    stream_release(((stream_tunnel_t *)s)->inner);
}

/* The tunnel adds no failure of its own once open: the inner stream's. */
static const stream_fault_t *tun_fault(const stream_t *s)
{
    return stream_fault(((const stream_tunnel_t *)s)->inner);
}

/* Open, the tunnel passes the socket's bytes through as they are (the
 * proxy's answer is behind them: bytes after it fail the opening). */
static int tun_fileno(const stream_t *s)
{
    const stream_tunnel_t *t = (const stream_tunnel_t *)s;
    return t->opening ? -EBUSY : stream_fileno(t->inner);
}

static size_t tun_unsent(const stream_t *s)
{
    return stream_unsent(((const stream_tunnel_t *)s)->inner);
}

static const stream_ops_t tun_ops = {
    .read_start = tun_read_start,
    .read_stop = tun_read_stop,
    .write = tun_write,
    .close = tun_close,
    .reusable = tun_reusable,
    .release = tun_release,
    .fault = tun_fault,
    .fileno = tun_fileno,
    .unsent = tun_unsent,
};

int stream_tunnel_new(stream_t *inner, const char *authority, const char *authz, const char *proxy,
                      stream_t **out)
{
    stream_tunnel_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->authority = strdup(authority);
    t->authz = authz ? strdup(authz) : NULL;
    if (!t->authority || (authz && !t->authz)) {
        free(t->authority);
        free(t->authz);
        free(t);
        return -ENOMEM;
    }
    t->base.ops = &tun_ops;
    t->inner = inner;
    snprintf(t->proxy, sizeof t->proxy, "%s", proxy);
    llhttp_settings_init(&t->settings);
    t->settings.on_status = on_status;
    t->settings.on_headers_complete = on_headers_complete;
    llhttp_init(&t->parser, HTTP_RESPONSE, &t->settings);
    t->parser.data = t;
    *out = &t->base;
    return 0;
}
