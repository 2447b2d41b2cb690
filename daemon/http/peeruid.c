/* peeruid: the owner of a loopback TCP peer, from the kernel's socket table. */
#include "peeruid.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

/* The peer's socket as the kernel lists it: its own (src) and remote (dst)
 * ends. Addresses in network byte order (an IPv4 one in the first 4 bytes),
 * ports in host order. */
typedef struct tuple {
    int family; /* AF_INET or AF_INET6 */
    uint8_t src[16];
    uint8_t dst[16];
    uint16_t sport;
    uint16_t dport;
} tuple_t;

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* One end into the tuple's form. An IPv4-mapped IPv6 address becomes IPv4:
 * the kernel hashes such a connection by its IPv4 addresses, whether the
 * socket at the other end is AF_INET or a dual-stack AF_INET6. */
static int endpoint(const struct sockaddr *sa, int *family, uint8_t addr[16], uint16_t *port)
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *family = AF_INET;
        memcpy(addr, &in->sin_addr, 4);
        *port = ntohs(in->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        *port = ntohs(in6->sin6_port);
        if (memcmp(in6->sin6_addr.s6_addr, v4mapped_prefix, 12) == 0) {
            *family = AF_INET;
            memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            *family = AF_INET6;
            memcpy(addr, in6->sin6_addr.s6_addr, 16);
        }
        return 0;
    }
    return -EAFNOSUPPORT;
}

static int is_loopback(int family, const uint8_t *a)
{
    static const uint8_t v6_loopback[16] = {[15] = 1};
    return family == AF_INET ? a[0] == 127 : memcmp(a, v6_loopback, 16) == 0;
}

/* The peer's socket: source peer, destination local. Only loopback: the
 * kernel drops a packet from outside with a 127/8 or ::1 source, so such a
 * peer is in this kernel's table; any other address may be another host's. */
static int tuple_from(tuple_t *t, const struct sockaddr *local, const struct sockaddr *peer)
{
    int lfamily, rc;
    memset(t, 0, sizeof *t);
    if ((rc = endpoint(peer, &t->family, t->src, &t->sport)) != 0 ||
        (rc = endpoint(local, &lfamily, t->dst, &t->dport)) != 0)
        return rc;
    if (lfamily != t->family) /* no connection has one end of each */
        return -EINVAL;
    if (!is_loopback(t->family, t->src))
        return -EADDRNOTAVAIL;
    return 0;
}

/* A state in which a process can still hold the peer's end of a connection
 * we accepted: established, or closing its own half. SYN_SENT is a new
 * socket reusing the tuple, not our peer; TIME_WAIT, LISTEN and request
 * sockets have no owner and read as uid 0. */
static int state_owned(unsigned state)
{
    switch (state) {
    case TCP_ESTABLISHED:
    case TCP_FIN_WAIT1:
    case TCP_FIN_WAIT2:
    case TCP_CLOSE_WAIT:
    case TCP_LAST_ACK:
    case TCP_CLOSING:
        return 1;
    default:
        return 0;
    }
}

/* ---- NETLINK_SOCK_DIAG ------------------------------------------------------ */

/* A tuple read from the kernel in IPv6 form with two IPv4-mapped ends (a
 * dual-stack socket on an IPv4 connection) brought to IPv4, as ours are;
 * an IPv4 one with the unused 12 bytes cleared (the kernel leaves them
 * unspecified). */
static void tuple_unmap(tuple_t *t)
{
    if (t->family == AF_INET6 && memcmp(t->src, v4mapped_prefix, 12) == 0 &&
        memcmp(t->dst, v4mapped_prefix, 12) == 0) {
        t->family = AF_INET;
        memmove(t->src, t->src + 12, 4);
        memmove(t->dst, t->dst + 12, 4);
    }
    if (t->family == AF_INET) {
        memset(t->src + 4, 0, 12);
        memset(t->dst + 4, 0, 12);
    }
}

static void tuple_from_diag(tuple_t *t, const struct inet_diag_msg *m)
{
    memset(t, 0, sizeof *t);
    t->family = m->idiag_family;
    memcpy(t->src, m->id.idiag_src, 16);
    memcpy(t->dst, m->id.idiag_dst, 16);
    t->sport = ntohs(m->id.idiag_sport);
    t->dport = ntohs(m->id.idiag_dport);
    tuple_unmap(t);
}

/* One exact lookup (no dump): the kernel finds the socket by its hash, as
 * it would route a packet to it. That lookup falls back to listeners, so
 * the answer's 4-tuple and state are checked, not trusted. */
static int diag_query(int fd, const tuple_t *want, uid_t *uid, ino_t *inode)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } msg;
    memset(&msg, 0, sizeof msg);
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.nlh.nlmsg_seq = 1;
    msg.req.sdiag_family = (uint8_t)want->family;
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = ~0u; /* ignored by an exact lookup; the answer's state is checked */
    msg.req.id.idiag_sport = htons(want->sport);
    msg.req.id.idiag_dport = htons(want->dport);
    memcpy(msg.req.id.idiag_src, want->src, 16);
    memcpy(msg.req.id.idiag_dst, want->dst, 16);
    msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE; /* any socket: we know no cookie */
    msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK}; /* nl_pid 0: the kernel */
    if (sendto(fd, &msg, sizeof msg, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        return -errno;

    /* One datagram: the socket's message, or an error (-ENOENT: none). */
    long buf[2048 / sizeof(long)]; /* aligned for nlmsghdr */
    struct sockaddr_nl from;
    socklen_t fromlen = sizeof from;
    ssize_t len = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &fromlen);
    if (len < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
    if (fromlen < sizeof from || from.nl_pid != 0) /* only the kernel answers for sockets */
        return -EPROTO;
    int left = (int)len; /* signed: NLMSG_NEXT may take it below 0, and NLMSG_OK must see that */
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_seq != msg.nlh.nlmsg_seq)
            continue;
        if (h->nlmsg_type == NLMSG_ERROR) {
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                return -EPROTO;
            const struct nlmsgerr *e = NLMSG_DATA(h);
            return e->error < 0 ? e->error : -EPROTO;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
            h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
            return -EPROTO;
        const struct inet_diag_msg *m = NLMSG_DATA(h);
        tuple_t got;
        tuple_from_diag(&got, m);
        if (memcmp(&got, want, sizeof got) != 0 || !state_owned(m->idiag_state) ||
            m->idiag_inode == 0)
            return -ENOENT;
        *uid = m->idiag_uid;
        *inode = m->idiag_inode;
        return 0;
    }
    return -EPROTO;
}

static int lookup_diag(const tuple_t *want, uid_t *uid, ino_t *inode)
{
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    /* The kernel answers at once or not at all; a pool thread must not hang. */
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int rc = diag_query(fd, want, uid, inode);
    close(fd);
    return rc;
}

/* ---- /proc/net/tcp{,6} ------------------------------------------------------ */

/* An address as /proc prints it: the 32-bit words of the address in memory,
 * each as a host-order hex number. n: 4 or 16 bytes. */
static int proc_addr(const char *hex, uint8_t *out, size_t n)
{
    if (strlen(hex) != n * 2)
        return -EINVAL;
    for (size_t w = 0; w < n / 4; w++) {
        char word[9];
        memcpy(word, hex + w * 8, 8);
        word[8] = '\0';
        char *end;
        uint32_t v = (uint32_t)strtoul(word, &end, 16);
        if (*end)
            return -EINVAL;
        memcpy(out + w * 4, &v, 4);
    }
    return 0;
}

/* One line of the table into a tuple, its state, uid and inode; -EINVAL
 * for the header line or anything else not a socket. */
static int proc_line(const char *line, int family, tuple_t *t, unsigned *state, uid_t *uid,
                     ino_t *inode)
{
    char src[33], dst[33];
    unsigned sport, dport, st;
    unsigned long u, ino;
    if (sscanf(line, " %*u: %32[0-9A-Fa-f]:%x %32[0-9A-Fa-f]:%x %x %*x:%*x %*x:%*x %*x %lu %*d %lu",
               src, &sport, dst, &dport, &st, &u, &ino) != 7)
        return -EINVAL;
    size_t n = family == AF_INET ? 4 : 16;
    memset(t, 0, sizeof *t);
    t->family = family;
    if (proc_addr(src, t->src, n) != 0 || proc_addr(dst, t->dst, n) != 0 || sport > 0xffff ||
        dport > 0xffff)
        return -EINVAL;
    tuple_unmap(t);
    t->sport = (uint16_t)sport;
    t->dport = (uint16_t)dport;
    *state = st;
    *uid = (uid_t)u;
    *inode = (ino_t)ino;
    return 0;
}

/* Scans one table for the tuple: 0, -ENOENT, or the open's error. */
static int proc_scan(const char *path, int family, const tuple_t *want, uid_t *uid, ino_t *inode)
{
    FILE *f = fopen(path, "re");
    if (!f) /* no such table (no /proc, no IPv6) is not "no such socket" */
        return errno == ENOENT ? -ENOTSUP : -errno;
    char line[512];
    int rc = -ENOENT;
    while (fgets(line, sizeof line, f)) {
        tuple_t t;
        unsigned state;
        uid_t u;
        ino_t ino;
        if (proc_line(line, family, &t, &state, &u, &ino) != 0 || memcmp(&t, want, sizeof t) != 0)
            continue;
        /* The kernel lists a tuple once, but a TIME_WAIT ghost and a live
         * socket can both carry it for an instant: a live one wins. */
        if (state_owned(state) && ino != 0) {
            *uid = u;
            *inode = ino;
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

/* An IPv4 connection's peer may be an AF_INET socket (in tcp) or a
 * dual-stack AF_INET6 one (in tcp6, with mapped addresses). */
static int lookup_proc(const tuple_t *want, uid_t *uid, ino_t *inode)
{
    if (want->family == AF_INET6)
        return proc_scan("/proc/net/tcp6", AF_INET6, want, uid, inode);
    int rc = proc_scan("/proc/net/tcp", AF_INET, want, uid, inode);
    if (rc != -ENOENT)
        return rc;
    rc = proc_scan("/proc/net/tcp6", AF_INET6, want, uid, inode);
    return rc == -ENOTSUP ? -ENOENT : rc; /* no IPv6: tcp's answer stands */
}

/* ---- the lookup ----------------------------------------------------------------- */

int peeruid_lookup_diag(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                        ino_t *inode)
{
    tuple_t t;
    int rc = tuple_from(&t, local, peer);
    return rc ? rc : lookup_diag(&t, uid, inode);
}

int peeruid_lookup_proc(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                        ino_t *inode)
{
    tuple_t t;
    int rc = tuple_from(&t, local, peer);
    return rc ? rc : lookup_proc(&t, uid, inode);
}

int peeruid_lookup(const struct sockaddr *local, const struct sockaddr *peer, uid_t *uid,
                   ino_t *inode, const char **how)
{
    tuple_t t;
    *how = "sock_diag";
    int rc = tuple_from(&t, local, peer);
    if (rc != 0)
        return rc;
    rc = lookup_diag(&t, uid, inode);
    if (rc == 0)
        return 0;
    /* Any failure, -ENOENT too, is confirmed in /proc: a kernel without
     * tcp_diag also answers -ENOENT, and a closed peer is the rare case. */
    *how = "proc";
    return lookup_proc(&t, uid, inode);
}

/* ---- our own sockets ---------------------------------------------------------- */

int peeruid_is_own(ino_t inode)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -errno;
    char want[64];
    snprintf(want, sizeof want, "socket:[%lu]", (unsigned long)inode);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char link[64];
        ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (n <= 0)
            continue; /* closed meanwhile, or not ours to read */
        link[n] = '\0';
        found = strcmp(link, want) == 0;
    }
    closedir(d);
    return found;
}

/* ---- groups --------------------------------------------------------------------- */

int peeruid_groups(uid_t uid, gid_t *gids, unsigned cap, unsigned *n)
{
    *n = 0;
    size_t size = 1024;
    char *buf = NULL;
    struct passwd pw, *found = NULL;
    int err;
    do { /* grows until the entry fits; NSS says ERANGE */
        char *b = realloc(buf, size *= 2);
        if (!b) {
            free(buf);
            return -ENOMEM;
        }
        buf = b;
        err = getpwuid_r(uid, &pw, buf, size, &found);
    } while (err == ERANGE && size < (1u << 20));
    if (err != 0 || !found) {
        free(buf);
        /* No entry (0 or ENOENT): a uid alone, allowed or not by number. */
        return err == 0 || err == ENOENT ? 0 : -err;
    }

    int count = 32;
    gid_t *list = NULL;
    for (int tries = 0; tries < 4; tries++) { /* the count it asks for may grow meanwhile */
        gid_t *l = realloc(list, (size_t)count * sizeof *l);
        if (!l) {
            free(list);
            free(buf);
            return -ENOMEM;
        }
        list = l;
        int want = count;
        if (getgrouplist(pw.pw_name, pw.pw_gid, list, &want) >= 0) {
            count = want;
            break;
        }
        count = want > count ? want : count * 2;
        if (tries == 3)
            count = 0; /* give up on the supplementary ones: the primary still counts */
    }

    /* The primary first (principal_gid), then the others once each. */
    if (cap > 0)
        gids[(*n)++] = pw.pw_gid;
    for (int i = 0; i < count && *n < cap; i++) {
        unsigned j = 0;
        while (j < *n && gids[j] != list[i])
            j++;
        if (j == *n)
            gids[(*n)++] = list[i];
    }
    free(list);
    free(buf);
    return 0;
}
