/* httpd_hf: the Hugging Face Hub endpoint of the HTTP front, so
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
 * The question to the Hub, and what is remembered of its answers, are
 * hf_meta.h's (shared with the socket's FETCH of a Hub URL): the Hub's
 * answer about a file is remembered for a minute for the client's uid and
 * credential tag, so the GET that follows a HEAD with the same credentials
 * is not asked again, and another user or token is always asked; a HEAD's
 * commit is remembered longer, for the same uid and tag, so that the GET
 * after it gets the file the HEAD described even if the branch moved. The
 * front refuses dot segments before any route reads the target
 * (httpd_request.c), and the commit is remembered only when the URL asked
 * names the repo and revision of its key: no request can make "main"
 * stand for another commit, not even for its own user.
 *
 * A small (non-LFS) file's ETag is its git blob SHA-1 (sha1("blob <size>\0"
 * + bytes)): the stored file is checked against it (git_check.h) before
 * any byte goes out (such files are small: they are not streamed), and on
 * a mismatch its entry is forgotten.
 *
 * A route of the front's table (hroute_hf): a request's state is its
 * hf_req_t (the question to the Hub, then the download, httpd_fetch.c). The
 * API routes (/hf/api/...) are httpd_hf_api.c's, a row of their own. */
#include "git_check.h"
#include "hf_meta.h"
#include "httpd_internal.h"
#include "log.h"
#include "outage.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- a request's state ---------------------------------------------------- */

typedef struct hf_req {
    hconn_t *c;
    hf_where_t where;    /* the file, as the client named it */
    char key[512];       /* "prefix repo@rev" as the client named it (hf_meta_rev_*) */
    char file_key[1024]; /* key + "/path" (hf_meta_known), "" when too long */
    char tag[65];        /* the client's credential tag */
    int asked_as_named;  /* the URL asked names where's repo and revision (a HEAD's commit
                            may be remembered under key) */
    hf_ask_t *ask;       /* the question to the Hub in flight, or NULL */
    /* once the file is known: its download */
    char git_sha1[41]; /* a small file's git blob SHA-1 (the Hub's ETag) to check, or "" */
    char *pinned;      /* the URL fetched (pinned to the commit), or NULL */
    hfetch_t fetch;
} hf_req_t;

static void hf_req_free(hf_req_t *q)
{
    hf_where_free(&q->where);
    free(q->pinned);
    free(q);
}

/* hroute_t.abandon: the question to the Hub in flight is aborted, the
 * download left. */
static void hf_abandon(hconn_t *c)
{
    hf_req_t *q = c->rstate;
    c->rstate = NULL;
    if (q->ask)
        hf_meta_abort(q->ask);
    hfetch_abandon(&q->fetch);
    hf_req_free(q);
}

/* ---- the answer ------------------------------------------------------------ */

/* The Hub's answer is not the file's metadata: its status and error
 * headers pass, with a one-line text. */
static void pass_error(hconn_t *c, const hf_meta_answer_t *a)
{
    hanswer_add_line(c, "X-Error-Code", a->error_code);
    hanswer_add_line(c, "X-Error-Message", a->error_message);
    hanswer_add_line(c, "X-Repo-Commit", a->commit);
    int status = a->status >= 400 && a->status <= 599 ? a->status : 502;
    char code[16], msg[300];
    snprintf(code, sizeof code, "http_%d", a->status);
    snprintf(msg, sizeof msg, "%s", a->error_message ? a->error_message : "the Hub refused");
    hanswer_text(c, status, code, msg, 0);
}

static void check_git_sha1(hconn_t *c, const job_result_t *res, void *arg);

/* Answers a HEAD from the file's metadata, or downloads the file pinned to
 * its commit. */
static void serve(hconn_t *c, hf_req_t *q, const hf_file_t *f)
{
    hreq_t *r = c->req;
    hanswer_add_line(c, "X-Repo-Commit", f->commit);
    if (f->etag[0]) {
        hanswer_add_line(c, "ETag", f->etag);
        r->own_etag = 1;
    }
    q->git_sha1[0] = '\0';
    if (!f->lfs) /* a small file's ETag is its git blob SHA-1: stays "" when not one */
        git_check_etag(f->etag, q->git_sha1);
    if (f->lfs) {
        hanswer_add_line(c, "X-Linked-Etag", f->linked);
        hanswer_add_line(c, "X-Linked-Size", f->linked_size);
    }
    if (r->method == HTTP_HEAD) {
        if (q->asked_as_named)
            hf_meta_rev_remember(c->srv->d.hf, c->who.uid, q->tag, q->key, f->commit);
        hanswer_head(c, (uint64_t)f->size);
        return;
    }
    char *url = NULL;
    const char *up = c->srv->d.cfg->hf_upstream;
    if (asprintf(&url, "%s/%s%s/resolve/%s/%s", up, q->where.prefix, q->where.repo, f->commit,
                 q->where.path) < 0) {
        hanswer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    free(q->pinned);
    q->pinned = url; /* the entry's URL, for the git SHA-1 check */
    /* f is the Hub's answer to this client's own credentials (asked now,
     * or remembered by their tag), and not a refusal: the Hub named the
     * LFS file's SHA-256 to them, and its CDN holds those bytes for the
     * repo (stored), so its blob is theirs whoever's token fetched it, and
     * so is a running download of it (job.h). Unstored, the digest is
     * only what the download is verified against. */
    q->fetch.vouched = f->lfs && f->stored;
    hfetch_start(&q->fetch, c, url, f->sha256[0] ? f->sha256 : NULL,
                 q->git_sha1[0] ? check_git_sha1 : NULL, q);
}

/* ---- the Hub cannot be reached ------------------------------------------- */

/* Did the Hub give no answer about the file (it cannot be reached, timed
 * out, or failed), rather than one (a 401, 403, 404)? */
static int is_outage(const hf_meta_answer_t *a)
{
    return a->kind == HF_META_REFUSED ? outage_status(a->status)
                                      : a->kind == HF_META_FAILED && outage_code(a->code);
}

/* The file as the cache holds it, as huggingface_hub answers from its own
 * cache when the Hub fails: the commit the Hub last named for the revision
 * (hf_revs), and that commit's file as the client's credentials fetched it,
 * else as fetched without credentials (public bytes). Its metadata is the
 * entry's: a small file's ETag is its git blob SHA-1, anything else is an
 * LFS file named by its SHA-256. Never vouched (stored 0): nobody vouches
 * for another token now. 0 and *f, else -ENOENT. */
static int cached_file(hconn_t *c, hf_req_t *q, hf_file_t *f)
{
    char repo[512], commit[41], *text = NULL, sha[65];
    snprintf(repo, sizeof repo, "%s%s", q->where.prefix, q->where.repo);
    if (hf_revs_find(c->srv->revs, repo, q->where.rev, q->tag, commit))
        return -ENOENT;
    if (asprintf(&text, "%s/%s/resolve/%s/%s", c->srv->d.cfg->hf_upstream, repo, commit,
                 q->where.path) < 0)
        return -ENOMEM;
    url_t u;
    int rc = url_parse(text, &u, NULL);
    free(text);
    if (rc)
        return -ENOENT;
    uint64_t size = 0;
    db_entry_meta_t meta;
    rc = db_find_entry_meta(c->srv->d.db, u.canonical, q->tag, sha, &size, &meta);
    if (rc && q->tag[0])
        rc = db_find_entry_meta(c->srv->d.db, u.canonical, "", sha, &size, &meta);
    url_free(&u);
    if (rc)
        return -ENOENT;
    char sha1[41];
    *f = (hf_file_t){.size = (int64_t)size};
    memcpy(f->commit, commit, sizeof f->commit);
    memcpy(f->sha256, sha, sizeof f->sha256);
    f->lfs = !git_check_etag(meta.etag, sha1);
    if (f->lfs) {
        snprintf(f->etag, sizeof f->etag, "\"%s\"", sha);
        memcpy(f->linked, f->etag, sizeof f->linked);
        snprintf(f->linked_size, sizeof f->linked_size, "%llu", (unsigned long long)size);
    } else {
        snprintf(f->etag, sizeof f->etag, "%.135s", meta.etag); /* a git ETag: short */
    }
    return 0;
}

/* Serves q's file from the cache when the Hub gave no answer and the
 * cache holds it: 1, else 0 (the Hub's failure is the answer). A header
 * says why, and the log says it once a minute. */
static int serve_cached(hconn_t *c, hf_req_t *q, const hf_meta_answer_t *a)
{
    hf_file_t f;
    if (!is_outage(a) || cached_file(c, q, &f))
        return 0;
    char why[200];
    if (a->kind == HF_META_REFUSED)
        snprintf(why, sizeof why, "the Hub cannot be reached (http_%d): answered from hubd's cache",
                 a->status);
    else
        snprintf(why, sizeof why, "the Hub cannot be reached (%s): answered from hubd's cache",
                 a->code);
    hanswer_add_line(c, "X-Hubd-Offline", why);
    uint64_t now = uv_now(c->srv->d.loop);
    if (!c->srv->offline_said || now - c->srv->offline_said >= 60000) {
        c->srv->offline_said = now ? now : 1;
        log_warn("http front: %s (%s)", why, a->kind == HF_META_REFUSED ? "" : a->msg);
    }
    serve(c, q, &f);
    return 1;
}

static void note_rev(hconn_t *c, hf_req_t *q, const char *commit)
{
    char repo[512];
    snprintf(repo, sizeof repo, "%s%s", q->where.prefix, q->where.repo);
    hf_revs_note(c->srv->revs, repo, q->where.rev, q->tag, c->who.uid, commit);
}

/* hf_meta's answer: served, or the Hub's refusal passed, or (the Hub
 * failed) served from the cache, or why not. */
static void on_answer(void *arg, const hf_meta_answer_t *a)
{
    hf_req_t *q = arg;
    hconn_t *c = q->c;
    q->ask = NULL;
    if (a->kind == HF_META_FILE) {
        hf_file_t f = *a->file;
        if (q->asked_as_named) /* the commit to serve from if the Hub fails later */
            note_rev(c, q, f.commit);
        serve(c, q, &f);
    } else if (serve_cached(c, q, a)) {
        return;
    } else if (a->kind == HF_META_REFUSED)
        pass_error(c, a);
    else
        hanswer_text(c, httpd_status_of(a->code), a->code, a->msg, 0);
}

/* Whether url, read as the HTTP client will read it (its canonical form),
 * names w's repo and revision: only then may the commit the Hub answers
 * be remembered as that revision's. */
static int names_where(const char *upstream, const char *url, const hf_where_t *w)
{
    hf_where_t asked;
    if (!hf_where_of_url(upstream, url, &asked))
        return 0;
    int same = strcmp(asked.prefix, w->prefix) == 0 && strcmp(asked.repo, w->repo) == 0 &&
               strcmp(asked.rev, w->rev) == 0;
    hf_where_free(&asked);
    return same;
}

static int hf_match(const char *target)
{
    return strcmp(target, "/hf") == 0 || strncmp(target, "/hf/", 4) == 0;
}

/* hroute_t.handle: what the Hub says of the file (remembered, or asked),
 * then the answer. */
static void hf_handle(hconn_t *c, void *mem)
{
    (void)mem;
    const char *target = c->req->target;
    hf_meta_t *meta = c->srv->d.hf;
    hf_req_t *q = calloc(1, sizeof *q);
    if (!q || strncmp(target, "/hf/", 4) != 0 || hf_where_parse(target + 4, &q->where)) {
        free(q);
        hanswer_text(c, 404, "bad_url",
                     "the front serves /hf/[datasets/|spaces/]{repo}/resolve/{rev}/{path}", 0);
        return;
    }
    q->c = c;
    /* A GET after a HEAD of the same revision asks for the commit the HEAD
     * announced. */
    hf_where_keys(&q->where, q->key, q->file_key);
    if (jobs_cred_tag(c->srv->d.jobs, (const char *const *)c->req->cred, c->req->ncred, q->tag)) {
        hf_req_free(q);
        hanswer_text(c, 400, "bad_request", "a credential header is not valid", 0);
        return;
    }
    /* The Hub answered this client's credentials for this file a moment
     * ago (the HEAD before a GET): no second question. */
    const hf_file_t *known = hf_meta_known(meta, c->who.uid, q->tag, q->file_key);
    if (known) {
        hf_file_t f = *known;
        c->rstate = q;
        serve(c, q, &f);
        return;
    }
    const char *pinned =
        c->req->method == HTTP_GET ? hf_meta_rev_lookup(meta, c->who.uid, q->tag, q->key) : NULL;
    char *text = NULL;
    int n = asprintf(&text, "%s/%s%s/resolve/%s/%s", c->srv->d.cfg->hf_upstream, q->where.prefix,
                     q->where.repo, pinned ? pinned : q->where.rev, q->where.path);
    q->asked_as_named =
        n >= 0 && !pinned && names_where(c->srv->d.cfg->hf_upstream, text, &q->where);
    const char *why = NULL;
    int rc = n < 0 ? -ENOMEM
                   : hf_meta_ask(meta, jobs_http(c->srv->d.jobs), text, c->who.uid, q->tag,
                                 q->file_key, (const char *const *)c->req->cred, c->req->ncred,
                                 on_answer, q, &q->ask, &why);
    free(text);
    if (rc) {
        hf_req_free(q);
        if (rc == -EINVAL)
            hanswer_text(c, 400, "bad_url", why ? why : "bad URL", 0);
        else
            hanswer_text(c, rc == -EACCES ? 403 : 500, rc == -EACCES ? "forbidden" : "internal",
                         rc == -EACCES ? "the network policy does not allow the Hub's host"
                                       : "cannot ask the Hub",
                         0);
        return;
    }
    c->rstate = q;
}

const hroute_t hroute_hf = {
    .match = hf_match,
    .handle = hf_handle,
    .abandon = hf_abandon,
};

/* ---- the git blob SHA-1 of a small file ---------------------------------- */

/* git_check's answer: the file, or 502 hash_mismatch (the entry forgotten,
 * so that the next request downloads it again). c was kept from being
 * freed (item_out) until now. */
static void on_checked(void *arg, const git_check_result_t *r)
{
    hconn_t *c = arg;
    if (hconn_item_back(c)) /* c may be freed: not touched then */
        return;
    if (r->status) { /* the item did not run: only at shutdown */
        hconn_close(c);
        return;
    }
    if (!r->match) {
        log_warn("http front: %s: the file's git SHA-1 is %s, the Hub's ETag says %s: refused, "
                 "%s",
                 c->req->target, r->got[0] ? r->got : "(unreadable)", r->want,
                 r->forgotten ? "its entry forgotten" : "no entry to forget");
        hanswer_text(c, 502, "hash_mismatch",
                     "the file does not match the Hub's ETag (git blob SHA-1)", 0);
        return;
    }
    hanswer_file(c, r->file);
}

/* The download's on_file when the Hub's ETag is a git blob SHA-1: the
 * stored file res is checked in a pool item (git_check.h), then answered
 * (hanswer_file), or refused (502 hash_mismatch). */
static void check_git_sha1(hconn_t *c, const job_result_t *res, void *arg)
{
    hf_req_t *q = arg;
    httpd_t *h = c->srv;
    git_check_env_t env = {h->d.loop, jobs_work(h->d.jobs), h->d.store, h->d.db};
    git_check_t *g;
    c->item_out = 1;
    int rc = git_check_start(&env, res, q->pinned, q->tag, q->git_sha1, on_checked, c, &g);
    if (rc == 0)
        return;
    c->item_out = 0;
    if (rc == -EFBIG) {
        log_warn("http front: %s: %llu bytes, too large for its git SHA-1 to be checked: served "
                 "as its SHA-256 says",
                 c->req->target, (unsigned long long)res->size);
        hanswer_file(c, res);
        return;
    }
    hanswer_text(c, 500, "internal", "cannot queue the check", 0);
}
