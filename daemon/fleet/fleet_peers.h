/* fleet_peers: the cluster's members (fleet_peers) and which of them seeds
 * a file.
 *
 * The file lists every node's fleet_listen, "ip:port" or "[ip6]:port", one
 * a line ('#' starts a comment; blank lines are fine). A node finds itself
 * in it by its own fleet_listen. Names are never looked up: a member is
 * the address it listens on.
 *
 * The seed of a file is chosen by rendezvous (highest random weight)
 * hashing: each member's weight for a SHA-256 is the first 8 bytes of
 * SHA-256(sha256 hex "\n" member text), and the heaviest seeds. Every node
 * with the same list works out the same order with no word exchanged; a
 * member that leaves moves only the files it seeded, to the next in each
 * file's order; and the files of a sharded model spread over the members,
 * so their origin fetches run in parallel.
 *
 * Pure except fleet_peers_load (reads the file: start-up or a pool item). */
#ifndef HUBD_FLEET_PEERS_H
#define HUBD_FLEET_PEERS_H

#include <stddef.h>

#define FLEET_PEERS_MAX 4096           /* members in one list */
#define FLEET_PEERS_FILE_MAX (1 << 20) /* bytes of the file read */

typedef struct fleet_peer {
    char text[64]; /* as hostport_format writes it: "10.0.0.1:6881", "[fd00::1]:6881" */
    char ip[46];   /* its numeric address, without brackets */
    int port;      /* its peer port (the metadata exchange answers on port+1) */
} fleet_peer_t;

typedef struct fleet_peers {
    fleet_peer_t *v; /* malloc'd, in the file's order */
    size_t n;
    size_t self; /* this node's index */
} fleet_peers_t;

/* Parses the list's text; self is this node's fleet_listen. 0, or -EINVAL
 * with err naming the line and what is wrong (not an address, listed
 * twice, self not listed), -E2BIG past FLEET_PEERS_MAX, -ENOMEM. */
int fleet_peers_parse(const char *text, const char *self, fleet_peers_t *out, char *err,
                      size_t errlen);

/* Reads path (at most FLEET_PEERS_FILE_MAX bytes) and parses it. Blocking. */
int fleet_peers_load(const char *path, const char *self, fleet_peers_t *out, char *err,
                     size_t errlen);

void fleet_peers_free(fleet_peers_t *p);

/* The members' indexes into order[0..p->n), the seed of sha256 first. */
void fleet_peers_order(const fleet_peers_t *p, const char *sha256, size_t *order);

#endif
