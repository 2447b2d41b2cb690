#include "listing.h"

#include "conn.h"
#include "json.h"
#include "out.h"
#include "textnum.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a listing command asks and prints. */
typedef struct listing_spec {
    const char *request;                           /* verb sent */
    const char *row;                               /* verb of each row */
    int until_end;                                 /* rows until END, else one row */
    const char *header;                            /* table header, or NULL */
    void (*print)(FILE *o, const proto_msg_t *m);  /* one row as text */
    void (*footer)(FILE *o, const proto_msg_t *m); /* from END, as text; or NULL */
    void (*json)(FILE *o, const proto_msg_t *m);   /* one row as JSON; NULL: json_msg */
} listing_spec_t;

typedef struct listing {
    const listing_spec_t *spec; /* the command */
    int json;                   /* --json */
    FILE *out;                  /* memory: output appears only once the reply is whole */
    size_t rows;                /* rows seen */
    int failed;                 /* the daemon answered ERR */
} listing_t;

/* ---- rows as text ------------------------------------------------------- */

static void print_job(FILE *o, const proto_msg_t *m)
{
    char a[32], b[32], rate[32], pct[8] = "-", eta[32] = "-";
    out_line_t amount = {.len = 0}, cells = {.len = 0};
    out_line_add(&amount, "%s", out_field_bytes(m, "done", a, sizeof a));
    if (proto_get(m, "total"))
        out_line_add(&amount, " / %s", out_field_bytes(m, "total", b, sizeof b));
    uint64_t done, total, bps;
    if (parse_u64(proto_get(m, "done"), &done) == 0 &&
        parse_u64(proto_get(m, "total"), &total) == 0 && total > 0 && done <= total) {
        snprintf(pct, sizeof pct, "%d%%", (int)(done * 100 / total));
        if (parse_u64(proto_get(m, "rate"), &bps) == 0 && bps > 0)
            out_eta((total - done + bps - 1) / bps, eta, sizeof eta);
    }
    /* Where the bytes come from: "origin", or the mirror's scheme://host. */
    const char *source = proto_get(m, "mirror");
    if (!source)
        source = out_get_or(m, "source", "origin"); /* an older daemon: no mirrors */
    char users[128];
    out_user_names(proto_get(m, "users"), users, sizeof users);
    out_line_add(
        &cells, "%5.20s  %-11.20s  %-23s  %4s  %10s/s  %6s  %5.20s  %7.20s  %-16.128s  %-24.300s  ",
        out_get_or(m, "job", "?"), out_get_or(m, "state", "?"), amount.buf, pct,
        out_field_bytes(m, "rate", rate, sizeof rate), eta, out_get_or(m, "connections", "-"),
        out_get_or(m, "waiters", "?"), users, source);
    out_clean(o, cells.buf);
    out_clean(o, out_get_or(m, "url", "?"));
    putc('\n', o);
}

/* Under the jobs: the HTTP front's part (its requests are among the
 * jobs' waiters). Said only by a daemon with a front. */
static void print_front(FILE *o, const proto_msg_t *m)
{
    uint64_t open, requests;
    if (parse_u64(proto_get(m, "http_open"), &open) < 0 ||
        parse_u64(proto_get(m, "http_requests"), &requests) < 0)
        return;
    char sent[32];
    fprintf(o,
            "http front: %" PRIu64 " connection%s open, %" PRIu64 " request%s answered, %s sent\n",
            open, open == 1 ? "" : "s", requests, requests == 1 ? "" : "s",
            out_field_bytes(m, "http_bytes", sent, sizeof sent));
}

/* CRED: "-" for an entry shared with everyone; else the credential it is
 * kept apart for (a short tag, or "other": not the caller's). */
static void print_entry(FILE *o, const proto_msg_t *m)
{
    char size[32], when[32];
    out_line_t cells = {.len = 0};
    out_line_add(&cells, "%-12.12s  %10s  %-16s  %-6s  %-8.8s  ", out_get_or(m, "sha256", "?"),
                 out_field_bytes(m, "size", size, sizeof size),
                 out_field_time(m, "accessed", when, sizeof when),
                 str_eq(out_get_or(m, "pinned", "0"), "1") ? "yes" : "",
                 out_get_or(m, "cred", "-"));
    out_clean(o, cells.buf);
    out_clean(o, out_get_or(m, "url", "?"));
    putc('\n', o);
}

static void print_stats(FILE *o, const proto_msg_t *m)
{
    for (size_t i = 0; i < m->nfields; i++) {
        const proto_field_t *fl = &m->fields[i];
        if (proto_get(m, fl->key) != fl->value)
            continue; /* a repeated key: the first one counts */
        out_clean(o, fl->key);
        fputs(": ", o);
        out_clean(o, fl->value);
        putc('\n', o);
    }
}

/* STATS fields and their Prometheus metrics: the names --prometheus and
 * stats --json use alike. */
static const struct {
    const char *key, *name, *type, *help;
} metrics[] = {
    {"hits", "hubd_hits_total", "counter", "Fetches answered from the cache."},
    {"misses", "hubd_misses_total", "counter", "Fetches that started a download."},
    {"attached", "hubd_dedup_attaches_total", "counter",
     "Fetches that joined a download already running."},
    {"bytes_from_origin", "hubd_origin_bytes_total", "counter",
     "Response body bytes received from origins."},
    {"bytes_served", "hubd_served_bytes_total", "counter", "Bytes of the files handed out."},
    {"cache_bytes", "hubd_cache_size_bytes", "gauge", "Bytes of the blobs in the cache."},
    {"cache_blobs", "hubd_cache_blobs", "gauge", "Blobs in the cache."},
    {"max_cache_size", "hubd_cache_max_size_bytes", "gauge",
     "The configured max_cache_size (0: no limit)."},
    {"evicted", "hubd_evicted_blobs_total", "counter", "Blobs evicted."},
    {"evicted_bytes", "hubd_evicted_bytes_total", "counter", "Bytes evicted."},
    {"bad_blobs", "hubd_bad_blobs_total", "counter",
     "Blobs found changed or corrupt on disk (hits, background verification), quarantined."},
    {"segmented", "hubd_segmented_downloads_total", "counter",
     "Downloads fetched over several connections."},
    {"segment_retries", "hubd_segment_retries_total", "counter",
     "Ranges of segmented downloads asked for again (a failure, a stall, a 429)."},
    {"segment_fallbacks", "hubd_segment_fallbacks_total", "counter",
     "Segmented downloads restarted as one stream (ranges that did not fit together)."},
    {"revalidated", "hubd_revalidated_total", "counter",
     "Cached URLs the origin said were current (304 Not Modified), served as hits."},
    {"commits", "hubd_commits_total", "counter", "Downloads committed to the cache."},
    {"commit_groups", "hubd_commit_groups_total", "counter",
     "Group commits: the transactions (and fsyncs) those commits shared."},
    {"commit_name_syncs", "hubd_commit_name_syncs_total", "counter",
     "Group commits whose new names one syncfs made durable, not an fsync of each folder."},
    {"hits_on_loop", "hubd_hits_on_loop_total", "counter",
     "Hits answered on the event loop, with no thread pool item (their path was cached)."},
    {"jobs_active", "hubd_jobs_active", "gauge", "Downloads transferring now."},
    {"jobs_queued", "hubd_jobs_queued", "gauge", "Downloads waiting for a slot."},
    {"sessions", "hubd_sessions", "gauge", "Connected clients."},
    {"http_connections", "hubd_http_connections_total", "counter",
     "Connections accepted by the HTTP front."},
    {"http_requests", "hubd_http_requests_total", "counter",
     "Requests the HTTP front answered, whatever the status."},
    {"http_bytes", "hubd_http_bytes_total", "counter", "Body bytes the HTTP front sent."},
    {"http_refused", "hubd_http_refused_total", "counter",
     "HTTP front connections refused (user unknown or not allowed, over a limit)."},
    {"holds", "hubd_holds", "gauge", "Holds of blobs linked into users' HF caches."},
    {"held_bytes", "hubd_held_bytes", "gauge", "Bytes of the blobs held (each once)."},
    {"listing_bytes", "hubd_listing_bytes", "gauge",
     "Bytes the HFREPO file lists alive hold on the cache's disk."},
    {"uptime", "hubd_uptime_seconds", "gauge", "Seconds since the daemon started."},
};

/* Prometheus text exposition (version 0.0.4) of one STATS line. */
static void print_prometheus(FILE *o, const proto_msg_t *m)
{
    for (size_t i = 0; i < ARRAY_LEN(metrics); i++) {
        uint64_t v;
        if (parse_u64(proto_get(m, metrics[i].key), &v) < 0)
            continue; /* an older daemon: leave the metric out, not 0 */
        fprintf(o, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", metrics[i].name, metrics[i].help,
                metrics[i].name, metrics[i].type, metrics[i].name, v);
    }
    /* errors_by_code=code:n,code:n */
    fputs("# HELP hubd_errors_total Fetches answered with an error, by error code.\n"
          "# TYPE hubd_errors_total counter\n",
          o);
    const char *by = out_get_or(m, "errors_by_code", "");
    while (*by) {
        size_t len = strcspn(by, ",");
        const char *colon = memchr(by, ':', len);
        if (colon && colon > by) {
            int nlen = (int)(colon - by);
            fprintf(o, "hubd_errors_total{code=\"%.*s\"} %.*s\n", nlen, by,
                    (int)(len - (size_t)nlen - 1), colon + 1);
        }
        by += len + (by[len] == ',');
    }
}

/* stats --json: the Prometheus metrics' names and values, errors by code
 * as an object; a field this hubctl has no metric for (a newer daemon's)
 * under hubd_<field>. */
static void json_stats(FILE *o, const proto_msg_t *m)
{
    putc('{', o);
    int first = 1;
    for (size_t i = 0; i < m->nfields; i++) {
        const proto_field_t *fl = &m->fields[i];
        if (proto_get(m, fl->key) != fl->value || str_eq(fl->key, "errors"))
            continue; /* errors: the sum of hubd_errors_total's */
        const char *name = NULL;
        for (size_t k = 0; k < ARRAY_LEN(metrics) && !name; k++)
            if (str_eq(metrics[k].key, fl->key))
                name = metrics[k].name;
        char other[80];
        if (!name && str_eq(fl->key, "errors_by_code"))
            name = "hubd_errors_total";
        if (!name) {
            snprintf(other, sizeof other, "hubd_%.60s", fl->key);
            name = other;
        }
        fputs(first ? "" : ",", o);
        first = 0;
        json_str(o, name);
        putc(':', o);
        uint64_t v;
        if (str_eq(fl->key, "errors_by_code"))
            json_counts(o, fl->value);
        else if (parse_u64(fl->value, &v) == 0)
            fprintf(o, "%" PRIu64, v);
        else
            json_str(o, fl->value);
    }
    fputs("}", o);
}

static const listing_spec_t status_spec = {
    "STATUS",
    "JOB",
    1,
    "  JOB  STATE        DONE/TOTAL                  %        RATE     ETA  CONNS  WAITERS  "
    "USERS             SOURCE                    URL\n",
    print_job,
    print_front,
    NULL};
static const listing_spec_t stats_spec = {"STATS", "STATS", 0, NULL, print_stats, NULL, json_stats};
static const listing_spec_t prometheus_spec = {"STATS",          "STATS", 0,   NULL,
                                               print_prometheus, NULL,    NULL};
static void json_entry(FILE *o, const proto_msg_t *m)
{
    json_msg_or_null(o, m, "cred");
}

static const listing_spec_t ls_spec = {
    "LIST",      "ENTRY",
    1,           "SHA256              SIZE  ACCESSED          PINNED  CRED      URL\n",
    print_entry, NULL,
    json_entry};

/* ---- the exchange ------------------------------------------------------- */

static void listing_row(listing_t *l, const proto_msg_t *m)
{
    if (l->json && l->spec->until_end)
        fputs(l->rows ? ",\n" : "\n", l->out);
    if (l->json)
        (l->spec->json ? l->spec->json : json_msg)(l->out, m);
    else
        l->spec->print(l->out, m);
    l->rows++;
}

static int listing_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    listing_t *l = arg;
    close_fd(fd);
    if (str_eq(m->verb, "ERR") && !proto_get(m, "id")) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        fprintf(stderr, "hubctl: hubd answered %s with ", l->spec->request);
        out_reason(stderr, code ? code : "an error", msg ? msg : "");
        if (l->json) { /* the one error shape, on stdout, as the answer */
            fputs("{\"ok\":false,\"error\":", stdout);
            json_error(stdout, code, msg);
            fputs("}\n", stdout);
        }
        l->failed = 1;
        return 1;
    }
    if (str_eq(m->verb, l->spec->row)) {
        listing_row(l, m);
        return !l->spec->until_end;
    }
    if (l->spec->until_end && str_eq(m->verb, "END")) {
        if (!l->json && l->spec->footer)
            l->spec->footer(l->out, m);
        return 1;
    }
    return 0;
}

static int listing_run(const cli_t *c, const listing_spec_t *spec)
{
    char *buf = NULL;
    size_t len = 0;
    listing_t l = {.spec = spec, .json = c->json, .out = open_memstream(&buf, &len)};
    if (!l.out) {
        fprintf(stderr, "hubctl: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    if (c->json && spec->until_end)
        putc('[', l.out);
    else if (!c->json && spec->header)
        fputs(spec->header, l.out);

    conn_t *conn = conn_new(c->socket, 0, c->quiet, listing_on_msg, &l);
    conn_queue_verb(conn, spec->request);
    int rc = conn_open(conn);
    int err = rc == 0 ? conn_run(conn) : 0;
    if (err < 0)
        rc = conn_report(conn, err);
    else if (rc == 0 && l.failed)
        rc = EXIT_FAILED;
    if (c->json && spec->until_end)
        fputs(l.rows ? "\n]\n" : "]\n", l.out);
    else if (c->json)
        putc('\n', l.out);
    fclose(l.out);
    if (rc == 0)
        fwrite(buf, 1, len, stdout);
    free(buf);
    conn_free(conn);
    return rc;
}

int listing_status(const cli_t *c)
{
    return listing_run(c, &status_spec);
}

int listing_stats(const cli_t *c)
{
    if (c->prometheus && c->json)
        return cli_usage_error("--json and --prometheus do not go together");
    return listing_run(c, c->prometheus ? &prometheus_spec : &stats_spec);
}

int listing_ls(const cli_t *c)
{
    return listing_run(c, &ls_spec);
}
