/* stream_tcp: the plain TCP kind of stream (stream.h) on a libuv handle.
 *
 * Owns its uv_tcp_t and the pooled buffer reads land in: a read goes to the
 * tail of the current buffer, or to a fresh one when less than a quarter is
 * left, so body batches are made of few, full buffers. The connector
 * (connector.h) makes one per address it tries and connects its handle;
 * from then on it is used through stream.h only. Loop thread only. */
#ifndef HUBD_STREAM_TCP_H
#define HUBD_STREAM_TCP_H

#include <uv.h>

#include "bufpool.h"
#include "stream.h"

/* A stream on a new, unconnected TCP handle. 0 or a libuv error. */
int stream_tcp_new(uv_loop_t *loop, bufpool_t *pool, stream_t **out);

/* The handle, for uv_tcp_connect and socket options. s must be a TCP one. */
uv_tcp_t *stream_tcp_handle(stream_t *s);

/* Tests and fuzzing only: one read of data (at most the room a read gets)
 * through the read path as if from the socket; data NULL: the peer's EOF.
 * Returns the bytes taken. */
size_t stream_tcp_inject(stream_t *s, const char *data, size_t n);

#endif
