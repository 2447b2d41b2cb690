#include "unixsock.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int unixsock_addr(const char *path, struct sockaddr_un *sa)
{
    size_t len = strlen(path);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (len >= sizeof sa->sun_path)
        return -ENAMETOOLONG;
    memcpy(sa->sun_path, path, len + 1);
    return 0;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int unixsock_connect(const char *path, int retry_ms)
{
    struct sockaddr_un sa;
    int rc = unixsock_addr(path, &sa);
    if (rc)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (retry_ms > 0 ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -errno;
    long long deadline = now_ms() + retry_ms;
    int pause_ms = 1;
    for (;;) {
        if (connect(fd, (const struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        rc = -errno;
        if (rc != -EAGAIN || retry_ms <= 0)
            break;
        long long left = deadline - now_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        poll(NULL, 0, pause_ms < left ? pause_ms : (int)left);
        pause_ms = pause_ms < 100 ? pause_ms * 2 : 100;
    }
    close(fd);
    return rc;
}
