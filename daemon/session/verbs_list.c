/* verbs_list: STATUS (the jobs, from memory) and LIST (the cache's entries,
 * read in the pool), each streamed a page at a time as the client reads. */
#include "url.h"
#include "verbs_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_QUEUE (256u << 10) /* queued bytes below which a stream sends its next page */
#define LIST_PAGE 64              /* ENTRY or JOB lines per page */
#define SHOWN_URL_MAX 4096        /* bytes of a URL in a listing: 3x that encoded fits a line */
#define LIST_CRED_SHOWN 8 /* hex digits of a credential tag LIST shows: apart, not the tag */

/* One page of LIST, read in the pool (db_list_page), sent on the loop. */
struct listing_page {
    uv_work_t work;
    session_t *s; /* NULL once the session went away: nobody to send to */
    jobs_t *jobs; /* held while the item is in flight (a shutdown waits) */
    db_t *db;
    uint64_t before;
    uid_t uid;
    int rc; /* rows read, or a negative errno */
    unsigned n;
    struct page_entry {
        db_entry_t e;
        char *url;
        char sha[65];
        char cred[LIST_CRED_SHOWN + 1]; /* the tag's first digits, "" for a public entry */
    } v[LIST_PAGE];
};

/* A URL as this session's user may see it: the query string, which may
 * hold a signature or a token, only for admins and for the users who asked
 * for it themselves (mine). */
static const char *shown_url(const session_t *s, const char *url, int mine, char *buf, size_t cap)
{
    const char *q = strchr(url, '?');
    size_t len = strlen(url);
    size_t n = !q || mine || session_is_admin(s) ? len : (size_t)(q - url);
    if (n == len && n <= SHOWN_URL_MAX)
        return url;
    /* Cut where even a percent-encoded URL leaves the line room to fit: a
     * listing line is never dropped (END's count would lie, and a STATUS
     * whose page queued nothing would wait for a write that never ends). */
    int cut = n > SHOWN_URL_MAX;
    snprintf(buf, cap, "%.*s%s%s", (int)(cut ? SHOWN_URL_MAX : n), url, cut ? "..." : "",
             n < len ? "?REDACTED" : "");
    return buf;
}

static void send_job_line(void *arg, const job_info_t *info)
{
    session_t *s = arg;
    reply_t r;
    char url[URL_MAX_LEN + 16];
    reply_begin(&r, "JOB");
    proto_add_u64(&r.w, "job", info->id);
    proto_add(&r.w, "url", shown_url(s, info->url, info->mine, url, sizeof url));
    proto_add(&r.w, "state", info->state);
    proto_add_u64(&r.w, "done", info->done);
    if (info->total >= 0)
        proto_add_i64(&r.w, "total", info->total);
    proto_add_u64(&r.w, "rate", info->rate);
    proto_add_u64(&r.w, "waiters", info->waiters);
    proto_add_u64(&r.w, "connections", info->connections);
    proto_add(&r.w, "source", info->source);
    if (info->mirror)
        proto_add(&r.w, "mirror", info->mirror);
    /* Who asked: like the query string, for admins and those involved. */
    if (info->mine || session_is_admin(s)) {
        char users[JOB_INFO_USERS * 12] = "";
        size_t len = 0;
        for (unsigned i = 0; i < info->nusers; i++)
            len += (size_t)snprintf(users + len, sizeof users - len, "%s%u", i ? "," : "",
                                    (unsigned)info->users[i]);
        proto_add(&r.w, "users", users);
    }
    s->stream_at = info->id;
    s->stream_count += (uint64_t)reply_send(&s->t, &r); /* END counts what was sent */
}

static void send_entry_line(session_t *s, const db_entry_t *e)
{
    char url[URL_MAX_LEN + 16];
    reply_t r;
    reply_begin(&r, "ENTRY");
    proto_add(&r.w, "url", shown_url(s, e->url, e->mine, url, sizeof url));
    proto_add(&r.w, "sha256", e->sha256);
    proto_add_u64(&r.w, "size", e->size);
    proto_add_i64(&r.w, "created", e->created);
    proto_add_i64(&r.w, "accessed", e->accessed);
    proto_add_u64(&r.w, "pinned", (uint64_t)e->pinned);
    /* Fetched with credentials: stored apart for them. Which credential,
     * like the query string, only to admins and its own requesters. */
    if (*e->cred_tag)
        proto_add(&r.w, "cred", e->mine || session_is_admin(s) ? e->cred_tag : "other");
    s->stream_at = e->seq;
    s->stream_count += (uint64_t)reply_send(&s->t, &r);
}

static void copy_entry(void *arg, const db_entry_t *e)
{
    listing_page_t *p = arg;
    struct page_entry *pe = &p->v[p->n];
    if (p->n == LIST_PAGE || !(pe->url = strdup(e->url)))
        return;
    pe->e = *e;
    snprintf(pe->sha, sizeof pe->sha, "%s", e->sha256);
    snprintf(pe->cred, sizeof pe->cred, "%.*s", LIST_CRED_SHOWN, e->cred_tag);
    pe->e.url = pe->url;
    pe->e.sha256 = pe->sha;
    pe->e.cred_tag = pe->cred;
    p->n++;
}

static void page_work(uv_work_t *w)
{
    listing_page_t *p = w->data;
    p->rc = db_list_page(p->db, p->before, LIST_PAGE, p->uid, copy_entry, p);
}

/* END of a stream: the rows' count; STATUS's also says what the HTTP
 * front does (its requests wait in the jobs listed, as waiters). */
static void send_end(session_t *s, uint64_t count)
{
    reply_t r;
    reply_begin(&r, "END");
    proto_add_u64(&r.w, "count", count);
    if (s->stream == STREAM_STATUS && s->srv->front_stats) {
        session_front_stats_t hs;
        s->srv->front_stats(s->srv->front_stats_arg, &hs);
        proto_add_u64(&r.w, "http_open", hs.open);
        proto_add_u64(&r.w, "http_requests", hs.requests);
        proto_add_u64(&r.w, "http_bytes", hs.bytes);
    }
    reply_send(&s->t, &r);
}

/* The stream is over (END sent, or an error): the lines after it may be
 * parsed again. */
static void stream_end(session_t *s)
{
    s->stream = STREAM_NONE;
    session_resume(s);
}

static void after_page(uv_work_t *w, int status)
{
    (void)status;
    listing_page_t *p = w->data;
    session_t *s = p->s;
    if (s)
        s->page = NULL;
    if (s && !transport_draining(&s->t)) { /* a shutdown drains what is queued, nothing more */
        for (unsigned i = 0; i < p->n; i++)
            send_entry_line(s, &p->v[i].e);
        if (p->rc < 0) {
            reply_err(&s->t, NULL, "internal", "cannot read the cache index");
            stream_end(s);
        } else if (p->rc < LIST_PAGE) {
            send_end(s, s->stream_count);
            stream_end(s);
        } else {
            verbs_stream_step(s);
        }
    }
    for (unsigned i = 0; i < p->n; i++)
        free(p->v[i].url);
    worktrack_release(jobs_work(p->jobs));
    free(p);
}

/* Sends the stream's next page once the client has read most of the last
 * one: STATUS from the jobs in memory, LIST from a pool item. */
void verbs_stream_step(session_t *s)
{
    if (!s->stream || s->page || s->closing || !transport_open(&s->t) ||
        transport_queued(&s->t) > STREAM_QUEUE)
        return;
    while (s->stream == STREAM_STATUS) {
        if (jobs_page(s->srv->jobs, s->stream_at, LIST_PAGE, s->who.charged, send_job_line, s) <
            LIST_PAGE) {
            send_end(s, s->stream_count);
            stream_end(s);
            return;
        }
        if (transport_queued(&s->t) > STREAM_QUEUE)
            return; /* the next write completion asks for the next page */
    }
    if (s->stream != STREAM_LIST)
        return;
    listing_page_t *p = calloc(1, sizeof *p);
    if (!p) {
        reply_err(&s->t, NULL, "internal", "out of memory");
        stream_end(s);
        return;
    }
    p->s = s;
    p->jobs = s->srv->jobs;
    p->db = s->srv->db;
    p->before = s->stream_at;
    p->uid = s->who.charged; /* a subordinate uid sees what its user asked for */
    p->work.data = p;
    s->page = p;
    worktrack_hold(jobs_work(p->jobs));
    uv_queue_work(s->srv->loop, &p->work, page_work, after_page);
}

static void stream_start(session_t *s, stream_kind_t kind)
{
    s->stream = kind;
    s->stream_at = 0;
    s->stream_count = 0;
    verbs_stream_step(s);
}

void verbs_status(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)m, (void)id, (void)arg;
    stream_start(s, STREAM_STATUS);
}

void verbs_list(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)m, (void)id, (void)arg;
    stream_start(s, STREAM_LIST);
}

void verbs_list_close(session_t *s)
{
    if (s->page) { /* it finishes in the pool; nobody hears */
        s->page->s = NULL;
        s->page = NULL;
    }
}
