/* tls: TLS 1.2 client connections on mbedTLS, driven by the event loop.
 *
 * mbedTLS never touches a socket here: its BIO callbacks read ciphertext from
 * an input buffer that the connection fills from uv_read, and append
 * ciphertext to an output buffer that the connection hands to uv_write. So a
 * handshake, a read or a write never blocks; "want more input" comes back as
 * TLS_WANT_INPUT and the caller tries again after the next read.
 *
 * One tls_ctx_t is made at start-up: the CA chain (parsed once and shared),
 * the random generator, the two configurations (verifying, and not verifying
 * for hosts the config file lists as insecure), the ordered cipher suites,
 * and a cache of TLS sessions per origin so reconnects resume.
 *
 * Threads: the context and the handshake belong to the loop thread. A
 * connection's tls_conn_t may be handed to one pool thread at a time for
 * tls_conn_input_append and tls_conn_read (decryption); the loop does not
 * touch it until that work item is back. */
#ifndef HUBD_TLS_H
#define HUBD_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "ktls.h"

typedef struct tls_ctx tls_ctx_t;
typedef struct tls_conn tls_conn_t;

#define TLS_WANT_INPUT 1 /* not an error: feed more ciphertext, call again */

/* Loads the CA chain (cfg->ca_file, else cfg->ca_path, else the system
 * bundle) and sets up the configurations. A missing CA file is an error only
 * when one was configured explicitly; err gets a message for people. */
int tls_ctx_new(const hubd_config_t *cfg, tls_ctx_t **out, char *err, size_t errlen);
void tls_ctx_free(tls_ctx_t *ctx);

/* SIGHUP: the CA bundle of cfg is read again (its file may have changed, or
 * cfg names another), for the handshakes from now on, in three steps so
 * that the parse runs off the loop (a system bundle of 140 certificates
 * took 5-7 ms, in which the loop answered no hit):
 * - tls_ca_new (loop): copies what to read from cfg; NULL: no memory;
 * - tls_ca_load (any thread, one at a time per tls_ca_t): reads it;
 * - tls_ctx_take_ca (loop): the handshakes from now on use it. A bundle
 *   that did not load changes nothing: -EINVAL with err set.
 * tls_ca_free (loop, after take or instead of it) frees what is left. */
typedef struct tls_ca tls_ca_t;
tls_ca_t *tls_ca_new(const hubd_config_t *cfg);
void tls_ca_load(tls_ca_t *ca);
int tls_ctx_take_ca(tls_ctx_t *ctx, tls_ca_t *ca, char *err, size_t errlen);
void tls_ca_free(tls_ca_t *ca);

/* How many times a reload changed the CA bundle. The remembered sessions
 * go with each such reload; a connection made before one (the HTTP client's pool
 * compares) was verified against a bundle no longer in force and is not
 * used for another request. */
unsigned tls_ctx_generation(const tls_ctx_t *ctx);

/* Whether ktls = auto and the kernel had the tls module loaded when ctx
 * was made: the connections with AES-GCM will go through kernel TLS
 * (ktls.h), and AES-GCM is offered first if tls_ciphers is at its default.
 * Made quietly (--check-config prints nothing it need not): the caller
 * says so in the log. */
int tls_ctx_ktls(const tls_ctx_t *ctx);

/* A client connection to host (a DNS name, or an IP literal without
 * brackets); origin names its session-cache slot ("https://host:port"). */
int tls_conn_new(tls_ctx_t *ctx, const char *host, const char *origin, tls_conn_t **out);
void tls_conn_free(tls_conn_t *c);

/* Room for ciphertext from the socket: at least 16 KiB at *p. */
int tls_conn_input_space(tls_conn_t *c, char **p, size_t *room);
/* n bytes were written at the space given out by tls_conn_input_space. */
void tls_conn_input_commit(tls_conn_t *c, size_t n);
/* Ciphertext held and not yet decrypted. */
size_t tls_conn_input_pending(const tls_conn_t *c);
/* Whether anything at all is left to decrypt or read: ciphertext, or
 * plaintext mbedTLS holds from a record already decrypted. */
int tls_conn_has_pending(const tls_conn_t *c);
/* Copies n bytes of ciphertext in. 0 or -ENOMEM. */
int tls_conn_input_append(tls_conn_t *c, const char *data, size_t n);

/* Drives the handshake: 0 when complete, TLS_WANT_INPUT, or a negative
 * value with *code ("tls_verify" or "tls") and msg set. */
int tls_conn_handshake(tls_conn_t *c, const char **code, char *msg, size_t msglen);
/* Whether the handshake resumed a cached session (for logs and tests). */
int tls_conn_resumed(const tls_conn_t *c);
/* The negotiated cipher suite's name, after the handshake. */
const char *tls_conn_cipher(const tls_conn_t *c);

/* After the handshake: the keys and sequence numbers to hand to the kernel
 * (ktls.h), for a TLS 1.2 AES-GCM connection with nothing read beyond the
 * handshake. 0 with *out filled (the caller wipes it); -ENOSYS when ktls is
 * off; -EOPNOTSUPP with *why saying what stood in the way (another cipher
 * suite). Once: the connection forgets the keys either way. From then on
 * mbedTLS must not read (nor write, if the kernel took that side too). */
int tls_conn_ktls_keys(tls_conn_t *c, ktls_keys_t *out, const char **why);

/* Decrypted bytes into buf: > 0 bytes, 0 after the peer's close_notify
 * (only then: empty records are skipped), -TLS_WANT_INPUT when no whole
 * record is buffered, or another negative value with msg set. */
ssize_t tls_conn_read(tls_conn_t *c, char *buf, size_t cap, char *msg, size_t msglen);

/* Encrypts all of data into the output buffer. 0, or negative with msg. */
int tls_conn_write(tls_conn_t *c, const char *data, size_t n, char *msg, size_t msglen);

/* Takes the pending ciphertext (malloc'd, the caller frees it after
 * uv_write); NULL when there is none. */
char *tls_conn_take_output(tls_conn_t *c, size_t *len);

/* Queues a close_notify alert (take the output afterwards). */
void tls_conn_close_notify(tls_conn_t *c);

#endif
