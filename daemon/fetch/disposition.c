/* disposition: the response and retry rules as pure functions (see the
 * header). Everything a test can check without a socket or a loop. */
#include "disposition.h"
#include "errcode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_redirect(int status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

static void restart(disposition_t *d, const char *why)
{
    d->kind = DISP_RESTART;
    d->why = why;
}

static void fail(disposition_t *d, const char *code)
{
    d->kind = DISP_FAIL;
    d->code = code;
}

/* A 3xx: where to, if anywhere. */
static void redirect_of(const disp_head_t *h, const disp_request_t *r, disposition_t *d)
{
    if (!h->location || !*h->location) {
        fail(d, "redirect");
        snprintf(d->msg, sizeof d->msg, "HTTP %d redirect without a Location", h->status);
        return;
    }
    if (r->redirects >= r->max_redirects) {
        fail(d, "redirect");
        snprintf(d->msg, sizeof d->msg, "more than %u redirects", r->max_redirects);
        return;
    }
    if (url_resolve(r->url, h->location, &d->location)) {
        d->location = NULL;
        fail(d, "redirect");
        snprintf(d->msg, sizeof d->msg, "redirect to an unusable Location");
        return;
    }
    d->kind = DISP_REDIRECT;
}

/* A 206 to a resumed request: only the range asked for, of the file we
 * have the start of, is taken. */
static void range_of(const disp_head_t *h, const disp_request_t *r, disposition_t *d)
{
    unsigned long long start, end, total;
    int n = h->content_range
                ? sscanf(h->content_range, "bytes %llu-%llu/%llu", &start, &end, &total)
                : 0;
    /* The file's length is the one already known, whatever this response
     * says (a "*" length: unknown to the server): a range that does not
     * reach it is not the end of the file. */
    int64_t length = n == 3 ? (int64_t)total : r->total;
    /* An explicit end: exactly the range asked for, cut at the file's end
     * (a server that sends more or less would shift what follows). */
    uint64_t want_end =
        r->end && length >= 0 && r->end > (uint64_t)length ? (uint64_t)length : r->end;
    if (n < 2 || start != r->offset || end < start || (want_end && end + 1 != want_end) ||
        (r->etag && h->etag && strcmp(r->etag, h->etag) != 0) ||
        (n == 3 && (total > INT64_MAX || (r->total >= 0 && (int64_t)total != r->total))) ||
        (length >= 0 && end >= (unsigned long long)length) ||
        (h->content_length >= 0 && (uint64_t)h->content_length != end - start + 1)) {
        restart(d, "the range sent is not the one asked for");
        return;
    }
    if (length < 0) {
        /* Neither response said how long the file is: where this range
         * ends proves nothing. The whole file, then, to its real end. */
        restart(d, "a range of a file of unknown length");
        return;
    }
    /* A range that ends before the file does is taken; the end of the
     * body then finds the file short (truncated: retried, resuming). */
    d->kind = DISP_TAKE;
    d->total = length;
    d->new_validators = r->offset == 0; /* the first response: the file's validators */
}

void disposition_of(const disp_head_t *h, const disp_request_t *r, disposition_t *d)
{
    d->status = h->status;
    d->total = -1;
    if (r->conditional && h->status == 304) { /* drained, then served from the cache */
        d->kind = DISP_NOT_MODIFIED;
        return;
    }
    if (is_redirect(h->status)) {
        redirect_of(h, r, d);
        return;
    }
    if (h->status == 407 && h->from_proxy) {
        /* The proxy's (plain http through it, in absolute form; a 407 to
         * the CONNECT is the tunnel's, and one from an origin is just
         * http_407): its own error, not the origin's, and not retried: the
         * same credentials would fail again. */
        fail(d, "proxy_auth");
        snprintf(d->msg, sizeof d->msg,
                 "HTTP 407 from the proxy: it wants a user and password (proxy = "
                 "http://user:password@host:port), or refused the ones given");
        return;
    }
    if (r->offset > 0 && (h->status == 200 || h->status == 203 || h->status == 416)) {
        /* The server ignored the Range, or If-Range found the file changed:
         * what we have is not a prefix of this body. */
        restart(d, "the server sent the whole file (or refused the range)");
        return;
    }
    if (r->offset == 0 && r->end && h->status == 416) {
        /* A first range of an empty file: ask for it whole. */
        restart(d, "the server refused the first range (an empty file?)");
        return;
    }
    if (h->status == 206 && (r->offset > 0 || r->end)) {
        range_of(h, r, d);
        return;
    }
    if (h->status != 200 && h->status != 203) {
        /* Ends the attempt once the (small) body is read: the connection
         * is kept. A 206 to a request without a Range lands here too. */
        d->kind = DISP_STATUS;
        d->retry_after_ms = disposition_retry_after_ms(h->retry_after);
        return;
    }
    d->kind = DISP_TAKE;
    d->total = h->content_length;
    d->new_validators = 1;
}

const char *disposition_length(uint64_t length, int announced, const disp_room_t *room, char *msg,
                               size_t len)
{
    const char *how = announced ? "the origin announced" : "the download reached";
    if (room->max_file_size && length > room->max_file_size) {
        snprintf(msg, len, "the file is larger than max_file_size (%llu bytes): %s %llu bytes",
                 (unsigned long long)room->max_file_size, how, (unsigned long long)length);
        return "too_large";
    }
    /* Both sides bounded by the file system's size: no overflow. */
    if (room->fs_size && (length > room->fs_size || room->fs_size - length < room->floor)) {
        snprintf(msg, len,
                 "%s %llu bytes, more than the cache's file system can hold (%llu bytes, "
                 "%llu of them kept free by min_free_space)",
                 how, (unsigned long long)length, (unsigned long long)room->fs_size,
                 (unsigned long long)room->floor);
        return "no_space";
    }
    return NULL;
}

void disposition_clear(disposition_t *d)
{
    free(d->location);
    memset(d, 0, sizeof *d);
}

unsigned disposition_retry_after_ms(const char *value)
{
    if (!value)
        return 0;
    char *end;
    unsigned long secs = strtoul(value, &end, 10);
    if (end != value && *end == '\0' && secs < 86400)
        return (unsigned)secs * 1000;
    return 0;
}

int disposition_is_transient(const char *code)
{
    return errcode_is_transient(code); /* the table's retry column */
}

uint64_t disposition_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned attempts,
                                unsigned retry_after_ms, uint64_t rnd)
{
    uint64_t delay = base_ms;
    for (unsigned i = 0; i < attempts && delay < max_ms; i++)
        delay *= 2;
    delay = delay / 2 + rnd % (delay / 2 + 1); /* jitter: [d/2, d] */
    if (retry_after_ms > delay)
        delay = retry_after_ms;
    if (delay > max_ms)
        delay = max_ms;
    return delay;
}

void retry_decide(const retry_in_t *in, retry_out_t *out)
{
    const errcode_t *e = errcode_of(in->code);
    memset(out, 0, sizeof *out);
    out->verdict = RETRY_FAIL;
    if (in->lane) {
        if (e->retry == EC_FINAL && !e->resolve_again)
            return;
        if (in->shutting_down || in->attempts >= in->retries) {
            out->after_n = 1;
            return;
        }
        out->fewer = e->retry == EC_THROTTLE && in->want > 1;
        out->rewind = e->resolve_again;
    } else {
        if (e->retry == EC_FINAL || in->shutting_down || in->attempts >= in->retries ||
            in->hopeless) {
            out->after_n = in->attempts > 0 && e->retry != EC_FINAL;
            return;
        }
    }
    /* A link that expired is resolved again: its Retry-After says nothing
     * of the new one. */
    unsigned after = out->rewind ? 0 : in->retry_after_ms;
    out->delay_ms = disposition_backoff_ms(in->base_ms, in->max_ms, in->attempts, after, in->rnd);
    if (!in->lane && in->deadline_ms && in->elapsed_ms + out->delay_ms >= in->deadline_ms) {
        out->deadline = 1;
        return;
    }
    out->verdict = RETRY_AGAIN;
}

int disposition_follow(const url_t *from, const char *to, url_t *next, char *msg, size_t len)
{
    const char *why = NULL;
    if (url_parse(to, next, &why)) {
        snprintf(msg, len, "redirect to an unusable URL: %s", why ? why : "bad URL");
        return -EINVAL;
    }
    if (strcmp(from->scheme, "https") == 0 && strcmp(next->scheme, "http") == 0) {
        /* A downgrade would hand the rest of the exchange, and the bytes we
         * store, to anyone on the path. */
        snprintf(msg, len, "refused a redirect from https to http (%s)", next->canonical);
        url_free(next);
        return -EINVAL;
    }
    return 0;
}
