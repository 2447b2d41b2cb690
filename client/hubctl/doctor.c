/* doctor: `hubctl doctor`, why this user can or cannot use the system hubd.
 *
 * One screen, a line per fact, each with what to do about it: the socket
 * file and who it admits, the user's groups (in the group database and in
 * this login session, which differ until the user logs in again), whether
 * a connection is taken and answered, and the per-user fallback. It only
 * reads: it starts no daemon (the probe of a socket-activated system
 * socket does start the system one, as any client would). */
#include "doctor.h"

#include "autostart.h"
#include "clientconf.h"
#include "conn.h"
#include "unixsock.h"
#include "util.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_GROUPS 256

/* One fact: its name in a column, then what was found. */
__attribute__((format(printf, 2, 3))) static void say(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  %-10s ", what);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

static const char *group_name(gid_t gid, char *buf, size_t cap)
{
    const struct group *g = getgrgid(gid);
    if (g)
        snprintf(buf, cap, "%s", g->gr_name);
    else
        snprintf(buf, cap, "%u", (unsigned)gid);
    return buf;
}

static int has_gid(const gid_t *v, int n, gid_t gid)
{
    for (int i = 0; i < n; i++)
        if (v[i] == gid)
            return 1;
    return 0;
}

/* Replies after HELLO: the first one (STATS's) is enough. */
static int on_reply(void *arg, const proto_msg_t *m, int fd)
{
    int *ok = arg;
    close_fd(fd);
    *ok = str_eq(m->verb, "STATS");
    return 1;
}

/* Connects and asks STATS: 0 when answered, else prints why. */
static int try_session(const char *path)
{
    int ok = 0;
    conn_t *c = conn_new(path, 0, 1, on_reply, &ok);
    conn_queue_verb(c, "STATS");
    int rc = conn_open(c); /* a refusal is said by conn_open itself */
    if (rc == 0) {
        int err = conn_run(c);
        if (err)
            conn_report(c, err);
        else if (!ok)
            fputs("hubctl: hubd's answer to STATS was not STATS\n", stderr);
        rc = err || !ok ? EXIT_UNREACHABLE : 0;
    }
    conn_free(c);
    return rc;
}

/* The socket file and whether its mode admits us: 1 yes, 0 no. */
static int socket_admits(const struct stat *st, const gid_t *groups, int ngroups)
{
    if (getuid() == 0)
        return 1;
    if (st->st_uid == getuid())
        return (st->st_mode & S_IWUSR) != 0;
    if (st->st_gid == getgid() || has_gid(groups, ngroups, st->st_gid))
        return (st->st_mode & S_IWGRP) != 0;
    return (st->st_mode & S_IWOTH) != 0;
}

int doctor_run(const char *given)
{
    /* The socket hubctl uses when one is named; no fall-back then. */
    const char *env = getenv("HUBD_SOCKET");
    const char *named = given ? given : env && *env ? env : NULL;
    const char *sock = named ? named : autostart_system_socket();
    const char *which = named ? "the hubd at" : "the system hubd at";
    /* getpwuid's answer is static: what is needed of it is copied before
     * the socket owner's look-up below overwrites it. */
    const struct passwd *pw = getpwuid(getuid());
    char user[64], gname[64];
    snprintf(user, sizeof user, "%s", pw ? pw->pw_name : "you");
    gid_t primary = pw ? pw->pw_gid : getgid();
    gid_t session[MAX_GROUPS], db[MAX_GROUPS];
    int nsession = getgroups(MAX_GROUPS, session), ndb = MAX_GROUPS;
    if (nsession < 0)
        nsession = 0;
    if (!pw || getgrouplist(user, primary, db, &ndb) < 0)
        ndb = 0;
    printf("hubctl doctor: can %s use %s %s?\n", user, which, sock);
    if (given)
        say("note", "--socket names it: hubctl uses that socket, not the system one");
    else if (named)
        say("note", "HUBD_SOCKET=%s is set: hubctl uses that socket, not the system one", env);

    struct stat st;
    if (stat(sock, &st)) {
        say("socket", "%s: %s", sock, strerror(errno));
        if (named) {
            say("fix",
                "no hubd listens there: check the path (%s), or unset it to use the "
                "system hubd",
                given ? "--socket" : "HUBD_SOCKET");
            printf("verdict: %s is not usable by %s (see fix above)\n", sock, user);
            return EXIT_UNREACHABLE;
        }
        say("fix", "no system hubd here: an admin runs `systemctl enable --now hubd.socket` "
                   "(`systemctl status hubd.socket` says why it is not there)");
        goto fallback;
    }
    char mode[16], who[160];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(st.st_mode & 07777));
    const struct passwd *owner = getpwuid(st.st_uid);
    snprintf(who, sizeof who, "%s:%s", owner ? owner->pw_name : "?",
             group_name(st.st_gid, gname, sizeof gname));
    say("socket", "%s: mode %s, %s", sock, mode, who);

    int admitted = socket_admits(&st, session, nsession);
    int in_db = has_gid(db, ndb, st.st_gid) || primary == st.st_gid;
    if (admitted) {
        say("access", "%s may connect (the socket's mode admits you)", user);
    } else if (in_db) {
        say("access", "no: %s is in group %s, but not in this login session", user, gname);
        say("fix", "log in again (or run `newgrp %s`)", gname);
    } else {
        say("access", "no: %s is not in group %s", user, gname);
        say("fix", "ask an admin to run `adduser %s %s`, then log in again", user, gname);
    }
    if (admitted) {
        fflush(stdout);
        if (try_session(sock) == 0) {
            say("answer", "%s answers", named ? "hubd" : "the system hubd");
            printf("verdict: all is well: hubctl and the Python client use %s %s\n", which, sock);
            return EXIT_OK;
        }
        if (named)
            say("answer", "none: the daemon that made %s is not running (or not answering)", sock);
        else
            say("answer", "none: see `systemctl status hubd` and `journalctl -u hubd` (an admin)");
    }
    if (named) {
        printf("verdict: %s is not usable by %s (see above)\n", sock, user);
        return EXIT_UNREACHABLE;
    }

fallback:;
    char why[PATH_MAX + 64];
    if (clientconf_user_daemon(why, sizeof why))
        say("per-user",
            "allowed: without the system hubd, hubctl starts one of your own, with "
            "its own cache in ~/.cache/hubd (turn off: HUBD_NO_USER_DAEMON=1, or "
            "user_daemon = no in %s)",
            clientconf_path());
    else
        say("per-user", "turned off (%s)", why);
    printf("verdict: the system hubd is not usable by %s (see fix above)\n", user);
    return EXIT_UNREACHABLE;
}
