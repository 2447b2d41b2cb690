#include "admin.h"

#include "conn.h"
#include "json.h"
#include "out.h"
#include "textnum.h"
#include "util.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_HOLDERS_SHOWN 8 /* uids an ERR code=held names at most (hubd's bound) */

typedef struct admin {
    const char *verb; /* the request sent */
    int json;         /* --json */
    FILE *out;        /* memory: printed once the answer is whole */
    FILE *bads;       /* --json: the BAD lines' objects, for bad_blobs */
    char *bads_buf;
    size_t bads_len;
    size_t nbad; /* BAD lines */
    int rc;      /* exit code from the answer */
} admin_t;

/* A BAD line of verify: a blob that failed its re-hash, now quarantined.
 * In JSON, into the result's bad_blobs (a->out holds only them until OK). */
static void admin_bad(admin_t *a, const proto_msg_t *m)
{
    if (a->json) {
        fputs(a->nbad ? "," : "", a->bads);
        json_msg(a->bads, m);
    } else {
        fputs("bad blob ", a->out);
        out_clean(a->out, out_get_or(m, "sha256", "?"));
        fputs(": ", a->out);
        out_clean(a->out, out_get_or(m, "reason", "?"));
        fputs(" (quarantined)\n", a->out);
    }
    a->nbad++;
}

/* ERR: with --json the whole answer is this error, on stdout at once. */
static void admin_err(admin_t *a, const proto_msg_t *m)
{
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    if (a->json) {
        fclose(a->out);
        a->out = NULL;
        fputs("{\"ok\":false,\"error\":", stdout);
        json_error(stdout, code, msg);
        fputs("}\n", stdout);
    }
    if (code && str_eq(code, "held") && str_eq(a->verb, "RM")) {
        /* Whose HF caches link to it, by name, and what --force does. */
        char names[256];
        uint64_t n = 0;
        out_user_names(proto_get(m, "users"), names, sizeof names);
        parse_u64(proto_get(m, "holders"), &n);
        fputs("hubctl: rm: not removed: the blob is held by the HF caches of ", stderr);
        out_clean(stderr, names);
        if (n > CLI_HOLDERS_SHOWN)
            fprintf(stderr, " (and more: %llu users in all)", (unsigned long long)n);
        fputs(", whose links to it would dangle (`hubctl hf ls --all` lists the holds); "
              "rm --force removes it anyway\n",
              stderr);
    } else {
        fprintf(stderr, "hubctl: %s: ", a->verb);
        out_reason(stderr, code ? code : "error", msg ? msg : "");
    }
    a->rc = EXIT_FAILED;
}

/* A u64 field of an answer, 0 when absent (an older hubd). */
static uint64_t field_u64(const proto_msg_t *m, const char *key)
{
    uint64_t v = 0;
    return parse_u64(proto_get(m, key), &v) ? 0 : v;
}

/* GC's answer: what went and the size it left against its target; above
 * the target, what stayed by reason (holds, pins: the only blobs
 * eviction passes over) and what to do about each. An older hubd says
 * only what the holds kept, or nothing. */
static void admin_gc_line(FILE *o, const proto_msg_t *m)
{
    char b1[32], b2[32], b3[32];
    uint64_t size, target;
    fprintf(o, "evicted %s blob(s), %s freed%s; ", out_get_or(m, "evicted", "?"),
            out_field_bytes(m, "freed", b1, sizeof b1),
            field_u64(m, "waited") ? " (with the eviction run it waited for)" : "");
    if (parse_u64(proto_get(m, "size"), &size) || parse_u64(proto_get(m, "target"), &target)) {
        fprintf(o, "the cache holds %s\n", out_field_bytes(m, "size", b2, sizeof b2));
        return;
    }
    if (size <= target) {
        fprintf(o, "the cache holds %s (target %s)\n", out_bytes(size, b2, sizeof b2),
                out_bytes(target, b3, sizeof b3));
        return;
    }
    uint64_t held = field_u64(m, "held"), pinned = field_u64(m, "pinned_bytes");
    fprintf(o, "the cache holds %s, above its %s target", out_bytes(size, b2, sizeof b2),
            out_bytes(target, b3, sizeof b3));
    if (!held && !pinned) {
        /* Nothing kept it: blobs recorded while it ran, or an older hubd. */
        fputs(" (blobs recorded while it ran; gc again)\n", o);
        return;
    }
    fprintf(o, ": %s held by %s hold(s), %s pinned\n", out_bytes(held, b1, sizeof b1),
            out_get_or(m, "holds", "?"), out_bytes(pinned, b2, sizeof b2));
    if (held)
        fprintf(o,
                "  held: %s blob(s) linked from %s user(s)' HF caches (see `hubctl hf ls --all`; "
                "`hubctl hf rm` by their users, or `hubctl rm --force`)\n",
                out_get_or(m, "held_blobs", "?"), out_get_or(m, "holders", "?"));
    if (pinned)
        fprintf(o, "  pinned: %s blob(s) (`hubctl ls` shows them; `hubctl unpin` lets one go)\n",
                out_get_or(m, "pinned_blobs", "?"));
}

/* OK: the result, as one line per verb. */
static void admin_ok(admin_t *a, const proto_msg_t *m)
{
    a->rc = a->nbad ? EXIT_VERIFY : EXIT_OK;
    if (a->json) { /* {"ok":true,"result":{...}}, and verify's bad blobs */
        fputs("{\"ok\":true,\"result\":", a->out);
        json_msg(a->out, m);
        if (str_eq(a->verb, "VERIFY")) {
            fflush(a->bads);
            fprintf(a->out, ",\"bad_blobs\":[%.*s]", (int)a->bads_len, a->bads_buf);
        }
        fputs("}\n", a->out);
        return;
    }
    if (str_eq(a->verb, "GC"))
        admin_gc_line(a->out, m);
    else if (str_eq(a->verb, "VERIFY"))
        fprintf(a->out, "checked %s blob(s), %s bad\n", out_get_or(m, "checked", "?"),
                out_get_or(m, "bad", "?"));
    else if (str_eq(a->verb, "PIN") || str_eq(a->verb, "UNPIN"))
        fprintf(a->out, "%s\n", str_eq(a->verb, "PIN") ? "pinned" : "unpinned");
    else if (str_eq(a->verb, "CANCEL"))
        fprintf(a->out, "cancelled job %s (%s waiting request(s) told)\n",
                out_get_or(m, "job", "?"), out_get_or(m, "waiters", "?"));
    else if (str_eq(a->verb, "RM"))
        fprintf(a->out, "removed%s\n",
                str_eq(out_get_or(m, "removed_blob", "0"), "1") ? " (and its blob)" : "");
}

static int admin_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    admin_t *a = arg;
    close_fd(fd);
    if (str_eq(m->verb, "BAD")) {
        admin_bad(a, m);
        return 0;
    }
    if (str_eq(m->verb, "ERR")) {
        admin_err(a, m);
        return 1;
    }
    if (!str_eq(m->verb, "OK"))
        return 0;
    admin_ok(a, m);
    return 1;
}

int admin_run(const cli_t *c, const char *verb)
{
    uint64_t size = 0;
    if (c->max_size && !str_eq(verb, "GC"))
        return usage_error("--max-size is an option of gc");
    if (c->max_size && parse_size(c->max_size, &size) < 0)
        return usage_error("bad --max-size '%s' (bytes, or with K, M, G or T)", c->max_size);
    char *buf = NULL;
    size_t len = 0;
    admin_t a = {.verb = verb, .json = c->json, .out = open_memstream(&buf, &len)};
    a.bads = open_memstream(&a.bads_buf, &a.bads_len);
    if (!a.out || !a.bads) {
        fprintf(stderr, "hubctl: %s\n", strerror(errno));
        if (a.out)
            fclose(a.out);
        if (a.bads)
            fclose(a.bads);
        free(buf);
        free(a.bads_buf);
        return EXIT_FAILED;
    }
    conn_t *conn = conn_new(c->socket, 1, c->quiet, admin_on_msg, &a);
    char line[PROTO_MAX_LINE];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, verb);
    proto_add(&w, "id", "1");
    if (c->nargs)
        proto_add(&w, "target", c->args[0]);
    if (c->max_size)
        proto_add_u64(&w, "max_size", size);
    if (c->force)
        proto_add(&w, "force", "1");
    int rc = conn_queue_line(conn, &w) ? EXIT_USAGE : conn_open(conn);
    int err = rc == 0 ? conn_run(conn) : 0;
    if (err < 0)
        rc = conn_report(conn, err);
    else if (rc == 0)
        rc = a.rc;
    if (a.out)
        fclose(a.out);
    if ((rc == EXIT_OK || rc == EXIT_VERIFY) && a.out)
        fwrite(buf, 1, len, stdout);
    free(buf);
    fclose(a.bads);
    free(a.bads_buf);
    conn_free(conn);
    return rc;
}
