/* hostport: the loopback addresses the HTTP front listens on (http_listen).
 *
 * hubd serves its own machine, not a network: every address must be a
 * loopback one, so this module parses "host:port" lists for the config and
 * checks the sockets systemd passes. Pure: no I/O, no name lookup ("localhost"
 * is the only name, and it means both 127.0.0.1 and ::1 without asking a
 * resolver or /etc/hosts). Any thread. */
#ifndef HUBD_HOSTPORT_H
#define HUBD_HOSTPORT_H

#include <stddef.h>
#include <sys/socket.h>

#define HOSTPORT_MAX_ITEMS 8                        /* items in one http_listen list */
#define HOSTPORT_MAX_ADDRS (2 * HOSTPORT_MAX_ITEMS) /* "localhost" gives two addresses */
#define HOSTPORT_TEXT_MAX 64                        /* "[ipv6]:port" at its longest, with the NUL */

/* Parses a comma-separated list of "IPv4:port", "[IPv6]:port" or
 * "localhost:port" (127.0.0.1 then ::1) into addrs (cap entries, at least
 * HOSTPORT_MAX_ADDRS for any valid list), in the order written; *n is how
 * many. Blank text is an empty list (the front is off). Ports 1..65535;
 * addresses in 127.0.0.0/8 or ::1 (IPv4-mapped ::ffff:127.x.y.z is stored
 * as the IPv4 address it is). Returns 0; -EINVAL for an item that is not
 * one of the forms, not loopback or listed twice; -E2BIG for more than
 * HOSTPORT_MAX_ITEMS items. On error, item (itemcap bytes) holds the item
 * as written (trimmed, cut to fit) and *why a static reason that reads
 * after it: "0.0.0.0:8399" "is not a loopback address: ...". */
int hostport_parse_list(const char *text, struct sockaddr_storage *addrs, size_t cap, size_t *n,
                        char *item, size_t itemcap, const char **why);

/* One peer's "IPv4:port" or "[IPv6]:port", of any address (the swarm's
 * fleet_listen and fleet_peers lines): 0 and *out, or -EINVAL with *why
 * a reason that reads after the text ("localhost" is refused too: a peer
 * is one address). */
int hostport_parse_peer(const char *text, struct sockaddr_storage *out, const char **why);

/* Whether sa is an AF_INET address in 127.0.0.0/8 or an AF_INET6 one that
 * is ::1 or ::ffff:127.x.y.z: 1 or 0. */
int hostport_is_loopback(const struct sockaddr *sa);

/* "127.0.0.1:8399" or "[::1]:8399" into buf; the length, or -EINVAL for a
 * family other than AF_INET and AF_INET6, -E2BIG if cap is too small. */
int hostport_format(const struct sockaddr *sa, char *buf, size_t cap);

#endif
