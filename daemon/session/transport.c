/* transport: write queue, fd passing over SCM_RIGHTS, drain. Its log lines
 * name a "session pid", as they did before the transport was its own
 * module (admins grep for them). */
#include "transport.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#define FD_RETRY_MS 20 /* socket full while passing an fd: try again */
#define FD_POLL_MS 5   /* fds passed, not yet known read: look again (SIOCOUTQ) this often */
/* Fds in flight before sending another looks whether they were read: one
 * ioctl per this many passed, instead of one per DONE (a tenth of a hit's
 * system calls). The poll timer and an owner whose budget is spent
 * (transport_retire) look at any count. */
#define FD_RETIRE_AT 4

/* A DONE line that must leave with its fd, queued until libuv's write queue
 * is empty (so the fd rides on the right byte), maybe after a head: plain
 * lines that leave in the same system call, before it. */
typedef struct fd_msg {
    list_node_t node; /* in transport.fdq */
    job_fd_t *fd;     /* one reference: dropped once sent */
    size_t head;      /* bytes of line before the fd's line (at most TRANSPORT_FD_HEAD_MAX) */
    size_t len;       /* bytes of line, head included */
    char line[];
} fd_msg_t;

typedef struct wreq {
    uv_write_t req;
    char data[];
} wreq_t;

static void on_timer(uv_timer_t *timer);
static void on_written(uv_write_t *req, int status);
static void drain_step(transport_t *t);

void transport_init(transport_t *t, uv_loop_t *loop, const transport_ops_t *ops, void *arg,
                    char *rbuf, size_t rcap)
{
    memset(t, 0, sizeof *t);
    t->ops = ops;
    t->arg = arg;
    t->rbuf = rbuf;
    t->rcap = rcap;
    t->state = TRANSPORT_OPEN;
    list_init(&t->fdq);
    uv_pipe_init(loop, &t->pipe, 0);
    uv_timer_init(loop, &t->timer);
    t->pipe.data = t->timer.data = t;
    t->handles = 2;
}

void transport_set_pid(transport_t *t, pid_t pid)
{
    t->pid = pid;
}

size_t transport_queued(const transport_t *t)
{
    return uv_stream_get_write_queue_size((const uv_stream_t *)&t->pipe);
}

int transport_congested(const transport_t *t)
{
    return transport_queued(t) > TRANSPORT_PAUSE_QUEUE;
}

/* ---- reading ------------------------------------------------------------------ */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)suggested;
    transport_t *t = h->data;
    *b = uv_buf_init(t->rbuf, (unsigned)t->rcap); /* read only when nothing is kept */
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    transport_t *t = st->data;
    (void)b;
    if (t->state != TRANSPORT_OPEN || nread == 0)
        return;
    t->ops->on_read(t->arg, nread);
}

void transport_read(transport_t *t, int want)
{
    want = want && t->state == TRANSPORT_OPEN;
    if (want && !t->reading) {
        t->reading = uv_read_start((uv_stream_t *)&t->pipe, on_alloc, on_read) == 0;
    } else if (!want && t->reading) {
        uv_read_stop((uv_stream_t *)&t->pipe);
        t->reading = 0;
    }
}

int transport_reading(const transport_t *t)
{
    return t->reading;
}

/* ---- writing ------------------------------------------------------------------ */

/* A write-side failure, possibly inside a job's callback that goes on using
 * the owner afterwards: BROKEN, and the owner closes on the next loop
 * iteration. */
static void transport_fail(transport_t *t, const char *what, int err)
{
    if (t->state == TRANSPORT_CLOSED || t->state == TRANSPORT_BROKEN)
        return;
    log_debug("session pid %d: write side failed: %s%s%s", (int)t->pid, what, err ? ": " : "",
              err ? uv_strerror(err < 0 ? err : -err) : "");
    t->state = TRANSPORT_BROKEN;
    t->reading = 0;
    uv_read_stop((uv_stream_t *)&t->pipe);
    uv_timer_start(&t->timer, on_timer, 0, 0);
}

static int send_copy(transport_t *t, const char *line, size_t len)
{
    wreq_t *w = malloc(sizeof *w + len);
    if (!w)
        return -ENOMEM;
    memcpy(w->data, line, len);
    w->req.data = t;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&t->pipe, &b, 1, on_written);
    if (rc) {
        free(w);
        return rc;
    }
    return 0;
}

static int can_send(const transport_t *t)
{
    return t->state == TRANSPORT_OPEN || t->state == TRANSPORT_DRAINING;
}

/* Written at once where nothing of ours waits in libuv's queue and the
 * socket takes it: no copy, no request, no completion. A completed request
 * costs a loop turn and an epoll_ctl (libuv re-arms the watcher when its
 * queue drains), about a tenth of a hit's CPU. What the socket does not
 * take is queued as before, and its completion calls on_written; nothing
 * waits for on_written after a write that was not queued (an fd line, a
 * stream's next page and a paused reader wait only for a queue to drain). */
void transport_send(transport_t *t, const char *line, size_t len)
{
    if (!can_send(t))
        return;
    uv_buf_t b = uv_buf_init((char *)line, (unsigned)len);
    int n = uv_try_write((uv_stream_t *)&t->pipe, &b, 1);
    if (n == (int)len)
        return;
    if (n < 0 && n != UV_EAGAIN) {
        transport_fail(t, "write", n);
        return;
    }
    size_t sent = n > 0 ? (size_t)n : 0;
    int rc = send_copy(t, line + sent, len - sent);
    if (rc)
        transport_fail(t, uv_strerror(rc), 0);
}

/* Sends the head (if any) and the line with its fd in one sendmmsg: the
 * head as a message of its own, so that the fd rides on the line's first
 * byte. A head of at most TRANSPORT_FD_HEAD_MAX bytes is one skb of a Unix
 * stream socket, queued whole or not at all, so the line never follows a
 * part of it. Returns 1 when the line was sent (any unsent tail queued as
 * a plain write), 0 when the socket is full (the head, if it went, is
 * dropped from m: only the line is left to send), or a negative errno. */
static int send_with_fd(transport_t *t, fd_msg_t *m)
{
    uv_os_fd_t sock;
    if (uv_fileno((uv_handle_t *)&t->pipe, &sock))
        return -EBADF;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov[2] = {{m->line, m->head}, {m->line + m->head, m->len - m->head}};
    struct mmsghdr mm[2];
    memset(mm, 0, sizeof mm);
    mm[0].msg_hdr.msg_iov = &iov[0];
    mm[0].msg_hdr.msg_iovlen = 1;
    struct msghdr *mh = &mm[1].msg_hdr;
    mh->msg_iov = &iov[1];
    mh->msg_iovlen = 1;
    mh->msg_control = ctl.buf;
    mh->msg_controllen = sizeof ctl.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &m->fd->fd, sizeof(int));
    int n;
    do
        n = sendmmsg(sock, m->head ? mm : mm + 1, m->head ? 2 : 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    if (m->head) {
        if (mm[0].msg_len != m->head) /* cannot happen (see above): the stream would be torn */
            return -EPROTO;
        m->len -= m->head;
        memmove(m->line, m->line + m->head, m->len);
        m->head = 0;
        if (n == 1) /* the line's own error, if any, comes again with the retry */
            return 0;
    }
    size_t sent = mm[1].msg_len;
    if (sent < m->len) {
        int rc = send_copy(t, m->line + sent, m->len - sent);
        if (rc)
            return rc;
    }
    return 1;
}

/* Descriptors passed are in the kernel until the peer reads the byte they
 * ride on, and count against hubd's uid there: an unprivileged sender with
 * more than RLIMIT_NOFILE of them in flight gets ETOOMANYREFS, for every
 * client's DONE. So a passed fd stays counted until all that was sent to
 * the peer has been read: SIOCOUTQ says only that (0), not how far a stream
 * was read. */
void transport_retire(transport_t *t)
{
    uv_os_fd_t sock;
    int outq = 0;
    if (!t->fds_in_flight || transport_queued(t) != 0 ||
        uv_fileno((uv_handle_t *)&t->pipe, &sock) != 0 || ioctl(sock, SIOCOUTQ, &outq) != 0 ||
        outq != 0)
        return;
    while (t->fds_in_flight) {
        t->fds_in_flight--;
        t->ops->on_fd_count(t->arg, -1);
    }
}

static void drop_fd_msg(transport_t *t, fd_msg_t *m)
{
    list_remove(&m->node);
    t->nfdq--;
    job_fd_unref(m->fd);
    free(m);
}

/* Sends queued fd lines while libuv has nothing of ours still unwritten
 * and fewer than TRANSPORT_MAX_FDS_IN_FLIGHT are in flight. On a full
 * socket, tries again in FD_RETRY_MS; while fds are in flight, looks every
 * FD_POLL_MS whether they were read (drain_step arms the timer itself while
 * draining). */
static void flush_fd_queue(transport_t *t)
{
    if (t->fds_in_flight >= FD_RETIRE_AT)
        transport_retire(t);
    list_node_t *n;
    while ((n = list_first(&t->fdq)) && can_send(t) && transport_queued(t) == 0) {
        if (t->fds_in_flight >= TRANSPORT_MAX_FDS_IN_FLIGHT) {
            transport_retire(t);
            if (t->fds_in_flight >= TRANSPORT_MAX_FDS_IN_FLIGHT)
                break;
        }
        fd_msg_t *m = list_entry(n, fd_msg_t, node);
        int rc = send_with_fd(t, m);
        if (rc == 0) {
            if (t->state != TRANSPORT_DRAINING)
                uv_timer_start(&t->timer, on_timer, FD_RETRY_MS, 0);
            return;
        }
        drop_fd_msg(t, m);
        if (rc < 0) {
            t->ops->on_fd_count(t->arg, -1);
            transport_fail(t, "passing an fd", rc);
            return;
        }
        t->fds_in_flight++; /* it stays counted until the peer has read it */
    }
    if (t->fds_in_flight && t->state == TRANSPORT_OPEN) {
        /* A poll already due keeps its time: a busy session's sends would
         * otherwise put it off for as long as they go on. */
        uint64_t now = uv_now(t->timer.loop);
        if (t->fd_poll_at <= now)
            t->fd_poll_at = now + FD_POLL_MS;
        uv_timer_start(&t->timer, on_timer, t->fd_poll_at - now, 0);
    }
}

void transport_send_fd(transport_t *t, const char *head, size_t head_len, const char *line,
                       size_t len, job_fd_t *fd)
{
    assert(head_len <= TRANSPORT_FD_HEAD_MAX); /* one skb: it leaves whole or not at all */
    if (!can_send(t))
        return;
    fd_msg_t *m = malloc(sizeof *m + head_len + len);
    if (!m) {
        log_err("session pid %d: cannot pass the blob fd: out of memory", (int)t->pid);
        transport_fail(t, "passing an fd", ENOMEM);
        return;
    }
    t->ops->on_fd_count(t->arg, +1);
    m->fd = job_fd_ref(fd);
    m->head = head_len;
    m->len = head_len + len;
    if (head_len)
        memcpy(m->line, head, head_len);
    memcpy(m->line + head_len, line, len);
    list_push_back(&t->fdq, &m->node);
    t->nfdq++;
    flush_fd_queue(t);
}

static void on_written(uv_write_t *req, int status)
{
    transport_t *t = req->data;
    free(req);
    if (status == UV_ECANCELED || t->state == TRANSPORT_CLOSED)
        return;
    if (status < 0) {
        transport_fail(t, "write", status);
    } else if (t->state == TRANSPORT_DRAINING) {
        drain_step(t);
    } else if (t->state == TRANSPORT_OPEN) {
        flush_fd_queue(t);
        t->ops->on_written(t->arg);
    }
}

/* The one timer: a deferred close, a drain step, or an fd retry, poll or
 * kick. */
static void on_timer(uv_timer_t *timer)
{
    transport_t *t = timer->data;
    switch (t->state) {
    case TRANSPORT_BROKEN:
        t->ops->on_close(t->arg);
        break;
    case TRANSPORT_DRAINING:
        drain_step(t);
        break;
    case TRANSPORT_OPEN:
        if (uv_now(t->timer.loop) >= t->fd_poll_at) /* a poll, not a kick */
            transport_retire(t);
        flush_fd_queue(t);
        t->ops->on_tick(t->arg);
        break;
    case TRANSPORT_CLOSED:
        break;
    }
}

void transport_kick(transport_t *t)
{
    if (t->state == TRANSPORT_OPEN)
        uv_timer_start(&t->timer, on_timer, 0, 0);
}

/* ---- drain and close -------------------------------------------------------- */

static void on_drained(uv_shutdown_t *req, int status)
{
    (void)status; /* UV_ECANCELED when the deadline closed the connection first */
    transport_t *t = req->data;
    if (t->state != TRANSPORT_CLOSED)
        t->ops->on_close(t->arg);
}

/* One step of a drain: past the deadline, close; else send queued fd lines,
 * and once none is left, shut the write side down after the queued writes
 * (on_drained closes). Runs again on the timer and after each write. */
static void drain_step(transport_t *t)
{
    if (t->state != TRANSPORT_DRAINING)
        return;
    uint64_t now = uv_now(t->timer.loop);
    if (now >= t->drain_deadline) {
        t->ops->on_close(t->arg);
        return;
    }
    flush_fd_queue(t);
    if (t->state != TRANSPORT_DRAINING)
        return;
    if (list_empty(&t->fdq) && !t->shutdown_started) {
        t->shutdown_started = 1;
        t->shutdown_req.data = t;
        if (uv_shutdown(&t->shutdown_req, (uv_stream_t *)&t->pipe, on_drained)) {
            t->ops->on_close(t->arg);
            return;
        }
    }
    uint64_t left = t->drain_deadline - now;
    uv_timer_start(&t->timer, on_timer,
                   !list_empty(&t->fdq) && left > FD_RETRY_MS ? FD_RETRY_MS : left, 0);
}

void transport_drain(transport_t *t, uint64_t deadline_ms)
{
    if (t->state == TRANSPORT_CLOSED || t->state == TRANSPORT_DRAINING)
        return;
    if (t->state == TRANSPORT_BROKEN) /* closing already: nothing can be sent */
        return;
    t->state = TRANSPORT_DRAINING;
    t->drain_deadline = uv_now(t->timer.loop) + deadline_ms;
    t->reading = 0;
    uv_read_stop((uv_stream_t *)&t->pipe);
    drain_step(t);
}

static void on_handle_closed(uv_handle_t *h)
{
    transport_t *t = h->data;
    if (--t->handles == 0)
        t->ops->on_closed(t->arg);
}

void transport_close(transport_t *t)
{
    if (t->state == TRANSPORT_CLOSED)
        return;
    t->state = TRANSPORT_CLOSED;
    list_node_t *n;
    while ((n = list_first(&t->fdq))) {
        drop_fd_msg(t, list_entry(n, fd_msg_t, node));
        t->ops->on_fd_count(t->arg, -1);
    }
    while (t->fds_in_flight) { /* the kernel drops them with the socket */
        t->fds_in_flight--;
        t->ops->on_fd_count(t->arg, -1);
    }
    uv_close((uv_handle_t *)&t->timer, on_handle_closed);
    uv_close((uv_handle_t *)&t->pipe, on_handle_closed);
}
