/* connector: DNS, the address walk under the policy, connect timeouts. */
#include "connector.h"
#include "stream_tcp.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct connector {
    uv_loop_t *loop;
    bufpool_t *pool;
    const netpolicy_t *policy;
    char *host; /* for messages */
    char *label;
    unsigned timeout_ms;
    uv_getaddrinfo_t gai;
    uv_connect_t connect_req;
    uv_timer_t timer;        /* the DNS timeout, then each connect's */
    struct addrinfo *ai;     /* resolved addresses, freed at the end */
    struct addrinfo *ai_cur; /* the address being tried */
    stream_t *attempt;       /* the TCP stream connecting to ai_cur, or NULL */
    int attempt_closing;     /* attempt failed: its close callback moves on */
    int dns_pending;         /* the DNS answer is still to come (0 or 1) */
    int closes_pending;      /* close callbacks still to come, once closing */
    int last_err;            /* last connect error (libuv code) for the message */
    int denied;              /* resolved addresses the network policy refused */
    char denied_addr[64];    /* the first of them, for the message */
    int self;                /* of those, how many are hubd's own HTTP front */
    uint64_t deadline;       /* see connector_deadline */
    int done;                /* the result was given: no more callbacks */
    int closing;             /* connector_close called */
    connector_done_cb cb;
    void *arg;
    void (*close_cb)(void *);
    void *close_arg;
};

static void connector_try_next(connector_t *c);

static void connector_maybe_free(connector_t *c)
{
    if (!c->closing || c->closes_pending || c->dns_pending)
        return;
    void (*cb)(void *) = c->close_cb;
    void *arg = c->close_arg;
    if (c->ai)
        uv_freeaddrinfo(c->ai);
    free(c->host);
    free(c->label);
    free(c);
    cb(arg);
}

/* The one way a result leaves. */
static void connector_finish(connector_t *c, stream_t *tcp, const char *code, const char *msg)
{
    assert(!c->done);
    c->done = 1;
    uv_timer_stop(&c->timer);
    c->cb(c, tcp, code, msg, c->arg);
}

static void connector_fail_uv(connector_t *c, const char *code, const char *what, int uverr)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s: %s", what, c->label, uv_strerror(uverr));
    connector_finish(c, NULL, code, msg);
}

/* The attempt's handle is closed: go on with the next address, or count
 * the close when the connector itself is closing. */
static void on_attempt_closed(void *arg)
{
    connector_t *c = arg;
    c->attempt = NULL;
    c->attempt_closing = 0;
    if (c->closing) {
        c->closes_pending--;
        connector_maybe_free(c);
        return;
    }
    connector_try_next(c);
}

static void attempt_abandon(connector_t *c)
{
    if (c->attempt_closing)
        return;
    c->attempt_closing = 1;
    stream_close(c->attempt, on_attempt_closed, c);
}

static void on_timeout(uv_timer_t *t)
{
    connector_t *c = t->data;
    if (c->done || c->closing)
        return;
    if (!c->attempt) {
        connector_finish(c, NULL, "timeout", "DNS lookup timed out");
        return;
    }
    c->last_err = UV_ETIMEDOUT;
    attempt_abandon(c);
}

static void on_connect(uv_connect_t *cr, int status)
{
    connector_t *c = cr->data;
    if (status == UV_ECANCELED || c->closing || c->attempt_closing)
        return;
    if (status < 0) {
        c->last_err = status;
        attempt_abandon(c);
        return;
    }
    stream_t *tcp = c->attempt;
    c->attempt = NULL;
    uv_tcp_nodelay(stream_tcp_handle(tcp), 1);
    connector_finish(c, tcp, NULL, NULL);
}

static int addr_is_ip(const struct addrinfo *a)
{
    return a->ai_family == AF_INET || a->ai_family == AF_INET6;
}

/* Tries the next resolved address; one connect timeout per address. */
static void connector_try_next(connector_t *c)
{
    c->ai_cur = c->ai_cur ? c->ai_cur->ai_next : c->ai;
    /* Every address we would connect to is checked, after DNS: a name
     * that resolves to a denied address is refused like the address. */
    /* hubd's own HTTP front is one of them, whatever name led there: a
     * fetch from it would wait on hubd's own queue (netpolicy.h). */
    while (c->ai_cur && (!addr_is_ip(c->ai_cur) ||
                         (c->policy && (!netpolicy_addr_ok(c->policy, c->ai_cur->ai_addr) ||
                                        netpolicy_is_self(c->policy, c->ai_cur->ai_addr))))) {
        if (addr_is_ip(c->ai_cur) && c->denied++ == 0)
            uv_ip_name(c->ai_cur->ai_addr, c->denied_addr, sizeof c->denied_addr);
        if (addr_is_ip(c->ai_cur) && c->policy && netpolicy_is_self(c->policy, c->ai_cur->ai_addr))
            c->self++;
        c->ai_cur = c->ai_cur->ai_next;
    }
    if (!c->ai_cur && c->self && !c->last_err) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "%s resolves to hubd's own HTTP front (%s, http_listen): hubd never fetches "
                 "from itself",
                 c->host, c->denied_addr);
        connector_finish(c, NULL, "forbidden", msg);
        return;
    }
    if (!c->ai_cur && c->denied && !c->last_err) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "%s resolves only to addresses the network policy denies (%s): see "
                 "deny_networks",
                 c->host, c->denied_addr);
        connector_finish(c, NULL, "forbidden", msg);
        return;
    }
    if (!c->ai_cur) {
        connector_fail_uv(c, c->last_err == UV_ETIMEDOUT ? "timeout" : "connect",
                          "cannot connect to", c->last_err ? c->last_err : UV_ECONNREFUSED);
        return;
    }
    int rc = stream_tcp_new(c->loop, c->pool, &c->attempt);
    if (rc) {
        connector_fail_uv(c, "internal", "socket for", rc);
        return;
    }
    c->connect_req.data = c;
    rc = uv_tcp_connect(&c->connect_req, stream_tcp_handle(c->attempt), c->ai_cur->ai_addr,
                        on_connect);
    if (rc) {
        c->last_err = rc;
        attempt_abandon(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, c->timeout_ms, 0);
    c->deadline = uv_now(c->loop) + c->timeout_ms;
}

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *ai)
{
    connector_t *c = g->data;
    c->dns_pending = 0;
    c->ai = ai;
    if (c->closing) {
        connector_maybe_free(c);
        return;
    }
    if (c->done)
        return; /* the lookup timed out; the answer came late */
    if (status < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "cannot resolve %s: %s", c->host, uv_strerror(status));
        connector_finish(c, NULL, "dns", msg);
        return;
    }
    connector_try_next(c);
}

int connector_start(const connector_opts_t *o, connector_done_cb cb, void *arg, connector_t **out)
{
    connector_t *c = calloc(1, sizeof *c);
    if (!c)
        return UV_ENOMEM;
    c->host = strdup(o->host);
    c->label = strdup(o->label);
    if (!c->host || !c->label) {
        free(c->host);
        free(c->label);
        free(c);
        return UV_ENOMEM;
    }
    c->loop = o->loop;
    c->pool = o->pool;
    c->policy = o->policy;
    c->timeout_ms = o->timeout_ms;
    c->cb = cb;
    c->arg = arg;
    c->gai.data = c;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    int rc = uv_getaddrinfo(c->loop, &c->gai, on_resolved, o->host, o->port, &hints);
    if (rc) {
        free(c->host);
        free(c->label);
        free(c);
        return rc;
    }
    c->dns_pending = 1;
    uv_timer_init(c->loop, &c->timer);
    c->timer.data = c;
    uv_timer_start(&c->timer, on_timeout, c->timeout_ms, 0);
    c->deadline = uv_now(c->loop) + c->timeout_ms;
    *out = c;
    return 0;
}

int connector_refused(const connector_t *c)
{
    return !c->ai_cur && (c->last_err == 0 || c->last_err == UV_ECONNREFUSED) && !c->denied;
}

uint64_t connector_deadline(const connector_t *c)
{
    return c->deadline;
}

static void on_timer_closed(uv_handle_t *h)
{
    connector_t *c = h->data;
    c->closes_pending--;
    connector_maybe_free(c);
}

void connector_close(connector_t *c, void (*cb)(void *arg), void *arg)
{
    assert(!c->closing);
    c->closing = 1;
    c->close_cb = cb;
    c->close_arg = arg;
    c->closes_pending++;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
    if (c->attempt) {
        c->closes_pending++; /* counted whether it closes now or was already */
        attempt_abandon(c);
    }
}
