/* fake_stream: a stream (stream.h) whose peer is the test, for the unit
 * tests of what sits on a stream (test_http, test_tunnel): its writes are
 * captured in written[] and its reads are fed by fake_send/fake_end, from
 * pooled buffers as stream_tcp's. A header of static functions: each test
 * program is one translation unit. */
#ifndef HUBD_TEST_FAKE_STREAM_H
#define HUBD_TEST_FAKE_STREAM_H

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "bufpool.h"
#include "stream.h"

typedef struct fake_stream {
    stream_t base;
    uv_timer_t closer; /* its close stands for the stream's close callback */
    bufpool_t *pool;
    char written[4096]; /* what the client sent */
    size_t wlen;
    int reading;
    int closed;
    stream_fault_t fault;
    stream_close_cb close_cb;
    void *close_arg;
} fake_stream_t;

static int fake_read_start(stream_t *s)
{
    ((fake_stream_t *)s)->reading = 1;
    return 0;
}

static void fake_read_stop(stream_t *s)
{
    ((fake_stream_t *)s)->reading = 0;
}

static int fake_write(stream_t *s, char *buf, size_t n)
{
    fake_stream_t *f = (fake_stream_t *)s;
    ck_assert_uint_le(f->wlen + n, sizeof f->written);
    memcpy(f->written + f->wlen, buf, n);
    f->wlen += n;
    free(buf);
    return 0;
}

static void fake_on_closed(uv_handle_t *h)
{
    fake_stream_t *f = h->data;
    stream_close_cb cb = f->close_cb;
    void *arg = f->close_arg;
    free(f);
    cb(arg);
}

static void fake_close(stream_t *s, stream_close_cb cb, void *arg)
{
    fake_stream_t *f = (fake_stream_t *)s;
    ck_assert(!f->closed);
    f->closed = 1;
    f->close_cb = cb;
    f->close_arg = arg;
    uv_close((uv_handle_t *)&f->closer, fake_on_closed); /* never from inside */
}

static int fake_reusable(const stream_t *s)
{
    (void)s;
    return 1;
}

static void fake_release(stream_t *s)
{
    (void)s;
}

static const stream_fault_t *fake_fault(const stream_t *s)
{
    return &((const fake_stream_t *)s)->fault;
}

static const stream_ops_t fake_ops = {
    .read_start = fake_read_start,
    .read_stop = fake_read_stop,
    .write = fake_write,
    .close = fake_close,
    .reusable = fake_reusable,
    .release = fake_release,
    .fault = fake_fault,
};

/* The peer sends [p, p+n): one read, in a pooled buffer, as stream_tcp. */
static void fake_send(fake_stream_t *f, const char *p, size_t n)
{
    ck_assert(f->reading);
    buf_t *b = bufpool_get(f->pool, f->pool->size);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_le(n, f->pool->size);
    memcpy(b->data, p, n);
    b->len = n;
    if (f->base.cbs->on_activity)
        f->base.cbs->on_activity(&f->base);
    if (!f->closed)
        f->base.cbs->on_read(&f->base, (ssize_t)n, b, b->data);
    buf_unref(f->pool, b);
}

static void fake_end(fake_stream_t *f, ssize_t how)
{
    f->base.cbs->on_read(&f->base, how, NULL, NULL);
}

/* A fake stream on loop, reading from pool; not reading yet. */
static fake_stream_t *fake_new(uv_loop_t *loop, bufpool_t *pool)
{
    fake_stream_t *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    f->base.ops = &fake_ops;
    f->pool = pool;
    uv_timer_init(loop, &f->closer);
    f->closer.data = f;
    return f;
}

#endif
