/* session: accept, read lines, dispatch verbs, write replies, pass fds. */
#include "session.h"
#include "admin.h"
#include "log.h"
#include "proto.h"
#include "sha256.h"
#include "url.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/sockios.h>
#include <unistd.h>

#define SESSION_READ_BUF 16384
#define PROGRESS_DROP_QUEUE (256 * 1024) /* a client this far behind misses PROGRESS lines */
#define FD_RETRY_MS 20                   /* socket full while passing an fd: try again */
#define FD_POLL_MS 5 /* fds passed, not yet known read: look again (SIOCOUTQ) this often */
#define FETCH_ID_MAX 64
#define DRAIN_MS 1000 /* shutdown: time a client gets to read its replies */
/* Backpressure. A session's requests are parsed one line at a time, and
 * parsing stops (the rest of the read is kept, and the socket is not read)
 * while any of these holds; it goes on when the replies are read:
 * - more than READ_PAUSE_QUEUE bytes of replies are queued;
 * - a STATUS or LIST is being streamed (its pages follow as the client
 *   reads, below STREAM_QUEUE queued bytes; later lines wait their turn);
 * - SESSION_MAX_FDS blob descriptors are pinned for it (hits being opened,
 *   DONE lines waiting to pass their fd, fds passed and not yet read), or
 *   USER_MAX_FDS for its uid in all its sessions;
 * - READ_PAUSE_FETCHES FETCHes of it wait.
 * So what a client that never reads costs hubd is bounded whatever it
 * sends: about READ_PAUSE_QUEUE plus one page or one reply. */
#define READ_PAUSE_QUEUE (1u << 20)
#define STREAM_QUEUE (256u << 10)
#define SESSION_MAX_FDS 16
#define USER_MAX_FDS 64
#define READ_PAUSE_FETCHES 64
#define LIST_PAGE 64             /* ENTRY or JOB lines per page */
#define SHOWN_URL_MAX 4096       /* bytes of a URL in a listing: 3x that encoded fits a line */
#define MAX_DISCARDED (1u << 20) /* bytes of one overlong line before the client is cut off */
#define MAX_LONG_LINES 16        /* overlong lines a session may send */
#define LINE_PAUSE 2             /* on_line: parsing stops here (backpressure), not closing */

typedef struct session session_t;

/* A set of principals: groups (by gid, and their listed members by uid)
 * and users. */
typedef struct idset {
    gid_t *gids;
    size_t ngids;
    uid_t *uids;
    size_t nuids;
} idset_t;

struct user_count {
    uid_t uid;
    unsigned waiting; /* FETCHes waiting, all sessions (max_requests_per_user) */
    unsigned fds;     /* blob descriptors pinned, all sessions (USER_MAX_FDS) */
};

static void idset_free(idset_t *set);
static struct user_count *user_count(session_server_t *srv, uid_t uid, int create);

/* A DONE line that must leave with its fd, queued until libuv's write queue
 * is empty (so the fd rides on the right byte). */
typedef struct fd_msg {
    struct fd_msg *next;
    job_fd_t *fd; /* one reference: dropped once sent */
    size_t len;   /* bytes of line */
    char line[];
} fd_msg_t;

typedef struct fetch {
    job_waiter_t w; /* first: job.c hands back &w */
    session_t *s;
    struct fetch *next, *prev;
    int pinned; /* a hit item is opening its blob: counts as a pinned fd */
    char id[FETCH_ID_MAX + 1];
} fetch_t;

typedef struct list_page list_page_t;

typedef enum { STREAM_NONE, STREAM_LIST, STREAM_STATUS } stream_kind_t;

/* An admin request in the pool, answered with its id. */
typedef struct pending {
    admin_req_t *req;
    session_t *s;
    struct pending *next, *prev;
    admin_op_t op;
    char id[FETCH_ID_MAX + 1];
} pending_t;

struct session {
    uv_pipe_t pipe;
    uv_timer_t retry;           /* FD_RETRY_MS after EAGAIN on sendmsg; the drain deadline */
    uv_shutdown_t shutdown_req; /* drain: the write side closes after queued replies */
    session_server_t *srv;
    session_t *next, *prev;
    fetch_t *fetches;   /* waiting FETCHes */
    pending_t *pending; /* admin requests in flight */
    fd_msg_t *fdq_head; /* DONE lines waiting for their turn */
    unsigned nfdq;      /* their number */
    unsigned nfetches;  /* waiting FETCHes */
    fd_msg_t *fdq_tail;
    int closing;
    int draining;            /* shutdown: no more requests, replies flushing */
    int broken;              /* a write failed: closing on the next loop iteration */
    int shutdown_started;    /* drain: uv_shutdown issued */
    uint64_t drain_deadline; /* drain: uv_now() at which the session is cut off */
    int handles;             /* open handles; freed at 0 */
    proto_reader_t reader;
    char rbuf[SESSION_READ_BUF];
    size_t in_off, in_len;  /* rbuf[in_off, in_len): read, not yet parsed (backpressure) */
    int reading;            /* uv_read_start in force */
    int in_pump;            /* inside session_pump: do not re-enter */
    unsigned nfds;          /* blob fds pinned: hits being opened, fd lines queued or in flight */
    unsigned fds_in_flight; /* fds passed that the peer may not have read yet (pinned too) */
    stream_kind_t stream;   /* a STATUS or LIST being streamed, or STREAM_NONE */
    uint64_t stream_at;     /* its cursor: last job id, or last entry's use sequence */
    uint64_t stream_count;  /* lines sent so far */
    list_page_t *page;      /* a LIST page being read in the pool, or NULL */
    uid_t uid;              /* peer credentials at accept */
    gid_t gid;
    size_t discarded; /* bytes of the overlong line being skipped */
    unsigned long_lines;
    int cut; /* flooding: closed once the current read is handled */
    pid_t pid;
};

struct session_server {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    jobs_t *jobs;
    db_t *db;
    store_t *store;
    uv_pipe_t listener;
    int activated; /* the socket came from systemd: not ours to remove */
    /* Who may use admin verbs besides root and who may connect at all:
     * gids and uids, looked up at start and on reload (never per request:
     * NSS may block). */
    idset_t admins;
    idset_t allowed;
    int restricted; /* allow_users or allow_groups is set */
    /* Waiting FETCHes per uid (max_requests_per_user). */
    struct user_count *users;
    size_t nusers;
    session_t *sessions;
    unsigned nsessions;
    uint64_t started; /* uv_hrtime() at start: uptime never goes back with the clock */
    int closing;
    void (*close_cb)(void *);
    void *close_arg;
};

static void session_close(session_t *s);

/* ---- writing ------------------------------------------------------------ */

typedef struct wreq {
    uv_write_t req;
    char data[];
} wreq_t;

static void on_written(uv_write_t *req, int status);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);
static void session_pump(session_t *s);
static void session_kick(session_t *s);
static void stream_step(session_t *s);
static void pin(session_t *s);
static void unpin(session_t *s);

static int send_copy(session_t *s, const char *line, size_t len)
{
    wreq_t *w = malloc(sizeof *w + len);
    if (!w)
        return -ENOMEM;
    memcpy(w->data, line, len);
    w->req.data = s;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&s->pipe, &b, 1, on_written);
    if (rc) {
        free(w);
        return rc;
    }
    return 0;
}

static void on_session_timer(uv_timer_t *t);

/* A write-side failure, possibly inside a job's callback that goes on using
 * the waiter afterwards: mark the session and close it on the next loop
 * iteration, never under the caller's feet. */
static void session_fail(session_t *s, const char *what, int err)
{
    if (s->closing || s->broken)
        return;
    log_debug("session pid %d: write side failed: %s%s%s", (int)s->pid, what, err ? ": " : "",
              err ? uv_strerror(err < 0 ? err : -err) : "");
    s->broken = 1;
    s->reading = 0;
    uv_read_stop((uv_stream_t *)&s->pipe);
    uv_timer_start(&s->retry, on_session_timer, 0, 0);
}

static void session_send(session_t *s, const char *line, size_t len)
{
    if (s->closing || s->broken)
        return;
    int rc = send_copy(s, line, len);
    if (rc)
        session_fail(s, uv_strerror(rc), 0);
}

/* Sends the line with its fd in one sendmsg; the fd rides on the first byte.
 * Returns 1 when sent (any unsent tail was queued as a plain write), 0 when
 * the socket is full, or a negative errno. */
static int send_with_fd(session_t *s, fd_msg_t *m)
{
    uv_os_fd_t sock;
    if (uv_fileno((uv_handle_t *)&s->pipe, &sock))
        return -EBADF;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {m->line, m->len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &m->fd->fd, sizeof(int));
    ssize_t n;
    do
        n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    if ((size_t)n < m->len) {
        int rc = send_copy(s, m->line + n, m->len - (size_t)n);
        if (rc)
            return rc;
    }
    return 1;
}

/* Descriptors passed are in the kernel until the peer reads the byte they
 * ride on, and count against hubd's uid there: an unprivileged sender with
 * more than RLIMIT_NOFILE of them in flight gets ETOOMANYREFS, for every
 * client's DONE. So a passed fd stays pinned to its session (and uid) until
 * all that was sent to the peer has been read: SIOCOUTQ says only that (0),
 * not how far a stream was read. */
static void retire_in_flight(session_t *s)
{
    uv_os_fd_t sock;
    int outq = 0;
    if (!s->fds_in_flight || uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) != 0 ||
        uv_fileno((uv_handle_t *)&s->pipe, &sock) != 0 || ioctl(sock, SIOCOUTQ, &outq) != 0 ||
        outq != 0)
        return;
    while (s->fds_in_flight) {
        s->fds_in_flight--;
        unpin(s);
    }
}

/* Sends queued fd lines while libuv has nothing of ours still unwritten
 * and fewer than SESSION_MAX_FDS are in flight. On a full socket, tries
 * again in FD_RETRY_MS; while fds are in flight, looks every FD_POLL_MS
 * whether they were read (drain_step arms the timer itself while
 * draining). */
static void flush_fd_queue(session_t *s)
{
    retire_in_flight(s);
    while (s->fdq_head && !s->closing && !s->broken && s->fds_in_flight < SESSION_MAX_FDS &&
           uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) == 0) {
        fd_msg_t *m = s->fdq_head;
        int rc = send_with_fd(s, m);
        if (rc == 0) {
            if (!s->draining)
                uv_timer_start(&s->retry, on_session_timer, FD_RETRY_MS, 0);
            return;
        }
        s->fdq_head = m->next;
        if (!s->fdq_head)
            s->fdq_tail = NULL;
        s->nfdq--;
        job_fd_unref(m->fd);
        free(m);
        if (rc < 0) {
            unpin(s);
            session_fail(s, "passing an fd", rc);
            return;
        }
        s->fds_in_flight++; /* its pin stays until the peer has read it */
    }
    if (s->fds_in_flight && !s->closing && !s->broken && !s->draining)
        uv_timer_start(&s->retry, on_session_timer, FD_POLL_MS, 0);
}

static void drain_step(session_t *s);

/* The session's one timer: a deferred close, a drain step, or an fd retry. */
static void on_session_timer(uv_timer_t *t)
{
    session_t *s = t->data;
    if (s->broken) {
        session_close(s);
    } else if (s->draining) {
        drain_step(s);
    } else {
        flush_fd_queue(s);
        session_pump(s);
    }
}

/* Pumps the session from the next loop iteration: for callers inside a
 * job's callbacks, or inside a reply that is still being made (a FETCH's
 * final line must leave before a later line with its id is read). */
static void session_kick(session_t *s)
{
    if (!s->closing && !s->broken && !s->draining)
        uv_timer_start(&s->retry, on_session_timer, 0, 0);
}

static void on_written(uv_write_t *req, int status)
{
    session_t *s = req->data;
    free(req);
    if (status == UV_ECANCELED || s->closing)
        return;
    if (status < 0) {
        session_fail(s, "write", status);
    } else if (s->draining) {
        drain_step(s);
    } else {
        flush_fd_queue(s);
        if (s->stream)
            stream_step(s);
        session_pump(s);
    }
}

static void session_send_fd(session_t *s, const char *line, size_t len, job_fd_t *fd)
{
    if (s->closing || s->broken)
        return;
    fd_msg_t *m = malloc(sizeof *m + len);
    if (!m) {
        log_err("session pid %d: cannot pass the blob fd: out of memory", (int)s->pid);
        session_fail(s, "passing an fd", ENOMEM);
        return;
    }
    pin(s);
    m->next = NULL;
    m->fd = job_fd_ref(fd);
    m->len = len;
    memcpy(m->line, line, len);
    if (s->fdq_tail)
        s->fdq_tail->next = m;
    else
        s->fdq_head = m;
    s->fdq_tail = m;
    s->nfdq++;
    flush_fd_queue(s);
}

/* ---- replies -------------------------------------------------------------- */

typedef struct reply {
    proto_writer_t w;
    char buf[PROTO_MAX_LINE];
} reply_t;

static void reply_begin(reply_t *r, const char *verb)
{
    proto_begin(&r->w, r->buf, sizeof r->buf, verb);
}

/* 1 when the line was queued, 0 when it could not be made (too long). */
static int reply_send(session_t *s, reply_t *r)
{
    int n = proto_end(&r->w);
    if (n < 0) {
        log_err("reply too long for the protocol, dropped");
        return 0;
    }
    session_send(s, r->buf, (size_t)n);
    return 1;
}

static void send_err(session_t *s, const char *id, const char *code, const char *msg)
{
    reply_t r;
    for (int with_msg = 1; with_msg >= 0; with_msg--) {
        reply_begin(&r, "ERR");
        if (id)
            proto_add(&r.w, "id", id);
        proto_add(&r.w, "code", code);
        if (with_msg)
            proto_add(&r.w, "msg", msg);
        int n = proto_end(&r.w);
        if (n > 0) { /* else a message too long to carry: again, keeping the code */
            session_send(s, r.buf, (size_t)n);
            return;
        }
    }
}

/* ---- fetch waiters -------------------------------------------------------- */

static void fetch_unlink(fetch_t *f)
{
    session_t *s = f->s;
    struct user_count *u = user_count(s->srv, s->uid, 0);
    if (u && u->waiting)
        u->waiting--;
    if (f->pinned) {
        f->pinned = 0;
        unpin(s);
    }
    s->nfetches--;
    if (f->prev)
        f->prev->next = f->next;
    else
        s->fetches = f->next;
    if (f->next)
        f->next->prev = f->prev;
}

static void fetch_on_start(job_waiter_t *w, fetch_kind_t kind, uint64_t job_id)
{
    fetch_t *f = (fetch_t *)w;
    if (f->pinned && kind != FETCH_HIT) { /* the hit fell through to a download */
        f->pinned = 0;
        unpin(f->s);
    }
    reply_t r;
    static const char *const verbs[] = {"HIT", "QUEUED", "ATTACHED"};
    reply_begin(&r, verbs[kind]);
    proto_add(&r.w, "id", f->id);
    if (kind != FETCH_HIT)
        proto_add_u64(&r.w, "job", job_id);
    reply_send(f->s, &r);
}

static void fetch_on_progress(job_waiter_t *w, uint64_t done, int64_t total, uint64_t rate)
{
    fetch_t *f = (fetch_t *)w;
    session_t *s = f->s;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) > PROGRESS_DROP_QUEUE)
        return; /* the client is not reading: a later line says more anyway */
    reply_t r;
    reply_begin(&r, "PROGRESS");
    proto_add(&r.w, "id", f->id);
    proto_add_u64(&r.w, "done", done);
    if (total >= 0)
        proto_add_i64(&r.w, "total", total);
    proto_add_u64(&r.w, "rate", rate);
    reply_send(s, &r);
}

static void fetch_on_finish(job_waiter_t *w, const job_result_t *res)
{
    fetch_t *f = (fetch_t *)w;
    session_t *s = f->s;
    fetch_unlink(f);
    if (res->err_code) {
        send_err(s, f->id, res->err_code, res->err_msg ? res->err_msg : "");
    } else {
        static const char *const sources[] = {"hit", "download", "attached"};
        reply_t r;
        reply_begin(&r, "DONE");
        proto_add(&r.w, "id", f->id);
        proto_add(&r.w, "path", res->path);
        proto_add(&r.w, "sha256", res->sha256);
        proto_add_u64(&r.w, "size", res->size);
        proto_add(&r.w, "source", sources[res->kind]);
        int n = proto_end(&r.w);
        if (n > 0)
            session_send_fd(s, r.buf, (size_t)n, res->fd);
    }
    free(f);
    session_kick(s);
}

/* ---- verbs ---------------------------------------------------------------- */

static int valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > FETCH_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)id[i]))
            return 0;
    return 1;
}

static void do_fetch(session_t *s, const proto_msg_t *m)
{
    const char *id = proto_get(m, "id");
    const char *url = proto_get(m, "url");
    const char *sha = proto_get(m, "sha256");
    if (!id || !valid_id(id)) {
        send_err(s, NULL, "bad_request", "FETCH needs id= (1 to 64 printable bytes)");
        return;
    }
    for (fetch_t *f = s->fetches; f; f = f->next) {
        if (strcmp(f->id, id) == 0) {
            send_err(s, id, "bad_request", "this id is already in use on this session");
            return;
        }
    }
    if (!url || !*url) {
        send_err(s, id, "bad_request", "FETCH needs url=");
        return;
    }
    const char *headers[CRED_MAX_HEADERS + 1];
    size_t nheaders = 0;
    for (size_t i = 0; i < m->nfields; i++) {
        if (strcmp(m->fields[i].key, "header") != 0)
            continue;
        if (nheaders == CRED_MAX_HEADERS) {
            send_err(s, id, "bad_request", "at most 16 headers");
            return;
        }
        headers[nheaders++] = m->fields[i].value;
    }
    char sha_lc[65];
    if (sha) {
        uint8_t raw[32];
        if (sha256_parse_hex(sha, raw)) {
            send_err(s, id, "bad_request", "sha256= must be 64 hex digits");
            return;
        }
        sha256_hex(raw, sha_lc);
    }
    fetch_t *f = calloc(1, sizeof *f);
    if (!f) {
        send_err(s, id, "internal", "out of memory");
        return;
    }
    f->s = s;
    snprintf(f->id, sizeof f->id, "%s", id);
    f->w.on_start = fetch_on_start;
    f->w.on_progress = fetch_on_progress;
    f->w.on_finish = fetch_on_finish;
    /* One user cannot fill the daemon with waiting requests. */
    struct user_count *u = user_count(s->srv, s->uid, 1);
    unsigned max = s->srv->cfg->max_requests_per_user;
    if (!u || (max && u->waiting >= max)) {
        free(f);
        char m[160];
        snprintf(m, sizeof m, "uid %u has %u requests waiting already (max_requests_per_user)",
                 (unsigned)s->uid, u ? u->waiting : 0);
        send_err(s, id, "too_many_requests", m);
        return;
    }
    u->waiting++;
    s->nfetches++;
    f->w.uid = s->uid;
    /* Linked before jobs_fetch: on_start may come from inside it. */
    f->next = s->fetches;
    if (s->fetches)
        s->fetches->prev = f;
    s->fetches = f;
    /* Counted as a hit until on_start says otherwise: a hit item holds the
     * blob open until its DONE. (f is not touched after jobs_fetch: its
     * callbacks may have finished it.) */
    f->pinned = 1;
    pin(s);
    const char *code, *msg;
    if (jobs_fetch(s->srv->jobs, url, sha ? sha_lc : NULL, headers, nheaders, &f->w, &code, &msg)) {
        fetch_unlink(f);
        free(f);
        send_err(s, id, code, msg);
    }
}

/* ---- admin verbs ---------------------------------------------------------- */

/* Root, the daemon's own user (a per-user daemon's owner), or the admin
 * group. */
static int idset_has(const idset_t *set, uid_t uid, gid_t gid)
{
    for (size_t i = 0; i < set->ngids; i++)
        if (set->gids[i] == gid)
            return 1;
    for (size_t i = 0; i < set->nuids; i++)
        if (set->uids[i] == uid)
            return 1;
    return 0;
}

static int is_admin(const session_t *s)
{
    return s->uid == 0 || s->uid == geteuid() || idset_has(&s->srv->admins, s->uid, s->gid);
}

/* The uid's waiting-request counter, created at 0 when asked to. */
static struct user_count *user_count(session_server_t *srv, uid_t uid, int create)
{
    for (size_t i = 0; i < srv->nusers; i++)
        if (srv->users[i].uid == uid)
            return &srv->users[i];
    if (!create)
        return NULL;
    struct user_count *u = realloc(srv->users, (srv->nusers + 1) * sizeof *u);
    if (!u)
        return NULL;
    srv->users = u;
    srv->users[srv->nusers] = (struct user_count){.uid = uid, .waiting = 0};
    return &srv->users[srv->nusers++];
}

static void pending_unlink(pending_t *p)
{
    session_t *s = p->s;
    if (p->prev)
        p->prev->next = p->next;
    else
        s->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
}

static void send_ok_fields(session_t *s, const pending_t *p, const admin_result_t *r)
{
    reply_t rep;
    reply_begin(&rep, "OK");
    proto_add(&rep.w, "id", p->id);
    switch (p->op) {
    case ADMIN_RM:
        proto_add_u64(&rep.w, "removed_blob", (uint64_t)r->removed_blob);
        break;
    case ADMIN_PIN:
    case ADMIN_UNPIN:
        break;
    case ADMIN_GC:
        proto_add_u64(&rep.w, "evicted", r->evict.evicted);
        proto_add_u64(&rep.w, "freed", r->evict.freed);
        proto_add_u64(&rep.w, "size", r->evict.size);
        break;
    case ADMIN_VERIFY: {
        unsigned nbad = 0;
        for (const cache_bad_t *b = r->bad; b; b = b->next, nbad++) {
            reply_t line;
            reply_begin(&line, "BAD");
            proto_add(&line.w, "id", p->id);
            proto_add(&line.w, "sha256", b->sha256);
            proto_add(&line.w, "reason", b->why);
            reply_send(s, &line);
        }
        proto_add_u64(&rep.w, "checked", r->checked);
        proto_add_u64(&rep.w, "bad", nbad);
        break;
    }
    }
    reply_send(s, &rep);
}

static void on_admin_done(void *arg, const admin_result_t *r)
{
    pending_t *p = arg;
    session_t *s = p->s;
    pending_unlink(p);
    if (r->rc == -ENOENT)
        send_err(s, p->id, "not_found", "no such URL or blob in the cache");
    else if (r->rc == -ENOSPC)
        send_err(s, p->id, "no_space", "the cache's file system is full");
    else if (r->rc)
        send_err(s, p->id, "io", strerror(-r->rc));
    else
        send_ok_fields(s, p, r);
    free(p);
}

/* RM target=URL|SHA256, PIN/UNPIN target=URL|SHA256, GC [max_size=BYTES],
 * VERIFY: each with id=, answered OK (or ERR) with that id. */
static void do_admin(session_t *s, const proto_msg_t *m, admin_op_t op)
{
    const char *id = proto_get(m, "id");
    const char *target = proto_get(m, "target");
    if (!id || !valid_id(id)) {
        send_err(s, NULL, "bad_request", "admin requests need id= (1 to 64 printable bytes)");
        return;
    }
    if (!is_admin(s)) {
        log_warn("session pid %d uid %d: %s refused: not root or in the admin group", (int)s->pid,
                 (int)s->uid, m->verb);
        send_err(s, id, "permission_denied",
                 "cache administration needs root or membership of the admin group");
        return;
    }
    char sha[65], canon[65];
    url_t u = {0};
    uint64_t size = s->srv->cfg->max_cache_size;
    if (admin_busy()) {
        /* One at a time: a whole-cache walk must not take every pool thread
         * from the downloads. */
        send_err(s, id, "busy", "another cache administration request is running; try again");
        return;
    }
    if (op == ADMIN_RM || op == ADMIN_PIN || op == ADMIN_UNPIN) {
        if (!target || !*target) {
            send_err(s, id, "bad_request", "needs target= (a URL or a sha256)");
            return;
        }
        /* As FETCH keys them: a digest in lower case, a URL canonical. */
        uint8_t raw[32];
        if (strlen(target) == 64 && sha256_parse_hex(target, raw) == 0) {
            sha256_hex(raw, canon);
            target = canon;
        } else if (url_parse(target, &u, NULL) == 0) {
            target = u.canonical;
        }
        if (db_resolve(s->srv->db, target, sha)) {
            url_free(&u);
            send_err(s, id, "not_found", "no such URL or blob in the cache");
            return;
        }
        if (op != ADMIN_RM) /* pins are on blobs */
            target = sha;
    } else if (op == ADMIN_GC) {
        const char *ms = proto_get(m, "max_size");
        if (ms && config_parse_size(ms, &size)) {
            send_err(s, id, "bad_request", "max_size= must be a size (bytes, or with K M G T)");
            return;
        }
        if (!ms && size == 0) {
            send_err(s, id, "bad_request",
                     "no max_cache_size is configured: give max_size= to collect down to");
            return;
        }
    }
    pending_t *p = calloc(1, sizeof *p);
    if (!p || admin_start(s->srv->loop, jobs_work(s->srv->jobs), s->srv->store, s->srv->db, op,
                          target, size, on_admin_done, p, &p->req)) {
        free(p);
        url_free(&u);
        send_err(s, id, "internal", "out of memory");
        return;
    }
    p->s = s;
    p->op = op;
    snprintf(p->id, sizeof p->id, "%s", id);
    log_info("session pid %d uid %d: %s %s", (int)s->pid, (int)s->uid, m->verb,
             target ? target : "");
    url_free(&u);
    p->next = s->pending;
    if (s->pending)
        s->pending->prev = p;
    s->pending = p;
}

/* A URL as this session's user may see it: the query string, which may
 * hold a signature or a token, only for admins and for the users who asked
 * for it themselves (mine). */
static const char *shown_url(const session_t *s, const char *url, int mine, char *buf, size_t cap)
{
    const char *q = strchr(url, '?');
    size_t len = strlen(url);
    size_t n = !q || mine || is_admin(s) ? len : (size_t)(q - url);
    if (n == len && n <= SHOWN_URL_MAX)
        return url;
    /* Cut where even a percent-encoded URL leaves the line room to fit: a
     * listing line is never dropped (END's count would lie, and a STATUS
     * whose page queued nothing would wait for a write that never ends). */
    int cut = n > SHOWN_URL_MAX;
    snprintf(buf, cap, "%.*s%s%s", (int)(cut ? SHOWN_URL_MAX : n), url, cut ? "..." : "",
             n < len ? "?REDACTED" : "");
    return buf;
}

static void send_job_line(void *arg, const job_info_t *info)
{
    session_t *s = arg;
    reply_t r;
    char url[URL_MAX_LEN + 16];
    reply_begin(&r, "JOB");
    proto_add_u64(&r.w, "job", info->id);
    proto_add(&r.w, "url", shown_url(s, info->url, info->mine, url, sizeof url));
    proto_add(&r.w, "state", info->state);
    proto_add_u64(&r.w, "done", info->done);
    if (info->total >= 0)
        proto_add_i64(&r.w, "total", info->total);
    proto_add_u64(&r.w, "rate", info->rate);
    proto_add_u64(&r.w, "waiters", info->waiters);
    s->stream_at = info->id;
    s->stream_count += (uint64_t)reply_send(s, &r); /* END counts what was sent */
}

/* ---- STATUS and LIST: streamed a page at a time ---------------------------- */

/* One page of LIST, read in the pool (db_list_page), sent on the loop. */
struct list_page {
    uv_work_t work;
    session_t *s; /* NULL once the session went away: nobody to send to */
    jobs_t *jobs; /* held while the item is in flight (a shutdown waits) */
    db_t *db;
    uint64_t before;
    uid_t uid;
    int rc; /* rows read, or a negative errno */
    unsigned n;
    struct page_entry {
        db_entry_t e;
        char *url;
        char sha[65];
    } v[LIST_PAGE];
};

static void copy_entry(void *arg, const db_entry_t *e)
{
    list_page_t *p = arg;
    struct page_entry *pe = &p->v[p->n];
    if (p->n == LIST_PAGE || !(pe->url = strdup(e->url)))
        return;
    pe->e = *e;
    snprintf(pe->sha, sizeof pe->sha, "%s", e->sha256);
    pe->e.url = pe->url;
    pe->e.sha256 = pe->sha;
    p->n++;
}

static void page_work(uv_work_t *w)
{
    list_page_t *p = w->data;
    p->rc = db_list_page(p->db, p->before, LIST_PAGE, p->uid, copy_entry, p);
}

static void send_end(session_t *s, uint64_t count)
{
    reply_t r;
    reply_begin(&r, "END");
    proto_add_u64(&r.w, "count", count);
    reply_send(s, &r);
}

/* The stream is over (END sent, or an error): the lines after it may be
 * parsed again. */
static void stream_end(session_t *s)
{
    s->stream = STREAM_NONE;
    session_pump(s);
}

static void after_page(uv_work_t *w, int status)
{
    (void)status;
    list_page_t *p = w->data;
    session_t *s = p->s;
    if (s) {
        s->page = NULL;
    }
    if (s && !s->draining) { /* a shutdown drains what is queued, nothing more */
        char url[URL_MAX_LEN + 16];
        for (unsigned i = 0; i < p->n; i++) {
            const db_entry_t *e = &p->v[i].e;
            reply_t r;
            reply_begin(&r, "ENTRY");
            proto_add(&r.w, "url", shown_url(s, e->url, e->mine, url, sizeof url));
            proto_add(&r.w, "sha256", e->sha256);
            proto_add_u64(&r.w, "size", e->size);
            proto_add_i64(&r.w, "created", e->created);
            proto_add_i64(&r.w, "accessed", e->accessed);
            proto_add_u64(&r.w, "pinned", (uint64_t)e->pinned);
            s->stream_at = e->seq;
            s->stream_count += (uint64_t)reply_send(s, &r);
        }
        if (p->rc < 0) {
            send_err(s, NULL, "internal", "cannot read the cache index");
            stream_end(s);
        } else if (p->rc < LIST_PAGE) {
            send_end(s, s->stream_count);
            stream_end(s);
        } else {
            stream_step(s);
        }
    }
    for (unsigned i = 0; i < p->n; i++)
        free(p->v[i].url);
    worktrack_release(jobs_work(p->jobs));
    free(p);
}

/* Sends the stream's next page once the client has read most of the last
 * one: STATUS from the jobs in memory, LIST from a pool item. */
static void stream_step(session_t *s)
{
    if (!s->stream || s->page || s->closing || s->broken || s->draining ||
        uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) > STREAM_QUEUE)
        return;
    while (s->stream == STREAM_STATUS) {
        if (jobs_page(s->srv->jobs, s->stream_at, LIST_PAGE, s->uid, send_job_line, s) <
            LIST_PAGE) {
            send_end(s, s->stream_count);
            stream_end(s);
            return;
        }
        if (uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) > STREAM_QUEUE)
            return; /* on_written asks for the next page */
    }
    if (s->stream != STREAM_LIST)
        return;
    list_page_t *p = calloc(1, sizeof *p);
    if (!p) {
        send_err(s, NULL, "internal", "out of memory");
        stream_end(s);
        return;
    }
    p->s = s;
    p->jobs = s->srv->jobs;
    p->db = s->srv->db;
    p->before = s->stream_at;
    p->uid = s->uid;
    p->work.data = p;
    s->page = p;
    worktrack_hold(jobs_work(p->jobs));
    uv_queue_work(s->srv->loop, &p->work, page_work, after_page);
}

static void stream_start(session_t *s, stream_kind_t kind)
{
    s->stream = kind;
    s->stream_at = 0;
    s->stream_count = 0;
    stream_step(s);
}

static void do_stats(session_t *s)
{
    jobs_stats_t st;
    jobs_stats(s->srv->jobs, &st);
    reply_t r;
    reply_begin(&r, "STATS");
    proto_add_u64(&r.w, "hits", st.hits);
    proto_add_u64(&r.w, "misses", st.misses);
    proto_add_u64(&r.w, "attached", st.attached);
    proto_add_u64(&r.w, "bytes_from_origin", st.bytes_from_origin);
    proto_add_u64(&r.w, "bytes_served", st.bytes_served);
    proto_add_u64(&r.w, "jobs_active", st.active);
    proto_add_u64(&r.w, "jobs_queued", st.queued);
    proto_add_u64(&r.w, "errors", st.errors);
    /* code:count pairs, only the codes seen, in one field. */
    char by_code[600] = "";
    size_t n = 0;
    for (unsigned i = 0; i < JOBS_NERROR_CODES && n < sizeof by_code; i++)
        if (st.errors_by_code[i])
            n +=
                (size_t)snprintf(by_code + n, sizeof by_code - n, "%s%s:%llu", n ? "," : "",
                                 jobs_error_code_name(i), (unsigned long long)st.errors_by_code[i]);
    proto_add(&r.w, "errors_by_code", by_code);
    uint64_t bytes = 0, blobs = 0;
    db_cache_size(s->srv->db, &bytes, &blobs);
    proto_add_u64(&r.w, "cache_bytes", bytes);
    proto_add_u64(&r.w, "cache_blobs", blobs);
    proto_add_u64(&r.w, "max_cache_size", s->srv->cfg->max_cache_size);
    proto_add_u64(&r.w, "evicted", st.evicted);
    proto_add_u64(&r.w, "evicted_bytes", st.evicted_bytes);
    proto_add_u64(&r.w, "bad_blobs", st.bad_blobs);
    proto_add_u64(&r.w, "sessions", s->srv->nsessions);
    proto_add_u64(&r.w, "uptime", (uv_hrtime() - s->srv->started) / 1000000000u);
    reply_send(s, &r);
}

static void do_hello(session_t *s, const proto_msg_t *m)
{
    const char *v = proto_get(m, "proto");
    if (v && strcmp(v, "1") != 0) {
        send_err(s, NULL, "proto_version", "this hubd speaks protocol 1");
        return;
    }
    reply_t r;
    reply_begin(&r, "HELLO");
    proto_add_u64(&r.w, "proto", PROTO_VERSION);
    proto_add(&r.w, "server", "hubd/0.1.0");
    reply_send(s, &r);
}

/* ---- reading: one line at a time, while the replies are read ------------ */

/* Whether this session's next line must wait (see READ_PAUSE_QUEUE). */
static int must_pause(session_t *s)
{
    struct user_count *u = user_count(s->srv, s->uid, 0);
    return s->stream || s->nfds >= SESSION_MAX_FDS || (u && u->fds >= USER_MAX_FDS) ||
           s->nfetches >= READ_PAUSE_FETCHES ||
           uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) > READ_PAUSE_QUEUE;
}

/* After each line: 1 stops the feed for good (closing), LINE_PAUSE until
 * the replies are read, 0 goes on. */
static int line_result(session_t *s)
{
    if (s->closing || s->broken || s->cut)
        return 1;
    return must_pause(s) ? LINE_PAUSE : 0;
}

static int on_line(void *arg, const char *line, size_t len, int err)
{
    session_t *s = arg;
    if (err) {
        send_err(s, NULL, "line_too_long", "a line exceeded 16384 bytes");
        if (++s->long_lines > MAX_LONG_LINES)
            s->cut = 1;
        return line_result(s);
    }
    if (len == 0 || (len == 1 && line[0] == '\r'))
        return 0;         /* blank lines are harmless: socat users press enter */
    static proto_msg_t m; /* loop thread only; too large for the stack of a callback chain */
    if (proto_parse(line, len, &m)) {
        send_err(s, NULL, "bad_request", "the line does not parse (see PROTOCOL.md)");
        return line_result(s);
    }
    if (strcmp(m.verb, "FETCH") == 0)
        do_fetch(s, &m);
    else if (strcmp(m.verb, "HELLO") == 0)
        do_hello(s, &m);
    else if (strcmp(m.verb, "STATUS") == 0)
        stream_start(s, STREAM_STATUS);
    else if (strcmp(m.verb, "STATS") == 0)
        do_stats(s);
    else if (strcmp(m.verb, "LIST") == 0)
        stream_start(s, STREAM_LIST);
    else if (strcmp(m.verb, "RM") == 0)
        do_admin(s, &m, ADMIN_RM);
    else if (strcmp(m.verb, "PIN") == 0)
        do_admin(s, &m, ADMIN_PIN);
    else if (strcmp(m.verb, "UNPIN") == 0)
        do_admin(s, &m, ADMIN_UNPIN);
    else if (strcmp(m.verb, "GC") == 0)
        do_admin(s, &m, ADMIN_GC);
    else if (strcmp(m.verb, "VERIFY") == 0)
        do_admin(s, &m, ADMIN_VERIFY);
    else
        send_err(s, NULL, "unknown_verb", m.verb);
    return line_result(s);
}

/* The one function that decides whether a session reads: it parses what
 * was read and kept while the session may go on, and reads from the socket
 * only once nothing kept is left. Called after a read, and whenever a
 * reason to wait may have gone (a reply written, an fd passed, a fetch
 * finished, a stream ended). */
static void session_pump(session_t *s)
{
    if (s->closing || s->draining || s->broken || s->in_pump)
        return;
    s->in_pump = 1;
    while (s->in_off < s->in_len && !must_pause(s)) {
        size_t used = 0;
        int rc = proto_reader_feed_some(&s->reader, s->rbuf + s->in_off, s->in_len - s->in_off,
                                        on_line, s, &used);
        s->in_off += used;
        if (rc && rc != LINE_PAUSE)
            break; /* closing, broken or cut: the caller decides */
    }
    if (s->in_off == s->in_len)
        s->in_off = s->in_len = 0;
    if (s->cut && !s->closing) {
        /* Line after overlong line (kept input parsed from a timer, too):
         * a client that is not speaking the protocol is cut off. */
        log_warn("session pid %d uid %d: cut off (overlong lines)", (int)s->pid, (int)s->uid);
        s->in_pump = 0;
        session_close(s);
        return;
    }
    int want = !s->closing && !s->broken && s->in_len == 0 && !must_pause(s);
    if (want && !s->reading)
        s->reading = uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read) == 0;
    else if (!want && s->reading) {
        uv_read_stop((uv_stream_t *)&s->pipe);
        s->reading = 0;
    }
    s->in_pump = 0;
}

/* Blob descriptors pinned for a session (and its uid): a hit item opening
 * one, or a DONE line waiting to pass one. */
static void pin(session_t *s)
{
    struct user_count *u = user_count(s->srv, s->uid, 1);
    s->nfds++;
    if (u)
        u->fds++;
}

/* One fewer: the session may parse again, and so may the uid's other
 * sessions that waited for its budget. */
static void unpin(session_t *s)
{
    struct user_count *u = user_count(s->srv, s->uid, 0);
    s->nfds--;
    if (u && u->fds-- == USER_MAX_FDS) {
        for (session_t *o = s->srv->sessions; o; o = o->next)
            if (o != s && o->uid == s->uid && (o->in_len || !o->reading))
                session_kick(o);
    }
    session_kick(s);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    session_t *s = h->data;
    *b = uv_buf_init(s->rbuf, sizeof s->rbuf); /* read only when nothing is kept */
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    session_t *s = st->data;
    (void)b;
    if (s->draining || nread == 0)
        return;
    if (nread < 0) {
        session_close(s);
        return;
    }
    s->in_off = 0;
    s->in_len = (size_t)nread;
    session_pump(s);
    if (s->closing)
        return;
    /* An endless line: a client that is not speaking the protocol is cut
     * off (session_pump does for repeated overlong lines); others are not
     * affected. */
    s->discarded = s->reader.discarding ? s->discarded + (size_t)nread : 0;
    if (s->discarded > MAX_DISCARDED) {
        log_warn("session pid %d uid %d: cut off (overlong lines)", (int)s->pid, (int)s->uid);
        session_close(s);
    }
}

static void on_listener_closed(uv_handle_t *h)
{
    session_server_t *srv = h->data;
    void (*cb)(void *) = srv->close_cb;
    void *arg = srv->close_arg;
    idset_free(&srv->admins);
    idset_free(&srv->allowed);
    free(srv->users);
    free(srv);
    if (cb)
        cb(arg);
}

/* The server goes last: after every session's handles are closed (libuv
 * runs close callbacks in no promised order, so we count). */
static void server_finish_close(session_server_t *srv)
{
    uv_close((uv_handle_t *)&srv->listener, on_listener_closed);
}

static void on_session_handle_closed(uv_handle_t *h)
{
    session_t *s = h->data;
    if (--s->handles > 0)
        return;
    session_server_t *srv = s->srv;
    free(s);
    srv->nsessions--;
    if (srv->closing && srv->nsessions == 0)
        server_finish_close(srv);
}

/* The one close path of a session: its waiters leave their jobs, queued fd
 * messages are dropped, both handles close and the session is freed. */
static void session_close(session_t *s)
{
    if (s->closing)
        return;
    s->closing = 1;
    while (s->fetches) {
        fetch_t *f = s->fetches;
        fetch_unlink(f);
        jobs_cancel(&f->w);
        free(f);
    }
    while (s->pending) { /* the requests finish in the pool; nobody hears */
        pending_t *p = s->pending;
        pending_unlink(p);
        admin_cancel(p->req);
        free(p);
    }
    if (s->page) { /* it finishes in the pool; nobody hears */
        s->page->s = NULL;
        s->page = NULL;
    }
    session_server_t *srv = s->srv;
    if (s->prev)
        s->prev->next = s->next;
    else
        srv->sessions = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->next = s->prev = NULL;
    while (s->fdq_head) { /* after the unlink: unpin may wake the uid's other sessions */
        fd_msg_t *m = s->fdq_head;
        s->fdq_head = m->next;
        job_fd_unref(m->fd);
        free(m);
        unpin(s);
    }
    s->fdq_tail = NULL;
    while (s->fds_in_flight) { /* the kernel drops them with the socket */
        s->fds_in_flight--;
        unpin(s);
    }
    log_debug("session pid %d uid %d: closed", (int)s->pid, (int)s->uid);
    uv_close((uv_handle_t *)&s->retry, on_session_handle_closed);
    uv_close((uv_handle_t *)&s->pipe, on_session_handle_closed);
}

static void on_drained(uv_shutdown_t *req, int status)
{
    (void)status; /* UV_ECANCELED when the deadline closed the session first */
    session_close(req->data);
}

/* One step of a drain: past the deadline, close; else send queued fd lines,
 * and once none is left, shut the write side down after the queued writes
 * (on_drained closes). Runs again on the timer and after each write. */
static void drain_step(session_t *s)
{
    if (s->closing || s->broken)
        return;
    uint64_t now = uv_now(s->srv->loop);
    if (now >= s->drain_deadline) {
        session_close(s);
        return;
    }
    flush_fd_queue(s);
    if (s->closing || s->broken)
        return;
    if (!s->fdq_head && !s->shutdown_started) {
        s->shutdown_started = 1;
        s->shutdown_req.data = s;
        if (uv_shutdown(&s->shutdown_req, (uv_stream_t *)&s->pipe, on_drained)) {
            session_close(s);
            return;
        }
    }
    uint64_t left = s->drain_deadline - now;
    uv_timer_start(&s->retry, on_session_timer,
                   s->fdq_head && left > FD_RETRY_MS ? FD_RETRY_MS : left, 0);
}

/* Shutdown: stop reading, let queued replies (the ERR shutting_down of each
 * waiter, DONE lines waiting with their fd) reach the client, then close. A
 * client that does not read is cut off at the deadline. */
static void session_drain(session_t *s)
{
    if (s->closing || s->draining)
        return;
    s->draining = 1;
    s->drain_deadline = uv_now(s->srv->loop) + DRAIN_MS;
    s->reading = 0;
    uv_read_stop((uv_stream_t *)&s->pipe);
    drain_step(s);
}

static void on_connection(uv_stream_t *server, int status)
{
    session_server_t *srv = server->data;
    if (status < 0) {
        log_warn("accept: %s", uv_strerror(status));
        return;
    }
    session_t *s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->srv = srv;
    uv_pipe_init(srv->loop, &s->pipe, 0);
    uv_timer_init(srv->loop, &s->retry);
    s->pipe.data = s->retry.data = s;
    s->handles = 2;
    proto_reader_init(&s->reader);
    s->next = srv->sessions;
    if (srv->sessions)
        srv->sessions->prev = s;
    srv->sessions = s;
    srv->nsessions++;
    if (uv_accept(server, (uv_stream_t *)&s->pipe)) {
        session_close(s);
        return;
    }
    uv_os_fd_t fd;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (uv_fileno((uv_handle_t *)&s->pipe, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
        /* Without the peer's credentials nothing can be decided about it
         * (and a zeroed uid would read as root). */
        log_warn("accept: cannot read the peer's credentials: closed");
        session_close(s);
        return;
    }
    s->uid = cred.uid;
    s->gid = cred.gid;
    s->pid = cred.pid;
    log_info("session pid %d uid %d gid %d: connected", (int)s->pid, (int)s->uid, (int)s->gid);
    if (srv->restricted && s->uid != 0 && s->uid != geteuid() &&
        !idset_has(&srv->allowed, s->uid, s->gid)) {
        log_warn("session pid %d uid %d: refused (not in allow_users or allow_groups)", (int)s->pid,
                 (int)s->uid);
        send_err(s, NULL, "permission_denied",
                 "this hubd serves only the users and groups "
                 "it is configured for (allow_users, allow_groups)");
        session_drain(s);
        return;
    }
    if (srv->closing) { /* raced with shutdown: nothing to serve */
        session_close(s);
        return;
    }
    session_pump(s);
}

/* A socket file left by a daemon that died is replaced; one that answers
 * belongs to a running daemon and is left alone. */
static int check_stale_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    int err = errno;
    close(fd);
    if (rc == 0)
        return -EADDRINUSE;
    if (err == ECONNREFUSED)
        unlink(path);
    return 0;
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

static void idset_free(idset_t *set)
{
    free(set->gids);
    free(set->uids);
    memset(set, 0, sizeof *set);
}

static void idset_add_uid(idset_t *set, uid_t uid)
{
    uid_t *v = realloc(set->uids, (set->nuids + 1) * sizeof *v);
    if (v) {
        set->uids = v;
        set->uids[set->nuids++] = uid;
    }
}

/* A group: its gid (a peer's primary group) and its listed members. */
static int idset_add_group(idset_t *set, const char *name)
{
    struct group *g = getgrnam(name);
    if (!g)
        return -ENOENT;
    gid_t *v = realloc(set->gids, (set->ngids + 1) * sizeof *v);
    if (v) {
        set->gids = v;
        set->gids[set->ngids++] = g->gr_gid;
    }
    size_t n = 0;
    while (g->gr_mem[n])
        n++;
    char **names = calloc(n + 1, sizeof *names); /* getpwnam may reuse getgrnam's buffer */
    for (size_t i = 0; names && i < n; i++)
        names[i] = strdup(g->gr_mem[i]);
    for (size_t i = 0; names && i < n; i++) {
        struct passwd *pw = names[i] ? getpwnam(names[i]) : NULL;
        if (pw)
            idset_add_uid(set, pw->pw_uid);
        free(names[i]);
    }
    free(names);
    return 0;
}

/* A user: a name, or a numeric uid. */
static int idset_add_user(idset_t *set, const char *name)
{
    char *end;
    unsigned long v = strtoul(name, &end, 10);
    if (*name && !*end) {
        idset_add_uid(set, (uid_t)v);
        return 0;
    }
    struct passwd *pw = getpwnam(name);
    if (!pw)
        return -ENOENT;
    idset_add_uid(set, pw->pw_uid);
    return 0;
}

/* Each name of a comma-separated list into the set; unknown ones logged. */
static void idset_add_list(idset_t *set, const char *list, int groups, const char *key)
{
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ,");
        size_t n = strcspn(p, " ,");
        if (n) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)n, p);
            if ((groups ? idset_add_group(set, name) : idset_add_user(set, name)) != 0)
                log_warn("%s: no such %s '%s'", key, groups ? "group" : "user", name);
        }
        p += n;
    }
}

void session_server_reload(session_server_t *srv)
{
    const hubd_config_t *cfg = srv->cfg;
    idset_free(&srv->admins);
    idset_free(&srv->allowed);
    if (cfg->admin_group && idset_add_group(&srv->admins, cfg->admin_group) != 0)
        log_warn("admin group %s does not exist: only root (and hubd's own user) may "
                 "administer the cache",
                 cfg->admin_group);
    idset_add_list(&srv->allowed, cfg->allow_users, 0, "allow_users");
    idset_add_list(&srv->allowed, cfg->allow_groups, 1, "allow_groups");
    srv->restricted =
        (cfg->allow_users && *cfg->allow_users) || (cfg->allow_groups && *cfg->allow_groups);
}

/* Our own socket: mode through umask (never open wider than asked for a
 * moment), then the group. */
static int bind_own_socket(session_server_t *srv)
{
    const hubd_config_t *cfg = srv->cfg;
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
    rc = uv_pipe_bind(&srv->listener, cfg->socket_path);
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
    uv_pipe_init(loop, &srv->listener, 0);
    srv->listener.data = srv;
    int rc;
    if (listen_fd >= 0) {
        srv->activated = 1;
        rc = uv_pipe_open(&srv->listener, listen_fd);
        if (rc)
            log_err("cannot use the socket systemd passed: %s", uv_strerror(rc));
    } else {
        rc = bind_own_socket(srv);
    }
    if (!rc && (rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection)) != 0)
        log_err("cannot listen on %s: %s", cfg->socket_path, uv_strerror(rc));
    if (rc) {
        server_finish_close(srv); /* no callback set: only frees */
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
    if (!srv->activated) /* systemd's socket stays for the next start */
        unlink(srv->cfg->socket_path);
    for (session_t *s = srv->sessions, *next; s; s = next) {
        next = s->next; /* session_drain may close and unlink s */
        session_drain(s);
    }
    if (srv->nsessions == 0)
        server_finish_close(srv);
}
