/* fleet_peers: the cluster's member list and the rendezvous order. */
#include "fleet_peers.h"
#include "hostport.h"
#include "sha256.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fleet_peers_free(fleet_peers_t *p)
{
    free(p->v);
    p->v = NULL;
    p->n = p->self = 0;
}

/* One address into its canonical text, numeric address and port. */
static int peer_of(const char *item, fleet_peer_t *out, const char **why)
{
    struct sockaddr_storage ss;
    if (hostport_parse_peer(item, &ss, why))
        return -EINVAL;
    hostport_format((const struct sockaddr *)&ss, out->text, sizeof out->text);
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, out->ip, sizeof out->ip);
        out->port = ntohs(in->sin_port);
    } else {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, out->ip, sizeof out->ip);
        out->port = ntohs(in6->sin6_port);
    }
    return 0;
}

int fleet_peers_parse(const char *text, const char *self, fleet_peers_t *out, char *err,
                      size_t errlen)
{
    fleet_peer_t me;
    const char *why;
    memset(out, 0, sizeof *out);
    if (peer_of(self, &me, &why)) {
        snprintf(err, errlen, "fleet_listen '%s' %s", self, why);
        return -EINVAL;
    }
    size_t cap = 0, line = 0;
    int found = 0, rc = 0;
    const char *p = text;
    while (*p && !rc) {
        line++;
        const char *ln = p, *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char buf[128];
        const char *hash = memchr(ln, '#', len);
        size_t keep = hash ? (size_t)(hash - ln) : len;
        while (keep && (ln[keep - 1] == ' ' || ln[keep - 1] == '\t' || ln[keep - 1] == '\r'))
            keep--;
        size_t lead = 0;
        while (lead < keep && (ln[lead] == ' ' || ln[lead] == '\t'))
            lead++;
        p = end ? end + 1 : p + len;
        if (lead == keep)
            continue;
        if (keep - lead >= sizeof buf) {
            snprintf(err, errlen, "line %zu is too long for an address and port", line);
            rc = -EINVAL;
            break;
        }
        memcpy(buf, ln + lead, keep - lead);
        buf[keep - lead] = '\0';
        fleet_peer_t peer;
        if (peer_of(buf, &peer, &why)) {
            snprintf(err, errlen, "line %zu: '%s' %s", line, buf, why);
            rc = -EINVAL;
            break;
        }
        for (size_t i = 0; i < out->n && !rc; i++)
            if (strcmp(out->v[i].text, peer.text) == 0) {
                snprintf(err, errlen, "line %zu: '%s' is listed twice", line, buf);
                rc = -EINVAL;
            }
        if (rc)
            break;
        if (out->n == FLEET_PEERS_MAX) {
            snprintf(err, errlen, "line %zu: more than %d members", line, FLEET_PEERS_MAX);
            rc = -E2BIG;
            break;
        }
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            fleet_peer_t *v = realloc(out->v, ncap * sizeof *v);
            if (!v) {
                snprintf(err, errlen, "out of memory");
                rc = -ENOMEM;
                break;
            }
            out->v = v;
            cap = ncap;
        }
        if (strcmp(peer.text, me.text) == 0) {
            out->self = out->n;
            found = 1;
        }
        out->v[out->n++] = peer;
    }
    if (!rc && !found) {
        snprintf(err, errlen, "this node's fleet_listen %s is not one of its lines", me.text);
        rc = -EINVAL;
    }
    if (rc)
        fleet_peers_free(out);
    return rc;
}

int fleet_peers_load(const char *path, const char *self, fleet_peers_t *out, char *err,
                     size_t errlen)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open fleet_peers %s: %s", path, strerror(e));
        return -e;
    }
    char *buf = malloc(FLEET_PEERS_FILE_MAX + 1);
    size_t len = 0;
    ssize_t n = 0;
    while (buf && len < FLEET_PEERS_FILE_MAX &&
           (n = read(fd, buf + len, FLEET_PEERS_FILE_MAX - len)) > 0)
        len += (size_t)n;
    int e = n < 0 ? errno : 0;
    char extra;
    int more = buf && len == FLEET_PEERS_FILE_MAX && read(fd, &extra, 1) == 1;
    close(fd);
    if (!buf || e || more) {
        free(buf);
        snprintf(err, errlen, "cannot read fleet_peers %s: %s", path,
                 !buf ? "out of memory"
                 : e  ? strerror(e)
                      : "larger than 1 MiB");
        return !buf ? -ENOMEM : e ? -e : -EFBIG;
    }
    buf[len] = '\0';
    char why[200];
    int rc = fleet_peers_parse(buf, self, out, why, sizeof why);
    free(buf);
    if (rc)
        snprintf(err, errlen, "fleet_peers %s: %s", path, why);
    return rc;
}

static uint64_t weight(const char *sha256, const char *member)
{
    sha256_ctx_t c;
    uint8_t d[32];
    sha256_init(&c);
    sha256_update(&c, sha256, strlen(sha256));
    sha256_update(&c, "\n", 1);
    sha256_update(&c, member, strlen(member));
    sha256_final(&c, d);
    uint64_t w = 0;
    for (int i = 0; i < 8; i++)
        w = w << 8 | d[i];
    return w;
}

typedef struct ranked {
    uint64_t w;
    size_t i;
} ranked_t;

/* Heaviest first; ties (one in 2^64) by index, so every node agrees. */
static int by_weight(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

void fleet_peers_order(const fleet_peers_t *p, const char *sha256, size_t *order)
{
    ranked_t *r = malloc(p->n * sizeof *r);
    if (!r) { /* no memory: the file's order, the same on every node that fails alike */
        for (size_t i = 0; i < p->n; i++)
            order[i] = i;
        return;
    }
    for (size_t i = 0; i < p->n; i++)
        r[i] = (ranked_t){weight(sha256, p->v[i].text), i};
    qsort(r, p->n, sizeof *r, by_weight);
    for (size_t i = 0; i < p->n; i++)
        order[i] = r[i].i;
    free(r);
}
