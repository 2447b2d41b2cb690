/* stream_tls: TLS (tls.h) as a kind of stream (stream.h), on top of another
 * stream: TCP today, a proxy tunnel later.
 *
 * Owns its inner stream (closed with it) and the TLS state. The handshake
 * runs on the loop; after it, ciphertext read lands in a spill buffer
 * (reading stops when it is full), and one decrypt work item at a time, in
 * the thread pool, takes the spill and turns it into plaintext in pooled
 * buffers, which on_read then delivers: the loop neither decrypts nor
 * copies body bytes. While the item is out, only it touches the TLS state.
 *
 * Kernel TLS (ktls.h): after a TLS 1.2 AES-GCM handshake, on a stream that
 * is a plain socket (TCP, or a tunnel through an http:// proxy), the keys
 * go to the kernel unless ktls = off. Then the inner stream reads
 * plaintext into pooled buffers, which on_read delivers as they are (as
 * plain HTTP's), and writes go to it as they are (if the kernel took the
 * writing side too; else mbedTLS still encrypts them). No decrypt item.
 * Where the kernel cannot (no tls module, another cipher), mbedTLS goes
 * on, and only the debug log says so.
 *
 * Ends it reports: UV_EOF after the peer's close_notify,
 * STREAM_EOF_UNVERIFIED for a close without one, STREAM_EFAULT for a TLS
 * failure ("tls": a record that fails its integrity check, an alert) or
 * no memory ("internal"). Loop thread, but for the item. */
#ifndef HUBD_STREAM_TLS_H
#define HUBD_STREAM_TLS_H

#include <uv.h>

#include "bufpool.h"
#include "stream.h"
#include "tls.h"

/* The handshake's end: code NULL when it is complete, else an error code
 * (PROTOCOL.md) and a message for people. */
typedef void (*stream_tls_handshake_cb)(stream_t *s, const char *code, const char *msg);

/* TLS to host over inner, which it takes over on success (on failure inner
 * stays the caller's). origin ("https://host:port") names the session-cache
 * slot and the messages. 0 or -ENOMEM (TLS could not be set up). */
int stream_tls_new(stream_t *inner, tls_ctx_t *ctx, const char *host, const char *origin,
                   uv_loop_t *loop, bufpool_t *pool, stream_t **out);

/* Runs the handshake, reading from the inner stream; cb may come from
 * inside this call. The caller's callbacks (stream_set_cbs) must be set:
 * write failures go to them. Afterwards the stream is reading. */
void stream_tls_handshake(stream_t *s, stream_tls_handshake_cb cb);

#endif
