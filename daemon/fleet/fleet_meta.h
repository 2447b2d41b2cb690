/* fleet_meta: the cluster swarm's metadata exchange. Node A asks node B for
 * the .torrent bytes of a blob, named by its SHA-256, over mutual TLS.
 *
 * Who is a member: both ends present a certificate the cluster CA
 * (fleet_ca) signed, and each checks the other's against it. There is no
 * name check (nodes are named by IP; any certificate the CA signed is a
 * member). A peer whose certificate the CA did not sign, or that expired,
 * gets nothing: the handshake fails with a TLS alert and the connection is
 * closed, before a request is read. TLS 1.2 on mbedTLS 2.28, ECDHE (X25519
 * first, then P-256) with AES-GCM or ChaCha20-Poly1305; certificates EC
 * (P-256, P-384, P-521) or RSA. A server gives session tickets (RFC 5077,
 * AES-256-GCM under a key of its own, valid 5 minutes) and an identity
 * keeps one session per node it asked, so that the next ask of the same
 * node within 5 minutes is an abbreviated handshake, with no public-key
 * work: membership is then proven by the secret of a full handshake, with
 * both certificates checked, at most 5 minutes old.
 *
 * The wire (docs/PROTOCOL.md, "The swarm's metadata exchange"): one request
 * per connection, `TORRENT <64 lowercase hex> [<url>]\n` (or `VERDICT
 * <64 hex> [<hex>]\n`, fmeta_server_set_verdicts); one answer,
 * `HAVE <len>\n` and len bytes, `FETCHING\n`, `NONE\n` or `ERR <reason>\n`;
 * then the server's close_notify and its close.
 *
 * Threads: fmeta_identity_new reads files (start-up, or a pool item); every
 * other call, and every callback, is on the loop thread of the loop given.
 * mbedTLS never touches a socket: ciphertext goes through memory buffers
 * filled by uv_read and emptied by uv_write, so nothing waits on the
 * network. The handshake's public-key work does run on the loop: a few
 * milliseconds per connection with P-256 (RSA 2048 signs slower), which is
 * why the server takes at most FMETA_MAX_CONNS at once. A HAVE's bytes are
 * encrypted a slice at a time as the socket takes them, so a 16 MiB answer
 * does not hold the loop either.
 *
 * One owner, one close path: a server ends with fmeta_server_close, an ask
 * with its reply or fmeta_ask_cancel; memory goes once libuv has closed the
 * handles. An identity must outlive every server and ask made with it, and
 * serves one loop (its random generator, its tickets' key and its kept
 * sessions are shared by their handshakes). A certificate that expires
 * while hubd runs is refused by the peers within 5 minutes (the sessions
 * resumed meanwhile come from a handshake before it expired): a new
 * identity (read again, e.g. at a reload) is the cure. */
#ifndef HUBD_FLEET_META_H
#define HUBD_FLEET_META_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define FMETA_MAX_TORRENT (16u * 1024 * 1024) /* the longest .torrent a HAVE may carry */
#define FMETA_MAX_URL 4096                    /* the request's url, bytes */
#define FMETA_MAX_LINE 4200                   /* the whole request line, without its \n */
#define FMETA_MAX_CONNS 256                   /* a server's connections at once */

typedef struct fmeta_identity fmeta_identity_t;
/* Reads and parses the CA certificate, this node's certificate and its key (PEM files) and builds
 * the server and client mbedtls_ssl_config (both MBEDTLS_SSL_VERIFY_REQUIRED against the CA).
 * Blocking file reads: start-up or a pool item. 0, or a negative errno with err set to a sentence
 * naming the file and what is wrong (missing, not PEM, key does not match the certificate,
 * certificate not signed by the CA, expired). The errnos: -ENOENT, -EACCES and the like (a file
 * cannot be read), -EINVAL (not PEM, does not parse, an encrypted key, the key does not match, not
 * signed by the CA), -EKEYEXPIRED (the node's certificate or the CA's is out of its validity
 * dates), -ENOMEM. */
int fmeta_identity_new(const char *ca_path, const char *cert_path, const char *key_path,
                       fmeta_identity_t **out, char *err, size_t errlen);
void fmeta_identity_free(fmeta_identity_t *id); /* NULL: no-op; after its servers and asks */

typedef enum { FMETA_HAVE = 1, FMETA_FETCHING, FMETA_NONE } fmeta_status_t;

/* ---- Serving -------------------------------------------------------------- */

typedef struct fmeta_server fmeta_server_t;
/* Called on the loop for each well-formed request: answer now. For FMETA_HAVE set *torrent and *len
 * (the bytes must stay valid until the call returns; the server copies them). url is NULL when the
 * request had none. peer is "ip:port" of the asker ("[ip]:port" for IPv6).
 * A HAVE with no bytes or more than FMETA_MAX_TORRENT is answered NONE (and logged): the asker
 * could not use it. The callback may call fmeta_server_close. */
typedef fmeta_status_t (*fmeta_lookup_fn)(void *arg, const char *sha256, const char *url,
                                          const char *peer, const unsigned char **torrent,
                                          size_t *len);
/* Listens on ip:port (numeric). Bounded: at most FMETA_MAX_CONNS (256) connections at once (more
 * are closed at accept), the handshake and request line within 10 s, the whole exchange within 60
 * s, a request line longer than the limit is an ERR. 0 or a negative errno (err set). Port 0: one
 * the system chooses (fmeta_server_port). A bad address is -EINVAL; -EADDRINUSE and the like come
 * from bind and listen. */
int fmeta_server_start(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                       fmeta_lookup_fn lookup, void *arg, fmeta_server_t **out, char *err,
                       size_t errlen);
/* The server answers VERDICT requests too (the swarm's shared record of
 * what the Hub said to one credential of one file), through fn, which has
 * the lookup's shape: sha256 is the record's key (64 hex), url its value
 * (lowercase hex, or NULL when asked rather than told). Unset: they are
 * an unknown request. */
void fmeta_server_set_verdicts(fmeta_server_t *s, fmeta_lookup_fn fn, void *arg);
/* The port listened on. */
int fmeta_server_port(const fmeta_server_t *s);
/* The bounds above, in ms, for connections accepted from now on (tests; 0 keeps one). */
void fmeta_server_set_timeouts(fmeta_server_t *s, unsigned request_ms, unsigned total_ms);
/* Counters for ops ("fleet status"): requests answered by kind, handshakes refused. */
typedef struct fmeta_server_stats {
    uint64_t have, fetching, none, bad, refused;
    uint64_t resumed; /* handshakes resumed from a ticket this identity gave (its servers') */
} fmeta_server_stats_t;
/* refused counts every handshake that failed: a peer whose certificate this node refused, and
 * one that refused this node's (the log line says which). */
void fmeta_server_stats(const fmeta_server_t *s, fmeta_server_stats_t *st);
/* Connections open now, and how many were closed at accept because FMETA_MAX_CONNS were open. */
void fmeta_server_load(const fmeta_server_t *s, unsigned *open, uint64_t *turned_away);
/* Closes the listener and every connection; done(arg) once all handles are closed (may be NULL). */
void fmeta_server_close(fmeta_server_t *s, void (*done)(void *), void *arg);

/* ---- Asking --------------------------------------------------------------- */

typedef struct fmeta_ask fmeta_ask_t;
/* The answer: rc 0 and status (FMETA_HAVE with torrent/len valid during the call, or
 * FETCHING/NONE), or rc < 0: -ECONNREFUSED/-ETIMEDOUT/-EHOSTUNREACH... (the node is down or
 * unreachable: try the next), -EACCES (the TLS handshake failed: its certificate is not the
 * cluster's; why says so), -EPROTO (a malformed answer, an ERR line, a torrent too long), with why
 * a sentence for the log. Called exactly once unless fmeta_ask_cancel came first; never from inside
 * fmeta_ask. Also -ECONNRESET: the node closed the connection before answering (at accept when it
 * has FMETA_MAX_CONNS open, or past its own bounds): try again later or the next. The ask is gone
 * once the callback returns (fmeta_ask_cancel inside it is a no-op). */
typedef void (*fmeta_reply_fn)(void *arg, int rc, fmeta_status_t status,
                               const unsigned char *torrent, size_t len, const char *why);
/* Asks ip:port for sha256's torrent (url may be NULL). timeout_ms bounds the whole exchange.
 * Returns the ask, or NULL (bad address, no memory: then no callback).
 * Also NULL for a sha256 that is not 64 lowercase hex digits, or a url that is empty, longer than
 * FMETA_MAX_URL or holds a space or a control character: the request could not be sent. */
fmeta_ask_t *fmeta_ask(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                       const char *sha256, const char *url, unsigned timeout_ms, fmeta_reply_fn cb,
                       void *arg);
/* `VERDICT key [value]`: asks for the record of key (value NULL), or tells
 * it (value: lowercase hex, at most FMETA_MAX_URL digits). The answer as
 * fmeta_ask's: HAVE with the record's bytes, FETCHING, NONE. NULL for a
 * key or value of another form. */
fmeta_ask_t *fmeta_ask_verdict(uv_loop_t *loop, fmeta_identity_t *id, const char *ip, int port,
                               const char *key, const char *value, unsigned timeout_ms,
                               fmeta_reply_fn cb, void *arg);
/* No callback after this; the handles close on their own. */
void fmeta_ask_cancel(fmeta_ask_t *a);

#endif
