/* unixsock: connecting to a Unix stream socket by path, for hubctl, the
 * client's autostart and the daemon's check for a stale socket file. */
#ifndef HUBD_UNIXSOCK_H
#define HUBD_UNIXSOCK_H

#include <sys/socket.h>
#include <sys/un.h>

/* Fills sa for path: 0, or -ENAMETOOLONG when sun_path cannot hold it. */
int unixsock_addr(const char *path, struct sockaddr_un *sa);

/* A close-on-exec socket connected to path: the fd, or -errno.
 *
 * retry_ms 0: one blocking connect(2). retry_ms > 0: a non-blocking socket,
 * and EAGAIN (the listen backlog is full; a Unix socket never answers
 * EINPROGRESS) retried with a growing pause for up to retry_ms, then
 * -ETIMEDOUT; the fd stays non-blocking. */
int unixsock_connect(const char *path, int retry_ms);

#endif
