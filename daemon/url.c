/* url: parsing, canonical form, and reference resolution for redirects. */
#include "url.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes a URL may carry as they are; everything else (space, controls,
 * non-ASCII, quotes) must arrive percent-encoded. Refusing them here keeps
 * request lines and log lines free of injected bytes. */
static int url_char_ok(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '"' && c != '<' && c != '>' && c != '\\' && c != '^' &&
           c != '`' && c != '{' && c != '|' && c != '}';
}

static int host_char_ok(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_';
}

static int scheme_port(const char *scheme)
{
    return strcmp(scheme, "https") == 0 ? 443 : 80;
}

int url_hostport(const url_t *u, char *buf, size_t cap)
{
    int n;
    const char *l = u->ipv6 ? "[" : "", *r = u->ipv6 ? "]" : "";
    if (u->port == scheme_port(u->scheme))
        n = snprintf(buf, cap, "%s%s%s", l, u->host, r);
    else
        n = snprintf(buf, cap, "%s%s%s:%u", l, u->host, r, u->port);
    return n < 0 || (size_t)n >= cap ? -E2BIG : n;
}

static void remove_dot_segments(const char *in, size_t n, char *out);

#define FAIL(reason)                                                                               \
    do {                                                                                           \
        if (why)                                                                                   \
            *why = reason;                                                                         \
        return -EINVAL;                                                                            \
    } while (0)

/* Splits "host[:port]" or "[v6][:port]" out of authority [a, end). */
static int parse_authority(const char *a, const char *end, url_t *u, char *hostbuf,
                           const char **why)
{
    const char *hs, *he, *p;
    if (memchr(a, '@', (size_t)(end - a)))
        FAIL("credentials in URLs are not supported");
    if (a < end && *a == '[') {
        hs = a + 1;
        he = memchr(hs, ']', (size_t)(end - hs));
        if (!he)
            FAIL("unterminated IPv6 literal");
        for (p = hs; p < he; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                FAIL("bad IPv6 literal");
        p = he + 1;
        u->ipv6 = 1;
    } else {
        hs = a;
        for (p = a; p < end && *p != ':'; p++)
            if (!host_char_ok((unsigned char)*p))
                FAIL("bad character in host");
        he = p;
    }
    if (he == hs)
        FAIL("empty host");
    if (he - hs > 253)
        FAIL("host name too long");
    for (size_t i = 0; i < (size_t)(he - hs); i++)
        hostbuf[i] = (char)tolower((unsigned char)hs[i]);
    hostbuf[he - hs] = '\0';
    u->port = (uint16_t)scheme_port(u->scheme);
    if (p < end) {
        if (*p != ':')
            FAIL("bad authority");
        p++;
        if (p == end) /* "host:" means the default port */
            return 0;
        unsigned long port = 0;
        for (; p < end; p++) {
            if (!isdigit((unsigned char)*p))
                FAIL("bad port");
            port = port * 10 + (unsigned long)(*p - '0');
            if (port > 65535)
                FAIL("port out of range");
        }
        if (port == 0)
            FAIL("port out of range");
        u->port = (uint16_t)port;
    }
    return 0;
}

int url_same_origin(const url_t *a, const url_t *b)
{
    return strcmp(a->scheme, b->scheme) == 0 && strcmp(a->host, b->host) == 0 && a->port == b->port;
}

int url_parse(const char *text, url_t *u, const char **why)
{
    memset(u, 0, sizeof *u);
    size_t len = strlen(text);
    if (len == 0)
        FAIL("empty URL");
    if (len > URL_MAX_LEN)
        FAIL("URL too long");
    for (size_t i = 0; i < len; i++)
        if (!url_char_ok((unsigned char)text[i]))
            FAIL("URL holds a space, control or non-ASCII byte (percent-encode it)");

    const char *sep = strstr(text, "://");
    if (!sep)
        FAIL("not an absolute URL (no scheme://)");
    char scheme[8];
    size_t sl = (size_t)(sep - text);
    if (sl == 0 || sl >= sizeof scheme)
        FAIL("unsupported scheme");
    for (size_t i = 0; i < sl; i++)
        scheme[i] = (char)tolower((unsigned char)text[i]);
    scheme[sl] = '\0';
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
        if (why)
            *why = "unsupported scheme (only http and https)";
        return -EPROTONOSUPPORT;
    }

    const char *auth = sep + 3;
    const char *auth_end = auth + strcspn(auth, "/?#");
    const char *target = auth_end;
    size_t target_len = strcspn(target, "#");

    /* One block: scheme, host, target, canonical; sizes are upper bounds. */
    size_t cap = 8 + 256 + (target_len + 2) + (len + 16);
    u->mem = malloc(cap);
    if (!u->mem)
        return -ENOMEM;
    char *o = u->mem;
    u->scheme = strcpy(o, scheme);
    o += sl + 1;
    u->host = o;
    int rc = parse_authority(auth, auth_end, u, o, why);
    if (rc) {
        url_free(u);
        return rc;
    }
    o += strlen(u->host) + 1;
    /* The path without "." and ".." segments, as a server would see it:
     * one resource, one cache key. */
    u->target = o;
    const char *q = memchr(target, '?', target_len);
    size_t path_len = q ? (size_t)(q - target) : target_len;
    if (path_len == 0) {
        *o++ = '/';
    } else {
        remove_dot_segments(target, path_len, o);
        o += strlen(o);
    }
    memcpy(o, target + path_len, target_len - path_len);
    o += target_len - path_len;
    *o++ = '\0';
    u->canonical = o;
    char hp[300];
    if (url_hostport(u, hp, sizeof hp) < 0) {
        url_free(u);
        FAIL("host name too long");
    }
    snprintf(o, cap - (size_t)(o - u->mem), "%s://%s%s", u->scheme, hp, u->target);
    return 0;
}

void url_free(url_t *u)
{
    free(u->mem);
    memset(u, 0, sizeof *u);
}

/* RFC 3986 5.2.4: remove "." and ".." segments from path [in, in+n) into out. */
static void remove_dot_segments(const char *in, size_t n, char *out)
{
    char *o = out;
    const char *p = in, *end = in + n;
    while (p < end) {
        const char *seg_end = memchr(p + 1, '/', (size_t)(end - p - 1 > 0 ? end - p - 1 : 0));
        if (!seg_end || p + 1 >= end)
            seg_end = end;
        size_t sl = (size_t)(seg_end - p); /* includes the leading '/' */
        if (sl == 2 && p[1] == '.') {
            if (seg_end == end)
                *o++ = '/';
        } else if (sl == 3 && p[1] == '.' && p[2] == '.') {
            while (o > out && *--o != '/')
                ;
            if (seg_end == end)
                *o++ = '/';
        } else {
            memcpy(o, p, sl);
            o += sl;
        }
        p = seg_end;
    }
    if (o == out)
        *o++ = '/';
    *o = '\0';
}

/* Splits an absolute ("scheme://auth...") or scheme-relative ("//auth...")
 * reference into its "scheme://auth" prefix (written to prefix) and returns
 * the rest (path, query, fragment); NULL for a relative reference. */
static const char *split_authority(const url_t *base, const char *ref, char *prefix, size_t cap)
{
    const char *sep = strstr(ref, "://");
    if (sep && sep < ref + strcspn(ref, "/?#")) {
        const char *end = sep + 3 + strcspn(sep + 3, "/?#");
        snprintf(prefix, cap, "%.*s", (int)(end - ref), ref);
        return end;
    }
    if (ref[0] == '/' && ref[1] == '/') {
        const char *end = ref + 2 + strcspn(ref + 2, "/?#");
        snprintf(prefix, cap, "%s:%.*s", base->scheme, (int)(end - ref), ref);
        return end;
    }
    return NULL;
}

int url_resolve(const url_t *base, const char *ref, char **out)
{
    size_t rl = strlen(ref);
    if (rl == 0 || rl > URL_MAX_LEN)
        return -EINVAL;
    char hp[300];
    if (url_hostport(base, hp, sizeof hp) < 0)
        return -EINVAL;
    size_t cap = strlen(base->scheme) + strlen(hp) + strlen(base->target) + rl + 16;
    char *mem = malloc(cap * 3), *buf = malloc(cap);
    if (!mem || !buf) {
        free(mem);
        free(buf);
        return -ENOMEM;
    }
    char *prefix = mem, *merged = mem + cap, *path = mem + 2 * cap;

    const char *query;
    const char *rest = split_authority(base, ref, prefix, cap);
    if (rest) { /* RFC 3986 5.2.2: T.path = remove_dot_segments(R.path) */
        size_t n = strcspn(rest, "?#");
        memcpy(merged, rest, n);
        merged[n] = '\0';
        query = rest + n;
    } else {
        snprintf(prefix, cap, "%s://%s", base->scheme, hp);
        size_t ref_path_len = strcspn(ref, "?#");
        size_t base_path_len = strcspn(base->target, "?");
        query = ref + ref_path_len;
        if (ref[0] == '/') {
            memcpy(merged, ref, ref_path_len);
            merged[ref_path_len] = '\0';
        } else if (ref_path_len == 0) { /* "?q" or "#f": base path, new query */
            memcpy(merged, base->target, base_path_len);
            merged[base_path_len] = '\0';
            if (*query != '?') /* only a fragment: keep the base query too */
                query = base->target + base_path_len;
        } else { /* relative path: base directory + ref */
            const char *slash = base->target;
            for (size_t i = 0; i < base_path_len; i++)
                if (base->target[i] == '/')
                    slash = base->target + i;
            size_t dl = (size_t)(slash - base->target) + 1;
            memcpy(merged, base->target, dl);
            memcpy(merged + dl, ref, ref_path_len);
            merged[dl + ref_path_len] = '\0';
        }
    }
    if (*merged)
        remove_dot_segments(merged, strlen(merged), path);
    else
        path[0] = '\0'; /* "http://g": url_parse supplies the "/" */
    snprintf(buf, cap, "%s%s%.*s", prefix, path, (int)strcspn(query, "#"), query);
    free(mem);
    *out = buf;
    return 0;
}
