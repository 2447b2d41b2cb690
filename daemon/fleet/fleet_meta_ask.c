/* fleet_meta_ask: asking a node for a torrent (fleet_meta.h): connect, the
 * handshake, the request line, the answer, each ask one owner of one link. */
#include "fleet_meta.h"
#include "fleet_meta_internal.h"
#include "list.h"
#include "log.h"
#include "textnum.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    FM_HEAD_MAX = 256, /* an answer's first line, its \n included */
};

typedef enum {
    ASK_CONNECT,   /* the TCP connect */
    ASK_HANDSHAKE, /* the TLS handshake: the node's certificate checked */
    ASK_ANSWER,    /* the request sent; reading the answer */
    ASK_CLOSING,   /* answered, failed or cancelled: the handles are closing */
    ASK_STATES
} ask_state_t;

static const char *const ask_state_words[ASK_STATES] = {"connecting", "in the TLS handshake",
                                                        "waiting for its answer", "closing"};

static const unsigned char ask_next[ASK_STATES][ASK_STATES] = {
    [ASK_CONNECT] = {[ASK_HANDSHAKE] = 1, [ASK_CLOSING] = 1}, /* connected; failed */
    [ASK_HANDSHAKE] = {[ASK_ANSWER] = 1, [ASK_CLOSING] = 1},  /* done; refused or failed */
    [ASK_ANSWER] = {[ASK_CLOSING] = 1},                       /* answered or failed */
};

struct fmeta_ask {
    fm_link_t link;
    fmeta_identity_t *id; /* its sessions: the one offered, the one kept */
    uv_connect_t connect;
    ask_state_t state;
    fmeta_reply_fn cb; /* NULL once called or cancelled */
    void *arg;
    unsigned timeout_ms; /* for the message */
    int early;           /* a failure inside fmeta_ask, told from the timer, not from inside */
    char *line;          /* the request line, its \n included */
    size_t line_len;
    bytebuf_t answer; /* the answer's plaintext as it comes */
};

/* Every change of state goes through here, checked against the table. */
static void ask_to(fmeta_ask_t *a, ask_state_t next)
{
    if (!ask_next[a->state][next]) {
        log_err("fleet meta: ask of %s: refused state change %s -> %s", a->link.peer,
                ask_state_words[a->state], ask_state_words[next]);
        assert(!"fleet_meta ask state change not in the table");
        return;
    }
    a->state = next;
}

/* The ask's one end: closes the link, then tells the asker (the answer's
 * bytes stay valid until the close callbacks, after this returns). */
static void ask_finish(fmeta_ask_t *a, int rc, fmeta_status_t st, const unsigned char *t,
                       size_t len, const char *why)
{
    if (a->state == ASK_CLOSING)
        return;
    if (rc == -EACCES)
        fm_link_flush_now(&a->link); /* our alert, if we refused the node */
    ask_to(a, ASK_CLOSING);
    fm_link_close(&a->link);
    fmeta_reply_fn cb = a->cb;
    a->cb = NULL;
    if (cb)
        cb(a->arg, rc, st, t, len, why);
}

static void ask_fail(fmeta_ask_t *a, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void ask_fail(fmeta_ask_t *a, int rc, const char *fmt, ...)
{
    char why[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ask_finish(a, rc, 0, NULL, 0, why);
}

static void ask_closed(fm_link_t *l)
{
    fmeta_ask_t *a = container_of(l, fmeta_ask_t, link);
    bytebuf_free(&a->answer);
    free(a->line);
    free(a);
}

static void ask_written(fm_link_t *l, int status)
{
    fmeta_ask_t *a = container_of(l, fmeta_ask_t, link);
    if (status == UV_EPIPE || status == UV_ECONNRESET) /* as a read would say */
        ask_fail(a, -ECONNRESET, "%s closed the connection %s", l->peer,
                 a->state == ASK_HANDSHAKE ? "in the TLS handshake" : "before its answer");
    else if (status < 0)
        ask_fail(a, status, "%s: write: %s", l->peer, uv_strerror(status));
}

static const fm_link_ops_t ask_ops = {.written = ask_written, .closed = ask_closed};

/* The answer so far: 1 when it is complete (or wrong: the ask is finished
 * either way), 0 when more is needed. */
static int ask_parse(fmeta_ask_t *a)
{
    const char *p = bytebuf_data(&a->answer);
    size_t n = bytebuf_len(&a->answer);
    const char *nl = memchr(p, '\n', n < FM_HEAD_MAX ? n : FM_HEAD_MAX);
    if (!nl) {
        if (n < FM_HEAD_MAX)
            return 0;
        ask_fail(a, -EPROTO, "%s: not an answer (no line end in its first %d bytes)", a->link.peer,
                 FM_HEAD_MAX);
        return 1;
    }
    size_t hl = (size_t)(nl - p);
    char head[FM_HEAD_MAX];
    for (size_t i = 0; i < hl; i++) /* for messages: printable only */
        head[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
    head[hl] = '\0';
    if (strcmp(head, "FETCHING") == 0 || strcmp(head, "NONE") == 0) {
        ask_finish(a, 0, head[0] == 'F' ? FMETA_FETCHING : FMETA_NONE, NULL, 0, NULL);
        return 1;
    }
    if (strncmp(head, "ERR ", 4) == 0) {
        ask_fail(a, -EPROTO, "%s answered ERR %s", a->link.peer, head + 4);
        return 1;
    }
    uint64_t len;
    if (strncmp(head, "HAVE ", 5) != 0 || parse_u64(head + 5, &len) != 0) {
        ask_fail(a, -EPROTO, "%s: not an answer: \"%s\"", a->link.peer, head);
        return 1;
    }
    if (len == 0 || len > FMETA_MAX_TORRENT) {
        ask_fail(a, -EPROTO, "%s: a torrent of %llu bytes (1 to %u allowed)", a->link.peer,
                 (unsigned long long)len, FMETA_MAX_TORRENT);
        return 1;
    }
    if (n - hl - 1 < len) {
        /* Room for all of it at once, rather than doubling past it. */
        if (bytebuf_reserve(&a->answer, len - (n - hl - 1)) != 0) {
            ask_fail(a, -ENOMEM, "%s: out of memory for a %llu-byte torrent", a->link.peer,
                     (unsigned long long)len);
            return 1;
        }
        return 0;
    }
    ask_finish(a, 0, FMETA_HAVE, (const unsigned char *)nl + 1, (size_t)len, NULL);
    return 1;
}

static void ask_read_answer(fmeta_ask_t *a)
{
    for (;;) {
        char buf[16384];
        int n = mbedtls_ssl_read(&a->link.ssl, (unsigned char *)buf, sizeof buf);
        if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
            return;
        if (n == 0)
            continue; /* an empty record */
        if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
            ask_fail(a, -EPROTO, "%s closed before its answer was complete", a->link.peer);
            return;
        }
        if (n < 0) {
            char words[160];
            fm_mbed_words(n, words, sizeof words);
            ask_fail(a, -EPROTO, "%s: TLS: %s", a->link.peer, words);
            return;
        }
        int rc = bytebuf_append(&a->answer, buf, (size_t)n);
        if (rc) {
            ask_fail(a, rc == -ENOBUFS ? -EPROTO : rc, "%s: an answer longer than announced",
                     a->link.peer);
            return;
        }
        if (ask_parse(a))
            return;
    }
}

static void ask_advance(fmeta_ask_t *a)
{
    if (a->state == ASK_HANDSHAKE) {
        int rc = mbedtls_ssl_handshake(&a->link.ssl);
        if (rc != 0 && rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE) {
            char why[400];
            fm_handshake_why(&a->link, rc, why, sizeof why);
            fm_session_forget(a->id, &a->link);
            ask_finish(a, rc == MBEDTLS_ERR_SSL_ALLOC_FAILED ? -ENOMEM : -EACCES, 0, NULL, 0, why);
            return;
        }
        if (rc == 0) {
            fm_session_keep(a->id, &a->link);
            ask_to(a, ASK_ANSWER);
            rc = fm_link_encrypt(&a->link, a->line, a->line_len);
        }
        int frc = rc < 0 && rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE
                      ? -ENOMEM
                      : fm_link_flush(&a->link);
        if (frc) {
            ask_fail(a, frc, "%s: write: %s", a->link.peer, uv_strerror(frc));
            return;
        }
    }
    if (a->state == ASK_ANSWER)
        ask_read_answer(a);
}

static void ask_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    fmeta_ask_t *a = container_of((fm_link_t *)st->data, fmeta_ask_t, link);
    (void)buf;
    if (n == 0 || a->state == ASK_CLOSING)
        return;
    if (n == UV_EOF || n == UV_ECONNRESET) {
        ask_fail(
            a, -ECONNRESET, "%s closed the connection %s", a->link.peer,
            a->state == ASK_HANDSHAKE
                ? "in the TLS handshake (it has its most connections open, or is no fleet node)"
                : "before its answer was complete");
        return;
    }
    if (n < 0) {
        ask_fail(a, (int)n, "%s: read: %s", a->link.peer, uv_strerror((int)n));
        return;
    }
    bytebuf_commit(&a->link.in, (size_t)n);
    ask_advance(a);
}

static void ask_on_connect(uv_connect_t *req, int status)
{
    fmeta_ask_t *a = container_of(req, fmeta_ask_t, connect);
    if (status == UV_ECANCELED || a->state != ASK_CONNECT)
        return;
    if (status < 0) {
        ask_fail(a, status, "%s: connect: %s", a->link.peer, uv_strerror(status));
        return;
    }
    ask_to(a, ASK_HANDSHAKE);
    uv_tcp_nodelay(&a->link.tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&a->link.tcp, fm_link_alloc, ask_on_read);
    if (rc) {
        ask_fail(a, rc, "%s: read: %s", a->link.peer, uv_strerror(rc));
        return;
    }
    ask_advance(a); /* the ClientHello */
}

static void ask_on_timer(uv_timer_t *t)
{
    fmeta_ask_t *a = container_of((fm_link_t *)t->data, fmeta_ask_t, link);
    if (a->early)
        ask_fail(a, a->early, "%s: connect: %s", a->link.peer, uv_strerror(a->early));
    else
        ask_fail(a, -ETIMEDOUT, "%s: no answer within %u ms (%s)", a->link.peer, a->timeout_ms,
                 ask_state_words[a->state]);
}

fmeta_ask_t *fm_ask_line(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                         const char *line, size_t line_len, unsigned timeout_ms, fmeta_reply_fn cb,
                         void *arg)
{
    struct sockaddr_storage ss;
    if (port < 1 || fm_addr_parse(ip, port, &ss) != 0)
        return NULL;
    fmeta_ask_t *a = calloc(1, sizeof *a);
    if (!a || !(a->line = malloc(line_len))) {
        free(a);
        return NULL;
    }
    memcpy(a->line, line, line_len);
    a->line_len = line_len;
    a->timeout_ms = timeout_ms;
    a->state = ASK_CONNECT;
    bytebuf_init(&a->answer, FM_HEAD_MAX + FMETA_MAX_TORRENT);
    if (fm_link_init(&a->link, loop, &ask_ops) != 0) {
        a->state = ASK_CLOSING; /* fm_link_init closes what it made; ask_closed frees */
        return NULL;
    }
    hostport_format((struct sockaddr *)&ss, a->link.peer, sizeof a->link.peer);
    if (fm_link_tls(&a->link, &id->client) != 0) {
        ask_to(a, ASK_CLOSING);
        fm_link_close(&a->link);
        return NULL;
    }
    a->id = id;
    fm_session_offer(id, &a->link);
    a->cb = cb;
    a->arg = arg;
    int rc = uv_tcp_connect(&a->connect, &a->link.tcp, (struct sockaddr *)&ss, ask_on_connect);
    if (rc)
        a->early = rc;    /* told by the timer: never from inside this call */
    uv_update_time(loop); /* the bound counts from now, not from the loop turn's start */
    uv_timer_start(&a->link.timer, ask_on_timer, rc ? 0 : timeout_ms, 0);
    return a;
}

fmeta_ask_t *fmeta_ask(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                       const char *sha256, const char *url, unsigned timeout_ms, fmeta_reply_fn cb,
                       void *arg)
{
    if (!sha256 || !hex_is(sha256, 64, 1))
        return NULL;
    if (url) {
        size_t n = strlen(url);
        if (n == 0 || n > FMETA_MAX_URL)
            return NULL;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f)
                return NULL;
    }
    char line[FMETA_MAX_LINE + 2];
    int n = snprintf(line, sizeof line, "TORRENT %s%s%s\n", sha256, url ? " " : "", url ? url : "");
    return fm_ask_line(loop, id, ip, port, line, (size_t)n, timeout_ms, cb, arg);
}

fmeta_ask_t *fmeta_ask_verdict(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                               const char *key, const char *value, unsigned timeout_ms,
                               fmeta_reply_fn cb, void *arg)
{
    if (!key || !hex_is(key, 64, 1) || (value && !hex_is(value, strlen(value), 1)) ||
        (value && (!*value || strlen(value) > FMETA_MAX_URL)))
        return NULL;
    char line[FMETA_MAX_LINE + 2];
    int n =
        snprintf(line, sizeof line, "VERDICT %s%s%s\n", key, value ? " " : "", value ? value : "");
    return fm_ask_line(loop, id, ip, port, line, (size_t)n, timeout_ms, cb, arg);
}

void fmeta_ask_cancel(fmeta_ask_t *a)
{
    a->cb = NULL;
    if (a->state == ASK_CLOSING)
        return;
    ask_to(a, ASK_CLOSING);
    fm_link_close(&a->link);
}
