/* httpd: the HTTP front's server (see httpd.h): accepting, who each peer
 * is (the peer lookup item) and the refusals decided before a request is
 * read. The top of the front's files (httpd_internal.h): it hands each
 * connection to httpd_conn.c, whose requests go to httpd_request.c's
 * router through the hooks registered here. */
#include "httpd_internal.h"
#include "log.h"
#include "peeruid.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- per-uid connection counts ---------------------------------------- */

static unsigned uid_conns(const httpd_t *h, uid_t uid)
{
    unsigned n = 0;
    for (list_node_t *x = list_first(&h->conns); x; x = list_next(&h->conns, x)) {
        const hconn_t *o = list_entry(x, hconn_t, node);
        n += o->counted && o->who.charged == uid;
    }
    return n;
}

/* ---- who is it ---------------------------------------------------------- */

/* Pool: the kernel's socket table (peeruid.h), then NSS for the groups. */
static void peer_work(uv_work_t *w)
{
    hconn_t *c = w->data;
    uid_t uid;
    ino_t ino;
    const char *how = "";
    gid_t gids[PRINCIPAL_MAX_GIDS];
    unsigned ngids = 0;
    c->item_err = -peeruid_lookup((struct sockaddr *)&c->local, (struct sockaddr *)&c->peer, &uid,
                                  &ino, &how);
    if (c->item_err)
        return;
    /* hubd's own fetch, come back through its front (a target naming the
     * front, a name resolving to it: netpolicy refuses both, this is the
     * last line). Not "its uid": hubd's user may be its clients' too (a
     * per-user daemon, root in tests). The peer's socket is: if its inode
     * is open in this process, hubd is the client. Only hubd's uid can own
     * such a socket, so others' lookups skip the scan. */
    c->peer_self = uid == geteuid() && peeruid_is_own(ino) == 1;
    if (c->peer_self)
        return;
    peeruid_groups(uid, gids, PRINCIPAL_MAX_GIDS, &ngids);
    principal_from_tcp(&c->who, uid, gids, ngids);
}

static void after_peer(uv_work_t *w, int status)
{
    hconn_t *c = w->data;
    httpd_t *h = c->srv;
    if (hconn_item_back(c))
        return; /* closing: c may be freed */
    if (!status && !c->item_err)
        principal_charge(h->d.acl, &c->who); /* the acl is the loop's: charged here */
    if (status || c->item_err) {
        /* ENOENT: the peer's socket is gone already (it connected and left,
         * as a port probe does); else the lookup failed. */
        log_msg(c->item_err == ENOENT ? LOG_LVL_INFO : LOG_LVL_WARN,
                "http front: refused a connection whose user cannot be found (%s)",
                status ? "cancelled" : strerror(c->item_err));
        hreq_refuse(c, 403, "permission_denied",
                    "hubd cannot tell which local user this connection belongs to");
    } else if (c->peer_self) {
        log_warn("http front: refused a connection from hubd itself (pid %ld): a fetch "
                 "named the front",
                 (long)getpid());
        hreq_refuse(
            c, 403, "forbidden",
            "this connection comes from hubd itself: the HTTP front never serves hubd's own "
            "fetches");
    } else if (!principal_may_use_front(h->d.acl, &c->who)) {
        hreq_refuse_unknown_user(c);
    } else if (uid_conns(h, c->who.charged) >= HTTPD_MAX_CONNS_PER_UID) {
        char msg[160];
        snprintf(msg, sizeof msg, "uid %u has %d connections to the HTTP front already",
                 (unsigned)c->who.uid, HTTPD_MAX_CONNS_PER_UID);
        hreq_refuse(c, 429, "too_many_requests", msg);
    } else {
        c->counted = 1;
        log_debug("http front uid %u: connected", (unsigned)c->who.uid);
    }
    /* A refused client gets a short while to send its request (and read
     * why), not the idle timeout: refusals must not hold descriptors. */
    hconn_read_start(c, c->refuse_status ? HTTPD_REFUSED_MS : HTTPD_IDLE_TIMEOUT_MS);
}

/* ---- the server --------------------------------------------------------- */

static void on_accepted_closed(uv_handle_t *hd)
{
    free(hd);
}

/* The listener accepts into a uv_tcp_t; a connection here is watched by a
 * uv_poll_t (sendfile needs the socket's writability), and libuv allows one
 * handle per descriptor: the front takes a duplicate and the accepted
 * handle is closed (the socket stays open through the duplicate). */
void httpd_accept(uv_loop_t *loop, httpd_t *h, tcp_listener_t *l)
{
    uv_tcp_t *t = malloc(sizeof *t);
    if (!t) {
        log_warn("http front: no memory for a client");
        return;
    }
    uv_tcp_init(loop, t);
    uv_os_fd_t fd;
    if (tcp_listener_accept(l, t) == 0 && h && !h->closing &&
        uv_fileno((uv_handle_t *)t, &fd) == 0) {
        int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup >= 0)
            httpd_take(h, dup);
        else
            log_warn("http front: cannot take a client: %s", strerror(errno));
    }
    uv_close((uv_handle_t *)t, on_accepted_closed);
}

void httpd_take(httpd_t *h, int fd)
{
    /* Past twice the limit not even a 503: each refused connection holds
     * a descriptor and its buffers until answered. */
    unsigned max = h->d.metrics ? HTTPD_METRICS_MAX_CONNS : HTTPD_MAX_CONNS;
    hconn_t *c = h->nconns < 2 * max ? calloc(1, sizeof *c) : NULL;
    if (!c || h->closing) {
        if (!h->closing)
            h->stats.refused++;
        free(c);
        close(fd);
        return;
    }
    c->srv = h;
    c->fd = fd;
    socklen_t ll = sizeof c->local, pl = sizeof c->peer;
    if (uv_poll_init_socket(h->d.loop, &c->poll, fd)) {
        free(c);
        close(fd);
        return;
    }
    list_push_front(&h->conns, &c->node);
    h->nconns++;
    memtrim_note(&h->trim, 1);
    h->stats.connections++;
    c->poll.data = c;
    uv_timer_init(h->d.loop, &c->timer);
    c->timer.data = c;
    static llhttp_settings_t settings;
    static int settings_made;
    if (!settings_made) {
        hreq_settings_init(&settings);
        settings_made = 1;
    }
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    c->state = HC_PEER;
    if (h->nconns > max) { /* no lookup: answered once its head is in */
        hreq_refuse(c, 503, "busy", "the HTTP front has too many connections");
        hconn_read_start(c, HTTPD_REFUSED_MS);
        return;
    }
    if (getsockname(fd, (struct sockaddr *)&c->local, &ll) ||
        getpeername(fd, (struct sockaddr *)&c->peer, &pl)) {
        hconn_close(c);
        return;
    }
    if (h->d.metrics) { /* unauthenticated: whoever it is, read its request */
        hconn_read_start(c, HTTPD_IDLE_TIMEOUT_MS);
        return;
    }
    c->work.data = c;
    c->item_out = 1;
    if (uv_queue_work(h->d.loop, &c->work, peer_work, after_peer)) {
        c->item_out = 0;
        hconn_close(c);
    }
}

int httpd_new(const httpd_deps_t *deps, httpd_t **out)
{
    httpd_t *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->d = *deps;
    h->hooks = &hreq_hooks;
    if (memtrim_init(&h->trim, deps->loop)) {
        free(h);
        return -ENOMEM;
    }
    /* The Hub's commits are the /hf route's: the metrics server has no jobs. */
    if (hreq_routes_init(h) ||
        (!deps->metrics && hf_revs_new(deps->loop, jobs_work(deps->jobs), deps->db, &h->revs))) {
        for (size_t i = 0; i < HTTPD_ROUTES_MAX; i++)
            free(h->route_mem[i]);
        memtrim_close(&h->trim);
        free(h);
        return -ENOMEM;
    }
    list_init(&h->conns);
    uv_timer_init(deps->loop, &h->closer);
    h->closer.data = h;
    *out = h;
    return 0;
}

void httpd_get_stats(const httpd_t *h, httpd_stats_t *out)
{
    *out = h->stats;
    out->open = h->nconns;
}
