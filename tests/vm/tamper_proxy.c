/* tamper_proxy: a TCP relay on loopback that changes one byte of the Nth
 * TLS application-data record the server sends, as an attacker on the
 * path would; everything else passes as it is.
 *
 *   tamper_proxy LISTEN_PORT UPSTREAM_PORT N
 *   tamper_proxy LISTEN_PORT UPSTREAM_PORT connect
 *
 * Each connection gets a child process and the same treatment. The VM
 * test of kernel TLS (ktls_vm_test.sh) runs it between hubd and nginx:
 * the kernel must refuse the record (EBADMSG) and hubd fail the transfer.
 * With "connect" it changes nothing and is a forward proxy instead: it
 * answers a CONNECT with 200 and relays to UPSTREAM_PORT whatever the
 * CONNECT named (TLS through a tunnel, as through Squid). Either way an
 * alert record after application data (close_notify) is logged.
 * Test code: blocking I/O, no limits beyond the test's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where the server's byte stream is within its records. */
typedef struct records {
    unsigned char head[5]; /* the record header being read */
    size_t head_len;
    size_t body_left;   /* bytes of the current record's body still to come */
    size_t body_at;     /* bytes of it seen */
    int tamper;         /* the current record is the one to change */
    unsigned data_seen; /* application-data records begun */
    unsigned nth;       /* which one to change (1: the first) */
    const char *who;    /* whose records: an alert among them is logged */
} records_t;

/* Changes, in place, the byte of the chosen record at body offset 20
 * (past the explicit nonce: ciphertext), or its last if it is shorter. */
static void scan(records_t *r, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r->body_left == 0) {
            r->head[r->head_len++] = p[i];
            if (r->head_len == 5) {
                r->head_len = 0;
                r->body_left = (size_t)r->head[3] << 8 | r->head[4];
                r->body_at = 0;
                r->tamper = r->head[0] == 23 && ++r->data_seen == r->nth;
                if (r->head[0] == 21 && r->data_seen > 0)
                    fprintf(stderr, "tamper_proxy: an alert record from the %s\n", r->who);
            }
            continue;
        }
        size_t len = r->body_at + r->body_left;
        if (r->tamper && (r->body_at == 20 || (len <= 20 && r->body_left == 1))) {
            p[i] ^= 0x01;
            fprintf(stderr, "tamper_proxy: changed a byte of application-data record %u\n",
                    r->data_seen);
        }
        r->body_at++;
        r->body_left--;
    }
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads the CONNECT request's head (byte by byte: nothing after it is
 * taken) and says yes. */
static int answer_connect(int client)
{
    char head[4096];
    size_t n = 0;
    while (n < sizeof head && (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0))
        if (read(client, head + n++, 1) != 1)
            return -1;
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    fprintf(stderr, "tamper_proxy: CONNECT answered\n");
    return n < sizeof head ? write_all(client, (const unsigned char *)ok, sizeof ok - 1) : -1;
}

static void relay(int client, int upstream_port, unsigned nth)
{
    int up = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)upstream_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (up < 0 || connect(up, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("tamper_proxy: connect");
        return;
    }
    records_t r = {.nth = nth, .who = "server"}, from_client = {.who = "client"};
    unsigned char buf[65536];
    struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = up, .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0)
            return;
        if (fds[0].revents) {
            ssize_t n = read(client, buf, sizeof buf);
            if (n <= 0)
                return;
            scan(&from_client, buf, (size_t)n);
            if (write_all(up, buf, (size_t)n))
                return;
        }
        if (fds[1].revents) {
            ssize_t n = read(up, buf, sizeof buf);
            if (n <= 0)
                return;
            scan(&r, buf, (size_t)n);
            if (write_all(client, buf, (size_t)n))
                return;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tamper_proxy LISTEN_PORT UPSTREAM_PORT N\n");
        return 2;
    }
    signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 16) != 0) {
        perror("tamper_proxy: listen");
        return 1;
    }
    for (;;) {
        int c = accept(ls, NULL, NULL);
        if (c < 0)
            continue;
        if (fork() == 0) {
            close(ls);
            int tunnel = strcmp(argv[3], "connect") == 0;
            if (!tunnel || answer_connect(c) == 0)
                relay(c, atoi(argv[2]), tunnel ? 0 : (unsigned)atoi(argv[3]));
            _exit(0);
        }
        close(c);
    }
}
