/* proxy: proxy URLs, the settings from config or environment, and the
 * per-request choice (see the header). */
#include "proxy.h"
#include "textnum.h"
#include "wipe.h"

#include <errno.h>
#include <mbedtls/base64.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROXY_DEFAULT_PORT "1080" /* curl's, when the URL names none */
#define PROXY_MAX_USERINFO 512

/* Percent-decodes [s, s+n) into out (cap bytes, NUL-terminated). -1 for a
 * bad escape, a NUL byte or no room. */
static int pct_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (n - i < 3)
                return -1;
            int h = hex_value(s[i + 1]), l = hex_value(s[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            c = h * 16 + l;
            i += 2;
        }
        if (c == 0 || o + 1 >= cap)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

/* "Basic " + base64(user ":" password) into p->authz. */
static int make_authz(proxy_t *p, const char *user, const char *pass)
{
    char plain[2 * PROXY_MAX_USERINFO + 2];
    int n = snprintf(plain, sizeof plain, "%s:%s", user, pass);
    size_t need = 0;
    mbedtls_base64_encode(NULL, 0, &need, (const unsigned char *)plain, (size_t)n);
    p->authz = malloc(6 + need);
    size_t olen = 0;
    int rc = p->authz ? 0 : -ENOMEM;
    if (!rc) {
        memcpy(p->authz, "Basic ", 6);
        if (mbedtls_base64_encode((unsigned char *)p->authz + 6, need, &olen,
                                  (const unsigned char *)plain, (size_t)n))
            rc = -ENOMEM;
    }
    memset(plain, 0, sizeof plain); /* the password goes no further than authz */
    return rc;
}

int proxy_parse(const char *text, proxy_t *p, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    memset(p, 0, sizeof *p);
    const char *s = text, *sep = strstr(text, "://");
    if (sep) {
        size_t sl = (size_t)(sep - text);
        if (sl != 4 || strncasecmp(text, "http", 4) != 0) {
            *why = sl == 5 && strncasecmp(text, "https", 5) == 0
                       ? "TLS to the proxy (https://) is not supported: give an http:// proxy "
                         "(https:// URLs still go to the origin encrypted, through CONNECT)"
                       : "not an http:// proxy (SOCKS and others are not supported)";
            return -EPROTONOSUPPORT;
        }
        s = sep + 3;
    }
    /* The authority ends at the first '/', '?' or '#'; any path is ignored,
     * as curl ignores it. */
    size_t alen = strcspn(s, "/?#");
    if (strchr(s + alen, '@')) { /* "user:12/34@host": the password would become host:port */
        *why = "a '/', '?' or '#' in the user or password of the proxy URL (percent-escape it)";
        return -EINVAL;
    }
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (s[i] == '@')
            at = s + i; /* the last one: a password may hold an escaped '@' only */
    const char *hp = at ? at + 1 : s;
    size_t hplen = alen - (size_t)(hp - s);
    if (hplen == 0) {
        *why = "no proxy host";
        return -EINVAL;
    }
    if (hplen > 280) {
        *why = "the proxy host is too long";
        return -EINVAL;
    }
    /* The host and port through url_parse, for one spelling of addresses
     * and the same checks as any URL's. */
    char probe[300];
    int has_port;
    if (hp[0] == '[') {
        const char *close = memchr(hp, ']', hplen);
        has_port = close && close + 1 < hp + hplen && close[1] == ':';
    } else {
        const char *c = memchr(hp, ':', hplen);
        has_port = c != NULL; /* a bare IPv6 address needs brackets: url_parse says no */
    }
    if (has_port && hp[hplen - 1] == ':') { /* "host:": url_parse would make it 80 */
        *why = "a bad proxy port";
        return -EINVAL;
    }
    snprintf(probe, sizeof probe, "http://%.*s%s/", (int)hplen, hp,
             has_port ? "" : ":" PROXY_DEFAULT_PORT);
    url_t u;
    if (url_parse(probe, &u, NULL)) {
        *why = "a bad proxy host or port";
        return -EINVAL;
    }
    if (u.port == 0) {
        url_free(&u);
        *why = "a bad proxy port";
        return -EINVAL;
    }
    snprintf(p->host, sizeof p->host, "%s", u.host);
    snprintf(p->port, sizeof p->port, "%u", u.port);
    snprintf(p->label, sizeof p->label, "http://%s%s%s:%u", u.ipv6 ? "[" : "", u.host,
             u.ipv6 ? "]" : "", u.port);
    url_free(&u);
    snprintf(p->shown, sizeof p->shown, "%s", p->label);
    if (!at)
        return 0;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    size_t ulen = colon ? (size_t)(colon - s) : (size_t)(at - s);
    char user[PROXY_MAX_USERINFO], pass[PROXY_MAX_USERINFO] = "";
    if (pct_decode(s, ulen, user, sizeof user) ||
        (colon && pct_decode(colon + 1, (size_t)(at - colon - 1), pass, sizeof pass))) {
        *why = "a bad user or password in the proxy URL (percent-escape reserved characters)";
        memset(pass, 0, sizeof pass); /* what was decoded of it */
        return -EINVAL;
    }
    int rc = make_authz(p, user, pass);
    if (!rc) /* the user is shown (it says which account); the password never */
        snprintf(p->shown, sizeof p->shown, "http://%.*s:***@%s", (int)(ulen > 40 ? 40 : ulen), s,
                 p->label + 7);
    memset(pass, 0, sizeof pass);
    if (rc)
        *why = "out of memory";
    return rc;
}

void proxy_free(proxy_t *p)
{
    if (p) {
        wipe_free(p->authz); /* the password */
        p->authz = NULL;
    }
}

static int settings_add(proxy_t **slot, const char *text, const char *what, char *err, size_t cap)
{
    const char *why = "";
    proxy_t *p = calloc(1, sizeof *p);
    int rc = p ? proxy_parse(text, p, &why) : -ENOMEM;
    if (rc) {
        snprintf(err, cap, "%s: %s", what, p ? why : "out of memory");
        proxy_free(p);
        free(p);
        return rc;
    }
    *slot = p;
    return 0;
}

int proxy_settings_init(proxy_settings_t *ps, const char *cfg_proxy, const char *cfg_no_proxy,
                        proxyenv_get_fn get, char *err, size_t cap)
{
    memset(ps, 0, sizeof *ps);
    int rc = 0;
    const char *no_proxy = cfg_no_proxy;
    if (cfg_proxy) {
        snprintf(ps->source, sizeof ps->source, "config");
        if (*cfg_proxy && !(rc = settings_add(&ps->http, cfg_proxy, "proxy", err, cap)))
            rc = settings_add(&ps->https, cfg_proxy, "proxy", err, cap);
    } else {
        snprintf(ps->source, sizeof ps->source, "environment");
        const char *h = proxyenv_proxy("http", get), *hs = proxyenv_proxy("https", get);
        if (h)
            rc =
                settings_add(&ps->http, h, "the environment's http_proxy (or all_proxy)", err, cap);
        if (!rc && hs)
            rc = settings_add(&ps->https, hs, "the environment's https_proxy (or all_proxy)", err,
                              cap);
        if (!no_proxy)
            no_proxy = proxyenv_no_proxy(get);
    }
    if (!rc && no_proxy && *no_proxy && !(ps->no_proxy = strdup(no_proxy)))
        rc = -ENOMEM;
    if (rc) {
        if (rc == -ENOMEM)
            snprintf(err, cap, "out of memory");
        proxy_settings_free(ps);
    }
    return rc;
}

void proxy_settings_free(proxy_settings_t *ps)
{
    proxy_free(ps->http);
    proxy_free(ps->https);
    free(ps->http);
    free(ps->https);
    free(ps->no_proxy);
    ps->http = ps->https = NULL;
    ps->no_proxy = NULL;
}

const proxy_t *proxy_for(const proxy_settings_t *ps, const url_t *u)
{
    if (!ps)
        return NULL;
    const proxy_t *p = strcmp(u->scheme, "https") == 0 ? ps->https : ps->http;
    if (!p || proxyenv_no_proxy_match(ps->no_proxy, u->host, u->port))
        return NULL;
    return p;
}

void proxy_settings_describe(const proxy_settings_t *ps, char *buf, size_t cap)
{
    snprintf(buf, cap, "http:// via %s, https:// via %s, no_proxy %s (from the %s)",
             ps->http ? ps->http->shown : "none (direct)",
             ps->https ? ps->https->shown : "none (direct)", ps->no_proxy ? ps->no_proxy : "(none)",
             ps->source);
}
