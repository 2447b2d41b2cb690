/* verbs_admin: RM, PIN, UNPIN and VERIFY, each one request in the pool
 * (admin.h), and GC, the eviction coordinator's turn (jobs_gc), answered
 * OK (or ERR) with its id. The table lets only admins with a valid id=
 * reach these handlers. One at a time, all five together. */
#include "admin.h"
#include "log.h"
#include "sha256.h"
#include "url.h"
#include "verbs_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An admin request in the pool (req) or a GC (gc), answered with its id. */
typedef struct pending {
    admin_req_t *req; /* RM, PIN, UNPIN, VERIFY */
    jobs_gc_t *gc;    /* GC */
    session_t *s;
    list_node_t node; /* in s->pending */
    admin_op_t op;    /* not GC */
    uint64_t size;    /* GC: the size it collects down to */
    char id[VERB_ID_MAX + 1];
} pending_t;

static void send_ok_fields(session_t *s, const pending_t *p, const admin_result_t *r)
{
    reply_t rep;
    reply_begin(&rep, "OK");
    proto_add(&rep.w, "id", p->id);
    switch (p->op) {
    case ADMIN_RM:
        proto_add_u64(&rep.w, "removed_blob", (uint64_t)r->removed_blob);
        break;
    case ADMIN_PIN:
    case ADMIN_UNPIN:
        break;
    case ADMIN_VERIFY: {
        unsigned nbad = 0;
        for (const cache_bad_t *b = r->bad; b; b = b->next, nbad++) {
            reply_t line;
            reply_begin(&line, "BAD");
            proto_add(&line.w, "id", p->id);
            proto_add(&line.w, "sha256", b->sha256);
            proto_add(&line.w, "reason", b->why);
            reply_send(&s->t, &line);
        }
        proto_add_u64(&rep.w, "checked", r->checked);
        proto_add_u64(&rep.w, "bad", nbad);
        break;
    }
    }
    reply_send(&s->t, &rep);
}

/* RM of a blob users' HF caches hold, without force=1: whose (uids, the
 * client names them), and what to do. */
static void send_held(session_t *s, const pending_t *p, const cache_holders_t *h)
{
    char users[CACHE_HOLDERS_MAX * 12] = "", msg[sizeof users + 128];
    size_t len = 0;
    for (unsigned i = 0; i < h->total && i < CACHE_HOLDERS_MAX; i++)
        len += (size_t)snprintf(users + len, sizeof users - len, "%s%u", i ? "," : "",
                                (unsigned)h->uid[i]);
    snprintf(msg, sizeof msg,
             "the blob is held: %u user(s)' HF caches link to it (uid %s%s); force=1 removes "
             "it anyway",
             h->total, users, h->total > CACHE_HOLDERS_MAX ? ",..." : "");
    reply_t rep;
    reply_begin(&rep, "ERR");
    proto_add(&rep.w, "id", p->id);
    proto_add(&rep.w, "code", "held");
    proto_add(&rep.w, "users", users);
    proto_add_u64(&rep.w, "holders", h->total);
    proto_add(&rep.w, "msg", msg);
    reply_send(&s->t, &rep);
}

/* The ERR of a request that failed (rc, a negative errno). */
static void send_failed(session_t *s, const pending_t *p, int rc)
{
    if (rc == -ENOENT)
        reply_err(&s->t, p->id, "not_found", "no such URL or blob in the cache");
    else if (rc == -ENOSPC)
        reply_err(&s->t, p->id, "no_space", "the cache's file system is full");
    else if (rc == -ECANCELED)
        reply_err(&s->t, p->id, "shutting_down", "hubd is stopping");
    else
        reply_err(&s->t, p->id, "io", strerror(-rc));
}

static void on_admin_done(void *arg, const admin_result_t *r)
{
    pending_t *p = arg;
    session_t *s = p->s;
    list_remove(&p->node);
    if (r->rc == -EBUSY && p->op == ADMIN_RM)
        send_held(s, p, &r->held);
    else if (r->rc)
        send_failed(s, p, r->rc);
    else
        send_ok_fields(s, p, r);
    free(p);
}

/* GC's answer: what went (with an eviction run's it waited for), the
 * cache's size after it and the target; above the target, what stayed by
 * reason (hubctl says them). */
static void on_gc_done(void *arg, int rc, const jobs_gc_result_t *r)
{
    pending_t *p = arg;
    session_t *s = p->s;
    list_remove(&p->node);
    if (rc) {
        send_failed(s, p, rc);
        free(p);
        return;
    }
    const db_kept_t *k = &r->gc.kept;
    reply_t rep;
    reply_begin(&rep, "OK");
    proto_add(&rep.w, "id", p->id);
    proto_add_u64(&rep.w, "evicted", r->gc.evicted);
    proto_add_u64(&rep.w, "freed", r->gc.freed);
    proto_add_u64(&rep.w, "size", r->gc.size);
    proto_add_u64(&rep.w, "target", p->size);
    proto_add_u64(&rep.w, "held", k->held_bytes);
    proto_add_u64(&rep.w, "held_blobs", k->held_blobs);
    proto_add_u64(&rep.w, "holds", k->holds);
    proto_add_u64(&rep.w, "holders", k->holders);
    proto_add_u64(&rep.w, "pinned_bytes", k->pinned_bytes);
    proto_add_u64(&rep.w, "pinned_blobs", k->pinned_blobs);
    proto_add_u64(&rep.w, "waited", (uint64_t)r->waited);
    reply_send(&s->t, &rep);
    free(p);
}

/* RM, PIN, UNPIN target=URL|SHA256: the digest the database knows it by
 * (for RM, the URL or digest itself). 0, or an ERR was sent. */
static int resolve_target(session_t *s, const proto_msg_t *m, const char *id, admin_op_t op,
                          url_t *u, char sha[65], char canon[65], const char **target)
{
    const char *t = proto_get(m, "target");
    if (!t || !*t) {
        reply_err(&s->t, id, "bad_request", "needs target= (a URL or a sha256)");
        return -EINVAL;
    }
    /* As FETCH keys them: a digest in lower case, a URL canonical. */
    uint8_t raw[32];
    if (strlen(t) == 64 && sha256_parse_hex(t, raw) == 0) {
        sha256_hex(raw, canon);
        t = canon;
    } else if (url_parse(t, u, NULL) == 0) {
        t = u->canonical;
    }
    if (db_resolve(s->srv->db, t, sha)) {
        reply_err(&s->t, id, "not_found", "no such URL or blob in the cache");
        return -ENOENT;
    }
    *target = op != ADMIN_RM ? sha : t; /* pins are on blobs */
    return 0;
}

/* GC [max_size=BYTES]: the size to collect down to. 0, or an ERR was sent. */
static int gc_size(session_t *s, const proto_msg_t *m, const char *id, uint64_t *size)
{
    const char *ms = proto_get(m, "max_size");
    if (ms && config_parse_size(ms, size)) {
        reply_err(&s->t, id, "bad_request", "max_size= must be a size (bytes, or with K M G T)");
        return -EINVAL;
    }
    if (!ms && *size == 0) {
        reply_err(&s->t, id, "bad_request",
                  "no max_cache_size is configured: give max_size= to collect down to");
        return -EINVAL;
    }
    return 0;
}

/* One at a time: a whole-cache walk must not take every pool thread from
 * the downloads. 1 (and the ERR sent) when one is out. */
static int refuse_busy(session_t *s, const char *id)
{
    if (!admin_busy() && !jobs_gc_busy(s->srv->jobs))
        return 0;
    reply_err(&s->t, id, "busy", "another cache administration request is running; try again");
    return 1;
}

void verbs_gc(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    uint64_t size = s->srv->cfg->max_cache_size;
    (void)arg;
    if (refuse_busy(s, id) || gc_size(s, m, id, &size))
        return;
    pending_t *p = calloc(1, sizeof *p);
    int rc = p ? jobs_gc(s->srv->jobs, size, on_gc_done, p, &p->gc) : -ENOMEM;
    if (rc) {
        free(p);
        if (rc == -ECANCELED)
            reply_err(&s->t, id, "shutting_down", "hubd is stopping");
        else
            reply_err(&s->t, id, "internal", "out of memory");
        return;
    }
    p->s = s;
    p->size = size;
    snprintf(p->id, sizeof p->id, "%s", id);
    log_info("session pid %d uid %d: GC down to %llu bytes", (int)s->who.pid, (int)s->who.uid,
             (unsigned long long)size);
    list_push_front(&s->pending, &p->node);
}

void verbs_admin(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    admin_op_t op = (admin_op_t)arg;
    const char *target = proto_get(m, "target");
    char sha[65], canon[65];
    url_t u = {0};
    if (refuse_busy(s, id))
        return;
    if (op == ADMIN_RM || op == ADMIN_PIN || op == ADMIN_UNPIN) {
        int rc = resolve_target(s, m, id, op, &u, sha, canon, &target);
        if (rc) {
            url_free(&u);
            return;
        }
    }
    const char *force = proto_get(m, "force");
    if (force && strcmp(force, "0") != 0 && strcmp(force, "1") != 0) {
        reply_err(&s->t, id, "bad_request", "force= is 0 or 1");
        url_free(&u);
        return;
    }
    pending_t *p = calloc(1, sizeof *p);
    if (!p || admin_start(s->srv->loop, jobs_work(s->srv->jobs), s->srv->store, s->srv->db, op,
                          target, force && strcmp(force, "1") == 0, on_admin_done, p, &p->req)) {
        free(p);
        url_free(&u);
        reply_err(&s->t, id, "internal", "out of memory");
        return;
    }
    p->s = s;
    p->op = op;
    snprintf(p->id, sizeof p->id, "%s", id);
    log_info("session pid %d uid %d: %s %s", (int)s->who.pid, (int)s->who.uid, m->verb,
             target ? target : "");
    url_free(&u);
    list_push_front(&s->pending, &p->node);
}

void verbs_admin_close(session_t *s)
{
    list_node_t *n;
    while ((n = list_first(&s->pending))) { /* the requests finish in the pool; nobody hears */
        pending_t *p = list_entry(n, pending_t, node);
        list_remove(&p->node);
        if (p->gc)
            jobs_gc_cancel(p->gc);
        else
            admin_cancel(p->req);
        free(p);
    }
}
