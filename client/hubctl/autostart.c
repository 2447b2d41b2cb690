/* autostart: socket choice, and starting and stopping a per-user hubd. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "autostart.h"

#include "clientconf.h"
#include "unixsock.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_WAIT_MS 10000      /* a daemon opens its cache (and re-checks it) first */
#define STOP_WAIT_MS 15000       /* a stopping daemon drains its sessions (a second) */
#define LOG_KEEP_BYTES (4 << 20) /* hubd.log is rotated to hubd.log.1 past this, at start */

/* 0 when a daemon answers at path, else -errno of the connect. */
static int probe(const char *path)
{
    int fd = unixsock_connect(path, 0);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

/* Whether a daemon answers on the per-user socket: 1, 0, or -EPERM (said)
 * when it is another user's (autostart_check_peer). */
static int answers_ours(const char *path)
{
    int fd = unixsock_connect(path, 0);
    if (fd < 0)
        return 0;
    int rc = autostart_check_peer(fd, path);
    close(fd);
    return rc ? rc : 1;
}

void autostart_refused_hint(const char *path)
{
    struct stat st;
    const struct group *g = stat(path, &st) == 0 ? getgrgid(st.st_gid) : NULL;
    const struct passwd *pw = getpwuid(getuid());
    if (g && st.st_gid != 0)
        fprintf(stderr, "hubctl: ask an admin to run `adduser %s %s`, then log in again\n",
                pw ? pw->pw_name : "$USER", g->gr_name);
    else
        fprintf(stderr, "hubctl: ask an admin to let you use it (socket_group in hubd.conf)\n");
}

const char *autostart_system_socket(void)
{
    const char *s = getenv("HUBD_SYSTEM_SOCKET");
    return s && *s ? s : "/run/hubd/hubd.sock";
}

void autostart_service_hint(const char *path)
{
    if (strcmp(path, autostart_system_socket()) == 0)
        fputs("hubctl: the system hubd may be failing to start: see `systemctl status hubd` and "
              "`journalctl -u hubd` (`hubctl doctor` checks the rest)\n",
              stderr);
}

/* Whether this machine has a system hubd: its socket unit is installed
 * ($HUBD_SYSTEM_UNIT names the file to look for instead; empty: none). */
static int system_unit_installed(void)
{
    const char *env = getenv("HUBD_SYSTEM_UNIT");
    if (env)
        return *env && access(env, F_OK) == 0;
    static const char *const units[] = {"/etc/systemd/system/hubd.socket",
                                        "/lib/systemd/system/hubd.socket",
                                        "/usr/lib/systemd/system/hubd.socket"};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (access(units[i], F_OK) == 0)
            return 1;
    return 0;
}

static void say_turned_off(const char *why)
{
    fprintf(stderr, "hubctl: no per-user hubd either: it is turned off (%s)\n", why);
}

/* Whether dir may hold this user's socket: a folder that no one else can
 * write into, so that no one else could have put a socket, or a symlink to
 * theirs, in it, and that the user can write into, so that a daemon of
 * theirs can run there (su from root keeps root's 0700 /run/user/0). var:
 * the variable that named it ($XDG_RUNTIME_DIR: after symlinks, the user's
 * or root's, no group or other write); NULL for /tmp/hubd-UID, which
 * hubctl makes itself (the user's alone, 0700, st from lstat). Returns 0,
 * or -EPERM / -EACCES after saying what was wrong and what to do. */
static int private_dir_ok(const char *dir, const struct stat *st, const char *var)
{
    uid_t me = getuid();
    int ok =
        var ? S_ISDIR(st->st_mode) && (st->st_uid == me || st->st_uid == 0) && !(st->st_mode & 022)
            : S_ISDIR(st->st_mode) && st->st_uid == me && !(st->st_mode & 077);
    if (!ok) {
        fprintf(stderr,
                "hubctl: %s%s%s is not a private folder of yours (%s, owner uid %u, mode %04o; "
                "you are uid %u): refusing to use or start a daemon there; %s\n",
                var ? var : "", var ? "=" : "", dir,
                S_ISDIR(st->st_mode)   ? "a folder"
                : S_ISLNK(st->st_mode) ? "a symlink"
                                       : "not a folder",
                (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), (unsigned)me,
                var ? "point it at a folder of your own (mode 0700), or unset it"
                    : "remove it, or set XDG_RUNTIME_DIR");
        return -EPERM;
    }
    if (access(dir, W_OK | X_OK) == 0)
        return 0;
    int rc = -errno;
    fprintf(stderr,
            "hubctl: %s%s%s is not writable by you (owner uid %u, mode %04o; you are uid %u): no "
            "per-user daemon can run there; %s\n",
            var ? var : "", var ? "=" : "", dir, (unsigned)st->st_uid,
            (unsigned)(st->st_mode & 07777), (unsigned)me,
            var ? "unset XDG_RUNTIME_DIR or point it at a folder of your own"
                : "remove it, or set XDG_RUNTIME_DIR");
    return rc;
}

/* The per-user daemon's folder: $XDG_RUNTIME_DIR without trailing slashes
 * (the Python client drops them too, so both name the socket alike), else
 * /tmp/hubd-UID. Returns whether $XDG_RUNTIME_DIR named it. */
static int user_dir(char *dir, size_t cap)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (!run || !*run) {
        snprintf(dir, cap, "/tmp/hubd-%u", (unsigned)getuid());
        return 0;
    }
    snprintf(dir, cap, "%s", run);
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
        dir[n - 1] = '\0';
    return 1;
}

/* The per-user socket in dir. */
static void socket_in(char *out, size_t cap, const char *dir)
{
    snprintf(out, cap, "%s%shubd.sock", dir, strcmp(dir, "/") ? "/" : "");
}

/* path with its folder's symlinks resolved (the folder as it is spelled
 * when it cannot be resolved): how two spellings of a socket that is not
 * there are compared. */
static void resolved(const char *path, char *out, size_t cap)
{
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    snprintf(out, cap, "%s/%s", realpath(dir, real) ? real : dir, base);
}

/* Whether path names the per-user socket mine, however spelled (double or
 * trailing slashes, a symlink, a relative path): the same file (st_dev,
 * st_ino) when both are there, else the same resolved folder and name. */
static int is_user_socket(const char *path, const char *mine)
{
    struct stat a, b;
    if (stat(path, &a) == 0 && stat(mine, &b) == 0)
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    char ra[PATH_MAX * 2], rb[PATH_MAX * 2];
    resolved(path, ra, sizeof ra);
    resolved(mine, rb, sizeof rb);
    return strcmp(ra, rb) == 0;
}

int autostart_check_peer(int fd, const char *path)
{
    char dir[PATH_MAX], mine[PATH_MAX + 16];
    user_dir(dir, sizeof dir);
    socket_in(mine, sizeof mine, dir);
    if (!is_user_socket(path, mine))
        return 0; /* chosen by path: the system socket, --socket, $HUBD_SOCKET */
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
        int rc = -errno;
        fprintf(stderr, "hubctl: cannot tell who runs the hubd on %s: %s\n", path, strerror(errno));
        return rc;
    }
    if (cred.uid == getuid() || cred.uid == 0)
        return 0;
    fprintf(stderr,
            "hubctl: the hubd on %s is run by uid %u (pid %d), not by you (uid %u): refusing "
            "to send it anything; remove that socket, or ask root who planted it\n",
            path, (unsigned)cred.uid, (int)cred.pid, (unsigned)getuid());
    return -EPERM;
}

/* The per-user socket, in $XDG_RUNTIME_DIR (a private 0700 folder systemd
 * makes; but su and sudo -E pass the first user's on) or else in
 * /tmp/hubd-UID, which anyone could have made first to put their own
 * daemon there. Either is made 0700 when missing, then checked. Returns 0,
 * or -errno after saying why not (out is then left alone). */
static int user_socket(char *out, size_t cap)
{
    char dir[PATH_MAX];
    struct stat st;
    int xdg = user_dir(dir, sizeof dir);
    const char *call = "mkdir";
    int rc = mkdir(dir, 0700) && errno != EEXIST ? -errno : 0;
    if (!rc) {
        call = xdg ? "stat" : "lstat";
        rc = (xdg ? stat(dir, &st) : lstat(dir, &st)) ? -errno : 0;
    }
    if (rc) {
        fprintf(stderr,
                "hubctl: cannot %s the per-user daemon's folder %s%s (%s: %s): refusing to use or "
                "start a daemon there; %s\n",
                strcmp(call, "mkdir") ? "check" : "make", xdg ? "XDG_RUNTIME_DIR=" : "", dir, call,
                strerror(-rc),
                xdg ? "unset XDG_RUNTIME_DIR or point it at a folder of your own"
                    : "remove it, or set XDG_RUNTIME_DIR");
        return rc;
    }
    rc = private_dir_ok(dir, &st, xdg ? "XDG_RUNTIME_DIR" : NULL);
    if (rc)
        return rc;
    socket_in(out, cap, dir);
    return 0;
}

static void sleep_ms(int ms)
{
    poll(NULL, 0, ms);
}

/* The hubd to start: $HUBD_BIN, else one installed beside hubctl (bin/ and
 * sbin/, or the build tree's daemon/), else /usr/sbin/hubd. */
static int find_hubd(char *out, size_t cap)
{
    const char *env = getenv("HUBD_BIN");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return access(out, X_OK) == 0 ? 0 : -errno;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        static const char *const rel[] = {"hubd", "../sbin/hubd", "../daemon/hubd"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            int n = snprintf(out, cap, "%s/%s", self, rel[i]);
            if (n > 0 && (size_t)n < cap && access(out, X_OK) == 0)
                return 0;
        }
    }
    snprintf(out, cap, "/usr/sbin/hubd");
    return access(out, X_OK) == 0 ? 0 : -ENOENT;
}

/* Starts hubd --user-mode in its own session, its output appended to
 * hubd.log beside the socket, and waits until it answers. */
static int spawn_daemon(const char *sock, int quiet)
{
    char hubd[PATH_MAX], log[PATH_MAX];
    int rc = find_hubd(hubd, sizeof hubd);
    if (rc) {
        fprintf(stderr,
                "hubctl: no hubd answers and none can be started: %s not found (set "
                "HUBD_BIN)\n",
                hubd);
        return rc;
    }
    /* The user's own cache, even for root (whose system cache is another
     * daemon's). */
    char cache[PATH_MAX];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(cache, sizeof cache, "%s/hubd", xdg);
    else if (home && *home)
        snprintf(cache, sizeof cache, "%s/.cache/hubd", home);
    else {
        fprintf(stderr, "hubctl: neither XDG_CACHE_HOME nor HOME is set: no per-user cache\n");
        return -EINVAL;
    }
    snprintf(log, sizeof log, "%s", sock);
    char *slash = strrchr(log, '/');
    snprintf(slash ? slash + 1 : log, sizeof log - (size_t)(slash ? slash + 1 - log : 0),
             "hubd.log");
    /* Bounded: a log past LOG_KEEP_BYTES becomes hubd.log.1 (the one
     * before goes), as logrotate's copy would. */
    struct stat st;
    if (stat(log, &st) == 0 && st.st_size > LOG_KEEP_BYTES) {
        char old[PATH_MAX + 2];
        snprintf(old, sizeof old, "%s.1", log);
        rename(log, old);
    }
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        setsid(); /* no terminal signal reaches it */
        int in = open("/dev/null", O_RDONLY);
        int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
        if (in >= 0)
            dup2(in, STDIN_FILENO);
        if (out >= 0) {
            dup2(out, STDOUT_FILENO);
            dup2(out, STDERR_FILENO);
        }
        /* Nothing of ours but the three standard streams goes along. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        execl(hubd, "hubd", "--user-mode", "--socket", sock, "--cache-dir", cache, (char *)NULL);
        _exit(127);
    }
    if (!quiet)
        fprintf(stderr, "hubctl: started a per-user hubd (pid %d) on %s\n", (int)pid, sock);
    int status = 0, exited = 0;
    for (int waited = 0; waited < START_WAIT_MS; waited += 20) {
        int up = answers_ours(sock);
        if (up)
            return up < 0 ? up : 0; /* ours, or one another hubctl started at the same time */
        if (!exited && waitpid(pid, &status, WNOHANG) == pid)
            exited = 1; /* it lost the race for the cache, or failed: see below */
        sleep_ms(20);
    }
    if (!exited) {
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        fprintf(stderr, "hubctl: the per-user hubd did not answer within %d s; see %s\n",
                START_WAIT_MS / 1000, log);
        return -ETIMEDOUT;
    }
    fprintf(stderr, "hubctl: the per-user hubd exited (status %d); see %s\n",
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), log);
    return -ECHILD;
}

int autostart_socket(const char *explicit_path, int may_start, int quiet, char *out, size_t cap)
{
    out[0] = '\0'; /* stays empty when the per-user folder fails (said) */
    const char *env = getenv("HUBD_SOCKET");
    if (explicit_path || (env && *env)) {
        snprintf(out, cap, "%s", explicit_path ? explicit_path : env);
        return 0;
    }
    int sys = probe(autostart_system_socket());
    if (sys == 0) {
        snprintf(out, cap, "%s", autostart_system_socket());
        return 0;
    }
    /* A system daemon that is there but not for us: say so, and how to get
     * in, before a per-user daemon hides it (its own cache, downloads
     * again what the machine already has). */
    if (sys == -EACCES && !quiet) {
        fprintf(stderr, "hubctl: the system hubd at %s refused you (permission denied)\n",
                autostart_system_socket());
        autostart_refused_hint(autostart_system_socket());
    }
    /* Turned off (an admin's client.conf, or the user's environment): no
     * per-user daemon is used or started, so nothing goes to the home
     * folder behind the user's back. */
    char why[PATH_MAX + 64];
    if (!clientconf_user_daemon(why, sizeof why)) {
        if (!quiet && sys != -EACCES) {
            fprintf(stderr, "hubctl: no system hubd answers at %s (%s)\n",
                    autostart_system_socket(), strerror(-sys));
            autostart_service_hint(autostart_system_socket());
        }
        if (!quiet)
            say_turned_off(why);
        snprintf(out, cap, "%s", autostart_system_socket());
        return -ECANCELED;
    }
    if (sys == -EACCES && !quiet && may_start)
        fprintf(stderr, "hubctl: meanwhile, a per-user hubd with its own cache\n");
    int rc = user_socket(out, cap);
    if (!rc)
        rc = answers_ours(out);
    if (rc)
        return rc < 0 ? rc : 0;
    /* The machine has a system hubd, and it does not answer: it failed (a
     * bad hubd.conf leaves systemd's socket failed and gone) or an admin
     * stopped it. A per-user daemon in its place would fill the home
     * folder behind the user's back; say where to look instead. */
    if (may_start && sys != -EACCES && system_unit_installed()) {
        if (!quiet) {
            fprintf(stderr,
                    "hubctl: this machine's hubd (hubd.socket) does not answer at %s (%s)\n",
                    autostart_system_socket(), strerror(-sys));
            autostart_service_hint(autostart_system_socket());
            fputs("hubctl: no per-user hubd is started in its place; to use one meanwhile: "
                  "export HUBD_SOCKET=\"$(hubctl start)\"\n",
                  stderr);
        }
        snprintf(out, cap, "%s", autostart_system_socket());
        return -ECANCELED;
    }
    if (!may_start) {
        if (!quiet)
            fprintf(stderr,
                    "hubctl: no hubd is running (none answers at %s or at %s); this command "
                    "does not start one (hubctl start, or a fetch, does)\n",
                    autostart_system_socket(), out);
        return -ENOENT;
    }
    return spawn_daemon(out, quiet);
}

int autostart_start(int quiet, char *out, size_t cap)
{
    char why[PATH_MAX + 64];
    if (!clientconf_user_daemon(why, sizeof why)) {
        if (!quiet)
            say_turned_off(why);
        return -ECANCELED;
    }
    int rc = user_socket(out, cap);
    if (!rc)
        rc = answers_ours(out);
    if (rc)
        return rc < 0 ? rc : 0;
    return spawn_daemon(out, quiet);
}

int autostart_stop(int quiet)
{
    char sock[PATH_MAX];
    int rc = user_socket(sock, sizeof sock);
    if (rc)
        return rc;
    int fd = unixsock_connect(sock, 0);
    if (fd < 0) {
        if (!quiet)
            fprintf(stderr, "hubctl: no per-user hubd is running on %s\n", sock);
        return 1;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ? -errno : 0;
    close(fd);
    if (rc)
        return rc;
    if (cred.uid != getuid()) {
        fprintf(stderr, "hubctl: the hubd on %s belongs to uid %u, not to you\n", sock,
                (unsigned)cred.uid);
        return -EPERM;
    }
    if (kill(cred.pid, SIGTERM))
        return -errno;
    for (int waited = 0; waited < STOP_WAIT_MS; waited += 20) {
        if (kill(cred.pid, 0) && errno == ESRCH) {
            if (!quiet)
                fprintf(stderr, "hubctl: stopped the per-user hubd (pid %d)\n", (int)cred.pid);
            return 0;
        }
        sleep_ms(20);
    }
    fprintf(stderr, "hubctl: hubd (pid %d) did not stop within %d s\n", (int)cred.pid,
            STOP_WAIT_MS / 1000);
    return -ETIMEDOUT;
}
