/* proxy: which forward proxy, if any, a request goes through, as curl
 * decides it.
 *
 * The settings come from the config (`proxy`, `no_proxy`) or, when the
 * config does not set `proxy` at all, from the environment hubd started
 * with, by curl's rules (proxyenv.h). An explicitly empty `proxy` means
 * none, whatever the environment says. A proxy is an http:// URL,
 * `http://[user:password@]host[:port]` (no scheme: http://; no port:
 * 1080, as curl); user and password may be percent-encoded and become a
 * Basic `Proxy-Authorization`, which appears in no message: what is shown
 * of a proxy is its label (no user, no password) or its masked form.
 *
 * Built once at start-up, read-only afterwards (any thread). */
#ifndef HUBD_PROXY_H
#define HUBD_PROXY_H

#include <stddef.h>

#include "proxyenv.h"
#include "url.h"

typedef struct proxy {
    char host[256];  /* name, dotted quad, or IPv6 without brackets */
    char port[8];    /* decimal, for getaddrinfo */
    char label[300]; /* "http://host:port": keys, messages, logs */
    char shown[340]; /* label with "user:***@" when there is a user */
    char *authz;     /* "Basic <base64(user:password)>", or NULL; a secret */
} proxy_t;

typedef struct proxy_settings {
    proxy_t *http;   /* for http:// URLs; NULL: direct */
    proxy_t *https;  /* for https:// URLs; NULL: direct */
    char *no_proxy;  /* curl's list (proxyenv_no_proxy_match), or NULL */
    char source[64]; /* where they came from, for the log: "config", "environment" */
} proxy_settings_t;

/* Parses a proxy URL into p (fresh, freed with proxy_free). Returns 0, or
 * -EINVAL / -EPROTONOSUPPORT / -ENOMEM with a static reason in *why that
 * never quotes the text (it may hold a password). */
int proxy_parse(const char *text, proxy_t *p, const char **why);
void proxy_free(proxy_t *p);

/* The settings: cfg_proxy NULL (the config does not say) reads the
 * environment through get; "" is none; else that proxy for both schemes.
 * cfg_no_proxy NULL: the environment's list when the proxy came from it.
 * 0, or an error with a message in err (naming the variable, never its
 * value). */
int proxy_settings_init(proxy_settings_t *ps, const char *cfg_proxy, const char *cfg_no_proxy,
                        proxyenv_get_fn get, char *err, size_t cap);
void proxy_settings_free(proxy_settings_t *ps);

/* The proxy for a request to u, or NULL to go direct. ps may be NULL. */
const proxy_t *proxy_for(const proxy_settings_t *ps, const url_t *u);

/* One line for the log and --check-config: each scheme's proxy (masked)
 * or "direct", and the no_proxy list. */
void proxy_settings_describe(const proxy_settings_t *ps, char *buf, size_t cap);

#endif
