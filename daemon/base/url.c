/* url: parsing, canonical form, and reference resolution for redirects. */
#include "url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
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

/* IPv4 hosts are read the way browsers read them (the WHATWG URL
 * Standard's "IPv4 parser"), and the way inet_aton and so getaddrinfo do:
 * "127.1", "2130706433", "0x7f000001" and "017700000001" all connect to
 * 127.0.0.1. Reading them here, once, and writing the one dotted-quad
 * spelling back is what keeps deny_hosts, the cache key and the Host
 * header from seeing a different host than the socket reaches. */

/* One part of an IPv4 host: decimal, "0x" hex or leading-"0" octal ("0x"
 * alone is 0). 0 and the value in *out, capped at 2^32 (too big for any
 * position), or -1 for a part that is no number. */
static int ipv4_number(const char *s, size_t n, uint64_t *out)
{
    unsigned base = 10;
    if (n == 0)
        return -1;
    if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        n -= 2;
    } else if (n >= 2 && s[0] == '0') {
        base = 8;
        s++;
        n--;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        unsigned d = isdigit(c)    ? (unsigned)(c - '0')
                     : isxdigit(c) ? (unsigned)(tolower(c) - 'a' + 10)
                                   : base;
        if (d >= base)
            return -1;
        v = v * base + d;
        if (v > UINT32_MAX)
            v = (uint64_t)UINT32_MAX + 1; /* saturate: stays "too big", cannot wrap */
    }
    *out = v;
    return 0;
}

/* [s, s+n) without one trailing dot ("127.0.0.1." is that address, as
 * "host." is host). */
static size_t drop_final_dot(const char *s, size_t n)
{
    return n > 1 && s[n - 1] == '.' ? n - 1 : n;
}

/* WHATWG "ends in a number": whether the last label is all digits or an
 * IPv4 number ("0x7f"). Such a host is an IPv4 address or an error, never
 * a name, so no spelling that inet_aton reads as a number gets by as one. */
static int ends_in_number(const char *s, size_t n)
{
    n = drop_final_dot(s, n);
    const char *last = s + n;
    while (last > s && last[-1] != '.')
        last--;
    size_t ln = (size_t)(s + n - last), i;
    uint64_t v;
    for (i = 0; i < ln && isdigit((unsigned char)last[i]); i++)
        ;
    return (ln && i == ln) || ipv4_number(last, ln, &v) == 0;
}

/* WHATWG "IPv4 parser": 1 to 4 parts, every part but the last at most 255,
 * the last filling the bytes that remain ("127.1" is 127.0.0.1). 0 and the
 * address in network order, or -EINVAL. */
static int parse_ipv4(const char *s, size_t n, uint8_t out[4])
{
    uint64_t part[4];
    size_t np = 0;
    const char *p = s, *end = s + drop_final_dot(s, n), *dot;
    do {
        dot = memchr(p, '.', (size_t)(end - p));
        const char *pe = dot ? dot : end;
        if (np == 4 || ipv4_number(p, (size_t)(pe - p), &part[np]) != 0)
            return -EINVAL;
        np++;
        p = dot ? dot + 1 : end;
    } while (dot);
    uint64_t v = part[np - 1];
    if (v >= (uint64_t)1 << (8 * (5 - np)))
        return -EINVAL;
    for (size_t i = 0; i + 1 < np; i++) {
        if (part[i] > 255)
            return -EINVAL;
        v += part[i] << (8 * (3 - i));
    }
    for (int i = 3; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
    return 0;
}

/* An IPv6 address of n bytes at s, as inet_pton reads it (no zone). */
static int parse_ipv6(const char *s, size_t n, uint8_t out[16])
{
    char buf[INET6_ADDRSTRLEN + 1];
    if (n >= sizeof buf)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(AF_INET6, buf, out) == 1 ? 0 : -EINVAL;
}

int url_host_addr(const char *host, size_t n, uint8_t addr[16])
{
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
        return parse_ipv6(host + 1, n - 2, addr) == 0 ? 1 : -EINVAL;
    if (memchr(host, ':', n))
        return parse_ipv6(host, n, addr) == 0 ? 1 : -EINVAL;
    if (!ends_in_number(host, n))
        return 0;
    if (parse_ipv4(host, n, addr + 12) != 0)
        return -EINVAL;
    memset(addr, 0, 10);
    addr[10] = addr[11] = 0xff;
    return 1;
}

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
    /* One spelling per address (inet_ntop's for IPv6, dotted quad for
     * IPv4), so that comparing hosts as text compares addresses. */
    size_t hl = (size_t)(he - hs);
    uint8_t addr[16];
    if (u->ipv6) {
        if (parse_ipv6(hs, hl, addr) != 0)
            FAIL("bad IPv6 literal");
        inet_ntop(AF_INET6, addr, hostbuf, INET6_ADDRSTRLEN);
    } else {
        int ip = url_host_addr(hs, hl, addr);
        if (ip < 0)
            FAIL("bad IPv4 address (a host whose last label is a number must be one)");
        if (ip) {
            inet_ntop(AF_INET, addr + 12, hostbuf, INET_ADDRSTRLEN);
        } else {
            for (size_t i = 0; i < hl; i++)
                hostbuf[i] = (char)tolower((unsigned char)hs[i]);
            hostbuf[hl] = '\0';
        }
    }
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
    int n = snprintf(o, cap - (size_t)(o - u->mem), "%s://%s%s", u->scheme, hp, u->target);
    /* The canonical form can be a few bytes longer than the text ("http://0"
     * is "http://0.0.0.0/"); it must parse again, so it keeps the limit. */
    if (n < 0 || n > URL_MAX_LEN) {
        url_free(u);
        FAIL("URL too long");
    }
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

/* The length of one "." in s[0, n) if it starts with one: '.' (1), or
 * "%2e" / "%2E" (3); else 0. */
static size_t dot_at(const char *s, size_t n)
{
    if (n >= 1 && s[0] == '.')
        return 1;
    if (n >= 3 && s[0] == '%' && s[1] == '2' && (s[2] == 'e' || s[2] == 'E'))
        return 3;
    return 0;
}

int url_path_has_dot_segment(const char *path, size_t n)
{
    const char *p = path, *end = path + n;
    while (p <= end) {
        const char *seg_end = memchr(p, '/', (size_t)(end - p));
        if (!seg_end)
            seg_end = end;
        size_t sl = (size_t)(seg_end - p), d1 = dot_at(p, sl);
        if (d1 && (d1 == sl || dot_at(p + d1, sl - d1) == sl - d1))
            return 1;
        p = seg_end + 1;
    }
    return 0;
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
