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

/* A response head: what it means is decided by disposition_of(), from the
 * head and the request alone; here it is applied. */
static int on_http_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    job_t *job = data;
    (void)req;
    disp_head_t head = {
        .status = resp->status,
        .content_length = resp->content_length,
        .location = resp->location,
        .etag = resp->etag,
        .content_range = resp->content_range,
        .retry_after = resp->retry_after,
    };
    disp_request_t asked = {
        .url = &job->url,
        .offset = job->resume_from,
        .total = job->total,
        .etag = job->etag,
        .redirects = job->redirects,
        .max_redirects = job->js->cfg->max_redirects,
    };
    disposition_t *d = &job->disp;
    disposition_clear(d);
    disposition_of(&head, &asked, d);
    switch (d->kind) {
    case DISP_FAIL:
        job_fail(job, d->code, d->msg);
        return HTTP_BODY_DISCARD;
    case DISP_RESTART:
        job_restart_from_zero(job, d->why);
        return HTTP_BODY_DISCARD;
    case DISP_REDIRECT: /* followed once the body is drained (on_http_done) */
    case DISP_STATUS:   /* failed then, so that the connection is kept */
    case DISP_NONE:
        return HTTP_BODY_DISCARD;
    case DISP_TAKE:
        break;
    }
    job_set_state(job, JOB_BODY);
    job->total = d->total;
    if (d->new_validators) {
        free(job->etag);
        free(job->last_modified);
        job->etag = resp->etag ? strdup(resp->etag) : NULL;
        job->last_modified = resp->last_modified ? strdup(resp->last_modified) : NULL;
    }
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
    if (!(job->flags & JOB_PAUSED) && job->queued_bytes > js->cfg->max_inflight &&
        job->state == JOB_BODY) {
        /* Seal and hand on what we hold first: the work item that then
         * completes is what resumes us (job_pump), so pausing cannot stall. */
        job_seal(job);
        job_pump(job);
        job->flags |= JOB_PAUSED;
        http_req_set_paused(req, 1);
    }
}

/* The exchange is over: a failed attempt, a drained status or redirect, or
 * the whole body. */
static void on_http_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    job_t *job = data;
    (void)req;
    job->req = NULL;
    if (job->state == JOB_FAILED || job->state == JOB_RETRY_WAIT || job->state == JOB_RESTARTING)
        return; /* failed or restarting from a callback: the request was ours to drop */
    if (code) {
        job_error(job, code, msg);
        return;
    }
    char m[300];
    if (job->disp.kind == DISP_STATUS) {
        char status_code[16];
        snprintf(status_code, sizeof status_code, "http_%d", job->disp.status);
        snprintf(m, sizeof m, "%s answered HTTP %d", job->url.canonical, job->disp.status);
        job_error(job, status_code, m);
        return;
    }
    if (job->disp.kind == DISP_REDIRECT) {
        url_t next;
        if (disposition_follow(&job->url, job->disp.location, &next, m, sizeof m)) {
            job_fail(job, "redirect", m);
            return;
        }
        log_debug("job %llu: redirect %u to %s", (unsigned long long)job->id, job->redirects + 1,
                  next.canonical);
        url_free(&job->url);
        job->url = next;
        disposition_clear(&job->disp);
        job->redirects++;
        job_begin_request(job);
        return;
    }
    if (job->total >= 0 && job->received != (uint64_t)job->total) {
        /* A 206 that stopped short of its range (or a server that lied
         * about the total): never commit a prefix as the file. */
        snprintf(m, sizeof m, "the response ended at byte %llu of %lld",
                 (unsigned long long)job->received, (long long)job->total);
        job_error(job, "truncated", m);
        return;
    }
    job_seal(job);
    job_set_state(job, JOB_BODY_DONE);
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
    job_set_state(job, JOB_CONNECTING);
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
