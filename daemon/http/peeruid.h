/* peeruid: who is at the other end of a loopback TCP connection.
 *
 * A Unix socket tells its server the client's uid (SO_PEERCRED); a TCP
 * socket does not. On loopback both ends live in this kernel, so the
 * kernel's table of TCP sockets holds the client's socket too, with the uid
 * of the process that created it and its inode. peeruid finds that socket
 * by the connection's 4-tuple, read backwards (its source is our peer, its
 * destination our local address), first through NETLINK_SOCK_DIAG (one
 * exact lookup) and, when netlink is refused or absent (a sandbox, a kernel
 * without inet_diag), by reading /proc/net/tcp and /proc/net/tcp6.
 *
 * Only a live socket that a process still holds counts: one in TIME_WAIT,
 * orphaned by close() (the kernel keeps it to finish the FIN exchange, with
 * no owner left: inode 0), half-open or listening is "not found", never
 * uid 0 (the kernel reports such sockets as root's).
 *
 * The tables are those of the caller's network namespace: a client in
 * another namespace does not reach our loopback, so it is not our case. uids
 * are as seen from the caller's user namespace (a uid unmapped there reads
 * as the overflow uid, 65534).
 *
 * Threads: blocking calls (a netlink round trip, file reads, NSS); run them
 * in a pool work item, never on the loop. No shared state: any thread.
 * Errors: 0 or a negative errno. */
#ifndef HUBD_PEERUID_H
#define HUBD_PEERUID_H

#include <sys/socket.h>
#include <sys/types.h>

/* The uid owning the peer's end of the connection, and that socket's inode.
 * local and peer are our accepted socket's getsockname and getpeername,
 * AF_INET or AF_INET6 (an IPv4-mapped pair, as a dual-stack listener
 * accepts from a v4 client, is looked up as IPv4), both loopback. *how is
 * set to the method that answered, "sock_diag" or "proc", for the log.
 * -ENOENT: no live owned socket has that 4-tuple (the peer closed);
 * -EADDRNOTAVAIL: not a loopback peer (it may be on another host);
 * -EAFNOSUPPORT: neither AF_INET nor AF_INET6; -EINVAL: one of each;
 * other: both methods failed (the last one's error). */
int peeruid_lookup(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                   ino_t *inode, const char **how);

/* Whether the socket of that inode (peeruid_lookup's) is open in this
 * process: 1, 0, or a negative errno when /proc/self/fd cannot be read.
 * The exact test that a loopback peer is hubd itself (a fetch of its own
 * front): a uid says which user, and hubd's user may also be the one that
 * runs its clients; an inode names one socket, and our descriptor table
 * (all threads') says whether we hold it. Reads the table: a pool thread. */
int peeruid_is_own(ino_t inode);

/* The groups of uid for access control: its primary gid first, then its
 * supplementary groups (getpwuid_r + getgrouplist; NSS may block). A uid
 * with no passwd entry has no groups: *n = 0 and 0 is returned, as it may
 * still be allowed by number. More groups than cap are cut to cap: groups
 * only ever grant access (allow_groups, admin_group), so one left out can
 * refuse a client, never let one in. */
int peeruid_groups(uid_t uid, gid_t *gids, unsigned cap, unsigned *n);

/* For tests: each method on its own, as peeruid_lookup uses them
 * (-EPROTONOSUPPORT, -EPERM, -EAGAIN... from sock_diag make it try /proc). */
int peeruid_lookup_diag(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                        ino_t *inode);
int peeruid_lookup_proc(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                        ino_t *inode);

#endif
