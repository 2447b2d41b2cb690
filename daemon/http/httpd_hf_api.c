/* httpd_hf_api: the Hugging Face Hub's API routes through the HTTP front:
 * what the Hub clients ask before they download:
 *
 *   GET  /hf/api/{models,datasets,spaces}/{repo}[/revision/{rev}]   repo info
 *   GET  /hf/api/{type}/{repo}/tree/{rev}[/{path}][?recursive&expand&cursor&limit]
 *   POST /hf/api/{type}/{repo}/paths-info/{rev}   (JSON or form body)
 *
 * {repo} is "org/name" or one "name"; {rev} passes as the client spelled it
 * (percent-encoded "refs%2Fpr%2F1" too), and so does the query. Each is
 * asked of the Hub (hf_upstream + "/api/...") through the jobs module's
 * HTTP client (proxies, network policy) with the client's credential
 * headers, and answered with the Hub's status, Content-Type, X-Error-Code,
 * X-Error-Message and X-Repo-Commit, its Link (the tree's next page) and
 * Location pointed at the front, and its JSON without the xet hints
 * (xetHash, xetEnabled: hf_json.h), so that no client leaves the front for
 * the xet CAS. The xet token routes (xet-read-token, xet-write-token) are
 * answered 404 with X-Error-Code EntryNotFound: a client that sees no xet
 * hint never asks for them, and one that does gets the Hub's own "not
 * there" answer rather than a token for a CAS hubd does not front. Any
 * other /hf/api path is a 404; another method than GET (POST for
 * paths-info) a 405.
 *
 * Bounds: the client's body at most HTTPD_BODY_MAX (httpd_request.c), the
 * Hub's answer at most HF_API_BODY_MAX (a larger one is a 502), and each
 * request counts as one of its uid's waiting requests
 * (max_requests_per_user), as a download does. The answer is held in
 * memory until its last byte is sent, as slowly as the client reads (up to
 * HTTPD_SEND_TIMEOUT_MS between bytes), so a uid has at most HF_API_PER_UID
 * requests open (asked of the Hub or being sent): what one user can make
 * the daemon hold is HF_API_PER_UID answers, not one per connection (64
 * slow readers of a 15 MiB answer held 1.2 GB). Its further requests wait
 * their turn, parked (nothing asked, no answer held), and go on in their
 * arrival order as its open ones end: the ranks of one training job ask
 * together, and a 429 would fail those that huggingface_hub does not
 * retry. A request parked longer than http_header_timeout (the time the
 * front gives a request to get in before it acts on it; an admin's knob)
 * gets its 429 then: its user's own readers are stalled. No bound on the
 * parked is needed: a connection has one request at a time, so a uid has
 * at most HTTPD_MAX_CONNS_PER_UID - HF_API_PER_UID parked, each its
 * connection's state and a small struct. The JSON is parsed and written
 * back in a libuv pool item: a tree page of several MB is never parsed on
 * the loop.
 *
 * Across users, the Hub's answer is charged to the daemon's one budget of
 * the Hub's answers (hub_budget(), which HFREPO's are charged to too) from
 * its first byte read until the connection holds its filtered copy, at
 * HF_JSON_COST bytes a byte: the answer, the filter's output and what the
 * streaming parse holds besides (hf_json.h). Past the budget, a 503 with
 * Retry-After: 1. huggingface_hub's http_backoff retries a 503 (the pages
 * of a tree after the first go through it); a first call of a route
 * (model_info, a tree's first page) is not retried and fails as any 5xx
 * of the Hub would. The filtered JSON is sent from where the filter wrote
 * it, the answer's head written in the room left before it: 16 MiB copied
 * on the loop into memory not touched before held it for tens of ms.
 *
 * A route of the front's table (hroute_hf_api): a request's state is its
 * hf_api_t. Loop thread, but for the pool item's filter_work. */
#include "hf_json.h"
#include "httpd_internal.h"
#include "hub_req.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_API_BODY_MAX (16u << 20) /* the Hub's answer, bytes */
#define HF_API_PER_UID 4            /* a uid's API requests open: asked or being sent */
/* Before the filtered JSON, the room its answer's head is written in: the
 * Hub's header lines passed on are at most 8 KiB each. */
#define HF_API_HEAD_ROOM (64u << 10)

/* The Hub's headers an API request keeps (the HTTP client knows none of
 * them), by their index in hub_wanted: its errors, the commit, and Link
 * (the tree's next page; its lines joined). The names are also those the
 * answer passes on. */
enum { HUB_ERROR_CODE, HUB_ERROR_MESSAGE, HUB_COMMIT, HUB_LINK, HUB_N };
static const http_want_t hub_wanted[HUB_N] = {
    [HUB_ERROR_CODE] = {"X-Error-Code", 0},
    [HUB_ERROR_MESSAGE] = {"X-Error-Message", 0},
    [HUB_COMMIT] = {"X-Repo-Commit", 0},
    [HUB_LINK] = {"Link", 1},
};

typedef enum {
    ROUTE_NONE,       /* not one of ours: 404 */
    ROUTE_INFO,       /* {repo} */
    ROUTE_REVISION,   /* {repo}/revision/{rev} */
    ROUTE_TREE,       /* {repo}/tree/{rev}[/{path}] */
    ROUTE_PATHS_INFO, /* {repo}/paths-info/{rev} */
    ROUTE_XET_TOKEN,  /* {repo}/xet-read-token/..., xet-write-token/... */
} route_t;

/* Where a request is: parked, or one of its uid's open ones (from
 * API_TURN on). */
typedef enum {
    API_NEW,     /* being admitted */
    API_PARKED,  /* waits its turn: its timer rings at the wait's bound */
    API_TURN,    /* given its turn: asks the Hub when its timer rings (0 ms) */
    API_ASKING,  /* asked of the Hub, or its answer being filtered */
    API_SENDING, /* its answer is in c->out (only there) until sent */
} api_phase_t;

/* The route's memory (one per server): the arrival count that orders the
 * parked requests of a uid. */
typedef struct api_mem {
    uint64_t arrivals;
} api_mem_t;

typedef struct hf_api {
    hconn_t *c; /* NULL once the connection left: the pool item's end frees it */
    api_phase_t phase;
    uint64_t arrival;  /* its place in its uid's turns (api_mem_t.arrivals) */
    unsigned wait_ms;  /* parked: how long it may wait (http_header_timeout) */
    int quota_counted; /* a waiting request of its uid (quota_request_end) */
    hub_req_t *req;    /* the request to the Hub in flight (hub_req.h), or NULL */
    bytebuf_t body;    /* the Hub's answer, at most HF_API_BODY_MAX */
    size_t charged;    /* for body, to hub_budget(): back once the connection holds the answer */
    int status;        /* the Hub's */
    char *ctype;       /* its Content-Type, or NULL */
    char *location;    /* its Location, or NULL */
    char *hub[HUB_N];  /* the values of hub_wanted */
    uv_work_t work;    /* the JSON filter */
    int work_out;      /* the pool item is out: only it may free this */
    int filtered;      /* the item's outcome: 0 JSON in out, 1 not JSON, -ENOMEM */
    char *out;         /* the filtered JSON (malloc'd), at out + HF_API_HEAD_ROOM */
    size_t out_len;    /* of the JSON */
} hf_api_t;

/* ---- routes ------------------------------------------------------------ */

static int is_keyword(const char *seg, size_t n)
{
    static const char *const kw[] = {"revision", "tree", "paths-info", "xet-read-token",
                                     "xet-write-token"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strlen(kw[i]) == n && strncmp(seg, kw[i], n) == 0)
            return 1;
    return 0;
}

/* Which route target ("/hf/api/...") asks for. The repo is "org/name"
 * when the third segment is a route's keyword, else one "name" when the
 * second is; no segment may be empty. */
static route_t api_route(const char *target)
{
    const char *t = target + 8; /* after "/hf/api/" */
    size_t tl = strcspn(t, "?");
    static const char *const types[] = {"models/", "datasets/", "spaces/"};
    size_t pl = 0;
    for (size_t i = 0; i < 3 && !pl; i++)
        if (strncmp(t, types[i], strlen(types[i])) == 0)
            pl = strlen(types[i]);
    if (!pl)
        return ROUTE_NONE;
    const char *seg[4];
    size_t len[4], n = 0;
    for (const char *p = t + pl, *end = t + tl; p <= end && n < 4;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *e = slash ? slash : end;
        if (e == p)
            return ROUTE_NONE; /* an empty segment */
        seg[n] = p;
        len[n++] = (size_t)(e - p);
        if (!slash)
            break;
        p = slash + 1;
    }
    size_t k;
    if (n >= 3 && is_keyword(seg[2], len[2]))
        k = 2;
    else if (n >= 2 && is_keyword(seg[1], len[1]))
        k = 1;
    else
        return n == 1 || n == 2 ? ROUTE_INFO : ROUTE_NONE;
    /* What follows the keyword: nothing (0), one segment (1) or more (2). */
    const char *rest = seg[k] + len[k], *end = t + tl;
    int after = rest == end ? 0 : memchr(rest + 1, '/', (size_t)(end - rest - 1)) ? 2 : 1;
    if (len[k] > 4 && memcmp(seg[k], "xet-", 4) == 0)
        return ROUTE_XET_TOKEN;
    if (len[k] == 8 && memcmp(seg[k], "revision", 8) == 0)
        return after == 1 ? ROUTE_REVISION : ROUTE_NONE;
    if (len[k] == 4 && memcmp(seg[k], "tree", 4) == 0)
        return after >= 1 ? ROUTE_TREE : ROUTE_NONE;
    return after == 1 ? ROUTE_PATHS_INFO : ROUTE_NONE; /* paths-info */
}

/* hroute_t.takes_body: POST .../paths-info/{rev}. */
static int api_takes_body(const char *target)
{
    return strncmp(target, "/hf/api/", 8) == 0 && api_route(target) == ROUTE_PATHS_INFO;
}

/* ---- life ---------------------------------------------------------------- */

static void api_free(hf_api_t *a)
{
    hub_budget_release(hub_budget(), a->charged);
    bytebuf_free(&a->body);
    free(a->ctype);
    free(a->location);
    for (int i = 0; i < HUB_N; i++)
        free(a->hub[i]);
    free(a->out);
    free(a);
}

static void api_wake(httpd_t *h, uid_t uid);

/* hroute_t.abandon: the quota's count ends, the request to the Hub is
 * aborted; a pool item still out frees a when it is back. An open
 * request's end is the turn of its uid's next parked one. */
static void api_abandon(hconn_t *c)
{
    hf_api_t *a = c->rstate;
    c->rstate = NULL; /* from here c is not counted among its uid's */
    int was_open = a->phase >= API_TURN;
    if (a->quota_counted) {
        a->quota_counted = 0;
        quota_request_end(c->srv->d.quota, &c->who);
    }
    if (a->req) {
        hub_req_t *req = a->req;
        a->req = NULL;
        hub_req_abort(req);
    }
    if (a->work_out)
        a->c = NULL; /* the item runs on: after_filter frees it */
    else
        api_free(a);
    if (was_open)
        api_wake(c->srv, c->who.charged);
}

/* The request ends with a short text (an error of the front's). */
static void api_fail(hconn_t *c, int status, const char *code, const char *msg)
{
    api_abandon(c);
    hanswer_text(c, status, code, msg, 0);
}

/* ---- the answer ------------------------------------------------------------ */

static int has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t')
            return 1;
    return 0;
}

/* Pool: the Hub's answer without its xet hints, when it is JSON. The
 * answer itself goes then (here, not on the loop): what is sent is its
 * filtered copy. */
static void filter_work(uv_work_t *w)
{
    hf_api_t *a = w->data;
    a->filtered = hf_json_filter_at(bytebuf_data(&a->body), bytebuf_len(&a->body), HF_API_HEAD_ROOM,
                                    &a->out, &a->out_len);
    if (a->filtered == 0 || a->filtered == HF_JSON_TOO_DEEP)
        bytebuf_free(&a->body);
}

/* The Hub's answer, its headers made the front's. */
static void api_answer(hconn_t *c, hf_api_t *a)
{
    hreq_t *r = c->req;
    char *front = NULL, *link = NULL, *loc = NULL;
    const char *up = c->srv->d.cfg->hf_upstream;
    int bad = asprintf(&front, "http://%s/hf", r->host) < 0;
    if (!bad && a->hub[HUB_LINK])
        bad = hf_link_rewrite(a->hub[HUB_LINK], up, front, &link) != 0;
    if (!bad && a->location)
        bad = hf_url_rewrite(a->location, strlen(a->location), up, front, &loc) != 0;
    bad = bad || hanswer_add_line(c, hub_wanted[HUB_ERROR_CODE].name, a->hub[HUB_ERROR_CODE]) ||
          hanswer_add_line(c, hub_wanted[HUB_ERROR_MESSAGE].name, a->hub[HUB_ERROR_MESSAGE]) ||
          hanswer_add_line(c, hub_wanted[HUB_COMMIT].name, a->hub[HUB_COMMIT]) ||
          hanswer_add_line(c, hub_wanted[HUB_LINK].name, link) ||
          hanswer_add_line(c, "Location", loc);
    free(front);
    free(link);
    free(loc);
    if (bad) {
        api_fail(c, 500, "internal", "out of memory");
        return;
    }
    const char *ctype =
        a->ctype && a->ctype[0] && !has_ctl(a->ctype) ? a->ctype : "application/json";
    int status = a->status >= 200 && a->status <= 599 ? a->status : 502;
    int filtered = a->filtered == 0;
    size_t len = filtered ? a->out_len : bytebuf_len(&a->body);
    log_debug("http front uid %u: %s %s: %d, %zu bytes", (unsigned)c->who.uid,
              r->method == HTTP_POST ? "POST" : "GET", r->target, status, len);
    /* What the answer is made of leaves a first: a stays the request's
     * state while the answer is sent (one of its uid's open requests until
     * its last byte is out, api_abandon), holding none of it: the
     * connection holds the filtered JSON itself (its head written in the
     * room before it), or its copy of the Hub's answer that is not JSON.
     * The request may end inside hanswer_bytes* (a goes then): a is not
     * touched after it. */
    bytebuf_t hub_body = a->body;
    char *out = a->out, *hub_ctype = a->ctype;
    bytebuf_init(&a->body, 0);
    a->out = a->ctype = NULL;
    a->phase = API_SENDING;
    if (a->quota_counted) {
        a->quota_counted = 0;
        quota_request_end(c->srv->d.quota, &c->who);
    }
    if (filtered)
        hanswer_bytes_at(c, status, ctype, out, HF_API_HEAD_ROOM, len); /* takes out */
    else
        hanswer_bytes(c, status, ctype, bytebuf_data(&hub_body), len);
    bytebuf_free(&hub_body);
    if (!filtered)
        free(out);
    free(hub_ctype);
}

static void after_filter(uv_work_t *w, int status)
{
    hf_api_t *a = w->data;
    a->work_out = 0;
    hconn_t *c = a->c;
    if (!c) { /* the connection went meanwhile */
        api_free(a);
        return;
    }
    if (status || a->filtered < 0) {
        api_fail(c, 500, "internal",
                 status ? "the server is shutting down" : "out of memory filtering the Hub's JSON");
        return;
    }
    if (a->filtered == HF_JSON_TOO_DEEP) { /* JSON, and its xet hints cannot be taken out */
        api_fail(c, httpd_status_of("http_parse"), "http_parse",
                 "the Hub's JSON is nested deeper than hubd can filter");
        return;
    }
    /* The charge goes back once the connection holds the answer (the
     * filtered JSON, or a copy of what is not JSON): api_answer may end the
     * request, a with it. */
    size_t charged = a->charged;
    a->charged = 0;
    api_answer(c, a);
    hub_budget_release(hub_budget(), charged);
}

/* ---- the request to the Hub ----------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* The Hub's answer, whatever its status (hub_req.h: no redirect is
 * followed, a Location passes to the client), goes to the pool to be
 * filtered. */
static void api_answered(void *arg, const char *code, const char *msg, hub_answer_t *h)
{
    hf_api_t *a = arg;
    hconn_t *c = a->c;
    a->req = NULL;
    if (code) {
        /* busy: the budget of the Hub's answers is full for a moment */
        if (strcmp(code, "busy") == 0 && hanswer_add_line(c, "Retry-After", "1")) {
            api_fail(c, 500, "internal", "out of memory");
            return;
        }
        api_fail(c, httpd_status_of(code), code, msg);
        return;
    }
    a->status = h->status;
    a->ctype = dup_or_null(h->content_type);
    a->location = dup_or_null(h->location);
    for (int i = 0; i < HUB_N; i++)
        a->hub[i] = dup_or_null(h->wanted[i]);
    a->charged = hub_answer_take_body(h, &a->body);
    a->work.data = a;
    a->work_out = 1;
    if (uv_queue_work(c->srv->d.loop, &a->work, filter_work, after_filter)) {
        a->work_out = 0;
        api_fail(c, 500, "internal", "cannot queue the Hub's answer for filtering");
    }
}

static int api_match(const char *target)
{
    return strncmp(target, "/hf/api/", 8) == 0;
}

/* hroute_t.unread_body: a POST whose body the front did not read, in the
 * API's words (GET elsewhere: its body is not read). */
static int api_unread_body(hconn_t *c)
{
    hreq_t *r = c->req;
    if (r->method != HTTP_POST)
        return 0;
    if (api_takes_body(r->target)) {
        if (r->chunked)
            hanswer_text(c, 411, "bad_request",
                         "the front reads a request body with a Content-Length only", 1);
        else
            hanswer_text(c, 413, "bad_request", "a paths-info body is at most 1 MiB here", 1);
        return 1;
    }
    r->allow = "GET"; /* a POST elsewhere under /hf/api: its body is not read */
    hanswer_text(c, 405, "bad_request", "the Hub's API is asked with GET", 1);
    return 1;
}

/* The API requests of uid open (asked of the Hub or being sent: from
 * API_TURN on), each may hold an answer of HF_API_BODY_MAX until its
 * client has read it; and in *first its parked request that came first,
 * or NULL. Counted over the connections: each owns its request, so a
 * request that ends (or whose connection goes) leaves no trace here. */
static unsigned api_of_uid(const httpd_t *h, uid_t uid, hconn_t **first)
{
    unsigned open = 0;
    const hf_api_t *best = NULL;
    *first = NULL;
    for (list_node_t *x = list_first(&h->conns); x; x = list_next(&h->conns, x)) {
        hconn_t *o = list_entry(x, hconn_t, node);
        const hf_api_t *a = o->route == &hroute_hf_api ? o->rstate : NULL;
        if (!a || o->who.charged != uid)
            continue;
        open += a->phase >= API_TURN;
        if (a->phase == API_PARKED && (!best || a->arrival < best->arrival)) {
            best = a;
            *first = o;
        }
    }
    return open;
}

/* One of uid's open requests ended: its parked ones that now fit are
 * given their turn, first come first, each asking the Hub when its timer
 * rings (at once, but from the loop: not inside the call that ended the
 * other, which may be inside an answer being sent). */
static void api_wake(httpd_t *h, uid_t uid)
{
    hconn_t *next;
    while (!h->closing && api_of_uid(h, uid, &next) < HF_API_PER_UID && next) {
        hf_api_t *a = next->rstate;
        a->phase = API_TURN;
        hconn_wait(next, 0);
    }
}

/* The question to the Hub, c's request in API_ASKING. */
static void api_ask(hconn_t *c, hf_api_t *a)
{
    hreq_t *r = c->req;
    httpd_t *h = c->srv;
    int post = r->method == HTTP_POST;
    /* The target after "/hf" is the Hub's path, query and all. */
    char *text = NULL;
    if (asprintf(&text, "%s%s", h->d.cfg->hf_upstream, r->target + 3) < 0)
        text = NULL;
    char *hdrs = NULL;
    size_t hl = 0;
    FILE *f = open_memstream(&hdrs, &hl);
    if (f) {
        for (unsigned i = 0; i < r->ncred; i++)
            fprintf(f, "%s\r\n", r->cred[i]);
        if (post && r->content_type[0] && strcmp(r->content_type, "?") != 0)
            fprintf(f, "Content-Type: %s\r\n", r->content_type);
        if (fclose(f))
            hdrs = NULL;
    }
    if (!text || !hdrs) {
        free(text);
        free(hdrs);
        api_fail(c, 500, "internal", "out of memory");
        return;
    }
    /* A POST's body is the client's, possibly empty (Content-Length: 0). */
    const char *body = post ? (bytebuf_len(&r->body) ? bytebuf_data(&r->body) : "") : NULL;
    hub_req_opts_t o = {.method = post ? "POST" : "GET",
                        .headers = hdrs,
                        .body = body,
                        .body_len = post ? bytebuf_len(&r->body) : 0,
                        .wanted = hub_wanted,
                        .nwanted = HUB_N,
                        .max_hops = 0, /* a redirect is the client's to follow, through the front */
                        .keep = HUB_BODY_ANY,
                        .body_max = HF_API_BODY_MAX,
                        .budget = hub_budget(),
                        .cost = HF_JSON_COST,
                        .loop = h->d.loop};
    const char *why = "bad URL";
    int rc = hub_req_start(jobs_http(h->d.jobs), text, &o, api_answered, a, &a->req, &why);
    free(hdrs);
    free(text);
    if (rc == -EINVAL)
        api_fail(c, 400, "bad_url", why);
    else if (rc)
        api_fail(c, rc == -EACCES ? 403 : 500, rc == -EACCES ? "forbidden" : "internal",
                 rc == -EACCES ? "the network policy does not allow the Hub's host"
                               : "cannot ask the Hub");
}

/* hroute_t.timer: a parked request's turn (api_wake), or the end of its
 * wait: its uid's open answers are still being read. */
static void api_timer(hconn_t *c)
{
    hf_api_t *a = c->rstate;
    if (a->phase == API_TURN) {
        a->phase = API_ASKING;
        api_ask(c, a);
        return;
    }
    if (a->phase != API_PARKED)
        return;
    double waited = a->wait_ms / 1000.0;
    char msg[200];
    snprintf(msg, sizeof msg,
             "uid %u has %d answers of the Hub's API still being read (or asked): none ended "
             "within %.1f s",
             (unsigned)c->who.charged, HF_API_PER_UID, waited);
    log_info("http front uid %u: %s: refused (429): waited %.1f s for its turn",
             (unsigned)c->who.uid, c->req->target, waited);
    api_fail(c, 429, "too_many_requests", msg);
}

/* hroute_t.handle: the route's checks, then the question to the Hub, or
 * the wait for its turn. */
static void api_handle(hconn_t *c, void *mem)
{
    hreq_t *r = c->req;
    httpd_t *h = c->srv;
    api_mem_t *m = mem;
    route_t route = api_route(r->target);
    if (route == ROUTE_NONE) {
        hanswer_text(c, 404, "bad_url",
                     "the front serves /hf/api/{models,datasets,spaces}/{repo} with "
                     "/revision/{rev}, /tree/{rev}[/{path}] or /paths-info/{rev}",
                     0);
        return;
    }
    if (route == ROUTE_XET_TOKEN) {
        hanswer_add_line(c, hub_wanted[HUB_ERROR_CODE].name, "EntryNotFound");
        hanswer_add_line(c, hub_wanted[HUB_ERROR_MESSAGE].name, "xet is not served through hubd");
        hanswer_text(c, 404, "bad_url",
                     "xet is not served through hubd: files come over plain HTTP", 0);
        return;
    }
    int post = route == ROUTE_PATHS_INFO;
    if (r->method != (post ? HTTP_POST : HTTP_GET)) {
        r->allow = post ? "POST" : "GET";
        hanswer_text(c, 405, "bad_request",
                     post ? "paths-info is asked with POST" : "the Hub's API is asked with GET", 0);
        return;
    }
    hf_api_t *a = calloc(1, sizeof *a);
    if (!a) {
        hanswer_text(c, 500, "internal", "out of memory", 0);
        return;
    }
    bytebuf_init(&a->body, HF_API_BODY_MAX);
    a->c = c;
    c->rstate = a; /* from here the request's end frees it */
    if (hanswer_quota_begin(c))
        return;
    a->quota_counted = 1;
    a->arrival = ++m->arrivals;
    hconn_t *first;
    if (api_of_uid(h, c->who.charged, &first) >= HF_API_PER_UID || first) {
        /* Its turn comes after its uid's parked ones: nothing is asked (or
         * held) meanwhile, and the wait is bounded. */
        a->phase = API_PARKED;
        log_debug("http front uid %u: %s: waits its turn (%d open)", (unsigned)c->who.uid,
                  r->target, HF_API_PER_UID);
        a->wait_ms = h->d.cfg->http_header_timeout_ms; /* read now: a SIGHUP applies to the next */
        hconn_wait(c, a->wait_ms);
        return;
    }
    a->phase = API_ASKING;
    api_ask(c, a);
}

const hroute_t hroute_hf_api = {
    .match = api_match,
    .post = 1,
    .takes_body = api_takes_body,
    .unread_body = api_unread_body,
    .handle = api_handle,
    .abandon = api_abandon,
    .timer = api_timer,
    .mem_size = sizeof(api_mem_t),
};
