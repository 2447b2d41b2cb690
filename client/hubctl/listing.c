#include "listing.h"

#include "conn.h"
#include "json.h"
#include "out.h"
#include "promtext.h"
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

/* Prometheus text exposition (version 0.0.4) of one STATS line: the
 * renderer and the metric names the daemon's /metrics uses (promtext.h). */
static void print_prometheus(FILE *o, const proto_msg_t *m)
{
    bytebuf_t b;
    bytebuf_init(&b, 0);
    if (promtext_stats(&b, m) == 0)
        fwrite(bytebuf_data(&b), 1, bytebuf_len(&b), o);
    else
        fputs("hubctl: no memory for the metrics\n", stderr);
    bytebuf_free(&b);
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
        const char *name = promtext_name_of(fl->key);
        char other[80];
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
        return usage_error("--json and --prometheus do not go together");
    return listing_run(c, c->prometheus ? &prometheus_spec : &stats_spec);
}

int listing_ls(const cli_t *c)
{
    return listing_run(c, &ls_spec);
}
