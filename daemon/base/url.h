/* url: absolute http(s) URLs, parsed into the parts a request needs.
 *
 * Only what an HTTP client must know: scheme, host, port, and the request
 * target. The parsed form is also the canonical one used as the cache key
 * (scheme and host lower-cased, IP addresses in one spelling, default port
 * dropped, fragment removed). */
#ifndef HUBD_URL_H
#define HUBD_URL_H

#include <stddef.h>
#include <stdint.h>

#define URL_MAX_LEN 8192

typedef struct url {
    char *scheme;    /* "http" or "https" */
    char *host;      /* lower-cased name, dotted-quad IPv4, or IPv6 as inet_ntop writes it
                        (without brackets) */
    uint16_t port;   /* explicit or the scheme's default */
    int ipv6;        /* host is an IPv6 literal: bracket it in Host and text */
    char *target;    /* path and query, never empty ("/" at least) */
    char *canonical; /* the whole URL in canonical form: the cache key */
    char *mem;       /* one allocation holding all the strings above */
} url_t;

/* Returns 0, -EPROTONOSUPPORT for a scheme other than http and https, or
 * -EINVAL; either error with a static reason in *why (why may be NULL).
 * IPv4 hosts are read as browsers and inet_aton read them ("127.1",
 * "2130706433", "0x7f.1" and "0177.0.0.1" are 127.0.0.1) and written as a
 * dotted quad; a host whose last label is a number but that is no IPv4
 * address ("1.2.3.256", "a.1") is an error, not a name. */
int url_parse(const char *text, url_t *u, const char **why);
void url_free(url_t *u);

/* What the n bytes of host are, read as url_parse reads a URL's host: 1 for
 * an IP address (IPv4 in any of the spellings above, IPv6 with or without
 * brackets), with its 16 bytes in addr (IPv4 as IPv4-mapped ::ffff:a.b.c.d);
 * 0 for a name; -EINVAL for neither. The host lists of netpolicy use it to
 * compare addresses as addresses. */
int url_host_addr(const char *host, size_t n, uint8_t addr[16]);

/* Whether the path [path, path+n) has a "." or ".." segment, in any
 * spelling a server may decode to one ("%2e", "%2E", ".%2e", ...). A
 * request target that has one names, once a server removes it, another
 * path than the one it reads as: whoever keys anything on the text must
 * refuse it first. Pure. */
int url_path_has_dot_segment(const char *path, size_t n);

/* Resolves a Location value against base (RFC 3986 section 5.2) into a newly
 * allocated absolute URL string in *out. Returns 0 or -EINVAL / -ENOMEM. */
int url_resolve(const url_t *base, const char *ref, char **out);

/* Same scheme, host and port: whether credentials meant for a may go to b
 * (a redirect to anywhere else drops them). */
int url_same_origin(const url_t *a, const url_t *b);

/* "host" or "host:port" as the Host header wants it (brackets for IPv6, no
 * port when it is the scheme's default). Returns the length or -E2BIG. */
int url_hostport(const url_t *u, char *buf, size_t cap);

#endif
