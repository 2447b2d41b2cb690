/* stream_tcp: plain TCP behind the stream interface. */
#include "stream_tcp.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct stream_tcp {
    stream_t base;
    uv_tcp_t tcp;            /* initialised in stream_tcp_new, closed by tcp_close */
    bufpool_t *pool;         /* where reads land unless the user has an alloc */
    buf_t *rbuf;             /* buffer reads land in; one reference held */
    bufpool_meter_t meter;   /* how fast reads come: the size of the next rbuf */
    unsigned writes_pending; /* uv_writes not yet completed (they own their bytes) */
    int closing;             /* tcp_close called: no callback to the user any more */
    stream_close_cb close_cb;
    void *close_arg;
} stream_tcp_t;

typedef struct tcp_write {
    uv_write_t req;
    stream_tcp_t *t;
    char *buf; /* owned until the write completes */
} tcp_write_t;

/* Room for response bytes at the tail of the current pooled buffer, or in a
 * new one when less than a quarter is left: small or full by how fast the
 * stream reads (bufpool_meter_next), so a slow stream holds little. */
static int tcp_rbuf_space(stream_tcp_t *t, char **p, size_t *room)
{
    bufpool_t *pool = t->pool;
    if (!t->rbuf || t->rbuf->cap - t->rbuf->len < t->rbuf->cap / 4) {
        if (t->rbuf)
            buf_unref(pool, t->rbuf);
        t->rbuf = bufpool_get(pool, bufpool_meter_next(pool, &t->meter, uv_now(t->tcp.loop)));
        if (!t->rbuf)
            return -1;
    }
    *p = t->rbuf->data + t->rbuf->len;
    *room = t->rbuf->cap - t->rbuf->len;
    return 0;
}

static void tcp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
    (void)suggested;
    stream_tcp_t *t = h->data;
    char *p = NULL;
    size_t room = 0;
    if (t->base.cbs->alloc)
        t->base.cbs->alloc(&t->base, &p, &room);
    else if (tcp_rbuf_space(t, &p, &room))
        p = NULL;
    *out = p ? uv_buf_init(p, (unsigned)room) : uv_buf_init(NULL, 0);
}

static void tcp_on_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *b)
{
    stream_tcp_t *t = h->data;
    const stream_cbs_t *cbs = t->base.cbs;
    if (nread == 0 && !cbs->alloc && t->rbuf && t->rbuf->len == 0) {
        /* Nothing came (EAGAIN) into a buffer taken for this read: it goes
         * back, so a stream between its bytes (a slow one waits most of the
         * time) holds none. 1,000 slow downloads held 4 MB so. */
        buf_unref(t->pool, t->rbuf);
        t->rbuf = NULL;
    }
    if (nread == 0 || t->closing)
        return;
    if (nread < 0) {
        cbs->on_read(&t->base, nread, NULL, NULL);
        return;
    }
    buf_t *buf = NULL;
    if (!cbs->alloc) {
        buf = t->rbuf;
        buf->len += (size_t)nread;
        bufpool_meter_add(&t->meter, (size_t)nread);
    }
    if (cbs->on_activity) {
        cbs->on_activity(&t->base);
        if (t->closing)
            return; /* on_activity closed the stream */
    }
    cbs->on_read(&t->base, nread, buf, b->base);
}

static int tcp_read_start(stream_t *s)
{
    stream_tcp_t *t = (stream_tcp_t *)s;
    int rc = uv_read_start((uv_stream_t *)&t->tcp, tcp_alloc, tcp_on_read);
    return rc == UV_EALREADY ? 0 : rc;
}

static void tcp_read_stop(stream_t *s)
{
    stream_tcp_t *t = (stream_tcp_t *)s;
    uv_read_stop((uv_stream_t *)&t->tcp);
}

static void tcp_on_write(uv_write_t *w, int status)
{
    tcp_write_t *tw = (tcp_write_t *)w;
    stream_tcp_t *t = tw->t;
    free(tw->buf);
    free(tw);
    t->writes_pending--;
    if (status == UV_ECANCELED || t->closing)
        return;
    if (status < 0)
        t->base.cbs->on_write_error(&t->base, status);
}

static int tcp_write(stream_t *s, char *buf, size_t n)
{
    stream_tcp_t *t = (stream_tcp_t *)s;
    tcp_write_t *tw = malloc(sizeof *tw);
    if (!tw) {
        free(buf);
        return UV_ENOMEM;
    }
    tw->t = t;
    tw->buf = buf;
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    int rc = uv_write(&tw->req, (uv_stream_t *)&t->tcp, &b, 1, tcp_on_write);
    if (rc) {
        free(buf);
        free(tw);
        return rc;
    }
    t->writes_pending++;
    return 0;
}

/* Memory goes in the close callback: libuv cancels the pending connect and
 * writes (UV_ECANCELED) before it, and they point at us. */
static void tcp_on_closed(uv_handle_t *h)
{
    stream_tcp_t *t = h->data;
    stream_close_cb cb = t->close_cb;
    void *arg = t->close_arg;
    if (t->rbuf)
        buf_unref(t->pool, t->rbuf);
    free(t);
    if (cb)
        cb(arg);
}

static void tcp_close(stream_t *s, stream_close_cb cb, void *arg)
{
    stream_tcp_t *t = (stream_tcp_t *)s;
    assert(!t->closing);
    t->closing = 1;
    t->close_cb = cb;
    t->close_arg = arg;
    uv_close((uv_handle_t *)&t->tcp, tcp_on_closed);
}

static int tcp_reusable(const stream_t *s)
{
    const stream_tcp_t *t = (const stream_tcp_t *)s;
    return t->writes_pending == 0;
}

static void tcp_release(stream_t *s)
{
    stream_tcp_t *t = (stream_tcp_t *)s;
    if (t->rbuf) {
        buf_unref(t->pool, t->rbuf);
        t->rbuf = NULL;
    }
}

static const stream_fault_t *tcp_fault(const stream_t *s)
{
    (void)s;
    return NULL; /* plain TCP fails with libuv codes only */
}

static int tcp_fileno(const stream_t *s)
{
    const stream_tcp_t *t = (const stream_tcp_t *)s;
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)&t->tcp, &fd);
    return rc ? rc : fd;
}

static size_t tcp_unsent(const stream_t *s)
{
    return uv_stream_get_write_queue_size((const uv_stream_t *)&((const stream_tcp_t *)s)->tcp);
}

static const stream_ops_t tcp_ops = {
    .read_start = tcp_read_start,
    .read_stop = tcp_read_stop,
    .write = tcp_write,
    .close = tcp_close,
    .reusable = tcp_reusable,
    .release = tcp_release,
    .fault = tcp_fault,
    .fileno = tcp_fileno,
    .unsent = tcp_unsent,
};

int stream_tcp_new(uv_loop_t *loop, bufpool_t *pool, stream_t **out)
{
    stream_tcp_t *t = calloc(1, sizeof *t);
    if (!t)
        return UV_ENOMEM;
    int rc = uv_tcp_init(loop, &t->tcp);
    if (rc) {
        free(t);
        return rc;
    }
    t->base.ops = &tcp_ops;
    t->tcp.data = t;
    t->pool = pool;
    *out = &t->base;
    return 0;
}

uv_tcp_t *stream_tcp_handle(stream_t *s)
{
    assert(s->ops == &tcp_ops);
    return &((stream_tcp_t *)s)->tcp;
}

size_t stream_tcp_inject(stream_t *s, const char *data, size_t n)
{
    stream_tcp_t *t = (stream_tcp_t *)s;
    uv_buf_t b = uv_buf_init(NULL, 0);
    if (!data) {
        tcp_on_read((uv_stream_t *)&t->tcp, UV_EOF, &b);
        return 0;
    }
    tcp_alloc((uv_handle_t *)&t->tcp, 65536, &b);
    if (!b.base) {
        tcp_on_read((uv_stream_t *)&t->tcp, UV_ENOBUFS, &b);
        return 0;
    }
    size_t take = n < b.len ? n : b.len; /* a read fills at most the room offered */
    memcpy(b.base, data, take);
    tcp_on_read((uv_stream_t *)&t->tcp, (ssize_t)take, &b);
    return take;
}
