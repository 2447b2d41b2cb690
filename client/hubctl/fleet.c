/* fleet: `hubctl fleet status` (fleet.h).
 *
 * The reply is kept whole before anything is printed, as listing.c does:
 * the tables' columns fit their widest cells, and a failure leaves no half
 * table or half JSON behind. */
#include "fleet.h"

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

#define SHA_SHOWN 12 /* hex digits of a file's SHA-256 in the table, as ls shows them */
#define NCOLS_MAX 8  /* columns of a table */

/* ---- a table sized to its cells ------------------------------------------ */

typedef struct table {
    size_t ncols;
    const char *heads[NCOLS_MAX]; /* the headings */
    const char *align;            /* per column: 'l' left, 'r' right */
    char **cells;                 /* nrows * ncols, row-major, cleaned, malloc'd */
    size_t nrows;
} table_t;

/* A row of ncols cells, copied without control bytes. */
static void table_add(table_t *t, const char *const *row)
{
    t->cells = xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof *t->cells);
    for (size_t i = 0; i < t->ncols; i++)
        t->cells[t->nrows * t->ncols + i] = out_clean_copy(row[i]);
    t->nrows++;
}

static void table_print(FILE *o, const table_t *t)
{
    int w[NCOLS_MAX];
    for (size_t i = 0; i < t->ncols; i++) {
        size_t n = strlen(t->heads[i]);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t len = strlen(t->cells[r * t->ncols + i]);
            n = len > n ? len : n;
        }
        w[i] = (int)n;
    }
    for (size_t r = 0; r <= t->nrows; r++)
        for (size_t i = 0; i < t->ncols; i++) {
            const char *cell = r ? t->cells[(r - 1) * t->ncols + i] : t->heads[i];
            int last = i + 1 == t->ncols;
            if (last && t->align[i] == 'l')
                fprintf(o, "%s\n", cell); /* no trailing blanks */
            else
                fprintf(o, t->align[i] == 'l' ? "%-*s%s" : "%*s%s", w[i], cell, last ? "\n" : "  ");
        }
}

static void table_free(table_t *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

/* ---- the reply ------------------------------------------------------------ */

typedef enum {
    AT_START, /* before the FLEET line */
    AT_FILES, /* its FILE lines */
    AT_PEERS, /* its PEER lines */
} fleet_at_t;

typedef struct fleet_view {
    int json;      /* --json */
    FILE *out;     /* memory: printed once END came */
    fleet_at_t at; /* where in the reply */
    size_t nfiles; /* FILE lines seen */
    size_t npeers; /* PEER lines seen */
    table_t files; /* text: the FILE lines */
    table_t peers; /* text: the PEER lines */
    int failed;    /* an ERR, or a reply out of order */
} fleet_view_t;

/* The node's totals, as text: three lines. */
static void print_node(FILE *o, const proto_msg_t *m)
{
    char up[32], down[32];
    out_line_t l[3] = {{.len = 0}, {.len = 0}, {.len = 0}};
    out_line_add(&l[0], "node %s, one of %s members: %s up, %s down over the swarm",
                 out_get_or(m, "listen", "?"), out_get_or(m, "members", "?"),
                 out_field_bytes(m, "up", up, sizeof up),
                 out_field_bytes(m, "down", down, sizeof down));
    out_line_add(&l[1],
                 "files: %s from the swarm, %s from the origin as their seed, %s given back "
                 "to the origin",
                 out_get_or(m, "from_swarm", "?"), out_get_or(m, "seeded_from_origin", "?"),
                 out_get_or(m, "fell_back", "?"));
    out_line_add(&l[2],
                 "bad pieces: %s, peers banned for them: %s, metadata connections refused: %s",
                 out_get_or(m, "bad_pieces", "?"), out_get_or(m, "banned", "?"),
                 out_get_or(m, "meta_refused", "?"));
    for (int i = 0; i < 3; i++) {
        out_clean(o, l[i].buf); /* values from the wire: no control byte reaches the terminal */
        putc('\n', o);
    }
}

static void add_file(fleet_view_t *v, const proto_msg_t *m)
{
    char sha[SHA_SHOWN + 1], size[32], done[32], up[32], down[32];
    snprintf(sha, sizeof sha, "%s", out_get_or(m, "sha256", "?"));
    const char *row[] = {
        sha,
        out_get_or(m, "state", "?"),
        str_eq(proto_get(m, "size"), "0") ? "-" : out_field_bytes(m, "size", size, sizeof size),
        out_field_bytes(m, "done", done, sizeof done),
        out_field_bytes(m, "up", up, sizeof up),
        out_field_bytes(m, "down", down, sizeof down),
        out_get_or(m, "peers", "?")};
    table_add(&v->files, row);
}

static void add_peer(fleet_view_t *v, const proto_msg_t *m)
{
    char up[32], down[32];
    const char *row[] = {out_get_or(m, "addr", "?"), out_field_bytes(m, "up", up, sizeof up),
                         out_field_bytes(m, "down", down, sizeof down),
                         out_get_or(m, "files", "?")};
    table_add(&v->peers, row);
}

/* A count END gave (0 when absent). */
static uint64_t end_count(const proto_msg_t *m, const char *key)
{
    uint64_t n = 0;
    return parse_u64(proto_get(m, key), &n) == 0 ? n : 0;
}

/* END: the JSON closed, or the text's tables written. */
static void finish(fleet_view_t *v, const proto_msg_t *m)
{
    uint64_t files_left = end_count(m, "files_left_off"),
             peers_left = end_count(m, "peers_left_off");
    if (v->json) {
        fprintf(v->out, "%s],\"files_left_off\":%" PRIu64 ",\"peers_left_off\":%" PRIu64 "}\n",
                v->at == AT_FILES ? "],\"peers\":[" : "", files_left, peers_left);
        return;
    }
    putc('\n', v->out);
    if (v->files.nrows)
        table_print(v->out, &v->files);
    else
        fputs("no file in the swarm\n", v->out);
    if (files_left)
        fprintf(v->out, "(%" PRIu64 " more files: more than one answer holds)\n", files_left);
    putc('\n', v->out);
    if (v->peers.nrows)
        table_print(v->out, &v->peers);
    else
        fputs("no peer connected\n", v->out);
    if (peers_left)
        fprintf(v->out, "(%" PRIu64 " more peers: more than one answer holds)\n", peers_left);
}

static int fail(fleet_view_t *v, const char *code, const char *msg)
{
    fputs("hubctl: hubd answered FLEET with ", stderr);
    out_reason(stderr, code, msg);
    if (v->json) { /* the one error shape, on stdout, as the answer */
        fputs("{\"ok\":false,\"error\":", stdout);
        json_error(stdout, code, msg);
        fputs("}\n", stdout);
    }
    v->failed = 1;
    return 1;
}

static int on_msg(void *arg, const proto_msg_t *m, int fd)
{
    fleet_view_t *v = arg;
    close_fd(fd);
    if (str_eq(m->verb, "ERR") && !proto_get(m, "id"))
        return fail(v, out_get_or(m, "code", "an error"), out_get_or(m, "msg", ""));
    int known = str_eq(m->verb, "FLEET") || str_eq(m->verb, "FILE") || str_eq(m->verb, "PEER") ||
                str_eq(m->verb, "END");
    if (!known)
        return 0;
    if ((v->at == AT_START) != str_eq(m->verb, "FLEET") ||
        (v->at == AT_PEERS && str_eq(m->verb, "FILE")))
        return fail(v, "protocol", "its lines came out of order (FLEET, FILE, PEER, END)");
    if (str_eq(m->verb, "FLEET")) {
        if (v->json) {
            fputs("{\"node\":", v->out);
            json_msg(v->out, m);
            fputs(",\"files\":[", v->out);
        } else {
            print_node(v->out, m);
        }
        v->at = AT_FILES;
    } else if (str_eq(m->verb, "FILE")) {
        if (v->json) {
            fputs(v->nfiles ? ",\n" : "\n", v->out);
            json_msg(v->out, m);
        } else {
            add_file(v, m);
        }
        v->nfiles++;
    } else if (str_eq(m->verb, "PEER")) {
        if (v->json) {
            fputs(v->at == AT_FILES ? "],\"peers\":[\n" : ",\n", v->out);
            json_msg(v->out, m);
        } else {
            add_peer(v, m);
        }
        v->at = AT_PEERS;
        v->npeers++;
    } else {
        finish(v, m);
        return 1;
    }
    return 0;
}

static int fleet_status(const cli_t *c)
{
    char *buf = NULL;
    size_t len = 0;
    fleet_view_t v = {
        .json = c->json,
        .out = open_memstream(&buf, &len),
        .files = {.ncols = 7,
                  .heads = {"SHA256", "STATE", "SIZE", "DONE", "UP", "DOWN", "PEERS"},
                  .align = "llrrrrr"},
        .peers = {.ncols = 4, .heads = {"PEER", "UP", "DOWN", "FILES"}, .align = "lrrr"},
    };
    if (!v.out) {
        fprintf(stderr, "hubctl: %s\n", strerror(errno));
        return EXIT_FAILED;
    }
    conn_t *conn = conn_new(c->socket, 0, c->quiet, on_msg, &v);
    conn_queue_verb(conn, "FLEET");
    int rc = conn_open(conn);
    int err = rc == 0 ? conn_run(conn) : 0;
    if (err < 0)
        rc = conn_report(conn, err);
    else if (rc == 0 && v.failed)
        rc = EXIT_FAILED;
    fclose(v.out);
    if (rc == 0)
        fwrite(buf, 1, len, stdout);
    free(buf);
    table_free(&v.files);
    table_free(&v.peers);
    conn_free(conn);
    return rc;
}

int fleet_run(const cli_t *c)
{
    if (!str_eq(c->args[0], "status")) /* one operand: cli_dispatch checked */
        return usage_error("fleet: unknown subcommand '%s' (status)", c->args[0]);
    return fleet_status(c);
}
