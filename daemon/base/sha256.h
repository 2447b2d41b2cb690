/* SHA-256 (FIPS 180-4) for verifying and naming cached downloads.
 *
 * hubd hashes every byte it stores, often from several libuv pool threads at
 * once, so the hash sits on the download path: on x86 CPUs with the SHA
 * extensions the block function uses them (several times faster than plain
 * C), and falls back to portable C elsewhere. The choice is made at run time
 * so one binary serves both kinds of machine.
 *
 * A context belongs to one thread at a time; different contexts may be used
 * concurrently without locking. */
#ifndef HUBD_SHA256_H
#define HUBD_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sha256_ctx {
    uint32_t h[8];   /* chaining state */
    uint64_t nbytes; /* total bytes absorbed */
    uint8_t buf[64]; /* partial block */
    size_t buflen;   /* bytes used in buf */
} sha256_ctx_t;

/* Start a new digest. Call before the first update, and again to reuse a
 * context after sha256_final(). */
void sha256_init(sha256_ctx_t *c);

/* Absorb len bytes; call as many times as the data arrives, in any chunk sizes
 * (len 0 is allowed, data may then be NULL). Whole blocks are hashed straight
 * from data, so large chunks avoid any copying. */
void sha256_update(sha256_ctx_t *c, const void *data, size_t len);

/* Pad, finish and write the 32-byte digest. The context is spent afterwards:
 * sha256_init() it before hashing anything else. */
void sha256_final(sha256_ctx_t *c, uint8_t out[32]);

/* Format a digest as 64 lowercase hex digits plus NUL, the form used in store
 * paths, the database and log lines. */
void sha256_hex(const uint8_t digest[32], char out[65]);

/* Parse a digest given by a client or read back from disk. Returns 0, or
 * -EINVAL unless hex is exactly 64 hex digits (either case) followed by NUL;
 * out is left untouched on error. */
int sha256_parse_hex(const char *hex, uint8_t out[32]);

/* Name of the block function sha256_update() uses now: "sha-ni" or
 * "portable". For start-up logs and benchmarks, so a slow host is explained. */
const char *sha256_impl_name(void);

/* Non-zero forces the portable C path even where SHA-NI exists; zero returns
 * to the fastest available. For tests and benchmarks that compare both paths;
 * both share the same state layout, so switching mid-message is harmless. */
void sha256_force_portable(int on);

#endif /* HUBD_SHA256_H */
