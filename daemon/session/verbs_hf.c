/* verbs_hf: HFREPO, a repo's file list from the Hugging Face
 * Hub, asked with the client's own headers, for `hubctl hf download` and
 * the Python client's snapshot_download:
 *
 *   HFREPO id= repo= [type=] [revision=] [header=]...
 *   → REPO id= repo= type= commit= files= size= resolve=   (with an fd)
 *
 * hubd asks `{hf_upstream}/api/{type}s/{repo}/revision/{rev}?blobs=true`
 * (hub_req.h: the downloads' HTTP client, proxies, network policy, as the
 * HTTP front's /hf/api routes), follows a renamed repo's relative
 * redirects (at most HUB_REQ_MAX_HOPS), keeps at most HF_REPO_BODY_MAX
 * bytes of the answer, and parses it in a pool item (a big repo's JSON is
 * MBs), which also writes the listing (hf_repo.h) into a file of the
 * store's tmp/ that has no name (store_tmp_unnamed): the reply passes a
 * read-only descriptor of it, so that a listing of 100 000 files costs the
 * session one line, not a stream of them.
 *
 * What HFREPO can make hubd hold, bounded three ways (a client must not
 * be able to make hubd hold the Hub's answers without bound):
 * - a uid has at most QUOTA_USER_MAX_HFREPOS in flight, across its
 *   sessions (more: ERR too_many_requests at once); each also counts as
 *   one of its waiting requests (max_requests_per_user) and of the
 *   session's (SESSION_MAX_FETCHES);
 * - the Hub's answers being read or parsed, HFREPO's and the HTTP front's
 *   /hf/api routes' together, for all users, hold at most the daemon's one
 *   budget (hub_budget(), HUB_BUDGET bytes), from the first byte read
 *   until the pool item is done with them: each byte is charged
 *   HF_REPO_COST, itself and what the streaming parse may hold besides
 *   (hf_repo.h; no tree is made, and the lines go to the listing's file
 *   as they are read). Past it, ERR busy at once, and the client asks
 *   again (hubctl and the Python client do not wait on a shared budget
 *   they cannot see);
 * - an answered listing is on the cache's disk, not in hubd's memory (a
 *   memfd's pages would be hubd's for as long as the client keeps the
 *   descriptor, and a client may keep thousands): it goes with its last
 *   descriptor, and nothing can give it a name (O_TMPFILE|O_EXCL).
 *
 * A request's state is its hfrepo_t, in s->hfrepos until answered. One
 * close path: the session's close aborts the request to the Hub; a pool
 * item still out is left to free it (r->s NULL). Loop thread, but for the
 * pool item's listing_work. */
#include "hf_repo.h"
#include "hub_req.h"
#include "log.h"
#include "store.h"
#include "verbs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HF_REPO_BODY_MAX (16u << 20) /* the Hub's answer, bytes */

enum { HUB_ERROR_CODE, HUB_ERROR_MESSAGE, HUB_N };
static const http_want_t hub_wanted[HUB_N] = {
    [HUB_ERROR_CODE] = {"X-Error-Code", 0},
    [HUB_ERROR_MESSAGE] = {"X-Error-Message", 0},
};

typedef struct hfrepo {
    session_t *s;     /* NULL once the session left: the pool item's end frees it */
    list_node_t node; /* in s->hfrepos, while s is set */
    char id[VERB_ID_MAX + 1];
    char type[8];   /* "model", "dataset", "space" */
    char *repo;     /* as asked */
    hub_req_t *req; /* the request to the Hub in flight, or NULL */
    bytebuf_t body; /* its answer, for the pool item */
    size_t charged; /* for body, to hub_budget(): given back when the pool item is done */
    store_t *store; /* where the listing's file goes */
    uv_work_t work; /* the listing */
    int work_out;   /* the pool item is out: only it may free this */
    /* the pool item's outcome */
    int rc; /* 0, or a negative errno */
    hf_listing_t listing;
    int fd;  /* the listing's read-only descriptor, or -1 */
    int wfd; /* hubd's writable one, to empty it later (listings.h), or -1 */
} hfrepo_t;

static void hfrepo_free(hfrepo_t *r)
{
    bytebuf_free(&r->body);
    hub_budget_release(hub_budget(), r->charged);
    hf_listing_free(&r->listing);
    if (r->fd >= 0)
        close(r->fd);
    if (r->wfd >= 0)
        close(r->wfd);
    free(r->repo);
    free(r);
}

/* r waits no more: out of the session's list and counts. */
static void hfrepo_unlink(hfrepo_t *r)
{
    session_t *s = r->s;
    quota_request_end(&s->srv->quota, &s->who);
    quota_hfrepo_end(&s->srv->quota, &s->who);
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
        hub_req_t *req = r->req;
        r->req = NULL;
        hub_req_abort(req);
    }
    reply_err(&r->s->t, r->id, code, msg);
    hfrepo_end(r);
}

/* ---- the listing, in the pool ---------------------------------------------- */

/* The listing, written by hf_repo_listing_to as it reads the Hub's answer,
 * into a file of the store's tmp/ with no name, reopened read-only
 * (through /proc): the client can read it, never change it, and its bytes
 * are on disk, not in hubd's memory (nor are they while it is written).
 * 0400, so that not even a reopen of the client's through its own /proc
 * may write it. The read-only descriptor, or a negative errno (-EINVAL:
 * the answer is not a listing, r->listing.error says why); the file goes
 * with its descriptors on any failure. */
static int listing_write(hfrepo_t *r)
{
    int fd, rc = store_tmp_unnamed(r->store, &fd);
    if (rc)
        return rc;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        rc = -errno;
        close(fd);
        return rc;
    }
    rc = hf_repo_listing_to(bytebuf_data(&r->body), bytebuf_len(&r->body), f, &r->listing);
    int ro = -1;
    if (!rc) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        ro = fchmod(fd, 0400) ? -1 : open(proc, O_RDONLY | O_CLOEXEC);
        rc = ro < 0 ? -errno : 0;
        /* hubd keeps a writable descriptor: the listing counts against its
         * uid until hubd empties it (listings.h) */
        if (!rc && (r->wfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            rc = -errno;
            close(ro);
        }
    }
    fclose(f); /* flushed already (hf_repo_listing_to) */
    return rc ? rc : ro;
}

static void listing_work(uv_work_t *w)
{
    hfrepo_t *r = w->data;
    int fd = listing_write(r);
    bytebuf_free(&r->body); /* done with: the answer may be 16 MiB (still charged) */
    r->rc = fd < 0 ? fd : 0;
    r->fd = fd < 0 ? -1 : fd;
}

static void after_listing(uv_work_t *w, int status)
{
    hfrepo_t *r = w->data;
    r->work_out = 0;
    hub_budget_release(hub_budget(), r->charged); /* parsed, and the answer freed */
    r->charged = 0;
    if (!r->s) { /* the session went meanwhile */
        hfrepo_free(r);
        return;
    }
    if (status) {
        hfrepo_fail(r, "shutting_down", "the server is shutting down");
        return;
    }
    if (r->rc == -EINVAL && r->listing.error) {
        hfrepo_fail(r, "http_parse", r->listing.error);
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
    /* Counted against its user from now on, and emptied when its session
     * goes or newer ones need the room (listings.h). */
    int added = listings_add(s->srv->listings, s, s->who.charged, r->wfd, l->bytes,
                             s->srv->cfg->max_listing_bytes_per_user);
    r->wfd = -1;
    if (added) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 added == -EFBIG
                     ? "the file list is %llu bytes, more than max_listing_bytes_per_user"
                     : "out of memory for a file list of %llu bytes",
                 (unsigned long long)l->bytes);
        hfrepo_fail(r, added == -EFBIG ? "too_large" : "internal", msg);
        return;
    }
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
    transport_send_fd(&s->t, NULL, 0, rep.buf, n, fd);
    job_fd_unref(fd); /* the transport holds its own reference */
    hfrepo_end(r);
}

/* ---- the request to the Hub ------------------------------------------------- */

/* The Hub's answer (hub_req.h; same-origin redirects followed): a 200's
 * body goes to the pool to be parsed; a redirect elsewhere or a refusal
 * ends r. */
static void answered(void *arg, const char *code, const char *msg, hub_answer_t *a)
{
    hfrepo_t *r = arg;
    r->req = NULL;
    if (code) {
        hfrepo_fail(r, code, msg);
        return;
    }
    if (a->status >= 300 && a->status < 400 && a->location) {
        hfrepo_fail(r, "redirect", "the Hub redirected the repo's API away from itself");
        return;
    }
    if (a->status != 200) {
        char hcode[16], hmsg[600];
        hub_refusal(a->status, a->wanted[HUB_ERROR_CODE], a->wanted[HUB_ERROR_MESSAGE], hcode, hmsg,
                    sizeof hmsg);
        hfrepo_fail(r, hcode, hmsg);
        return;
    }
    r->charged = hub_answer_take_body(a, &r->body);
    r->work.data = r;
    r->work_out = 1;
    if (uv_queue_work(r->s->srv->loop, &r->work, listing_work, after_listing)) {
        r->work_out = 0;
        hfrepo_fail(r, "internal", "cannot queue the Hub's answer for parsing");
    }
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
    char *hdrs = NULL;
    int rc = header_lines(s, m, &hdrs);
    if (rc) {
        free(hdrs);
        reply_err(&s->t, id, rc == -ENOMEM ? "internal" : "bad_request",
                  rc == -ENOMEM ? "out of memory" : "a header= is not valid (at most 16)");
        return;
    }
    char msg[160];
    if (quota_hfrepo_begin(&s->srv->quota, &s->who, msg, sizeof msg)) {
        free(hdrs);
        reply_err(&s->t, id, "too_many_requests", msg);
        return;
    }
    if (quota_request_admit(&s->srv->quota, &s->who, s->srv->cfg->max_requests_per_user, msg,
                            sizeof msg)) {
        quota_hfrepo_end(&s->srv->quota, &s->who);
        free(hdrs);
        reply_err(&s->t, id, "too_many_requests", msg);
        return;
    }
    hfrepo_t *r = calloc(1, sizeof *r);
    char *url = hf_repo_api_url(s->srv->cfg->hf_upstream, type, repo, rev);
    if (r) {
        r->fd = r->wfd = -1;
        r->store = s->srv->store;
        snprintf(r->id, sizeof r->id, "%s", id);
        snprintf(r->type, sizeof r->type, "%s", type);
        r->repo = strdup(repo);
        r->s = s; /* counted from here: its end (hfrepo_unlink) gives the counts back */
        s->nfetches++;
        list_push_front(&s->hfrepos, &r->node);
    }
    if (!r || !url || !r->repo) {
        free(url);
        free(hdrs);
        if (r) {
            hfrepo_fail(r, "internal", "out of memory");
            return;
        }
        quota_request_end(&s->srv->quota, &s->who);
        quota_hfrepo_end(&s->srv->quota, &s->who);
        reply_err(&s->t, id, "internal", "out of memory");
        return;
    }
    hub_req_opts_t o = {.headers = hdrs,
                        .wanted = hub_wanted,
                        .nwanted = HUB_N,
                        .max_hops = HUB_REQ_MAX_HOPS,
                        .keep = HUB_BODY_OK,
                        .body_max = HF_REPO_BODY_MAX,
                        .budget = hub_budget(),
                        .cost = HF_REPO_COST,
                        .loop = s->srv->loop};
    const char *why = "bad URL";
    rc = hub_req_start(jobs_http(s->srv->jobs), url, &o, answered, r, &r->req, &why);
    free(url);
    free(hdrs);
    if (rc)
        hfrepo_fail(r,
                    rc == -EINVAL   ? "bad_request"
                    : rc == -EACCES ? "forbidden"
                                    : "internal",
                    rc == -EINVAL   ? why
                    : rc == -EACCES ? "the network policy does not allow the Hub's host"
                                    : "cannot ask the Hub");
}

void verbs_hf_close(session_t *s)
{
    listings_owner_gone(s->srv->listings, s); /* its client has read them */
    list_node_t *n;
    while ((n = list_first(&s->hfrepos))) {
        hfrepo_t *r = list_entry(n, hfrepo_t, node);
        hfrepo_unlink(r);
        if (r->req) {
            hub_req_t *req = r->req;
            r->req = NULL;
            hub_req_abort(req);
        }
        if (!r->work_out) /* else the pool item frees it */
            hfrepo_free(r);
    }
}
