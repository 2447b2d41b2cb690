/* verbs_hf: HFREPO (issue 22), a repo's file list from the Hugging Face
 * Hub, asked with the client's own headers, for `hubctl hf download` and
 * the Python client's snapshot_download:
 *
 *   HFREPO id= repo= [type=] [revision=] [header=]...
 *   → REPO id= repo= type= commit= files= size= resolve=   (with an fd)
 *
 * hubd asks `{hf_upstream}/api/{type}s/{repo}/revision/{rev}?blobs=true`
 * through the downloads' HTTP client (proxies, network policy: as the HTTP
 * front's /hf/api routes do), follows a renamed repo's relative redirects
 * (at most HF_REPO_MAX_HOPS), keeps at most HF_REPO_BODY_MAX bytes of the
 * answer, and parses it in a pool item (a big repo's JSON is MBs), which
 * also writes the listing (hf_repo.h) into a memfd: the reply passes a
 * read-only descriptor of it, so that a listing of 100 000 files costs the
 * session one line, not a stream of them. The request counts as one of its
 * uid's waiting requests (max_requests_per_user) and of the session's
 * (SESSION_MAX_FETCHES).
 *
 * A request's state is its hfrepo_t, in s->hfrepos until answered. One
 * close path: the session's close aborts the request to the Hub; a pool
 * item still out is left to free it (r->s NULL). Loop thread, but for the
 * pool item's listing_work. */
#include "bytebuf.h"
#include "hf_repo.h"
#include "http.h"
#include "log.h"
#include "url.h"
#include "verbs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HF_REPO_BODY_MAX (16u << 20) /* the Hub's answer, bytes */
#define HF_REPO_MAX_HOPS 5           /* relative redirects (renamed repos) followed */

enum { HUB_ERROR_CODE, HUB_ERROR_MESSAGE, HUB_N };
static const http_want_t hub_wanted[HUB_N] = {
    [HUB_ERROR_CODE] = {"X-Error-Code", 0},
    [HUB_ERROR_MESSAGE] = {"X-Error-Message", 0},
};

typedef struct hfrepo {
    session_t *s;     /* NULL once the session left: the pool item's end frees it */
    list_node_t node; /* in s->hfrepos, while s is set */
    char id[VERB_ID_MAX + 1];
    char type[8];    /* "model", "dataset", "space" */
    char *repo;      /* as asked */
    char *hdrs;      /* the client's header lines ("Name: value\r\n"...) */
    http_req_t *req; /* the request to the Hub in flight, or NULL */
    url_t url;       /* the hop asked */
    unsigned hops;
    int status;       /* the Hub's */
    char *location;   /* its Location, or NULL */
    char *hub[HUB_N]; /* the values of hub_wanted */
    bytebuf_t body;   /* its answer, at most HF_REPO_BODY_MAX */
    uv_work_t work;   /* the listing */
    int work_out;     /* the pool item is out: only it may free this */
    /* the pool item's outcome */
    int rc; /* 0, or a negative errno */
    hf_listing_t listing;
    int fd; /* the listing's read-only descriptor, or -1 */
} hfrepo_t;

static void answer_forget(hfrepo_t *r)
{
    free(r->location);
    r->location = NULL;
    for (int i = 0; i < HUB_N; i++) {
        free(r->hub[i]);
        r->hub[i] = NULL;
    }
}

static void hfrepo_free(hfrepo_t *r)
{
    answer_forget(r);
    url_free(&r->url);
    bytebuf_free(&r->body);
    hf_listing_free(&r->listing);
    if (r->fd >= 0)
        close(r->fd);
    free(r->repo);
    free(r->hdrs);
    free(r);
}

/* r waits no more: out of the session's list and counts. */
static void hfrepo_unlink(hfrepo_t *r)
{
    session_t *s = r->s;
    quota_request_end(&s->srv->quota, &s->who);
    s->nfetches--;
    list_remove(&r->node);
    r->s = NULL;
}

/* The one end of an answered request: the reply is sent by the caller
 * first; r leaves the session (which may read on) and goes. */
static void hfrepo_end(hfrepo_t *r)
{
    session_t *s = r->s;
    hfrepo_unlink(r);
    hfrepo_free(r);
    session_kick(s);
}

static void hfrepo_fail(hfrepo_t *r, const char *code, const char *msg)
{
    if (r->req) {
        http_req_t *req = r->req;
        r->req = NULL;
        http_req_abort(req);
    }
    reply_err(&r->s->t, r->id, code, msg);
    hfrepo_end(r);
}

/* ---- the listing, in the pool ---------------------------------------------- */

/* A sealed memfd holding the listing, reopened read-only (through /proc)
 * where it can be: the client can read it, never change it. */
static int listing_fd(const char *lines, size_t len)
{
    int fd = memfd_create("hubd-hfrepo", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, lines + off, len - off);
        if (n < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
        off += (size_t)n;
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int ro = open(proc, O_RDONLY | O_CLOEXEC);
    if (ro >= 0) {
        close(fd);
        return ro;
    }
    return fd; /* sealed: read-only in effect */
}

static void listing_work(uv_work_t *w)
{
    hfrepo_t *r = w->data;
    r->rc = hf_repo_listing(bytebuf_data(&r->body), bytebuf_len(&r->body), &r->listing);
    bytebuf_free(&r->body); /* done with: the answer may be 16 MiB */
    if (!r->rc) {
        int fd = listing_fd(r->listing.lines ? r->listing.lines : "", r->listing.lines_len);
        if (fd < 0)
            r->rc = fd;
        else
            r->fd = fd;
        hf_listing_free(&r->listing);
    }
}

static void after_listing(uv_work_t *w, int status)
{
    hfrepo_t *r = w->data;
    r->work_out = 0;
    if (!r->s) { /* the session went meanwhile */
        hfrepo_free(r);
        return;
    }
    if (status) {
        hfrepo_fail(r, "shutting_down", "the server is shutting down");
        return;
    }
    if (r->rc == -EINVAL) {
        hfrepo_fail(r, "http_parse", r->listing.error ? r->listing.error : "bad answer");
        return;
    }
    if (r->rc) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot write the file list: %s", strerror(-r->rc));
        hfrepo_fail(r, "internal", msg);
        return;
    }
    session_t *s = r->s;
    const hf_listing_t *l = &r->listing;
    const char *repo = l->id[0] ? l->id : r->repo; /* a renamed repo: its name now */
    char *resolve = NULL;
    if (asprintf(&resolve, "%s/%s%s/resolve/%s/", s->srv->cfg->hf_upstream, hf_repo_prefix(r->type),
                 repo, l->commit) < 0) {
        hfrepo_fail(r, "internal", "out of memory");
        return;
    }
    reply_t rep;
    reply_begin(&rep, "REPO");
    proto_add(&rep.w, "id", r->id);
    proto_add(&rep.w, "repo", repo);
    proto_add(&rep.w, "type", r->type);
    proto_add(&rep.w, "commit", l->commit);
    proto_add_u64(&rep.w, "files", l->files);
    proto_add_u64(&rep.w, "size", l->size);
    proto_add(&rep.w, "resolve", resolve);
    free(resolve);
    size_t n = reply_end(&rep);
    job_fd_t *fd = n ? job_fd_new(r->fd) : NULL; /* takes r->fd, also on failure */
    if (n)
        r->fd = -1;
    if (!fd) {
        hfrepo_fail(r, "internal", n ? "out of memory" : "the REPO line is too long");
        return;
    }
    log_info("session pid %d uid %d: HFREPO %s%s@%s: %llu files", (int)s->who.pid, (int)s->who.uid,
             hf_repo_prefix(r->type), repo, l->commit, (unsigned long long)l->files);
    transport_send_fd(&s->t, rep.buf, n, fd);
    job_fd_unref(fd); /* the transport holds its own reference */
    hfrepo_end(r);
}

/* ---- the request to the Hub ------------------------------------------------- */

static char *dup_or_null(const char *v)
{
    return v ? strdup(v) : NULL;
}

static void too_big(hfrepo_t *r)
{
    char msg[160];
    snprintf(msg, sizeof msg, "the Hub's answer is larger than %u MiB", HF_REPO_BODY_MAX >> 20);
    hfrepo_fail(r, "too_large", msg);
}

static int on_headers(http_req_t *req, const http_response_t *resp, void *data)
{
    hfrepo_t *r = data;
    (void)req;
    answer_forget(r);
    r->status = resp->status;
    r->location = dup_or_null(resp->location);
    for (int i = 0; i < HUB_N; i++)
        r->hub[i] = dup_or_null(resp->wanted[i]);
    if (resp->status != 200)
        return HTTP_BODY_DISCARD; /* a redirect's or an error's text */
    if (resp->content_length > (int64_t)HF_REPO_BODY_MAX) {
        too_big(r); /* aborts the request: http.c allows it from here */
        return HTTP_BODY_DISCARD;
    }
    return HTTP_BODY_DELIVER;
}

static void on_body(http_req_t *req, buf_t *buf, const char *p, size_t n, void *data)
{
    hfrepo_t *r = data;
    (void)req, (void)buf;
    int rc = bytebuf_append(&r->body, p, n);
    if (rc == -ENOBUFS)
        too_big(r); /* a chunked answer that goes on and on */
    else if (rc)
        hfrepo_fail(r, "internal", "out of memory");
}

static int ask(hfrepo_t *r);

/* The Hub's refusal: its status, and its own words. */
static void refused(hfrepo_t *r)
{
    char code[16], msg[600];
    snprintf(code, sizeof code, "http_%d", r->status);
    const char *ec = r->hub[HUB_ERROR_CODE], *em = r->hub[HUB_ERROR_MESSAGE];
    if (ec || em)
        snprintf(msg, sizeof msg, "%s%s%s", ec ? ec : "", ec && em ? ": " : "", em ? em : "");
    else
        snprintf(msg, sizeof msg, "the Hub answered HTTP %d", r->status);
    hfrepo_fail(r, code, msg);
}

static void on_done(http_req_t *req, const char *code, const char *msg, void *data)
{
    hfrepo_t *r = data;
    (void)req;
    r->req = NULL;
    if (code) {
        hfrepo_fail(r, code, msg ? msg : code);
        return;
    }
    if (r->status >= 300 && r->status < 400 && r->location) {
        url_t next;
        char *abs = NULL;
        int ok = url_resolve(&r->url, r->location, &abs) == 0 && url_parse(abs, &next, NULL) == 0;
        free(abs);
        if (!ok || !url_same_origin(&r->url, &next)) {
            if (ok)
                url_free(&next);
            hfrepo_fail(r, "redirect", "the Hub redirected the repo's API away from itself");
            return;
        }
        if (++r->hops > HF_REPO_MAX_HOPS) {
            url_free(&next);
            hfrepo_fail(r, "redirect", "the Hub redirected too many times");
            return;
        }
        url_free(&r->url);
        r->url = next;
        if (ask(r))
            hfrepo_fail(r, "internal", "cannot ask the Hub");
        return;
    }
    if (r->status != 200) {
        refused(r);
        return;
    }
    r->work.data = r;
    r->work_out = 1;
    if (uv_queue_work(r->s->srv->loop, &r->work, listing_work, after_listing)) {
        r->work_out = 0;
        hfrepo_fail(r, "internal", "cannot queue the Hub's answer for parsing");
    }
}

static const http_req_cbs_t hub_cbs = {on_headers, on_body, on_done};

static int ask(hfrepo_t *r)
{
    http_req_opts_t o = {.extra_headers = r->hdrs, .wanted = hub_wanted, .nwanted = HUB_N};
    bytebuf_free(&r->body);
    bytebuf_init(&r->body, HF_REPO_BODY_MAX);
    int rc = http_request_opts(jobs_http(r->s->srv->jobs), &r->url, &o, &hub_cbs, r, &r->req);
    if (rc)
        r->req = NULL;
    return rc;
}

/* ---- the verb --------------------------------------------------------------- */

/* The client's header= values as header lines, checked as a FETCH's are
 * (jobs_cred_tag: cred.h's rules). 0, or -EINVAL / -ENOMEM. */
static int header_lines(session_t *s, const proto_msg_t *m, char **out)
{
    const char *headers[CRED_MAX_HEADERS];
    size_t n = 0;
    for (size_t i = 0; i < m->nfields; i++) {
        if (strcmp(m->fields[i].key, "header") != 0)
            continue;
        if (n == CRED_MAX_HEADERS)
            return -EINVAL;
        headers[n++] = m->fields[i].value;
    }
    char tag[65];
    int rc = jobs_cred_tag(s->srv->jobs, headers, n, tag);
    if (rc)
        return rc;
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    if (!f)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\r\n", headers[i]);
    return fclose(f) ? -ENOMEM : 0;
}

void verbs_hfrepo(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)arg;
    const char *repo = proto_get(m, "repo");
    const char *type = proto_get(m, "type");
    const char *rev = proto_get(m, "revision");
    type = type && *type ? type : "model";
    rev = rev && *rev ? rev : "main";
    if (!repo || !hf_repo_id_ok(repo)) {
        reply_err(&s->t, id, "bad_request", "HFREPO needs repo=ORG/NAME (the Hub's repo id rules)");
        return;
    }
    if (!hf_repo_prefix(type)) {
        reply_err(&s->t, id, "bad_request", "type= is model, dataset or space");
        return;
    }
    if (strlen(rev) > 256 || rev[strcspn(rev, "\r\n")]) {
        reply_err(&s->t, id, "bad_request", "revision= is at most 256 bytes of one line");
        return;
    }
    hfrepo_t *r = calloc(1, sizeof *r);
    if (!r) {
        reply_err(&s->t, id, "internal", "out of memory");
        return;
    }
    r->fd = -1;
    bytebuf_init(&r->body, HF_REPO_BODY_MAX);
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->type, sizeof r->type, "%s", type);
    int rc = header_lines(s, m, &r->hdrs);
    if (rc) {
        hfrepo_free(r);
        reply_err(&s->t, id, rc == -ENOMEM ? "internal" : "bad_request",
                  rc == -ENOMEM ? "out of memory" : "a header= is not valid (at most 16)");
        return;
    }
    char *text = hf_repo_api_url(s->srv->cfg->hf_upstream, type, repo, rev);
    const char *why = "out of memory";
    if (!text || !(r->repo = strdup(repo)) || url_parse(text, &r->url, &why)) {
        free(text);
        hfrepo_free(r);
        reply_err(&s->t, id, "bad_request", why);
        return;
    }
    free(text);
    unsigned waiting;
    if (quota_request_begin(&s->srv->quota, &s->who, s->srv->cfg->max_requests_per_user,
                            &waiting)) {
        hfrepo_free(r);
        char msg[160];
        snprintf(msg, sizeof msg, "uid %u has %u requests waiting already (max_requests_per_user)",
                 (unsigned)s->who.uid, waiting);
        reply_err(&s->t, id, "too_many_requests", msg);
        return;
    }
    r->s = s;
    s->nfetches++;
    list_push_front(&s->hfrepos, &r->node);
    rc = ask(r);
    if (rc)
        hfrepo_fail(r, rc == -EACCES ? "forbidden" : "internal",
                    rc == -EACCES ? "the network policy does not allow the Hub's host"
                                  : "cannot ask the Hub");
}

void verbs_hf_close(session_t *s)
{
    list_node_t *n;
    while ((n = list_first(&s->hfrepos))) {
        hfrepo_t *r = list_entry(n, hfrepo_t, node);
        hfrepo_unlink(r);
        if (r->req) {
            http_req_t *req = r->req;
            r->req = NULL;
            http_req_abort(req);
        }
        if (!r->work_out) /* else the pool item frees it */
            hfrepo_free(r);
    }
}
