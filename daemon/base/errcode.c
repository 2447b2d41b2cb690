/* errcode: the table of error codes (errcode.h). */
#include "errcode.h"

#include <stdlib.h>
#include <string.h>

/* One row per code, in errcode_id_t's order (checked by the unit test).
 * Columns: id, wire name, retry, front status (0: the origin's passes),
 * resolve again, resumable, not a failure, STATS bucket. The front's 502
 * is "an upstream failure"; 504 a timeout; what the origin said about the
 * file itself (missing, gone, needs or refuses a credential) passes. */
static const errcode_t rows[EC_COUNT] = {
    {EC_OTHER, "other", EC_FINAL, 502, 0, 0, 0, "other"},
    {EC_BAD_REQUEST, "bad_request", EC_FINAL, 400, 0, 0, 0, "bad_request"},
    {EC_LINE_TOO_LONG, "line_too_long", EC_FINAL, 400, 0, 0, 0, "other"},
    {EC_UNKNOWN_VERB, "unknown_verb", EC_FINAL, 400, 0, 0, 0, "other"},
    {EC_PROTO_VERSION, "proto_version", EC_FINAL, 400, 0, 0, 0, "other"},
    {EC_BAD_URL, "bad_url", EC_FINAL, 400, 0, 0, 0, "bad_url"},
    {EC_UNSUPPORTED_SCHEME, "unsupported_scheme", EC_FINAL, 400, 0, 0, 0, "unsupported_scheme"},
    {EC_DNS, "dns", EC_FINAL, 502, 0, 0, 0, "dns"},
    {EC_CONNECT, "connect", EC_TRANSIENT, 502, 0, 0, 0, "connect"},
    {EC_TIMEOUT, "timeout", EC_TRANSIENT, 504, 0, 0, 0, "timeout"},
    {EC_REDIRECT, "redirect", EC_FINAL, 502, 0, 0, 0, "redirect"},
    {EC_TLS_VERIFY, "tls_verify", EC_FINAL, 502, 0, 0, 0, "tls_verify"},
    /* A TLS record cut short is a cut connection. */
    {EC_TLS, "tls", EC_TRANSIENT, 502, 0, 0, 0, "tls"},
    {EC_HTTP_PARSE, "http_parse", EC_FINAL, 502, 0, 0, 0, "http_parse"},
    {EC_TRUNCATED, "truncated", EC_TRANSIENT, 502, 0, 0, 0, "truncated"},
    {EC_HASH_MISMATCH, "hash_mismatch", EC_FINAL, 502, 0, 0, 0, "hash_mismatch"},
    {EC_IO, "io", EC_FINAL, 500, 0, 0, 0, "io"},
    {EC_NO_SPACE, "no_space", EC_FINAL, 507, 0, 0, 0, "no_space"},
    {EC_FORBIDDEN, "forbidden", EC_FINAL, 403, 0, 0, 0, "forbidden"},
    /* A busy or restarting proxy; proxy_auth (407) would fail again, and so
     * would proxy_refused, its other 4xx to CONNECT: its rules said no. */
    {EC_PROXY, "proxy", EC_TRANSIENT, 502, 0, 0, 0, "other"},
    {EC_PROXY_AUTH, "proxy_auth", EC_FINAL, 502, 0, 0, 0, "other"},
    {EC_PROXY_REFUSED, "proxy_refused", EC_FINAL, 502, 0, 0, 0, "other"},
    {EC_TOO_LARGE, "too_large", EC_FINAL, 502, 0, 0, 0, "too_large"},
    {EC_TOO_MANY_REQUESTS, "too_many_requests", EC_FINAL, 429, 0, 0, 0, "other"},
    /* Stopped, not broken: what is on disk is good to resume from. */
    {EC_SHUTTING_DOWN, "shutting_down", EC_FINAL, 503, 0, 1, 0, "shutting_down"},
    {EC_BUSY, "busy", EC_FINAL, 503, 0, 0, 0, "other"},
    {EC_INTERNAL, "internal", EC_FINAL, 500, 0, 0, 0, "internal"},
    {EC_PERMISSION_DENIED, "permission_denied", EC_FINAL, 403, 0, 0, 0, "other"},
    {EC_CANCELLED, "cancelled", EC_FINAL, 502, 0, 0, 0, "other"},
    /* Its only client was interrupted (INTERRUPT, a Ctrl-C): stopped, not
     * broken, so the partial is kept for the same command run again. */
    {EC_INTERRUPTED, "interrupted", EC_FINAL, 503, 0, 1, 0, "other"},
    /* An admin's RM of a blob users' HF caches link to, without force. */
    {EC_HELD, "held", EC_FINAL, 409, 0, 0, 0, "other"},
    {EC_NOT_FOUND, "not_found", EC_FINAL, 502, 0, 0, 0, "other"},
    {EC_NOT_MODIFIED, "not_modified", EC_FINAL, 502, 0, 0, 1, "other"},
    /* FLEET of a hubd that is not in a cluster swarm (the front never asks). */
    {EC_NOT_IN_SWARM, "not_in_swarm", EC_FINAL, 501, 0, 0, 0, "other"},
    {EC_HTTP_401, "http_401", EC_FINAL, 0, 0, 0, 0, "http_4xx"},
    /* A signed link that expired answers 403 or 410: a segment's
     * connection resolves the job's URL again (its redirect gives a fresh
     * link) before it gives up. */
    {EC_HTTP_403, "http_403", EC_FINAL, 0, 1, 0, 0, "http_4xx"},
    {EC_HTTP_404, "http_404", EC_FINAL, 0, 0, 0, 0, "http_4xx"},
    {EC_HTTP_408, "http_408", EC_TRANSIENT, 502, 0, 0, 0, "http_4xx"},
    {EC_HTTP_410, "http_410", EC_FINAL, 0, 1, 0, 0, "http_4xx"},
    {EC_HTTP_429, "http_429", EC_THROTTLE, 502, 0, 0, 0, "http_4xx"},
    {EC_HTTP_451, "http_451", EC_FINAL, 0, 0, 0, 0, "http_4xx"},
    {EC_HTTP_503, "http_503", EC_THROTTLE, 502, 0, 0, 0, "http_5xx"},
    {EC_HTTP_4XX, "http_4xx", EC_FINAL, 502, 0, 0, 0, "http_4xx"},
    {EC_HTTP_5XX, "http_5xx", EC_TRANSIENT, 502, 0, 0, 0, "http_5xx"},
};

const errcode_t *errcode_row(errcode_id_t id)
{
    return (unsigned)id < EC_COUNT ? &rows[id] : &rows[EC_OTHER];
}

const errcode_t *errcode_of(const char *name)
{
    if (!name)
        return &rows[EC_OTHER];
    for (unsigned i = 0; i < EC_COUNT; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    /* http_NNN without a row of its own: its class. */
    if (strncmp(name, "http_4", 6) == 0)
        return &rows[EC_HTTP_4XX];
    if (strncmp(name, "http_5", 6) == 0)
        return &rows[EC_HTTP_5XX];
    return &rows[EC_OTHER];
}

int errcode_is_transient(const char *name)
{
    return errcode_of(name)->retry != EC_FINAL;
}

int errcode_front_status(const char *name)
{
    if (!name)
        return 200;
    const errcode_t *e = errcode_of(name);
    return e->front_status ? e->front_status : atoi(name + 5); /* "http_NNN" */
}
