/* verbs_fetch: FETCH, and the waiter that answers it as its job goes on.
 *
 * A FETCH of a Hub resolve URL (under hf_upstream) with header= values
 * first asks the Hub about the file with those headers (hf_meta.h, the
 * question and memory the HTTP front's /hf route uses): a refusal (4xx)
 * is the answer, and no byte nor look-up follows; an LFS file's SHA-256
 * the Hub names to those credentials vouches for this request (job.h) and
 * is its expected digest; otherwise the fetch goes on as any other, private
 * to its headers, and a small file's stored bytes are checked against the
 * git blob SHA-1 of the Hub's ETag (git_check.h) before DONE: a mismatch
 * is ERR hash_mismatch, and the entry is forgotten so that the next FETCH
 * downloads the file again.
 *
 * A fetch's states, each with its one way out when the session closes
 * (verbs_fetch_close): asking the Hub (ask set: aborted), in a job (ask
 * and check NULL: jobs_cancel), checking the stored file (check set:
 * cancelled, the pool item frees itself and answers nobody). */
#include "git_check.h"
#include "hf_meta.h"
#include "hub_req.h"
#include "log.h"
#include "sha256.h"
#include "textnum.h"
#include "url.h"
#include "verbs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROGRESS_DROP_QUEUE (256 * 1024) /* a client this far behind misses PROGRESS lines */

/* One waiting FETCH of a session. */
typedef struct fetch {
    job_waiter_t w; /* first: job.c hands back &w */
    session_t *s;
    list_node_t node; /* in s->fetches */
    int pinned;       /* a hit item is opening its blob: counts as a pinned fd */
    int hit_held;     /* HIT said by the job, not sent yet: it leaves with DONE */
    char id[VERB_ID_MAX + 1];
    /* A FETCH of a Hub URL: what jobs_fetch gets once the Hub answered. */
    hf_ask_t *ask;                   /* the question in flight, or NULL */
    char *url;                       /* the FETCH's url= (malloc'd; the entry a failed
                                        git SHA-1 check forgets), or NULL */
    char *headers[CRED_MAX_HEADERS]; /* its header= values (malloc'd) */
    size_t nheaders;                 /* of them */
    char sha[65];                    /* its sha256= (lower case), or "" */
    char tag[65];                    /* its credential tag, once the Hub is asked */
    /* A small Hub file: its stored bytes are checked before DONE. */
    char git_sha1[41];  /* the Hub's ETag, a git blob SHA-1 (40 hex digits), or "" */
    git_check_t *check; /* the check in the pool, or NULL */
} fetch_t;

static void fetch_free(fetch_t *f)
{
    free(f->url);
    for (size_t i = 0; i < f->nheaders; i++)
        free(f->headers[i]);
    free(f);
}

static void fetch_unlink(fetch_t *f)
{
    session_t *s = f->s;
    quota_request_end(&s->srv->quota, &s->who);
    if (f->pinned) {
        f->pinned = 0;
        session_unpin(s);
    }
    s->nfetches--;
    list_remove(&f->node);
}

static void fetch_on_start(job_waiter_t *w, fetch_kind_t kind, uint64_t job_id)
{
    fetch_t *f = (fetch_t *)w;
    if (f->pinned && kind != FETCH_HIT) { /* the hit fell through to a download */
        f->pinned = 0;
        session_unpin(f->s);
    }
    if (kind == FETCH_HIT) { /* with DONE, in one system call (fetch_answer) */
        f->hit_held = 1;
        return;
    }
    reply_t r;
    static const char *const verbs[] = {"HIT", "QUEUED", "ATTACHED"};
    reply_begin(&r, verbs[kind]);
    proto_add(&r.w, "id", f->id);
    if (kind != FETCH_HIT)
        proto_add_u64(&r.w, "job", job_id);
    reply_send(&f->s->t, &r);
}

static void fetch_on_progress(job_waiter_t *w, const job_progress_t *p)
{
    fetch_t *f = (fetch_t *)w;
    session_t *s = f->s;
    if (transport_queued(&s->t) > PROGRESS_DROP_QUEUE)
        return; /* the client is not reading: a later line says more anyway */
    reply_t r;
    reply_begin(&r, "PROGRESS");
    proto_add(&r.w, "id", f->id);
    proto_add_u64(&r.w, "done", p->done);
    if (p->total >= 0)
        proto_add_i64(&r.w, "total", p->total);
    proto_add_u64(&r.w, "rate", p->rate);
    proto_add(&r.w, "state", p->state);
    if (p->reason) {
        proto_add_u64(&r.w, "attempt", p->attempt);
        proto_add_u64(&r.w, "attempts", p->attempts_max);
        proto_add_u64(&r.w, "retry_in", p->retry_in_ms);
        proto_add(&r.w, "reason", p->reason);
    }
    reply_send(&s->t, &r);
}

/* f's HIT line into buf: its length, or 0 when it does not fit. */
static size_t hit_line(const fetch_t *f, char *buf, size_t cap)
{
    proto_writer_t w;
    proto_begin(&w, buf, cap, "HIT");
    proto_add(&w, "id", f->id);
    int n = proto_end(&w);
    return n > 0 ? (size_t)n : 0;
}

/* A held HIT goes out on its own: before an ERR, or a check that makes
 * DONE wait. */
static void send_held_hit(fetch_t *f)
{
    char buf[PROTO_MAX_LINE];
    size_t n = f->hit_held ? hit_line(f, buf, sizeof buf) : 0;
    f->hit_held = 0;
    if (n)
        transport_send(&f->s->t, buf, n);
}

/* f's last line, DONE with the file or ERR; f ends. A held HIT leaves
 * just before DONE, in the same system call: on a hit the client is woken
 * once, and the loop makes one call fewer. */
static void fetch_answer(fetch_t *f, const job_result_t *res)
{
    session_t *s = f->s;
    fetch_unlink(f);
    if (res->err_code) {
        send_held_hit(f);
        reply_err(&s->t, f->id, res->err_code, res->err_msg ? res->err_msg : "");
    } else {
        static const char *const sources[] = {"hit", "download", "attached"};
        reply_t r;
        reply_begin(&r, "DONE");
        proto_add(&r.w, "id", f->id);
        proto_add(&r.w, "path", res->path);
        proto_add(&r.w, "sha256", res->sha256);
        proto_add_u64(&r.w, "size", res->size);
        proto_add(&r.w, "source", sources[res->kind]);
        size_t n = reply_end(&r);
        char head[TRANSPORT_FD_HEAD_MAX];
        size_t head_len = f->hit_held ? hit_line(f, head, sizeof head) : 0;
        if (!head_len || !n)
            send_held_hit(f);
        f->hit_held = 0;
        if (n) { /* given the bytes: HOLD may pin them (served.h) */
            transport_send_fd(&s->t, head, head_len, r.buf, n, res->fd);
            served_note(&s->srv->served, s->who.uid, res->sha256, uv_now(s->srv->loop));
        } else { /* no DONE could be made: nothing was given */
            reply_err(&s->t, f->id, "internal", "the DONE line could not be made");
        }
    }
    fetch_free(f);
    session_kick(s);
}

/* git_check's verdict on a small Hub file: DONE, or ERR hash_mismatch
 * naming both SHA-1s (the entry was forgotten by the check). */
static void fetch_checked(void *arg, const git_check_result_t *r)
{
    fetch_t *f = arg;
    session_t *s = f->s;
    f->check = NULL;
    if (r->match) {
        fetch_answer(f, r->file);
        return;
    }
    char msg[300];
    job_result_t err = {.err_code = "hash_mismatch", .err_msg = msg};
    if (r->status) {
        err.err_code = "internal";
        snprintf(msg, sizeof msg, "the check of the file's git SHA-1 did not run (%s)",
                 uv_strerror(r->status));
    } else {
        snprintf(msg, sizeof msg, "the file's git blob SHA-1 is %s, the Hub's ETag names %s: %s",
                 r->got[0] ? r->got : "(unreadable)", r->want,
                 r->forgotten ? "its entry is forgotten, a new FETCH downloads it again"
                              : "not served");
        log_warn("session pid %d uid %d: FETCH id %s: %s", (int)s->who.pid, (int)s->who.uid, f->id,
                 msg);
    }
    fetch_answer(f, &err);
}

static void fetch_on_finish(job_waiter_t *w, const job_result_t *res)
{
    fetch_t *f = (fetch_t *)w;
    session_t *s = f->s;
    if (res->err_code || !f->git_sha1[0]) {
        fetch_answer(f, res);
        return;
    }
    /* A small Hub file: DONE waits for its git SHA-1 (f stays linked and
     * counted meanwhile; a hit keeps its pin, and says HIT now). */
    send_held_hit(f);
    git_check_env_t env = {s->srv->loop, jobs_work(s->srv->jobs), s->srv->store, s->srv->db};
    int rc = git_check_start(&env, res, f->url, f->tag, f->git_sha1, fetch_checked, f, &f->check);
    if (rc == 0)
        return;
    if (rc == -EFBIG) {
        log_warn("session pid %d uid %d: FETCH id %s: %llu bytes, too large for its git SHA-1 "
                 "to be checked: served as its SHA-256 says",
                 (int)s->who.pid, (int)s->who.uid, f->id, (unsigned long long)res->size);
        fetch_answer(f, res);
        return;
    }
    job_result_t err = {.err_code = "internal", .err_msg = "cannot check the file's git SHA-1"};
    fetch_answer(f, &err);
}

static int id_in_use(const session_t *s, const char *id)
{
    list_node_t *n, *tmp;
    list_foreach_safe(&s->fetches, n, tmp)
    {
        if (strcmp(list_entry(n, fetch_t, node)->id, id) == 0)
            return 1;
    }
    return 0;
}

/* The fetch itself: f is linked and counted; jobs_fetch's callbacks
 * answer it, or it is answered (and freed) now. */
static void fetch_start(fetch_t *f, const char *url, const char *const *headers, size_t nheaders)
{
    session_t *s = f->s;
    /* Counted as a hit until on_start says otherwise: a hit item holds the
     * blob open until its DONE. (f is not touched after jobs_fetch: its
     * callbacks may have finished it.) */
    f->pinned = 1;
    session_pin(s);
    const char *code, *msg;
    if (jobs_fetch(s->srv->jobs, url, f->sha[0] ? f->sha : NULL, headers, nheaders, &f->w, &code,
                   &msg)) {
        fetch_unlink(f);
        reply_err(&s->t, f->id, code, msg);
        fetch_free(f);
    }
}

/* f ends before any job: its ERR, and the session may read on. */
static void fetch_refuse(fetch_t *f, const char *code, const char *msg)
{
    job_result_t err = {.err_code = code, .err_msg = msg};
    fetch_answer(f, &err);
}

/* The Hub's answer to f's own headers decides (PROTOCOL.md, "FETCH of a
 * Hub URL"): a refusal ends f, an LFS file's digest vouches for it, and
 * anything else (a small file, a Hub that did not answer) lets it go on as
 * a fetch private to its headers: vouching is never the fallback. */
static void hub_answered(void *arg, const hf_meta_answer_t *a)
{
    fetch_t *f = arg;
    session_t *s = f->s;
    f->ask = NULL;
    if (a->kind == HF_META_REFUSED && a->status >= 400 && a->status <= 499) {
        char code[16], msg[600];
        hub_refusal(a->status, a->error_code, a->error_message, code, msg, sizeof msg);
        fetch_refuse(f, code, msg);
        return;
    }
    if (a->kind == HF_META_FILE && a->file->lfs) {
        if (f->sha[0] && strcmp(f->sha, a->file->sha256) != 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "the Hub names sha256 %s for this file, the request %s",
                     a->file->sha256, f->sha);
            fetch_refuse(f, "hash_mismatch", msg);
            return;
        }
        memcpy(f->sha, a->file->sha256, sizeof f->sha);
        f->w.vouched = a->file->stored; /* else only verified against it (hf_meta.h) */
    } else if (a->kind == HF_META_FILE) {
        git_check_etag(a->file->etag, f->git_sha1); /* stays "" when not a git blob SHA-1 */
    } else if (a->kind != HF_META_FILE) {
        char why[32];
        snprintf(why, sizeof why, "HTTP %d", a->status);
        log_info("session pid %d uid %d: FETCH id %s: the Hub did not answer about the file (%s): "
                 "fetched as any URL, for these headers only",
                 (int)s->who.pid, (int)s->who.uid, f->id,
                 a->kind == HF_META_FAILED ? a->code : why);
    }
    /* f->url stays f's: the entry a failed git SHA-1 check forgets (f is
     * not touched after fetch_start). */
    fetch_start(f, f->url, (const char *const *)f->headers, f->nheaders);
    session_kick(s);
}

/* A FETCH of a Hub resolve URL with headers: the Hub is asked first, with
 * those headers (or its answer of the last minute to them is taken). 1
 * when f is f's question's now (answered by hub_answered, perhaps
 * already), 0 when the URL is not the Hub's (or the question cannot be
 * asked: then the fetch goes on as any other, private to its headers). */
static int ask_hub(fetch_t *f, const char *url, const char *const *headers, size_t nheaders)
{
    session_t *s = f->s;
    hf_meta_t *meta = s->srv->hf;
    hf_where_t where;
    char key[512], file_key[1024], tag[65];
    if (!hf_where_of_url(s->srv->cfg->hf_upstream, url, &where))
        return 0;
    hf_where_keys(&where, key, file_key);
    char *ask_url = NULL;
    int n = asprintf(&ask_url, "%s/%s%s/resolve/%s/%s", s->srv->cfg->hf_upstream, where.prefix,
                     where.repo, where.rev, where.path);
    hf_where_free(&where);
    if (n < 0)
        return 0;
    /* A header jobs_fetch refuses: its ERR says why. */
    if (jobs_cred_tag(s->srv->jobs, headers, nheaders, tag)) {
        free(ask_url);
        return 0;
    }
    memcpy(f->tag, tag, sizeof f->tag);
    if (!(f->url = strdup(url))) {
        free(ask_url);
        return 0;
    }
    for (size_t i = 0; i < nheaders; i++) {
        if (!(f->headers[i] = strdup(headers[i]))) {
            free(ask_url);
            return 0; /* fetch_free frees what was copied */
        }
        f->nheaders = i + 1;
    }
    const hf_file_t *known = hf_meta_known(meta, s->who.uid, tag, file_key);
    if (known) {
        free(ask_url);
        hf_file_t file = *known;
        hf_meta_answer_t a = {.kind = HF_META_FILE, .file = &file};
        hub_answered(f, &a);
        return 1;
    }
    const char *why = NULL;
    int rc = hf_meta_ask(meta, jobs_http(s->srv->jobs), ask_url, s->who.uid, tag, file_key, headers,
                         nheaders, hub_answered, f, &f->ask, &why);
    free(ask_url);
    if (rc) {
        log_info("session pid %d uid %d: FETCH id %s: cannot ask the Hub (%s): fetched as any URL, "
                 "for these headers only",
                 (int)s->who.pid, (int)s->who.uid, f->id, why ? why : strerror(-rc));
        return 0;
    }
    return 1;
}

void verbs_fetch(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)arg;
    const char *url = proto_get(m, "url");
    const char *sha = proto_get(m, "sha256");
    if (id_in_use(s, id)) {
        reply_err(&s->t, id, "bad_request", "this id is already in use on this session");
        return;
    }
    if (!url || !*url) {
        reply_err(&s->t, id, "bad_request", "FETCH needs url=");
        return;
    }
    const char *headers[CRED_MAX_HEADERS + 1];
    size_t nheaders = 0;
    for (size_t i = 0; i < m->nfields; i++) {
        if (strcmp(m->fields[i].key, "header") != 0)
            continue;
        if (nheaders == CRED_MAX_HEADERS) {
            reply_err(&s->t, id, "bad_request", "at most 16 headers");
            return;
        }
        headers[nheaders++] = m->fields[i].value;
    }
    char sha_lc[65];
    if (sha) {
        uint8_t raw[32];
        if (sha256_parse_hex(sha, raw)) {
            reply_err(&s->t, id, "bad_request", "sha256= must be 64 hex digits");
            return;
        }
        sha256_hex(raw, sha_lc);
    }
    fetch_t *f = calloc(1, sizeof *f);
    if (!f) {
        reply_err(&s->t, id, "internal", "out of memory");
        return;
    }
    f->s = s;
    snprintf(f->id, sizeof f->id, "%s", id);
    f->w.on_start = fetch_on_start;
    f->w.on_progress = fetch_on_progress;
    f->w.on_finish = fetch_on_finish;
    const char *refresh = proto_get(m, "refresh");
    f->w.refresh = refresh && strcmp(refresh, "1") == 0;
    /* One user cannot fill the daemon with waiting requests. (jobs_fetch
     * bounds the jobs a uid created by the same setting: see quota.h.) */
    char msg[160];
    if (quota_request_admit(&s->srv->quota, &s->who, s->srv->cfg->max_requests_per_user, msg,
                            sizeof msg)) {
        free(f);
        reply_err(&s->t, id, "too_many_requests", msg);
        return;
    }
    s->nfetches++;
    f->w.uid = s->who.charged; /* its user's max_jobs_per_user, a subordinate uid's too */
    list_push_front(&s->fetches, &f->node);
    if (sha)
        memcpy(f->sha, sha_lc, sizeof f->sha);
    if (nheaders && ask_hub(f, url, headers, nheaders))
        return; /* answered later (hub_answered), or now */
    fetch_start(f, url, headers, nheaders);
}

void verbs_fetch_close(session_t *s)
{
    list_node_t *n;
    while ((n = list_first(&s->fetches))) {
        fetch_t *f = list_entry(n, fetch_t, node);
        fetch_unlink(f);
        if (f->ask) /* still asking the Hub: not in a job yet */
            hf_meta_abort(f->ask);
        else if (f->check) /* out of its job: the item frees itself, answering nobody */
            git_check_cancel(f->check);
        else
            jobs_cancel(&f->w);
        fetch_free(f);
    }
}

/* CANCEL id= target=JOB|URL: a download ended for everyone waiting on it,
 * by its only user (or an admin); jobs_cancel_job says who may. */
void verbs_cancel(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)arg;
    const char *t = proto_get(m, "target");
    uint64_t job = 0;
    url_t u = {0};
    if (!t || !*t) {
        reply_err(&s->t, id, "bad_request", "needs target= (a job number or a URL)");
        return;
    }
    if (t[strspn(t, "0123456789")] == '\0') {
        if (parse_u64(t, &job) || job == 0) {
            reply_err(&s->t, id, "bad_request", "target= is not a job number");
            return;
        }
    } else if (url_parse(t, &u, NULL)) {
        reply_err(&s->t, id, "bad_request", "target= is neither a job number nor a URL");
        return;
    }
    jobs_cancelled_t c = {0};
    int rc = jobs_cancel_job(s->srv->jobs, job, job ? NULL : u.canonical, s->who.uid,
                             session_is_admin(s), &c);
    url_free(&u);
    if (rc == -ENOENT) {
        reply_err(&s->t, id, "not_found", "no such download running or queued");
        return;
    }
    if (rc == -EPERM) {
        char msg[160];
        if (c.others)
            snprintf(msg, sizeof msg,
                     "%u of the %u requests waiting on job %llu are other users': it goes on "
                     "for them",
                     c.others, c.waiters, (unsigned long long)c.job);
        else
            snprintf(msg, sizeof msg, "job %llu is another user's download",
                     (unsigned long long)c.job);
        reply_err(&s->t, id, "permission_denied", msg);
        return;
    }
    log_info("session pid %d uid %d: CANCEL job %llu", (int)s->who.pid, (int)s->who.uid,
             (unsigned long long)c.job);
    reply_t r;
    reply_begin(&r, "OK");
    proto_add(&r.w, "id", id);
    proto_add_u64(&r.w, "job", c.job);
    proto_add_u64(&r.w, "waiters", c.waiters);
    reply_send(&s->t, &r);
}

/* f's final line for INTERRUPT: ERR code=interrupted, with what became of
 * its download (PROTOCOL.md, INTERRUPT). */
static void interrupted_line(session_t *s, const fetch_t *f, const jobs_left_t *l)
{
    char msg[200];
    if (!l->job)
        snprintf(msg, sizeof msg, "interrupted before any download began");
    else if (l->stopped)
        snprintf(msg, sizeof msg, "interrupted: job %llu stopped, %s", (unsigned long long)l->job,
                 l->resumable ? "its partial kept: the same request resumes it"
                              : "the origin gave no validator to resume with");
    else
        snprintf(msg, sizeof msg, "interrupted: job %llu goes on for %s",
                 (unsigned long long)l->job,
                 l->waiters ? "its other waiters" : "the cache (a client that left it let it run)");
    reply_t r;
    reply_begin(&r, "ERR");
    proto_add(&r.w, "id", f->id);
    proto_add(&r.w, "code", "interrupted");
    proto_add(&r.w, "msg", msg);
    if (l->job) {
        proto_add_u64(&r.w, "job", l->job);
        proto_add_u64(&r.w, "stopped", (uint64_t)l->stopped);
        proto_add_u64(&r.w, l->stopped ? "resumable" : "waiters",
                      l->stopped ? (uint64_t)l->resumable : l->waiters);
        proto_add_u64(&r.w, "done", l->done);
    }
    reply_send(&s->t, &r);
}

/* INTERRUPT id=: the client was interrupted (Ctrl-C). Each of the
 * session's waiting FETCHes ends with ERR code=interrupted; a download
 * that was its only waiter's stops and keeps its partial (jobs_leave says
 * when), one that others wait on goes on for them. A hang-up never does
 * this: a client killed, or one that left a download to the cache on
 * purpose, stops nothing. */
void verbs_interrupt(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)m, (void)arg;
    uint64_t n = 0, stopped = 0, going = 0;
    list_node_t *node;
    while ((node = list_first(&s->fetches))) {
        fetch_t *f = list_entry(node, fetch_t, node);
        jobs_left_t l = {0};
        fetch_unlink(f);
        if (f->ask)
            hf_meta_abort(f->ask);
        else if (f->check) /* the file is stored already: only its check is dropped */
            git_check_cancel(f->check);
        else
            jobs_leave(&f->w, &l);
        interrupted_line(s, f, &l); /* a held HIT is not said: no DONE follows it */
        n++;
        stopped += l.job && l.stopped;
        going += l.job && !l.stopped;
        fetch_free(f);
    }
    log_info("session pid %d uid %d: INTERRUPT: %llu fetches left, %llu downloads stopped, "
             "%llu going on",
             (int)s->who.pid, (int)s->who.uid, (unsigned long long)n, (unsigned long long)stopped,
             (unsigned long long)going);
    reply_t r;
    reply_begin(&r, "OK");
    proto_add(&r.w, "id", id);
    proto_add_u64(&r.w, "fetches", n);
    proto_add_u64(&r.w, "stopped", stopped);
    proto_add_u64(&r.w, "going", going);
    reply_send(&s->t, &r);
    session_kick(s);
}
