/* httpd: the HTTP/1.1 front on loopback TCP, another way in to
 * the same fetch front door as the Unix socket: one single flight, one
 * cache, one set of limits (the session server's access lists and per-uid
 * quota).
 *
 * `GET|HEAD /<absolute http(s) URL>` fetches the URL through the jobs
 * module and answers with the file: a Content-Length always, one Range
 * (206) or 416, keep-alive, the body sent with sendfile(2) from the blob in
 * pool items. Each connection's user is found from the kernel's socket
 * table (peeruid.h) before anything is read from it; one whose uid cannot
 * be found, or that access control refuses, gets a 403. Only a Host that
 * names the listener is served, and a cross-site Origin or Sec-Fetch-Site
 * is refused, so that a web page in a browser on the machine cannot drive
 * the front.
 *
 * Loop thread only. The server owns its connections; httpd_close closes
 * them all (their waiters leave their jobs, which run on). */
#ifndef HUBD_HTTPD_H
#define HUBD_HTTPD_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "hf_meta.h"
#include "db.h"
#include "store.h"
#include "job.h"
#include "principal.h"
#include "quota.h"
#include "tcp_listener.h"

typedef struct httpd httpd_t;

/* What the front shares with the Unix-socket server. Not owned. */
typedef struct httpd_deps {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    jobs_t *jobs;
    const principal_acl_t *acl; /* who may connect */
    quota_t *quota;             /* waiting requests per uid */
    store_t *store;             /* to forget a file the Hub's ETag refuses */
    db_t *db;
    hf_meta_t *hf; /* what the Hub said of files, shared with the socket's FETCH */
    /* Set: this server is the metrics endpoint (metrics.h), not the front:
     * its connections are not looked up (the endpoint is unauthenticated:
     * Prometheus runs as a user of its own), its one route is /metrics,
     * and at most HTTPD_METRICS_MAX_CONNS are open. The fields above but
     * loop and cfg are not used then. */
    struct metrics *metrics;
} httpd_deps_t;

/* Counters for STATS. */
typedef struct httpd_stats {
    uint64_t connections; /* accepted */
    uint64_t requests;    /* answered, whatever the status */
    uint64_t bytes;       /* body bytes sent */
    uint64_t refused;     /* peers refused (uid unknown, not allowed, over a limit) */
    uint64_t open;        /* connections open now */
} httpd_stats_t;

int httpd_new(const httpd_deps_t *deps, httpd_t **out);

/* A client waits on l: accepts it (from tcp_listener's callback). h may be
 * NULL (not made yet, or closed): the client is accepted and closed. */
void httpd_accept(uv_loop_t *loop, httpd_t *h, tcp_listener_t *l);

/* A connection accepted on a front listener (non-blocking, close-on-exec):
 * the front's from now on, also on failure. */
void httpd_take(httpd_t *h, int fd);

void httpd_get_stats(const httpd_t *h, httpd_stats_t *out);

/* Closes every connection and frees the server, then done(arg) (never
 * from inside this call; done may be NULL). */
void httpd_close(httpd_t *h, void (*done)(void *arg), void *arg);

/* The status an error code (PROTOCOL.md) answers with on the front, its
 * row's front column (errcode.h): 401, 403, 404, 410 and 451 pass,
 * timeouts 504, policy refusals 403, other upstream failures 502. Pure. */
int httpd_status_of(const char *code);

#endif
