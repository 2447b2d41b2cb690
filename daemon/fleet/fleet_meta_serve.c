/* fleet_meta_serve: the metadata exchange's server (fleet_meta.h): the
 * listener, and each connection's states from the handshake to its close. */
#include "fleet_meta.h"
#include "fleet_meta_internal.h"
#include "list.h"
#include "log.h"
#include "textnum.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    FM_SLICE = 256 * 1024, /* a HAVE's bytes encrypted per write: the loop is not held */
    FM_REQUEST_MS = 10000, /* accept to request line: the handshake and the line */
    FM_TOTAL_MS = 60000,   /* accept to close: a slow reader of a 16 MiB answer */
    FM_LINGER_MS = 2000,   /* after our FIN, the asker's own close awaited */
    FM_BACKLOG = 256,
};

typedef enum {
    CONN_HANDSHAKE, /* the TLS handshake: the asker's certificate checked */
    CONN_REQUEST,   /* reading the one request line */
    CONN_ANSWER,    /* writing the answer a slice at a time, then close_notify */
    CONN_LINGER,    /* shut for writing; what comes is dropped until the asker closes */
    CONN_CLOSING,   /* the handles are closing */
    CONN_STATES
} conn_state_t;

static const char *const conn_state_names[CONN_STATES] = {"handshake", "request", "answer",
                                                          "linger", "closing"};

/* Which state may follow which (row: from). */
static const unsigned char conn_next[CONN_STATES][CONN_STATES] = {
    /* done; refused (the alert goes first); too slow, gone or turned away at accept */
    [CONN_HANDSHAKE] = {[CONN_REQUEST] = 1, [CONN_LINGER] = 1, [CONN_CLOSING] = 1},
    /* a line, good or bad, is answered; too slow or gone */
    [CONN_REQUEST] = {[CONN_ANSWER] = 1, [CONN_CLOSING] = 1},
    /* all of it made and handed over; a write failed or too slow */
    [CONN_ANSWER] = {[CONN_LINGER] = 1, [CONN_CLOSING] = 1},
    /* the asker closed, or the linger is up */
    [CONN_LINGER] = {[CONN_CLOSING] = 1},
};

typedef struct fm_conn {
    fm_link_t link;
    uv_shutdown_t shutdown;
    list_node_t node; /* in server->conns until freed */
    fmeta_server_t *server;
    conn_state_t state;
    uint64_t started;    /* uv_now at accept: the bounds count from it */
    unsigned request_ms; /* the server's bounds when accepted */
    unsigned total_ms;
    int shut;                  /* LINGER: our FIN is out, every byte written */
    bytebuf_t line;            /* the request line as it comes, without its \n */
    unsigned char *body;       /* the answer after its first line (a HAVE's torrent) */
    size_t body_len, body_off; /* its length; how much of it is encrypted */
} fm_conn_t;

struct fmeta_server {
    uv_tcp_t listener;
    uv_loop_t *loop;
    fmeta_identity_t *id;
    fmeta_lookup_fn lookup;
    fmeta_lookup_fn verdict; /* VERDICT requests (fmeta_server_set_verdicts), or NULL */
    void *verdict_arg;
    void *arg;
    list_t conns;        /* every connection, until its memory goes */
    unsigned open;       /* how many */
    int port;            /* bound */
    unsigned request_ms; /* fmeta_server_set_timeouts */
    unsigned total_ms;
    fmeta_server_stats_t stats;
    uint64_t turned_away; /* closed at accept: FMETA_MAX_CONNS open */
    int closing;          /* fmeta_server_close was called */
    int listening;        /* the listener's close callback has not run */
    void (*done)(void *); /* fmeta_server_close's */
    void *done_arg;
};

/* Every change of state goes through here, checked against the table. */
static void conn_to(fm_conn_t *c, conn_state_t next)
{
    if (!conn_next[c->state][next]) {
        log_err("fleet meta: %s: refused state change %s -> %s", c->link.peer,
                conn_state_names[c->state], conn_state_names[next]);
        assert(!"fleet_meta connection state change not in the table");
        return;
    }
    c->state = next;
}

static void server_maybe_done(fmeta_server_t *s)
{
    if (!s->closing || s->listening || s->open > 0)
        return;
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    free(s);
    if (done)
        done(arg);
}

static void conn_closed(fm_link_t *l)
{
    fm_conn_t *c = container_of(l, fm_conn_t, link);
    fmeta_server_t *s = c->server;
    list_remove(&c->node);
    s->open--;
    bytebuf_free(&c->line);
    free(c->body);
    free(c);
    server_maybe_done(s);
}

/* The connection's one close path. */
static void conn_close(fm_conn_t *c)
{
    if (c->state == CONN_CLOSING)
        return;
    conn_to(c, CONN_CLOSING);
    fm_link_close(&c->link);
}

static void conn_on_timer(uv_timer_t *t)
{
    fm_conn_t *c = container_of((fm_link_t *)t->data, fm_conn_t, link);
    if (c->state != CONN_LINGER)
        log_debug("fleet meta: %s closed in state %s, past its bound", c->link.peer,
                  conn_state_names[c->state]);
    conn_close(c);
}

/* The one deadline, by state: the request's until the line is in, then
 * the whole exchange's; once our FIN is out, a short wait for the asker's. */
static void conn_arm(fm_conn_t *c)
{
    uint64_t now = uv_now(c->server->loop);
    uint64_t until =
        c->started + (c->state <= CONN_REQUEST ? c->request_ms : (uint64_t)c->total_ms);
    if (c->state == CONN_LINGER && c->shut && now + FM_LINGER_MS < until)
        until = now + FM_LINGER_MS;
    uv_timer_start(&c->link.timer, conn_on_timer, until > now ? until - now : 0, 0);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
    fm_conn_t *c = container_of(req, fm_conn_t, shutdown);
    if (status == UV_ECANCELED || c->state != CONN_LINGER)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->shut = 1;
    conn_arm(c);
}

/* Done sending: FIN after the writes in flight (uv_shutdown waits for
 * them), then read until the asker closes, so that our close never
 * resets a connection whose last bytes it has not read. */
static void conn_linger(fm_conn_t *c)
{
    conn_to(c, CONN_LINGER);
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->link.tcp, conn_on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    conn_arm(c);
}

/* Encrypts the next slice (the first comes with the answer's line), and
 * close_notify after the last; each slice is handed over once the one
 * before is written, so memory and time per turn stay bounded. */
static void conn_pump(fm_conn_t *c)
{
    size_t n = c->body_len - c->body_off;
    if (n > FM_SLICE)
        n = FM_SLICE;
    int rc = n ? fm_link_encrypt(&c->link, c->body + c->body_off, n) : 0;
    c->body_off += n;
    int last = c->body_off == c->body_len;
    if (!rc && last)
        rc = mbedtls_ssl_close_notify(&c->link.ssl);
    if (!rc)
        rc = fm_link_flush(&c->link);
    if (rc) {
        log_debug("fleet meta: %s: answer not sent (%d)", c->link.peer, rc);
        conn_close(c);
        return;
    }
    if (last)
        conn_linger(c);
}

static void conn_written(fm_link_t *l, int status)
{
    fm_conn_t *c = container_of(l, fm_conn_t, link);
    if (status < 0) {
        log_debug("fleet meta: %s: write: %s", l->peer, uv_strerror(status));
        conn_close(c);
    } else if (c->state == CONN_ANSWER) {
        conn_pump(c);
    }
}

/* Starts the answer: its first line, then body (copied: the lookup's bytes
 * are valid only during its call). */
static void conn_reply(fm_conn_t *c, const char *head, const unsigned char *body, size_t len)
{
    if (len && !(c->body = malloc(len))) {
        log_err("fleet meta: %s: out of memory for a %zu-byte answer", c->link.peer, len);
        conn_close(c);
        return;
    }
    if (len)
        memcpy(c->body, body, len);
    c->body_len = len;
    conn_to(c, CONN_ANSWER);
    conn_arm(c);
    int rc = fm_link_encrypt(&c->link, head, strlen(head));
    if (rc) {
        conn_close(c);
        return;
    }
    conn_pump(c);
}

/* The request line: NULL with *sha and *url (NULL when none) pointing into
 * line, NUL-terminated there; or the reason it is not one. */
static const char *request_parse(char *line, size_t len, int verdicts, int *verdict, char **sha,
                                 char **url)
{
    static const char verb[] = "TORRENT ", vverb[] = "VERDICT ";
    const size_t vlen = sizeof verb - 1;
    _Static_assert(sizeof verb == sizeof vverb, "the verbs are one length");
    if (memchr(line, '\0', len))
        return "a NUL byte in the request";
    line[len] = '\0';
    *verdict = verdicts && len >= vlen && memcmp(line, vverb, vlen) == 0;
    if (!*verdict && (len < vlen || memcmp(line, verb, vlen) != 0))
        return "unknown request (want TORRENT <sha256> [<url>])";
    char *p = line + vlen;
    size_t rest = len - vlen;
    if (rest < 64 || (rest > 64 && p[64] != ' '))
        return "not a SHA-256 (want 64 lowercase hex digits)";
    char keep = p[64];
    p[64] = '\0';
    int hex = hex_is(p, 64, 1);
    p[64] = keep;
    if (!hex)
        return "not a SHA-256 (want 64 lowercase hex digits)";
    *sha = p;
    *url = NULL;
    if (rest == 64)
        return NULL;
    char *u = p + 65;
    size_t ulen = rest - 65;
    if (ulen == 0)
        return "an empty url";
    if (ulen > FMETA_MAX_URL)
        return "url too long (at most 4096 bytes)";
    for (size_t i = 0; i < ulen; i++)
        if ((unsigned char)u[i] <= ' ' || (unsigned char)u[i] >= 0x7f)
            return "a space or a control character in the url";
    p[64] = '\0';
    *url = u;
    return NULL;
}

static void conn_answer(fm_conn_t *c)
{
    fmeta_server_t *s = c->server;
    char *sha = NULL, *url = NULL;
    int verdict = 0;
    const char *bad = bytebuf_reserve(&c->line, 1) != 0
                          ? "out of memory"
                          : request_parse(bytebuf_data(&c->line), bytebuf_len(&c->line),
                                          s->verdict != NULL, &verdict, &sha, &url);
    if (bad) {
        s->stats.bad++;
        log_info("fleet meta: %s: bad request: %s", c->link.peer, bad);
        char head[160];
        snprintf(head, sizeof head, "ERR %s\n", bad);
        conn_reply(c, head, NULL, 0);
        return;
    }
    const unsigned char *t = NULL;
    size_t len = 0;
    fmeta_status_t st = verdict ? s->verdict(s->verdict_arg, sha, url, c->link.peer, &t, &len)
                                : s->lookup(s->arg, sha, url, c->link.peer, &t, &len);
    if (c->state == CONN_CLOSING) /* the lookup closed the server */
        return;
    if (st == FMETA_HAVE && (!t || len == 0 || len > FMETA_MAX_TORRENT)) {
        log_warn("fleet meta: %s: the torrent of %s has %zu bytes (1 to %u allowed): "
                 "answered NONE",
                 c->link.peer, sha, len, FMETA_MAX_TORRENT);
        st = FMETA_NONE;
    }
    char head[64];
    switch (st) {
    case FMETA_HAVE:
        s->stats.have++;
        snprintf(head, sizeof head, "HAVE %zu\n", len);
        conn_reply(c, head, t, len);
        return;
    case FMETA_FETCHING:
        s->stats.fetching++;
        conn_reply(c, "FETCHING\n", NULL, 0);
        return;
    default:
        s->stats.none++;
        conn_reply(c, "NONE\n", NULL, 0);
        return;
    }
}

/* Reads plaintext up to the line's \n; what follows it is ignored (one
 * request per connection). */
static void conn_read_request(fm_conn_t *c)
{
    for (;;) {
        char buf[4096];
        int n = mbedtls_ssl_read(&c->link.ssl, (unsigned char *)buf, sizeof buf);
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            return;
        if (n == 0)
            continue; /* an empty record; each call consumes one */
        if (n < 0) {
            log_debug("fleet meta: %s: no request (%d)", c->link.peer, n);
            conn_close(c);
            return;
        }
        const char *nl = memchr(buf, '\n', (size_t)n);
        size_t take = nl ? (size_t)(nl - buf) : (size_t)n;
        if (bytebuf_len(&c->line) + take > FMETA_MAX_LINE) {
            c->server->stats.bad++;
            log_info("fleet meta: %s: bad request: longer than %d bytes", c->link.peer,
                     FMETA_MAX_LINE);
            conn_reply(c, "ERR request line too long (at most 4200 bytes)\n", NULL, 0);
            return;
        }
        if (bytebuf_append(&c->line, buf, take) != 0) {
            conn_close(c);
            return;
        }
        if (nl) {
            conn_answer(c);
            return;
        }
    }
}

static void conn_handshake(fm_conn_t *c)
{
    int rc = mbedtls_ssl_handshake(&c->link.ssl);
    if (rc == 0 || rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
        int frc = fm_link_flush(&c->link);
        if (frc)
            conn_close(c);
        else if (rc == 0)
            conn_to(c, CONN_REQUEST);
        return;
    }
    char why[400];
    fm_handshake_why(&c->link, rc, why, sizeof why);
    c->server->stats.refused++;
    log_info("fleet meta: a handshake failed: %s", why);
    /* The alert goes out before the FIN: the asker learns it was refused. */
    if (fm_link_flush(&c->link) != 0)
        conn_close(c);
    else
        conn_linger(c);
}

static void conn_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    fm_conn_t *c = container_of((fm_link_t *)st->data, fm_conn_t, link);
    (void)buf;
    if (n == 0 || c->state == CONN_CLOSING)
        return;
    if (n < 0) {
        /* An asker may shut its side once its line is sent: answer on. */
        if (n == UV_EOF && c->state == CONN_ANSWER)
            uv_read_stop(st);
        else
            conn_close(c);
        return;
    }
    bytebuf_commit(&c->link.in, (size_t)n);
    if (c->state >= CONN_ANSWER) {
        bytebuf_clear(&c->link.in); /* past the request: nothing more is wanted */
        return;
    }
    if (c->state == CONN_HANDSHAKE)
        conn_handshake(c);
    if (c->state == CONN_REQUEST)
        conn_read_request(c);
}

static const fm_link_ops_t conn_ops = {.written = conn_written, .closed = conn_closed};

static void server_on_accept(uv_stream_t *ls, int status)
{
    fmeta_server_t *s = container_of((uv_tcp_t *)ls, fmeta_server_t, listener);
    if (status < 0) {
        log_warn("fleet meta: accept: %s", uv_strerror(status));
        return;
    }
    fm_conn_t *c = calloc(1, sizeof *c);
    if (!c) {
        log_err("fleet meta: out of memory for a connection");
        return;
    }
    c->server = s;
    c->state = CONN_HANDSHAKE;
    bytebuf_init(&c->line, FMETA_MAX_LINE + 1);
    list_push_back(&s->conns, &c->node);
    s->open++;
    if (fm_link_init(&c->link, s->loop, &conn_ops) != 0) {
        conn_to(c, CONN_CLOSING); /* fm_link_init closes what it made */
        return;
    }
    if (uv_accept(ls, (uv_stream_t *)&c->link.tcp) != 0) {
        conn_close(c);
        return;
    }
    struct sockaddr_storage ss;
    int sslen = sizeof ss;
    if (uv_tcp_getpeername(&c->link.tcp, (struct sockaddr *)&ss, &sslen) != 0 ||
        hostport_format((struct sockaddr *)&ss, c->link.peer, sizeof c->link.peer) < 0)
        snprintf(c->link.peer, sizeof c->link.peer, "?");
    if (s->open > FMETA_MAX_CONNS) {
        /* Accepted to be closed: left in the backlog, it would stall the
         * listener (libuv stops reading it until accept is called). */
        s->turned_away++;
        if ((s->turned_away & (s->turned_away - 1)) == 0) /* 1, 2, 4...: a flood logs little */
            log_warn("fleet meta: %u connections open: %s closed at accept (%llu so far)",
                     FMETA_MAX_CONNS, c->link.peer, (unsigned long long)s->turned_away);
        conn_close(c);
        return;
    }
    c->started = uv_now(s->loop);
    c->request_ms = s->request_ms;
    c->total_ms = s->total_ms;
    uv_tcp_nodelay(&c->link.tcp, 1);
    if (fm_link_tls(&c->link, &s->id->server) != 0 ||
        uv_read_start((uv_stream_t *)&c->link.tcp, fm_link_alloc, conn_on_read) != 0) {
        log_err("fleet meta: %s: cannot start its connection", c->link.peer);
        conn_close(c);
        return;
    }
    conn_arm(c);
}

static void server_on_listener_closed(uv_handle_t *h)
{
    fmeta_server_t *s = container_of((uv_tcp_t *)h, fmeta_server_t, listener);
    s->listening = 0;
    server_maybe_done(s);
}

int fmeta_server_start(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                       fmeta_lookup_fn lookup, void *arg, fmeta_server_t **out, char *err,
                       size_t errlen)
{
    struct sockaddr_storage ss;
    if (fm_addr_parse(ip, port, &ss) != 0) {
        snprintf(err, errlen, "fleet meta: %s port %d: not a numeric IP address and port",
                 ip ? ip : "(none)", port);
        return -EINVAL;
    }
    fmeta_server_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->loop = loop;
    s->id = id;
    s->lookup = lookup;
    s->arg = arg;
    s->request_ms = FM_REQUEST_MS;
    s->total_ms = FM_TOTAL_MS;
    list_init(&s->conns);
    int rc = uv_tcp_init(loop, &s->listener);
    if (rc) {
        snprintf(err, errlen, "fleet meta: %s", uv_strerror(rc));
        free(s);
        return rc;
    }
    s->listening = 1;
    rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss,
                     ss.ss_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&s->listener, FM_BACKLOG, server_on_accept);
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    if (!rc)
        rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    if (rc) {
        char text[HOSTPORT_TEXT_MAX] = "?";
        hostport_format((struct sockaddr *)&ss, text, sizeof text);
        snprintf(err, errlen, "fleet meta: cannot listen on %s: %s", text, uv_strerror(rc));
        s->closing = 1; /* freed by its close callback; no done */
        uv_close((uv_handle_t *)&s->listener, server_on_listener_closed);
        return rc;
    }
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    *out = s;
    return 0;
}

int fmeta_server_port(const fmeta_server_t *s)
{
    return s->port;
}

void fmeta_server_set_timeouts(fmeta_server_t *s, unsigned request_ms, unsigned total_ms)
{
    if (request_ms)
        s->request_ms = request_ms;
    if (total_ms)
        s->total_ms = total_ms;
}

void fmeta_server_stats(const fmeta_server_t *s, fmeta_server_stats_t *st)
{
    *st = s->stats;
    st->resumed = s->id->resumed;
}

void fmeta_server_load(const fmeta_server_t *s, unsigned *open, uint64_t *turned_away)
{
    if (open)
        *open = s->open;
    if (turned_away)
        *turned_away = s->turned_away;
}

void fmeta_server_close(fmeta_server_t *s, void (*done)(void *), void *arg)
{
    assert(!s->closing);
    s->closing = 1;
    s->done = done;
    s->done_arg = arg;
    uv_close((uv_handle_t *)&s->listener, server_on_listener_closed);
    list_node_t *n, *tmp;
    list_foreach_safe(&s->conns, n, tmp)
    {
        conn_close(list_entry(n, fm_conn_t, node)); /* frees nothing now: its handles close first */
    }
}

void fmeta_server_set_verdicts(fmeta_server_t *s, fmeta_lookup_fn fn, void *arg)
{
    s->verdict = fn;
    s->verdict_arg = arg;
}
