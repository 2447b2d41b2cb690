/* fuzz_proto: the wire protocol codec (common/proto.c).
 *
 * 1. proto_parse on the input as one line; a line that parses is written
 *    back with proto_begin/proto_add/proto_end and must parse to the same
 *    verb, keys and values.
 * 2. Writer round trip on fields derived from the input (split at NUL bytes:
 *    a verb, then key, value, key, value...): parse(write(x)) == x.
 * 3. proto_reader_feed on the input as a stream, cut into reads of random
 *    sizes, against a reference split of the whole stream: the same lines in
 *    the same order, overlong lines reported once each. Each 0xFF byte of
 *    the input (the first 8) stands for 4096 'x' bytes, so small inputs reach
 *    the line limit. Every line delivered also goes through step 1.
 */
#include "proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static proto_msg_t msg_a, msg_b; /* large: not on the stack */
static char line_buf[PROTO_MAX_LINE + 64];

static int same_msg(const proto_msg_t *a, const proto_msg_t *b)
{
    if (strcmp(a->verb, b->verb) != 0 || a->nfields != b->nfields)
        return 0;
    for (size_t i = 0; i < a->nfields; i++)
        if (strcmp(a->fields[i].key, b->fields[i].key) != 0 ||
            strcmp(a->fields[i].value, b->fields[i].value) != 0)
            return 0;
    return 1;
}

/* Writes msg as a line; if it fits, it must parse back to msg. */
static void check_rewrite(const proto_msg_t *m)
{
    proto_writer_t w;
    proto_begin(&w, line_buf, sizeof line_buf, m->verb);
    for (size_t i = 0; i < m->nfields; i++)
        proto_add(&w, m->fields[i].key, m->fields[i].value);
    int n = proto_end(&w);
    if (n < 0) {
        CHECK(n == -E2BIG);
        return;
    }
    CHECK((size_t)n <= PROTO_MAX_LINE && line_buf[n - 1] == '\n' && line_buf[n] == '\0');
    CHECK(memchr(line_buf, '\n', (size_t)n - 1) == NULL);
    CHECK(proto_parse(line_buf, (size_t)n - 1, &msg_b) == 0);
    CHECK(same_msg(m, &msg_b));
}

static void check_line(const char *p, size_t n)
{
    int rc = proto_parse(p, n, &msg_a);
    if (rc) {
        CHECK(rc == -EINVAL || rc == -E2BIG);
        return;
    }
    CHECK(msg_a.verb && msg_a.verb[0] && msg_a.nfields <= PROTO_MAX_FIELDS);
    for (const char *v = msg_a.verb; *v; v++)
        CHECK(*v >= 'A' && *v <= 'Z');
    for (size_t i = 0; i < msg_a.nfields; i++) {
        CHECK(msg_a.fields[i].key[0]);
        CHECK(proto_get(&msg_a, msg_a.fields[i].key) != NULL);
    }
    check_rewrite(&msg_a);
}

/* Step 2: a message built from the input's NUL-separated pieces. */
static void check_writer(const uint8_t *data, size_t len)
{
    static char store[PROTO_MAX_LINE * 2];
    static proto_msg_t m;
    const uint8_t *p = data, *end = data + len;
    size_t o = 0, piece = 0;
    m.nfields = 0;
    for (;;) {
        const uint8_t *e = memchr(p, 0, (size_t)(end - p));
        if (!e)
            e = end;
        size_t n = (size_t)(e - p);
        if (m.nfields == PROTO_MAX_FIELDS || o + n + 2 > sizeof store)
            break;
        char *s = store + o;
        if (piece == 0 || piece % 2 == 1) { /* verb or key: mapped onto their alphabets */
            static const char keych[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
            size_t k = n ? n : 1; /* never empty */
            for (size_t i = 0; i < k; i++) {
                unsigned c = i < n ? p[i] : 0;
                s[i] = piece == 0 ? (char)('A' + c % 26) : keych[c % (sizeof keych - 1)];
            }
            n = k;
        } else { /* value: the raw bytes (no NUL, by the split) */
            memcpy(s, p, n);
        }
        s[n] = '\0';
        o += n + 1;
        if (piece == 0)
            m.verb = s;
        else if (piece % 2 == 1)
            m.fields[m.nfields].key = s;
        else
            m.fields[m.nfields++].value = s;
        piece++;
        if (e == end)
            break;
        p = e + 1;
    }
    if (piece == 0)
        return;
    if (piece % 2 == 0) /* the last piece was a key: give it the value "" */
        m.fields[m.nfields++].value = "";
    check_rewrite(&m);
}

/* Step 3. */
typedef struct {
    const char *stream;
    size_t len;
    size_t pos; /* where the next expected line starts */
    int discarding;
    size_t lines, overlong;
} expect_t;

/* The reference: the next event of a whole-stream split, from e->pos. */
static int next_event(expect_t *e, const char **line, size_t *n)
{
    while (e->pos < e->len) {
        const char *s = e->stream + e->pos;
        const char *nl = memchr(s, '\n', e->len - e->pos);
        if (!nl) /* unfinished: reported only when already too long */
            return 0;
        size_t l = (size_t)(nl - s);
        e->pos += l + 1;
        *line = s;
        *n = l;
        return l + 1 > PROTO_MAX_LINE ? -E2BIG : 1;
    }
    return 0;
}

static int on_line(void *arg, const char *line, size_t len, int err)
{
    expect_t *e = arg;
    if (err) {
        CHECK(err == -E2BIG && line == NULL);
        e->overlong++;
        /* The overlong line is either the next complete one or the
         * unfinished tail, reported once it passes the limit. */
        size_t save = e->pos;
        const char *l;
        size_t n;
        int ev = next_event(e, &l, &n);
        if (ev == 0) {
            e->pos = save;
            CHECK(!e->discarding);
            CHECK(e->len - e->pos + 1 > PROTO_MAX_LINE);
            e->discarding = 1;
        } else {
            CHECK(ev == -E2BIG);
        }
        return 0;
    }
    const char *l;
    size_t n;
    CHECK(!e->discarding);
    CHECK(next_event(e, &l, &n) == 1);
    CHECK(n == len && memcmp(l, line, n) == 0);
    e->lines++;
    check_line(line, len);
    return 0;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void check_reader(const uint8_t *data, size_t len)
{
    static char stream[64 * 1024 + 8 * 4096];
    static proto_reader_t r;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t sl = 0;
    int expand = 8;
    for (size_t i = 0; i < len && sl + 4096 < sizeof stream; i++) {
        seed = (seed ^ data[i]) * 0x100000001b3ull;
        if (data[i] == 0xff && expand > 0) {
            expand--;
            memset(stream + sl, 'x', 4096);
            sl += 4096;
        } else {
            stream[sl++] = (char)data[i];
        }
    }
    expect_t e = {.stream = stream, .len = sl};
    proto_reader_init(&r);
    size_t off = 0;
    seed |= 1;
    while (off < sl) {
        uint64_t x = rng_next(&seed);
        size_t n = 1 + (size_t)(x >> 8) % ((x & 3) == 0 ? 20000 : (x & 3) == 1 ? 64 : 8);
        if (n > sl - off)
            n = sl - off;
        CHECK(proto_reader_feed(&r, stream + off, n, on_line, &e) == 0);
        off += n;
    }
    /* Every complete line was seen; what is left is the unfinished tail. */
    const char *l;
    size_t n;
    CHECK(e.discarding || next_event(&e, &l, &n) == 0);
    if (!e.discarding) {
        size_t tail = sl - e.pos;
        CHECK(r.len == tail && !r.discarding &&
              (tail == 0 ? r.buf == NULL : memcmp(r.buf, stream + e.pos, tail) == 0));
    } else {
        CHECK(r.discarding && r.buf == NULL); /* an overlong line keeps nothing */
    }
    proto_reader_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    check_line((const char *)data, len);
    check_writer(data, len);
    check_reader(data, len);
    return 0;
}
