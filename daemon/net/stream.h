/* stream: a byte stream to a peer behind a small vtable (as redis's
 * ConnectionType), so the HTTP/1 code never asks what it talks to.
 *
 * Kinds today: plain TCP (stream_tcp.h) and TLS (stream_tls.h), which is a
 * user of another stream, so it can sit on TCP or, later, on a tunnel. A
 * stream has one owner (who made it, or was handed it) and one way to die,
 * stream_close(): no user callback comes after it, and its close callback,
 * never from inside the call, comes once the handles are closed and the
 * memory is gone.
 *
 * Reading: the user's on_read gets each slice of bytes read, or the end.
 * Slices lie in pooled read buffers (bufpool.h), passed along with them, so
 * body bytes are not copied; a user that wants the bytes to land in its own
 * memory (TLS reading ciphertext) sets an alloc callback instead, as libuv's
 * uv_alloc_cb. Every kind honours it: one that cannot read there directly
 * (a tunnel reading from its own inner stream) copies its bytes into it.
 * Callbacks may close the stream: a kind that calls back checks whether it
 * was closed before it goes on.
 *
 * Everything runs on the loop thread. */
#ifndef HUBD_STREAM_H
#define HUBD_STREAM_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

#include "bufpool.h"

typedef struct stream stream_t;

/* Ends on_read reports besides libuv's (UV_EOF: a clean end the stream
 * vouches for; other libuv codes: the transport failed). */
#define STREAM_EOF_UNVERIFIED (-10001) /* an end anyone on the path could forge */
#define STREAM_EFAULT (-10002)         /* the stream failed: see stream_fault() */

/* What a stream's own failure (STREAM_EFAULT) or an unverified end was,
 * valid until the stream closes. */
typedef struct stream_fault {
    const char *code; /* an error code (PROTOCOL.md): "tls", "internal" */
    const char *msg;  /* for people */
    int local;        /* ours (out of memory), not the peer's: reported as it is */
} stream_fault_t;

typedef void (*stream_close_cb)(void *arg);

typedef struct stream_cbs {
    /* Optional: where the next read lands (room bytes at *p); NULL from it
     * fails the read with UV_ENOBUFS. Then on_read gets buf NULL. Without
     * it, reads land in pooled buffers. */
    void (*alloc)(stream_t *s, char **p, size_t *room);
    /* n > 0: bytes [p, p+n), inside buf (which is valid during the call;
     * take a buf_ref() to keep it). n < 0: the stream ended (see above);
     * nothing more is read. */
    void (*on_read)(stream_t *s, ssize_t n, buf_t *buf, const char *p);
    /* Optional: the peer sent bytes, before they are delivered (a TLS record
     * may take a while, or more bytes, to turn into plaintext). The heartbeat
     * an idle timeout watches. */
    void (*on_activity)(stream_t *s);
    /* A write failed (libuv code); never for writes a close cancelled. */
    void (*on_write_error)(stream_t *s, int err);
} stream_cbs_t;

typedef struct stream_ops {
    int (*read_start)(stream_t *s); /* 0 also when already reading */
    void (*read_stop)(stream_t *s);
    int (*write)(stream_t *s, char *buf, size_t n); /* buf: malloc'd, the stream's */
    void (*close)(stream_t *s, stream_close_cb cb, void *arg);
    int (*reusable)(const stream_t *s);
    void (*release)(stream_t *s);
    const stream_fault_t *(*fault)(const stream_t *s);
    int (*fileno)(const stream_t *s);    /* optional: see stream_fileno */
    size_t (*unsent)(const stream_t *s); /* optional: see stream_unsent */
} stream_ops_t;

struct stream {
    const stream_ops_t *ops; /* the kind */
    const stream_cbs_t *cbs; /* the user's callbacks; set before reading */
    void *data;              /* the user's */
};

/* Sets who hears of this stream's reads and failures. */
static inline void stream_set_cbs(stream_t *s, const stream_cbs_t *cbs, void *data)
{
    s->cbs = cbs;
    s->data = data;
}

/* Starts (again) delivering reads; may deliver bytes a lower layer already
 * holds from inside the call. 0 or a libuv error. */
static inline int stream_read_start(stream_t *s)
{
    return s->ops->read_start(s);
}

/* Stops reading from the peer (backpressure). A delivery already under way
 * (a TLS record being decrypted) still arrives. */
static inline void stream_read_stop(stream_t *s)
{
    s->ops->read_stop(s);
}

/* Sends n bytes of buf, malloc'd: the stream owns and frees it, also on
 * error. The bytes belong to the write, not to the caller: a peer may answer
 * before the write completes. 0 or a libuv error. */
static inline int stream_write(stream_t *s, char *buf, size_t n)
{
    return s->ops->write(s, buf, n);
}

/* The stream's single close path; cb(arg) once every handle is closed and
 * the memory is gone (never from inside this call). */
static inline void stream_close(stream_t *s, stream_close_cb cb, void *arg)
{
    s->ops->close(s, cb, arg);
}

/* Whether the stream may carry another exchange: nothing read beyond what
 * was delivered, no end seen, no write in flight. */
static inline int stream_reusable(const stream_t *s)
{
    return s->ops->reusable(s);
}

/* Lets go of read buffers kept for the next read (the stream goes idle). */
static inline void stream_release(stream_t *s)
{
    s->ops->release(s);
}

/* The TCP socket whose bytes are the stream's, unchanged both ways (TCP,
 * an open tunnel on TCP): a layer above may hand its records to the
 * kernel (kernel TLS, ktls.h). A negative errno for a stream that changes
 * the bytes or holds some back (TLS itself, a tunnel still opening). */
static inline int stream_fileno(const stream_t *s)
{
    return s->ops->fileno ? s->ops->fileno(s) : -ENOTSOCK;
}

/* Bytes written to the stream that are not in the socket yet (queued in
 * libuv): a layer that hands the socket's records to the kernel must wait
 * for 0, or the kernel would wrap them in its own records. */
static inline size_t stream_unsent(const stream_t *s)
{
    return s->ops->unsent ? s->ops->unsent(s) : 0;
}

/* The failure behind an on_read of STREAM_EFAULT. */
static inline const stream_fault_t *stream_fault(const stream_t *s)
{
    return s->ops->fault(s);
}

#endif
