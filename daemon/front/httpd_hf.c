/* httpd_hf: the Hugging Face Hub endpoint of the HTTP front (issue 13), so
 * that HF_ENDPOINT=http://127.0.0.1:8399/hf sends the Hub clients' file
 * downloads through hubd.
 *
 * `HEAD|GET /hf/[datasets/|spaces/]{repo}/resolve/{rev}/{path}`: the Hub
 * (hf_upstream) is asked first for the file's metadata, with the client's
 * credentials and `Range: bytes=0-0` (a small file answers 206 with its
 * length; an LFS file 302 to its CDN): relative redirects (a renamed repo)
 * are followed here, a redirect to another host is the file's. The answer
 * carries the Hub's X-Repo-Commit, ETag, X-Linked-Etag and X-Linked-Size,
 * never a Location or a xet hint (a client that sees one bypasses the
 * front). A HEAD is answered from that; a GET downloads the file pinned to
 * the commit (`resolve/{commit}/{path}`, the cache key, shared by branch and
 * tag names of one commit), with the LFS file's SHA-256 (X-Linked-Etag) as
 * the expected digest: verified, and a hit by content under any repo or
 * revision. The Hub's errors pass with their status, X-Error-Code,
 * X-Error-Message and X-Repo-Commit. Asking the Hub each time, with the
 * client's own token, is also what keeps a gated file cached for one token
 * from reaching a client whose token the Hub refuses.
 *
 * The Hub's answer about a file is remembered for a minute by the client's
 * credential tag (hf_known_t): the GET that follows a HEAD with the same
 * credentials is not asked again, and another token is always asked. A
 * HEAD's commit is remembered longer, for anyone (hf_rev_t), so that the
 * GET after it gets the file the HEAD described even if the branch moved.
 *
 * A small (non-LFS) file's ETag is its git blob SHA-1 (sha1("blob <size>\0"
 * + bytes)): the stored file is checked against it in a pool item before
 * any byte goes out (such files are small: they are not streamed).
 *
 * The API routes (/hf/api/...) are httpd_hf_api.c's. */
#include "admin.h"
#include "http.h"
#include "httpd_internal.h"
#include "log.h"
#include "url.h"

#include <errno.h>
#include <mbedtls/sha1.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HF_MAX_HOPS 5 /* relative redirects (renamed repos) followed */

/* The Hub's headers the metadata request keeps (the HTTP client knows none
 * of them), by their index in hub_wanted: the commit, an LFS file's SHA-256
 * and size, the Hub's errors. The names are also those the answer passes
 * on to the client. */
enum { HUB_COMMIT, HUB_LINKED_ETAG, HUB_LINKED_SIZE, HUB_ERROR_CODE, HUB_ERROR_MESSAGE, HUB_N };
static const http_want_t hub_wanted[HUB_N] = {
    [HUB_COMMIT] = {"X-Repo-Commit", 0},          [HUB_LINKED_ETAG] = {"X-Linked-Etag", 0},
    [HUB_LINKED_SIZE] = {"X-Linked-Size", 0},     [HUB_ERROR_CODE] = {"X-Error-Code", 0},
    [HUB_ERROR_MESSAGE] = {"X-Error-Message", 0},
};

typedef struct hf_meta {
    hconn_t *c;
    char key[512];       /* "prefix repo@rev" as the client named it (hf_rev_t) */
    char file_key[1024]; /* key + "/path" (hf_known_t), "" when too long */
    char tag[65];        /* the client's credential tag */
    http_req_t *req;     /* the request to the Hub in flight, or NULL */
    url_t url;           /* the hop asked */
    unsigned hops;
    char *prefix, *repo, *path; /* "datasets/" or "", "org/name", "dir/file" */
    /* what the last answer said */
    int status;
    int64_t content_length;
    char *location, *etag, *content_range;
    char *hub[HUB_N]; /* the values of hub_wanted */
} hf_meta_t;

static void meta_forget(hf_meta_t *m)
{
    free(m->location);
    free(m->etag);
    free(m->content_range);
    m->location = m->etag = m->content_range = NULL;
    for (int i = 0; i < HUB_N; i++) {
        free(m->hub[i]);
        m->hub[i] = NULL;
    }
}

static void meta_free(hf_meta_t *m)
{
    meta_forget(m);
    url_free(&m->url);
    free(m->prefix);
    free(m->repo);
    free(m->path);
    free(m);
}

void hf_abandon(hconn_t *c)
{
    hf_meta_t *m = c->hf;
    if (!m)
        return;
    c->hf = NULL;
    if (m->req)
        http_req_abort(m->req);
    meta_free(m);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int on_meta_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    hf_meta_t *m = data;
    (void)req;
    meta_forget(m);
    m->status = resp->status;
    m->content_length = resp->content_length;
    m->location = dup_or_null(resp->location);
    m->etag = dup_or_null(resp->etag);
    m->content_range = dup_or_null(resp->content_range);
    for (int i = 0; i < HUB_N; i++)
        m->hub[i] = dup_or_null(resp->wanted[i]);
    return HTTP_BODY_DISCARD; /* one byte, or a redirect's or an error's text */
}

static void on_meta_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    (void)req, (void)buf, (void)p, (void)n, (void)data;
}

static void ask(hf_meta_t *m);

int hf_add_line(hreq_t *r, const char *name, const char *value)
{
    if (!value)
        return 0;
    for (const char *v = value; *v; v++)
        if ((unsigned char)*v < 0x20)
            return 0; /* no header smuggling through the Hub's values */
    char *more = NULL;
    if (asprintf(&more, "%s%s: %s\r\n", r->extra ? r->extra : "", name, value) < 0)
        return -1;
    free(r->extra);
    r->extra = more;
    return 0;
}

/* The Hub's answer is not the file's metadata: its status and error
 * headers pass, with a one-line text. */
static void pass_error(hconn_t *c, hf_meta_t *m)
{
    hreq_t *r = &c->req;
    hf_add_line(r, hub_wanted[HUB_ERROR_CODE].name, m->hub[HUB_ERROR_CODE]);
    hf_add_line(r, hub_wanted[HUB_ERROR_MESSAGE].name, m->hub[HUB_ERROR_MESSAGE]);
    hf_add_line(r, hub_wanted[HUB_COMMIT].name, m->hub[HUB_COMMIT]);
    int status = m->status >= 400 && m->status <= 599 ? m->status : 502;
    char code[16], msg[300];
    snprintf(code, sizeof code, "http_%d", m->status);
    snprintf(msg, sizeof msg, "%s",
             m->hub[HUB_ERROR_MESSAGE] ? m->hub[HUB_ERROR_MESSAGE] : "the Hub refused");
    hf_abandon(c);
    hreq_answer_text(c, status, code, msg, 0);
}

/* "bytes 0-0/1234" → 1234; -1 when not that form. */
static int64_t range_total(const char *cr)
{
    const char *slash = cr ? strrchr(cr, '/') : NULL;
    if (!slash || slash[1] < '0' || slash[1] > '9')
        return -1;
    char *end;
    unsigned long long v = strtoull(slash + 1, &end, 10);
    return *end ? -1 : (int64_t)v;
}

/* A quoted (or weak) ETag's bare value into out: 64 lowercase hex digits
 * for an LFS file's SHA-256. */
static int sha256_of_etag(const char *etag, char out[65])
{
    if (!etag)
        return -1;
    if (strncmp(etag, "W/", 2) == 0)
        etag += 2;
    size_t n = strlen(etag);
    if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"')
        etag++, n -= 2;
    if (n != 64)
        return -1;
    for (size_t i = 0; i < 64; i++) {
        char ch = etag[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
            return -1;
        out[i] = ch >= 'A' && ch <= 'F' ? (char)(ch + 32) : ch;
    }
    out[64] = '\0';
    return 0;
}

/* The commit a HEAD announced for key, or NULL (forgotten, or never). */
static const char *rev_lookup(httpd_t *h, const char *key)
{
    uint64_t now = uv_now(h->d.loop);
    for (int i = 0; i < HF_REVS; i++)
        if (h->revs[i].until > now && strcmp(h->revs[i].key, key) == 0)
            return h->revs[i].commit;
    return NULL;
}

static void rev_remember(httpd_t *h, const char *key, const char *commit)
{
    if (strlen(commit) != 40 || strlen(key) >= sizeof h->revs[0].key)
        return;
    hf_rev_t *slot = &h->revs[0];
    for (int i = 0; i < HF_REVS; i++) { /* the same key, else the oldest */
        if (strcmp(h->revs[i].key, key) == 0) {
            slot = &h->revs[i];
            break;
        }
        if (h->revs[i].until < slot->until)
            slot = &h->revs[i];
    }
    snprintf(slot->key, sizeof slot->key, "%s", key);
    memcpy(slot->commit, commit, 41);
    slot->until = uv_now(h->d.loop) + HF_REV_TTL_MS;
}

/* What the Hub said of (tag, key), or NULL (forgotten, or never). */
static const hf_file_t *known_lookup(httpd_t *h, const char *tag, const char *key)
{
    uint64_t now = uv_now(h->d.loop);
    for (int i = 0; i < HF_KNOWN; i++)
        if (h->known[i].until > now && strcmp(h->known[i].tag, tag) == 0 &&
            strcmp(h->known[i].key, key) == 0)
            return &h->known[i].file;
    return NULL;
}

static void known_remember(httpd_t *h, const char *tag, const char *key, const hf_file_t *f)
{
    if (strlen(key) >= sizeof h->known[0].key)
        return;
    hf_known_t *slot = &h->known[0];
    for (int i = 0; i < HF_KNOWN; i++) { /* the same, else the oldest */
        if (strcmp(h->known[i].tag, tag) == 0 && strcmp(h->known[i].key, key) == 0) {
            slot = &h->known[i];
            break;
        }
        if (h->known[i].until < slot->until)
            slot = &h->known[i];
    }
    snprintf(slot->tag, sizeof slot->tag, "%s", tag);
    snprintf(slot->key, sizeof slot->key, "%s", key);
    slot->file = *f;
    slot->until = uv_now(h->d.loop) + HF_KNOWN_TTL_MS;
}

/* The file's metadata out of the Hub's answer m: 0, or -1 when it lacks
 * what a client needs (or a value is too long to keep). */
static int file_of(const hf_meta_t *m, hf_file_t *f)
{
    memset(f, 0, sizeof *f);
    const char *commit = m->hub[HUB_COMMIT];
    f->lfs = m->status >= 300 && m->status < 400;
    const char *lsize = m->hub[HUB_LINKED_SIZE];
    f->size = f->lfs ? (lsize ? atoll(lsize) : -1)
                     : (m->status == 206 ? range_total(m->content_range) : m->content_length);
    if (!commit || strlen(commit) >= sizeof f->commit || f->size < 0 ||
        (f->lfs && sha256_of_etag(m->hub[HUB_LINKED_ETAG], f->sha256)))
        return -1;
    snprintf(f->commit, sizeof f->commit, "%s", commit);
    if (snprintf(f->etag, sizeof f->etag, "%s", m->etag ? m->etag : "") >= (int)sizeof f->etag)
        return -1;
    if (f->lfs) {
        snprintf(f->linked, sizeof f->linked, "%s", m->hub[HUB_LINKED_ETAG]);
        if (snprintf(f->linked_size, sizeof f->linked_size, "%s", lsize) >=
            (int)sizeof f->linked_size)
            return -1;
    }
    return 0;
}

/* Answers a HEAD from the file's metadata, or downloads the file pinned to
 * its commit. Takes m (c->hf) and frees it. */
static void serve(hconn_t *c, hf_meta_t *m, const hf_file_t *f)
{
    hreq_t *r = &c->req;
    hf_add_line(r, "X-Repo-Commit", f->commit);
    if (f->etag[0]) {
        hf_add_line(r, "ETag", f->etag);
        r->own_etag = 1;
    }
    if (!f->lfs && f->etag[0]) { /* a git blob SHA-1: 40 hex digits, quoted */
        const char *e = strncmp(f->etag, "W/", 2) == 0 ? f->etag + 2 : f->etag;
        size_t n = strlen(e);
        if (n == 42 && e[0] == '"' && e[41] == '"' && strspn(e + 1, "0123456789abcdef") == 40)
            snprintf(r->git_sha1, sizeof r->git_sha1, "%.40s", e + 1);
    }
    if (f->lfs) {
        hf_add_line(r, "X-Linked-Etag", f->linked);
        hf_add_line(r, "X-Linked-Size", f->linked_size);
    }
    if (r->method == HTTP_HEAD) {
        rev_remember(c->srv, m->key, f->commit);
        hf_abandon(c);
        hreq_answer_head(c, (uint64_t)f->size);
        return;
    }
    char *url = NULL;
    const char *up = c->srv->d.cfg->hf_upstream;
    int n = asprintf(&url, "%s/%s%s/resolve/%s/%s", up, m->prefix, m->repo, f->commit, m->path);
    hf_abandon(c);
    if (n < 0) {
        hreq_answer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    free(r->pinned);
    r->pinned = url; /* the entry's URL, for the git SHA-1 check */
    hreq_fetch(c, url, f->lfs ? f->sha256 : NULL);
}

/* The metadata is in: remembered for this credential tag, then served. */
static void metadata_done(hconn_t *c, hf_meta_t *m)
{
    hf_file_t f;
    if (file_of(m, &f)) {
        hf_abandon(c);
        hreq_answer_text(c, 502, "http_parse",
                         "the Hub's answer has no X-Repo-Commit, size or (for an LFS file) "
                         "X-Linked-Etag",
                         0);
        return;
    }
    if (m->file_key[0])
        known_remember(c->srv, m->tag, m->file_key, &f);
    serve(c, m, &f);
}

static void on_meta_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    hf_meta_t *m = data;
    hconn_t *c = m->c;
    (void)req;
    m->req = NULL;
    if (code) {
        hf_abandon(c);
        hreq_answer_text(c, httpd_status_of(code), code, msg, 0);
        return;
    }
    if (m->status >= 300 && m->status < 400 && m->location) {
        url_t next;
        char *abs = NULL;
        int same = url_resolve(&m->url, m->location, &abs) == 0 && url_parse(abs, &next, NULL) == 0;
        free(abs);
        if (same && url_same_origin(&m->url, &next)) { /* a renamed repo: follow it here */
            if (++m->hops > HF_MAX_HOPS) {
                url_free(&next);
                hf_abandon(c);
                hreq_answer_text(c, 502, "redirect", "the Hub redirected too many times", 0);
                return;
            }
            url_free(&m->url);
            m->url = next;
            ask(m);
            return;
        }
        if (same)
            url_free(&next);
        metadata_done(c, m); /* to a CDN: an LFS file */
        return;
    }
    if (m->status == 200 || m->status == 206) {
        metadata_done(c, m);
        return;
    }
    pass_error(c, m);
}

static const http_req_cbs_t meta_cbs = {on_meta_headers, on_meta_body, on_meta_done};

/* The request to the Hub for the current hop, with the client's
 * credentials (only to the Hub's own origin: http.c's callers decide;
 * here every hop is the Hub's). */
static void ask(hf_meta_t *m)
{
    hconn_t *c = m->c;
    char *hdrs = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&hdrs, &len);
    if (f) {
        fputs("Range: bytes=0-0\r\n", f);
        for (unsigned i = 0; i < c->req.ncred; i++)
            fprintf(f, "%s\r\n", c->req.cred[i]);
        fclose(f);
    }
    http_req_opts_t o = {.extra_headers = hdrs, .wanted = hub_wanted, .nwanted = HUB_N};
    int rc = hdrs ? http_request_opts(jobs_http(c->srv->d.jobs), &m->url, &o, &meta_cbs, m, &m->req)
                  : -1;
    free(hdrs);
    if (rc) {
        m->req = NULL;
        hf_abandon(c);
        hreq_answer_text(c, rc == -EACCES ? 403 : 500, rc == -EACCES ? "forbidden" : "internal",
                         rc == -EACCES ? "the network policy does not allow the Hub's host"
                                       : "cannot ask the Hub",
                         0);
    }
}

/* "/hf/[datasets/|spaces/|models/]{repo}/resolve/{rev}/{path}": 0 with the
 * parts, -1 for another form. */
static int parse_resolve(const char *target, char **prefix, char **repo, char **rev, char **path)
{
    const char *t = target + 4; /* after "/hf/" */
    const char *q = strchr(t, '?');
    size_t tl = q ? (size_t)(q - t) : strlen(t);
    const char *pre = "";
    if (strncmp(t, "datasets/", 9) == 0)
        pre = "datasets/", t += 9, tl -= 9;
    else if (strncmp(t, "spaces/", 7) == 0)
        pre = "spaces/", t += 7, tl -= 7;
    else if (strncmp(t, "models/", 7) == 0)
        t += 7, tl -= 7;
    const char *res = NULL;
    for (const char *p = t; p + 9 <= t + tl; p++)
        if (strncmp(p, "/resolve/", 9) == 0) {
            res = p;
            break;
        }
    if (!res || res == t)
        return -1;
    const char *rv = res + 9, *end = t + tl;
    const char *slash = memchr(rv, '/', (size_t)(end - rv));
    if (!slash || slash == rv || slash + 1 >= end)
        return -1;
    *prefix = strdup(pre);
    *repo = strndup(t, (size_t)(res - t));
    *rev = strndup(rv, (size_t)(slash - rv));
    *path = strndup(slash + 1, (size_t)(end - slash - 1));
    return *prefix && *repo && *rev && *path ? 0 : -1;
}

void hf_handle(hconn_t *c)
{
    const char *target = c->req.target;
    if (strncmp(target, "/hf/api/", 8) == 0) {
        hf_api_handle(c);
        return;
    }
    hf_meta_t *m = calloc(1, sizeof *m);
    char *rev = NULL;
    if (!m || parse_resolve(target, &m->prefix, &m->repo, &rev, &m->path)) {
        if (m)
            meta_free(m);
        free(rev);
        hreq_answer_text(c, 404, "bad_url",
                         "the front serves /hf/[datasets/|spaces/]{repo}/resolve/{rev}/{path}", 0);
        return;
    }
    /* A GET after a HEAD of the same revision asks for the commit the HEAD
     * announced. */
    snprintf(m->key, sizeof m->key, "%s%s@%s", m->prefix, m->repo, rev);
    if (snprintf(m->file_key, sizeof m->file_key, "%s/%s", m->key, m->path) >=
        (int)sizeof m->file_key)
        m->file_key[0] = '\0';
    if (jobs_cred_tag(c->srv->d.jobs, (const char *const *)c->req.cred, c->req.ncred, m->tag)) {
        meta_free(m);
        free(rev);
        hreq_answer_text(c, 400, "bad_request", "a credential header is not valid", 0);
        return;
    }
    /* The Hub answered this client's credentials for this file a moment
     * ago (the HEAD before a GET): no second question. */
    const hf_file_t *known = m->file_key[0] ? known_lookup(c->srv, m->tag, m->file_key) : NULL;
    if (known) {
        hf_file_t f = *known;
        free(rev);
        m->c = c;
        c->hf = m;
        serve(c, m, &f);
        return;
    }
    const char *pinned = c->req.method == HTTP_GET ? rev_lookup(c->srv, m->key) : NULL;
    char *text = NULL;
    int n = asprintf(&text, "%s/%s%s/resolve/%s/%s", c->srv->d.cfg->hf_upstream, m->prefix, m->repo,
                     pinned ? pinned : rev, m->path);
    free(rev);
    const char *why = NULL;
    if (n < 0 || url_parse(text, &m->url, &why)) {
        free(text);
        meta_free(m);
        hreq_answer_text(c, 400, "bad_url", why ? why : "out of memory", 0);
        return;
    }
    free(text);
    m->c = c;
    c->hf = m;
    ask(m);
}

/* ---- the git blob SHA-1 of a small file ---------------------------------- */

static void on_forgotten(void *arg, const admin_result_t *r)
{
    char *url = arg;
    if (r->rc)
        log_warn("http front: cannot forget %s: %s", url, strerror(-r->rc));
    free(url);
}

/* Best effort: the entry whose bytes the Hub's ETag refuses is removed (as
 * `hubctl rm` does), so the next request downloads the file again instead
 * of being refused for ever. While another admin request runs it stays,
 * and is refused again. */
static void forget(hconn_t *c, const char *url)
{
    httpd_t *h = c->srv;
    char *copy = url ? strdup(url) : NULL;
    admin_req_t *req;
    if (!copy || admin_busy() ||
        admin_start(h->d.loop, jobs_work(h->d.jobs), h->d.store, h->d.db, ADMIN_RM, copy, 0,
                    on_forgotten, copy, &req)) {
        log_warn("http front: %s stays in the cache for now (another admin request runs)",
                 url ? url : "?");
        free(copy);
    }
}

typedef struct git_check {
    job_fd_t *fd; /* the stored file */
    char *url;    /* its entry's URL (pinned to the commit) */
    uint64_t size;
    char sha256[65];
    char got[41]; /* what the file's SHA-1 is ("" on a read error) */
    fetch_kind_t kind;
} git_check_t;

static void git_check_free(git_check_t *g)
{
    job_fd_unref(g->fd);
    free(g->url);
    free(g);
}

static void git_sha1_work(uv_work_t *w)
{
    hconn_t *c = w->data;
    git_check_t *g = c->item_ctx;
    mbedtls_sha1_context ctx;
    mbedtls_sha1_init(&ctx);
    char head[48];
    int hl = snprintf(head, sizeof head, "blob %llu", (unsigned long long)g->size);
    unsigned char buf[64 * 1024], out[20];
    int ok = mbedtls_sha1_starts_ret(&ctx) == 0 &&
             mbedtls_sha1_update_ret(&ctx, (const unsigned char *)head, (size_t)hl + 1) == 0;
    for (uint64_t off = 0; ok && off < g->size;) {
        ssize_t n = pread(g->fd->fd, buf, sizeof buf, (off_t)off);
        if (n <= 0) {
            ok = 0;
            break;
        }
        ok = mbedtls_sha1_update_ret(&ctx, buf, (size_t)n) == 0;
        off += (uint64_t)n;
    }
    g->got[0] = '\0';
    if (ok && mbedtls_sha1_finish_ret(&ctx, out) == 0)
        for (int i = 0; i < 20; i++)
            snprintf(g->got + 2 * i, 3, "%02x", out[i]);
    mbedtls_sha1_free(&ctx);
}

static void git_sha1_after(uv_work_t *w, int status)
{
    hconn_t *c = w->data;
    git_check_t *g = c->item_ctx;
    c->item_ctx = NULL;
    int gone = hconn_item_back(c); /* c may be freed: not touched then */
    if (gone || status) {
        if (!gone)
            hconn_close(c); /* cancelled: only at shutdown */
        git_check_free(g);
        return;
    }
    if (strcmp(g->got, c->req.git_sha1) != 0) {
        log_warn("http front: %s: the file's git SHA-1 is %s, the Hub's ETag says %s: refused",
                 c->req.target, g->got[0] ? g->got : "(unreadable)", c->req.git_sha1);
        forget(c, g->url);
        hreq_answer_text(c, 502, "hash_mismatch",
                         "the file does not match the Hub's ETag (git blob SHA-1)", 0);
    } else {
        job_result_t res = {.sha256 = g->sha256, .size = g->size, .fd = g->fd, .kind = g->kind};
        hreq_answer_file(c, &res);
    }
    git_check_free(g);
}

void hf_check_git_sha1(hconn_t *c, const job_result_t *res)
{
    git_check_t *g = calloc(1, sizeof *g);
    if (!g) {
        hreq_answer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    g->fd = job_fd_ref(res->fd);
    g->url = c->req.pinned ? strdup(c->req.pinned) : NULL;
    g->size = res->size;
    g->kind = res->kind;
    snprintf(g->sha256, sizeof g->sha256, "%s", res->sha256);
    c->item_ctx = g;
    c->work.data = c;
    c->item_out = 1;
    if (uv_queue_work(c->srv->d.loop, &c->work, git_sha1_work, git_sha1_after)) {
        c->item_out = 0;
        c->item_ctx = NULL;
        git_check_free(g);
        hreq_answer_text(c, 500, "internal", "cannot queue the check", 0);
    }
}
