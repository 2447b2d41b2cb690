/* hf_download: `hubctl hf download`, the requests and what is done with
 * their replies. */
#include "hf_download.h"

#include "conn.h"
#include "fetch_internal.h"
#include "hf_endpoint.h"
#include "hf_format.h"
#include "hf_layout.h"
#include "hf_list.h"
#include "hf_offline.h"
#include "interrupt.h"
#include "json.h"
#include "out.h"
#include "progress.h"
#include "textnum.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define LABEL_MAX 512 /* PROTOCOL.md, HOLD: a label is at most 512 bytes */

/* Where one file of the repo is. Rows in the order of the list. */
typedef enum {
    HF_PRESENT,  /* on disk already: nothing fetched */
    HF_WAITING,  /* wanted; its FETCH not sent yet */
    HF_FETCHING, /* FETCH out: DONE or ERR awaited */
    HF_HOLDING,  /* DONE came; HOLD out: HELD or ERR awaited, the fd kept */
    HF_OK,       /* placed (or, --warm, in hubd's cache) */
    HF_FAILED,   /* said why; exit is its code */
} hf_state_t;

typedef struct hf_item {
    const hf_file_t *file; /* in dl->list */
    hf_state_t state;      /* see hf_state_t */
    int fd;                /* DONE's descriptor while HOLD runs, else -1 */
    char *store;           /* DONE's path: the blob in hubd's store */
    char *sha256;          /* DONE's digest */
    char *source;          /* DONE's source (hit, download, attached), or "present" */
    const char *placed;    /* symlink, reflink, copy, present, or NULL (--warm) */
    size_t hold_seq;       /* HF_HOLDING: its HOLD was the hold_seq'th sent */
    int exit;              /* EXIT_OK or why it failed */
    char *refused;         /* plan: why a folder on its way was refused, or NULL; owned */
} hf_item_t;

typedef struct hf_dl {
    const hf_opts_t *o;    /* options */
    conn_t *conn;          /* the one connection */
    hf_layout_t layout;    /* where files go (unused with --warm) */
    hf_list_t list;        /* the repo's files, from REPO's descriptor */
    char commit[41];       /* REPO's commit */
    char *resolve;         /* REPO's resolve URL prefix */
    char label[LABEL_MAX]; /* HOLD's label: {type}s/{repo}@{revision} */
    hf_item_t *items;      /* the files wanted, parallel to prog.req */
    size_t n;              /* entries of items */
    fetch_t prog;          /* the progress display over items */
    size_t next;           /* no item before this one is HF_WAITING */
    size_t in_flight;      /* FETCHes out */
    size_t max_in_flight;  /* at most HF_MAX_IN_FLIGHT; lower after too_many_requests */
    size_t open;           /* items not yet OK or FAILED */
    size_t holds_sent;     /* HOLDs sent so far */
    int listed;            /* REPO (or its ERR) came */
    int stop;              /* the listing failed: nothing more to wait for */
    int exit;              /* the run's exit code so far */
    int told_copy;         /* "copying, because..." was said */
    int told_outage;       /* a file was answered from the cache: said once */
    char *outage_code;     /* HFREPO's ERR when the Hub gave no answer; owned */
    char *outage_msg;      /* its msg; owned */
    char why_no_link[256]; /* the first reason a blob could not be a symlink */
    hf_dry_t dry;          /* --dry-run: what would be fetched */
} hf_dl_t;

/* The ids on the wire: "repo" for HFREPO, f{i} a FETCH, h{i} a HOLD. */
#define ID_REPO "repo"

/* ---- saying things ------------------------------------------------------ */

/* "hubctl: ..." on stderr, the progress line taken off first. */
__attribute__((format(printf, 2, 3))) static void say(hf_dl_t *d, const char *fmt, ...)
{
    va_list ap;
    progress_clear(&d->prog);
    va_start(ap, fmt);
    fputs("hubctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The exit code that wins: 3 (hubd gone), then 4 (bytes wrong), then 1. */
static void worst(hf_dl_t *d, int code)
{
    static const int rank[] = {[EXIT_OK] = 0,
                               [EXIT_FAILED] = 1,
                               [EXIT_USAGE] = 1,
                               [EXIT_VERIFY] = 2,
                               [EXIT_UNREACHABLE] = 3};
    if (rank[code] > rank[d->exit])
        d->exit = code;
}

static void json_item(hf_dl_t *d, const hf_item_t *it, const char *code, const char *msg)
{
    FILE *o = stdout;
    fputs("{\"path\":", o);
    json_str(o, it->file->path);
    if (it->state == HF_OK) {
        fputs(",\"ok\":true", o);
        if (!d->o->cli->warm) {
            char *file = hf_layout_file(&d->layout, d->commit, it->file->path);
            fputs(",\"file\":", o);
            json_str(o, file);
            free(file);
        }
        if (!str_eq(it->source, "cache")) { /* a cached copy may be another commit's */
            fprintf(o, ",\"size\":%" PRIu64 ",\"etag\":", it->file->size);
            json_str(o, hf_file_etag(it->file));
        }
        fputs(",\"source\":", o);
        json_str(o, it->source);
        if (it->placed) {
            fputs(",\"placed\":", o);
            json_str(o, it->placed);
        }
    } else {
        fputs(",\"ok\":false,\"error\":", o);
        json_error(o, code, msg);
    }
    fputs("}\n", o);
    fflush(o);
}

/* ---- settling ----------------------------------------------------------- */

static void queue_more(hf_dl_t *d);

/* An item has its end: count it, tell the display, start the next one. */
static void settle(hf_dl_t *d, size_t i, const char *code, const char *msg)
{
    hf_item_t *it = &d->items[i];
    req_t *r = &d->prog.req[i];
    close_fd(it->fd);
    it->fd = -1;
    d->open--;
    r->running = 0;
    r->state = it->state == HF_OK ? REQ_OK : REQ_FAILED;
    r->size = it->file->size;
    d->prog.finished++;
    if (!str_eq(it->source, "present") || d->prog.prog == PROG_TTY)
        progress_settled(&d->prog, r);
    if (it->state == HF_FAILED) {
        worst(d, it->exit);
        if (!d->o->cli->json_files) {
            progress_clear(&d->prog);
            fprintf(stderr, "hubctl: %s: ", r->label);
            out_reason(stderr, code, msg);
        }
    }
    if (d->o->cli->json_files)
        json_item(d, it, code, msg);
    if (d->open > 0)
        progress_draw(&d->prog, 1);
    queue_more(d);
}

static void item_fail(hf_dl_t *d, size_t i, int exit, const char *code, const char *msg)
{
    d->items[i].state = HF_FAILED;
    d->items[i].exit = exit;
    settle(d, i, code, msg);
}

static void item_ok(hf_dl_t *d, size_t i, const char *placed)
{
    d->items[i].state = HF_OK;
    d->items[i].placed = placed;
    settle(d, i, NULL, NULL);
}

/* ---- placing ------------------------------------------------------------ */

/* Says once why the files are copies: neither a symlink into hubd's store
 * (the HF cache) nor a reflink could be made; with --local-dir, no reflink
 * (plain files are asked for: a symlink is no choice there). */
static void tell_copy(hf_dl_t *d, int clone_err)
{
    if (d->told_copy || d->o->cli->quiet)
        return;
    d->told_copy = 1;
    if (d->layout.local) {
        say(d,
            "note: files are copied into %s, taking their size again: this file system makes "
            "no reflink (%s)",
            d->layout.root, strerror(clone_err));
        return;
    }
    say(d,
        "note: files are copied into %s, taking their size again: no symlink into hubd's "
        "store (%s) and this file system makes no reflink (%s)",
        d->layout.root, d->why_no_link[0] ? d->why_no_link : "hubd granted none",
        strerror(clone_err));
}

/* Item i could not be placed in the layout (rc: hf_layout's), what was
 * tried in `what`: a folder refused on the way is named. */
static void fail_output(hf_dl_t *d, size_t i, const char *what, int rc)
{
    char msg[2 * PATH_MAX + 256], why[PATH_MAX + 200];
    snprintf(msg, sizeof msg, "%s: %s", what, hf_layout_why(&d->layout, rc, why, sizeof why));
    item_fail(d, i, EXIT_FAILED, "output", msg);
}

/* The snapshot link of item i, then its end. */
static void finish_linked(hf_dl_t *d, size_t i, const char *placed)
{
    hf_item_t *it = &d->items[i];
    char what[PATH_MAX + 32];
    int rc = d->layout.local ? 0
                             : hf_layout_snapshot_link(&d->layout, d->commit, it->file->path,
                                                       hf_file_etag(it->file));
    if (rc < 0) {
        snprintf(what, sizeof what, "cannot link it in %s/snapshots", d->layout.root);
        fail_output(d, i, what, rc);
        return;
    }
    item_ok(d, i, placed);
}

/* Item i's blob from its descriptor: a reflink, else a copy. */
static void place_copy(hf_dl_t *d, size_t i)
{
    hf_item_t *it = &d->items[i];
    int clone_err = 0;
    char what[PATH_MAX + 32];
    int rc = hf_layout_place_copy(&d->layout, d->commit, it->file->path, hf_file_etag(it->file),
                                  it->fd, it->file->size, &clone_err);
    if (rc < 0) {
        snprintf(what, sizeof what, "cannot write it into %s", d->layout.root);
        fail_output(d, i, what, rc);
        return;
    }
    if (clone_err)
        tell_copy(d, clone_err);
    finish_linked(d, i, clone_err ? "copy" : "reflink");
}

/* DONE came for item i, its bytes checked: into the HF cache. A blob the
 * cache has (another path with the same content) is only linked; else hubd
 * is asked to hold it for us (HOLD), and the reply decides how it goes in. */
static void place(hf_dl_t *d, size_t i)
{
    hf_item_t *it = &d->items[i];
    const hf_file_t *f = it->file;
    if (d->o->cli->warm) {
        item_ok(d, i, NULL);
        return;
    }
    if (d->layout.local) {
        place_copy(d, i);
        return;
    }
    int there = hf_layout_present(&d->layout, d->commit, f->path, hf_file_etag(f), f->size);
    if (there < 0) {
        fail_output(d, i, "cannot look for its blob", there);
        return;
    }
    if (there) {
        finish_linked(d, i, "present");
        return;
    }
    char line[PROTO_MAX_LINE], id[32];
    char *link = hf_layout_blob(&d->layout, hf_file_etag(f));
    proto_writer_t w;
    snprintf(id, sizeof id, "h%zu", i);
    proto_begin(&w, line, sizeof line, "HOLD");
    proto_add(&w, "id", id);
    proto_add(&w, "sha256", it->sha256);
    proto_add(&w, "label", d->label);
    proto_add(&w, "link", link);
    free(link);
    if (conn_queue_line(d->conn, &w) < 0) {
        snprintf(d->why_no_link, sizeof d->why_no_link, "the path is too long for HOLD");
        place_copy(d, i);
        return;
    }
    it->state = HF_HOLDING;
    it->hold_seq = d->holds_sent++;
    queue_more(d);
}

/* HELD or ERR for item i's HOLD. */
static void on_hold_reply(hf_dl_t *d, size_t i, const proto_msg_t *m)
{
    const char *path = proto_get(m, "path");
    if (str_eq(m->verb, "HELD") && str_eq(proto_get(m, "readable"), "1") && path) {
        int rc = hf_layout_blob_symlink(&d->layout, hf_file_etag(d->items[i].file), path);
        if (rc == 0) {
            finish_linked(d, i, "symlink");
            return;
        }
        if (!d->why_no_link[0])
            snprintf(d->why_no_link, sizeof d->why_no_link, "symlink: %s", strerror(-rc));
    } else if (!d->why_no_link[0] && str_eq(m->verb, "HELD")) {
        snprintf(d->why_no_link, sizeof d->why_no_link,
                 "hubd could not grant you read access to its copy");
    } else if (!d->why_no_link[0]) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        char *clean = out_clean_copy(msg ? msg : "");
        snprintf(d->why_no_link, sizeof d->why_no_link, "HOLD: %s%s%s", code ? code : "error",
                 *clean ? ": " : "", clean);
        free(clean);
    }
    place_copy(d, i);
}

/* ---- fetching ----------------------------------------------------------- */

/* The resolve URL of path: each segment percent-encoded (RFC 3986's
 * unreserved bytes kept), '/' kept between them. Malloc'd. */
static char *resolve_url(const char *prefix, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(prefix);
    char *url = xrealloc(NULL, n + 3 * strlen(path) + 1), *o = url + n;
    memcpy(url, prefix, n);
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/", *p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return url;
}

/* The Authorization header of the token, into buf. */
static const char *auth_header(const hf_opts_t *o, char *buf, size_t cap)
{
    if (!o->token)
        return NULL;
    snprintf(buf, cap, "Authorization: Bearer %s", o->token);
    return buf;
}

static int send_fetch(hf_dl_t *d, size_t i)
{
    const hf_file_t *f = d->items[i].file;
    char line[PROTO_MAX_LINE], id[32], auth[4200];
    char *url = resolve_url(d->resolve, f->path);
    const char *h = auth_header(d->o, auth, sizeof auth);
    proto_writer_t w;
    snprintf(id, sizeof id, "f%zu", i);
    proto_begin(&w, line, sizeof line, "FETCH");
    proto_add(&w, "id", id);
    proto_add(&w, "url", url);
    if (f->sha256[0])
        proto_add(&w, "sha256", f->sha256);
    if (h)
        proto_add(&w, "header", h);
    if (d->o->cli->force_download) /* hubd asks the Hub again (a digest's blob is right as it is) */
        proto_add(&w, "refresh", "1");
    free(url);
    return conn_queue_line(d->conn, &w);
}

/* Sends FETCHes while fewer than max_in_flight are out. */
static void queue_more(hf_dl_t *d)
{
    for (; d->next < d->n && d->in_flight < d->max_in_flight; d->next++) {
        hf_item_t *it = &d->items[d->next];
        if (it->state != HF_WAITING)
            continue;
        if (send_fetch(d, d->next) < 0) {
            item_fail(d, d->next, EXIT_FAILED, "too_long", "its URL is too long for hubd");
            continue;
        }
        it->state = HF_FETCHING;
        d->prog.req[d->next].running = 1;
        d->in_flight++;
    }
}

static void on_progress(hf_dl_t *d, req_t *r, const proto_msg_t *m)
{
    uint64_t done, rate;
    if (parse_u64(proto_get(m, "done"), &done) < 0)
        return; /* a frame we cannot read is only a missed frame */
    if (parse_u64(proto_get(m, "rate"), &rate) < 0)
        rate = 0;
    const char *state = proto_get(m, "state");
    snprintf(r->phase, sizeof r->phase, "%s", state ? state : "");
    r->has_progress = 1;
    r->done = done <= r->total ? done : r->total;
    r->rate = rate;
    progress_update(&d->prog, r);
}

/* DONE for item i's FETCH: the bytes are what the listing says, or the
 * item fails and nothing is placed. */
static void on_done(hf_dl_t *d, size_t i, const proto_msg_t *m, int fd)
{
    hf_item_t *it = &d->items[i];
    const hf_file_t *f = it->file;
    const char *path = proto_get(m, "path"), *sha = proto_get(m, "sha256");
    const char *source = proto_get(m, "source");
    char msg[256];
    uint64_t size;
    it->fd = fd;
    d->in_flight--;
    if (!path || !sha || fd < 0 || parse_u64(proto_get(m, "size"), &size) < 0) {
        item_fail(d, i, EXIT_FAILED, "bad_reply",
                  "hubd sent DONE without path, sha256, size or fd");
        return;
    }
    it->store = xstrdup(path);
    it->sha256 = xstrdup(sha);
    it->source = xstrdup(source ? source : "download");
    d->prog.req[i].done = size;
    if (size != f->size || (f->sha256[0] && strcasecmp(sha, f->sha256) != 0)) {
        snprintf(msg, sizeof msg,
                 "hubd's file (%" PRIu64 " bytes, sha256 %.64s) is not the "
                 "Hub's (%" PRIu64 " bytes%s%s)",
                 size, sha, f->size, f->sha256[0] ? ", sha256 " : "", f->sha256);
        item_fail(d, i, EXIT_VERIFY, "hash_mismatch", msg);
        return;
    }
    if (!f->sha256[0]) {
        int rc = hf_git_blob_check(fd, size, f->blob);
        if (rc < 0) {
            snprintf(msg, sizeof msg,
                     rc == -EBADMSG ? "its bytes are not git blob %s"
                                    : "cannot read it to check git blob %s: %s",
                     f->blob, strerror(-rc));
            item_fail(d, i, rc == -EBADMSG ? EXIT_VERIFY : EXIT_FAILED, "hash_mismatch", msg);
            return;
        }
    }
    place(d, i);
}

/* ERR for item i's FETCH. hubd's per-user limit (other hubctl runs of
 * this user hold the slots) puts the file back, with fewer at once. */
static void on_fetch_err(hf_dl_t *d, size_t i, const proto_msg_t *m)
{
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    d->in_flight--;
    if (str_eq(code, "too_many_requests") && d->in_flight > 0) {
        d->items[i].state = HF_WAITING;
        d->prog.req[i].running = 0;
        d->max_in_flight = d->in_flight;
        if (i < d->next)
            d->next = i;
        return;
    }
    /* the Hub out of reach: a copy at this commit on disk answers (as
     * HF_HUB_OFFLINE's lookup finds it; a --local-dir file changed since) */
    if (!d->o->cli->warm && hf_offline_outage(code) &&
        hf_offline_has_file(&d->layout, d->commit, d->items[i].file->path)) {
        if (!d->told_outage++) {
            progress_clear(&d->prog);
            hf_offline_note(d->o, code, msg);
        }
        d->items[i].source = xstrdup("cache");
        item_ok(d, i, NULL);
        return;
    }
    item_fail(d, i, str_eq(code, "hash_mismatch") ? EXIT_VERIFY : EXIT_FAILED,
              code ? code : "unknown", msg ? msg : "");
}

/* ---- the listing -------------------------------------------------------- */

/* Picks the files wanted (FILE operands, else the globs). A named file
 * missing from the repo is an error before anything is fetched. Returns 0
 * or an exit code. */
static int select_files(hf_dl_t *d)
{
    const hf_opts_t *o = d->o;
    const cli_t *c = o->cli;
    int missing = 0;
    d->items = xcalloc(d->list.n ? d->list.n : 1, sizeof *d->items);
    for (size_t k = 0; k < o->nfiles; k++) {
        size_t j = 0;
        while (j < d->list.n && strcmp(d->list.files[j].path, o->files[k]) != 0)
            j++;
        if (j == d->list.n) {
            say(d, "%s is not a file of %s %s at revision %s (commit %s)", o->files[k], o->type,
                o->repo, o->revision, d->commit);
            missing = 1;
            continue;
        }
        int dup = 0;
        for (size_t m = 0; m < d->n; m++)
            dup |= d->items[m].file == &d->list.files[j];
        if (!dup)
            d->items[d->n++].file = &d->list.files[j];
    }
    if (missing)
        return EXIT_FAILED;
    for (size_t j = 0; o->nfiles == 0 && j < d->list.n; j++)
        if (hf_list_wanted(d->list.files[j].path, c->include, c->ninclude, c->exclude, c->nexclude))
            d->items[d->n++].file = &d->list.files[j];
    for (size_t i = 0; i < d->n; i++) {
        const char *path = d->items[i].file->path;
        if (!hf_path_safe(path)) {
            char *clean = out_clean_copy(path);
            say(d, "the Hub names a file '%s' that cannot be placed safely", clean);
            free(clean);
            return EXIT_FAILED;
        }
        if (d->layout.local && hf_path_is_meta(path)) {
            say(d,
                "the Hub names a file '%s' in .cache/huggingface, where --local-dir keeps its "
                "metadata: leave it out (--exclude '.cache/*')",
                path);
            return EXIT_FAILED;
        }
    }
    return 0;
}

/* The progress display's rows, and what is on disk already. */
static void plan_items(hf_dl_t *d)
{
    d->prog.req = xcalloc(d->n ? d->n : 1, sizeof *d->prog.req);
    d->prog.n = d->n;
    d->open = d->n;
    for (size_t i = 0; i < d->n; i++) {
        hf_item_t *it = &d->items[i];
        req_t *r = &d->prog.req[i];
        it->fd = -1;
        it->state = HF_WAITING;
        r->url = r->label = out_clean_copy(it->file->path);
        r->has_total = 1;
        r->total = it->file->size;
        r->last_line = -1e9;
        int there = d->o->cli->warm || d->o->cli->force_download
                        ? 0
                        : hf_layout_present(&d->layout, d->commit, it->file->path,
                                            hf_file_etag(it->file), it->file->size);
        if (there < 0) { /* failed by on_repo, before anything is fetched */
            char why[PATH_MAX + 200];
            it->state = HF_FAILED; /* not WAITING: queue_more must not send it */
            it->refused = xstrdup(hf_layout_why(&d->layout, there, why, sizeof why));
        } else if (there) {
            it->state = HF_PRESENT;
            it->source = xstrdup("present");
            r->via = VIA_HIT;
        }
    }
}

/* --dry-run: each file wanted, whether it is in place and would be
 * fetched; nothing is written (not even refs/). */
static void dry_list(hf_dl_t *d)
{
    d->dry.commit = xstrdup(d->commit);
    for (size_t i = 0; i < d->n; i++) {
        const hf_file_t *f = d->items[i].file;
        int there = hf_layout_present(&d->layout, d->commit, f->path, hf_file_etag(f), f->size);
        char *where = hf_layout_file(&d->layout, d->commit, f->path);
        hf_dry_add(&d->dry, f->path, f->size, there > 0, there <= 0 || d->o->cli->force_download,
                   where);
        free(where);
    }
}

/* REPO: the listing, then the files. */
static void on_repo(hf_dl_t *d, const proto_msg_t *m, int fd)
{
    const char *commit = proto_get(m, "commit"), *resolve = proto_get(m, "resolve");
    char err[256];
    d->listed = 1;
    if (!commit || !hex_is(commit, 40, 0) || !resolve || fd < 0) {
        close_fd(fd);
        say(d, "hubd answered HFREPO without commit, resolve or the file list");
        worst(d, EXIT_FAILED);
        d->stop = 1;
        return;
    }
    memcpy(d->commit, commit, 41);
    d->resolve = xstrdup(resolve);
    int rc = hf_list_read(fd, &d->list, err, sizeof err);
    close(fd);
    if (rc < 0) {
        say(d, "%s", err);
        worst(d, EXIT_FAILED);
        d->stop = 1;
        return;
    }
    if ((rc = select_files(d)) != 0) {
        worst(d, rc);
        d->stop = 1;
        return;
    }
    if (d->o->cli->dry_run) {
        dry_list(d);
        d->stop = 1;
        return;
    }
    if (!d->o->cli->warm && (rc = hf_layout_write_ref(&d->layout, d->o->revision, d->commit)) < 0) {
        char why[PATH_MAX + 200];
        say(d, "cannot write %s/refs/%s: %s", d->layout.root, d->o->revision,
            hf_layout_why(&d->layout, rc, why, sizeof why));
        worst(d, EXIT_FAILED);
        d->stop = 1;
        return;
    }
    plan_items(d);
    size_t present = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->items[i].refused) {
            char msg[PATH_MAX + 256];
            snprintf(msg, sizeof msg, "cannot place it: %s", d->items[i].refused);
            item_fail(d, i, EXIT_FAILED, "output", msg);
            continue;
        }
        if (d->items[i].state != HF_PRESENT)
            continue;
        present++;
        finish_linked(d, i, "present");
    }
    if (present && !d->o->cli->quiet)
        say(d, "%zu file%s already in %s", present, present == 1 ? "" : "s", d->layout.root);
    queue_more(d);
    if (d->open)
        progress_draw(&d->prog, 1);
}

/* ---- replies ------------------------------------------------------------ */

/* A reply to item i's FETCH or HOLD (kind 'f' or 'h'). */
static void on_item_msg(hf_dl_t *d, size_t i, char kind, const proto_msg_t *m, int fd)
{
    hf_item_t *it = &d->items[i];
    req_t *r = &d->prog.req[i];
    if (kind == 'h' && it->state == HF_HOLDING &&
        (str_eq(m->verb, "HELD") || str_eq(m->verb, "ERR"))) {
        close_fd(fd);
        on_hold_reply(d, i, m);
        return;
    }
    if (kind != 'f' || it->state != HF_FETCHING) {
        close_fd(fd);
        return;
    }
    if (str_eq(m->verb, "DONE")) {
        on_done(d, i, m, fd);
        return;
    }
    close_fd(fd);
    if (str_eq(m->verb, "ERR")) {
        on_fetch_err(d, i, m);
    } else if (str_eq(m->verb, "PROGRESS")) {
        on_progress(d, r, m);
    } else if (str_eq(m->verb, "HIT") || str_eq(m->verb, "QUEUED") || str_eq(m->verb, "ATTACHED")) {
        r->via = m->verb[0] == 'H' ? VIA_HIT : m->verb[0] == 'Q' ? VIA_QUEUED : VIA_ATTACHED;
        progress_update(&d->prog, r);
    }
}

/* HFREPO's ERR: the Hub's refusal in its own words (a gated repo, an
 * unknown revision), and hubd's code after it. When the Hub gave no answer
 * (hf_offline_outage), the cache answers once the connection is done. */
static void on_repo_err(hf_dl_t *d, const proto_msg_t *m)
{
    const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
    d->listed = d->stop = 1;
    if (!d->o->cli->warm && hf_offline_outage(code)) { /* the cache answers: hf_download_run */
        d->outage_code = xstrdup(code);
        d->outage_msg = xstrdup(msg ? msg : "");
        return;
    }
    char *clean = out_clean_copy(msg ? msg : "");
    if (str_eq(code, "bad_verb") || str_eq(code, "unknown_verb"))
        say(d, "this hubd cannot list Hub repos (HFREPO: %s); update hubd", clean);
    else
        say(d, "cannot list %s %s at revision %s: %s (%s)", d->o->type, d->o->repo, d->o->revision,
            *clean ? clean : "hubd gave no reason", code ? code : "error");
    free(clean);
    worst(d, EXIT_FAILED);
}

/* An ERR without id: a hubd older than a verb answers it so, in order. It
 * is HFREPO's while the listing has not come, else the oldest HOLD's (the
 * blob is then reflinked or copied); else it is only said. */
static void on_idless_err(hf_dl_t *d, const proto_msg_t *m)
{
    size_t oldest = d->n;
    if (!d->listed) {
        on_repo_err(d, m);
        return;
    }
    for (size_t i = 0; i < d->n; i++)
        if (d->items[i].state == HF_HOLDING &&
            (oldest == d->n || d->items[i].hold_seq < d->items[oldest].hold_seq))
            oldest = i;
    if (oldest < d->n) {
        on_hold_reply(d, oldest, m);
    } else if (!d->o->cli->quiet) {
        const char *code = proto_get(m, "code"), *msg = proto_get(m, "msg");
        progress_clear(&d->prog);
        fputs("hubctl: hubd: ", stderr);
        out_reason(stderr, code ? code : "error", msg ? msg : "");
    }
}

static int dl_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    hf_dl_t *d = arg;
    const char *id = proto_get(m, "id");
    uint64_t i;
    if (str_eq(id, ID_REPO) && !d->listed) {
        if (str_eq(m->verb, "REPO"))
            on_repo(d, m, fd);
        else if (str_eq(m->verb, "ERR"))
            on_repo_err(d, m);
        else
            close_fd(fd);
    } else if (id && (id[0] == 'f' || id[0] == 'h') && parse_u64(id + 1, &i) == 0 && i < d->n) {
        on_item_msg(d, (size_t)i, id[0], m, fd);
    } else {
        close_fd(fd);
        if (str_eq(m->verb, "ERR") && !id)
            on_idless_err(d, m);
    }
    return d->stop || (d->listed && d->open == 0);
}

/* ---- the run ------------------------------------------------------------ */

static int queue_hfrepo(hf_dl_t *d)
{
    const hf_opts_t *o = d->o;
    char line[PROTO_MAX_LINE], auth[4200];
    const char *h = auth_header(o, auth, sizeof auth);
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, "HFREPO");
    proto_add(&w, "id", ID_REPO);
    proto_add(&w, "repo", o->repo);
    proto_add(&w, "type", o->type);
    proto_add(&w, "revision", o->revision);
    if (h)
        proto_add(&w, "header", h);
    if (conn_queue_line(d->conn, &w) < 0)
        return usage_error("the revision (or token) is too long");
    int n = snprintf(d->label, sizeof d->label, "%ss/%s@%s", o->type, o->repo, o->revision);
    if (n < 0 || (size_t)n >= sizeof d->label)
        return usage_error("the revision is too long");
    return 0;
}

/* hubd went away: every open item fails, said once (conn_report). */
static void abandon(hf_dl_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        hf_item_t *it = &d->items[i];
        if (it->state == HF_OK || it->state == HF_FAILED)
            continue;
        it->state = HF_FAILED;
        close_fd(it->fd);
        it->fd = -1;
    }
    progress_clear(&d->prog);
    worst(d, EXIT_UNREACHABLE);
}

/* stdout once all went well: what `hf download` prints. --warm: a line on
 * stderr of what hubd now holds. */
static void print_result(hf_dl_t *d)
{
    const hf_opts_t *o = d->o;
    if (o->cli->warm) {
        uint64_t bytes = 0;
        size_t hits = 0;
        char a[32];
        for (size_t i = 0; i < d->n; i++) {
            bytes += d->items[i].file->size;
            hits += str_eq(d->items[i].source, "hit");
        }
        if (!o->cli->quiet)
            say(d, "%zu file%s (%s) of %s %s@%s in hubd's cache (%zu already were)", d->n,
                d->n == 1 ? "" : "s", out_bytes(bytes, a, sizeof a), o->type, o->repo, d->commit,
                hits);
        return;
    }
    if (o->cli->dry_run) {
        hf_dry_print(&d->dry, o->format, o->cli->json_files);
        return;
    }
    if (o->cli->json_files)
        return;
    char *out = o->nfiles == 1 ? hf_layout_file(&d->layout, d->commit, o->files[0])
                               : hf_layout_folder(&d->layout, d->commit);
    hf_format_result(o->format, out);
    free(out);
}

static void dl_free(hf_dl_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        close_fd(d->items[i].fd);
        free(d->items[i].store);
        free(d->items[i].sha256);
        free(d->items[i].source);
        free(d->items[i].refused);
    }
    for (size_t i = 0; i < d->prog.n; i++)
        free(d->prog.req[i].label);
    free(d->prog.req);
    free(d->items);
    free(d->resolve);
    free(d->outage_code);
    free(d->outage_msg);
    hf_list_free(&d->list);
    hf_layout_free(&d->layout);
    hf_dry_free(&d->dry);
}

/* HELLO's reply: which Hub hubd asks, for HF_ENDPOINT (hf_endpoint.h). */
static void dl_on_hello(void *arg, const proto_msg_t *m)
{
    hf_dl_t *d = arg;
    hf_endpoint_check(m ? proto_get(m, "hf_upstream") : NULL, m ? proto_get(m, "hf_front") : NULL,
                      d->o->cli->quiet);
}

int hf_download_run(const hf_opts_t *o)
{
    hf_dl_t d = {.o = o, .max_in_flight = o->max_workers ? o->max_workers : HF_MAX_IN_FLIGHT};
    d.prog.cli = o->cli;
    d.prog.prog = progress_mode(o->cli);
    d.prog.per_file = 1;
    d.prog.t_start = progress_now();
    if (!o->cli->warm)
        hf_layout_init(&d.layout, o->cache_dir, o->local_dir, o->type, o->repo);
    /* a folder refused is said before hubd is asked anything; another
     * user's repo folder in a shared cache is the likely one, hence the hint */
    int rc = o->cli->warm ? 0 : hf_layout_check(&d.layout);
    if (rc < 0) {
        char why[PATH_MAX + 200];
        int theirs = rc == -EPERM && !d.layout.local;
        say(&d, "cannot write into %s: %s%s", d.layout.root,
            hf_layout_why(&d.layout, rc, why, sizeof why),
            theirs ? "; use an HF cache folder of your own (--cache-dir or HF_HUB_CACHE): its "
                     "blobs are links into hubd's store, not a second copy"
                   : "");
        hf_layout_free(&d.layout);
        return EXIT_FAILED;
    }
    d.conn = conn_new(o->cli->socket, 1, o->cli->quiet, dl_on_msg, &d);
    conn_interruptible(d.conn);
    conn_on_hello(d.conn, dl_on_hello, &d);
    rc = queue_hfrepo(&d);
    if (rc == 0)
        rc = conn_open(d.conn);
    if (rc == 0) {
        int err = conn_run(d.conn);
        if (err == -EINTR) { /* Ctrl-C: what became of the downloads, in one line */
            abandon(&d);
            interrupt_say(conn_interrupted(d.conn), stderr);
            d.exit = EXIT_INTERRUPTED;
        } else if (err < 0) {
            abandon(&d);
            conn_report(d.conn, err);
        }
        if (d.exit == EXIT_INTERRUPTED)
            ; /* nothing more: the user asked to stop */
        else if (d.outage_code && d.exit == EXIT_OK)
            d.exit = hf_offline_fallback(o, d.outage_code, d.outage_msg);
        else if (d.exit == EXIT_OK)
            print_result(&d);
        rc = d.exit;
    }
    conn_free(d.conn);
    dl_free(&d);
    return rc;
}
