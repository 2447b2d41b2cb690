/* hostport: "host:port" lists of loopback addresses, parsed and checked. */
#include "hostport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Reasons, read after the item they are about. */
static const char WHY_EMPTY[] = "has an empty item (a comma too many)";
static const char WHY_LONG[] = "is too long for an address and port";
static const char WHY_NO_PORT[] = "has no port (host:port)";
static const char WHY_PORT[] = "has a bad port (1 to 65535)";
static const char WHY_BARE_V6[] = "is an IPv6 address without brackets: write [address]:port";
static const char WHY_V6[] = "is not an IPv6 address in brackets";
static const char WHY_NAME[] = "is not an IPv4 address, [IPv6 address] or localhost (no other "
                               "name is looked up)";
static const char WHY_NOT_LOOPBACK[] = "is not a loopback address: the HTTP front serves this "
                                       "machine only";
static const char WHY_PEER_NAME[] = "is not an IPv4 address or [IPv6 address] (a peer is named "
                                    "by its address: no name is looked up)";
static const char WHY_TWICE[] = "is listed twice (the same address and port)";
static const char WHY_TOO_MANY[] = "is one item too many (at most 8)";

_Static_assert(HOSTPORT_MAX_ITEMS == 8, "WHY_TOO_MANY names the limit");

static int is_mapped_v4(const struct in6_addr *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a->s6_addr, prefix, sizeof prefix) == 0;
}

int hostport_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (is_mapped_v4(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

int hostport_format(const struct sockaddr *sa, char *buf, size_t cap)
{
    char host[INET6_ADDRSTRLEN];
    int n;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        n = snprintf(buf, cap, "%s:%u", host, (unsigned)ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        n = snprintf(buf, cap, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
    } else {
        return -EINVAL;
    }
    return n < 0 || (size_t)n >= cap ? -E2BIG : n;
}

/* Digits only (no sign, no spaces), 1..65535. */
static int parse_port(const char *s, uint16_t *out)
{
    unsigned long v = 0;
    if (!*s || strlen(s) > 5)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    if (v < 1 || v > 65535)
        return -EINVAL;
    *out = (uint16_t)v;
    return 0;
}

static void set_v4(struct sockaddr_storage *ss, const struct in_addr *a, uint16_t port)
{
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    memset(ss, 0, sizeof *ss);
    in->sin_family = AF_INET;
    in->sin_addr = *a;
    in->sin_port = htons(port);
}

static void set_v6(struct sockaddr_storage *ss, const struct in6_addr *a, uint16_t port)
{
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    memset(ss, 0, sizeof *ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = *a;
    in6->sin6_port = htons(port);
}

static int same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

/* One trimmed item into out[0..*k): one address, or two for localhost. */
static const char *parse_item(char *s, struct sockaddr_storage out[2], size_t *k)
{
    char *host = s, *colon;
    int bracketed = 0;
    uint16_t port;
    if (*s == '[') {
        char *close = strchr(s, ']');
        if (!close)
            return WHY_V6;
        if (close[1] != ':')
            return close[1] ? WHY_V6 : WHY_NO_PORT;
        *close = '\0';
        host = s + 1;
        colon = close + 1;
        bracketed = 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return WHY_NO_PORT;
        if (memchr(s, ':', (size_t)(colon - s)))
            return WHY_BARE_V6;
        *colon = '\0';
    }
    if (parse_port(colon + 1, &port))
        return WHY_PORT;
    struct in_addr a4;
    struct in6_addr a6;
    if (bracketed) {
        if (inet_pton(AF_INET6, host, &a6) != 1)
            return WHY_V6;
        if (is_mapped_v4(&a6)) { /* one socket for the one address it is, not a v6 socket */
            memcpy(&a4, &a6.s6_addr[12], sizeof a4);
            set_v4(&out[0], &a4, port);
        } else {
            set_v6(&out[0], &a6, port);
        }
        *k = 1;
    } else if (strcasecmp(host, "localhost") == 0) {
        /* Both loopbacks, without a lookup: /etc/hosts may say otherwise
         * or nothing, and a clear meaning beats whatever it says. */
        inet_pton(AF_INET, "127.0.0.1", &a4);
        set_v4(&out[0], &a4, port);
        set_v6(&out[1], &in6addr_loopback, port);
        *k = 2;
    } else if (inet_pton(AF_INET, host, &a4) == 1) {
        set_v4(&out[0], &a4, port);
        *k = 1;
    } else {
        return WHY_NAME;
    }
    return hostport_is_loopback((const struct sockaddr *)&out[0]) ? NULL : WHY_NOT_LOOPBACK;
}

int hostport_parse_peer(const char *text, struct sockaddr_storage *out, const char **why)
{
    char buf[HOSTPORT_TEXT_MAX];
    struct sockaddr_storage two[2];
    size_t k = 0, len = strlen(text);
    if (len >= sizeof buf) {
        *why = WHY_LONG;
        return -EINVAL;
    }
    memcpy(buf, text, len + 1);
    const char *w = parse_item(buf, two, &k);
    /* The peer address another node connects to: any address, but one
     * (localhost would mean two, and a name is never looked up). */
    if (w == WHY_NOT_LOOPBACK)
        w = NULL;
    if (!w && k != 1)
        w = WHY_PEER_NAME;
    if (w) {
        *why = w;
        return -EINVAL;
    }
    *out = two[0];
    return 0;
}

static void copy_item(char *dst, size_t cap, const char *s, size_t len)
{
    if (!cap)
        return;
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, s, len);
    dst[len] = '\0';
}

int hostport_parse_list(const char *text, struct sockaddr_storage *addrs, size_t cap, size_t *n,
                        char *item, size_t itemcap, const char **why)
{
    static const char blanks[] = " \t";
    *n = 0;
    if (itemcap)
        item[0] = '\0';
    *why = NULL;
    if (text[strspn(text, blanks)] == '\0')
        return 0; /* off */
    size_t items = 0;
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *s = p;
        const char *next = p[len] == ',' ? p + len + 1 : NULL;
        while (len && strchr(blanks, *s))
            s++, len--;
        while (len && strchr(blanks, s[len - 1]))
            len--;
        if (len == 0) { /* the whole list is the item: the empty one has no text */
            copy_item(item, itemcap, text, strlen(text));
            *why = WHY_EMPTY;
            return -EINVAL;
        }
        copy_item(item, itemcap, s, len);
        if (++items > HOSTPORT_MAX_ITEMS) {
            *why = WHY_TOO_MANY;
            return -E2BIG;
        }
        char buf[HOSTPORT_TEXT_MAX];
        if (len >= sizeof buf) {
            *why = WHY_LONG;
            return -EINVAL;
        }
        memcpy(buf, s, len);
        buf[len] = '\0';
        struct sockaddr_storage got[2];
        size_t k = 0;
        if ((*why = parse_item(buf, got, &k)) != NULL)
            return -EINVAL;
        for (size_t i = 0; i < k; i++) {
            for (size_t j = 0; j < *n; j++) {
                if (same_addr(&addrs[j], &got[i])) {
                    *why = WHY_TWICE;
                    return -EINVAL;
                }
            }
            if (*n >= cap) {
                *why = WHY_TOO_MANY;
                return -E2BIG;
            }
            addrs[(*n)++] = got[i];
        }
        if (!next)
            break;
        p = next;
    }
    if (itemcap)
        item[0] = '\0';
    return 0;
}
