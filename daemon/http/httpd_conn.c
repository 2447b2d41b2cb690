/* httpd_conn: each HTTP front connection's I/O (see httpd_internal.h): the
 * socket watched by a uv_poll_t, not a uv_tcp_t: its file bodies go out
 * with sendfile(2) in pool items (a cold blob's pages are read from disk
 * there, never on the loop), which needs the socket's writability, and
 * libuv allows one handle per descriptor. Its life: HC_PEER (httpd.c's peer
 * lookup item) -> HC_HEAD (reading a request) -> HC_FETCH (its route waits
 * for the file, or its turn: its timer is the route's then, hconn_wait) ->
 * HC_SEND (head, then body) -> back to HC_HEAD when kept alive, or
 * HC_LINGER; hconn_close is the one way out. The request ends (its route's
 * abandon) when its answer is sent, or when the connection closes.
 *
 * The bottom of the front: it calls nothing of the files above by name. A
 * request read goes up through the router's hooks (httpd_t.hooks), the end
 * of a request to its route's row (hroute_t.abandon). */
#include "httpd_internal.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define SENDFILE_ITEM_MAX (16u << 20) /* bytes per sendfile item: others get the pool too */

static void hconn_pump(hconn_t *c);
static void on_poll(uv_poll_t *p, int status, int events);
static void on_closer_closed(uv_handle_t *hd);

/* ---- the request's end ------------------------------------------------- */

/* Its route's state goes (whatever it still had in flight stops). */
static void route_abandon(hconn_t *c)
{
    if (c->rstate)
        c->route->abandon(c);
}

/* Forgets the request read (for the next on a kept connection). */
static void req_reset(hconn_t *c)
{
    route_abandon(c);
    c->route = NULL;
    hreq_t *r = c->req;
    if (!r)
        return;
    for (unsigned i = 0; i < r->ncred; i++)
        free(r->cred[i]);
    free(r->extra);
    bytebuf_free(&r->body);
    free(r);
    c->req = NULL;
}

/* Bytes came: the buffer they are read into, and the hreq_t the parser
 * fills, are allocated now and go when the answer is sent, so an idle kept
 * connection holds neither. 0, or -ENOMEM with c closed. */
static int rx_begin(hconn_t *c)
{
    if ((c->in || (c->in = malloc(HTTPD_IN_MAX))) &&
        (c->req || (c->req = calloc(1, sizeof *c->req))))
        return 0;
    log_warn("http front uid %u: no memory for a request: closed", (unsigned)c->who.uid);
    hconn_close(c);
    return -ENOMEM;
}

/* Whether c is between requests: nothing of a next one read. */
static int rx_idle(const hconn_t *c)
{
    return c->in_len == 0 && !(c->req && c->req->reading_body);
}

/* ---- watching the socket and the clock --------------------------------- */

static void watch(hconn_t *c, int events)
{
    if (c->poll_events == events)
        return;
    c->poll_events = events;
    if (events)
        uv_poll_start(&c->poll, events, on_poll);
    else
        uv_poll_stop(&c->poll);
}

/* http_header_timeout: read when a head begins (a SIGHUP applies to the
 * next one). */
static unsigned header_timeout(const hconn_t *c)
{
    return c->srv->d.cfg->http_header_timeout_ms;
}

static void on_timeout(uv_timer_t *t)
{
    hconn_t *c = t->data;
    if (c->state == HC_LINGER) {
        hconn_close(c);
        return;
    }
    if (c->state == HC_FETCH) { /* only its route arms it then (hconn_wait) */
        if (c->rstate && c->route->timer)
            c->route->timer(c);
        return;
    }
    if (c->state == HC_HEAD && rx_idle(c)) {
        hconn_close(c); /* an idle kept connection: nothing to say */
        return;
    }
    if (c->state == HC_HEAD) {
        log_info("http front uid %u: no complete request head within %u ms: closed",
                 (unsigned)c->who.uid, header_timeout(c));
        c->srv->hooks->unreadable(c, 408, NULL,
                                  c->req->reading_body ? "the request body did not arrive in time"
                                                       : "the request head did not arrive in time");
        return;
    }
    log_info("http front uid %u: the client took no byte for %d s: closed", (unsigned)c->who.uid,
             HTTPD_SEND_TIMEOUT_MS / 1000);
    hconn_close(c);
}

static void arm(hconn_t *c, unsigned ms)
{
    uv_timer_start(&c->timer, on_timeout, ms, 0);
}

void hconn_wait(hconn_t *c, unsigned ms)
{
    if (c->state == HC_FETCH)
        arm(c, ms);
}

/* ---- the close path --------------------------------------------------- */

static void hconn_maybe_free(hconn_t *c)
{
    if (c->state != HC_CLOSING || c->closes_pending || c->item_out)
        return;
    httpd_t *h = c->srv;
    close(c->fd); /* after the poll handle is closed: libuv no longer watches it */
    job_fd_unref(c->body);
    req_reset(c);
    free(c->in);
    free(c->out);
    list_remove(&c->node);
    free(c);
    memtrim_note(&h->trim, -1);
    if (--h->nconns == 0 && h->closing)
        uv_close((uv_handle_t *)&h->closer, on_closer_closed);
}

int hconn_item_back(hconn_t *c)
{
    c->item_out = 0;
    if (c->state != HC_CLOSING)
        return 0;
    hconn_maybe_free(c);
    return 1;
}

static void on_part_closed(uv_handle_t *hd)
{
    hconn_t *c = hd->data;
    c->closes_pending--;
    hconn_maybe_free(c);
}

void hconn_close(hconn_t *c)
{
    if (c->state == HC_CLOSING)
        return;
    c->state = HC_CLOSING;
    route_abandon(c);
    c->counted = 0; /* the body (its fd) goes in hconn_maybe_free: an item may use it */
    c->closes_pending += 2;
    uv_close((uv_handle_t *)&c->poll, on_part_closed);
    uv_close((uv_handle_t *)&c->timer, on_part_closed);
}

/* ---- sending ------------------------------------------------------------ */

static void send_done(hconn_t *c)
{
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    if (!c->keep_alive) {
        /* The answer is whole. Closing with unread bytes of the client's
         * in the socket would send a reset, which may destroy the answer
         * before the client reads it: shut for writing, then read (and
         * drop) what still comes, for a while, as nginx's lingering close. */
        shutdown(c->fd, SHUT_WR);
        c->state = HC_LINGER;
        arm(c, HTTPD_LINGER_MS);
        watch(c, UV_READABLE | UV_DISCONNECT);
        /* The request is over: what it holds goes now, not at the close.
         * Last, with the handles set: an abandon may close c. */
        route_abandon(c);
        return;
    }
    c->state = HC_HEAD;
    req_reset(c);
    llhttp_init(&c->parser, HTTP_REQUEST, c->parser.settings);
    c->parser.data = c;
    /* Bytes of a next request may already be in. */
    memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
    c->in_len -= c->in_off;
    c->in_off = 0;
    if (c->in_len == 0) { /* idle: it holds no buffer until the next request */
        free(c->in);
        c->in = NULL;
    }
    /* Idle until a next request begins; its head then has its deadline. */
    arm(c, c->in_len ? header_timeout(c) : HTTPD_IDLE_TIMEOUT_MS);
    hconn_pump(c);
}

/* What may go now: the rest of the body, up to body_limit. */
static uint64_t body_ready(const hconn_t *c)
{
    uint64_t ready = c->body_limit > c->body_off ? c->body_limit - c->body_off : 0;
    return ready < c->body_left ? ready : c->body_left;
}

static void sendfile_work(uv_work_t *w)
{
    hconn_t *c = w->data;
    uint64_t want = c->item_want;
    off_t off = (off_t)c->item_off;
    ssize_t total = 0;
    c->item_err = 0;
    while ((uint64_t)total < want) {
        ssize_t n = sendfile(c->fd, c->item_fd, &off, (size_t)(want - (uint64_t)total));
        if (n > 0) {
            total += n;
            continue;
        }
        if (n == 0) {
            c->item_err = EIO; /* the blob is shorter than its row says */
            break;
        }
        if (errno == EINTR)
            continue;
        c->item_err = errno;
        break;
    }
    c->item_sent = total;
}

static void send_body(hconn_t *c);

static void after_sendfile(uv_work_t *w, int status)
{
    hconn_t *c = w->data;
    c->item_out = 0;
    if (c->state == HC_CLOSING) {
        hconn_maybe_free(c);
        return;
    }
    if (status) { /* cancelled: only at shutdown */
        hconn_close(c);
        return;
    }
    c->body_off += (uint64_t)c->item_sent;
    c->body_left -= (uint64_t)c->item_sent;
    c->srv->stats.bytes += (uint64_t)c->item_sent;
    if (c->item_sent > 0)
        arm(c, HTTPD_SEND_TIMEOUT_MS);
    if (c->item_err && c->item_err != EAGAIN) {
        log_info("http front uid %u: sending the body: %s", (unsigned)c->who.uid,
                 strerror(c->item_err));
        hconn_close(c);
        return;
    }
    if (c->body_left == 0) {
        job_fd_unref(c->body);
        c->body = NULL;
        send_done(c);
        return;
    }
    if (c->item_err == EAGAIN) {
        watch(c, UV_WRITABLE); /* the socket is full: wait for room, */
        if (!uv_is_active((uv_handle_t *)&c->timer))
            arm(c, HTTPD_SEND_TIMEOUT_MS); /* not for ever */
        return;
    }
    send_body(c);
}

static void send_body(hconn_t *c)
{
    if (body_ready(c) == 0) { /* a partial file's bytes not written yet, or held back */
        c->body_wait = 1;
        watch(c, UV_DISCONNECT);
        uv_timer_stop(&c->timer); /* the wait is the download's, not the client's */
        return;
    }
    watch(c, 0); /* the item writes: the loop does not watch meanwhile */
    uint64_t ready = body_ready(c);
    c->item_fd = c->body->fd;
    c->item_off = c->body_off;
    c->item_want = ready < SENDFILE_ITEM_MAX ? ready : SENDFILE_ITEM_MAX;
    c->item_out = 1;
    c->work.data = c;
    if (uv_queue_work(c->srv->d.loop, &c->work, sendfile_work, after_sendfile)) {
        c->item_out = 0;
        hconn_close(c);
    }
}

/* The head (c->out) as far as the socket takes it, HTTPD_SEND_TURN
 * bytes a turn of the loop (an answer held in memory may be 16 MiB, and a
 * client on loopback takes it as fast as it comes: sent in one go, it held
 * the loop for tens of ms), then the body. */
static void send_some(hconn_t *c)
{
    size_t turn = 0;
    while (c->out_off < c->out_len) {
        if (turn >= HTTPD_SEND_TURN) {
            watch(c, UV_WRITABLE); /* the rest at the next turn: the socket is writable */
            return;
        }
        size_t want = c->out_len - c->out_off;
        if (want > HTTPD_SEND_TURN - turn)
            want = HTTPD_SEND_TURN - turn;
        ssize_t n = send(c->fd, c->out + c->out_off, want, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            turn += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch(c, UV_WRITABLE); /* a half-closed client still reads */
            return;
        }
        hconn_close(c); /* the client went away */
        return;
    }
    arm(c, HTTPD_SEND_TIMEOUT_MS);
    if (c->body && c->body_left > 0)
        send_body(c);
    else
        send_done(c);
}

void hconn_more_body(hconn_t *c)
{
    if (c->state != HC_SEND || !c->body_wait || c->item_out)
        return;
    c->body_wait = 0;
    arm(c, HTTPD_SEND_TIMEOUT_MS); /* the client's turn again */
    send_body(c);
}

void hconn_send(hconn_t *c)
{
    c->state = HC_SEND;
    c->srv->stats.requests++;
    arm(c, HTTPD_SEND_TIMEOUT_MS);
    send_some(c);
}

/* ---- reading ------------------------------------------------------------ */

/* Parses what is in; reads more when a head is incomplete. */
static void hconn_pump(hconn_t *c)
{
    if (c->state != HC_HEAD)
        return;
    if (c->in_off < c->in_len) {
        if (rx_begin(c)) /* a next request's bytes, kept from the last read */
            return;
        const char *p = c->in + c->in_off;
        llhttp_errno_t err = llhttp_execute(&c->parser, p, c->in_len - c->in_off);
        const char *end = err == HPE_OK ? c->in + c->in_len : llhttp_get_error_pos(&c->parser);
        c->in_off = (size_t)(end - c->in);
        if (err == HPE_PAUSED && c->req->complete) {
            uv_timer_stop(&c->timer);
            c->srv->hooks->request(c);
            if (c->state == HC_FETCH) /* meanwhile, only whether the client goes away */
                watch(c, UV_DISCONNECT);
            return;
        }
        if (err != HPE_OK) {
            c->srv->hooks->unreadable(c, 400, "bad_request", llhttp_get_error_reason(&c->parser));
            return;
        }
        if (c->req->reading_body) {
            /* All of it is parsed: the head is in hreq_t, the body so far
             * in its buffer. The next read starts at the front of `in`, so
             * a body larger than `in` streams through it. */
            c->in_len = c->in_off = 0;
        }
    }
    if (c->in_len == HTTPD_IN_MAX) {
        c->srv->hooks->unreadable(c, 431, "bad_request", "the request head is larger than 16 KiB");
        return;
    }
    watch(c, UV_READABLE | UV_DISCONNECT);
}

void hconn_read_start(hconn_t *c, unsigned ms)
{
    c->state = HC_HEAD;
    arm(c, ms);
    hconn_pump(c);
}

static void read_some(hconn_t *c)
{
    /* Idle: a first read onto the stack, so that a wake-up with nothing
     * to read (or a close) allocates nothing. */
    char first[4096];
    char *at = c->in ? c->in + c->in_len : first;
    ssize_t n = recv(c->fd, at, c->in ? HTTPD_IN_MAX - c->in_len : sizeof first, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) { /* the client closed, or the connection broke */
        hconn_close(c);
        return;
    }
    if (at == first) {
        if (rx_begin(c))
            return;
        memcpy(c->in, first, (size_t)n); /* in_len is 0: nothing was kept */
    }
    if (rx_idle(c)) /* a request begins: its head (and any body) has a deadline */
        arm(c, header_timeout(c));
    c->in_len += (size_t)n;
    hconn_pump(c);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    hconn_t *c = p->data;
    if (c->state == HC_CLOSING)
        return;
    if (status < 0) {
        hconn_close(c);
        return;
    }
    if (c->state == HC_FETCH || (c->state == HC_SEND && c->body_wait)) {
        /* The client shut its sending side (FIN): it may be done sending
         * and still reading (nc -N, scripts), so the answer goes on and
         * the connection closes after it. A client that is really gone
         * fails the next send; a reset comes as an error (status < 0). */
        if (events & UV_DISCONNECT) {
            c->keep_alive = 0;
            watch(c, 0);
        }
        return;
    }
    if (c->state == HC_LINGER) {
        char sink[4096];
        ssize_t n = recv(c->fd, sink, sizeof sink, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            hconn_close(c);
        return;
    }
    if (c->state == HC_SEND) {
        if (events & UV_WRITABLE)
            send_some(c);
        else if (events & UV_DISCONNECT)
            hconn_close(c);
        return;
    }
    if (events & UV_READABLE)
        read_some(c);
    else if (events & UV_DISCONNECT)
        hconn_close(c);
}

/* ---- the server's close ------------------------------------------------ */

static void on_closer_closed(uv_handle_t *hd)
{
    httpd_t *h = hd->data;
    void (*cb)(void *) = h->close_cb;
    void *arg = h->close_arg;
    memtrim_close(&h->trim);
    for (size_t i = 0; i < HTTPD_ROUTES_MAX; i++)
        free(h->route_mem[i]);
    hf_revs_free(h->revs);
    free(h);
    if (cb)
        cb(arg);
}

void httpd_close(httpd_t *h, void (*done)(void *arg), void *arg)
{
    h->closing = 1;
    h->close_cb = done;
    h->close_arg = arg;
    list_node_t *n, *tmp;
    list_foreach_safe(&h->conns, n, tmp) hconn_close(list_entry(n, hconn_t, node));
    if (h->nconns == 0)
        uv_close((uv_handle_t *)&h->closer, on_closer_closed);
}
