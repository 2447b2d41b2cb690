/* transfer: the HTTP exchange of a job: the request (Range, If-Range,
 * credentials for the first origin only) and the response callbacks that
 * decide what the response means (take the body, redirect, retry, restart).
 * Loop thread. */
#include "job_internal.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_redirect(int status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

static int on_http_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    job_t *job = data;
    (void)req;
    if (is_redirect(resp->status)) {
        char msg[160];
        if (!resp->location || !*resp->location) {
            snprintf(msg, sizeof msg, "HTTP %d redirect without a Location", resp->status);
            job_fail(job, "redirect", msg);
            return HTTP_BODY_DISCARD;
        }
        if (job->redirects >= job->js->cfg->max_redirects) {
            snprintf(msg, sizeof msg, "more than %u redirects", job->js->cfg->max_redirects);
            job_fail(job, "redirect", msg);
            return HTTP_BODY_DISCARD;
        }
        free(job->redirect_to);
        int rc = url_resolve(&job->url, resp->location, &job->redirect_to);
        if (rc) {
            job->redirect_to = NULL;
            job_fail(job, "redirect", "redirect to an unusable Location");
        }
        return HTTP_BODY_DISCARD;
    }
    if (job->resume_from > 0 &&
        (resp->status == 200 || resp->status == 203 || resp->status == 416)) {
        /* The server ignored the Range, or If-Range found the file changed:
         * what we have is not a prefix of this body. Start over. */
        job_restart_from_zero(job, "the server sent the whole file (or refused the range)");
        return HTTP_BODY_DISCARD;
    }
    if (resp->status == 206 && job->resume_from > 0) {
        unsigned long long start, end, total;
        int n = resp->content_range
                    ? sscanf(resp->content_range, "bytes %llu-%llu/%llu", &start, &end, &total)
                    : 0;
        /* The file's length is the one already known, whatever this
         * response says (a "*" length: unknown to the server): a range that does
         * not reach it is not the end of the file. */
        int64_t length = n == 3 ? (int64_t)total : job->total;
        if (n < 2 || start != job->resume_from || end < start ||
            (job->etag && resp->etag && strcmp(job->etag, resp->etag) != 0) ||
            (n == 3 && (total > INT64_MAX || (job->total >= 0 && (int64_t)total != job->total))) ||
            (length >= 0 && end >= (unsigned long long)length) ||
            (resp->content_length >= 0 && (uint64_t)resp->content_length != end - start + 1)) {
            job_restart_from_zero(job, "the range sent is not the one asked for");
            return HTTP_BODY_DISCARD;
        }
        if (length < 0) {
            /* Neither response said how long the file is: where this range
             * ends proves nothing. The whole file, then, to its real end. */
            job_restart_from_zero(job, "a range of a file of unknown length");
            return HTTP_BODY_DISCARD;
        }
        /* A range that ends before the file does is taken; on_http_done
         * then finds the file short (truncated: retried, resuming). */
        job->state = JOB_BODY;
        job->total = length;
        if (job_too_large(job, job->total))
            return HTTP_BODY_DISCARD;
        jobs_evict(job->js, NULL); /* room for the rest, before writing it */
        return HTTP_BODY_DELIVER;
    }
    if (resp->status != 200 && resp->status != 203) {
        /* Fail once the (small) body is read, so the connection is kept. */
        job->http_status = resp->status;
        job->retry_after_ms = 0;
        if (resp->retry_after) { /* seconds; an HTTP date is not honoured */
            char *end;
            unsigned long secs = strtoul(resp->retry_after, &end, 10);
            if (end != resp->retry_after && *end == '\0' && secs < 86400)
                job->retry_after_ms = (unsigned)secs * 1000;
        }
        return HTTP_BODY_DISCARD;
    }
    job->state = JOB_BODY;
    job->total = resp->content_length;
    free(job->etag);
    free(job->last_modified);
    job->etag = resp->etag ? strdup(resp->etag) : NULL;
    job->last_modified = resp->last_modified ? strdup(resp->last_modified) : NULL;
    if (job_too_large(job, job->total))
        return HTTP_BODY_DISCARD;
    jobs_evict(job->js, NULL); /* make room before writing, not after */
    return HTTP_BODY_DELIVER;
}

static void on_http_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    job_t *job = data;
    jobs_t *js = job->js;
    js->stats.bytes_from_origin += n;
    job->received += n;
    if (job_too_large(job, (int64_t)job->received)) /* chunked, or a lying length */
        return;
    job->queued_bytes += n;
    batch_t *b = job->cur;
    if (!b && !(b = job->cur = calloc(1, sizeof *b))) {
        job_fail(job, "internal", "out of memory");
        return;
    }
    if (b->nbufs == 0 || b->bufs[b->nbufs - 1] != buf) {
        buf_ref(buf);
        b->bufs[b->nbufs++] = buf;
    }
    struct iovec *last = b->niov ? &b->iov[b->niov - 1] : NULL;
    if (last && (const char *)last->iov_base + last->iov_len == p)
        last->iov_len += n; /* contiguous in the same buffer: one iovec */
    else
        b->iov[b->niov++] = (struct iovec){(void *)p, n};
    b->bytes += n;
    if (b->bytes >= js->cfg->read_buffer_size || b->niov == BATCH_MAX_IOV ||
        b->nbufs == BATCH_MAX_IOV) {
        job_seal(job);
        job_pump(job);
    }
    if (!job->paused && job->queued_bytes > js->cfg->max_inflight && job->state == JOB_BODY) {
        /* Seal and hand on what we hold first: the work item that then
         * completes is what resumes us (job_pump), so pausing cannot stall. */
        job_seal(job);
        job_pump(job);
        job->paused = 1;
        http_req_set_paused(req, 1);
    }
}

static void on_http_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    job_t *job = data;
    (void)req;
    job->req = NULL;
    if (job->state == JOB_FAILED || job->state == JOB_RETRY_WAIT)
        return; /* failed or restarting from a callback: the request was ours to drop */
    if (code) {
        job_error(job, code, msg);
        return;
    }
    if (job->http_status) {
        char status_code[16], status_msg[300];
        snprintf(status_code, sizeof status_code, "http_%d", job->http_status);
        snprintf(status_msg, sizeof status_msg, "%s answered HTTP %d", job->url.canonical,
                 job->http_status);
        job->http_status = 0;
        job_error(job, status_code, status_msg);
        return;
    }
    if (job->redirect_to) {
        url_t next;
        const char *why = NULL;
        int rc = url_parse(job->redirect_to, &next, &why);
        char m[300];
        if (rc) {
            snprintf(m, sizeof m, "redirect to an unusable URL: %s", why ? why : "bad URL");
            job_fail(job, "redirect", m);
            return;
        }
        if (strcmp(job->url.scheme, "https") == 0 && strcmp(next.scheme, "http") == 0) {
            /* A downgrade would hand the rest of the exchange, and the bytes
             * we store, to anyone on the path. */
            snprintf(m, sizeof m, "refused a redirect from https to http (%s)", next.canonical);
            url_free(&next);
            job_fail(job, "redirect", m);
            return;
        }
        log_debug("job %llu: redirect %u to %s", (unsigned long long)job->id, job->redirects + 1,
                  next.canonical);
        url_free(&job->url);
        job->url = next;
        free(job->redirect_to);
        job->redirect_to = NULL;
        job->redirects++;
        job_begin_request(job);
        return;
    }
    if (job->total >= 0 && job->received != (uint64_t)job->total) {
        /* A 206 that stopped short of its range (or a server that lied
         * about the total): never commit a prefix as the file. */
        char m[200];
        snprintf(m, sizeof m, "the response ended at byte %llu of %lld",
                 (unsigned long long)job->received, (long long)job->total);
        job_error(job, "truncated", m);
        return;
    }
    job_seal(job);
    job->body_done = 1;
    job->t_body = uv_now(job->js->loop);
    job_pump(job);
}

static const http_req_cbs_t job_http_cbs = {on_http_headers, on_http_body, on_http_done};

static void on_begin_failed(uv_timer_t *t)
{
    job_t *job = t->data;
    job_fail(job, job->begin_code, job->begin_msg);
}

void job_begin_request(job_t *job)
{
    job->state = JOB_CONNECTING;
    job->resume_from = job->received; /* all of it is sealed, or the job restarted */
    char *hdrs = NULL;
    /* Credentials are for the origin they were given for: never sent to
     * another scheme, host or port a redirect leads to. They are kept, not
     * dropped: a retry goes back to the first origin, which needs them. */
    const char *cred = "";
    url_t first;
    if (job->cred_headers && url_parse(job->key, &first, NULL) == 0) {
        if (url_same_origin(&job->url, &first))
            cred = job->cred_headers;
        url_free(&first);
    }
    const char *validator = job_validator(job);
    int n = job->resume_from > 0 ? asprintf(&hdrs, "Range: bytes=%llu-\r\nIf-Range: %s\r\n%s",
                                            (unsigned long long)job->resume_from, validator, cred)
                                 : asprintf(&hdrs, "%s", cred);
    int rc = n < 0 ? -ENOMEM : 0;
    if (!rc)
        rc = http_request(job->js->http, &job->url, hdrs, &job_http_cbs, job, &job->req);
    free(hdrs);
    if (!rc)
        return;
    /* Failed from the next loop iteration: this may run inside jobs_fetch
     * (a new job that starts at once), which never calls back itself. */
    job->req = NULL;
    job->begin_code = rc == -EACCES ? "forbidden" : "internal";
    if (rc == -EACCES)
        snprintf(job->begin_msg, sizeof job->begin_msg,
                 "the network policy does not allow the host %s (allow_hosts, deny_hosts)",
                 job->url.host);
    else
        snprintf(job->begin_msg, sizeof job->begin_msg, "cannot start the request");
    uv_timer_start(&job->retry_timer, on_begin_failed, 0, 0);
}
