/* listener: the Unix socket clients connect to, and who they are.
 *
 * Listens on a socket systemd passed, or binds cfg->socket_path itself:
 * its parent folder made if missing, a stale socket file (nobody answers
 * there) replaced, a live one (another hubd) refused, the mode set through
 * umask (never wider than asked for a moment) and the group given. Each
 * accepted client is identified by the kernel (SO_PEERCRED) as a principal.
 *
 * Loop thread only. The listener owns its handle: listener_close frees it
 * from the close callback, then calls done. */
#ifndef HUBD_LISTENER_H
#define HUBD_LISTENER_H

#include <sys/stat.h>
#include <uv.h>

#include "config.h"
#include "principal.h"

typedef struct listener listener_t;

/* A client waits to be accepted (listener_accept). Accept errors are
 * logged here and never reach the callback. */
typedef void (*listener_connection_cb)(void *arg, listener_t *l);

/* Starts listening on listen_fd (systemd's; -1: bind cfg->socket_path).
 * 0, or a negative errno, logged (and nothing is left open). */
int listener_start(uv_loop_t *loop, const hubd_config_t *cfg, int listen_fd,
                   listener_connection_cb cb, void *arg, listener_t **out);

/* Accepts the waiting client into `client` (an initialised pipe) and reads
 * its credentials. 0, or a negative errno: then the caller closes client
 * (a client without credentials is logged: nothing can be decided about it,
 * and a zeroed uid would read as root). */
int listener_accept(listener_t *l, uv_pipe_t *client, principal_t *who);

/* The socket file's owner, group and mode (ours or systemd's), into st:
 * who may connect to it. 0, or a negative errno. */
int listener_node(const listener_t *l, struct stat *st);

/* Shutdown, first step: removes the socket file (unless systemd's, which
 * stays for the next start) so no new client finds it. */
void listener_unlink(listener_t *l);

/* Closes the socket and frees the listener, then calls done(arg) (may be
 * NULL). */
void listener_close(listener_t *l, void (*done)(void *arg), void *arg);

#endif
