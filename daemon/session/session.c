/* session: the session server and each session's life cycle: accept, read
 * and parse while no backpressure holds, close; the verbs (verbs.c) answer
 * the lines, the transport (transport.c) carries the bytes. */
#include "log.h"
#include "reply.h"
#include "session_core.h"
#include "verbs.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRAIN_MS 1000            /* shutdown: time a client gets to read its replies */
#define MAX_DISCARDED (1u << 20) /* bytes of one overlong line before the client is cut off */
#define MAX_LONG_LINES 16        /* overlong lines a session may send */
#define NOT_ALLOWED_MSG                                                                            \
    "this hubd serves only the users and groups it is configured for (allow_users, allow_groups)"
#define LINE_PAUSE 2 /* on_line: parsing stops here (backpressure), not closing */

static void session_close(void *arg);
static void session_pump(session_t *s);

/* ---- reading: one line at a time, while the replies are read ------------ */

static int fds_spent(const session_t *s)
{
    return s->nfds >= SESSION_MAX_FDS || quota_fds_full(&s->srv->quota, &s->who);
}

/* The fd budget is spent: the fds passed and read since the transports
 * last looked are retired (they look lazily), this session's first, then
 * those of its uid's other sessions. Runs only at the budget's end, and the
 * walk over the sessions at most once a loop turn (uv_now moves once a
 * turn): the sessions a uid's freed budget wakes all come here, and each
 * walking every session would cost the square of their number. */
static void reclaim_fds(session_t *s)
{
    transport_retire(&s->t);
    uint64_t now = uv_now(s->srv->loop);
    if (!quota_fds_full(&s->srv->quota, &s->who) || s->srv->reclaimed == now)
        return;
    s->srv->reclaimed = now;
    list_node_t *n, *tmp;
    list_foreach_safe(&s->srv->sessions, n, tmp)
    {
        session_t *o = list_entry(n, session_t, node);
        if (o != s && o->who.uid == s->who.uid && transport_open(&o->t))
            transport_retire(&o->t);
    }
}

/* Whether this session's next line must wait (see session_core.h). */
static int must_pause(session_t *s)
{
    if (fds_spent(s))
        reclaim_fds(s);
    return s->stream || fds_spent(s) || s->nfetches >= SESSION_MAX_FETCHES ||
           transport_congested(&s->t);
}

/* After each line: 1 stops the feed for good (closing), LINE_PAUSE until
 * the replies are read, 0 goes on. */
static int line_result(session_t *s)
{
    if (s->closing || !transport_open(&s->t) || s->cut)
        return 1;
    return must_pause(s) ? LINE_PAUSE : 0;
}

/* A session is logged once it says something: its first line, with the
 * client's name when that line is a HELLO. */
static void announce(session_t *s, const proto_msg_t *m)
{
    s->announced = 1;
    const char *client = strcmp(m->verb, "HELLO") == 0 ? proto_get(m, "client") : NULL;
    log_info("session pid %d uid %d gid %d: connected%s%s%s", (int)s->who.pid, (int)s->who.uid,
             (int)principal_gid(&s->who), client ? " (" : "", client ? client : "",
             client ? ")" : "");
}

static int on_line(void *arg, const char *line, size_t len, int err)
{
    session_t *s = arg;
    if (err == -ENOMEM) {
        reply_err(&s->t, NULL, "internal", "no memory to keep a line split between reads");
        return line_result(s);
    }
    if (err) {
        reply_err(&s->t, NULL, "line_too_long", "a line exceeded 16384 bytes");
        if (++s->long_lines > MAX_LONG_LINES)
            s->cut = 1;
        return line_result(s);
    }
    if (len == 0 || (len == 1 && line[0] == '\r'))
        return 0;         /* blank lines are harmless: socat users press enter */
    static proto_msg_t m; /* loop thread only; too large for the stack of a callback chain */
    if (proto_parse(line, len, &m)) {
        reply_err(&s->t, NULL, "bad_request", "the line does not parse (see PROTOCOL.md)");
        return line_result(s);
    }
    if (!s->announced)
        announce(s, &m);
    if (!principal_may_connect(&s->srv->acl, &s->who)) {
        /* allow_users or allow_groups changed by a reload since the session
         * was accepted: a revoked user's open session must not keep the
         * access a new one is refused. What it asked before goes on. */
        const char *id = proto_get(&m, "id");
        reply_err(&s->t, id && verbs_valid_id(id) ? id : NULL, "permission_denied",
                  NOT_ALLOWED_MSG);
        return line_result(s);
    }
    verbs_dispatch(s, &m, session_is_admin(s)); /* the lists of now: a reload applies */
    return line_result(s);
}

/* Nothing read is left to parse. */
static void in_drop(session_t *s)
{
    if (s->in_kept)
        free(s->in);
    s->in = NULL;
    s->in_kept = 0;
    s->in_off = s->in_len = 0;
}

/* What a read into the scratch left unparsed goes to a copy of its own:
 * the next session's read reuses the scratch. 0 or -ENOMEM. */
static int in_keep(session_t *s)
{
    size_t n = s->in_len - s->in_off;
    char *kept = malloc(n);
    if (!kept)
        return -ENOMEM;
    memcpy(kept, s->in + s->in_off, n);
    s->in = kept;
    s->in_kept = 1;
    s->in_off = 0;
    s->in_len = n;
    return 0;
}

/* The one function that decides whether a session reads: it parses what
 * was read and kept while the session may go on, and reads from the socket
 * only once nothing kept is left. Called after a read, and whenever a
 * reason to wait may have gone (a reply written, an fd passed, a fetch
 * finished, a stream ended). */
static void session_pump(session_t *s)
{
    if (s->closing || !transport_open(&s->t) || s->in_pump)
        return;
    s->in_pump = 1;
    while (s->in_off < s->in_len && !must_pause(s)) {
        size_t used = 0;
        int rc = proto_reader_feed_some(&s->reader, s->in + s->in_off, s->in_len - s->in_off,
                                        on_line, s, &used);
        s->in_off += used;
        if (rc && rc != LINE_PAUSE)
            break; /* closing, broken or cut: the caller decides */
    }
    if (s->in_off == s->in_len)
        in_drop(s);
    else if (!s->in_kept && in_keep(s)) {
        log_warn("session pid %d uid %d: no memory to keep %zu bytes read: closed", (int)s->who.pid,
                 (int)s->who.uid, s->in_len - s->in_off);
        s->in_pump = 0;
        session_close(s);
        return;
    }
    if (s->cut && !s->closing) {
        /* Line after overlong line (kept input parsed from a timer, too):
         * a client that is not speaking the protocol is cut off. */
        log_warn("session pid %d uid %d: cut off (overlong lines)", (int)s->who.pid,
                 (int)s->who.uid);
        s->in_pump = 0;
        session_close(s);
        return;
    }
    transport_read(&s->t, !s->closing && s->in_len == 0 && !must_pause(s));
    s->in_pump = 0;
}

/* ---- the transport's events ---------------------------------------------------- */

static void on_read(void *arg, ssize_t nread)
{
    session_t *s = arg;
    if (nread < 0) {
        session_close(s);
        return;
    }
    s->in = s->srv->scratch; /* read there: nothing was kept (session_pump) */
    s->in_off = 0;
    s->in_len = (size_t)nread;
    session_pump(s);
    if (s->in && !s->in_kept)
        in_drop(s); /* left in the scratch: it parses no more (closing, broken) */
    if (s->closing)
        return;
    /* An endless line: a client that is not speaking the protocol is cut
     * off (session_pump does for repeated overlong lines); others are not
     * affected. */
    s->discarded = s->reader.discarding ? s->discarded + (size_t)nread : 0;
    if (s->discarded > MAX_DISCARDED) {
        log_warn("session pid %d uid %d: cut off (overlong lines)", (int)s->who.pid,
                 (int)s->who.uid);
        session_close(s);
    }
}

static void on_written(void *arg)
{
    session_t *s = arg;
    verbs_on_written(s);
    session_pump(s);
}

static void on_tick(void *arg)
{
    session_pump(arg);
}

static void on_fd_count(void *arg, int delta)
{
    if (delta > 0)
        session_pin(arg);
    else
        session_unpin(arg);
}

static void server_finish_close(session_server_t *srv);

static void on_closed(void *arg)
{
    session_t *s = arg;
    session_server_t *srv = s->srv;
    in_drop(s);
    proto_reader_free(&s->reader);
    free(s);
    srv->nsessions--;
    memtrim_note(&srv->trim, -1);
    if (srv->closing && srv->nsessions == 0)
        server_finish_close(srv);
}

static const transport_ops_t session_transport_ops = {
    .on_read = on_read,
    .on_written = on_written,
    .on_tick = on_tick,
    .on_fd_count = on_fd_count,
    .on_close = session_close,
    .on_closed = on_closed,
};

/* ---- life cycle ---------------------------------------------------------------- */

/* The one close path of a session: the verbs give up their state (waiters
 * leave their jobs), the transport drops queued fd lines and closes, and
 * the session is freed once its handles are closed. */
static void session_close(void *arg)
{
    session_t *s = arg;
    if (s->closing)
        return;
    s->closing = 1;
    verbs_session_close(s);
    list_remove(&s->node); /* first: unpinning may wake the uid's other sessions */
    log_debug("session pid %d uid %d: closed", (int)s->who.pid, (int)s->who.uid);
    transport_close(&s->t);
}

/* Shutdown: stop reading, let queued replies (the ERR shutting_down of each
 * waiter, DONE lines waiting with their fd) reach the client, then close. A
 * client that does not read is cut off at the deadline. */
static void session_drain(session_t *s)
{
    if (!s->closing)
        transport_drain(&s->t, DRAIN_MS);
}

static void on_connection(void *arg, listener_t *l)
{
    session_server_t *srv = arg;
    session_t *s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->srv = srv;
    list_init(&s->fetches);
    list_init(&s->pending);
    list_init(&s->hfrepos);
    list_init(&s->holds);
    transport_init(&s->t, srv->loop, &session_transport_ops, s, srv->scratch, sizeof srv->scratch);
    proto_reader_init(&s->reader);
    list_push_front(&srv->sessions, &s->node);
    srv->nsessions++;
    memtrim_note(&srv->trim, 1);
    if (listener_accept(l, transport_pipe(&s->t), &s->who)) {
        session_close(s);
        return;
    }
    transport_set_pid(&s->t, s->who.pid);
    principal_charge(&srv->acl, &s->who);
    /* Logged at info with its first line (announce): hubctl's probe of the
     * socket, which sends nothing, would log every call twice. */
    log_debug("session pid %d uid %d gid %d: accepted", (int)s->who.pid, (int)s->who.uid,
              (int)principal_gid(&s->who));
    if (!principal_may_connect(&srv->acl, &s->who)) {
        log_warn("session pid %d uid %d: refused (not in allow_users or allow_groups)",
                 (int)s->who.pid, (int)s->who.uid);
        reply_err(&s->t, NULL, "permission_denied", NOT_ALLOWED_MSG);
        session_drain(s);
        return;
    }
    if (srv->closing) { /* raced with shutdown: nothing to serve */
        session_close(s);
        return;
    }
    session_pump(s);
}

/* ---- the server ---------------------------------------------------------------- */

static void on_listener_closed(void *arg)
{
    session_server_t *srv = arg;
    void (*cb)(void *) = srv->close_cb;
    void *cb_arg = srv->close_arg;
    principal_acl_free(&srv->acl);
    quota_free(&srv->quota);
    memtrim_close(&srv->trim);
    hf_meta_free(srv->hf);
    listings_free(srv->listings);
    free(srv);
    if (cb)
        cb(cb_arg);
}

/* The server goes last: after every session's handles are closed (libuv
 * runs close callbacks in no promised order, so sessions are counted). */
static void server_finish_close(session_server_t *srv)
{
    listener_close(srv->listener, on_listener_closed, srv);
}

void session_server_reload(session_server_t *srv)
{
    principal_acl_load(&srv->acl, srv->cfg);
    struct stat st;
    int rc = listener_node(srv->listener, &st);
    if (rc)
        log_warn("cannot read the socket file's owner and mode (%s): the HTTP front admits only "
                 "root, hubd and the admin group unless allow_users or allow_groups say more",
                 strerror(-rc));
    else {
        principal_node_t *n = &srv->acl.node;
        *n = (principal_node_t){.known = 1, .uid = st.st_uid, .gid = st.st_gid, .mode = st.st_mode};
        const struct group *g = getgrgid(st.st_gid); /* once per load, as the lists are */
        snprintf(n->group, sizeof n->group, "%s", g ? g->gr_name : "");
    }
}

int session_server_start(uv_loop_t *loop, const hubd_config_t *cfg, jobs_t *jobs, db_t *db,
                         store_t *store, int listen_fd, session_server_t **out)
{
    session_server_t *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    srv->cfg = cfg;
    srv->jobs = jobs;
    srv->db = db;
    srv->store = store;
    srv->started = uv_hrtime();
    srv->pump = session_pump;
    list_init(&srv->sessions);
    int rc = memtrim_init(&srv->trim, loop);
    if (rc) {
        free(srv);
        return rc;
    }
    rc = hf_meta_new(loop, &srv->hf);
    if (!rc && (rc = listings_new(loop, &srv->listings)) != 0)
        hf_meta_free(srv->hf);
    if (!rc) {
        rc = listener_start(loop, cfg, listen_fd, on_connection, srv, &srv->listener);
        if (rc) {
            hf_meta_free(srv->hf);
            listings_free(srv->listings);
        }
    }
    if (rc) {
        memtrim_close(&srv->trim);
        free(srv);
        return rc;
    }
    session_server_reload(srv);
    *out = srv;
    return 0;
}

void session_server_close(session_server_t *srv, void (*done)(void *arg), void *arg)
{
    srv->closing = 1;
    srv->close_cb = done;
    srv->close_arg = arg;
    listener_unlink(srv->listener);
    list_node_t *n, *tmp;
    list_foreach_safe(&srv->sessions, n, tmp)
    {
        session_drain(list_entry(n, session_t, node)); /* may close and unlink it */
    }
    if (srv->nsessions == 0)
        server_finish_close(srv);
}

const principal_acl_t *session_server_acl(const session_server_t *srv)
{
    return &srv->acl;
}

quota_t *session_server_quota(session_server_t *srv)
{
    return &srv->quota;
}

hf_meta_t *session_server_hf(session_server_t *srv)
{
    return srv->hf;
}

void session_server_set_front_stats(session_server_t *srv, session_front_stats_fn stats, void *arg)
{
    srv->front_stats = stats;
    srv->front_stats_arg = arg;
}

void session_server_set_fleet(session_server_t *srv, session_fleet_fn fn, void *arg)
{
    srv->fleet = fn;
    srv->fleet_arg = arg;
}

void session_server_set_front(session_server_t *srv, const struct sockaddr_storage *addrs, size_t n)
{
    size_t len = 0;
    srv->hf_front[0] = '\0';
    for (size_t i = 0; i < n && i < HOSTPORT_MAX_ADDRS; i++) {
        char addr[64];
        if (hostport_format((const struct sockaddr *)&addrs[i], addr, sizeof addr) < 0)
            continue;
        int w = snprintf(srv->hf_front + len, sizeof srv->hf_front - len, "%shttp://%s/hf",
                         len ? "," : "", addr);
        if (w < 0 || (size_t)w >= sizeof srv->hf_front - len) {
            srv->hf_front[len] = '\0'; /* an address cut would name another front */
            break;
        }
        len += (size_t)w;
    }
}
