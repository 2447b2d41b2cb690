/* netpolicy: host lists and CIDR lists, matched on the loop thread. */
#include "netpolicy.h"
#include "url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct cidr {
    uint8_t addr[16]; /* IPv4 as IPv4-mapped IPv6 */
    unsigned bits;    /* prefix length over the 128 bits */
} cidr_t;

typedef struct cidr_list {
    cidr_t *v;
    size_t n;
} cidr_list_t;

#define SELF_MAX 16 /* listening sockets of the HTTP front remembered */

/* One of hubd's own listening sockets (netpolicy_set_self). */
typedef struct self_addr {
    uint8_t addr[16]; /* IPv4 as IPv4-mapped IPv6 */
    uint16_t port;    /* host order */
} self_addr_t;

struct netpolicy {
    cidr_list_t deny, allow;
    char *allow_hosts, *deny_hosts; /* copies of the config lists, or NULL */
    self_addr_t self[SELF_MAX];     /* the HTTP front's listening addresses */
    size_t nself;
};

static void map_v4(const uint8_t v4[4], uint8_t out[16])
{
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, v4, 4);
}

/* One "addr[/bits]" of n bytes at s. */
static int parse_cidr(const char *s, size_t n, cidr_t *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *slash = strchr(buf, '/');
    long bits = -1;
    if (slash) {
        char *end;
        *slash = '\0';
        bits = strtol(slash + 1, &end, 10);
        if (end == slash + 1 || *end || bits < 0)
            return -EINVAL;
    }
    uint8_t v4[4];
    if (inet_pton(AF_INET, buf, v4) == 1) {
        if (bits > 32)
            return -EINVAL;
        map_v4(v4, out->addr);
        out->bits = 96 + (unsigned)(bits < 0 ? 32 : bits);
        return 0;
    }
    if (inet_pton(AF_INET6, buf, out->addr) == 1) {
        if (bits > 128)
            return -EINVAL;
        out->bits = (unsigned)(bits < 0 ? 128 : bits);
        return 0;
    }
    return -EINVAL;
}

/* Calls fn on each trimmed, non-empty item of a comma-separated list. */
static int each_item(const char *list, int (*fn)(void *arg, const char *s, size_t n), void *arg)
{
    for (const char *p = list; p && *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t t = n;
        while (t && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t) {
            int rc = fn(arg, p, t);
            if (rc)
                return rc;
        }
        p += n;
    }
    return 0;
}

static int check_one(void *arg, const char *s, size_t n)
{
    cidr_t c;
    (void)arg;
    return parse_cidr(s, n, &c);
}

int netpolicy_check_networks(const char *list)
{
    return each_item(list, check_one, NULL);
}

static int add_one(void *arg, const char *s, size_t n)
{
    cidr_list_t *l = arg;
    cidr_t *v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    l->v = v;
    return parse_cidr(s, n, &l->v[l->n++]);
}

int netpolicy_new(const hubd_config_t *cfg, netpolicy_t **out)
{
    netpolicy_t *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    int rc = each_item(cfg->deny_networks, add_one, &p->deny);
    if (!rc)
        rc = each_item(cfg->allow_networks, add_one, &p->allow);
    if (!rc && cfg->allow_hosts && !(p->allow_hosts = strdup(cfg->allow_hosts)))
        rc = -ENOMEM;
    if (!rc && cfg->deny_hosts && !(p->deny_hosts = strdup(cfg->deny_hosts)))
        rc = -ENOMEM;
    if (rc) {
        netpolicy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void netpolicy_free(netpolicy_t *p)
{
    if (!p)
        return;
    free(p->deny.v);
    free(p->allow.v);
    free(p->allow_hosts);
    free(p->deny_hosts);
    free(p);
}

/* A host as the host lists compare it: a name as text, an IP address as
 * its 16 bytes, so that every spelling of one address is one host
 * ("127.1", "2130706433", "[::ffff:127.0.0.1]" are 127.0.0.1). */
typedef struct host_match {
    const char *name; /* the host without a trailing dot ("host." is host) */
    size_t len;
    int is_ip;              /* an IP address: compared with address items only */
    uint8_t addr[16];       /* if is_ip: the address, IPv4 as IPv4-mapped */
    int carries_v4;         /* deny lists only: addr is an IPv6 form of... */
    uint8_t carried_v4[16]; /* ...this IPv4 address, which it is denied as too */
} host_match_t;

static int embedded_v4(const uint8_t a[16], uint8_t out[16]);

/* "example.org" matches itself; "*.example.org" its subdomains; an address
 * ("127.0.0.1", "[::1]", or any other spelling url_parse reads) matches the
 * same address. Returns 1 (stop: matched) or 0. */
static int match_host(void *arg, const char *pat, size_t n)
{
    const host_match_t *h = arg;
    uint8_t addr[16];
    int ip = url_host_addr(pat, n, addr);
    if (h->is_ip)
        return ip == 1 && (memcmp(addr, h->addr, 16) == 0 ||
                           (h->carries_v4 && memcmp(addr, h->carried_v4, 16) == 0));
    if (ip != 0) /* an address, or an item no URL's host can be */
        return 0;
    if (n > 1 && pat[n - 1] == '.')
        n--;
    if (n > 2 && pat[0] == '*' && pat[1] == '.') {
        size_t sn = n - 1; /* ".example.org" */
        return h->len > sn && strncasecmp(h->name + h->len - sn, pat + 1, sn) == 0;
    }
    return h->len == n && strncasecmp(h->name, pat, n) == 0;
}

/* Whether host is on list. deny: an IPv6 form that carries an IPv4 address
 * (the forms netpolicy_addr_ok checks) is on it if that address is, as a
 * deny list should fail closed; an allow list admits only the address. */
static int in_list(const char *list, const host_match_t *host, int deny)
{
    host_match_t h = *host;
    h.carries_v4 = deny && h.is_ip && embedded_v4(h.addr, h.carried_v4);
    return each_item(list, match_host, &h) == 1;
}

int netpolicy_host_ok(const netpolicy_t *p, const char *host)
{
    host_match_t h = {.name = host, .len = strlen(host)};
    h.is_ip = url_host_addr(host, h.len, h.addr);
    if (h.is_ip < 0) /* no URL has this host: url_parse refuses it */
        return 0;
    if (h.len > 1 && host[h.len - 1] == '.')
        h.len--;
    if (p->deny_hosts && in_list(p->deny_hosts, &h, 1))
        return 0;
    if (p->allow_hosts && *p->allow_hosts)
        return in_list(p->allow_hosts, &h, 0);
    return 1;
}

static int check_host(void *arg, const char *s, size_t n)
{
    uint8_t addr[16];
    (void)arg;
    return url_host_addr(s, n, addr) < 0 ? -EINVAL : 0;
}

int netpolicy_check_hosts(const char *list)
{
    return each_item(list, check_host, NULL);
}

int netpolicy_cidr_contains(const uint8_t net[16], unsigned bits, const uint8_t a[16])
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a, net, whole) != 0)
        return 0;
    return !rest || !((a[whole] ^ net[whole]) & (uint8_t)(0xff << (8 - rest)));
}

int netpolicy_cidr_parse(const char *s, size_t n, uint8_t net[16], unsigned *bits)
{
    cidr_t c;
    int rc = parse_cidr(s, n, &c);
    if (rc)
        return rc;
    memcpy(net, c.addr, 16);
    *bits = c.bits;
    return 0;
}

static int in_cidrs(const cidr_list_t *l, const uint8_t a[16])
{
    for (size_t i = 0; i < l->n; i++)
        if (netpolicy_cidr_contains(l->v[i].addr, l->v[i].bits, a))
            return 1;
    return 0;
}

static int denied(const netpolicy_t *p, const uint8_t a[16])
{
    return in_cidrs(&p->deny, a) && !in_cidrs(&p->allow, a);
}

/* The IPv4 address some IPv6 forms carry and that the network may route
 * to it: IPv4-compatible ::a.b.c.d, SIIT ::ffff:0:a.b.c.d, NAT64
 * 64:ff9b::a.b.c.d and 64:ff9b:1::/48 (as /96), 6to4 2002:AABB:CCDD::.
 * 1 and the mapped form in out, or 0. */
static int embedded_v4(const uint8_t a[16], uint8_t out[16])
{
    static const uint8_t zero[12] = {0};
    static const uint8_t siit[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
    if ((memcmp(a, zero, 12) == 0 && !(a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1)) ||
        memcmp(a, siit, 12) == 0 || memcmp(a, nat64, 12) == 0 || memcmp(a, nat64_local, 6) == 0) {
        map_v4(a + 12, out);
        return 1;
    }
    if (a[0] == 0x20 && a[1] == 0x02) {
        map_v4(a + 2, out);
        return 1;
    }
    return 0;
}

/* The address check, on 16 bytes (IPv4 as IPv4-mapped): deny_networks
 * with allow_networks as exceptions, and an IPv6 form that carries an IPv4
 * address judged as that address too. */
static int addr16_ok(const netpolicy_t *p, const uint8_t a[16])
{
    uint8_t v4[16];
    if (denied(p, a))
        return 0;
    return !(embedded_v4(a, v4) && denied(p, v4));
}

int netpolicy_addr_ok(const netpolicy_t *p, const struct sockaddr *sa)
{
    uint8_t a[16];
    if (sa->sa_family == AF_INET)
        map_v4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, a);
    else if (sa->sa_family == AF_INET6)
        memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16); /* mapped stays mapped */
    else
        return 0;
    return addr16_ok(p, a);
}

int netpolicy_literal_ok(const netpolicy_t *p, const char *host)
{
    uint8_t a[16];
    int ip = url_host_addr(host, strlen(host), a);
    if (ip < 0) /* no URL has this host: url_parse refuses it */
        return 0;
    return ip == 0 || addr16_ok(p, a); /* a name: checked after DNS, by whoever resolves it */
}

/* ---- hubd's own HTTP front ---------------------------------------------------- */

void netpolicy_set_self(netpolicy_t *p, const struct sockaddr_storage *addrs, size_t n)
{
    p->nself = 0;
    for (size_t i = 0; i < n && p->nself < SELF_MAX; i++) {
        const struct sockaddr *sa = (const struct sockaddr *)&addrs[i];
        self_addr_t *s = &p->self[p->nself];
        if (sa->sa_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
            map_v4((const uint8_t *)&in->sin_addr, s->addr);
            s->port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
            memcpy(s->addr, &in6->sin6_addr, 16);
            s->port = ntohs(in6->sin6_port);
        } else {
            continue;
        }
        p->nself++;
    }
}

static int is_v4mapped(const uint8_t a[16])
{
    static const uint8_t prefix[12] = {[10] = 0xff, [11] = 0xff};
    return memcmp(a, prefix, 12) == 0;
}

/* Whether a connection to a (16 bytes, IPv4 as IPv4-mapped) lands on this
 * machine's loopback: 127/8, ::1, and the unspecified addresses 0.0.0.0
 * and ::, which connect(2) takes as this host. An IPv6 form that carries
 * an IPv4 address (embedded_v4) is judged as that address. */
static int local_loopback(const uint8_t a[16])
{
    static const uint8_t any6[16] = {0}, one6[16] = {[15] = 1};
    uint8_t v4[16];
    if (memcmp(a, any6, 16) == 0 || memcmp(a, one6, 16) == 0)
        return 1;
    if (!is_v4mapped(a) && embedded_v4(a, v4))
        a = v4;
    if (!is_v4mapped(a))
        return 0;
    return a[12] == 127 || (a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] == 0);
}

/* A listener on a loopback (or wildcard) address answers on every
 * loopback address of its port as far as this check goes: 127.0.0.2:8399
 * does not reach a socket bound to 127.0.0.1, but it is nothing hubd needs
 * to fetch from, and one rule for all of 127/8 leaves no spelling to find. */
static int self16(const netpolicy_t *p, const uint8_t a[16], unsigned port)
{
    for (size_t i = 0; i < p->nself; i++) {
        const self_addr_t *s = &p->self[i];
        if (s->port != port)
            continue;
        if (memcmp(s->addr, a, 16) == 0 || (local_loopback(s->addr) && local_loopback(a)))
            return 1;
    }
    return 0;
}

int netpolicy_is_self(const netpolicy_t *p, const struct sockaddr *sa)
{
    uint8_t a[16];
    unsigned port;
    if (sa->sa_family == AF_INET) {
        map_v4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, a);
        port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    } else {
        return 0;
    }
    return self16(p, a, port);
}

int netpolicy_host_is_self(const netpolicy_t *p, const char *host, unsigned port)
{
    static const uint8_t loop4[16] = {[10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1};
    uint8_t a[16];
    size_t n = strlen(host);
    int ip = url_host_addr(host, n, a);
    if (ip > 0)
        return self16(p, a, port);
    /* "localhost" and its subdomains are loopback by definition (RFC 6761),
     * whatever /etc/hosts says; other names are checked after DNS. One
     * final dot is the same name (fully qualified): "localhost." too. */
    if (ip == 0 && n > 1 && host[n - 1] == '.')
        n--;
    if (ip == 0 && ((n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
                    (n > 10 && strncasecmp(host + n - 10, ".localhost", 10) == 0)))
        return self16(p, loop4, port);
    return 0;
}
