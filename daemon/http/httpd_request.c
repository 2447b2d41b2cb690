/* httpd_request: what a request to the HTTP front asks (see httpd.h):
 * the head read by llhttp within bounds, the checks that keep a browser's
 * page from driving the front, and the route table that hands it to its
 * route. The router: called by the connection through its hooks
 * (hreq_hooks), it calls the routes through their rows and answers its
 * own refusals (httpd_answer.c). */
#include "httpd_internal.h"
#include "log.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the route table ---------------------------------------------------- */

/* The routes, first match first: a row's match reads the target only. */
static const hroute_t *const routes[] = {
    &hroute_hf_api,  /* /hf/api/...: the Hub's API (GET; POST for paths-info, its body read) */
    &hroute_hf,      /* /hf, /hf/...: the Hub's files (resolve) */
    &hroute_generic, /* anything else: /<absolute http(s) URL> (the last: it takes all) */
};
#define NROUTES (sizeof routes / sizeof routes[0])
_Static_assert(NROUTES <= HTTPD_ROUTES_MAX, "httpd_t.route_mem has a slot per route");

/* The metrics endpoint's server (httpd_deps_t.metrics): one route, which
 * answers /metrics and 404 for any other target. */
static const hroute_t *const metrics_routes[] = {&hroute_metrics};

/* The row a target goes to (an index in h->routes): the last row takes
 * every target. */
static size_t route_of(const httpd_t *h, const char *target)
{
    size_t i = 0;
    while (i < h->nroutes - 1 && !h->routes[i]->match(target))
        i++;
    return i;
}

int hreq_routes_init(httpd_t *h)
{
    h->routes = h->d.metrics ? metrics_routes : routes;
    h->nroutes = h->d.metrics ? 1 : NROUTES;
    for (size_t i = 0; i < h->nroutes; i++) {
        if (!h->routes[i]->mem_size)
            continue;
        if (!(h->route_mem[i] = calloc(1, h->routes[i]->mem_size))) {
            for (size_t j = 0; j < i; j++) {
                free(h->route_mem[j]);
                h->route_mem[j] = NULL;
            }
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- reading the head -------------------------------------------------- */

/* Request headers that carry credentials: passed on to the origin, where
 * they scope the entry as FETCH's header= does. The rest (User-Agent,
 * Accept...) is the client's business, not the origin's. */
static const char *const cred_names[] = {"Authorization", "Cookie", "Private-Token", "X-Api-Key",
                                         "X-Auth-Token"};

/* ---- reading the head -------------------------------------------------- */

static hreq_t *req_of(llhttp_t *p)
{
    return ((hconn_t *)p->data)->req; /* set while the parser runs (rx_begin) */
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    if (r->target_len + n > HTTPD_TARGET_MAX) {
        r->target_too_long = 1;
        return 0;
    }
    memcpy(r->target + r->target_len, at, n);
    r->target_len += n;
    r->target[r->target_len] = '\0';
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    for (size_t i = 0; i < n; i++, r->field_len++)
        if (r->field_len + 1 < sizeof r->field) {
            char ch = at[i];
            r->field[r->field_len] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
        }
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    if (r->value_len + n >= sizeof r->value) {
        r->value_too_long = 1;
        return 0;
    }
    memcpy(r->value + r->value_len, at, n);
    r->value_len += n;
    return 0;
}

/* The value, whole, or "?" when it does not fit (nor did it fit the
 * request's bounds): a cut Range or Host would mean something else, and an
 * Origin dropped for its length would read as none. "?" is no Host, Origin
 * or Sec-Fetch-Site the front accepts, and no Range it serves. */
static void keep(char *slot, size_t cap, const hreq_t *r, int too_long)
{
    size_t n = r->value_len;
    while (n && (r->value[n - 1] == ' ' || r->value[n - 1] == '\t'))
        n--; /* trailing whitespace is not the value's (RFC 9110 5.5) */
    if (too_long || n >= cap) {
        snprintf(slot, cap, "?");
        return;
    }
    memcpy(slot, r->value, n);
    slot[n] = '\0';
}

/* A header line is in: keep what the front looks at. */
static int on_header_value_complete(llhttp_t *p)
{
    hreq_t *r = req_of(p);
    int too_long = r->value_too_long || r->field_len >= sizeof r->field;
    r->field[r->field_len < sizeof r->field ? r->field_len : sizeof r->field - 1] = '\0';
    r->value[r->value_len] = '\0';
    if (++r->nheaders > HTTPD_MAX_HEADERS) {
        llhttp_set_error_reason(p, "more than 64 header lines");
        return -1;
    }
    if (strcmp(r->field, "host") == 0) /* a second Host is no Host the front accepts */
        keep(r->host, sizeof r->host, r, too_long || r->host[0]);
    else if (strcmp(r->field, "origin") == 0)
        keep(r->origin, sizeof r->origin, r, too_long);
    else if (strcmp(r->field, "sec-fetch-site") == 0)
        keep(r->fetch_site, sizeof r->fetch_site, r, too_long);
    else if (strcmp(r->field, "range") == 0)
        keep(r->range, sizeof r->range, r, too_long);
    else if (strcmp(r->field, "content-type") == 0)
        keep(r->content_type, sizeof r->content_type, r, too_long);
    for (size_t i = 0; i < sizeof cred_names / sizeof cred_names[0] && !too_long; i++) {
        if (strcasecmp(r->field, cred_names[i]) != 0 || r->ncred == HTTPD_MAX_CRED)
            continue;
        if (asprintf(&r->cred[r->ncred], "%s: %s", cred_names[i], r->value) >= 0)
            r->ncred++;
    }
    r->field_len = r->value_len = 0;
    r->value_too_long = 0;
    return 0;
}

/* Stops at the end of the head: GET and HEAD have no body, and a request
 * with one is answered and the connection closed (its body is never read).
 * The one exception, a POST its route takes a body for (the Hub's
 * paths-info: hroute_t.takes_body), has its body read here,
 * within HTTPD_BODY_MAX and with a Content-Length only (so that its size
 * is known before any byte is kept): llhttp goes on through on_body and
 * pauses at on_message_complete. Any other body, too large or chunked, is
 * refused by hreq_handle from the head (its route's words first). */
static int on_headers_complete(llhttp_t *p)
{
    hreq_t *r = req_of(p);
    r->method = llhttp_get_method(p);
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->content_length = p->content_length;
    r->has_body = r->chunked || p->content_length > 0;
    const httpd_t *h = ((hconn_t *)p->data)->srv;
    const hroute_t *route = h->routes[route_of(h, r->target)];
    if (r->has_body && !r->chunked && r->method == HTTP_POST && !r->target_too_long &&
        r->content_length <= HTTPD_BODY_MAX && route->takes_body && route->takes_body(r->target)) {
        bytebuf_init(&r->body, HTTPD_BODY_MAX);
        r->reading_body = 1;
        return 0;
    }
    r->complete = 1;
    return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    hreq_t *r = req_of(p);
    if (!r->reading_body || bytebuf_append(&r->body, at, n)) {
        llhttp_set_error_reason(p, "the request body does not fit");
        return -1;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    hreq_t *r = req_of(p);
    if (r->reading_body) {
        r->reading_body = 0;
        r->body_done = 1;
        r->complete = 1;
    }
    return HPE_PAUSED;
}

void hreq_settings_init(llhttp_settings_t *s)
{
    llhttp_settings_init(s);
    s->on_url = on_url;
    s->on_header_field = on_header_field;
    s->on_header_value = on_header_value;
    s->on_header_value_complete = on_header_value_complete;
    s->on_headers_complete = on_headers_complete;
    s->on_body = on_body;
    s->on_message_complete = on_message_complete;
}

/* ---- the request's checks and its route --------------------------------- */

/* ---- refusals --------------------------------------------------------- */

void hreq_refuse(hconn_t *c, int status, const char *code, const char *msg)
{
    c->srv->stats.refused++;
    c->refuse_status = status;
    c->refuse_code = code;
    snprintf(c->refuse_msg, sizeof c->refuse_msg, "%s", msg);
}

void hreq_refuse_unknown_user(hconn_t *c)
{
    const principal_acl_t *acl = c->srv->d.acl;
    char msg[300];
    if (acl->restricted) {
        log_warn("http front uid %u: refused (not in allow_users or allow_groups)",
                 (unsigned)c->who.uid);
        snprintf(msg, sizeof msg,
                 "this hubd serves only the users and groups it is configured "
                 "for (allow_users, allow_groups)");
    } else {
        log_warn("http front uid %u: refused (may not use hubd's socket%s%s)", (unsigned)c->who.uid,
                 acl->node.group[0] ? ", group " : "", acl->node.group);
        if (acl->node.group[0])
            snprintf(msg, sizeof msg,
                     "this hubd serves the users of its socket (members of group %s), its admins "
                     "and root: ask an admin to add you to group %s",
                     acl->node.group, acl->node.group);
        else
            snprintf(msg, sizeof msg,
                     "this hubd serves the users of its socket, its admins and root");
    }
    hreq_refuse(c, 403, "permission_denied", msg);
}

/* Whether Host names this listener: 127.0.0.1, [::1] or localhost, with
 * its port (or none, on port 80). Any other name is what DNS rebinding
 * sends: a page of evil.example whose name now resolves to 127.0.0.1. */
static int host_is_ours(const hconn_t *c)
{
    unsigned port = c->local.ss_family == AF_INET6
                        ? ntohs(((const struct sockaddr_in6 *)&c->local)->sin6_port)
                        : ntohs(((const struct sockaddr_in *)&c->local)->sin_port);
    static const char *const names[] = {"127.0.0.1", "[::1]", "localhost"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s:%u", names[i], port);
        if (strcasecmp(c->req->host, want) == 0 ||
            (port == 80 && strcasecmp(c->req->host, names[i]) == 0))
            return 1;
    }
    return 0;
}

/* A browser's page may send requests here; the front answers only those
 * that are not cross-site: no Origin or the front's own, and no
 * Sec-Fetch-Site other than same-origin or none (typed by the user). */
static int from_a_page_elsewhere(const hconn_t *c)
{
    const hreq_t *r = c->req;
    if (r->origin[0]) {
        char own[300];
        snprintf(own, sizeof own, "http://%s", r->host);
        if (strcasecmp(r->origin, own) != 0)
            return 1;
    }
    return r->fetch_site[0] && strcasecmp(r->fetch_site, "same-origin") != 0 &&
           strcasecmp(r->fetch_site, "none") != 0;
}

/* The connection's hook: a request's head (and any body read) is in. The
 * front's own checks come first, in a fixed order (an answer names the
 * first one broken): a refusal decided before the request was read, Host,
 * cross-site, dot segments, the method, a body not read (its route's words, else the
 * front's), the target's length; then the route answers. */
static void hreq_handle(hconn_t *c)
{
    hreq_t *r = c->req;
    c->keep_alive = llhttp_should_keep_alive(&c->parser) && (!r->has_body || r->body_done);
    /* The user was judged when the connection came; a reload since may
     * have taken it out of allow_users or allow_groups (or the socket's
     * group): a kept-alive connection must not keep what a new one loses. */
    if (!c->refuse_status && !c->srv->d.metrics && !principal_may_use_front(c->srv->d.acl, &c->who))
        hreq_refuse_unknown_user(c);
    if (c->refuse_status) {
        hanswer_text(c, c->refuse_status, c->refuse_code, c->refuse_msg, 1);
        return;
    }
    if (!host_is_ours(c)) {
        hanswer_text(c, 403, "forbidden",
                     "Host must name this listener (127.0.0.1, [::1] or localhost, with its "
                     "port)",
                     1);
        return;
    }
    if (from_a_page_elsewhere(c)) {
        log_warn("http front uid %u: refused a cross-site request (Origin %s, Sec-Fetch-Site %s)",
                 (unsigned)c->who.uid, r->origin[0] ? r->origin : "-",
                 r->fetch_site[0] ? r->fetch_site : "-");
        hanswer_text(c, 403, "forbidden", "cross-site requests are refused", 1);
        return;
    }
    /* A route keys what it remembers on the target's text, and the server
     * it asks removes dot segments: refused before any route reads it, so
     * that the text is the path asked (curl sends them only with
     * --path-as-is). */
    if (url_path_has_dot_segment(r->target, strcspn(r->target, "?"))) {
        hanswer_text(c, 400, "bad_url",
                     "the request target has a \".\" or \"..\" segment (or its %2e spelling)", 1);
        return;
    }
    size_t i = route_of(c->srv, r->target);
    const hroute_t *route = c->srv->routes[i];
    if (r->method != HTTP_GET && r->method != HTTP_HEAD &&
        !(route->post && r->method == HTTP_POST)) {
        hanswer_text(c, 405, "bad_request", "the front answers GET and HEAD", 1);
        return;
    }
    if (r->has_body && !r->body_done && route->unread_body && route->unread_body(c))
        return;
    if (r->has_body && !r->body_done) {
        hanswer_text(c, 413, "bad_request",
                     "the front reads no request body but a paths-info POST's", 1);
        return;
    }
    if (r->target_too_long) {
        hanswer_text(c, 414, "bad_request", "the request target is longer than 8 KiB", 1);
        return;
    }
    c->route = route;
    c->state = HC_FETCH; /* until the route answers: now, or once it has the file */
    route->handle(c, c->srv->route_mem[i]);
}

/* A request the connection could not read: answered, then closed. */
static void hreq_unreadable(hconn_t *c, int status, const char *code, const char *msg)
{
    hanswer_text(c, status, code, msg, 1);
}

const hconn_hooks_t hreq_hooks = {hreq_handle, hreq_unreadable};
