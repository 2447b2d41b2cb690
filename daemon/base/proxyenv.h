/* proxyenv: which forward proxy a URL goes through, read as curl reads the
 * environment, so that hubd goes where the user's other tools go.
 *
 * Variables, in curl's order: for http:// URLs `http_proxy` only (lower
 * case: HTTP_PROXY is what a CGI server sets from a request's "Proxy:"
 * header, so a web request could pick hubd's proxy); for https://
 * `https_proxy`, then `HTTPS_PROXY`; for both, `all_proxy` then
 * `ALL_PROXY` when the scheme's own is unset. An empty value is unset.
 * `no_proxy`, then `NO_PROXY`, lists the hosts that go direct.
 *
 * Pure: the environment comes through a getter, so tests need not touch
 * the process's. Any thread. */
#ifndef HUBD_PROXYENV_H
#define HUBD_PROXYENV_H

typedef const char *(*proxyenv_get_fn)(const char *name);

/* The proxy URL for scheme ("http" or "https") as the environment says,
 * or NULL. The string is get's. */
const char *proxyenv_proxy(const char *scheme, proxyenv_get_fn get);

/* The no_proxy list as the environment says, or NULL. */
const char *proxyenv_no_proxy(proxyenv_get_fn get);

/* 1 when a request to host (a URL's host as url_parse gives it: IPv6
 * without brackets) on port goes direct by the no_proxy list, curl's
 * matching: a list that is "*" alone matches every host (a "*" among
 * other items is no wildcard); items are separated by commas
 * or white space; a name item matches that name and its subdomains, case
 * aside, a leading or trailing dot ignored ("example.com" and
 * ".example.com" both match "example.com" and "a.example.com", not
 * "notexample.com"); an IP host matches an address or CIDR item
 * ("10.0.0.0/8", "::1", "[::1]") in any spelling, and never a name item;
 * an item with a port ("example.com:8080", "[::1]:8080") matches that port
 * only. */
int proxyenv_no_proxy_match(const char *list, const char *host, unsigned port);

#endif
