/* Unit tests for proto/proto.c: the line codec of the hubd wire protocol.
 *
 * docs/PROTOCOL.md is the reference for what must parse and what must be
 * refused; these tests hold the codec to it at the byte level: parsing,
 * percent-decoding, the writer's encoding and sticky errors, and the reader's
 * splitting of a byte stream at every possible boundary. */
#include "proto.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a NUL-terminated test line (the msg is big: keep one per test). */
static int parse_str(const char *line, proto_msg_t *msg)
{
    return proto_parse(line, strlen(line), msg);
}

/* ---- parsing ------------------------------------------------------------ */

START_TEST(proto_parse_verb_only)
{
    static proto_msg_t m;

    ck_assert_int_eq(parse_str("STATUS", &m), 0);
    ck_assert_str_eq(m.verb, "STATUS");
    ck_assert_uint_eq(m.nfields, 0);

    /* A trailing '\r' (a CRLF client) is not part of the verb. */
    ck_assert_int_eq(parse_str("STATS\r", &m), 0);
    ck_assert_str_eq(m.verb, "STATS");
    ck_assert_uint_eq(m.nfields, 0);

    /* Trailing spaces after the verb are only separators. */
    ck_assert_int_eq(parse_str("LIST   ", &m), 0);
    ck_assert_str_eq(m.verb, "LIST");
    ck_assert_uint_eq(m.nfields, 0);

    /* A one-letter verb is still a verb. */
    ck_assert_int_eq(parse_str("X", &m), 0);
    ck_assert_str_eq(m.verb, "X");
}
END_TEST

START_TEST(proto_parse_fields_in_order)
{
    static proto_msg_t m;

    ck_assert_int_eq(parse_str("FETCH id=7 url=http://h/x sha256=ab01 empty=", &m), 0);
    ck_assert_str_eq(m.verb, "FETCH");
    ck_assert_uint_eq(m.nfields, 4);
    ck_assert_str_eq(m.fields[0].key, "id");
    ck_assert_str_eq(m.fields[0].value, "7");
    ck_assert_str_eq(m.fields[1].key, "url");
    ck_assert_str_eq(m.fields[1].value, "http://h/x");
    ck_assert_str_eq(m.fields[2].key, "sha256");
    ck_assert_str_eq(m.fields[2].value, "ab01");
    ck_assert_str_eq(m.fields[3].key, "empty");
    ck_assert_str_eq(m.fields[3].value, "");

    /* Keys are [a-z0-9_]+, digits and underscores anywhere. */
    ck_assert_int_eq(parse_str("X bytes_from_origin=1 _=2 9a=3", &m), 0);
    ck_assert_uint_eq(m.nfields, 3);
    ck_assert_str_eq(m.fields[0].key, "bytes_from_origin");
    ck_assert_str_eq(m.fields[1].key, "_");
    ck_assert_str_eq(m.fields[2].key, "9a");
    ck_assert_str_eq(m.fields[2].value, "3");
}
END_TEST

START_TEST(proto_parse_multiple_spaces)
{
    static proto_msg_t m;

    ck_assert_int_eq(parse_str("HELLO    proto=1     client=hubctl   ", &m), 0);
    ck_assert_str_eq(m.verb, "HELLO");
    ck_assert_uint_eq(m.nfields, 2);
    ck_assert_str_eq(m.fields[0].key, "proto");
    ck_assert_str_eq(m.fields[0].value, "1");
    ck_assert_str_eq(m.fields[1].key, "client");
    ck_assert_str_eq(m.fields[1].value, "hubctl");
}
END_TEST

START_TEST(proto_parse_trailing_cr)
{
    static proto_msg_t m;

    /* The '\r' of a CRLF line must not end up in the last value. */
    ck_assert_int_eq(parse_str("HELLO proto=1\r", &m), 0);
    ck_assert_uint_eq(m.nfields, 1);
    ck_assert_str_eq(m.fields[0].value, "1");

    /* Only one trailing '\r' is the line ending; an encoded one is data. */
    ck_assert_int_eq(parse_str("X v=a%0D\r", &m), 0);
    ck_assert_str_eq(m.fields[0].value, "a\r");

    /* len is honoured: the bytes after it are not part of the line. */
    ck_assert_int_eq(proto_parse("X a=1 b=2", 5, &m), 0);
    ck_assert_uint_eq(m.nfields, 1);
    ck_assert_str_eq(m.fields[0].value, "1");
}
END_TEST

START_TEST(proto_parse_percent_decoding)
{
    static proto_msg_t m;

    ck_assert_int_eq(
        parse_str("X sp=a%20b pct=100%25 lo=%2f%7e up=%2F%7E mix=%c3%A9 raw=a%3db", &m), 0);
    ck_assert_uint_eq(m.nfields, 6);
    ck_assert_str_eq(proto_get(&m, "sp"), "a b");
    ck_assert_str_eq(proto_get(&m, "pct"), "100%");
    ck_assert_str_eq(proto_get(&m, "lo"), "/~");
    ck_assert_str_eq(proto_get(&m, "up"), "/~");
    ck_assert_str_eq(proto_get(&m, "mix"), "\xc3\xa9");
    ck_assert_str_eq(proto_get(&m, "raw"), "a=b");

    /* "%2520" is "%20" once decoded, not a space: decode exactly once. */
    ck_assert_int_eq(parse_str("X v=%2520", &m), 0);
    ck_assert_str_eq(proto_get(&m, "v"), "%20");

    /* A field splits at its first '='; later ones belong to the value. */
    ck_assert_int_eq(parse_str("X url=http://h/?a=1&b==2 k==", &m), 0);
    ck_assert_uint_eq(m.nfields, 2);
    ck_assert_str_eq(m.fields[0].key, "url");
    ck_assert_str_eq(m.fields[0].value, "http://h/?a=1&b==2");
    ck_assert_str_eq(m.fields[1].key, "k");
    ck_assert_str_eq(m.fields[1].value, "=");
}
END_TEST

START_TEST(proto_parse_rejects_malformed)
{
    static const char *const bad[] = {
        "",               /* empty line */
        "\r",             /* empty CRLF line */
        "hello",          /* lower-case verb */
        "Hello",          /* mixed-case verb */
        "HELLo",          /* lower-case letter after capitals */
        "HELLO1",         /* digit in verb */
        "STATUSid=1",     /* verb glued to a field */
        " HELLO",         /* leading space: no verb */
        "=1",             /* no verb at all */
        "HELLO\tp=1",     /* tab is not a separator */
        "HELLO Proto=1",  /* upper-case key */
        "HELLO pro-to=1", /* '-' in key */
        "HELLO pro.to=1", /* '.' in key */
        "HELLO =1",       /* empty key */
        "HELLO proto",    /* missing '=' at end of line */
        "HELLO proto 1",  /* missing '=' before a space */
        "HELLO a=1 b",    /* second field missing '=' */
        "X v=%G1",        /* bad hex digit, high nibble */
        "X v=%1G",        /* bad hex digit, low nibble */
        "X v=%2",         /* truncated escape at end of line */
        "X v=%",          /* bare '%' at end of line */
        "X v=%2 w=1",     /* truncated escape before a space */
        "X v=%00",        /* NUL cannot live in a C string */
        "X v=ab%00cd",    /* NUL in the middle */
        "X v=%+1",        /* sign is not a hex digit */
    };
    static proto_msg_t m;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_str(bad[i], &m);
        ck_assert_msg(rc == -EINVAL, "\"%s\": got %d, want -EINVAL", bad[i], rc);
    }

    /* Raw NUL bytes, which strlen() would hide: in the verb, key and value. */
    ck_assert_int_eq(proto_parse("HEL\0LO", 6, &m), -EINVAL);
    ck_assert_int_eq(proto_parse("X k\0y=1", 7, &m), -EINVAL);
    ck_assert_int_eq(proto_parse("X k=a\0b", 7, &m), -EINVAL);

    /* An escape cut by len: the hex digit after the line is not read. */
    ck_assert_int_eq(proto_parse("X v=%2F", 6, &m), -EINVAL);
    ck_assert_int_eq(proto_parse("X v=%2F", 5, &m), -EINVAL);
    ck_assert_int_eq(proto_parse("X v=%2F", 7, &m), 0);
}
END_TEST

/* Builds "X f0=0 f1=1 ..." with n fields into buf. */
static void many_fields(char *buf, size_t cap, int n)
{
    size_t len = (size_t)snprintf(buf, cap, "X");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, " f%d=%d", i, i);
}

START_TEST(proto_parse_field_limit)
{
    static proto_msg_t m;
    char line[1024];

    many_fields(line, sizeof line, PROTO_MAX_FIELDS);
    ck_assert_int_eq(parse_str(line, &m), 0);
    ck_assert_uint_eq(m.nfields, PROTO_MAX_FIELDS);
    ck_assert_str_eq(m.fields[PROTO_MAX_FIELDS - 1].key, "f31");
    ck_assert_str_eq(m.fields[PROTO_MAX_FIELDS - 1].value, "31");

    many_fields(line, sizeof line, PROTO_MAX_FIELDS + 1);
    ck_assert_int_eq(parse_str(line, &m), -E2BIG);

    /* Trailing spaces after the last allowed field are not a 33rd field. */
    many_fields(line, sizeof line, PROTO_MAX_FIELDS);
    strcat(line, "    ");
    ck_assert_int_eq(parse_str(line, &m), 0);
    ck_assert_uint_eq(m.nfields, PROTO_MAX_FIELDS);
}
END_TEST

START_TEST(proto_parse_line_limit)
{
    static proto_msg_t m;
    static char line[PROTO_MAX_LINE + 2];

    /* PROTO_MAX_LINE counts the '\n', so PROTO_MAX_LINE - 1 bytes of line
     * is the longest there is. "X v=" plus value. */
    memset(line, 'a', sizeof line);
    memcpy(line, "X v=", 4);
    ck_assert_int_eq(proto_parse(line, PROTO_MAX_LINE - 1, &m), 0);
    ck_assert_uint_eq(strlen(proto_get(&m, "v")), PROTO_MAX_LINE - 1 - 4);

    ck_assert_int_eq(proto_parse(line, PROTO_MAX_LINE, &m), -E2BIG);
    ck_assert_int_eq(proto_parse(line, PROTO_MAX_LINE + 1, &m), -E2BIG);
}
END_TEST

START_TEST(proto_get_first_wins)
{
    static proto_msg_t m;

    ck_assert_int_eq(parse_str("X a=1 ab=2 b=3 a=4", &m), 0);
    ck_assert_str_eq(proto_get(&m, "a"), "1");
    ck_assert_str_eq(proto_get(&m, "ab"), "2");
    ck_assert_str_eq(proto_get(&m, "b"), "3");
    ck_assert_ptr_null(proto_get(&m, "c"));
    ck_assert_ptr_null(proto_get(&m, "")); /* no empty key */
    ck_assert_ptr_null(proto_get(&m, "A"));
    ck_assert_ptr_null(proto_get(&m, "X")); /* the verb is not a key */

    ck_assert_int_eq(parse_str("STATUS", &m), 0);
    ck_assert_ptr_null(proto_get(&m, "id"));
}
END_TEST

/* ---- writer ------------------------------------------------------------- */

START_TEST(proto_writer_basic_line)
{
    char buf[256];
    proto_writer_t w;

    proto_begin(&w, buf, sizeof buf, "FETCH");
    proto_add(&w, "id", "7");
    proto_add(&w, "url", "http://h/a b?x=1&y=100%");
    proto_add(&w, "empty", "");
    int n = proto_end(&w);
    static const char want[] = "FETCH id=7 url=http://h/a%20b?x=1&y=100%25 empty=\n";
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(n, (int)strlen(want));
    ck_assert_int_eq(w.err, 0);

    /* A verb alone. */
    proto_begin(&w, buf, sizeof buf, "STATUS");
    ck_assert_int_eq(proto_end(&w), 7);
    ck_assert_str_eq(buf, "STATUS\n");
}
END_TEST

START_TEST(proto_encode_escapes)
{
    char out[64];

    /* Space, '%', control, DEL and non-ASCII are escaped, '=' is not. */
    int n = proto_encode("a b%=\x01\x7f\xff~", 9, out, sizeof out);
    ck_assert_int_eq(n, 1 + 3 + 1 + 3 + 1 + 3 + 3 + 3 + 1);
    /* Upper or lower hex are both valid on the wire: compare decoded. */
    out[n] = '\0';
    char line[80];
    static proto_msg_t m;
    snprintf(line, sizeof line, "X v=%s", out);
    ck_assert_int_eq(parse_str(line, &m), 0);
    ck_assert_mem_eq(proto_get(&m, "v"), "a b%=\x01\x7f\xff~", 10);
    ck_assert_ptr_null(memchr(out, ' ', (size_t)n));

    /* Exact fit and one byte short. */
    ck_assert_int_eq(proto_encode("a b", 3, out, 5), 5);
    ck_assert_int_eq(proto_encode("a b", 3, out, 4), -E2BIG);
    ck_assert_int_eq(proto_encode("abc", 3, out, 3), 3);
    ck_assert_int_eq(proto_encode("abc", 3, out, 2), -E2BIG);
    ck_assert_int_eq(proto_encode("", 0, out, 0), 0);
}
END_TEST

/* Every byte value a C string can hold, in values built with proto_add,
 * comes back unchanged from proto_parse, and nothing on the line is a raw
 * space or control byte. */
START_TEST(proto_writer_round_trip_all_bytes)
{
    static char buf[PROTO_MAX_LINE];
    static proto_msg_t m;
    char all[256], one[4];
    proto_writer_t w;

    for (int i = 0; i < 255; i++)
        all[i] = (char)(i + 1);
    all[255] = '\0';

    proto_begin(&w, buf, sizeof buf, "ENTRY");
    proto_add(&w, "all", all);
    proto_add(&w, "tail", "end");
    int n = proto_end(&w);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(buf[n - 1], '\n');
    ck_assert_uint_eq(strlen(buf), (size_t)n);
    for (int i = 0; i < n - 1; i++) {
        unsigned char c = (unsigned char)buf[i];
        ck_assert_msg((c > 0x20 && c < 0x7f) || c == ' ',
                      "raw byte 0x%02x at %d of the encoded line", c, i);
    }
    /* Exactly two separators: before "all=" and before "tail=". */
    int spaces = 0;
    for (int i = 0; i < n; i++)
        spaces += buf[i] == ' ';
    ck_assert_int_eq(spaces, 2);

    ck_assert_int_eq(proto_parse(buf, (size_t)n - 1, &m), 0);
    ck_assert_str_eq(m.verb, "ENTRY");
    ck_assert_uint_eq(m.nfields, 2);
    ck_assert_uint_eq(strlen(proto_get(&m, "all")), 255);
    ck_assert_mem_eq(proto_get(&m, "all"), all, 256);
    ck_assert_str_eq(proto_get(&m, "tail"), "end");

    /* Each byte on its own, between two letters, and alone. */
    for (int b = 1; b < 256; b++) {
        one[0] = 'a';
        one[1] = (char)b;
        one[2] = 'z';
        one[3] = '\0';
        proto_begin(&w, buf, sizeof buf, "X");
        proto_add(&w, "v", one);
        proto_add(&w, "s", one + 1);
        n = proto_end(&w);
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(proto_parse(buf, (size_t)n - 1, &m), 0);
        ck_assert_msg(strcmp(proto_get(&m, "v"), one) == 0, "byte 0x%02x did not round-trip", b);
        ck_assert_msg(strcmp(proto_get(&m, "s"), one + 1) == 0, "byte 0x%02x did not round-trip",
                      b);
    }

    /* And through a trailing '\r': a value ending in CR keeps it. */
    proto_begin(&w, buf, sizeof buf, "X");
    proto_add(&w, "v", "cr\r");
    n = proto_end(&w);
    ck_assert_int_eq(proto_parse(buf, (size_t)n - 1, &m), 0);
    ck_assert_str_eq(proto_get(&m, "v"), "cr\r");
}
END_TEST

START_TEST(proto_writer_integers)
{
    static proto_msg_t m;
    char buf[512];
    proto_writer_t w;

    proto_begin(&w, buf, sizeof buf, "STATS");
    proto_add_u64(&w, "zero", 0);
    proto_add_u64(&w, "max", UINT64_MAX);
    proto_add_i64(&w, "neg", -1);
    proto_add_i64(&w, "min", INT64_MIN);
    proto_add_i64(&w, "imax", INT64_MAX);
    proto_add_u64(&w, "size", 16384);
    int n = proto_end(&w);
    ck_assert_str_eq(buf, "STATS zero=0 max=18446744073709551615 neg=-1 min=-9223372036854775808"
                          " imax=9223372036854775807 size=16384\n");
    ck_assert_int_eq(n, (int)strlen(buf));

    ck_assert_int_eq(proto_parse(buf, (size_t)n - 1, &m), 0);
    ck_assert_uint_eq(strtoull(proto_get(&m, "max"), NULL, 10), UINT64_MAX);
    ck_assert_int_eq(strtoll(proto_get(&m, "min"), NULL, 10), INT64_MIN);
}
END_TEST

/* Errors are sticky: once a value does not fit, later adds are ignored
 * (even ones that would fit) and proto_end reports -E2BIG. */
START_TEST(proto_writer_sticky_e2big)
{
    char buf[16];
    proto_writer_t w;

    proto_begin(&w, buf, sizeof buf, "VERB");
    proto_add(&w, "k", "short"); /* "VERB k=short" + '\n' + NUL = 14 */
    ck_assert_int_eq(w.err, 0);
    proto_add(&w, "x", "toolong");
    ck_assert_int_eq(w.err, -E2BIG);
    size_t len = w.len;
    proto_add(&w, "y", "");
    ck_assert_uint_eq(w.len, len);
    ck_assert_int_eq(proto_end(&w), -E2BIG);

    /* The key fits but the value does not: a later add that would fit
     * changes nothing either. */
    char b3[32];
    proto_begin(&w, b3, sizeof b3, "VERB");
    proto_add(&w, "k", "short");
    proto_add(&w, "x", "a value far too long to fit");
    ck_assert_int_eq(w.err, -E2BIG);
    len = w.len;
    proto_add(&w, "y", "1");
    proto_add_u64(&w, "z", 1);
    proto_add_i64(&w, "z", -1);
    ck_assert_uint_eq(w.len, len);
    ck_assert_int_eq(w.err, -E2BIG);
    ck_assert_int_eq(proto_end(&w), -E2BIG);
    ck_assert_int_eq(proto_end(&w), -E2BIG);

    /* The value's encoded size is what counts: " " needs 3 bytes. */
    char b2[10];
    proto_begin(&w, b2, sizeof b2, "V");
    proto_add(&w, "k", "abc"); /* "V k=abc\n" + NUL = 9 */
    ck_assert_int_eq(proto_end(&w), 8);
    ck_assert_str_eq(b2, "V k=abc\n");
    proto_begin(&w, b2, 9, "V");
    proto_add(&w, "k", "abc"); /* exact fit */
    ck_assert_int_eq(proto_end(&w), 8);
    proto_begin(&w, b2, 8, "V");
    proto_add(&w, "k", "abc"); /* one byte short (no room for NUL) */
    ck_assert_int_eq(proto_end(&w), -E2BIG);
    proto_begin(&w, b2, sizeof b2, "V");
    proto_add(&w, "k", "a b"); /* "V k=a%20b\n" + NUL = 12 */
    ck_assert_int_eq(proto_end(&w), -E2BIG);

    /* A verb that does not fit. */
    proto_begin(&w, b2, 5, "HELLO");
    ck_assert_int_eq(w.err, -E2BIG);
    proto_add(&w, "a", "b");
    ck_assert_int_eq(proto_end(&w), -E2BIG);
    proto_begin(&w, b2, 7, "HELLO"); /* "HELLO\n" + NUL */
    ck_assert_int_eq(proto_end(&w), 6);
    ck_assert_str_eq(b2, "HELLO\n");
}
END_TEST

/* A buffer bigger than a line does not let the writer exceed the protocol's
 * PROTO_MAX_LINE (newline included). */
START_TEST(proto_writer_line_limit)
{
    static char buf[2 * PROTO_MAX_LINE], val[PROTO_MAX_LINE];
    static proto_msg_t m;
    proto_writer_t w;

    /* "X v=" + value + '\n' = PROTO_MAX_LINE exactly. */
    memset(val, 'a', PROTO_MAX_LINE - 5);
    val[PROTO_MAX_LINE - 5] = '\0';
    proto_begin(&w, buf, sizeof buf, "X");
    proto_add(&w, "v", val);
    ck_assert_int_eq(proto_end(&w), PROTO_MAX_LINE);
    ck_assert_int_eq(proto_parse(buf, PROTO_MAX_LINE - 1, &m), 0);

    memset(val, 'a', PROTO_MAX_LINE - 4);
    val[PROTO_MAX_LINE - 4] = '\0';
    proto_begin(&w, buf, sizeof buf, "X");
    proto_add(&w, "v", val);
    ck_assert_int_eq(proto_end(&w), -E2BIG);
}
END_TEST

/* ---- reader ------------------------------------------------------------- */

#define MAX_SEEN 64

/* What the reader handed to the callback, in order. */
typedef struct seen {
    int nlines;            /* complete lines delivered */
    int nerr;              /* -E2BIG reports */
    int order[MAX_SEEN];   /* 1 line, 2 error: interleaving */
    int ncalls;            /* callback calls */
    size_t lens[MAX_SEEN]; /* length of each line */
    char *lines[MAX_SEEN]; /* copies, NUL-terminated */
    int stop_at;           /* return stop_rc on this call (1-based); 0 never */
    int stop_rc;           /* what to return then */
} seen_t;

static int on_line(void *arg, const char *line, size_t len, int err)
{
    seen_t *s = arg;

    ck_assert_int_lt(s->ncalls, MAX_SEEN);
    if (line == NULL) {
        ck_assert_int_eq(err, -E2BIG);
        ck_assert_uint_eq(len, 0);
        s->nerr++;
        s->order[s->ncalls] = 2;
    } else {
        ck_assert_int_eq(err, 0);
        ck_assert_ptr_null(memchr(line, '\n', len));
        s->lines[s->nlines] = malloc(len + 1);
        memcpy(s->lines[s->nlines], line, len);
        s->lines[s->nlines][len] = '\0';
        s->lens[s->nlines] = len;
        s->nlines++;
        s->order[s->ncalls] = 1;
    }
    s->ncalls++;
    if (s->stop_at && s->ncalls == s->stop_at)
        return s->stop_rc;
    return 0;
}

static void seen_free(seen_t *s)
{
    for (int i = 0; i < s->nlines; i++)
        free(s->lines[i]);
    memset(s, 0, sizeof *s);
}

static const char stream3[] = "HELLO proto=1\nFETCH id=a url=http://h/x%20y\r\nSTATS\n";

static void check_stream3(const seen_t *s, const char *how)
{
    ck_assert_msg(s->nlines == 3 && s->nerr == 0, "%s: %d lines, %d errors", how, s->nlines,
                  s->nerr);
    ck_assert_str_eq(s->lines[0], "HELLO proto=1");
    ck_assert_str_eq(s->lines[1], "FETCH id=a url=http://h/x%20y\r"); /* '\r' is proto_parse's */
    ck_assert_str_eq(s->lines[2], "STATS");
}

START_TEST(proto_reader_several_lines_one_feed)
{
    proto_reader_t r = {0};
    seen_t s = {0};

    proto_reader_free(&r); /* frees a line left by the last round */
    ck_assert_int_eq(proto_reader_feed(&r, stream3, strlen(stream3), on_line, &s), 0);
    check_stream3(&s, "one feed");
    seen_free(&s);

    /* An unfinished line is held, not delivered. */
    ck_assert_int_eq(proto_reader_feed(&r, "STA", 3, on_line, &s), 0);
    ck_assert_int_eq(s.ncalls, 0);
    ck_assert_int_eq(proto_reader_feed(&r, "TUS\nLI", 6, on_line, &s), 0);
    ck_assert_int_eq(s.nlines, 1);
    ck_assert_str_eq(s.lines[0], "STATUS");
    ck_assert_int_eq(proto_reader_feed(&r, "", 0, on_line, &s), 0);
    ck_assert_int_eq(proto_reader_feed(&r, "ST\n", 3, on_line, &s), 0);
    ck_assert_int_eq(s.nlines, 2);
    ck_assert_str_eq(s.lines[1], "LIST");
    seen_free(&s);
    proto_reader_free(&r);
}
END_TEST

/* The same stream cut into two and into three pieces at every possible
 * place, and fed one byte at a time, gives the same three lines. */
START_TEST(proto_reader_every_split_point)
{
    const size_t n = strlen(stream3);
    proto_reader_t r = {0};
    seen_t s = {0};
    char how[64];

    for (size_t i = 0; i <= n; i++) {
        proto_reader_free(&r); /* frees a line left by the last round */
        ck_assert_int_eq(proto_reader_feed(&r, stream3, i, on_line, &s), 0);
        ck_assert_int_eq(proto_reader_feed(&r, stream3 + i, n - i, on_line, &s), 0);
        snprintf(how, sizeof how, "split at %zu", i);
        check_stream3(&s, how);
        seen_free(&s);
    }
    for (size_t i = 0; i <= n; i++) {
        for (size_t j = i; j <= n; j++) {
            proto_reader_free(&r); /* frees a line left by the last round */
            ck_assert_int_eq(proto_reader_feed(&r, stream3, i, on_line, &s), 0);
            ck_assert_int_eq(proto_reader_feed(&r, stream3 + i, j - i, on_line, &s), 0);
            ck_assert_int_eq(proto_reader_feed(&r, stream3 + j, n - j, on_line, &s), 0);
            snprintf(how, sizeof how, "split at %zu and %zu", i, j);
            check_stream3(&s, how);
            seen_free(&s);
        }
    }
    proto_reader_free(&r); /* frees a line left by the last round */
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(proto_reader_feed(&r, stream3 + i, 1, on_line, &s), 0);
    check_stream3(&s, "byte by byte");
    seen_free(&s);
    proto_reader_free(&r);
}
END_TEST

/* Builds `len` bytes of line ("X v=aaaa...") then '\n', then "NEXT\n". */
static size_t long_line_then_next(char *buf, size_t len)
{
    memset(buf, 'a', len);
    memcpy(buf, "X v=", 4);
    buf[len] = '\n';
    memcpy(buf + len + 1, "NEXT\n", 5);
    return len + 6;
}

START_TEST(proto_reader_line_limit)
{
    static char buf[PROTO_MAX_LINE + 16];
    /* Split points around the buffer's edges, and a few in between. */
    const size_t cuts[] = {0,
                           1,
                           4,
                           1000,
                           PROTO_MAX_LINE - 2,
                           PROTO_MAX_LINE - 1,
                           PROTO_MAX_LINE,
                           PROTO_MAX_LINE + 1,
                           PROTO_MAX_LINE + 2};
    proto_reader_t r = {0};
    seen_t s = {0};

    /* PROTO_MAX_LINE - 1 bytes + '\n': the longest line, accepted. */
    size_t n = long_line_then_next(buf, PROTO_MAX_LINE - 1);
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        size_t cut = cuts[c] < n ? cuts[c] : n;
        proto_reader_free(&r); /* frees a line left by the last round */
        ck_assert_int_eq(proto_reader_feed(&r, buf, cut, on_line, &s), 0);
        ck_assert_int_eq(proto_reader_feed(&r, buf + cut, n - cut, on_line, &s), 0);
        ck_assert_msg(s.nlines == 2 && s.nerr == 0, "max line cut at %zu: %d lines %d errors", cut,
                      s.nlines, s.nerr);
        ck_assert_uint_eq(s.lens[0], PROTO_MAX_LINE - 1);
        ck_assert_mem_eq(s.lines[0], buf, PROTO_MAX_LINE - 1);
        ck_assert_str_eq(s.lines[1], "NEXT");
        seen_free(&s);
    }

    /* PROTO_MAX_LINE bytes + '\n': one too many. Reported once, dropped
     * whole (no tail of it shows up as a line), and the next line arrives. */
    n = long_line_then_next(buf, PROTO_MAX_LINE);
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        size_t cut = cuts[c] < n ? cuts[c] : n;
        proto_reader_free(&r); /* frees a line left by the last round */
        ck_assert_int_eq(proto_reader_feed(&r, buf, cut, on_line, &s), 0);
        ck_assert_int_eq(proto_reader_feed(&r, buf + cut, n - cut, on_line, &s), 0);
        ck_assert_msg(s.nerr == 1 && s.nlines == 1, "long line cut at %zu: %d lines %d errors", cut,
                      s.nlines, s.nerr);
        ck_assert_int_eq(s.order[0], 2);
        ck_assert_str_eq(s.lines[0], "NEXT");
        seen_free(&s);
    }
    proto_reader_free(&r);
}
END_TEST

/* An overlong line dribbling in over many feeds is reported exactly once,
 * and the reader is back in step after its newline. */
START_TEST(proto_reader_overlong_many_feeds)
{
    static char chunk[1000];
    proto_reader_t r = {0};
    seen_t s = {0};

    memset(chunk, 'b', sizeof chunk);
    proto_reader_free(&r); /* frees a line left by the last round */
    ck_assert_int_eq(proto_reader_feed(&r, "OK\nX v=", 7, on_line, &s), 0);
    for (int i = 0; i < 100; i++) /* ~100 KB, six times the limit */
        ck_assert_int_eq(proto_reader_feed(&r, chunk, sizeof chunk, on_line, &s), 0);
    ck_assert_int_eq(s.nerr, 1);
    ck_assert_int_eq(s.nlines, 1);
    ck_assert_int_eq(proto_reader_feed(&r, "bbb\nAFTER", 9, on_line, &s), 0);
    ck_assert_int_eq(proto_reader_feed(&r, " x=1\n", 5, on_line, &s), 0);
    ck_assert_int_eq(s.nerr, 1);
    ck_assert_int_eq(s.nlines, 2);
    ck_assert_str_eq(s.lines[0], "OK");
    ck_assert_str_eq(s.lines[1], "AFTER x=1");
    ck_assert_int_eq(s.order[0], 1);
    ck_assert_int_eq(s.order[1], 2);
    ck_assert_int_eq(s.order[2], 1);
    seen_free(&s);

    /* Byte by byte: still one report, and a second overlong line after it
     * gets its own. */
    proto_reader_free(&r); /* frees a line left by the last round */
    for (int line = 0; line < 2; line++) {
        for (int i = 0; i < PROTO_MAX_LINE + 10; i++)
            ck_assert_int_eq(proto_reader_feed(&r, "c", 1, on_line, &s), 0);
        ck_assert_int_eq(proto_reader_feed(&r, "\n", 1, on_line, &s), 0);
    }
    ck_assert_int_eq(proto_reader_feed(&r, "END\n", 4, on_line, &s), 0);
    ck_assert_int_eq(s.nerr, 2);
    ck_assert_int_eq(s.nlines, 1);
    ck_assert_str_eq(s.lines[0], "END");
    seen_free(&s);
    proto_reader_free(&r);
}
END_TEST

/* The reader holds memory only while a line is split between feeds: none
 * after whole lines, none once a split line is whole, and a long split line
 * is kept whole up to the limit. */
START_TEST(proto_reader_holds_memory_only_for_a_split_line)
{
    static char big[PROTO_MAX_LINE];
    proto_reader_t r = {0};
    seen_t s = {0};

    ck_assert_int_eq(proto_reader_feed(&r, "A\nB\n", 4, on_line, &s), 0);
    ck_assert_ptr_null(r.buf);
    ck_assert_int_eq(proto_reader_feed(&r, "HEL", 3, on_line, &s), 0);
    ck_assert_ptr_nonnull(r.buf);
    ck_assert_int_eq(proto_reader_feed(&r, "LO\n", 3, on_line, &s), 0);
    ck_assert_ptr_null(r.buf);
    ck_assert_int_eq(s.nlines, 3);
    ck_assert_str_eq(s.lines[2], "HELLO");
    seen_free(&s);

    /* The longest line there may be, a byte at a time at first, then in
     * pieces: it grows its buffer and arrives whole. */
    memset(big, 'q', sizeof big);
    big[PROTO_MAX_LINE - 1] = '\n';
    size_t off = 0;
    for (; off < 300; off++)
        ck_assert_int_eq(proto_reader_feed(&r, big + off, 1, on_line, &s), 0);
    for (; off < sizeof big; off += 1000) {
        size_t n = sizeof big - off < 1000 ? sizeof big - off : 1000;
        ck_assert_int_eq(proto_reader_feed(&r, big + off, n, on_line, &s), 0);
    }
    ck_assert_int_eq(s.nlines, 1);
    ck_assert_int_eq(s.nerr, 0);
    ck_assert_uint_eq(strlen(s.lines[0]), PROTO_MAX_LINE - 1);
    ck_assert_ptr_null(r.buf);
    seen_free(&s);
    proto_reader_free(&r);
}
END_TEST

/* A non-zero return from the callback stops the feed at once and is
 * passed back: the caller is closing the session. */
START_TEST(proto_reader_callback_stops_feed)
{
    static char big[PROTO_MAX_LINE + 32];
    proto_reader_t r = {0};
    seen_t s = {0};

    s.stop_at = 2;
    s.stop_rc = 7;
    proto_reader_free(&r); /* frees a line left by the last round */
    ck_assert_int_eq(proto_reader_feed(&r, "A\nB\nC\nD\n", 8, on_line, &s), 7);
    ck_assert_int_eq(s.ncalls, 2);
    ck_assert_str_eq(s.lines[0], "A");
    ck_assert_str_eq(s.lines[1], "B");
    seen_free(&s);

    /* Same through the buffered path (the line started in an earlier feed). */
    s.stop_at = 1;
    s.stop_rc = -1;
    proto_reader_free(&r); /* frees a line left by the last round */
    ck_assert_int_eq(proto_reader_feed(&r, "LON", 3, on_line, &s), 0);
    ck_assert_int_eq(proto_reader_feed(&r, "G\nC\n", 4, on_line, &s), -1);
    ck_assert_int_eq(s.ncalls, 1);
    ck_assert_str_eq(s.lines[0], "LONG");
    seen_free(&s);

    /* And from the overlong report. */
    memset(big, 'z', sizeof big);
    big[PROTO_MAX_LINE + 5] = '\n';
    memcpy(big + PROTO_MAX_LINE + 6, "AFTER\n", 6);
    s.stop_at = 1;
    s.stop_rc = 3;
    proto_reader_free(&r); /* frees a line left by the last round */
    ck_assert_int_eq(proto_reader_feed(&r, big, PROTO_MAX_LINE + 12, on_line, &s), 3);
    ck_assert_int_eq(s.ncalls, 1);
    ck_assert_int_eq(s.nerr, 1);
    ck_assert_int_eq(s.nlines, 0);
    seen_free(&s);
    proto_reader_free(&r);
}
END_TEST

static Suite *proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *parse = tcase_create("parse");
    TCase *writer = tcase_create("writer");
    TCase *reader = tcase_create("reader");

    tcase_add_test(parse, proto_parse_verb_only);
    tcase_add_test(parse, proto_parse_fields_in_order);
    tcase_add_test(parse, proto_parse_multiple_spaces);
    tcase_add_test(parse, proto_parse_trailing_cr);
    tcase_add_test(parse, proto_parse_percent_decoding);
    tcase_add_test(parse, proto_parse_rejects_malformed);
    tcase_add_test(parse, proto_parse_field_limit);
    tcase_add_test(parse, proto_parse_line_limit);
    tcase_add_test(parse, proto_get_first_wins);
    suite_add_tcase(s, parse);

    tcase_add_test(writer, proto_writer_basic_line);
    tcase_add_test(writer, proto_encode_escapes);
    tcase_add_test(writer, proto_writer_round_trip_all_bytes);
    tcase_add_test(writer, proto_writer_integers);
    tcase_add_test(writer, proto_writer_sticky_e2big);
    tcase_add_test(writer, proto_writer_line_limit);
    suite_add_tcase(s, writer);

    tcase_add_test(reader, proto_reader_several_lines_one_feed);
    tcase_add_test(reader, proto_reader_every_split_point);
    tcase_add_test(reader, proto_reader_line_limit);
    tcase_add_test(reader, proto_reader_overlong_many_feeds);
    tcase_add_test(reader, proto_reader_callback_stops_feed);
    tcase_add_test(reader, proto_reader_holds_memory_only_for_a_split_line);
    /* Byte-at-a-time feeds of 16 KiB lines are slow under the sanitizers. */
    tcase_set_timeout(reader, 60);
    suite_add_tcase(s, reader);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(proto_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
