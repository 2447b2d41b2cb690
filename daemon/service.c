/* service: sd_listen_fds and sd_notify from Debian's libsystemd. */
#include "service.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>

int service_listen_fd(void)
{
    /* unset_environment=1: a child (there is none today) must not think the
     * sockets are its own. */
    int n = sd_listen_fds(1);
    if (n < 0)
        return -EINVAL; /* LISTEN_FDS that do not parse; -1 would read as "none" */
    if (n == 0)
        return -1;
    if (n > 1 || sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0)
        return -EINVAL;
    return SD_LISTEN_FDS_START;
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
