#include "json.h"

#include "util.h"

#include <string.h>

/* Length of the valid UTF-8 sequence at p, or 0 if there is none. Relies on
 * the terminating NUL, which is never a continuation byte. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0; /* overlong */
    else if (c == 0xed)
        hi = 0x9f; /* surrogates */
    else if (c == 0xf0)
        lo = 0x90; /* overlong */
    else if (c == 0xf4)
        hi = 0x8f; /* beyond U+10FFFF */
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

void json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    putc('"', f);
    while (*p) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (n > 1) {
            fwrite(p, 1, n, f);
            p += n;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p++);
        } else if (*p == '\n') {
            fputs("\\n", f);
            p++;
        } else if (*p == '\t') {
            fputs("\\t", f);
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            putc(*p++, f);
        }
    }
    putc('"', f);
}

/* JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        s += strspn(s, "0123456789");
    else
        return 0;
    if (*s == '.') {
        size_t n = strspn(++s, "0123456789");
        if (n == 0)
            return 0;
        s += n;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        size_t n = strspn(s, "0123456789");
        if (n == 0)
            return 0;
        s += n;
    }
    return *s == '\0';
}

/* Keys whose values are text even when they look like a number (a URL, a
 * digest that happens to be all digits). */
static int key_is_text(const char *key)
{
    static const char *const text[] = {"url", "state", "sha256", "path", "source", "code", "msg"};
    for (size_t i = 0; i < ARRAY_LEN(text); i++)
        if (strcmp(key, text[i]) == 0)
            return 1;
    return 0;
}

void json_msg(FILE *f, const proto_msg_t *m)
{
    int first = 1;
    putc('{', f);
    for (size_t i = 0; i < m->nfields; i++) {
        const proto_field_t *fl = &m->fields[i];
        if (proto_get(m, fl->key) != fl->value)
            continue;
        if (!first)
            putc(',', f);
        first = 0;
        json_str(f, fl->key);
        putc(':', f);
        if (!key_is_text(fl->key) && is_json_number(fl->value))
            fputs(fl->value, f);
        else
            json_str(f, fl->value);
    }
    putc('}', f);
}
