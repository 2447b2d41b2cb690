#include "json.h"

#include "util.h"

#include <stdio.h>
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

/* is_json_number of the n bytes at s. */
static int is_json_number_n(const char *s, size_t n)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return is_json_number(buf);
}

/* Keys whose values are text even when they look like a number (a URL, a
 * digest that happens to be all digits). */
static int key_is_text(const char *key)
{
    static const char *const text[] = {"url",       "state",        "sha256", "path",
                                       "source",    "code",         "msg",    "cred",
                                       "info_hash", "info_hash_v1", "addr",   "listen"};
    for (size_t i = 0; i < ARRAY_LEN(text); i++)
        if (strcmp(key, text[i]) == 0)
            return 1;
    return 0;
}

static int key_in(const char *key, const char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, set[i]) == 0)
            return 1;
    return 0;
}

void json_counts(FILE *f, const char *by)
{
    int first = 1;
    putc('{', f);
    while (by && *by) {
        size_t len = strcspn(by, ",");
        const char *colon = memchr(by, ':', len);
        if (colon && colon > by && is_json_number_n(colon + 1, len - (size_t)(colon - by) - 1)) {
            fputs(first ? "" : ",", f);
            first = 0;
            char code[64];
            snprintf(code, sizeof code, "%.*s", (int)(colon - by), by);
            json_str(f, code);
            fprintf(f, ":%.*s", (int)(len - (size_t)(colon - by) - 1), colon + 1);
        }
        by += len + (by[len] == ',');
    }
    putc('}', f);
}

/* "1,2,3" as [1,2,3] (what is not a number is left out). */
static void json_numbers(FILE *f, const char *list)
{
    int first = 1;
    putc('[', f);
    while (list && *list) {
        size_t len = strcspn(list, ",");
        if (len && is_json_number_n(list, len)) {
            fprintf(f, "%s%.*s", first ? "" : ",", (int)len, list);
            first = 0;
        }
        list += len + (list[len] == ',');
    }
    putc(']', f);
}

void json_error(FILE *f, const char *code, const char *message)
{
    fputs("{\"code\":", f);
    json_str(f, code ? code : "error");
    fputs(",\"message\":", f);
    json_str(f, message ? message : "");
    putc('}', f);
}

void json_msg(FILE *f, const proto_msg_t *m)
{
    json_msg_or_null(f, m, NULL);
}

void json_msg_or_null(FILE *f, const proto_msg_t *m, const char *key)
{
    static const char *const flags[] = {"pinned", "removed_blob", "waited"};
    int first = 1;
    putc('{', f);
    for (size_t i = 0; i < m->nfields; i++) {
        const proto_field_t *fl = &m->fields[i];
        if (proto_get(m, fl->key) != fl->value || strcmp(fl->key, "id") == 0)
            continue; /* the protocol's own: not the user's business */
        if (!first)
            putc(',', f);
        first = 0;
        json_str(f, strcmp(fl->key, "msg") == 0 ? "message" : fl->key);
        putc(':', f);
        if (key_in(fl->key, flags, ARRAY_LEN(flags)))
            fputs(strcmp(fl->value, "0") != 0 && *fl->value ? "true" : "false", f);
        else if (strcmp(fl->key, "users") == 0)
            json_numbers(f, fl->value);
        else if (strcmp(fl->key, "errors_by_code") == 0)
            json_counts(f, fl->value);
        else if (!key_is_text(fl->key) && is_json_number(fl->value))
            fputs(fl->value, f);
        else
            json_str(f, fl->value);
    }
    if (key && !proto_get(m, key)) {
        fputs(first ? "" : ",", f);
        json_str(f, key);
        fputs(":null", f);
    }
    putc('}', f);
}
