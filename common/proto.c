/* proto: line framing and percent-encoding of the hubd wire protocol. */
#include "proto.h"
#include "textnum.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A byte that may stand in a value as it is. Everything else (space, '%',
 * control bytes, DEL, non-ASCII) is written as %XX so a line never holds a
 * separator or a terminal control sequence. */
static int is_plain(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '%';
}

static int is_verb_char(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static int is_key_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

int proto_encode(const char *src, size_t n, char *dst, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        if (is_plain(c)) {
            if (o + 1 > cap)
                return -E2BIG;
            dst[o++] = (char)c;
        } else {
            if (o + 3 > cap)
                return -E2BIG;
            dst[o++] = '%';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
    }
    return (int)o;
}

/* Decodes value bytes [p, end) into out; returns the decoded length or
 * -EINVAL for a bad escape or a NUL byte (which C strings cannot carry). */
static int decode(const char *p, const char *end, char *out)
{
    char *o = out;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '%') {
            if (end - p < 3)
                return -EINVAL;
            int hi = hex_value((unsigned char)p[1]), lo = hex_value((unsigned char)p[2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -EINVAL;
            *o++ = (char)(hi << 4 | lo);
            p += 3;
        } else {
            if (c == 0)
                return -EINVAL;
            *o++ = (char)c;
            p++;
        }
    }
    return (int)(o - out);
}

int proto_parse(const char *line, size_t len, proto_msg_t *msg)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len + 1 > sizeof msg->buf)
        return -E2BIG;
    msg->nfields = 0;
    msg->verb = NULL;

    const char *p = line, *end = line + len;
    char *o = msg->buf;

    /* Verb: one or more capitals. */
    const char *v = p;
    while (p < end && is_verb_char((unsigned char)*p))
        p++;
    if (p == v || (p < end && *p != ' '))
        return -EINVAL;
    memcpy(o, v, (size_t)(p - v));
    msg->verb = o;
    o += p - v;
    *o++ = '\0';

    while (p < end) {
        while (p < end && *p == ' ')
            p++;
        if (p == end)
            break;
        const char *k = p;
        while (p < end && is_key_char((unsigned char)*p))
            p++;
        if (p == k || p == end || *p != '=')
            return -EINVAL;
        if (msg->nfields == PROTO_MAX_FIELDS)
            return -E2BIG;
        proto_field_t *f = &msg->fields[msg->nfields++];
        memcpy(o, k, (size_t)(p - k));
        f->key = o;
        o += p - k;
        *o++ = '\0';
        p++; /* '=' */
        const char *vs = p;
        while (p < end && *p != ' ')
            p++;
        int n = decode(vs, p, o);
        if (n < 0)
            return n;
        f->value = o;
        o += n;
        *o++ = '\0';
    }
    return 0;
}

const char *proto_get(const proto_msg_t *msg, const char *key)
{
    for (size_t i = 0; i < msg->nfields; i++)
        if (strcmp(msg->fields[i].key, key) == 0)
            return msg->fields[i].value;
    return NULL;
}

void proto_begin(proto_writer_t *w, char *buf, size_t cap, const char *verb)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->err = 0;
    size_t n = strlen(verb);
    if (n + 2 > cap) { /* verb, '\n', NUL */
        w->err = -E2BIG;
        return;
    }
    memcpy(buf, verb, n);
    w->len = n;
}

void proto_add(proto_writer_t *w, const char *key, const char *value)
{
    if (w->err)
        return;
    size_t kn = strlen(key);
    /* ' ' key '=' value, then room for '\n' and NUL at the end. */
    if (w->len + kn + 2 + 2 > w->cap) {
        w->err = -E2BIG;
        return;
    }
    w->buf[w->len++] = ' ';
    memcpy(w->buf + w->len, key, kn);
    w->len += kn;
    w->buf[w->len++] = '=';
    int n = proto_encode(value, strlen(value), w->buf + w->len, w->cap - w->len - 2);
    if (n < 0) {
        w->err = n;
        return;
    }
    w->len += (size_t)n;
}

void proto_add_u64(proto_writer_t *w, const char *key, uint64_t value)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, value);
    proto_add(w, key, num);
}

void proto_add_i64(proto_writer_t *w, const char *key, int64_t value)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRId64, value);
    proto_add(w, key, num);
}

int proto_end(proto_writer_t *w)
{
    if (w->err)
        return w->err;
    if (w->len + 2 > w->cap || w->len + 1 > PROTO_MAX_LINE)
        return w->err = -E2BIG;
    w->buf[w->len++] = '\n';
    w->buf[w->len] = '\0';
    return (int)w->len;
}

void proto_reader_init(proto_reader_t *r)
{
    r->buf = NULL;
    r->cap = r->len = 0;
    r->discarding = 0;
}

void proto_reader_free(proto_reader_t *r)
{
    free(r->buf);
    proto_reader_init(r);
}

/* Room for want bytes of an unfinished line (want <= PROTO_MAX_LINE):
 * doubling from 256, so a line that trickles in costs a few reallocs. */
static int reader_room(proto_reader_t *r, size_t want)
{
    if (want <= r->cap)
        return 0;
    size_t cap = r->cap ? r->cap : 256;
    while (cap < want)
        cap *= 2;
    if (cap > PROTO_MAX_LINE)
        cap = PROTO_MAX_LINE;
    char *b = realloc(r->buf, cap);
    if (!b)
        return -ENOMEM;
    r->buf = b;
    r->cap = cap;
    return 0;
}

int proto_reader_feed_some(proto_reader_t *r, const char *data, size_t n, proto_line_cb cb,
                           void *arg, size_t *consumed)
{
    const char *start = data;
    int rc = 0;
    while (n > 0 && rc == 0) {
        const char *nl = memchr(data, '\n', n);
        size_t seg = nl ? (size_t)(nl - data) : n; /* bytes before the newline */
        size_t used = nl ? seg + 1 : n;
        if (r->discarding) {
            r->discarding = nl == NULL;
        } else if (r->len + seg + 1 > PROTO_MAX_LINE) {
            /* Overlong: report once, then drop bytes up to the newline. */
            proto_reader_free(r);
            r->discarding = nl == NULL;
            rc = cb(arg, NULL, 0, -E2BIG);
        } else if (nl && r->len == 0) {
            rc = cb(arg, data, seg, 0); /* whole line in the caller's buffer: no copy */
        } else if (reader_room(r, r->len + seg)) {
            /* No memory to keep the line: it is dropped, and said so. */
            proto_reader_free(r);
            r->discarding = nl == NULL;
            rc = cb(arg, NULL, 0, -ENOMEM);
        } else if (!nl) {
            memcpy(r->buf + r->len, data, seg);
            r->len += seg;
        } else {
            memcpy(r->buf + r->len, data, seg);
            size_t len = r->len + seg;
            char *line = r->buf;
            r->buf = NULL; /* the line is whole: its buffer goes after the callback */
            proto_reader_free(r);
            rc = cb(arg, line, len, 0);
            free(line);
        }
        data += used;
        n -= used;
    }
    if (consumed)
        *consumed = (size_t)(data - start);
    return rc;
}

int proto_reader_feed(proto_reader_t *r, const char *data, size_t n, proto_line_cb cb, void *arg)
{
    return proto_reader_feed_some(r, data, n, cb, arg, NULL);
}
