/* Unit tests for peeruid: real loopback connections made in the test, their
 * peer's owner and socket inode found through sock_diag and through /proc
 * (each method alone, and the two agreeing), over IPv4, IPv6 and IPv4-mapped
 * IPv6; a peer of another uid (as root); a closed peer; and the groups of a
 * uid. */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peeruid.h"
#include "principal.h"

#define NOBODY 65534
#define NO_PASSWD_UID 4000123

/* Our accepted socket's two names, as the front will pass them. */
typedef struct names {
    struct sockaddr_storage local, peer;
} names_t;

static void sa_set(struct sockaddr_storage *ss, int family, const char *addr, unsigned port)
{
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        ck_assert_int_eq(inet_pton(AF_INET, addr, &in->sin_addr), 1);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        ck_assert_int_eq(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
    }
}

static unsigned sa_port(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
                                          : ((const struct sockaddr_in6 *)ss)->sin6_port);
}

/* A listener on addr, port 0; -1 when the machine has no such address
 * (no IPv6): the caller skips. */
static int listen_on(int family, const char *addr, unsigned *port)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int off = 0;
    if (family == AF_INET6) /* a dual-stack listener when addr is IPv4-mapped */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    struct sockaddr_storage ss;
    sa_set(&ss, family, addr, 0);
    socklen_t len = sizeof ss;
    if (bind(fd, (struct sockaddr *)&ss, sizeof ss) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = sa_port(&ss);
    return fd;
}

static int connect_to(int family, const char *addr, unsigned port)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_storage ss;
    sa_set(&ss, family, addr, port);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&ss, sizeof ss), 0);
    return fd;
}

static int accept_names(int lfd, names_t *n)
{
    int fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    socklen_t a = sizeof n->local, b = sizeof n->peer;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&n->local, &a), 0);
    ck_assert_int_eq(getpeername(fd, (struct sockaddr *)&n->peer, &b), 0);
    return fd;
}

static ino_t inode_of(int fd)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    return st.st_ino;
}

/* Whether this machine answers sock_diag at all (a sandbox may not). */
static int diag_works(int rc)
{
    if (rc == -EPROTONOSUPPORT || rc == -EPERM || rc == -EACCES || rc == -EAFNOSUPPORT) {
        fprintf(stderr, "peeruid: sock_diag unavailable here (%s): /proc only\n", strerror(-rc));
        return 0;
    }
    return 1;
}

/* Both methods alone, and the lookup, give uid and inode for these names. */
static void expect_owner(const names_t *n, uid_t want_uid, ino_t want_ino)
{
    const struct sockaddr *l = (const struct sockaddr *)&n->local;
    const struct sockaddr *p = (const struct sockaddr *)&n->peer;
    uid_t uid = 12345;
    ino_t ino = 0;
    int rc = peeruid_lookup_diag(l, p, &uid, &ino);
    int diag = diag_works(rc);
    if (diag) {
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(uid, want_uid);
        ck_assert_uint_eq(ino, want_ino);
    }
    uid = 12345, ino = 0;
    ck_assert_int_eq(peeruid_lookup_proc(l, p, &uid, &ino), 0);
    ck_assert_uint_eq(uid, want_uid);
    ck_assert_uint_eq(ino, want_ino);
    const char *how = NULL;
    uid = 12345, ino = 0;
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), 0);
    ck_assert_uint_eq(uid, want_uid);
    ck_assert_uint_eq(ino, want_ino);
    ck_assert_str_eq(how, diag ? "sock_diag" : "proc");
}

/* Both methods, and the lookup, find no owner. */
static void expect_gone(const names_t *n)
{
    const struct sockaddr *l = (const struct sockaddr *)&n->local;
    const struct sockaddr *p = (const struct sockaddr *)&n->peer;
    uid_t uid;
    ino_t ino;
    const char *how;
    int rc = peeruid_lookup_diag(l, p, &uid, &ino);
    if (diag_works(rc))
        ck_assert_int_eq(rc, -ENOENT);
    ck_assert_int_eq(peeruid_lookup_proc(l, p, &uid, &ino), -ENOENT);
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), -ENOENT);
}

/* A connection from a client of cfamily to caddr, through a listener of
 * lfamily on laddr: the peer is us. 0 when the machine lacks the address. */
static int check_self(int lfamily, const char *laddr, int cfamily, const char *caddr)
{
    unsigned port;
    int lfd = listen_on(lfamily, laddr, &port);
    if (lfd < 0) {
        fprintf(stderr, "peeruid: cannot listen on %s here: skipped\n", laddr);
        return 0;
    }
    int cfd = connect_to(cfamily, caddr, port);
    names_t n;
    int sfd = accept_names(lfd, &n);
    expect_owner(&n, geteuid(), inode_of(cfd));
    /* The peer's socket is open here: hubd would know itself. */
    ck_assert_int_eq(peeruid_is_own(inode_of(cfd)), 1);
    close(sfd);
    close(cfd);
    close(lfd);
    return 1;
}

START_TEST(peeruid_ipv4_peer_is_our_uid_and_socket)
{
    ck_assert(check_self(AF_INET, "127.0.0.1", AF_INET, "127.0.0.1"));
    /* Anywhere in 127/8 is loopback. */
    ck_assert(check_self(AF_INET, "127.0.0.2", AF_INET, "127.0.0.2"));
}
END_TEST

START_TEST(peeruid_ipv6_peer_is_our_uid_and_socket)
{
    check_self(AF_INET6, "::1", AF_INET6, "::1");
}
END_TEST

START_TEST(peeruid_ipv4_mapped_peer_on_a_dual_stack_listener)
{
    /* Our side sees ::ffff:127.0.0.1 both ways; the peer's socket is an
     * AF_INET one, or a dual-stack AF_INET6 one with mapped addresses. */
    if (check_self(AF_INET6, "::ffff:127.0.0.1", AF_INET, "127.0.0.1"))
        ck_assert(check_self(AF_INET6, "::ffff:127.0.0.1", AF_INET6, "::ffff:127.0.0.1"));
}
END_TEST

/* A child that makes one socket as root and one as nobody, connects both,
 * sends their inodes and holds them open until the parent is done. */
/* A child that will connect as a peer: it reports on report[1] and waits
 * for hold[0] to close; the parent keeps report[0] and hold[1]. Returns the
 * child's pid in the parent, 0 in the child. */
static pid_t fork_peer(int report[2], int hold[2])
{
    ck_assert_int_eq(pipe(report), 0);
    ck_assert_int_eq(pipe(hold), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(report[0]);
        close(hold[1]);
        return 0;
    }
    close(report[1]);
    close(hold[0]);
    return pid;
}

static void child_connects(unsigned port, int report, int hold)
{
    int as_root = socket(AF_INET, SOCK_STREAM, 0);
    if (as_root < 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) != 0)
        _exit(2);
    int as_nobody = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct stat a, b;
    if (as_nobody < 0 || connect(as_root, (struct sockaddr *)&to, sizeof to) != 0 ||
        connect(as_nobody, (struct sockaddr *)&to, sizeof to) != 0 || fstat(as_root, &a) != 0 ||
        fstat(as_nobody, &b) != 0)
        _exit(3);
    ino_t inodes[2] = {a.st_ino, b.st_ino};
    if (write(report, inodes, sizeof inodes) != sizeof inodes)
        _exit(4);
    char c;
    (void)!read(hold, &c, 1); /* EOF: the parent is done */
    _exit(0);
}

START_TEST(peeruid_peer_of_another_uid)
{
    if (geteuid() != 0) {
        fprintf(stderr, "peeruid: not root, cannot make a peer of another uid: skipped\n");
        return;
    }
    unsigned port;
    int lfd = listen_on(AF_INET, "127.0.0.1", &port);
    ck_assert_int_ge(lfd, 0);
    int report[2], hold[2];
    pid_t pid = fork_peer(report, hold);
    if (pid == 0)
        child_connects(port, report[1], hold[0]);
    ino_t inodes[2];
    ck_assert_int_eq(read(report[0], inodes, sizeof inodes), sizeof inodes);
    names_t root, nobody;
    int s1 = accept_names(lfd, &root), s2 = accept_names(lfd, &nobody);
    /* A socket is its creator's: the one made before dropping to nobody
     * stays root's although nobody's process holds it. */
    expect_owner(&root, 0, inodes[0]);
    expect_owner(&nobody, NOBODY, inodes[1]);
    /* Another process's sockets, root's one too, are not ours. */
    ck_assert_int_eq(peeruid_is_own(inodes[0]), 0);
    ck_assert_int_eq(peeruid_is_own(inodes[1]), 0);
    close(hold[1]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(s1);
    close(s2);
    close(report[0]);
    close(lfd);
}
END_TEST

/* A child that, as nobody, connects a socket of cfamily (bound to the
 * source src first, when set) to caddr:port, sends its inode and holds it
 * open until the parent is done. */
static void child_connects_as_nobody(int cfamily, const char *src, const char *caddr, unsigned port,
                                     int report, int hold)
{
    if (setresgid(NOBODY, NOBODY, NOBODY) != 0 || setresuid(NOBODY, NOBODY, NOBODY) != 0)
        _exit(2);
    int fd = socket(cfamily, SOCK_STREAM, 0);
    struct sockaddr_storage from, to;
    sa_set(&to, cfamily, caddr, port);
    if (src) {
        sa_set(&from, cfamily, src, 0);
        if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0)
            _exit(3);
    }
    struct stat st;
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0 || fstat(fd, &st) != 0)
        _exit(3);
    if (write(report, &st.st_ino, sizeof st.st_ino) != sizeof st.st_ino)
        _exit(4);
    char c;
    (void)!read(hold, &c, 1); /* EOF: the parent is done */
    _exit(0);
}

/* nobody's connection through a listener of lfamily on laddr, from a
 * client of cfamily to caddr (from src, when set): found as nobody's, with
 * its socket's inode, by both methods; not ours. 0 when the machine lacks
 * the address. */
static int check_nobody(int lfamily, const char *laddr, int cfamily, const char *src,
                        const char *caddr)
{
    unsigned port;
    int lfd = listen_on(lfamily, laddr, &port);
    if (lfd < 0) {
        fprintf(stderr, "peeruid: cannot listen on %s here: skipped\n", laddr);
        return 0;
    }
    int report[2], hold[2];
    pid_t pid = fork_peer(report, hold);
    if (pid == 0)
        child_connects_as_nobody(cfamily, src, caddr, port, report[1], hold[0]);
    ino_t ino = 0;
    ck_assert_int_eq(read(report[0], &ino, sizeof ino), sizeof ino);
    names_t n;
    int sfd = accept_names(lfd, &n);
    expect_owner(&n, NOBODY, ino);
    ck_assert_int_eq(peeruid_is_own(ino), 0);
    close(hold[1]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sfd);
    close(report[0]);
    close(lfd);
    return 1;
}

START_TEST(peeruid_another_uid_over_each_family)
{
    if (geteuid() != 0) {
        fprintf(stderr, "peeruid: not root, cannot make a peer of another uid: skipped\n");
        return;
    }
    /* Source and destination in 127/8 need not be the same address. */
    ck_assert(check_nobody(AF_INET, "127.0.0.1", AF_INET, "127.0.0.9", "127.0.0.1"));
    ck_assert(check_nobody(AF_INET, "127.0.0.5", AF_INET, NULL, "127.0.0.5"));
    check_nobody(AF_INET6, "::1", AF_INET6, NULL, "::1");
    /* A dual-stack listener: our side sees mapped addresses; nobody's
     * socket is AF_INET (in /proc/net/tcp) or a dual-stack AF_INET6 one
     * with mapped addresses (in /proc/net/tcp6). */
    if (check_nobody(AF_INET6, "::ffff:127.0.0.1", AF_INET, "127.0.0.3", "127.0.0.1"))
        ck_assert(check_nobody(AF_INET6, "::ffff:127.0.0.1", AF_INET6, NULL, "::ffff:127.0.0.1"));
}
END_TEST

START_TEST(peeruid_closed_peer_is_not_found)
{
    unsigned port;
    int lfd = listen_on(AF_INET, "127.0.0.1", &port);
    ck_assert_int_ge(lfd, 0);

    /* Closed: the kernel keeps the peer's socket to finish the FIN exchange
     * (FIN_WAIT2, with no owner), then TIME_WAIT once we close: neither is
     * a process's, though the kernel still lists them. */
    int cfd = connect_to(AF_INET, "127.0.0.1", port);
    names_t n;
    int sfd = accept_names(lfd, &n);
    close(cfd);
    expect_gone(&n);
    close(sfd);
    expect_gone(&n);

    /* Reset: gone at once. A listener then bound on the peer's port is what
     * the kernel's exact lookup falls back to: it is not the peer either. */
    cfd = connect_to(AF_INET, "127.0.0.1", port);
    sfd = accept_names(lfd, &n);
    struct linger rst = {.l_onoff = 1, .l_linger = 0};
    ck_assert_int_eq(setsockopt(cfd, SOL_SOCKET, SO_LINGER, &rst, sizeof rst), 0);
    close(cfd);
    expect_gone(&n);
    unsigned peer_port = sa_port(&n.peer);
    int squatter = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_storage at;
    sa_set(&at, AF_INET, "127.0.0.1", peer_port);
    if (bind(squatter, (struct sockaddr *)&at, sizeof at) == 0 && listen(squatter, 1) == 0)
        expect_gone(&n);
    else
        fprintf(stderr, "peeruid: the peer's port is taken again: listener case skipped\n");
    close(squatter);
    close(sfd);
    close(lfd);
}
END_TEST

START_TEST(peeruid_only_loopback_inet_peers)
{
    names_t n;
    uid_t uid;
    ino_t ino;
    const char *how;
    sa_set(&n.local, AF_INET, "127.0.0.1", 8080);
    sa_set(&n.peer, AF_INET, "10.1.2.3", 40000);
    const struct sockaddr *l = (struct sockaddr *)&n.local, *p = (struct sockaddr *)&n.peer;
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), -EADDRNOTAVAIL);
    sa_set(&n.peer, AF_INET6, "::ffff:10.1.2.3", 40000);
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), -EADDRNOTAVAIL);
    sa_set(&n.peer, AF_INET6, "::1", 40000); /* v6 peer on a v4 socket: not a connection */
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), -EINVAL);
    n.peer.ss_family = AF_UNIX;
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), -EAFNOSUPPORT);
    /* A loopback tuple nobody holds. */
    sa_set(&n.peer, AF_INET, "127.0.0.1", 1);
    ck_assert_int_eq(peeruid_lookup(l, p, &uid, &ino, &how), -ENOENT);
}
END_TEST

START_TEST(peeruid_groups_of_root_start_with_gid_0)
{
    gid_t gids[PRINCIPAL_MAX_GIDS];
    unsigned n = 99;
    ck_assert_int_eq(peeruid_groups(0, gids, PRINCIPAL_MAX_GIDS, &n), 0);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_eq(gids[0], 0);
    for (unsigned i = 1; i < n; i++) /* the primary once */
        ck_assert_uint_ne(gids[i], 0);
    ck_assert_int_eq(peeruid_groups(0, gids, 1, &n), 0); /* cut to cap */
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(peeruid_groups(0, gids, 0, &n), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* A user listed as a member of a group other than its primary one, if
 * this machine has one: that group, after the primary, each gid once. */
START_TEST(peeruid_groups_of_a_member_include_its_groups)
{
    struct group *g;
    struct passwd *pw = NULL;
    gid_t member_of = 0;
    setgrent();
    while (!pw && (g = getgrent()))
        for (char **m = g->gr_mem; *m && !pw; m++)
            if ((pw = getpwnam(*m)) && pw->pw_gid == g->gr_gid)
                pw = NULL;
            else if (pw)
                member_of = g->gr_gid;
    endgrent();
    if (!pw) {
        fprintf(stderr, "peeruid: no user with a supplementary group here: skipped\n");
        return;
    }
    uid_t uid = pw->pw_uid;
    gid_t primary = pw->pw_gid;
    gid_t gids[PRINCIPAL_MAX_GIDS];
    unsigned n = 0;
    ck_assert_int_eq(peeruid_groups(uid, gids, PRINCIPAL_MAX_GIDS, &n), 0);
    ck_assert_uint_ge(n, 2);
    ck_assert_uint_eq(gids[0], primary);
    unsigned found = 0;
    for (unsigned i = 0; i < n; i++) {
        found += gids[i] == member_of;
        for (unsigned j = i + 1; j < n; j++)
            ck_assert_uint_ne(gids[i], gids[j]);
    }
    ck_assert_uint_eq(found, 1);
    ck_assert_int_eq(peeruid_groups(uid, gids, 1, &n), 0); /* cut to cap: the primary stays */
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(gids[0], primary);
}
END_TEST

START_TEST(peeruid_groups_of_a_uid_without_passwd_entry)
{
    ck_assert_ptr_null(getpwuid(NO_PASSWD_UID));
    gid_t gids[PRINCIPAL_MAX_GIDS];
    unsigned n = 99;
    ck_assert_int_eq(peeruid_groups(NO_PASSWD_UID, gids, PRINCIPAL_MAX_GIDS, &n), 0);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(principal_from_tcp_has_groups_and_no_pid)
{
    gid_t gids[PRINCIPAL_MAX_GIDS + 4];
    for (unsigned i = 0; i < PRINCIPAL_MAX_GIDS + 4; i++)
        gids[i] = 100 + i;
    principal_t p;
    principal_from_tcp(&p, NOBODY, gids, PRINCIPAL_MAX_GIDS + 4);
    ck_assert_uint_eq(p.uid, NOBODY);
    ck_assert_uint_eq(p.ngids, PRINCIPAL_MAX_GIDS);
    ck_assert_uint_eq(principal_gid(&p), 100);
    ck_assert_uint_eq(p.gids[PRINCIPAL_MAX_GIDS - 1], 100 + PRINCIPAL_MAX_GIDS - 1);
    ck_assert_int_eq(p.pid, 0);
    ck_assert_int_eq(p.source, PRINCIPAL_TCP_DIAG);
    principal_from_tcp(&p, NO_PASSWD_UID, NULL, 0);
    ck_assert_uint_eq(p.ngids, 0);
    ck_assert_uint_eq(principal_gid(&p), (gid_t)-1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("peeruid");
    TCase *tc = tcase_create("peeruid");
    tcase_add_test(tc, peeruid_ipv4_peer_is_our_uid_and_socket);
    tcase_add_test(tc, peeruid_ipv6_peer_is_our_uid_and_socket);
    tcase_add_test(tc, peeruid_ipv4_mapped_peer_on_a_dual_stack_listener);
    tcase_add_test(tc, peeruid_another_uid_over_each_family);
    tcase_add_test(tc, peeruid_peer_of_another_uid);
    tcase_add_test(tc, peeruid_closed_peer_is_not_found);
    tcase_add_test(tc, peeruid_only_loopback_inet_peers);
    tcase_add_test(tc, peeruid_groups_of_root_start_with_gid_0);
    tcase_add_test(tc, peeruid_groups_of_a_member_include_its_groups);
    tcase_add_test(tc, peeruid_groups_of_a_uid_without_passwd_entry);
    tcase_add_test(tc, principal_from_tcp_has_groups_and_no_pid);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
