/* netpolicy: which hosts and addresses hubd may connect to.
 *
 * hubd fetches URLs that local users name, so it must not become their way
 * into what the machine can reach but they should not: cloud metadata
 * services, link-local neighbours, or (if the admin says so) internal
 * networks. The host name of every request, redirect hops included, is
 * checked against allow_hosts / deny_hosts; every address a connection is
 * actually attempted to is checked against deny_networks (with
 * allow_networks as exceptions), after DNS, so a name that resolves to a
 * denied address (DNS rebinding) is refused too. Loop thread. */
#ifndef HUBD_NETPOLICY_H
#define HUBD_NETPOLICY_H

#include <sys/socket.h>

#include "config.h"

typedef struct netpolicy netpolicy_t;

/* Checks a comma-separated CIDR list ("169.254.0.0/16, fe80::/10"); a bare
 * address is a /32 or /128. 0 or -EINVAL (config_set uses it). */
int netpolicy_check_networks(const char *list);

int netpolicy_new(const hubd_config_t *cfg, netpolicy_t **out);
void netpolicy_free(netpolicy_t *p);

/* 1 when a request to host may be made. */
int netpolicy_host_ok(const netpolicy_t *p, const char *host);
/* 1 when a connection to sa (AF_INET or AF_INET6) may be made. */
int netpolicy_addr_ok(const netpolicy_t *p, const struct sockaddr *sa);

#endif
