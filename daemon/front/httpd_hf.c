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
 * from reaching a client whose token the Hub refuses. An LFS file's
 * download is vouched (job.h): the SHA-256 is what the Hub answered to this
 * client's credentials, so the blob another token fetched is a hit, and a
 * download of it that another token runs is joined: a gated file comes
 * down once per machine. A refusal (4xx) names nothing, whatever headers
 * it carries: its status and error pass, never a byte.
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
 * A route of the front's table (hroute_hf): a request's state is its
 * hf_req_t (the question to the Hub, then the download, httpd_fetch.c),
 * what it remembers across requests the route's memory (hf_mem_t). The
 * API routes (/hf/api/...) are httpd_hf_api.c's, a row of their own. */
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

/* ---- what the route remembers across requests --------------------------- */

/* A revision a HEAD resolved to a commit, for the GET that follows it: a
 * branch may move between the two, and the client must get the file the
 * HEAD described. */
#define HF_REVS 64
#define HF_REV_TTL_MS 300000
typedef struct hf_rev {
    char key[512]; /* "datasets/org/name@rev" */
    char commit[41];
    uint64_t until; /* uv_now() when it is forgotten */
} hf_rev_t;

/* What the Hub said of one file to one credential tag: the GET that
 * follows a HEAD (huggingface_hub's way) needs no second question, and a
 * token the Hub accepted stays accepted this long, no longer. */
#define HF_KNOWN 64
#define HF_KNOWN_TTL_MS 60000
typedef struct hf_file {
    char commit[41];
    int64_t size;
    int lfs;          /* the Hub redirected to its CDN: sha256 is the file's */
    char sha256[65];  /* an LFS file's (X-Linked-Etag), else "" */
    char etag[136];   /* the Hub's ETag as sent, or "" */
    char linked[136]; /* X-Linked-Etag as sent (LFS), or "" */
    char linked_size[24];
} hf_file_t;
typedef struct hf_known {
    char tag[65];   /* the credential tag ("" without credentials) */
    char key[1024]; /* "datasets/org/name@rev/path" as the client named it */
    hf_file_t file;
    uint64_t until; /* uv_now() when it is forgotten */
} hf_known_t;

/* The route's memory (hroute_t.mem_size): flat, one per server. */
typedef struct hf_mem {
    hf_rev_t revs[HF_REVS];     /* the oldest goes first */
    hf_known_t known[HF_KNOWN]; /* the same */
} hf_mem_t;

/* ---- a request's state ---------------------------------------------------- */

typedef struct hf_req {
    hconn_t *c;
    hf_mem_t *mem;       /* the route's memory */
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
    /* once the file is known: its download */
    char git_sha1[41]; /* a small file's git blob SHA-1 (the Hub's ETag) to check, or "" */
    char *pinned;      /* the URL fetched (pinned to the commit), or NULL */
    hfetch_t fetch;
} hf_req_t;

static void meta_forget(hf_req_t *q)
{
    free(q->location);
    free(q->etag);
    free(q->content_range);
    q->location = q->etag = q->content_range = NULL;
    for (int i = 0; i < HUB_N; i++) {
        free(q->hub[i]);
        q->hub[i] = NULL;
    }
}

static void hf_req_free(hf_req_t *q)
{
    meta_forget(q);
    url_free(&q->url);
    free(q->prefix);
    free(q->repo);
    free(q->path);
    free(q->pinned);
    free(q);
}

/* hroute_t.abandon: the question to the Hub in flight is aborted, the
 * download left. */
static void hf_abandon(hconn_t *c)
{
    hf_req_t *q = c->rstate;
    c->rstate = NULL;
    if (q->req)
        http_req_abort(q->req);
    hfetch_abandon(&q->fetch);
    hf_req_free(q);
}

/* ---- the question to the Hub ------------------------------------------------ */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int on_meta_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    hf_req_t *q = data;
    (void)req;
    meta_forget(q);
    q->status = resp->status;
    q->content_length = resp->content_length;
    q->location = dup_or_null(resp->location);
    q->etag = dup_or_null(resp->etag);
    q->content_range = dup_or_null(resp->content_range);
    for (int i = 0; i < HUB_N; i++)
        q->hub[i] = dup_or_null(resp->wanted[i]);
    return HTTP_BODY_DISCARD; /* one byte, or a redirect's or an error's text */
}

static void on_meta_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    (void)req, (void)buf, (void)p, (void)n, (void)data;
}

static void ask(hf_req_t *q);

/* The Hub's answer is not the file's metadata: its status and error
 * headers pass, with a one-line text. */
static void pass_error(hconn_t *c, hf_req_t *q)
{
    hanswer_add_line(c, hub_wanted[HUB_ERROR_CODE].name, q->hub[HUB_ERROR_CODE]);
    hanswer_add_line(c, hub_wanted[HUB_ERROR_MESSAGE].name, q->hub[HUB_ERROR_MESSAGE]);
    hanswer_add_line(c, hub_wanted[HUB_COMMIT].name, q->hub[HUB_COMMIT]);
    int status = q->status >= 400 && q->status <= 599 ? q->status : 502;
    char code[16], msg[300];
    snprintf(code, sizeof code, "http_%d", q->status);
    snprintf(msg, sizeof msg, "%s",
             q->hub[HUB_ERROR_MESSAGE] ? q->hub[HUB_ERROR_MESSAGE] : "the Hub refused");
    hanswer_text(c, status, code, msg, 0);
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
static const char *rev_lookup(hf_req_t *q, const char *key)
{
    hf_mem_t *mem = q->mem;
    uint64_t now = uv_now(q->c->srv->d.loop);
    for (int i = 0; i < HF_REVS; i++)
        if (mem->revs[i].until > now && strcmp(mem->revs[i].key, key) == 0)
            return mem->revs[i].commit;
    return NULL;
}

static void rev_remember(hf_req_t *q, const char *key, const char *commit)
{
    hf_mem_t *mem = q->mem;
    if (strlen(commit) != 40 || strlen(key) >= sizeof mem->revs[0].key)
        return;
    hf_rev_t *slot = &mem->revs[0];
    for (int i = 0; i < HF_REVS; i++) { /* the same key, else the oldest */
        if (strcmp(mem->revs[i].key, key) == 0) {
            slot = &mem->revs[i];
            break;
        }
        if (mem->revs[i].until < slot->until)
            slot = &mem->revs[i];
    }
    snprintf(slot->key, sizeof slot->key, "%s", key);
    memcpy(slot->commit, commit, 41);
    slot->until = uv_now(q->c->srv->d.loop) + HF_REV_TTL_MS;
}

/* What the Hub said of (tag, key), or NULL (forgotten, or never). */
static const hf_file_t *known_lookup(hf_req_t *q, const char *tag, const char *key)
{
    hf_mem_t *mem = q->mem;
    uint64_t now = uv_now(q->c->srv->d.loop);
    for (int i = 0; i < HF_KNOWN; i++)
        if (mem->known[i].until > now && strcmp(mem->known[i].tag, tag) == 0 &&
            strcmp(mem->known[i].key, key) == 0)
            return &mem->known[i].file;
    return NULL;
}

static void known_remember(hf_req_t *q, const char *tag, const char *key, const hf_file_t *f)
{
    hf_mem_t *mem = q->mem;
    if (strlen(key) >= sizeof mem->known[0].key)
        return;
    hf_known_t *slot = &mem->known[0];
    for (int i = 0; i < HF_KNOWN; i++) { /* the same, else the oldest */
        if (strcmp(mem->known[i].tag, tag) == 0 && strcmp(mem->known[i].key, key) == 0) {
            slot = &mem->known[i];
            break;
        }
        if (mem->known[i].until < slot->until)
            slot = &mem->known[i];
    }
    snprintf(slot->tag, sizeof slot->tag, "%s", tag);
    snprintf(slot->key, sizeof slot->key, "%s", key);
    slot->file = *f;
    slot->until = uv_now(q->c->srv->d.loop) + HF_KNOWN_TTL_MS;
}

/* The file's metadata out of the Hub's answer q: 0, or -1 when it lacks
 * what a client needs (or a value is too long to keep). */
static int file_of(const hf_req_t *q, hf_file_t *f)
{
    memset(f, 0, sizeof *f);
    const char *commit = q->hub[HUB_COMMIT];
    f->lfs = q->status >= 300 && q->status < 400;
    const char *lsize = q->hub[HUB_LINKED_SIZE];
    f->size = f->lfs ? (lsize ? atoll(lsize) : -1)
                     : (q->status == 206 ? range_total(q->content_range) : q->content_length);
    if (!commit || strlen(commit) >= sizeof f->commit || f->size < 0 ||
        (f->lfs && sha256_of_etag(q->hub[HUB_LINKED_ETAG], f->sha256)))
        return -1;
    snprintf(f->commit, sizeof f->commit, "%s", commit);
    if (snprintf(f->etag, sizeof f->etag, "%s", q->etag ? q->etag : "") >= (int)sizeof f->etag)
        return -1;
    if (f->lfs) {
        snprintf(f->linked, sizeof f->linked, "%s", q->hub[HUB_LINKED_ETAG]);
        if (snprintf(f->linked_size, sizeof f->linked_size, "%s", lsize) >=
            (int)sizeof f->linked_size)
            return -1;
    }
    return 0;
}

static void check_git_sha1(hconn_t *c, const job_result_t *res, void *arg);

/* Answers a HEAD from the file's metadata, or downloads the file pinned to
 * its commit. */
static void serve(hconn_t *c, hf_req_t *q, const hf_file_t *f)
{
    hreq_t *r = &c->req;
    hanswer_add_line(c, hub_wanted[HUB_COMMIT].name, f->commit);
    if (f->etag[0]) {
        hanswer_add_line(c, "ETag", f->etag);
        r->own_etag = 1;
    }
    if (!f->lfs && f->etag[0]) { /* a git blob SHA-1: 40 hex digits, quoted */
        const char *e = strncmp(f->etag, "W/", 2) == 0 ? f->etag + 2 : f->etag;
        size_t n = strlen(e);
        if (n == 42 && e[0] == '"' && e[41] == '"' && strspn(e + 1, "0123456789abcdef") == 40)
            snprintf(q->git_sha1, sizeof q->git_sha1, "%.40s", e + 1);
    }
    if (f->lfs) {
        hanswer_add_line(c, hub_wanted[HUB_LINKED_ETAG].name, f->linked);
        hanswer_add_line(c, hub_wanted[HUB_LINKED_SIZE].name, f->linked_size);
    }
    if (r->method == HTTP_HEAD) {
        rev_remember(q, q->key, f->commit);
        hanswer_head(c, (uint64_t)f->size);
        return;
    }
    char *url = NULL;
    const char *up = c->srv->d.cfg->hf_upstream;
    if (asprintf(&url, "%s/%s%s/resolve/%s/%s", up, q->prefix, q->repo, f->commit, q->path) < 0) {
        hanswer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    free(q->pinned);
    q->pinned = url; /* the entry's URL, for the git SHA-1 check */
    /* f is the Hub's answer to this client's own credentials (asked now,
     * or remembered by their tag), and not a refusal: the Hub named the
     * LFS file's SHA-256 to them, so its blob is theirs whoever's token
     * fetched it, and so is a running download of it (job.h). */
    q->fetch.vouched = f->lfs;
    hfetch_start(&q->fetch, c, url, f->lfs ? f->sha256 : NULL,
                 q->git_sha1[0] ? check_git_sha1 : NULL, q);
}

/* The metadata is in: remembered for this credential tag, then served. */
static void metadata_done(hconn_t *c, hf_req_t *q)
{
    hf_file_t f;
    if (file_of(q, &f)) {
        hanswer_text(c, 502, "http_parse",
                     "the Hub's answer has no X-Repo-Commit, size or (for an LFS file) "
                     "X-Linked-Etag",
                     0);
        return;
    }
    if (q->file_key[0])
        known_remember(q, q->tag, q->file_key, &f);
    serve(c, q, &f);
}

static void on_meta_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    hf_req_t *q = data;
    hconn_t *c = q->c;
    (void)req;
    q->req = NULL;
    if (code) {
        hanswer_text(c, httpd_status_of(code), code, msg, 0);
        return;
    }
    if (q->status >= 300 && q->status < 400 && q->location) {
        url_t next;
        char *abs = NULL;
        int same = url_resolve(&q->url, q->location, &abs) == 0 && url_parse(abs, &next, NULL) == 0;
        free(abs);
        if (same && url_same_origin(&q->url, &next)) { /* a renamed repo: follow it here */
            if (++q->hops > HF_MAX_HOPS) {
                url_free(&next);
                hanswer_text(c, 502, "redirect", "the Hub redirected too many times", 0);
                return;
            }
            url_free(&q->url);
            q->url = next;
            ask(q);
            return;
        }
        if (same)
            url_free(&next);
        metadata_done(c, q); /* to a CDN: an LFS file */
        return;
    }
    if (q->status == 200 || q->status == 206) {
        metadata_done(c, q);
        return;
    }
    pass_error(c, q);
}

static const http_req_cbs_t meta_cbs = {on_meta_headers, on_meta_body, on_meta_done};

/* The request to the Hub for the current hop, with the client's
 * credentials (only to the Hub's own origin: http.c's callers decide;
 * here every hop is the Hub's). */
static void ask(hf_req_t *q)
{
    hconn_t *c = q->c;
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
    int rc = hdrs ? http_request_opts(jobs_http(c->srv->d.jobs), &q->url, &o, &meta_cbs, q, &q->req)
                  : -1;
    free(hdrs);
    if (rc) {
        q->req = NULL;
        hanswer_text(c, rc == -EACCES ? 403 : 500, rc == -EACCES ? "forbidden" : "internal",
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

static int hf_match(const char *target)
{
    return strcmp(target, "/hf") == 0 || strncmp(target, "/hf/", 4) == 0;
}

/* hroute_t.handle: what the Hub says of the file (remembered, or asked),
 * then the answer. */
static void hf_handle(hconn_t *c, void *mem)
{
    const char *target = c->req.target;
    hf_req_t *q = calloc(1, sizeof *q);
    char *rev = NULL;
    if (!q || parse_resolve(target, &q->prefix, &q->repo, &rev, &q->path)) {
        if (q)
            hf_req_free(q);
        free(rev);
        hanswer_text(c, 404, "bad_url",
                     "the front serves /hf/[datasets/|spaces/]{repo}/resolve/{rev}/{path}", 0);
        return;
    }
    q->c = c;
    q->mem = mem;
    /* A GET after a HEAD of the same revision asks for the commit the HEAD
     * announced. */
    snprintf(q->key, sizeof q->key, "%s%s@%s", q->prefix, q->repo, rev);
    if (snprintf(q->file_key, sizeof q->file_key, "%s/%s", q->key, q->path) >=
        (int)sizeof q->file_key)
        q->file_key[0] = '\0';
    if (jobs_cred_tag(c->srv->d.jobs, (const char *const *)c->req.cred, c->req.ncred, q->tag)) {
        hf_req_free(q);
        free(rev);
        hanswer_text(c, 400, "bad_request", "a credential header is not valid", 0);
        return;
    }
    /* The Hub answered this client's credentials for this file a moment
     * ago (the HEAD before a GET): no second question. */
    const hf_file_t *known = q->file_key[0] ? known_lookup(q, q->tag, q->file_key) : NULL;
    if (known) {
        hf_file_t f = *known;
        free(rev);
        c->rstate = q;
        serve(c, q, &f);
        return;
    }
    const char *pinned = c->req.method == HTTP_GET ? rev_lookup(q, q->key) : NULL;
    char *text = NULL;
    int n = asprintf(&text, "%s/%s%s/resolve/%s/%s", c->srv->d.cfg->hf_upstream, q->prefix, q->repo,
                     pinned ? pinned : rev, q->path);
    free(rev);
    const char *why = NULL;
    if (n < 0 || url_parse(text, &q->url, &why)) {
        free(text);
        hf_req_free(q);
        hanswer_text(c, 400, "bad_url", why ? why : "out of memory", 0);
        return;
    }
    free(text);
    c->rstate = q;
    ask(q);
}

const hroute_t hroute_hf = {
    .match = hf_match,
    .handle = hf_handle,
    .abandon = hf_abandon,
    .mem_size = sizeof(hf_mem_t),
};

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

/* A check in the pool: owns what it reads, and keeps its connection from
 * being freed (item_out) until it is back. */
typedef struct git_check {
    uv_work_t work;
    hconn_t *c;
    job_fd_t *fd; /* the stored file */
    char *url;    /* its entry's URL (pinned to the commit) */
    uint64_t size;
    char sha256[65];
    char want[41]; /* the Hub's ETag: the SHA-1 the file must have */
    char got[41];  /* what the file's SHA-1 is ("" on a read error) */
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
    git_check_t *g = w->data;
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
    git_check_t *g = w->data;
    hconn_t *c = g->c;
    int gone = hconn_item_back(c); /* c may be freed: not touched then */
    if (gone || status) {
        if (!gone)
            hconn_close(c); /* cancelled: only at shutdown */
        git_check_free(g);
        return;
    }
    if (strcmp(g->got, g->want) != 0) {
        log_warn("http front: %s: the file's git SHA-1 is %s, the Hub's ETag says %s: refused",
                 c->req.target, g->got[0] ? g->got : "(unreadable)", g->want);
        forget(c, g->url);
        hanswer_text(c, 502, "hash_mismatch",
                     "the file does not match the Hub's ETag (git blob SHA-1)", 0);
    } else {
        job_result_t res = {.sha256 = g->sha256, .size = g->size, .fd = g->fd, .kind = g->kind};
        hanswer_file(c, &res);
    }
    git_check_free(g);
}

/* The download's on_file when the Hub's ETag is a git blob SHA-1: the
 * stored file res is checked in a pool item, then answered
 * (hanswer_file), or refused (502 hash_mismatch). */
static void check_git_sha1(hconn_t *c, const job_result_t *res, void *arg)
{
    hf_req_t *q = arg;
    git_check_t *g = calloc(1, sizeof *g);
    if (!g) {
        hanswer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    g->c = c;
    g->fd = job_fd_ref(res->fd);
    g->url = q->pinned ? strdup(q->pinned) : NULL;
    g->size = res->size;
    g->kind = res->kind;
    snprintf(g->sha256, sizeof g->sha256, "%s", res->sha256);
    memcpy(g->want, q->git_sha1, sizeof g->want);
    g->work.data = g;
    c->item_out = 1;
    if (uv_queue_work(c->srv->d.loop, &g->work, git_sha1_work, git_sha1_after)) {
        c->item_out = 0;
        git_check_free(g);
        hanswer_text(c, 500, "internal", "cannot queue the check", 0);
    }
}
