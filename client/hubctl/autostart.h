/* autostart: which socket hubctl talks to, and the per-user daemon.
 *
 * A system daemon, where one answers, always wins. Without one (and without
 * --socket or HUBD_SOCKET), hubctl uses a per-user daemon on a per-user
 * socket and cache, starting it in the background when nothing answers
 * there, as sccache does. */
#ifndef HUBCTL_AUTOSTART_H
#define HUBCTL_AUTOSTART_H

#include <stddef.h>

/* The socket to use: explicit (--socket), else $HUBD_SOCKET, else the system
 * socket ($HUBD_SYSTEM_SOCKET or /run/hubd/hubd.sock) if a daemon answers
 * there, else the per-user socket ($XDG_RUNTIME_DIR/hubd.sock, or
 * /tmp/hubd-UID/hubd.sock). With may_start, a per-user daemon is started
 * when nothing answers on the per-user socket; without (the read-only
 * commands), -ENOENT after saying that none runs. A system socket that
 * refuses the user (EACCES) is named, with the way in, before falling back.
 * With the per-user daemon turned off (clientconf.h), or on a machine whose
 * system hubd is installed (hubd.socket) but does not answer, no per-user
 * daemon is started: -ECANCELED, after saying so, with out set to the
 * system socket.
 * Returns 0, or -errno after telling the user on stderr why no daemon
 * could be used; out is then the socket that was tried, or empty when none
 * could be chosen (the per-user folder could not be made, checked, or
 * trusted, or is not writable). */
int autostart_socket(const char *explicit_path, int may_start, int quiet, char *out, size_t cap);

/* The system daemon's socket: $HUBD_SYSTEM_SOCKET, else /run/hubd/hubd.sock. */
const char *autostart_system_socket(void);

/* After the daemon at path took a connection but did not answer, or closed
 * it first: where to look, when it is the system daemon (systemd's status
 * and journal). */
void autostart_service_hint(const char *path);

/* Tells the user on stderr how to be let in to the daemon whose socket at
 * path refused them (EACCES): the `adduser` of the socket's group. */
void autostart_refused_hint(const char *path);

/* Whom hubctl may send requests to, on fd, a connection to path. On the
 * per-user socket (the path autostart_socket would pick, in any spelling:
 * the same file, or the same folder and name after symlinks), only a daemon of
 * the user's own, or root's (SO_PEERCRED): a folder another user could
 * write into is refused before that, so this holds even if one slipped
 * through. A path chosen by name (the system socket, --socket or
 * $HUBD_SOCKET naming another) is the caller's choice: 0. Returns 0, or
 * -EPERM / -errno after saying on stderr who answers and what to do. */
int autostart_check_peer(int fd, const char *path);

/* `hubctl start`: the per-user daemon runs afterwards; out gets its socket.
 * -ECANCELED (said) when it is turned off. */
int autostart_start(int quiet, char *out, size_t cap);

/* `hubctl stop`: SIGTERM to the per-user daemon (found by SO_PEERCRED on
 * its socket, and only if it is ours), then waits for it to go. 1 when none
 * was running, 0 when stopped, -errno on failure. */
int autostart_stop(int quiet);

#endif
