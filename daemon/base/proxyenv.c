/* proxyenv: curl's proxy variables and no_proxy matching (see the header). */
#include "proxyenv.h"
#include "netpolicy.h"
#include "url.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The first of the names that is set and not empty. */
static const char *first_set(proxyenv_get_fn get, const char *const *names)
{
    for (; *names; names++) {
        const char *v = get(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

const char *proxyenv_proxy(const char *scheme, proxyenv_get_fn get)
{
    static const char *const http[] = {"http_proxy", NULL};
    static const char *const https[] = {"https_proxy", "HTTPS_PROXY", NULL};
    static const char *const all[] = {"all_proxy", "ALL_PROXY", NULL};
    const char *v = NULL;
    if (strcmp(scheme, "http") == 0)
        v = first_set(get, http);
    else if (strcmp(scheme, "https") == 0)
        v = first_set(get, https);
    else
        return NULL;
    return v ? v : first_set(get, all);
}

const char *proxyenv_no_proxy(proxyenv_get_fn get)
{
    static const char *const names[] = {"no_proxy", "NO_PROXY", NULL};
    return first_set(get, names);
}

/* Splits an item into its host part and port: "[v6]:p", "[v6]", "name:p",
 * "v4:p", or a bare IPv6 address or CIDR (more than one colon: no port).
 * *port 0 when none. Returns 0, or -1 for a port that is not a number. */
static int split_port(const char *s, size_t n, const char **h, size_t *hn, unsigned *port)
{
    const char *colon = NULL;
    *port = 0;
    *h = s;
    *hn = n;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close)
            return -1;
        *h = s + 1;
        *hn = (size_t)(close - s - 1);
        if (close + 1 == s + n)
            return 0;
        if (close[1] != ':')
            return -1;
        colon = close + 1;
    } else {
        const char *c = memchr(s, ':', n);
        if (!c || memchr(c + 1, ':', (size_t)(s + n - c - 1)))
            return 0; /* no colon, or IPv6: no port */
        colon = c;
        *hn = (size_t)(c - s);
    }
    unsigned long v = 0;
    const char *p = colon + 1;
    if (p == s + n)
        return -1;
    for (; p < s + n; p++) {
        if (*p < '0' || *p > '9' || (v = v * 10 + (unsigned long)(*p - '0')) > 65535)
            return -1;
    }
    *port = (unsigned)v;
    return 0;
}

/* A name item (dots at either end dropped) against a name host. */
static int name_matches(const char *item, size_t n, const char *host, size_t hn)
{
    while (n && item[0] == '.')
        item++, n--;
    while (n && item[n - 1] == '.')
        n--;
    if (n == 0 || n > hn)
        return 0;
    if (strncasecmp(host + hn - n, item, n) != 0)
        return 0;
    return n == hn || host[hn - n - 1] == '.';
}

int proxyenv_no_proxy_match(const char *list, const char *host, unsigned port)
{
    if (!list || !host)
        return 0;
    size_t hn = strlen(host);
    while (hn > 1 && host[hn - 1] == '.') /* "example.com." is example.com */
        hn--;
    uint8_t addr[16];
    int host_ip = url_host_addr(host, hn, addr);
    if (host_ip < 0)
        return 0;
    /* "*" alone is every host; a "*" among other items is no wildcard (curl
     * reads it as a name no host has). */
    size_t lead = strspn(list, " \t"), ln = strlen(list + lead);
    while (ln && (list[lead + ln - 1] == ' ' || list[lead + ln - 1] == '\t'))
        ln--;
    if (ln == 1 && list[lead] == '*')
        return 1;
    for (const char *p = list; *p;) {
        p += strspn(p, ", \t\r\n");
        size_t n = strcspn(p, ", \t\r\n");
        if (n == 0)
            break;
        const char *item = p;
        p += n;
        const char *h;
        size_t len;
        unsigned item_port;
        if (split_port(item, n, &h, &len, &item_port) || len == 0)
            continue; /* unusable: curl skips it too */
        if (item_port && item_port != port)
            continue;
        if (host_ip == 1) {
            uint8_t net[16];
            unsigned bits;
            if (netpolicy_cidr_parse(h, len, net, &bits) == 0 &&
                netpolicy_cidr_contains(net, bits, addr))
                return 1;
            continue;
        }
        if (name_matches(h, len, host, hn))
            return 1;
    }
    return 0;
}
