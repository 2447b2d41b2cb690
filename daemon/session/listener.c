/* listener: bind (or adopt), listen, accept, SO_PEERCRED. */
#include "listener.h"
#include "log.h"
#include "unixsock.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

struct listener {
    uv_pipe_t pipe;
    const hubd_config_t *cfg;
    int activated; /* the socket came from systemd: not ours to remove */
    listener_connection_cb cb;
    void *arg;
    void (*done)(void *arg); /* listener_close's */
    void *done_arg;
};

static void on_connection(uv_stream_t *server, int status)
{
    listener_t *l = server->data;
    if (status < 0) {
        log_warn("accept: %s", uv_strerror(status));
        return;
    }
    l->cb(l->arg, l);
}

int listener_accept(listener_t *l, uv_pipe_t *client, principal_t *who)
{
    int rc = uv_accept((uv_stream_t *)&l->pipe, (uv_stream_t *)client);
    if (rc)
        return rc;
    uv_os_fd_t fd;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (uv_fileno((uv_handle_t *)client, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
        log_warn("accept: cannot read the peer's credentials: closed");
        return -EPERM;
    }
    /* Its groups as of its connect: membership is read per session, not
     * only from the group lists loaded at start. Unknown (an old kernel,
     * or more than fit): the lists' members count. */
    gid_t groups[PRINCIPAL_MAX_GIDS];
    socklen_t gl = sizeof groups;
    int known = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0;
    principal_from_peercred(who, cred.uid, cred.gid, cred.pid, known ? groups : NULL,
                            known ? (unsigned)(gl / sizeof *groups) : 0);
    return 0;
}

/* A socket file left by a daemon that died is replaced; one that answers
 * belongs to a running daemon and is left alone. */
static int check_stale_socket(const char *path)
{
    int fd = unixsock_connect(path, 0);
    if (fd >= 0) {
        close(fd);
        return -EADDRINUSE;
    }
    switch (fd) {
    case -ECONNREFUSED: /* nobody listens: a dead daemon's */
        unlink(path);
        return 0;
    case -ENAMETOOLONG: /* no socket at all could be made: */
    case -EMFILE:
    case -ENFILE:
    case -ENOMEM:
    case -ENOBUFS:
        return fd;
    default: /* no file there, or not a socket: bind says what it thinks */
        return 0;
    }
}

static void make_parent_dir(const char *path)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return;
    *slash = '\0';
    if (mkdir(dir, 0755) && errno != EEXIST)
        log_warn("cannot create %s: %s", dir, strerror(errno));
}

/* Our own socket: mode through umask (never open wider than asked for a
 * moment), then the group. */
static int bind_own_socket(listener_t *l)
{
    const hubd_config_t *cfg = l->cfg;
    make_parent_dir(cfg->socket_path);
    int rc = check_stale_socket(cfg->socket_path);
    if (rc) {
        if (rc == -EADDRINUSE)
            log_err("another hubd is already listening on %s", cfg->socket_path);
        else
            log_err("cannot use socket path %s: %s", cfg->socket_path, strerror(-rc));
        return rc;
    }
    gid_t gid = (gid_t)-1;
    if (cfg->socket_group) {
        struct group *g = getgrnam(cfg->socket_group);
        if (!g) {
            log_err("socket_group %s: no such group", cfg->socket_group);
            return -ENOENT;
        }
        gid = g->gr_gid;
    }
    mode_t old = umask(~(mode_t)cfg->socket_mode & 0777);
    rc = uv_pipe_bind(&l->pipe, cfg->socket_path);
    umask(old);
    if (rc) {
        log_err("cannot listen on %s: %s", cfg->socket_path, uv_strerror(rc));
        return rc;
    }
    if (gid != (gid_t)-1 && chown(cfg->socket_path, (uid_t)-1, gid)) {
        rc = -errno;
        log_err("cannot give %s to group %s: %s", cfg->socket_path, cfg->socket_group,
                strerror(errno));
        unlink(cfg->socket_path);
    }
    return rc;
}

int listener_start(uv_loop_t *loop, const hubd_config_t *cfg, int listen_fd,
                   listener_connection_cb cb, void *arg, listener_t **out)
{
    listener_t *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->cfg = cfg;
    l->cb = cb;
    l->arg = arg;
    uv_pipe_init(loop, &l->pipe, 0);
    l->pipe.data = l;
    int rc;
    if (listen_fd >= 0) {
        l->activated = 1;
        rc = uv_pipe_open(&l->pipe, listen_fd);
        if (rc)
            log_err("cannot use the socket systemd passed: %s", uv_strerror(rc));
    } else {
        rc = bind_own_socket(l);
    }
    if (!rc && (rc = uv_listen((uv_stream_t *)&l->pipe, 128, on_connection)) != 0)
        log_err("cannot listen on %s: %s", cfg->socket_path, uv_strerror(rc));
    if (rc) {
        listener_close(l, NULL, NULL); /* the handle is open: freed in its callback */
        return rc;
    }
    *out = l;
    return 0;
}

int listener_node(const listener_t *l, struct stat *st)
{
    char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
    size_t len = sizeof path;
    int rc = uv_pipe_getsockname(&l->pipe, path, &len);
    if (rc)
        return rc;
    if (len == 0 || path[0] == '\0')
        return -ENOENT; /* an abstract socket has no file */
    return stat(path, st) ? -errno : 0;
}

void listener_unlink(listener_t *l)
{
    if (!l->activated)
        unlink(l->cfg->socket_path);
}

static void on_closed(uv_handle_t *h)
{
    listener_t *l = h->data;
    void (*done)(void *) = l->done;
    void *arg = l->done_arg;
    free(l);
    if (done)
        done(arg);
}

void listener_close(listener_t *l, void (*done)(void *arg), void *arg)
{
    l->done = done;
    l->done_arg = arg;
    uv_close((uv_handle_t *)&l->pipe, on_closed);
}
