/* transfer: one HTTP exchange for an owner (see transfer.h): the request
 * (Range, If-Range, credentials for the first origin only), the response
 * callbacks that decide with disposition_of() what a head means and hand it
 * to the owner, redirects, and the mirror and its fall-back. Loop thread. */
#include "transfer.h"
#include "log.h"
#include "mirror.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *transfer_file_validator(const transfer_file_t *f)
{
    if (f->etag && strncmp(f->etag, "W/", 2) != 0)
        return f->etag;
    return f->last_modified;
}

/* A response head: what it means is decided by disposition_of(), from the
 * head and the request alone; the owner applies it. */
static int on_http_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    transfer_t *t = data;
    (void)req;
    disp_head_t head = {
        .status = resp->status,
        .content_length = resp->content_length,
        .location = resp->location,
        .etag = resp->etag,
        .content_range = resp->content_range,
        .retry_after = resp->retry_after,
        .from_proxy = resp->from_proxy,
    };
    disp_request_t asked = {
        .url = &t->url,
        .offset = t->offset,
        .end = t->end,
        .total = t->file->total,
        .etag = t->file->etag,
        .redirects = t->redirects,
        .max_redirects = t->cfg->max_redirects,
        .conditional = t->conditional,
    };
    disposition_t *d = &t->disp;
    disposition_clear(d);
    disposition_of(&head, &asked, d);
    if (d->kind == DISP_TAKE && resp->status != 206)
        t->end = 0; /* the whole file came, not the range asked for */
    return t->cbs->head(t, d, resp);
}

static void on_http_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    transfer_t *t = data;
    (void)req;
    t->cbs->body(t, buf, p, n);
}

/* The exchange is over: a failed attempt, a drained status or redirect, or
 * the whole body. A redirect's next hop becomes the transfer's URL; the
 * owner then asks again (transfer_start). */
static void on_http_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    transfer_t *t = data;
    t->refused_now = code && http_req_refused(req);
    t->req = NULL;
    if (code) {
        t->cbs->failure(t, code, msg);
        return;
    }
    char m[300];
    if (t->disp.kind == DISP_STATUS) {
        char status_code[16];
        snprintf(status_code, sizeof status_code, "http_%d", t->disp.status);
        snprintf(m, sizeof m, "%s answered HTTP %d", t->url.canonical, t->disp.status);
        t->cbs->failure(t, status_code, m);
        return;
    }
    if (t->disp.kind == DISP_REDIRECT) {
        url_t next;
        if (disposition_follow(&t->url, t->disp.location, &next, m, sizeof m)) {
            t->cbs->failure(t, "redirect", m);
            return;
        }
        log_debug("job %llu: redirect %u to %s", (unsigned long long)t->id, t->redirects + 1,
                  next.canonical);
        url_free(&t->url);
        t->url = next;
        disposition_clear(&t->disp);
        t->disp.kind = DISP_REDIRECT; /* the owner asks again, at the next hop */
        t->redirects++;
    }
    t->cbs->end(t);
}

static const http_req_cbs_t transfer_http_cbs = {on_http_headers, on_http_body, on_http_done};

/* The first hop of an attempt: the mirror's URL while it is in use, else
 * the file's own. Returns 0 or what url_parse does. */
static int first_hop(const transfer_t *t, url_t *out)
{
    return url_parse(t->mirror_url ? t->mirror_url : t->file->key, out, NULL);
}

/* A mirror rule for the job's URL: the transfer starts there. A rewritten
 * URL that does not parse (too long) leaves the job on its origin. */
static void pick_mirror(transfer_t *t)
{
    const hubd_config_t *cfg = t->cfg;
    const mirror_rule_t *r = mirror_match(cfg->mirrors, cfg->nmirrors, t->url.canonical);
    url_t m;
    char *text = NULL, host[300];
    if (!r || mirror_rewrite(r, t->url.canonical, &text) || url_parse(text, &m, NULL)) {
        if (r)
            log_warn("job %llu: the mirror's URL for %s is unusable: fetching from the origin",
                     (unsigned long long)t->id, t->url.canonical);
        free(text);
        return;
    }
    int n = url_hostport(&m, host, sizeof host);
    if (n < 0 || asprintf(&t->mirror_shown, "%s://%s", m.scheme, host) < 0) {
        t->mirror_shown = NULL;
        url_free(&m);
        free(text);
        return;
    }
    log_info("job %llu: %s is fetched from the mirror %s%s", (unsigned long long)t->id,
             t->url.canonical, t->mirror_shown, cfg->mirror_fallback ? "" : " (no fallback)");
    url_free(&t->url);
    t->url = m;
    t->mirror = r;
    t->mirror_url = text;
}

void transfer_init(transfer_t *t, const transfer_cbs_t *cbs, void *owner,
                   const transfer_file_t *file, http_client_t *http, const hubd_config_t *cfg,
                   uint64_t id, const url_t *u, int use_mirror)
{
    memset(t, 0, sizeof *t);
    t->cbs = cbs;
    t->owner = owner;
    t->file = file;
    t->http = http;
    t->cfg = cfg;
    t->id = id;
    t->url = *u;
    if (use_mirror)
        pick_mirror(t);
}

void transfer_free(transfer_t *t)
{
    url_free(&t->url);
    disposition_clear(&t->disp);
    free(t->mirror_url);
    free(t->mirror_shown);
    t->mirror_url = t->mirror_shown = NULL;
}

const char *transfer_source(const transfer_t *t, const char **shown)
{
    *shown = t->mirror_url ? t->mirror_shown : NULL;
    return t->mirror_url ? "mirror" : "origin";
}

int transfer_fall_back(transfer_t *t, const char *code, const char *msg, uint64_t from)
{
    if (!t->mirror_url || !t->cfg->mirror_fallback)
        return 0;
    log_info("job %llu: the mirror %s failed (%s: %s): falling back to %s from byte %llu",
             (unsigned long long)t->id, t->mirror_shown, code, msg, t->file->key,
             (unsigned long long)from);
    free(t->mirror_url);
    t->mirror_url = NULL;
    t->mirror = NULL;
    t->attempts = 0; /* the origin gets its own retries */
    transfer_rewind(t);
    return 1;
}

int transfer_start(transfer_t *t, uint64_t offset, uint64_t end, int conditional)
{
    const transfer_file_t *f = t->file;
    t->offset = offset;
    t->end = end;
    t->conditional = conditional && f->reval && offset == 0;
    char *hdrs = NULL;
    /* Credentials are for the origin they were given for: never sent to
     * another scheme, host or port a redirect leads to. They are kept, not
     * dropped: a retry goes back to the first origin, which needs them. A
     * mirror gets them only when its rule says `credentials`, and then
     * only on its own origin. */
    const char *cred = "";
    url_t first;
    int allowed = !t->mirror_url || t->mirror->credentials;
    if (f->cred_headers && allowed && first_hop(t, &first) == 0) {
        if (url_same_origin(&t->url, &first))
            cred = f->cred_headers;
        url_free(&first);
    }
    /* If-Range ties the range to the file we have the rest of: a changed
     * file answers 200 (a restart). A first range has nothing to tie. */
    const char *validator = transfer_file_validator(f);
    char range[80] = "", if_range[16] = "";
    if (t->end)
        snprintf(range, sizeof range, "Range: bytes=%llu-%llu\r\n", (unsigned long long)t->offset,
                 (unsigned long long)t->end - 1);
    else if (t->offset)
        snprintf(range, sizeof range, "Range: bytes=%llu-\r\n", (unsigned long long)t->offset);
    if (range[0] && validator)
        snprintf(if_range, sizeof if_range, "If-Range: ");
    /* A revalidation asks whether the cached file is still current: 304 if
     * so (served from the cache), else the new one. */
    char cond[400] = "";
    const job_reval_t *rv = t->conditional ? f->reval : NULL;
    if (rv && rv->etag[0])
        snprintf(cond, sizeof cond, "If-None-Match: %s\r\n", rv->etag);
    else if (rv && rv->last_modified[0])
        snprintf(cond, sizeof cond, "If-Modified-Since: %s\r\n", rv->last_modified);
    int n = asprintf(&hdrs, "%s%s%s%s%s%s", range, if_range, if_range[0] ? validator : "",
                     if_range[0] ? "\r\n" : "", cond, cred);
    int rc = n < 0 ? -ENOMEM : 0;
    if (!rc)
        rc = http_request(t->http, &t->url, hdrs, &transfer_http_cbs, t, &t->req);
    free(hdrs);
    if (!rc && t->req && t->paused)
        http_req_set_paused(t->req, 1); /* a retry or the next range waits as its owner does */
    if (!rc)
        return 0;
    t->req = NULL;
    t->begin_code = rc == -EACCES ? "forbidden" : "internal";
    if (rc == -EACCES)
        snprintf(t->begin_msg, sizeof t->begin_msg,
                 "the network policy does not allow the host %s (allow_hosts, deny_hosts)",
                 t->url.host);
    else
        snprintf(t->begin_msg, sizeof t->begin_msg, "cannot start the request");
    return rc;
}

void transfer_abort(transfer_t *t)
{
    if (t->req) {
        http_req_abort(t->req);
        t->req = NULL;
    }
}

void transfer_set_paused(transfer_t *t, int paused)
{
    t->paused = paused;
    if (t->req)
        http_req_set_paused(t->req, paused);
}

void transfer_rewind(transfer_t *t)
{
    transfer_abort(t);
    disposition_clear(&t->disp);
    t->redirects = 0;
    url_t u;
    if (first_hop(t, &u) == 0) {
        url_free(&t->url);
        t->url = u;
    }
}
