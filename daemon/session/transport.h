/* transport: one client connection's bytes: the read switch, the queue of
 * replies, descriptors passed with them, and the drain at shutdown.
 *
 * Replies are copied into libuv's write queue. A line that carries a blob
 * descriptor (DONE) waits in an fd queue until libuv has nothing of ours
 * unwritten, then leaves with SCM_RIGHTS so that the fd rides on its line's
 * first byte: in one sendmmsg with the short lines that must come before it
 * (a hit's HIT), each its own message. A passed fd stays counted until the
 * peer has read everything sent to it (SIOCOUTQ 0): the kernel holds it
 * until then, against hubd's uid. Whether it was is looked at lazily: once
 * a few are in flight, every few ms while any is, and when the owner asks
 * (transport_retire, its budget spent). The owner learns each count change
 * (on_fd_count), and reads the queued bytes (transport_queued) to decide
 * its own backpressure.
 *
 * States: OPEN; DRAINING (shutdown: no reading, queued replies and fd lines
 * go out, then the write side shuts, within a deadline); BROKEN (a write
 * failed: nothing more is sent, the owner is asked to close from the next
 * loop iteration, never under a caller's feet); CLOSED. The transport never
 * closes itself: it asks (on_close), and the owner's close path calls
 * transport_close exactly once; on_closed comes when both of its handles
 * are closed, and only then may the owner free it.
 *
 * Loop thread only. The struct is embedded in its owner; its fields are
 * private to transport.c. */
#ifndef HUBD_TRANSPORT_H
#define HUBD_TRANSPORT_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "job.h"
#include "list.h"

#define TRANSPORT_PAUSE_QUEUE (1u << 20) /* queued reply bytes past which a client is congested */
#define TRANSPORT_MAX_FDS_IN_FLIGHT 16   /* fds passed and not yet read, per connection */
#define TRANSPORT_FD_HEAD_MAX 256        /* bytes of lines that may leave with an fd's line */

typedef enum {
    TRANSPORT_OPEN,
    TRANSPORT_DRAINING,
    TRANSPORT_BROKEN,
    TRANSPORT_CLOSED,
} transport_state_t;

typedef struct transport_ops {
    /* Bytes arrived in the owner's buffer (nread > 0), or the peer hung up
     * or the read failed (nread < 0). OPEN only. */
    void (*on_read)(void *arg, ssize_t nread);
    /* A write completed: room in the queue, maybe fds passed. OPEN only. */
    void (*on_written)(void *arg);
    /* The timer of transport_kick, an fd retry or an fd poll. OPEN only. */
    void (*on_tick)(void *arg);
    /* +1 or -1 descriptors held for this connection: one queued by
     * transport_send_fd (+1), then -1 when it was read, or failed, or was
     * dropped by the close. */
    void (*on_fd_count)(void *arg, int delta);
    /* Please close (broken, drained, drain deadline): the owner's close
     * path, which calls transport_close. */
    void (*on_close)(void *arg);
    /* Both handles closed: the owner may free the transport. */
    void (*on_closed)(void *arg);
} transport_ops_t;

typedef struct transport {
    uv_pipe_t pipe;             /* the connection */
    uv_timer_t timer;           /* kick, fd retry or poll, drain step, deferred close */
    uv_shutdown_t shutdown_req; /* drain: the write side closes after queued replies */
    const transport_ops_t *ops;
    void *arg; /* handed to ops */
    transport_state_t state;
    list_t fdq;              /* fd lines waiting for their turn (struct fd_msg) */
    unsigned nfdq;           /* their number */
    unsigned fds_in_flight;  /* fds passed that the peer may not have read yet */
    uint64_t fd_poll_at;     /* uv_now() from which the timer looks whether they were */
    int reading;             /* uv_read_start in force */
    int shutdown_started;    /* drain: uv_shutdown issued */
    uint64_t drain_deadline; /* drain: uv_now() at which the connection is cut off */
    int handles;             /* open handles; on_closed at 0 */
    char *rbuf;              /* the owner's read buffer */
    size_t rcap;             /* its size */
    pid_t pid;               /* the peer, for logs */
} transport_t;

/* Initialises both handles. rbuf receives every read (read only when the
 * owner has consumed the last one: it switches reading off until then). It
 * may be shared by many transports: on_read is called at once, and the
 * owner copies out what it keeps before returning to the loop. */
void transport_init(transport_t *t, uv_loop_t *loop, const transport_ops_t *ops, void *arg,
                    char *rbuf, size_t rcap);

/* The connection's pipe, to accept into. */
static inline uv_pipe_t *transport_pipe(transport_t *t)
{
    return &t->pipe;
}

/* Which peer process the logs name. */
void transport_set_pid(transport_t *t, pid_t pid);

/* Reads on (when OPEN) or off. */
void transport_read(transport_t *t, int want);
int transport_reading(const transport_t *t);

/* Sends a line (OPEN or DRAINING; else dropped): written at once when
 * nothing is queued and the socket takes it all, else (the rest) queued as
 * a copy, whose completion calls on_written. */
void transport_send(transport_t *t, const char *line, size_t len);

/* Queues a line that must leave with fd (one reference taken), after every
 * line queued before it, with head (head_len bytes, maybe 0, at most
 * TRANSPORT_FD_HEAD_MAX: whole lines) just before it, in the same system
 * call. */
void transport_send_fd(transport_t *t, const char *head, size_t head_len, const char *line,
                       size_t len, job_fd_t *fd);

/* Retires the fds in flight if the peer has read everything sent to it
 * (each reported to on_fd_count): for an owner whose fd budget is spent. */
void transport_retire(transport_t *t);

/* Bytes queued and not yet written; whether that is past
 * TRANSPORT_PAUSE_QUEUE. */
size_t transport_queued(const transport_t *t);
int transport_congested(const transport_t *t);

static inline int transport_open(const transport_t *t)
{
    return t->state == TRANSPORT_OPEN;
}
static inline int transport_draining(const transport_t *t)
{
    return t->state == TRANSPORT_DRAINING;
}

/* on_tick from the next loop iteration (OPEN only). */
void transport_kick(transport_t *t);

/* Shutdown: stops reading, lets what is queued reach the peer, then asks
 * to close; a peer that does not read is cut off after deadline_ms. */
void transport_drain(transport_t *t, uint64_t deadline_ms);

/* The owner's close path: drops queued fd lines and fds in flight (each
 * reported to on_fd_count), closes both handles; on_closed follows. */
void transport_close(transport_t *t);

#endif
