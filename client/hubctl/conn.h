/* conn: hubctl's one connection to hubd.
 *
 * Deliberately blocking: one Unix socket, poll(2), and the line codec the
 * daemon itself uses (common/proto.h). A command queues all its requests
 * before it connects, so a bad argument never reaches the daemon; conn_run
 * then pipelines them behind HELLO and hands each parsed reply to the
 * command's handler until that handler has everything it asked for.
 * Single-threaded; the command owns the conn_t and frees it.
 * docs/PROTOCOL.md is the authority on the messages. */
#ifndef HUBCTL_CONN_H
#define HUBCTL_CONN_H

#include "proto.h"

/* Gets each parsed reply after the HELLO exchange, with the descriptor its
 * DONE or REPO line carried (else -1), which it then owns. Returns non-zero once the
 * command has every reply it waits for. */
typedef int (*conn_msg_cb)(void *arg, const proto_msg_t *msg, int fd);

typedef struct conn conn_t;

/* Gets HELLO's reply (its fields: hf_upstream, hf_front), or NULL when the
 * daemon answered none (an older one), before any other reply. */
typedef void (*conn_hello_cb)(void *arg, const proto_msg_t *hello);

/* A connection not yet made, to socket_path (NULL: the default, which with
 * may_start may start a per-user daemon; see autostart.h), with HELLO
 * already queued so that it goes out before any request. quiet: no
 * warnings. */
conn_t *conn_new(const char *socket_path, int may_start, int quiet, conn_msg_cb on_msg, void *arg);
void conn_free(conn_t *c);

/* The handler of HELLO's reply (one; before conn_run). */
void conn_on_hello(conn_t *c, conn_hello_cb on_hello, void *arg);

/* Ends the line in w and queues it. Returns 0, or -E2BIG when it would break
 * the protocol's line limit (nothing is queued then). */
int conn_queue_line(conn_t *c, proto_writer_t *w);
/* Queues a request that is a bare verb. */
void conn_queue_verb(conn_t *c, const char *verb);

/* Connects, telling the user why not. With the default socket and
 * may_start, a daemon that stopped since conn_new chose it (its socket gone
 * or refusing) makes autostart choose again, once, as a new hubctl would.
 * Returns 0 or EXIT_UNREACHABLE. */
int conn_open(conn_t *c);

/* Writes the queued requests and feeds replies to the handler until it has
 * them all. One timeout: the answer to HELLO must come within
 * $HUBD_ANSWER_TIMEOUT seconds (default 30), else -ETIMEDOUT (a daemon
 * that systemd cannot start leaves the connection in the socket's backlog).
 * After that none: a download may take hours, and a daemon that dies
 * closes the socket. Returns 0, -EPIPE when the daemon closed the connection
 * first, -EINTR after Ctrl-C (conn_interruptible), or another -errno. */
int conn_run(conn_t *c);

/* Ctrl-C during conn_run sends INTERRUPT (interrupt.h) and conn_run
 * returns -EINTR once it is answered (or after 5 s); conn_interrupted then
 * says what became of the downloads. For the commands that download. */
void conn_interruptible(conn_t *c);
const struct interrupt_account *conn_interrupted(const conn_t *c);
/* Whether Ctrl-C has sent (or queued) INTERRUPT: nothing more is to be
 * asked on the session. */
int conn_interrupting(const conn_t *c);

/* Tells the user about a conn_run failure, and for the system daemon where
 * to look (systemctl status, journalctl); all of them mean the daemon is
 * gone for us. Returns EXIT_UNREACHABLE. */
int conn_report(const conn_t *c, int rc);

#endif
