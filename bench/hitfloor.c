/* hitfloor: what a cache hit costs at the least on this machine, to put
 * hubd's figures beside. A server of hubd's protocol that does for each
 * FETCH only what a hit must: read the line, open the blob's file and
 * fstat it, answer HIT and DONE with the descriptor (one sendmmsg), close it.
 * No parsing beyond the id, no database, no checks, one thread, epoll.
 *
 *   hitfloor SOCKET FILE      (then: bench/hitload SOCKET 8 2000 PID x)
 *
 * Every FETCH gets FILE. It runs until killed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

typedef struct client {
    int fd;
    char buf[4096];
    size_t have;
} client_t;

static const char *file;

static void answer(client_t *c, const char *line)
{
    if (!strncmp(line, "HELLO ", 6)) {
        send(c->fd, "HELLO proto=1 server=hitfloor\n", 30, MSG_NOSIGNAL);
        return;
    }
    const char *id = strstr(line, "id=");
    unsigned n = id ? (unsigned)strtoul(id + 3, NULL, 10) : 0;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        perror(file);
        exit(1);
    }
    char hit[64], done[256];
    int hl = snprintf(hit, sizeof hit, "HIT id=%u\n", n);
    int dl = snprintf(done, sizeof done, "DONE id=%u path=%s size=%lld source=hit\n", n, file,
                      (long long)st.st_size);
    /* Both lines in one call, the fd on DONE's first byte: as hubd sends them. */
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov[2] = {{hit, (size_t)hl}, {done, (size_t)dl}};
    struct mmsghdr mm[2];
    memset(mm, 0, sizeof mm);
    mm[0].msg_hdr.msg_iov = &iov[0];
    mm[0].msg_hdr.msg_iovlen = 1;
    mm[1].msg_hdr.msg_iov = &iov[1];
    mm[1].msg_hdr.msg_iovlen = 1;
    mm[1].msg_hdr.msg_control = cbuf;
    mm[1].msg_hdr.msg_controllen = sizeof cbuf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mm[1].msg_hdr);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    sendmmsg(c->fd, mm, 2, MSG_NOSIGNAL);
    close(fd);
}

static int on_readable(client_t *c)
{
    ssize_t r = read(c->fd, c->buf + c->have, sizeof c->buf - c->have);
    if (r <= 0)
        return -1;
    c->have += (size_t)r;
    char *start = c->buf, *nl;
    while ((nl = memchr(start, '\n', c->have - (size_t)(start - c->buf))) != NULL) {
        *nl = '\0';
        answer(c, start);
        start = nl + 1;
    }
    c->have -= (size_t)(start - c->buf);
    memmove(c->buf, start, c->have);
    return c->have == sizeof c->buf ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hitfloor SOCKET FILE\n");
        return 2;
    }
    file = argv[2];
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", argv[1]);
    unlink(argv[1]);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 128)) {
        perror("listen");
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    for (;;) {
        struct epoll_event evs[64];
        int n = epoll_wait(ep, evs, 64, -1);
        for (int i = 0; i < n; i++) {
            client_t *c = evs[i].data.ptr;
            if (!c) {
                int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0 || !(c = calloc(1, sizeof *c))) {
                    if (fd >= 0)
                        close(fd);
                    continue;
                }
                c->fd = fd;
                struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
            } else if (on_readable(c)) {
                close(c->fd);
                free(c);
            }
        }
    }
}
