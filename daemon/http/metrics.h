/* metrics: the page of the scrape endpoint for Prometheus (metrics_listen,
 * off by default), in the text exposition format (version 0.0.4).
 *
 * What it says: the STATS counters, under the names `hubctl stats
 * --prometheus` gives them (one table and one renderer for both:
 * common/promtext.h), and per user: the bytes served since the start, the
 * bytes of the blobs held and the holds (links into HF caches), and the
 * downloads transferring now that the user started. A user is labelled by
 * name (user="alice"; a uid without a name by its number) or, with
 * metrics_user_label = uid, by uid (uid="1000"). No URL, token, file name
 * or link is on the page.
 *
 * A scrape snapshots the loop's counters (no I/O), then one pool item
 * reads the holds by uid (SQLite, the writer's counts), finds the users'
 * names (getpwuid_r: NSS may block; a name is kept 10 minutes) and renders
 * the page. One item at a time: a scrape that comes while one is out
 * shares its page. The page is bounded (METRICS_MAX_USERS users, a few
 * MiB at most). The HTTP side is httpd's: a server of its own on the
 * metrics listener (httpd_deps_t.metrics) with the one route /metrics
 * (httpd_metrics.c).
 *
 * Loop thread only. */
#ifndef HUBD_METRICS_H
#define HUBD_METRICS_H

#include "bytebuf.h"
#include "config.h"
#include "db.h"
#include "job.h"
#include "list.h"
#include "proto.h"

#include <stddef.h>
#include <uv.h>

#define METRICS_MAX_USERS 4096 /* users on a page (JOBS_SERVED_UIDS) */

typedef struct metrics metrics_t;

/* What a scrape reads. Not owned; valid until metrics_close. */
typedef struct metrics_deps {
    uv_loop_t *loop;
    const hubd_config_t *cfg; /* metrics_user_label, read at each scrape */
    jobs_t *jobs;
    db_t *db;
    /* The STATS counters: adds them to w as fields. main.c sets the STATS
     * verb's own function (session_server_stats), so the two cannot differ. */
    void (*stats)(void *arg, proto_writer_t *w);
    void *stats_arg;
} metrics_deps_t;

/* The page is ready: body (len bytes, valid during the call), or err (a
 * negative errno) and no body. */
typedef void (*metrics_page_cb)(void *arg, const char *body, size_t len, int err);

/* One asker's place in the queue of a page; the asker's memory. */
typedef struct metrics_ask {
    metrics_page_cb cb;
    void *arg;
    list_node_t node; /* in the metrics' askers */
    int waiting;      /* in the queue: cb is still to come */
} metrics_ask_t;

int metrics_new(const metrics_deps_t *d, metrics_t **out);

/* Asks for a page: cb(arg, ...) once, unless metrics_cancel comes first;
 * from inside this call only when no item can be started (no memory),
 * with the error. a stays the caller's; it must live until then. */
void metrics_ask(metrics_t *m, metrics_ask_t *a, metrics_page_cb cb, void *arg);

/* The asker goes away: no callback. Idempotent. */
void metrics_cancel(metrics_ask_t *a);

/* Frees m. Askers still waiting are dropped unheard (their server closes
 * first); an item in the pool frees its part when it is back. */
void metrics_close(metrics_t *m);

/* Pure, for tests: the per-user part of a page for n users sorted by uid
 * into out (label "user" or "uid"; names[i] the label's value). */
typedef struct metrics_user {
    uid_t uid;
    uint64_t served; /* bytes handed out since the start */
    uint64_t holds;  /* hold rows */
    uint64_t held;   /* bytes of the blobs held, each once */
    unsigned active; /* downloads transferring now that it started */
    char name[72];   /* the label's value: its name, or its uid as text */
    char label[160]; /* name as escaped on the page (metrics.c compares them) */
} metrics_user_t;
int metrics_render_users(bytebuf_t *out, const char *label, const metrics_user_t *u, size_t n);

/* Two users whose labels would read the same (names cut at the label's
 * size, bytes that are not UTF-8 written as '?', a user named as another's
 * uid) would make two series of one name, and Prometheus refuses the
 * whole page: each of them gets "uid:N" as its name instead, which no user
 * name can be (':' separates passwd's fields). Pure. */
void metrics_unique_labels(metrics_user_t *u, size_t n);

#endif
