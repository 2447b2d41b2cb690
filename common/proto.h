/* proto: the hubd wire protocol codec, shared by the daemon and hubctl.
 *
 * One message per line: `VERB key=value key=value...\n`. Values are
 * percent-encoded where they hold a byte that would break the framing
 * (space, control bytes, '%', non-ASCII), so a line is readable with socat.
 * docs/PROTOCOL.md is the authority on verbs and keys; this file only knows
 * the framing. Nothing here allocates: messages live in caller-owned structs.
 */
#ifndef HUBD_PROTO_H
#define HUBD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define PROTO_MAX_LINE 16384 /* bytes per line, newline included */
#define PROTO_MAX_FIELDS 32  /* key=value pairs per line */

typedef struct proto_field {
    const char *key;   /* NUL-terminated, points into proto_msg_t.buf */
    const char *value; /* decoded, NUL-terminated, points into buf */
} proto_field_t;

typedef struct proto_msg {
    const char *verb; /* points into buf */
    size_t nfields;
    proto_field_t fields[PROTO_MAX_FIELDS];
    char buf[PROTO_MAX_LINE]; /* decoded copy of the line */
} proto_msg_t;

/* Parse one line (without its '\n'; a trailing '\r' is tolerated). Returns 0,
 * or -EINVAL for a malformed line (bad verb, bad key, bad escape, NUL byte),
 * -E2BIG for too long a line or too many fields. On error *msg is unusable. */
int proto_parse(const char *line, size_t len, proto_msg_t *msg);

/* The decoded value of `key`, or NULL when absent (the first one wins). */
const char *proto_get(const proto_msg_t *msg, const char *key);

/* Builds one line into a caller buffer. Errors are sticky: add calls after a
 * failure do nothing and proto_end reports it, so callers check once. */
typedef struct proto_writer {
    char *buf;  /* caller's storage, at least PROTO_MAX_LINE for a full line */
    size_t cap; /* size of buf */
    size_t len; /* bytes written so far */
    int err;    /* 0 or -E2BIG once the line did not fit */
} proto_writer_t;

void proto_begin(proto_writer_t *w, char *buf, size_t cap, const char *verb);
void proto_add(proto_writer_t *w, const char *key, const char *value);
void proto_add_u64(proto_writer_t *w, const char *key, uint64_t value);
void proto_add_i64(proto_writer_t *w, const char *key, int64_t value);
/* Appends '\n' and NUL-terminates. Returns the line length (newline
 * included, NUL excluded) or -E2BIG. */
int proto_end(proto_writer_t *w);

/* Splits a byte stream into lines. The callback gets each complete line
 * without its '\n'. A line longer than PROTO_MAX_LINE is dropped whole, and
 * reported once with line == NULL and err == -E2BIG (-ENOMEM: a line split
 * between feeds found no memory to be kept). A non-zero return from
 * the callback stops the feed and is returned (the caller is closing). */
typedef int (*proto_line_cb)(void *arg, const char *line, size_t len, int err);

/* A reader holds memory only while a line is unfinished between feeds: its
 * buffer grows to what the line needs (at most PROTO_MAX_LINE) and is freed
 * once the line is whole, so an idle connection's reader holds none. A
 * whole line inside one feed is passed from the caller's bytes, uncopied. */
typedef struct proto_reader {
    char *buf;      /* the unfinished line (malloc'd), or NULL */
    size_t cap;     /* bytes at buf */
    size_t len;     /* bytes of it held in buf */
    int discarding; /* inside an overlong line: skip to '\n' */
} proto_reader_t;

void proto_reader_init(proto_reader_t *r);
/* Frees what an unfinished line holds; the reader may be fed again. */
void proto_reader_free(proto_reader_t *r);
int proto_reader_feed(proto_reader_t *r, const char *data, size_t n, proto_line_cb cb, void *arg);
/* The same, and *consumed says how many bytes of data were used: when the
 * callback stops the feed, the bytes after its line are not, and may be fed
 * later (a reader that stops parsing while its replies are read). */
int proto_reader_feed_some(proto_reader_t *r, const char *data, size_t n, proto_line_cb cb,
                           void *arg, size_t *consumed);

/* Percent-encode src into dst (cap bytes). Returns the encoded length, or
 * -E2BIG. Exposed for tests and for hubctl's JSON-free output paths. */
int proto_encode(const char *src, size_t n, char *dst, size_t cap);

#endif
