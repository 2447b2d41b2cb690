/* transfer: one HTTP exchange of a job (see transfer.h): the request
 * (Range, If-Range, credentials for the first origin only), the response
 * callbacks that apply what disposition_of() decides, redirects, and the
 * retries of failed attempts. Loop thread. */
#include "transfer.h"
#include "job_internal.h"
#include "errcode.h"
#include "log.h"
#include "mirror.h"
#include "segments.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFUSALS_MAX 3 /* connections refused in a row, nothing received: the end */

static int transfer_fall_back(transfer_t *t, const char *code, const char *msg);
static void on_retry_timer(uv_timer_t *timer);

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
        .from_proxy = resp->from_proxy,
    };
    disp_request_t asked = {
        .url = &t->url,
        .offset = t->offset,
        .end = t->end,
        .total = job->total,
        .etag = job->etag,
        .redirects = t->redirects,
        .max_redirects = job->js->cfg->max_redirects,
        .conditional = job->reval && !t->lane && t->offset == 0,
    };
    disposition_t *d = &t->disp;
    disposition_clear(d);
    disposition_of(&head, &asked, d);
    if (t->lane)
        return segs_lane_head(t, d);
    switch (d->kind) {
    case DISP_FAIL:
        if (!transfer_fall_back(t, d->code, d->msg))
            job_fail(job, d->code, d->msg);
        return HTTP_BODY_DISCARD;
    case DISP_RESTART:
        job_restart_from_zero(job, d->why);
        return HTTP_BODY_DISCARD;
    case DISP_REDIRECT:     /* followed once the body is drained (on_http_done) */
    case DISP_STATUS:       /* failed then, so that the connection is kept */
    case DISP_NOT_MODIFIED: /* served from the cache then */
    case DISP_NONE:
        return HTTP_BODY_DISCARD;
    case DISP_TAKE:
        break;
    }
    if (resp->status != 206)
        t->end = 0; /* the whole file came, not the first range asked for */
    return job_take_head(job, d->total, d->new_validators, resp->etag, resp->last_modified)
               ? HTTP_BODY_DISCARD
               : HTTP_BODY_DELIVER;
}

static void on_http_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    transfer_t *t = data;
    (void)req;
    if (t->lane)
        segs_lane_body(t, buf, p, n);
    else
        job_take_body(t->job, buf, p, n);
}

/* The exchange is over: a failed attempt, a drained status or redirect, or
 * the whole body. */
static void on_http_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    transfer_t *t = data;
    job_t *job = t->job;
    t->refused_now = code && http_req_refused(req);
    t->req = NULL;
    if (job->state == JOB_FAILED || job->state == JOB_RESTARTING ||
        (job->state == JOB_RETRY_WAIT && !t->lane))
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
            if (!transfer_fall_back(t, "redirect", m))
                job_fail(job, "redirect", m);
            return;
        }
        log_debug("job %llu: redirect %u to %s", (unsigned long long)job->id, t->redirects + 1,
                  next.canonical);
        url_free(&t->url);
        t->url = next;
        disposition_clear(&t->disp);
        t->redirects++;
        if (t->lane)
            segs_lane_begin(t);
        else
            job_begin_request(job);
        return;
    }
    if (t->disp.kind == DISP_NOT_MODIFIED && !t->lane) {
        job_not_modified(job);
        return;
    }
    if (t->lane)
        segs_lane_done(t);
    else
        job_body_ended(job);
}

static const http_req_cbs_t transfer_http_cbs = {on_http_headers, on_http_body, on_http_done};

/* The first hop of an attempt: the mirror's URL while it is in use, else
 * the job's own. Returns 0 or what url_parse does. */
static int first_hop(const transfer_t *t, url_t *out)
{
    return url_parse(t->mirror_url ? t->mirror_url : t->job->key, out, NULL);
}

/* A mirror rule for the job's URL: the transfer starts there. A rewritten
 * URL that does not parse (too long) leaves the job on its origin. */
static void pick_mirror(transfer_t *t)
{
    const hubd_config_t *cfg = t->job->js->cfg;
    const mirror_rule_t *r = mirror_match(cfg->mirrors, cfg->nmirrors, t->url.canonical);
    url_t m;
    char *text = NULL, host[300];
    if (!r || mirror_rewrite(r, t->url.canonical, &text) || url_parse(text, &m, NULL)) {
        if (r)
            log_warn("job %llu: the mirror's URL for %s is unusable: fetching from the origin",
                     (unsigned long long)t->job->id, t->url.canonical);
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
    log_info("job %llu: %s is fetched from the mirror %s%s", (unsigned long long)t->job->id,
             t->url.canonical, t->mirror_shown, cfg->mirror_fallback ? "" : " (no fallback)");
    url_free(&t->url);
    t->url = m;
    t->mirror = r;
    t->mirror_url = text;
}

void transfer_init(transfer_t *t, struct job *job, const url_t *u)
{
    memset(t, 0, sizeof *t);
    t->job = job;
    t->url = *u;
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

/* A failed attempt on the mirror: the transfer goes to the job's own URL
 * at once (no backoff, not counted as an attempt), resuming after the
 * bytes it has, as a retry would (If-Range guards the join; a validator
 * the origin does not share restarts from byte 0). Any failure counts:
 * the network, timeouts, TLS, bad or cut responses, redirects that cannot
 * be followed, and every 4xx and 5xx status (a cache tier that lacks a
 * file, or is not allowed it, may answer any of them). Returns 1 when it
 * fell back; 0 when the transfer is not on the mirror, or mirror_fallback
 * is off, or a shutdown is under way: the failure is then the job's. */
static int transfer_fall_back(transfer_t *t, const char *code, const char *msg)
{
    job_t *job = t->job;
    if (!t->mirror_url || !job->js->cfg->mirror_fallback || job->js->shutting_down)
        return 0;
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return 1;
    log_info("job %llu: the mirror %s failed (%s: %s): falling back to %s from byte %llu",
             (unsigned long long)job->id, t->mirror_shown, code, msg, job->key,
             (unsigned long long)job->received);
    free(t->mirror_url);
    t->mirror_url = NULL;
    t->mirror = NULL;
    t->attempts = 0; /* the origin gets its own retries */
    transfer_rewind(t);
    job_set_state(job, JOB_RETRY_WAIT);
    job_seal(job); /* what arrived is kept: the origin is asked for the rest */
    uv_timer_start(&job->retry_timer, on_retry_timer, 0, 0);
    job_pump(job);
    return 1;
}

static void on_begin_failed(uv_timer_t *timer)
{
    job_t *job = timer->data;
    if (!transfer_fall_back(&job->xfer, job->xfer.begin_code, job->xfer.begin_msg))
        job_fail(job, job->xfer.begin_code, job->xfer.begin_msg);
}

void transfer_start(transfer_t *t, uint64_t offset, uint64_t end)
{
    job_t *job = t->job;
    t->offset = offset;
    t->end = end;
    char *hdrs = NULL;
    /* Credentials are for the origin they were given for: never sent to
     * another scheme, host or port a redirect leads to. They are kept, not
     * dropped: a retry goes back to the first origin, which needs them. A
     * mirror gets them only when its rule says `credentials`, and then
     * only on its own origin. */
    const char *cred = "";
    url_t first;
    int allowed = !t->mirror_url || t->mirror->credentials;
    if (job->cred_headers && allowed && first_hop(t, &first) == 0) {
        if (url_same_origin(&t->url, &first))
            cred = job->cred_headers;
        url_free(&first);
    }
    /* If-Range ties the range to the file we have the rest of: a changed
     * file answers 200 (a restart). A first range has nothing to tie. */
    const char *validator = job_validator(job);
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
    const job_reval_t *rv = !t->lane && t->offset == 0 ? job->reval : NULL;
    if (rv && rv->etag[0])
        snprintf(cond, sizeof cond, "If-None-Match: %s\r\n", rv->etag);
    else if (rv && rv->last_modified[0])
        snprintf(cond, sizeof cond, "If-Modified-Since: %s\r\n", rv->last_modified);
    int n = asprintf(&hdrs, "%s%s%s%s%s%s", range, if_range, if_range[0] ? validator : "",
                     if_range[0] ? "\r\n" : "", cond, cred);
    int rc = n < 0 ? -ENOMEM : 0;
    if (!rc)
        rc = http_request(job->js->http, &t->url, hdrs, &transfer_http_cbs, t, &t->req);
    free(hdrs);
    if (!rc && t->req && !t->lane && (job->flags & JOB_PAUSED))
        http_req_set_paused(t->req, 1); /* a retry or the next range waits as the job does */
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
    if (t->lane)
        segs_lane_begin_failed(t); /* the lane's timer reports it */
    else
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
    if (first_hop(t, &u) == 0) {
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
    int refused = t->refused_now; /* every address refused: nothing listens there */
    t->refused_now = 0;
    if (job->state == JOB_FAILED || job->state == JOB_DONE)
        return;
    if (t->lane) {
        segs_lane_error(t, code, msg);
        return;
    }
    if (job->seg && segs_main_failed(job, code, msg))
        return; /* the lanes fetch the rest of its chunk */
    jobs_t *js = job->js;
    const hubd_config_t *cfg = js->cfg;
    char final[600], named[500];
    if (transfer_fall_back(t, code, msg))
        return;
    if (t->mirror_url) { /* mirror_fallback = no: say whose failure it is */
        snprintf(named, sizeof named, "the mirror %s: %s", t->mirror_shown, msg);
        msg = named;
    }
    /* Refused on every attempt, and not a byte received: nothing listens
     * there, and the rest of the backoff budget would only keep the user
     * waiting. REFUSALS_MAX in a row (about 1.5 s) end it. */
    t->refused = refused ? t->refused + 1 : 0;
    int hopeless = t->refused >= REFUSALS_MAX && t->refused == t->attempts + 1 && !job->received;
    if (!errcode_is_transient(code) || js->shutting_down || t->attempts >= cfg->retries ||
        hopeless) {
        if (t->attempts > 0 && errcode_is_transient(code)) {
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
    snprintf(job->retry_reason, sizeof job->retry_reason, "%.159s",
             msg); /* a status line shows it */
    job->retry_at = now + delay;
    job_seal(job); /* what arrived is kept: the next request resumes after it */
    log_warn("job %llu: attempt %u of %s failed: %s: %s; retrying in %llu ms from byte %llu",
             (unsigned long long)job->id, t->attempts, job->key, code, msg,
             (unsigned long long)delay, (unsigned long long)job->received);
    uv_timer_start(&job->retry_timer, on_retry_timer, delay, 0);
    job_pump(job);
}
