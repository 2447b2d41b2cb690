/* hub_req: one request to the Hub, its redirects and its bounded body
 * (hub_req.h). Gathered from the three copies that hf_meta.c, verbs_hf.c
 * and httpd_hf_api.c each had, so that the Hub is asked one way: the
 * same redirects, bounds and budget for all three. */
#include "hub_req.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hub_req {
    struct http_client *http;
    http_req_t *req;  /* the hop in flight, or NULL */
    url_t url;        /* the hop asked */
    unsigned hops;    /* redirects followed so far */
    hub_req_opts_t o; /* the caller's, headers copied, body not kept past the first hop */
    char *headers;    /* o.headers' copy */
    hub_req_cb cb;
    void *arg;
    int keep_body;  /* this hop's body is gathered */
    hub_answer_t a; /* the last hop's answer: its strings malloc'd */
    /* A body taken at most HUB_BODY_PER_TURN bytes a turn of the loop
     * (o.loop set): the copy of a body into memory not touched before
     * costs ~2.7 ms a MiB on a virtual machine that faults each page in,
     * and the loop reads 32 buffers of a socket (8 MiB) in one go. */
    size_t turn_bytes; /* taken since the turn began */
    uint64_t turn_at;  /* the loop's time when it did */
    int timer_on;      /* turn is initialised: closed before r is freed */
    uv_timer_t turn;   /* resumes a paused read at the loop's next turn */
};

#define HUB_BODY_PER_TURN (1u << 20)

/* The daemon's (hub_req.h). */
static hub_budget_t daemon_budget = {.max = HUB_BUDGET};

hub_budget_t *hub_budget(void)
{
    return &daemon_budget;
}

void hub_budget_release(hub_budget_t *b, size_t n)
{
    if (b)
        b->used = n < b->used ? b->used - n : 0;
}

size_t hub_answer_take_body(hub_answer_t *a, bytebuf_t *out)
{
    *out = a->body;
    bytebuf_init(&a->body, 0);
    size_t n = a->charged;
    a->charged = 0;
    return n;
}

void hub_refusal(int status, const char *ec, const char *em, char code[16], char *msg, size_t cap)
{
    snprintf(code, 16, "http_%d", status);
    if (ec || em)
        snprintf(msg, cap, "%s%s%s", ec ? ec : "", ec && em ? ": " : "", em ? em : "");
    else
        snprintf(msg, cap, "the Hub answered HTTP %d", status);
}

/* Forgets the last hop's answer (a redirect's, before the next hop). */
static void answer_forget(hub_req_t *r)
{
    hub_answer_t *a = &r->a;
    free((char *)a->location);
    free((char *)a->etag);
    free((char *)a->content_range);
    free((char *)a->content_type);
    for (size_t i = 0; i < r->o.nwanted; i++)
        free((char *)a->wanted[i]);
    bytebuf_free(&a->body);
    hub_budget_release(r->o.budget, a->charged);
    memset(a, 0, sizeof *a);
    bytebuf_init(&a->body, r->o.body_max);
}

static void turn_closed(uv_handle_t *h)
{
    free(h->data);
}

/* r goes: its timer first, when it has one (freed in its close callback). */
static void req_free(hub_req_t *r)
{
    answer_forget(r);
    bytebuf_free(&r->a.body);
    url_free(&r->url);
    free(r->headers);
    if (r->timer_on)
        uv_close((uv_handle_t *)&r->turn, turn_closed);
    else
        free(r);
}

/* The one end: the asker is told, then the request goes. */
static void finish(hub_req_t *r, const char *code, const char *msg)
{
    if (r->req) { /* failed from inside a callback of http.c: it allows the abort */
        http_req_t *req = r->req;
        r->req = NULL;
        http_req_abort(req);
    }
    r->cb(r->arg, code, code ? (msg ? msg : code) : NULL, code ? NULL : &r->a);
    req_free(r);
}

static char *dup_or_null(const char *v)
{
    return v ? strdup(v) : NULL;
}

static void too_large(hub_req_t *r)
{
    char msg[160];
    snprintf(msg, sizeof msg, "the Hub's answer is larger than %zu MiB", r->o.body_max >> 20);
    finish(r, "too_large", msg);
}

static void over_budget(hub_req_t *r)
{
    char msg[200];
    snprintf(msg, sizeof msg,
             "the Hub's answers being read or parsed, for all users, hold the %zu MiB of "
             "hubd's memory they may have: try again shortly",
             r->o.budget->max >> 20);
    finish(r, "busy", msg);
}

/* What n bytes of body are charged. */
static uint64_t charge_of(const hub_req_t *r, uint64_t n)
{
    return n * (r->o.cost ? r->o.cost : 1);
}

/* Whether n more bytes of body fit the budget (none: always). */
static int budget_fits(const hub_req_t *r, uint64_t n)
{
    const hub_budget_t *b = r->o.budget;
    return !b || (b->used <= b->max && charge_of(r, n) <= b->max - b->used);
}

static int on_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    hub_req_t *r = data;
    (void)req;
    answer_forget(r);
    hub_answer_t *a = &r->a;
    a->status = resp->status;
    a->content_length = resp->content_length;
    a->location = dup_or_null(resp->location);
    a->etag = dup_or_null(resp->etag);
    a->content_range = dup_or_null(resp->content_range);
    a->content_type = dup_or_null(resp->content_type);
    for (size_t i = 0; i < r->o.nwanted; i++)
        a->wanted[i] = dup_or_null(resp->wanted[i]);
    r->keep_body = r->o.keep == HUB_BODY_ANY || (r->o.keep == HUB_BODY_OK && resp->status == 200);
    if (!r->keep_body)
        return HTTP_BODY_DISCARD;
    if (resp->content_length > (int64_t)r->o.body_max)
        too_large(r); /* aborts the request: http.c allows it from here */
    else if (resp->content_length > 0 && !budget_fits(r, (uint64_t)resp->content_length))
        over_budget(r);
    else if (resp->content_length > 0) /* one allocation, not a doubling's copies */
        (void)bytebuf_reserve(&r->a.body, (size_t)resp->content_length);
    return HTTP_BODY_DELIVER;
}

/* The loop's next turn: the read goes on, with a turn's bytes. */
static void on_turn(uv_timer_t *t)
{
    hub_req_t *r = t->data;
    r->turn_bytes = 0;
    if (r->req)
        http_req_set_paused(r->req, 0);
}

/* n more bytes of body in this turn: past HUB_BODY_PER_TURN the read
 * waits for the next turn (the rest of the read buffer in hand is still
 * delivered), so that the loop serves the others meanwhile. */
static void pace(hub_req_t *r, size_t n)
{
    if (!r->o.loop || !r->req)
        return;
    uint64_t now = uv_now(r->o.loop);
    if (now != r->turn_at) {
        r->turn_at = now;
        r->turn_bytes = 0;
    }
    r->turn_bytes += n;
    if (r->turn_bytes < HUB_BODY_PER_TURN)
        return;
    if (!r->timer_on) {
        if (uv_timer_init(r->o.loop, &r->turn))
            return; /* not paced: read on */
        r->turn.data = r;
        r->timer_on = 1;
    }
    http_req_set_paused(r->req, 1);
    uv_timer_start(&r->turn, on_turn, 0, 0);
}

static void on_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    hub_req_t *r = data;
    (void)req, (void)buf;
    if (!r->keep_body)
        return;
    if (!budget_fits(r, n)) {
        over_budget(r);
        return;
    }
    int rc = bytebuf_append(&r->a.body, p, n);
    if (rc == -ENOBUFS) {
        too_large(r); /* a chunked answer that goes on and on */
        return;
    }
    if (rc) {
        finish(r, "internal", "out of memory");
        return;
    }
    r->a.charged += charge_of(r, n);
    if (r->o.budget)
        r->o.budget->used += charge_of(r, n);
    pace(r, n);
}

static int send_hop(hub_req_t *r);

/* A redirect of the Hub's own origin, followed while hops are left: 1
 * when it was (or the request ended), 0 when it is the answer. */
static int follow(hub_req_t *r)
{
    const hub_answer_t *a = &r->a;
    if (!r->o.max_hops || a->status < 300 || a->status >= 400 || !a->location)
        return 0;
    url_t next;
    char *abs = NULL;
    int ok = url_resolve(&r->url, a->location, &abs) == 0 && url_parse(abs, &next, NULL) == 0;
    free(abs);
    if (!ok)
        return 0;
    if (!url_same_origin(&r->url, &next)) {
        url_free(&next);
        return 0; /* elsewhere (an LFS file's CDN): the caller decides */
    }
    if (++r->hops > r->o.max_hops) {
        url_free(&next);
        finish(r, "redirect", "the Hub redirected too many times");
        return 1;
    }
    url_free(&r->url);
    r->url = next;
    int rc = send_hop(r);
    if (rc)
        finish(r, rc == -EACCES ? "forbidden" : "internal",
               rc == -EACCES ? "the network policy does not allow the Hub's host"
                             : "cannot ask the Hub");
    return 1;
}

static void on_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    hub_req_t *r = data;
    (void)req;
    r->req = NULL;
    if (code) {
        finish(r, code, msg);
        return;
    }
    if (!follow(r))
        finish(r, NULL, NULL);
}

static const http_req_cbs_t hub_cbs = {on_headers, on_body, on_done};

static int send_hop(hub_req_t *r)
{
    http_req_opts_t o = {.method = r->o.method,
                         .extra_headers = r->headers,
                         .body = r->hops ? NULL : r->o.body,
                         .body_len = r->hops ? 0 : r->o.body_len,
                         .wanted = r->o.wanted,
                         .nwanted = r->o.nwanted};
    int rc = http_request_opts(r->http, &r->url, &o, &hub_cbs, r, &r->req);
    if (rc)
        r->req = NULL;
    return rc == -EACCES ? -EACCES : rc ? -ENOMEM : 0;
}

int hub_req_start(struct http_client *http, const char *url, const hub_req_opts_t *o, hub_req_cb cb,
                  void *arg, hub_req_t **out, const char **why)
{
    hub_req_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->http = http;
    r->o = *o;
    if (o->body)
        r->o.max_hops = 0; /* a body is sent once */
    r->cb = cb;
    r->arg = arg;
    bytebuf_init(&r->a.body, o->body_max);
    int rc = url_parse(url, &r->url, why) ? -EINVAL : 0;
    if (!rc && o->headers && !(r->headers = strdup(o->headers)))
        rc = -ENOMEM;
    if (!rc)
        rc = send_hop(r);
    if (rc) {
        req_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void hub_req_abort(hub_req_t *r)
{
    if (r->req)
        http_req_abort(r->req);
    req_free(r);
}
