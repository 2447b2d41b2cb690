/* transfer: one HTTP exchange of a job (see transfer.h): the request
 * (Range, If-Range, credentials for the first origin only), the response
 * callbacks that apply what disposition_of() decides, redirects, and the
 * retries of failed attempts. Loop thread. */
#include "transfer.h"
#include "job_internal.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A response head: what it means is decided by disposition_of(), from the
 * head and the request alone; here it is applied. */
static int on_http_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    transfer_t *t = data;
    job_t *job = t->job;
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
        .url = &t->url,
        .offset = t->offset,
        .total = job->total,
        .etag = job->etag,
        .redirects = t->redirects,
        .max_redirects = job->js->cfg->max_redirects,
    };
    disposition_t *d = &t->disp;
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
    return job_take_head(job, d->total, d->new_validators, resp->etag, resp->last_modified)
               ? HTTP_BODY_DISCARD
               : HTTP_BODY_DELIVER;
}

static void on_http_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    transfer_t *t = data;
    (void)req;
    job_take_body(t->job, buf, p, n);
}

/* The exchange is over: a failed attempt, a drained status or redirect, or
 * the whole body. */
static void on_http_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    transfer_t *t = data;
    job_t *job = t->job;
    (void)req;
    t->req = NULL;
    if (job->state == JOB_FAILED || job->state == JOB_RETRY_WAIT || job->state == JOB_RESTARTING)
        return; /* failed or restarting from a callback: the request was ours to drop */
    if (code) {
        transfer_error(t, code, msg);
        return;
    }
    char m[300];
    if (t->disp.kind == DISP_STATUS) {
        char status_code[16];
        snprintf(status_code, sizeof status_code, "http_%d", t->disp.status);
        snprintf(m, sizeof m, "%s answered HTTP %d", t->url.canonical, t->disp.status);
        transfer_error(t, status_code, m);
        return;
    }
    if (t->disp.kind == DISP_REDIRECT) {
        url_t next;
        if (disposition_follow(&t->url, t->disp.location, &next, m, sizeof m)) {
            job_fail(job, "redirect", m);
            return;
        }
        log_debug("job %llu: redirect %u to %s", (unsigned long long)job->id, t->redirects + 1,
                  next.canonical);
        url_free(&t->url);
        t->url = next;
        disposition_clear(&t->disp);
        t->redirects++;
        job_begin_request(job);
        return;
    }
    job_body_ended(job);
}

static const http_req_cbs_t transfer_http_cbs = {on_http_headers, on_http_body, on_http_done};

void transfer_init(transfer_t *t, struct job *job, const url_t *u)
{
    memset(t, 0, sizeof *t);
    t->job = job;
    t->url = *u;
}

void transfer_free(transfer_t *t)
{
    url_free(&t->url);
    disposition_clear(&t->disp);
}

static void on_begin_failed(uv_timer_t *timer)
{
    job_t *job = timer->data;
    job_fail(job, job->xfer.begin_code, job->xfer.begin_msg);
}

void transfer_start(transfer_t *t, uint64_t offset)
{
    job_t *job = t->job;
    t->offset = offset;
    char *hdrs = NULL;
    /* Credentials are for the origin they were given for: never sent to
     * another scheme, host or port a redirect leads to. They are kept, not
     * dropped: a retry goes back to the first origin, which needs them. */
    const char *cred = "";
    url_t first;
    if (job->cred_headers && url_parse(job->key, &first, NULL) == 0) {
        if (url_same_origin(&t->url, &first))
            cred = job->cred_headers;
        url_free(&first);
    }
    const char *validator = job_validator(job);
    int n = t->offset > 0 ? asprintf(&hdrs, "Range: bytes=%llu-\r\nIf-Range: %s\r\n%s",
                                     (unsigned long long)t->offset, validator, cred)
                          : asprintf(&hdrs, "%s", cred);
    int rc = n < 0 ? -ENOMEM : 0;
    if (!rc)
        rc = http_request(job->js->http, &t->url, hdrs, &transfer_http_cbs, t, &t->req);
    free(hdrs);
    if (!rc)
        return;
    /* Failed from the next loop iteration: this may run inside jobs_fetch
     * (a new job that starts at once), which never calls back itself. */
    t->req = NULL;
    t->begin_code = rc == -EACCES ? "forbidden" : "internal";
    if (rc == -EACCES)
        snprintf(t->begin_msg, sizeof t->begin_msg,
                 "the network policy does not allow the host %s (allow_hosts, deny_hosts)",
                 t->url.host);
    else
        snprintf(t->begin_msg, sizeof t->begin_msg, "cannot start the request");
    uv_timer_start(&job->retry_timer, on_begin_failed, 0, 0);
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
    if (t->req)
        http_req_set_paused(t->req, paused);
}

void transfer_rewind(transfer_t *t)
{
    transfer_abort(t);
    disposition_clear(&t->disp);
    t->redirects = 0;
    url_t u;
    if (url_parse(t->job->key, &u, NULL) == 0) {
        url_free(&t->url);
        t->url = u;
    }
}

static void on_retry_timer(uv_timer_t *timer)
{
    job_t *job = timer->data;
    if (job->state != JOB_RETRY_WAIT)
        return;
    if (job->received > 0 && !job_validator(job)) {
        /* Nothing to tie a range to the same file: safer to start over. */
        job_set_state(job, JOB_RESTARTING);
        job_pump(job);
        return;
    }
    job_begin_request(job);
}

void transfer_error(transfer_t *t, const char *code, const char *msg)
{
    job_t *job = t->job;
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return;
    jobs_t *js = job->js;
    const hubd_config_t *cfg = js->cfg;
    char final[600];
    if (!disposition_is_transient(code) || js->shutting_down || t->attempts >= cfg->retries) {
        if (t->attempts > 0 && disposition_is_transient(code)) {
            snprintf(final, sizeof final, "%s (after %u attempts)", msg, t->attempts + 1);
            msg = final;
        }
        job_fail(job, code, msg);
        return;
    }
    uint64_t delay =
        disposition_backoff_ms(cfg->retry_delay_ms, cfg->retry_max_delay_ms, t->attempts,
                               t->disp.retry_after_ms, (uint64_t)random());
    uint64_t now = uv_now(js->loop);
    if (cfg->deadline_ms && now + delay - job->t_start >= cfg->deadline_ms) {
        snprintf(final, sizeof final, "%s (deadline reached after %u attempts)", msg,
                 t->attempts + 1);
        job_fail(job, code, final);
        return;
    }
    t->attempts++;
    transfer_rewind(t); /* the Retry-After is spent with the disposition */
    job_set_state(job, JOB_RETRY_WAIT);
    job_seal(job); /* what arrived is kept: the next request resumes after it */
    log_warn("job %llu: attempt %u of %s failed: %s: %s; retrying in %llu ms from byte %llu",
             (unsigned long long)job->id, t->attempts, job->key, code, msg,
             (unsigned long long)delay, (unsigned long long)job->received);
    uv_timer_start(&job->retry_timer, on_retry_timer, delay, 0);
    job_pump(job);
}
