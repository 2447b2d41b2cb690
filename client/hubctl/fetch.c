#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memrchr */
#endif
#include "fetch.h"

#include "conn.h"
#include "fetch_internal.h"
#include "interrupt.h"
#include "json.h"
#include "materialize.h"
#include "out.h"
#include "progress.h"
#include "textnum.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define URL_MAX 8192 /* PROTOCOL.md: a FETCH url is at most 8192 bytes */

/* ---- results ------------------------------------------------------------ */

static void json_result(FILE *o, const req_t *r)
{
    fputs("{\"url\":", o);
    json_str(o, r->url);
    if (r->state == REQ_OK) {
        fputs(",\"ok\":true,\"path\":", o);
        json_str(o, r->path);
        fputs(",\"sha256\":", o);
        json_str(o, r->sha256);
        fprintf(o, ",\"size\":%" PRIu64 ",\"source\":", r->size);
        json_str(o, r->source);
    } else {
        fputs(",\"ok\":false,\"error\":", o);
        json_error(o, r->code, r->msg);
    }
    fputs("}\n", o);
}

/* Writes the results that are ready, in argument order: a URL's line waits
 * for all before it, so output lines match the arguments. */
static void fetch_print_ready(fetch_t *f)
{
    for (; f->printed < f->n && f->req[f->printed].state != REQ_PENDING; f->printed++) {
        const req_t *r = &f->req[f->printed];
        if (f->cli->json)
            json_result(stdout, r);
        else if (r->state == REQ_OK && !f->to_stdout)
            printf("%s\n", r->path);
        else if (f->n > 1) /* a failed URL's line stays, empty: outputs line up */
            putchar('\n');
    }
    fflush(stdout);
}

static void fetch_queue_more(fetch_t *f);

/* Bookkeeping once a request has its answer, then the output it unlocks. */
static void fetch_settle(fetch_t *f, req_t *r, int announce)
{
    f->finished++;
    if (f->conn && !conn_interrupting(f->conn))
        fetch_queue_more(f);
    progress_settled(f, r);
    if (r->state == REQ_FAILED && announce && !f->cli->json) {
        fprintf(stderr, "hubctl: %s: ", r->url);
        out_reason(stderr, r->code, r->msg);
    }
    fetch_print_ready(f);
    if (f->finished < f->n)
        progress_draw(f, 1);
}

static void fetch_fail(fetch_t *f, req_t *r, const char *code, const char *msg)
{
    r->state = REQ_FAILED;
    r->code = xstrdup(code);
    r->msg = xstrdup(msg);
    r->exit = strcmp(code, "hash_mismatch") == 0 ? EXIT_VERIFY : EXIT_FAILED;
    fetch_settle(f, r, 1);
}

/* The daemon went away: every open request fails, with one message overall
 * (from conn_report) rather than one per URL. */
static void fetch_abandon(fetch_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        req_t *r = &f->req[i];
        if (r->state != REQ_PENDING)
            continue;
        r->state = REQ_FAILED;
        r->code = xstrdup("disconnected");
        r->msg = xstrdup("hubd closed the connection");
        r->exit = EXIT_UNREACHABLE;
        fetch_settle(f, r, 0);
    }
}

/* The worst exit code: 3 (daemon gone), then 4 (verification), then 1. */
static int fetch_exit(const fetch_t *f)
{
    static const int rank[] = {
        [EXIT_OK] = 0, [EXIT_FAILED] = 1, [EXIT_VERIFY] = 2, [EXIT_UNREACHABLE] = 3};
    int worst = EXIT_OK;
    for (size_t i = 0; i < f->n; i++)
        if (rank[f->req[i].exit] > rank[worst])
            worst = f->req[i].exit;
    return worst;
}

/* ---- replies ------------------------------------------------------------ */

static void on_hit(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)m, (void)fd;
    r->via = VIA_HIT;
    progress_update(f, r);
}

static void on_queued(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)m, (void)fd;
    r->via = VIA_QUEUED;
    progress_update(f, r);
}

static void on_attached(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)m, (void)fd;
    r->via = VIA_ATTACHED;
    progress_update(f, r);
}

static void on_progress(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)fd;
    uint64_t done, rate, total = 0;
    const char *t = proto_get(m, "total");
    if (parse_u64(proto_get(m, "done"), &done) < 0 || (t && parse_u64(t, &total) < 0))
        return; /* a progress line we cannot read is only a missed frame */
    if (parse_u64(proto_get(m, "rate"), &rate) < 0)
        rate = 0;
    const char *state = proto_get(m, "state"), *reason = proto_get(m, "reason");
    uint64_t attempt = 0, attempts = 0, retry_in = 0;
    snprintf(r->phase, sizeof r->phase, "%s", state ? state : "");
    free(r->reason);
    r->reason = NULL;
    if (reason && parse_u64(proto_get(m, "attempt"), &attempt) == 0 &&
        parse_u64(proto_get(m, "attempts"), &attempts) == 0 &&
        parse_u64(proto_get(m, "retry_in"), &retry_in) == 0) {
        r->reason = out_clean_copy(reason);
        r->attempt = (unsigned)attempt;
        r->attempts = (unsigned)attempts;
        r->retry_at = progress_now() + (double)retry_in / 1000;
    }
    r->has_progress = 1;
    r->done = done;
    r->has_total = t != NULL;
    r->total = total;
    r->rate = rate;
    progress_update(f, r);
}

/* Copies the blob to r->dest. Returns 0, or fails r and returns -1. */
static int fetch_materialize(fetch_t *f, req_t *r, int fd, uint64_t size)
{
    char msg[PATH_MAX + 128];
    int rc = fd < 0         ? -EBADMSG
             : f->to_stdout ? materialize_stream(fd, size, STDOUT_FILENO)
                            : materialize_file(fd, size, r->dest);
    if (rc == 0)
        return 0;
    if (rc == -EBADMSG)
        snprintf(msg, sizeof msg, "cannot write %s: hubd sent no matching file descriptor",
                 r->dest);
    else
        snprintf(msg, sizeof msg, "cannot write %s: %s", r->dest, strerror(-rc));
    fetch_fail(f, r, "output", msg);
    return -1;
}

static void on_done(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    const char *path = proto_get(m, "path"), *sha = proto_get(m, "sha256");
    const char *source = proto_get(m, "source");
    uint64_t size;
    if (!path || !sha || parse_u64(proto_get(m, "size"), &size) < 0) {
        close_fd(fd);
        fetch_fail(f, r, "bad_reply", "hubd sent DONE without path, sha256 or size");
        return;
    }
    const char *want = r->expect[0] ? r->expect : f->sha256;
    if (want[0] && strcasecmp(sha, want) != 0) {
        /* The daemon should have said hash_mismatch; trust but verify. */
        close_fd(fd);
        fetch_fail(f, r, "hash_mismatch", "hubd returned a blob with another sha256");
        return;
    }
    int rc = r->dest ? fetch_materialize(f, r, fd, size) : 0;
    close_fd(fd);
    if (rc < 0)
        return;
    r->state = REQ_OK;
    r->path = xstrdup(r->dest ? r->dest : path);
    r->sha256 = xstrdup(sha);
    r->source = xstrdup(source ? source : r->via == VIA_HIT ? "hit" : "download");
    r->size = size;
    fetch_settle(f, r, 1);
}

static void on_err(fetch_t *f, req_t *r, const proto_msg_t *m, int fd)
{
    (void)fd;
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    fetch_fail(f, r, code ? code : "unknown", msg ? msg : "");
}

/* Replies to a FETCH, in the order PROTOCOL.md gives them. */
static const struct {
    const char *verb;
    void (*fn)(fetch_t *f, req_t *r, const proto_msg_t *m, int fd);
} fetch_replies[] = {
    {"HIT", on_hit},           /* served from the cache; DONE follows */
    {"QUEUED", on_queued},     /* a new download job */
    {"ATTACHED", on_attached}, /* joined a running job */
    {"PROGRESS", on_progress}, /* bytes so far */
    {"DONE", on_done},         /* success, with the blob's descriptor */
    {"ERR", on_err},           /* failure */
};

/* An ERR that names no request cannot fail one; show it, keep waiting. */
static void fetch_stray(fetch_t *f, const proto_msg_t *m)
{
    if (!str_eq(m->verb, "ERR") || proto_get(m, "id") || f->cli->quiet)
        return;
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    progress_clear(f);
    fputs("hubctl: hubd: ", stderr);
    out_reason(stderr, code ? code : "error", msg ? msg : "");
}

static int fetch_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    fetch_t *f = arg;
    uint64_t id;
    req_t *r = NULL;
    if (parse_u64(proto_get(m, "id"), &id) == 0 && id >= 1 && id <= f->n)
        r = &f->req[id - 1];
    if (!r || r->state != REQ_PENDING) {
        close_fd(fd);
        if (!r)
            fetch_stray(f, m);
        return f->finished == f->n;
    }
    for (size_t i = 0; i < ARRAY_LEN(fetch_replies); i++) {
        if (strcmp(m->verb, fetch_replies[i].verb) == 0) {
            fetch_replies[i].fn(f, r, m, fd);
            return f->finished == f->n;
        }
    }
    close_fd(fd); /* a verb this client does not know: ignored */
    return f->finished == f->n;
}

/* ---- planning: everything checked before connecting --------------------- */

/* The last segment of the URL's path, which names the file under -o DIR and
 * labels its progress. Raw, not percent-decoded: "%2F" must not put a '/'
 * into a file name. Empty for "http://host" or "http://host/dir/". */
static char *url_basename(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t end = strcspn(p, "?#");
    const char *slash = memrchr(p, '/', end);
    if (!slash)
        return xstrdup("");
    size_t n = (size_t)(p + end - slash - 1);
    char *name = xrealloc(NULL, n + 1);
    memcpy(name, slash + 1, n);
    name[n] = '\0';
    return name;
}

/* http:// or https:// (the scheme is case-insensitive) and a host after it. */
static int url_ok(const char *url)
{
    size_t skip = strncasecmp(url, "http://", 7) == 0    ? 7
                  : strncasecmp(url, "https://", 8) == 0 ? 8
                                                         : 0;
    return skip && url[skip] && !strchr("/?#", url[skip]);
}

static int name_ok(const char *name)
{
    return *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static char *path_join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    int slash = d > 0 && dir[d - 1] != '/';
    char *p = xrealloc(NULL, d + slash + n + 1);
    memcpy(p, dir, d);
    if (slash)
        p[d] = '/';
    memcpy(p + d + slash, name, n + 1);
    return p;
}

/* The folder a file at path goes into: "." for a bare name. */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup(".");
    if (slash == path)
        return xstrdup("/");
    char *dir = xrealloc(NULL, (size_t)(slash - path) + 1);
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    return dir;
}

/* -o DEST is a directory when it is one, and must be one when it ends in '/'
 * or several URLs share it; `-o -` is stdout, for one URL. What it names
 * must be writable now: a download is not started only to fail at the end.
 * Sets *into_dir; returns 0 or EXIT_USAGE. */
static int dest_mode(fetch_t *f, int *into_dir)
{
    const cli_t *c = f->cli;
    struct stat st;
    size_t len = strlen(c->dest);
    if (strcmp(c->dest, "-") == 0) {
        if (f->n > 1)
            return usage_error("-o - (stdout) takes one URL");
        if (c->json)
            return usage_error("--json and -o - would both write to stdout");
        f->to_stdout = 1;
        *into_dir = 0;
        return 0;
    }
    int is_dir = stat(c->dest, &st) == 0 && S_ISDIR(st.st_mode);
    if (!is_dir && f->n > 1)
        return usage_error("-o %s: not a directory (required with several URLs)", c->dest);
    if (!is_dir && c->dest[len - 1] == '/')
        return usage_error("-o %s: not a directory", c->dest);
    char *dir = is_dir ? xstrdup(c->dest) : parent_of(c->dest);
    int rc = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        rc = usage_error("-o %s: %s is not a folder", c->dest, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = usage_error("-o %s: cannot write in %s: %s", c->dest, dir, strerror(errno));
    free(dir);
    *into_dir = is_dir;
    return rc;
}

static int req_plan(req_t *r, const char *url, const char *dest, int into_dir)
{
    if (!url_ok(url))
        return usage_error("not an http:// or https:// URL: '%s'", url);
    if (strlen(url) > URL_MAX)
        return usage_error("URL longer than %d bytes: '%.60s...'", URL_MAX, url);
    r->url = url;
    r->name = url_basename(url);
    r->label = out_clean_copy(*r->name ? r->name : url);
    r->last_line = -1e9;
    if (!dest)
        return 0;
    if (!into_dir) {
        r->dest = xstrdup(dest);
        return 0;
    }
    if (!name_ok(r->name))
        return usage_error("no file name in URL '%s' for -o %s", url, dest);
    r->dest = path_join(dest, r->name);
    return 0;
}

/* With -o DIR, two URLs with one name would overwrite each other. */
static int check_unique_names(const fetch_t *f)
{
    for (size_t i = 0; i < f->n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(f->req[i].dest, f->req[j].dest) == 0)
                return usage_error("'%s' and '%s' would both be saved as %s", f->req[j].url,
                                   f->req[i].url, f->req[i].dest);
    return 0;
}

/* Request i's FETCH line in w (its storage line): 0, or -1 when it does
 * not fit a line. */
static int fetch_line(const fetch_t *f, size_t i, char *line, proto_writer_t *w)
{
    proto_begin(w, line, PROTO_MAX_LINE, "FETCH");
    proto_add_u64(w, "id", i + 1);
    proto_add(w, "url", f->req[i].url);
    if (f->req[i].expect[0] || f->sha256[0])
        proto_add(w, "sha256", f->req[i].expect[0] ? f->req[i].expect : f->sha256);
    if (f->cli->refresh)
        proto_add(w, "refresh", "1");
    for (size_t h = 0; h < f->cli->nheaders; h++)
        proto_add(w, "header", f->cli->headers[h]);
    return proto_end(w) < 0 ? -1 : 0;
}

/* Checked while planning, before anything is sent. */
static int fetch_check_line(const fetch_t *f, size_t i)
{
    char line[PROTO_MAX_LINE];
    proto_writer_t w;
    if (fetch_line(f, i, line, &w) < 0)
        return usage_error("URL (and headers) too long once encoded: '%.60s...'", f->req[i].url);
    return 0;
}

/* The next FETCHes, up to FETCH_WINDOW unanswered: hubd reads no more of a
 * session than 64 waiting FETCHes, and an INTERRUPT queued behind the rest
 * of a long -i list would wait for downloads to end. */
static void fetch_queue_more(fetch_t *f)
{
    while (f->queued < f->n && f->queued - f->finished < FETCH_WINDOW) {
        char line[PROTO_MAX_LINE];
        proto_writer_t w;
        if (fetch_line(f, f->queued, line, &w) == 0) /* checked when planned */
            conn_queue_line(f->conn, &w);
        f->queued++;
    }
}

/* -i FILE: each line "URL [sha256=HEX]" (blank lines and '#' lines
 * skipped) into f->inputs, the URL then its digest ("" if none). Returns 0
 * or EXIT_USAGE. */
static int read_inputs(fetch_t *f, const char *path)
{
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!in)
        return usage_error("-i %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, in) >= 0) {
        lineno++;
        char *save = NULL, *url = strtok_r(line, " \t\r\n", &save);
        if (!url || url[0] == '#')
            continue;
        char *col = strtok_r(NULL, " \t\r\n", &save), *sha = "";
        if (col && strncmp(col, "sha256=", 7) == 0 && hex_is(col + 7, SHA256_HEX, 0))
            sha = col + 7;
        else if (col)
            rc = usage_error("-i %s:%zu: after the URL only sha256=HEX (64 hex digits) may "
                             "follow, not '%.40s'",
                             path, lineno, col);
        if (rc == 0 && strtok_r(NULL, " \t\r\n", &save))
            rc = usage_error("-i %s:%zu: more than a URL and its sha256=", path, lineno);
        if (rc)
            break;
        f->inputs = xrealloc(f->inputs, (f->ninputs + 2) * sizeof *f->inputs);
        f->inputs[f->ninputs++] = xstrdup(url);
        f->inputs[f->ninputs++] = xstrdup(sha);
    }
    free(line);
    if (in != stdin)
        fclose(in);
    return rc;
}

/* Checks the arguments and queues one FETCH per URL. Returns 0 or
 * EXIT_USAGE. */
static int fetch_plan(fetch_t *f, conn_t *conn)
{
    const cli_t *c = f->cli;
    int into_dir = 0, rc;
    if (c->input && (rc = read_inputs(f, c->input)) != 0)
        return rc;
    size_t total = c->nargs + f->ninputs / 2;
    if (total == 0)
        return usage_error(c->input ? "-i %s: no URL in it" : "fetch needs at least one URL",
                           c->input);
    if (c->sha256 && total > 1)
        return usage_error("--sha256 applies to a single URL");
    if (c->sha256 && !hex_is(c->sha256, SHA256_HEX, 0))
        return usage_error("--sha256 wants 64 hex digits, not '%s'", c->sha256);
    for (size_t i = 0; c->sha256 && i < SHA256_HEX; i++)
        f->sha256[i] = (char)(c->sha256[i] | 0x20); /* hex digits lower-case with bit 5 */
    f->n = total; /* with its requests, so fetch_free can go over them */
    f->req = xcalloc(f->n, sizeof *f->req);
    if (c->dest && (rc = dest_mode(f, &into_dir)) != 0)
        return rc;
    /* A file fetched with headers is private to hubd (PROTOCOL.md): its
     * cache path is of no use to anyone else. */
    if (c->nheaders && !c->dest && !c->quiet && geteuid() != 0)
        fputs("hubctl: warning: a file fetched with -H is readable by hubd alone: the path "
              "printed is not readable by you; use -o FILE (or -o -) for a copy\n",
              stderr);
    for (size_t i = 0; i < f->n; i++) {
        const char *url = i < c->nargs ? c->args[i] : f->inputs[2 * (i - c->nargs)];
        const char *sha = i < c->nargs ? "" : f->inputs[2 * (i - c->nargs) + 1];
        for (size_t k = 0; sha[k] && k < SHA256_HEX; k++)
            f->req[i].expect[k] = (char)(sha[k] | 0x20);
        if ((rc = req_plan(&f->req[i], url, c->dest, into_dir)) != 0 ||
            (rc = fetch_check_line(f, i)) != 0)
            return rc;
    }
    if (into_dir && (rc = check_unique_names(f)) != 0)
        return rc;
    f->conn = conn;
    fetch_queue_more(f);
    return 0;
}

static void fetch_free(fetch_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        req_t *r = &f->req[i];
        free(r->name);
        free(r->label);
        free(r->dest);
        free(r->path);
        free(r->sha256);
        free(r->source);
        free(r->code);
        free(r->msg);
        free(r->reason);
    }
    free(f->req);
    for (size_t i = 0; i < f->ninputs; i++)
        free(f->inputs[i]);
    free(f->inputs);
}

int fetch_run(const cli_t *c)
{
    fetch_t f = {.cli = c, .prog = progress_mode(c), .t_start = progress_now()};
    conn_t *conn = conn_new(c->socket, 1, c->quiet, fetch_on_msg, &f);
    conn_interruptible(conn);
    int rc = fetch_plan(&f, conn);
    if (rc == 0)
        rc = conn_open(conn);
    if (rc == 0) {
        int err = conn_run(conn);
        if (err == -EINTR) { /* Ctrl-C: what became of the downloads, in one line */
            progress_clear(&f);
            interrupt_say(conn_interrupted(conn), stderr);
        } else if (err < 0) {
            fetch_abandon(&f);
            conn_report(conn, err);
        }
        rc = err == -EINTR ? EXIT_INTERRUPTED : fetch_exit(&f);
    }
    fetch_free(&f);
    conn_free(conn);
    return rc;
}
