/* netpolicy: which hosts and addresses hubd may connect to.
 *
 * hubd fetches URLs that local users name, so it must not become their way
 * into what the machine can reach but they should not: cloud metadata
 * services, link-local neighbours, or (if the admin says so) internal
 * networks. The host of every request, redirect hops included, is
 * checked against allow_hosts / deny_hosts (names as names, IP addresses
 * as addresses, whatever their spelling); every address a connection is
 * actually attempted to is checked against deny_networks (with
 * allow_networks as exceptions), after DNS, so a name that resolves to a
 * denied address (DNS rebinding) is refused too. Loop thread. */
#ifndef HUBD_NETPOLICY_H
#define HUBD_NETPOLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"

typedef struct netpolicy netpolicy_t;

/* Checks a comma-separated CIDR list ("169.254.0.0/16, fe80::/10"); a bare
 * address is a /32 or /128. 0 or -EINVAL (config_set uses it). */
int netpolicy_check_networks(const char *list);

/* Checks a comma-separated host list ("models.example, *.cdn.example,
 * 192.0.2.7, [2001:db8::1]"): -EINVAL for an item that no URL's host can
 * be, so it could never match (a bad IPv6 literal, a port, or a last label
 * that is a number in an item that is no IPv4 address: "10.0.0.256",
 * "*.0.0.1"), else 0. For config_set, as netpolicy_check_networks. */
int netpolicy_check_hosts(const char *list);

/* One "addr[/bits]" item of n bytes at s: the network in 16 bytes (IPv4 as
 * IPv4-mapped, its bits counted over all 128). 0 or -EINVAL. */
int netpolicy_cidr_parse(const char *s, size_t n, uint8_t net[16], unsigned *bits);
/* 1 when the address a (16 bytes, IPv4-mapped for IPv4) is in net/bits. */
int netpolicy_cidr_contains(const uint8_t net[16], unsigned bits, const uint8_t a[16]);

int netpolicy_new(const hubd_config_t *cfg, netpolicy_t **out);
void netpolicy_free(netpolicy_t *p);

/* 1 when a request to host (a URL's host, as url_parse gives it) may be
 * made. A name matches name items, an IP address matches items that are
 * the same address in any spelling (IPv4 and IPv4-mapped IPv6 alike);
 * deny_hosts also denies the IPv6 forms that carry a denied IPv4 address
 * (those netpolicy_addr_ok checks as that address). */
int netpolicy_host_ok(const netpolicy_t *p, const char *host);
/* 1 when a connection to sa (AF_INET or AF_INET6) may be made. */
int netpolicy_addr_ok(const netpolicy_t *p, const struct sockaddr *sa);
/* 1 when host (a URL's host) is a name, or an IP address in any spelling
 * url_parse reads that netpolicy_addr_ok admits (the same check: an
 * IPv4-mapped or other IPv6 form of an IPv4 address is judged as that
 * address too). For a request that goes through a forward proxy, where
 * hubd connects to the proxy's address, never the origin's: a literal
 * needs no DNS, so its address is known and checked before the proxy is
 * asked. A name stays the proxy's to resolve. */
int netpolicy_literal_ok(const netpolicy_t *p, const char *host);

/* The addresses the HTTP front listens on (as bound: getsockname), n of
 * them, replacing any set before. hubd never fetches from itself: a fetch
 * whose target is its own front (nested as /http://127.0.0.1:8399/http://…)
 * would hold a download slot while the inner fetch waits for one. */
void netpolicy_set_self(netpolicy_t *p, const struct sockaddr_storage *addrs, size_t n);
/* 1 when a connection to sa (address and port) would reach one of those
 * listeners: the same address, or any loopback address (127/8, ::1, the
 * unspecified 0.0.0.0 and ::, and their IPv4-mapped and other IPv6 forms)
 * when the listener is on loopback, on the listener's port. For every
 * address a connection is attempted to, after DNS. */
int netpolicy_is_self(const netpolicy_t *p, const struct sockaddr *sa);
/* The same for a URL's host (as url_parse gives it) and port, before any
 * DNS: an IP literal in any spelling, or "localhost" and *.localhost. Any
 * other name is judged by netpolicy_is_self once resolved. For every
 * request and redirect hop, a proxy's too. */
int netpolicy_host_is_self(const netpolicy_t *p, const char *host, unsigned port);

#endif
