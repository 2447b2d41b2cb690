/* service: sd_listen_fds and sd_notify from Debian's libsystemd. */
#include "service.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

int service_listen_fds(int *unix_fd, int *tcp_fds, size_t cap, size_t *ntcp)
{
    *unix_fd = -1;
    *ntcp = 0;
    /* unset_environment=1: a child (there is none today) must not think the
     * sockets are its own. */
    int n = sd_listen_fds(1);
    if (n < 0)
        return -EINVAL; /* LISTEN_FDS that do not parse; -1 would read as "none" */
    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++) {
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
            if (*unix_fd >= 0)
                return -EINVAL; /* which one would the clients find? */
            *unix_fd = fd;
        } else if (sd_is_socket(fd, AF_INET, SOCK_STREAM, 1) > 0 ||
                   sd_is_socket(fd, AF_INET6, SOCK_STREAM, 1) > 0) {
            if (*ntcp >= cap)
                return -E2BIG;
            tcp_fds[(*ntcp)++] = fd;
        } else {
            return -EINVAL;
        }
    }
    /* TCP sockets alone would leave hubctl without its socket. */
    if (n > 0 && *unix_fd < 0)
        return -EINVAL;
    return 0;
}

void service_ready(void)
{
    sd_notify(0, "READY=1");
}

void service_reloading(void)
{
    sd_notify(0, "RELOADING=1");
}

void service_stopping(void)
{
    sd_notify(0, "STOPPING=1");
}

void service_status(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sd_notifyf(0, "STATUS=%s", line);
}
