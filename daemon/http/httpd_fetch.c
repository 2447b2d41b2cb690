/* httpd_fetch: the generic route, `GET|HEAD /<absolute http(s) URL>`, and
 * the download behind an answer (see httpd_internal.h), which the Hub's
 * resolve route (httpd_hf.c) starts too once it knows the file: the URL
 * through jobs_fetch with the request's credential headers, one waiting
 * request of the uid's (max_requests_per_user), and a waiter that answers
 * with the hit or finished file, or follows a download as it lands
 * (on_written and jobs_partial_path; the last HTTPD_HOLD_BACK bytes held
 * back until the commit). A HEAD is answered as soon as the length is
 * announced. */
#include "httpd_internal.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the waiter ------------------------------------------------------------ */

static hfetch_t *fetch_of(job_waiter_t *w)
{
    return container_of(w, hfetch_t, w);
}

static void on_start(job_waiter_t *w, fetch_kind_t kind, uint64_t job_id)
{
    (void)w;
    (void)kind;
    (void)job_id;
}

/* What of a streamed download may go out: what is written, but not the
 * last HTTPD_HOLD_BACK bytes until the commit, so that no client ever has
 * the whole of a file whose SHA-256 then does not match: it is cut short
 * instead, and fails. */
static uint64_t stream_limit(const hfetch_t *f)
{
    uint64_t total = (uint64_t)f->total;
    uint64_t cap = total > HTTPD_HOLD_BACK ? total - HTTPD_HOLD_BACK : 0;
    return f->written < cap ? f->written : cap;
}

/* The head of a download's answer as soon as its length is known and its
 * first bytes are on disk: the body then follows the partial file (the
 * same inode the commit links as the blob). A Range, or a length not
 * announced (a chunked origin), waits for the whole file instead, and so
 * does a file the route checks first (on_file). */
static void maybe_stream(hfetch_t *f)
{
    hconn_t *c = f->c;
    if (f->streaming || f->total < 0 || f->written == 0 || c->req->range[0] ||
        c->req->method != HTTP_GET || f->on_file)
        return;
    char path[4096];
    if (jobs_partial_path(&f->w, path, sizeof path))
        return;
    /* An open, not a read: the file was just made by this daemon. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    job_fd_t *body = fd >= 0 ? job_fd_new(fd) : NULL;
    if (!body) {
        log_warn("http front: cannot follow %s (%s): the answer waits for the whole file", path,
                 strerror(errno));
        return;
    }
    /* Set first: the answer may end the request (f goes with it). */
    f->streaming = 1;
    if (hanswer_stream(c, body, (uint64_t)f->total,
                       f->w.kind == FETCH_ATTACHED ? "attached" : "download", stream_limit(f))) {
        f->streaming = 0;
        job_fd_unref(body);
    }
}

static void on_progress(job_waiter_t *w, const job_progress_t *p)
{
    hfetch_t *f = fetch_of(w);
    hconn_t *c = f->c;
    if (p->total < 0 || f->total >= 0)
        return;
    f->total = p->total;
    if (c->req->method == HTTP_HEAD) {
        /* A HEAD is answered from the announced length: the download goes
         * on for the cache, without this request. */
        hfetch_abandon(f);
        hanswer_head(c, (uint64_t)p->total);
        return;
    }
    maybe_stream(f);
}

/* The partial file grew (or went back to 0: the download restarted, and
 * what was sent may not be the file's any more). */
static void on_written(job_waiter_t *w, uint64_t written, uint64_t durable)
{
    hfetch_t *f = fetch_of(w);
    hconn_t *c = f->c;
    (void)durable;
    if (f->streaming && written < f->written) {
        /* The download restarted from byte 0 (the file changed upstream):
         * the head announced the old length and bytes of the old file may
         * be out, or going out in an item, so the answer is cut short. */
        log_info("http front uid %u: the download restarted after %llu bytes were sent: the "
                 "answer is cut short",
                 (unsigned)c->who.uid, (unsigned long long)c->body_off);
        hconn_close(c);
        return;
    }
    f->written = written;
    if (!f->streaming) {
        maybe_stream(f);
        return;
    }
    c->body_limit = stream_limit(f);
    hconn_more_body(c);
}

static void on_finish(job_waiter_t *w, const job_result_t *res)
{
    hfetch_t *f = fetch_of(w);
    hconn_t *c = f->c;
    f->waiting = 0;
    hfetch_abandon(f); /* the quota's count */
    if (f->streaming) {
        /* The head is out: a failure can only cut the body short, so the
         * client fails rather than keep a wrong or partial file. */
        if (res->err_code || res->size != (uint64_t)f->total) {
            log_info("http front uid %u: %s: the streamed answer is cut short",
                     (unsigned)c->who.uid, res->err_code ? res->err_code : "length changed");
            hconn_close(c);
            return;
        }
        c->body_limit = (uint64_t)f->total; /* verified: the tail may go */
        hconn_more_body(c);
        return;
    }
    if (res->err_code) {
        hanswer_text(c, httpd_status_of(res->err_code), res->err_code,
                     res->err_msg ? res->err_msg : res->err_code, 0);
        return;
    }
    if (f->on_file) {
        f->on_file(c, res, f->arg);
        return;
    }
    hanswer_file(c, res);
}

/* ---- the download ------------------------------------------------------------ */

void hfetch_abandon(hfetch_t *f)
{
    if (f->waiting) {
        f->waiting = 0;
        jobs_cancel(&f->w);
    }
    if (f->quota_counted) {
        f->quota_counted = 0;
        quota_request_end(f->c->srv->d.quota, &f->c->who);
    }
}

void hfetch_start(hfetch_t *f, hconn_t *c, const char *url, const char *sha256,
                  hfetch_file_cb on_file, void *arg)
{
    httpd_t *h = c->srv;
    hreq_t *r = c->req;
    f->c = c;
    f->on_file = on_file;
    f->arg = arg;
    if (hanswer_quota_begin(c))
        return;
    f->quota_counted = 1;
    memset(&f->w, 0, sizeof f->w);
    f->w.on_start = on_start;
    f->w.on_progress = on_progress;
    f->w.on_finish = on_finish;
    f->w.on_written = on_written;
    f->w.uid = c->who.charged; /* its user's max_jobs_per_user, a subordinate uid's too */
    f->w.vouched = f->vouched && sha256;
    f->total = -1;
    f->written = 0;
    f->streaming = 0;
    c->state = HC_FETCH;
    f->waiting = 1;
    const char *code, *msg;
    if (jobs_fetch(h->d.jobs, url, sha256, (const char *const *)r->cred, r->ncred, &f->w, &code,
                   &msg)) {
        f->waiting = 0;
        hfetch_abandon(f);
        hanswer_text(c, httpd_status_of(code), code, msg, 0);
        return;
    }
    log_debug("http front uid %u: %s %s", (unsigned)c->who.uid,
              r->method == HTTP_HEAD ? "HEAD" : "GET", url);
}

/* ---- the generic route: /<URL> ------------------------------------------------- */

int hreq_generic_url(const char *target, char *url, size_t cap)
{
    const char *t = target + 1;
    size_t sl = strncasecmp(t, "https:", 6) == 0 ? 6 : strncasecmp(t, "http:", 5) == 0 ? 5 : 0;
    if (!sl || t[sl] != '/')
        return -1;
    const char *rest = t + sl + (t[sl + 1] == '/' ? 2 : 1);
    if (!*rest || *rest == '/')
        return -1;
    int n = snprintf(url, cap, "%.*s//%s", (int)sl, t, rest);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int generic_match(const char *target)
{
    (void)target;
    return 1; /* the last row: whatever no other route took */
}

/* The request's state is its download (hfetch_t). */
static void generic_handle(hconn_t *c, void *mem)
{
    (void)mem;
    const char *target = c->req->target;
    char url[HTTPD_TARGET_MAX + 2];
    if (target[0] != '/' || hreq_generic_url(target, url, sizeof url)) {
        hanswer_text(c, 404, "bad_url",
                     "ask for /<absolute http or https URL>, e.g. "
                     "/https://example.org/model.bin",
                     0);
        return;
    }
    hfetch_t *f = calloc(1, sizeof *f);
    if (!f) {
        hanswer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    c->rstate = f;
    hfetch_start(f, c, url, NULL, NULL, NULL);
}

static void generic_abandon(hconn_t *c)
{
    hfetch_t *f = c->rstate;
    c->rstate = NULL;
    hfetch_abandon(f);
    free(f);
}

const hroute_t hroute_generic = {
    .match = generic_match,
    .handle = generic_handle,
    .abandon = generic_abandon,
};
