#include "conn.h"

#include "autostart.h"
#include "interrupt.h"
#include "bytebuf.h"
#include "out.h"
#include "unixsock.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 5000 /* a full backlog: connect(2) waits */
/* From connect to the daemon's answer to HELLO. A running hubd answers at
 * once; one that is still checking a large cache, or systemd trying to
 * start one that fails, holds the connection in the socket's backlog. The
 * only other timeout: transfers themselves may take hours. */
#define ANSWER_TIMEOUT_S 30
#define READ_CHUNK 65536 /* bytes asked of one recvmsg(2) */
#define FDS_PER_READ 16  /* SCM_RIGHTS room per read; the kernel gives at most one DONE's */
/* After Ctrl-C, how long INTERRUPT's answer may take: hubd answers at once,
 * and a user who pressed Ctrl-C does not wait long for a daemon that does
 * not. */
#define INTERRUPT_WAIT_MS 5000
#define INTERRUPT_ID "interrupt"

struct conn {
    int fd;                 /* the socket, -1 until connected */
    char path[PATH_MAX];    /* socket path, for messages */
    int quiet;              /* -q: no warnings */
    int hello_done;         /* the HELLO reply (or its ERR) was seen */
    int done;               /* the handler has all its replies */
    int none;               /* no daemon runs and none may be started (said) */
    int may_restart;        /* the default socket, may_start: one more autostart (conn_open) */
    int answer_ms;          /* how long to wait for HELLO's answer */
    bytebuf_t out;          /* requests not yet written */
    bytebuf_t fds;          /* ints: descriptors not yet taken by a DONE line, oldest first */
    conn_msg_cb on_msg;     /* the command's reply handler */
    void *arg;              /* its context */
    conn_hello_cb on_hello; /* HELLO's reply handler, or NULL */
    void *hello_arg;        /* its context */
    proto_reader_t reader;  /* splits the byte stream into lines */
    proto_msg_t msg;        /* the line being handled */
    int interruptible;      /* Ctrl-C sends INTERRUPT (conn_interruptible) */
    int interrupting;       /* INTERRUPT is queued or sent: its answer awaited */
    int masked;             /* SIGINT is blocked but while waiting in ppoll (wait_mask) */
    sigset_t wait_mask;
    long long int_until;      /* until then (monotonic ms) */
    interrupt_account_t intr; /* what INTERRUPT's answers said */
};

/* ---- received descriptors ----------------------------------------------- */

/* PROTOCOL.md: only DONE and REPO carry a descriptor, so each such line
 * takes the oldest one received. */
static void fds_push(conn_t *c, int fd)
{
    if (bytebuf_append(&c->fds, &fd, sizeof fd) < 0)
        xoom();
}

/* The oldest descriptor, or -1 if none came. */
static int fds_pop(conn_t *c)
{
    int fd;
    if (bytebuf_len(&c->fds) < sizeof fd)
        return -1;
    memcpy(&fd, bytebuf_data(&c->fds), sizeof fd);
    bytebuf_consume(&c->fds, sizeof fd);
    return fd;
}

/* Queues every descriptor the message carried. A truncated control message
 * (MSG_CTRUNC: usually the descriptor limit) has lost some, and the queue no
 * longer lines up with the DONE lines: say so; materialize_file's size check
 * keeps a wrong descriptor from being copied. */
static void conn_take_fds(conn_t *c, struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        const unsigned char *data = CMSG_DATA(cm);
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, data + i * sizeof fd, sizeof fd);
            fds_push(c, fd);
        }
    }
    if (mh->msg_flags & MSG_CTRUNC)
        fputs("hubctl: warning: file descriptors from hubd were lost (too many open files?)\n",
              stderr);
}

/* ---- requests ----------------------------------------------------------- */

conn_t *conn_new(const char *socket_path, int may_start, int quiet, conn_msg_cb on_msg, void *arg)
{
    conn_t *c = xcalloc(1, sizeof *c);
    char buf[PATH_MAX];
    c->fd = -1;
    c->quiet = quiet;
    c->on_msg = on_msg;
    c->arg = arg;
    bytebuf_init(&c->out, 0);
    bytebuf_init(&c->fds, 0);
    /* A failure to start a per-user daemon was told on stderr; the connect
     * then fails and says so too. */
    int rc = autostart_socket(socket_path, may_start, quiet, buf, sizeof buf);
    /* Said so: conn_open adds nothing. No socket chosen: the per-user
     * folder failed (made, checked, trusted, writable); -EPERM: it or its
     * daemon is another user's. No other socket is tried in its place. */
    c->none = !buf[0] || (rc == -ENOENT && !may_start) || rc == -ECANCELED || rc == -EPERM;
    c->may_restart = !socket_path && may_start && rc == 0;
    if (!buf[0])
        snprintf(buf, sizeof buf, "%s", autostart_system_socket());
    const char *t = getenv("HUBD_ANSWER_TIMEOUT");
    c->answer_ms = (t && atoi(t) > 0 ? atoi(t) : ANSWER_TIMEOUT_S) * 1000;
    snprintf(c->path, sizeof c->path, "%s", buf);
    proto_reader_init(&c->reader);

    char line[128];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, "HELLO");
    proto_add_u64(&w, "proto", PROTO_VERSION);
    proto_add(&w, "client", "hubctl/" HUBCTL_VERSION);
    conn_queue_line(c, &w);
    return c;
}

void conn_on_hello(conn_t *c, conn_hello_cb on_hello, void *arg)
{
    c->on_hello = on_hello;
    c->hello_arg = arg;
}

void conn_free(conn_t *c)
{
    if (!c)
        return;
    close_fd(c->fd);
    for (int fd; (fd = fds_pop(c)) >= 0;)
        close(fd);
    bytebuf_free(&c->fds);
    bytebuf_free(&c->out);
    proto_reader_free(&c->reader);
    free(c);
}

int conn_queue_line(conn_t *c, proto_writer_t *w)
{
    int n = proto_end(w);
    if (n < 0)
        return n;
    if (bytebuf_append(&c->out, w->buf, (size_t)n) < 0)
        xoom();
    return 0;
}

void conn_queue_verb(conn_t *c, const char *verb)
{
    char line[64];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, verb);
    conn_queue_line(c, &w);
}

/* ---- the socket --------------------------------------------------------- */

int conn_open(conn_t *c)
{
    /* Non-blocking, with EAGAIN (a full listen backlog) retried up to the
     * deadline: a blocking connect would wait on it with no timeout. */
    if (c->none)
        return EXIT_UNREACHABLE;
    int fd = unixsock_connect(c->path, CONNECT_TIMEOUT_MS);
    if ((fd == -ENOENT || fd == -ECONNREFUSED) && c->may_restart) {
        /* The daemon autostart found has stopped since (a `hubctl stop`,
         * an idle exit): choose again, as a new hubctl would, once. */
        char buf[PATH_MAX];
        c->may_restart = 0;
        if (autostart_socket(NULL, 1, c->quiet, buf, sizeof buf) == 0 && buf[0]) {
            snprintf(c->path, sizeof c->path, "%s", buf);
            fd = unixsock_connect(c->path, CONNECT_TIMEOUT_MS);
        }
    }
    if (fd >= 0 && autostart_check_peer(fd, c->path)) {
        close(fd); /* another user's daemon: nothing of ours goes to it */
        return EXIT_UNREACHABLE;
    }
    if (fd >= 0) {
        c->fd = fd;
        return 0;
    }
    fprintf(stderr, "hubctl: cannot connect to hubd at %s: %s", c->path,
            fd == -ETIMEDOUT ? "timed out after 5 s" : strerror(-fd));
    if (fd == -ENOENT || fd == -ECONNREFUSED)
        fputs(" (is hubd running?)", stderr);
    putc('\n', stderr);
    if (fd == -EACCES)
        autostart_refused_hint(c->path);
    return EXIT_UNREACHABLE;
}

/* Writes what the socket takes now. A daemon that stopped reading (EPIPE) is
 * not an error here: the reads will see it close, and replies it sent before
 * that still count. */
static int conn_flush(conn_t *c)
{
    while (bytebuf_len(&c->out) > 0) {
        ssize_t n = send(c->fd, bytebuf_data(&c->out), bytebuf_len(&c->out), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n < 0 && errno != EPIPE && errno != ECONNRESET)
            return -errno;
        if (n < 0)
            bytebuf_clear(&c->out);
        else
            bytebuf_consume(&c->out, (size_t)n);
    }
    return 0;
}

/* One recvmsg(2), with room for descriptors on every read since any read may
 * carry one. Returns the byte count, 0 at EOF, or -errno. */
static ssize_t conn_recv(conn_t *c, char *buf, size_t cap)
{
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * FDS_PER_READ)];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space, .msg_controllen = sizeof ctl};
    ssize_t n;
    do
        n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    conn_take_fds(c, &mh);
    return n;
}

/* ---- replies ------------------------------------------------------------ */

/* Does the raw line start with the verb DONE or REPO, the two that carry a
 * descriptor? Checked before parsing so that even a garbled one consumes
 * its descriptor and the queue stays in step. */
static int line_has_fd(const char *line, size_t len)
{
    return len >= 4 && (memcmp(line, "DONE", 4) == 0 || memcmp(line, "REPO", 4) == 0) &&
           (len == 4 || line[4] == ' ' || line[4] == '\r');
}

/* The first reply is HELLO's: a HELLO, or an ERR without id (proto_version).
 * Either way the session goes on at version 1. Returns 1 if m was it. */
static int conn_hello_reply(conn_t *c, const proto_msg_t *m)
{
    c->hello_done = 1;
    int hello = str_eq(m->verb, "HELLO");
    if (c->on_hello)
        c->on_hello(c->hello_arg, hello ? m : NULL);
    if (hello)
        return 1;
    if (!str_eq(m->verb, "ERR") || proto_get(m, "id"))
        return 0; /* no HELLO reply: an old daemon; this line is for the command */
    if (!c->quiet) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        fputs("hubctl: hubd answered HELLO with ", stderr);
        out_reason(stderr, code ? code : "an error", msg ? msg : "");
    }
    return 1;
}

/* proto_reader callback. Lines from the daemon that are too long or do not
 * parse are dropped: a client cannot answer them, and must not crash. */
static int conn_on_line(void *arg, const char *line, size_t len, int err)
{
    conn_t *c = arg;
    if (err < 0)
        return 0;
    int fd = line_has_fd(line, len) ? fds_pop(c) : -1;
    if (proto_parse(line, len, &c->msg) < 0 || (!c->hello_done && conn_hello_reply(c, &c->msg))) {
        close_fd(fd);
        return 0;
    }
    if (c->interrupting) { /* only INTERRUPT's answers matter now */
        close_fd(fd);
        c->done = interrupt_take(&c->intr, INTERRUPT_ID, &c->msg);
        return c->done;
    }
    c->done = c->on_msg(c->arg, &c->msg, fd);
    return c->done; /* stop feeding: what follows is not ours to handle */
}

/* Milliseconds on CLOCK_MONOTONIC. */
static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void conn_interruptible(conn_t *c)
{
    c->interruptible = 1;
}

int conn_interrupting(const conn_t *c)
{
    return c->interrupting;
}

const interrupt_account_t *conn_interrupted(const conn_t *c)
{
    return &c->intr;
}

/* Ctrl-C: INTERRUPT goes out behind what is queued, and from now on only
 * its answers are read; a second Ctrl-C ends hubctl at once. */
static void conn_start_interrupt(conn_t *c)
{
    char line[64];
    proto_writer_t w;
    interrupt_disarm();
    c->interrupting = 1;
    c->int_until = now_ms() + INTERRUPT_WAIT_MS;
    proto_begin(&w, line, sizeof line, "INTERRUPT");
    proto_add(&w, "id", INTERRUPT_ID);
    conn_queue_line(c, &w);
}

static int conn_loop(conn_t *c)
{
    char buf[READ_CHUNK];
    long long deadline = now_ms() + c->answer_ms;
    while (!c->done) {
        if (c->interruptible && !c->interrupting && interrupt_pending())
            conn_start_interrupt(c);
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (bytebuf_len(&c->out) > 0)
            p.events |= POLLOUT;
        long long left = c->hello_done ? -1 : deadline - now_ms();
        if (!c->hello_done && left <= 0)
            return -ETIMEDOUT;
        if (c->interrupting) {
            long long l = c->int_until - now_ms();
            if (l <= 0)
                return -EINTR; /* no answer: said so (interrupt_say) */
            left = left < 0 || l < left ? l : left;
        }
        /* SIGINT is let in only while waiting: one that comes after the
         * check above is not lost until the next line arrives. */
        struct timespec ts = {left / 1000, (left % 1000) * 1000000L};
        int ready = ppoll(&p, 1, left < 0 ? NULL : &ts, c->masked ? &c->wait_mask : NULL);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (ready == 0)
            continue; /* the deadline, checked above */
        if (p.revents & POLLNVAL)
            return -EBADF;
        int rc = (p.revents & POLLOUT) ? conn_flush(c) : 0;
        if (rc < 0)
            return rc;
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t n = conn_recv(c, buf, sizeof buf);
        if (n == -EAGAIN)
            continue;
        if (n == 0 || n == -ECONNRESET)
            return -EPIPE;
        if (n < 0)
            return (int)n;
        proto_reader_feed(&c->reader, buf, (size_t)n, conn_on_line, c);
    }
    return c->interrupting ? -EINTR : 0;
}

int conn_run(conn_t *c)
{
    if (c->interruptible) {
        sigset_t intr;
        sigemptyset(&intr);
        sigaddset(&intr, SIGINT);
        interrupt_arm();
        c->masked = sigprocmask(SIG_BLOCK, &intr, &c->wait_mask) == 0;
    }
    int rc = conn_loop(c);
    if (c->masked)
        sigprocmask(SIG_SETMASK, &c->wait_mask, NULL);
    c->masked = 0;
    if (c->interruptible)
        interrupt_disarm();
    return rc;
}

int conn_report(const conn_t *c, int rc)
{
    if (rc == -ETIMEDOUT) {
        fprintf(stderr, "hubctl: hubd at %s took the connection but did not answer within %d s\n",
                c->path, c->answer_ms / 1000);
        autostart_service_hint(c->path);
    } else if (rc == -EPIPE && !c->hello_done) {
        fprintf(stderr, "hubctl: hubd at %s closed the connection before answering\n", c->path);
        autostart_service_hint(c->path);
    } else if (rc == -EPIPE) {
        fputs("hubctl: hubd closed the connection\n", stderr);
    } else {
        fprintf(stderr, "hubctl: connection to hubd failed: %s\n", strerror(-rc));
    }
    return EXIT_UNREACHABLE;
}
