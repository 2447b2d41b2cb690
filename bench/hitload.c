/* hitload: cache hits over hubd's Unix socket from a C client, so that
 * what is measured is hubd and not the client. bench/scale.py's Python
 * client costs about as much CPU per hit as hubd itself; on 2 cores its 8
 * sessions measured the two together.
 *
 *   hitload SOCKET SESSIONS COUNT HUBD_PID TARGET...
 *
 * SESSIONS processes, each a session (HELLO, then COUNT FETCHes one at a
 * time after 50 to warm up, each DONE's descriptor received and closed),
 * TARGET being what follows "FETCH id=N url=" (a URL, maybe " sha256=..."),
 * taken in turn. Prints one JSON object: p50 and p99 in ms (session 0),
 * hits per second in all, and hubd's CPU per hit in us (from
 * /proc/HUBD_PID/stat across the timed part: 0 for no pid). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARM_UP 50

typedef struct session {
    int fd;
    char buf[8192];
    size_t have;
} session_t;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "hitload: %s: %s\n", what, errno ? strerror(errno) : "unexpected");
    exit(2);
}

/* The next line (NUL-terminated, without its newline) into line; closes
 * the descriptors that came with it and counts them in *nfds. */
static void read_line(session_t *s, char *line, size_t cap, int *nfds)
{
    for (;;) {
        char *nl = memchr(s->buf, '\n', s->have);
        if (nl) {
            size_t n = (size_t)(nl - s->buf);
            if (n >= cap)
                die("reply line too long");
            memcpy(line, s->buf, n);
            line[n] = '\0';
            s->have -= n + 1;
            memmove(s->buf, nl + 1, s->have);
            return;
        }
        if (s->have == sizeof s->buf)
            die("reply line too long");
        char cbuf[CMSG_SPACE(sizeof(int) * 8)];
        struct iovec iov = {s->buf + s->have, sizeof s->buf - s->have};
        struct msghdr m = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
        ssize_t r = recvmsg(s->fd, &m, MSG_CMSG_CLOEXEC);
        if (r <= 0)
            die(r == 0 ? "hubd closed the session" : "recvmsg");
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                close(fd);
                (*nfds)++;
            }
        }
        s->have += (size_t)r;
    }
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("send");
        p += w;
        n -= (size_t)w;
    }
}

/* One FETCH to its DONE; seconds. */
static double hit(session_t *s, unsigned id, const char *target)
{
    char req[1024], line[2048];
    int n = snprintf(req, sizeof req, "FETCH id=%u url=%s\n", id, target);
    if (n < 0 || (size_t)n >= sizeof req)
        die("target too long");
    double t = now_s();
    send_all(s->fd, req, (size_t)n);
    int nfds = 0;
    for (;;) {
        read_line(s, line, sizeof line, &nfds);
        if (!strncmp(line, "DONE ", 5) || !strncmp(line, "ERR ", 4))
            break;
    }
    double took = now_s() - t;
    if (strncmp(line, "DONE ", 5) || !strstr(line, "source=hit") || nfds != 1) {
        errno = 0;
        fprintf(stderr, "hitload: not a hit with its descriptor: %s (%d fds)\n", line, nfds);
        exit(2);
    }
    return took;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A session's run; writes "p50 p99 wall" to out (a pipe). */
static void run_session(const char *path, unsigned count, char **targets, int ntargets, int go,
                        int out)
{
    session_t s = {.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (s.fd < 0 || connect(s.fd, (struct sockaddr *)&a, sizeof a))
        die("connect");
    char line[512];
    int nfds = 0;
    send_all(s.fd, "HELLO proto=1 client=hitload\n", 29);
    read_line(&s, line, sizeof line, &nfds);
    if (strncmp(line, "HELLO ", 6))
        die("HELLO");
    for (unsigned i = 0; i < WARM_UP; i++)
        hit(&s, i, targets[i % (unsigned)ntargets]);
    char c;
    if (read(go, &c, 1) != 0) /* the parent closes it: all start at once */
        die("start");
    double *times = malloc(sizeof *times * count);
    if (!times)
        die("malloc");
    double t0 = now_s();
    for (unsigned i = 0; i < count; i++)
        times[i] = hit(&s, WARM_UP + i, targets[i % (unsigned)ntargets]);
    double wall = now_s() - t0;
    qsort(times, count, sizeof *times, cmp_double);
    dprintf(out, "%.6f %.6f %.6f\n", times[count / 2] * 1e3, times[count * 99 / 100] * 1e3, wall);
    free(times);
    close(s.fd);
}

static double cpu_s(long pid)
{
    if (pid <= 0)
        return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        die(path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* After the name: state, then fields 4-13; utime and stime are 14, 15. */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        die("parsing /proc/PID/stat");
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: hitload SOCKET SESSIONS COUNT HUBD_PID TARGET...\n");
        return 2;
    }
    const char *path = argv[1];
    int sessions = atoi(argv[2]);
    unsigned count = (unsigned)strtoul(argv[3], NULL, 10);
    long pid = atol(argv[4]);
    if (sessions < 1 || sessions > 256 || count < 1) {
        fprintf(stderr, "hitload: SESSIONS is 1-256, COUNT at least 1\n");
        return 2;
    }
    int go[2], out[2];
    if (pipe(go) || pipe(out))
        die("pipe");
    for (int i = 0; i < sessions; i++) {
        pid_t c = fork();
        if (c < 0)
            die("fork");
        if (c == 0) {
            close(go[1]);
            close(out[0]);
            run_session(path, count, argv + 5, argc - 5, go[0], out[1]);
            _exit(0);
        }
    }
    close(go[0]);
    close(out[1]);
    /* Warm-ups are short: a second is plenty before the timed part. */
    sleep(1);
    double cpu0 = cpu_s(pid);
    close(go[1]);
    FILE *in = fdopen(out[0], "r");
    double p50 = 0, p99 = 0, per_s = 0;
    int got = 0;
    for (double a, b, w; got < sessions && fscanf(in, "%lf %lf %lf", &a, &b, &w) == 3; got++) {
        if (got == 0)
            p50 = a, p99 = b;
        per_s += count / w;
    }
    double cpu = cpu_s(pid) - cpu0;
    int bad = got != sessions;
    for (int st, i = 0; i < sessions; i++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
            bad = 1;
    if (bad) {
        fprintf(stderr, "hitload: a session failed\n");
        return 1;
    }
    printf("{\"sessions\": %d, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"total_per_s\": %.0f, "
           "\"hubd_cpu_us_per_hit\": %.1f}\n",
           sessions, p50, p99, per_s, cpu / ((double)count * sessions) * 1e6);
    return 0;
}
