/* stream_tls: TLS over a stream, decrypting in the thread pool or, where it
 * can, letting the kernel do it. */
#include "stream_tls.h"
#include "ktls.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TLS_SPILL_MAX (1u << 20)   /* ciphertext queued for decryption: stop reading */
#define TLS_SPILL_ROOM (64 * 1024) /* room offered to each read */
#define TLS_WORK_MAX_OUT 258       /* plaintext buffers per item: TLS_SPILL_MAX / 4 KiB + 2 */

typedef struct stream_tls stream_tls_t;

enum { TLS_WORK_WANT, TLS_WORK_FULL, TLS_WORK_CLOSED, TLS_WORK_ERROR };

/* One decrypt work item: the ciphertext handed over and the empty pooled
 * buffers it fills with plaintext. */
typedef struct stls_decrypt {
    uv_work_t req;
    stream_tls_t *st;
    char *in; /* ciphertext, owned by the item */
    size_t in_len;
    buf_t *out[TLS_WORK_MAX_OUT]; /* one reference each, from the loop */
    size_t nout;
    int status; /* TLS_WORK_* */
    char msg[300];
} stls_work_t;

struct stream_tls {
    stream_t base;
    stream_t *inner; /* owned; closed by stls_close */
    uv_loop_t *loop;
    bufpool_t *pool;
    tls_conn_t *tls;      /* the loop's, except while the decrypt item is out */
    char origin[288];     /* "https://host:port", for messages */
    int handshaking;      /* reads feed the handshake; no close_notify yet */
    uint64_t t_handshake; /* uv_now() when the handshake started */
    stream_tls_handshake_cb hs_cb;
    int reading;     /* the user wants plaintext (not paused) */
    int peer_closed; /* the peer sent close_notify: a clean end */
    /* After the handshake ciphertext collects in spill on the loop; the
     * decrypt item takes all of it at once. */
    char *spill; /* ciphertext read, not yet handed to an item */
    size_t spill_len, spill_cap;
    int spill_full;        /* inner reading stopped: spill is at TLS_SPILL_MAX */
    int decrypt_in_flight; /* the decrypt item is out in the pool (0 or 1) */
    int decrypt_more;      /* the last item stopped for want of room, not input */
    ssize_t eof_pending;   /* inner end read while ciphertext was still queued */
    int plain_pending;     /* more plaintext follows the slice being delivered */
    int delivering;        /* stls_after_decrypt is handing out the item's buffers */
    stls_work_t work;      /* the decrypt item (valid while decrypt_in_flight) */
    stream_fault_t fault;  /* the failure behind STREAM_EFAULT */
    char fault_msg[600];
    int ktls_rx;    /* the kernel decrypts (ktls.h): the inner stream reads plaintext */
    int ktls_tx;    /* the kernel encrypts: writes go to the inner stream as they are */
    int closing;    /* stls_close called: no callback to the user any more */
    int inner_open; /* the inner stream's close callback is still to come */
    stream_close_cb close_cb;
    void *close_arg;
};

static void stls_kick(stream_tls_t *st);

/* ---- delivering to the user ----------------------------------------------- */

static void stls_deliver_fault(stream_tls_t *st, const char *code, const char *msg, int local)
{
    snprintf(st->fault_msg, sizeof st->fault_msg, "%s", msg);
    st->fault = (stream_fault_t){.code = code, .msg = st->fault_msg, .local = local};
    st->base.cbs->on_read(&st->base, STREAM_EFAULT, NULL, NULL);
}

/* An end of the inner stream, reported once what came before it is
 * delivered. Without close_notify anyone on the path may have cut it. */
static void stls_deliver_end(stream_tls_t *st, ssize_t err)
{
    if (err != UV_EOF) {
        st->base.cbs->on_read(&st->base, err, NULL, NULL);
        return;
    }
    st->fault =
        (stream_fault_t){.code = "truncated", .msg = "the TLS stream ended without close_notify"};
    st->base.cbs->on_read(&st->base, STREAM_EOF_UNVERIFIED, NULL, NULL);
}

/* ---- the handshake -------------------------------------------------------- */

static int stls_flush(stream_tls_t *st)
{
    size_t n;
    char *out = tls_conn_take_output(st->tls, &n);
    return out ? stream_write(st->inner, out, n) : 0;
}

static void stls_handshake_fail_uv(stream_tls_t *st, const char *what, int uverr)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s: %s", what, st->origin, uv_strerror(uverr));
    st->hs_cb(&st->base, "connect", msg);
}

static int stls_try_ktls(stream_tls_t *st);

/* One step of the handshake, at its start and after each read. */
static void stls_handshake_step(stream_tls_t *st)
{
    const char *code = "tls";
    char msg[512];
    int rc = tls_conn_handshake(st->tls, &code, msg, sizeof msg);
    int wrc = stls_flush(st);
    if (rc < 0) {
        st->hs_cb(&st->base, code, msg);
        return;
    }
    if (wrc) {
        stls_handshake_fail_uv(st, "sending the TLS handshake to", wrc);
        return;
    }
    if (rc == TLS_WANT_INPUT)
        return;
    log_debug("TLS to %s: %s handshake in %llu ms, %s", st->origin,
              tls_conn_resumed(st->tls) ? "resumed" : "full",
              (unsigned long long)(uv_now(st->loop) - st->t_handshake), tls_conn_cipher(st->tls));
    st->handshaking = 0;
    st->reading = 1; /* the inner stream reads on, as it did for the handshake */
    if ((wrc = stls_try_ktls(st))) {
        stls_handshake_fail_uv(st, "reading from", wrc);
        return;
    }
    st->hs_cb(&st->base, NULL, NULL);
}

void stream_tls_handshake(stream_t *s, stream_tls_handshake_cb cb)
{
    stream_tls_t *st = (stream_tls_t *)s;
    st->hs_cb = cb;
    st->t_handshake = uv_now(st->loop);
    int rc = stream_read_start(st->inner);
    if (rc) {
        stls_handshake_fail_uv(st, "reading from", rc);
        return;
    }
    stls_handshake_step(st);
}

/* ---- reading ciphertext from the inner stream ------------------------------ */

/* Room for ciphertext in the spill buffer (loop-owned; see stls_kick). */
static int spill_space(stream_tls_t *st, char **p, size_t *room)
{
    if (st->spill_cap - st->spill_len < TLS_SPILL_ROOM) {
        size_t cap = st->spill_cap ? st->spill_cap * 2 : 4 * TLS_SPILL_ROOM;
        char *n = realloc(st->spill, cap);
        if (!n)
            return -ENOMEM;
        st->spill = n;
        st->spill_cap = cap;
    }
    *p = st->spill + st->spill_len;
    *room = st->spill_cap - st->spill_len;
    return 0;
}

/* The handshake reads into the TLS input buffer, the stream after it into
 * the spill buffer. */
static void inner_alloc(stream_t *inner, char **p, size_t *room)
{
    stream_tls_t *st = inner->data;
    int rc = st->handshaking ? tls_conn_input_space(st->tls, p, room) : spill_space(st, p, room);
    if (rc)
        *p = NULL;
}

static void inner_on_read(stream_t *inner, ssize_t n, buf_t *buf, const char *p)
{
    (void)buf;
    (void)p;
    stream_tls_t *st = inner->data;
    if (st->handshaking) {
        if (n < 0) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s closed the connection during the TLS handshake (%s)",
                     st->origin, n == UV_EOF ? "end of stream" : uv_strerror((int)n));
            st->hs_cb(&st->base, "tls", msg);
            return;
        }
        tls_conn_input_commit(st->tls, (size_t)n);
        stls_handshake_step(st);
        return;
    }
    if (n < 0) {
        if (st->decrypt_in_flight || st->spill_len || st->decrypt_more) {
            /* Decide once the ciphertext already read is decrypted: it may
             * hold the end of the response and the close_notify. */
            st->eof_pending = n;
            stream_read_stop(st->inner);
            stls_kick(st);
            return;
        }
        stls_deliver_end(st, n);
        return;
    }
    st->spill_len += (size_t)n;
    if (st->base.cbs->on_activity) {
        st->base.cbs->on_activity(&st->base);
        if (st->closing)
            return; /* on_activity closed the stream */
    }
    if (st->spill_len >= TLS_SPILL_MAX) { /* decryption is behind: stop reading */
        st->spill_full = 1;
        stream_read_stop(st->inner);
    }
    stls_kick(st);
}

static void inner_on_write_error(stream_t *inner, int err)
{
    stream_tls_t *st = inner->data;
    st->base.cbs->on_write_error(&st->base, err);
}

static const stream_cbs_t inner_cbs = {
    .alloc = inner_alloc,
    .on_read = inner_on_read,
    .on_write_error = inner_on_write_error,
};

/* ---- decryption in the thread pool --------------------------------------- */

/* Pool thread. Owns st->tls and the buffers it was handed; touches nothing
 * else of the stream. */
static void stls_decrypt(uv_work_t *req)
{
    stls_work_t *w = req->data;
    stream_tls_t *st = w->st;
    w->status = TLS_WORK_FULL;
    if (w->in_len && tls_conn_input_append(st->tls, w->in, w->in_len)) {
        w->status = TLS_WORK_ERROR;
        snprintf(w->msg, sizeof w->msg, "out of memory");
        return;
    }
    for (size_t i = 0; i < w->nout; i++) {
        buf_t *b = w->out[i];
        while (b->len < b->cap) {
            ssize_t n =
                tls_conn_read(st->tls, b->data + b->len, b->cap - b->len, w->msg, sizeof w->msg);
            if (n > 0) {
                b->len += (size_t)n;
                continue;
            }
            w->status = n == -TLS_WANT_INPUT ? TLS_WORK_WANT
                        : n == 0             ? TLS_WORK_CLOSED
                                             : TLS_WORK_ERROR;
            return;
        }
    }
}

static void stls_maybe_free(stream_tls_t *st);
static void stls_after_decrypt(uv_work_t *req, int status);

/* Hands queued ciphertext to a decrypt item, when none is out and the user
 * reads; with nothing queued, reports an end that waited for the queue to
 * empty. At most one item per stream, so the TLS state needs no lock: the
 * loop touches it again only once the item is back. */
static void stls_kick(stream_tls_t *st)
{
    /* While the item's buffers are being handed out (the user may start
     * reading again from a callback) the item is not free to reuse; the
     * delivery loop kicks when it is done. */
    if (st->decrypt_in_flight || st->delivering || !st->reading || st->closing)
        return;
    /* All the ciphertext not yet decrypted: what the TLS state holds plus the
     * spill. Reading stopped at TLS_SPILL_MAX resumes only once this is below
     * it again, so the backlog cannot move from the spill into the TLS state
     * without bound. */
    size_t backlog = st->spill_len + tls_conn_input_pending(st->tls);
    if (st->spill_full && backlog < TLS_SPILL_MAX) {
        st->spill_full = 0;
        stream_read_start(st->inner);
    }
    if (st->spill_len == 0 && !st->decrypt_more) {
        if (st->eof_pending) {
            ssize_t e = st->eof_pending;
            st->eof_pending = 0;
            stls_deliver_end(st, e);
        }
        return;
    }
    stls_work_t *w = &st->work;
    w->st = st;
    /* Plaintext is never longer than the ciphertext it comes from: a slow
     * stream's few bytes go to small buffers, not to full ones. */
    size_t size = backlog <= st->pool->small ? st->pool->small : st->pool->size;
    w->nout = backlog / size + 2;
    if (w->nout > TLS_WORK_MAX_OUT)
        w->nout = TLS_WORK_MAX_OUT;
    for (size_t i = 0; i < w->nout; i++) {
        if (!(w->out[i] = bufpool_get(st->pool, size))) {
            w->nout = i;
            break;
        }
    }
    if (w->nout == 0) {
        stls_deliver_fault(st, "internal", "out of memory", 1);
        return;
    }
    w->in = st->spill; /* the item's now; a new spill starts empty */
    w->in_len = st->spill_len;
    st->spill = NULL;
    st->spill_len = st->spill_cap = 0;
    st->decrypt_more = 0;
    st->decrypt_in_flight = 1;
    w->req.data = w;
    uv_queue_work(st->loop, &w->req, stls_decrypt, stls_after_decrypt);
}

/* Loop thread: deliver the plaintext, then decide what the item's end
 * means. The user may close the stream from any delivery: the rest is
 * dropped then. */
static void stls_after_decrypt(uv_work_t *req, int status)
{
    (void)status;
    stls_work_t *w = req->data;
    stream_tls_t *st = w->st;
    free(w->in);
    w->in = NULL;
    st->decrypt_in_flight = 0;
    /* Known before delivering, so a response that ends here is not reused
     * while records are still waiting to be decrypted (stls_reusable). */
    st->decrypt_more = w->status == TLS_WORK_FULL;
    st->delivering = 1;
    for (size_t i = 0; i < w->nout; i++) {
        buf_t *b = w->out[i];
        if (!st->closing && b->len > 0) {
            st->plain_pending = i + 1 < w->nout && w->out[i + 1]->len > 0;
            st->base.cbs->on_read(&st->base, (ssize_t)b->len, b, b->data);
            st->plain_pending = 0;
        }
        buf_unref(st->pool, b);
    }
    st->delivering = 0;
    if (st->closing) {
        stls_maybe_free(st);
        return;
    }
    switch (w->status) {
    case TLS_WORK_ERROR:
        stls_deliver_fault(st, "tls", w->msg, 0);
        return;
    case TLS_WORK_CLOSED: /* close_notify: the peer's clean end of the stream */
        st->peer_closed = 1;
        st->base.cbs->on_read(&st->base, UV_EOF, NULL, NULL);
        return;
    default: /* FULL (decrypt_more is set) or WANT */
        break;
    }
    stls_kick(st);
}

/* ---- kernel TLS: the socket reads and writes plaintext ---------------- */

/* A read failed with EIO: a record that is not application data is at the
 * head of the socket. Only close_notify ends the stream cleanly; any other
 * alert, or a handshake message (a renegotiation, which a kernel TLS
 * socket cannot take part in), ends it as a TLS failure. */
static void ktls_other_record(stream_tls_t *st)
{
    unsigned char type = 0, body[64];
    char msg[512];
    int fd = stream_fileno(st->inner);
    ssize_t n = fd < 0 ? fd : ktls_recv_record(fd, &type, body, sizeof body);
    if (n == 0) { /* the end after all: no record, no close_notify */
        stls_deliver_end(st, UV_EOF);
        return;
    }
    if (n < 0) {
        snprintf(msg, sizeof msg, "kernel TLS: reading a TLS record from %s: %s", st->origin,
                 strerror((int)-n));
    } else if (type == KTLS_RECORD_ALERT && n >= 2 && body[1] == KTLS_ALERT_CLOSE_NOTIFY) {
        st->peer_closed = 1;
        st->base.cbs->on_read(&st->base, UV_EOF, NULL, NULL);
        return;
    } else if (type == KTLS_RECORD_ALERT && n >= 2) {
        snprintf(msg, sizeof msg, "%s sent the TLS alert %s (%u)", st->origin,
                 ktls_alert_name(body[1]), body[1]);
    } else {
        snprintf(msg, sizeof msg,
                 "%s sent a TLS record of type %u mid-stream, which a kernel TLS connection "
                 "cannot answer (a renegotiation?); ktls = off in hubd.conf leaves TLS to mbedTLS",
                 st->origin, type);
    }
    stls_deliver_fault(st, "tls", msg, 0);
}

/* Plaintext slices pass straight through, in the inner stream's pooled
 * buffers: the body path of plain HTTP. */
static void ktls_on_read(stream_t *inner, ssize_t n, buf_t *buf, const char *p)
{
    stream_tls_t *st = inner->data;
    char msg[512];
    if (n > 0) {
        st->base.cbs->on_read(&st->base, n, buf, p);
    } else if (n == UV_EIO) {
        ktls_other_record(st);
    } else if (n == -EBADMSG) { /* none of the record's bytes were given */
        snprintf(msg, sizeof msg,
                 "a TLS record from %s failed its integrity check (the kernel's EBADMSG): the "
                 "bytes were changed on the way",
                 st->origin);
        stls_deliver_fault(st, "tls", msg, 0);
    } else if (n == -EMSGSIZE) {
        snprintf(msg, sizeof msg, "%s sent a TLS record longer than TLS allows", st->origin);
        stls_deliver_fault(st, "tls", msg, 0);
    } else {
        stls_deliver_end(st, n); /* UV_EOF without close_notify: unverified */
    }
}

static void ktls_on_activity(stream_t *inner)
{
    stream_tls_t *st = inner->data;
    if (st->base.cbs->on_activity)
        st->base.cbs->on_activity(&st->base);
}

static const stream_cbs_t ktls_cbs = {
    .on_read = ktls_on_read,
    .on_activity = ktls_on_activity,
    .on_write_error = inner_on_write_error,
};

/* The handshake is done: where the kernel can take the records over, it
 * does, and from now on plaintext comes straight from the socket, with no
 * decrypt item. Whatever stands in the way (ktls = off, another cipher
 * suite, no tls module in the kernel, a stream that is no plain socket)
 * leaves mbedTLS in charge, said at debug level only. 0, or a libuv error
 * if reading could not start again. */
static int stls_try_ktls(stream_tls_t *st)
{
    ktls_keys_t k;
    const char *why = NULL, *step = NULL;
    int tx = 0, fd = stream_fileno(st->inner);
    int rc = tls_conn_ktls_keys(st->tls, &k, &why);
    if (rc == -ENOSYS) /* ktls = off */
        return 0;
    char refused[160] = "";
    if (!rc && fd < 0) {
        why = "the connection is no plain socket";
        rc = fd;
    } else if (!rc && stream_unsent(st->inner)) { /* the kernel would wrap them */
        why = "the handshake's last bytes are still queued to be sent";
        rc = -EAGAIN;
    } else if (!rc && (rc = ktls_start(fd, &k, &tx, &step)) != 0) {
        snprintf(refused, sizeof refused, "the kernel refused %s: %s%s", step, strerror(-rc),
                 rc == -ENOENT && strcmp(step, "TCP_ULP") == 0 ? " (no tls module loaded)" : "");
        why = refused;
    }
    ktls_keys_wipe(&k);
    if (rc) {
        log_debug("TLS to %s: mbedTLS decrypts, not the kernel: %s", st->origin, why);
        return 0;
    }
    st->ktls_rx = 1;
    st->ktls_tx = tx;
    log_debug("TLS to %s: kernel TLS: the kernel decrypts%s the records", st->origin,
              tx ? " and encrypts" : "");
    /* Reads land in pooled buffers from now on; a tunnel picks its
     * callbacks when reading starts. */
    stream_read_stop(st->inner);
    stream_set_cbs(st->inner, &ktls_cbs, st);
    return stream_read_start(st->inner);
}

/* ---- the stream operations -------------------------------------------- */

static int stls_read_start(stream_t *s)
{
    stream_tls_t *st = (stream_tls_t *)s;
    st->reading = 1;
    if (st->ktls_rx)
        return stream_read_start(st->inner);
    /* Not while the spill is full: stls_kick resumes the inner reads once
     * the backlog is below TLS_SPILL_MAX, else every pause and resume would
     * let one more read into a spill already at its bound. */
    int rc = st->spill_full ? 0 : stream_read_start(st->inner);
    stls_kick(st); /* records already read may hold more */
    return rc;
}

static void stls_read_stop(stream_t *s)
{
    stream_tls_t *st = (stream_tls_t *)s;
    st->reading = 0;
    stream_read_stop(st->inner);
}

/* Plaintext in, ciphertext to the inner stream. */
static int stls_write(stream_t *s, char *buf, size_t n)
{
    stream_tls_t *st = (stream_tls_t *)s;
    if (st->ktls_tx)
        return stream_write(st->inner, buf, n);
    char msg[300];
    int rc = tls_conn_write(st->tls, buf, n, msg, sizeof msg);
    free(buf);
    if (rc)
        return UV_EPROTO;
    return stls_flush(st);
}

static void stls_maybe_free(stream_tls_t *st)
{
    if (st->inner_open || st->decrypt_in_flight)
        return;
    stream_close_cb cb = st->close_cb;
    void *arg = st->close_arg;
    tls_conn_free(st->tls);
    free(st->spill);
    free(st);
    if (cb)
        cb(arg);
}

static void on_inner_closed(void *arg)
{
    stream_tls_t *st = arg;
    st->inner_open = 0;
    stls_maybe_free(st);
}

/* Sends a close_notify when the TLS state is the loop's to touch, then closes
 * the inner stream; the memory goes once it is closed and any decrypt item
 * is back. */
static void stls_close(stream_t *s, stream_close_cb cb, void *arg)
{
    stream_tls_t *st = (stream_tls_t *)s;
    st->closing = 1;
    st->close_cb = cb;
    st->close_arg = arg;
    if (st->ktls_tx) {
        /* Not after a write still out: the alert would land in its middle;
         * nor on a stream that failed or ended: the kernel's TLS state may
         * be broken (EBADMSG), and an ended peer does not read it. */
        int fd = stream_fileno(st->inner), ended = st->fault.code || st->peer_closed;
        if (!ended && (!stream_reusable(st->inner) || fd < 0 ||
                       ktls_send_alert(fd, 1, KTLS_ALERT_CLOSE_NOTIFY) != 0))
            log_debug("close_notify to %s not sent", st->origin);
    } else if (!st->handshaking && !st->decrypt_in_flight) {
        /* Best effort: the alert usually leaves in uv_write's first try,
         * before the close cancels what is left. */
        size_t n;
        tls_conn_close_notify(st->tls);
        char *out = tls_conn_take_output(st->tls, &n);
        if (out && stream_write(st->inner, out, n) != 0)
            log_debug("close_notify to %s not sent", st->origin);
    }
    stream_close(st->inner, on_inner_closed, st);
}

/* Bytes beyond what was delivered (plaintext or ciphertext not yet
 * decrypted), or the peer's end, mean this stream carries nothing more. */
static int stls_reusable(const stream_t *s)
{
    const stream_tls_t *st = (const stream_tls_t *)s;
    return !st->decrypt_in_flight && !st->plain_pending && !st->spill_len && !st->decrypt_more &&
           !st->eof_pending && !st->peer_closed && !tls_conn_has_pending(st->tls) &&
           stream_reusable(st->inner);
}

static void stls_release(stream_t *s)
{
    stream_tls_t *st = (stream_tls_t *)s;
    stream_release(st->inner);
}

static const stream_fault_t *stls_fault(const stream_t *s)
{
    return &((const stream_tls_t *)s)->fault;
}

static const stream_ops_t stls_ops = {
    .read_start = stls_read_start,
    .read_stop = stls_read_stop,
    .write = stls_write,
    .close = stls_close,
    .reusable = stls_reusable,
    .release = stls_release,
    .fault = stls_fault,
};

int stream_tls_new(stream_t *inner, tls_ctx_t *ctx, const char *host, const char *origin,
                   uv_loop_t *loop, bufpool_t *pool, stream_t **out)
{
    stream_tls_t *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    if (tls_conn_new(ctx, host, origin, &st->tls)) {
        free(st);
        return -ENOMEM;
    }
    st->base.ops = &stls_ops;
    st->inner = inner;
    st->inner_open = 1;
    st->loop = loop;
    st->pool = pool;
    st->handshaking = 1;
    snprintf(st->origin, sizeof st->origin, "%s", origin);
    stream_set_cbs(inner, &inner_cbs, st);
    *out = &st->base;
    return 0;
}
