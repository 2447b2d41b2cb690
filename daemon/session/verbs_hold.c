/* verbs_hold: HOLD, UNHOLD and HOLDS, the holds of blobs linked into
 * users' HF caches (holds.h). Each request is one work item in the pool
 * (files, ACLs and SQLite), answered with its id on the loop. */
#include "holds.h"
#include "log.h"
#include "sha256.h"
#include "textnum.h"
#include "verbs_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOLD_MAX_IN_FLIGHT 64 /* a session's requests in the pool; more: ERR busy */
#define HOLDS_LINES_MAX 10000 /* HOLDREC lines of one HOLDS; past them END truncated=1 */

typedef enum { OP_HOLD, OP_UNHOLD, OP_HOLDS } hold_op_t;

/* One HOLDREC line, copied out of the pool's listing. */
typedef struct hold_line {
    uid_t uid;
    uint64_t files, size;
    char *label;
} hold_line_t;

/* A request in the pool. s is NULL once its session closed (the item
 * still runs to its end: it changes the cache). */
typedef struct hold_req {
    uv_work_t work;
    session_t *s;
    list_node_t node; /* in s->holds */
    worktrack_t *tracker;
    store_t *store;
    db_t *db;
    hold_op_t op;
    uid_t uid;             /* whose holds */
    int64_t of_uid;        /* HOLDS: the uid listed, -1 every uid */
    int served;            /* HOLD: uid was answered DONE for the blob lately */
    int subordinate;       /* HOLD: uid is another user's subordinate uid: no hold, a copy */
    holds_bounds_t bounds; /* HOLD: the settings, as of the request */
    char sha[65];
    char *label, *link; /* link: HOLD's, UNHOLD's one (or NULL) */
    /* Results. */
    int rc;
    int readable;
    int over; /* HOLD past a bound: DB_HOLD_OVER_*, else 0 */
    unsigned released;
    hold_line_t *lines;
    size_t nlines, cap; /* HOLDS: at most HOLDS_LINES_MAX + 1 (one more: truncated) */
    char id[VERB_ID_MAX + 1];
} hold_req_t;

static void collect_sum(void *arg, const db_hold_sum_t *s)
{
    hold_req_t *r = arg;
    if (r->rc)
        return;
    if (r->nlines == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        hold_line_t *p = realloc(r->lines, cap * sizeof *p);
        if (!p) {
            r->rc = -ENOMEM;
            return;
        }
        r->lines = p;
        r->cap = cap;
    }
    hold_line_t *l = &r->lines[r->nlines];
    if (!(l->label = strdup(s->label))) {
        r->rc = -ENOMEM;
        return;
    }
    l->uid = s->uid;
    l->files = s->files;
    l->size = s->size;
    r->nlines++;
}

static void hold_work(uv_work_t *w)
{
    hold_req_t *r = w->data;
    switch (r->op) {
    case OP_HOLD: {
        if (r->subordinate && r->served) { /* readable=0: the client copies */
            r->rc = 0;
            break;
        }
        db_hold_t h = {r->uid, r->label, r->sha, r->link, (int64_t)time(NULL)};
        r->rc = holds_add(r->store, r->db, &r->bounds, &h, r->served, &r->readable, &r->over);
        break;
    }
    case OP_UNHOLD:
        r->rc = holds_release(r->store, r->db, r->uid, r->label, r->link, &r->released);
        break;
    case OP_HOLDS: {
        int rc = db_holds_list(r->db, r->of_uid, HOLDS_LINES_MAX + 1, collect_sum, r);
        if (!r->rc)
            r->rc = rc;
        break;
    }
    }
}

static void send_result(session_t *s, hold_req_t *r)
{
    reply_t rep;
    if (r->rc == -ENOENT) {
        reply_err(&s->t, r->id, "not_found", "no such blob in the cache");
        return;
    }
    if (r->rc == -EPERM) {
        reply_err(&s->t, r->id, "permission_denied",
                  "this uid was not answered DONE for the blob in the last 10 minutes");
        return;
    }
    if (r->rc == -ENOSPC) {
        reply_err(&s->t, r->id, "no_space", "the cache's file system is full");
        return;
    }
    if (r->rc) {
        reply_err(&s->t, r->id, "io", strerror(-r->rc));
        return;
    }
    switch (r->op) {
    case OP_HOLD: {
        char path[PATH_MAX];
        store_blob_path(r->store, r->sha, path, sizeof path);
        reply_begin(&rep, "HELD");
        proto_add(&rep.w, "id", r->id);
        proto_add_u64(&rep.w, "readable", (uint64_t)r->readable);
        proto_add(&rep.w, "path", path);
        break;
    }
    case OP_UNHOLD:
        reply_begin(&rep, "OK");
        proto_add(&rep.w, "id", r->id);
        proto_add_u64(&rep.w, "released", r->released);
        break;
    case OP_HOLDS:
        for (size_t i = 0; i < r->nlines && i < HOLDS_LINES_MAX; i++) {
            reply_t line;
            reply_begin(&line, "HOLDREC");
            proto_add(&line.w, "id", r->id);
            proto_add_u64(&line.w, "uid", r->lines[i].uid);
            proto_add(&line.w, "label", r->lines[i].label);
            proto_add_u64(&line.w, "files", r->lines[i].files);
            proto_add_u64(&line.w, "size", r->lines[i].size);
            reply_send(&s->t, &line);
        }
        reply_begin(&rep, "END");
        proto_add(&rep.w, "id", r->id);
        if (r->nlines > HOLDS_LINES_MAX)
            proto_add_u64(&rep.w, "truncated", 1);
        break;
    }
    reply_send(&s->t, &rep);
}

/* A HOLD past a bound of its uid: said in the log once per uid (the
 * HOLD_TOLD_MAX latest remembered), not once per file of a repo. */
static void tell_over(session_server_t *srv, const hold_req_t *r)
{
    unsigned n = srv->hold_told_n < HOLD_TOLD_MAX ? srv->hold_told_n : HOLD_TOLD_MAX;
    for (unsigned i = 0; i < n; i++)
        if (srv->hold_told[i] == r->uid)
            return;
    srv->hold_told[srv->hold_told_n++ % HOLD_TOLD_MAX] = r->uid;
    if (r->over == DB_HOLD_OVER_COUNT)
        log_info("uid %u has max_holds_per_user (%llu) holds: its further files are copied, "
                 "not linked",
                 (unsigned)r->uid, (unsigned long long)r->bounds.max_holds);
    else if (r->over == DB_HOLD_OVER_TEXT)
        log_info("uid %u: its holds' labels and links would store more than "
                 "max_hold_text_per_user (%llu bytes): its further files are copied, not linked",
                 (unsigned)r->uid, (unsigned long long)r->bounds.max_text);
    else if (r->over == DB_HOLD_OVER_LINKS)
        log_info("uid %u: blob %s has max_holds_per_blob (%llu) holds of it already: further "
                 "links to it are copies",
                 (unsigned)r->uid, r->sha, (unsigned long long)r->bounds.max_per_blob);
    else
        log_info("uid %u: blob %s would take its held bytes past max_held_bytes_per_user "
                 "(%s): copied, not linked",
                 (unsigned)r->uid, r->sha,
                 r->bounds.max_bytes ? "as set" : "half of the cache's size");
}

static void hold_req_free(hold_req_t *r)
{
    for (size_t i = 0; i < r->nlines; i++)
        free(r->lines[i].label);
    free(r->lines);
    free(r->label);
    free(r->link);
    free(r);
}

static void after_hold(uv_work_t *w, int status)
{
    hold_req_t *r = w->data;
    (void)status;
    if (r->s) {
        list_remove(&r->node);
        if (r->over)
            tell_over(r->s->srv, r);
        send_result(r->s, r);
    }
    worktrack_release(r->tracker);
    hold_req_free(r);
}

static int count_in_flight(const session_t *s)
{
    int n = 0;
    for (const list_node_t *x = list_first(&s->holds); x; x = list_next(&s->holds, x))
        n++;
    return n;
}

/* 1 to max bytes, no control characters (they go into the log). */
static int valid_text(const char *l, size_t max)
{
    size_t n = l ? strlen(l) : 0;
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)l[i] < 0x20 || l[i] == 0x7f)
            return 0;
    return 1;
}

/* A label: 1 to DB_HOLD_LABEL_MAX bytes, no control characters. */
static int valid_label(const char *l)
{
    return valid_text(l, DB_HOLD_LABEL_MAX);
}

/* A link: an absolute path of at most DB_HOLD_LINK_MAX bytes, no control
 * characters. */
static int valid_link(const char *l)
{
    return l && l[0] == '/' && valid_text(l, DB_HOLD_LINK_MAX);
}

/* uid= of UNHOLD and HOLDS: another uid's holds are an admin's business.
 * 0 and *uid, or an ERR was sent. */
static int other_uid(session_t *s, const proto_msg_t *m, const char *id, int64_t *uid)
{
    const char *v = proto_get(m, "uid");
    if (!v)
        return 0;
    uint64_t n;
    if (parse_u64(v, &n) || n > UINT32_MAX - 1) {
        reply_err(&s->t, id, "bad_request", "uid= must be a number");
        return -EINVAL;
    }
    if ((uid_t)n != s->who.uid && !session_is_admin(s)) {
        reply_err(&s->t, id, "permission_denied",
                  "another user's holds need root or membership of the admin group");
        return -EPERM;
    }
    *uid = (int64_t)n;
    return 0;
}

void verbs_hold(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    hold_op_t op = (hold_op_t)arg;
    if (count_in_flight(s) >= HOLD_MAX_IN_FLIGHT) {
        reply_err(&s->t, id, "busy", "too many HOLD, UNHOLD and HOLDS requests in flight");
        return;
    }
    hold_req_t *r = calloc(1, sizeof *r);
    if (!r) {
        reply_err(&s->t, id, "internal", "out of memory");
        return;
    }
    r->op = op;
    r->uid = s->who.uid;
    r->of_uid = op == OP_HOLDS && session_is_admin(s) ? -1 : (int64_t)s->who.uid;
    const char *label = proto_get(m, "label");
    const char *bad = NULL;
    if (op == OP_HOLD) {
        const char *sha = proto_get(m, "sha256"), *link = proto_get(m, "link");
        uint8_t raw[32];
        if (!sha || strlen(sha) != 64 || sha256_parse_hex(sha, raw))
            bad = "HOLD needs sha256= (64 hex digits)";
        else if (!valid_link(link))
            bad = "HOLD needs link= (an absolute path of at most 4096 bytes, no control "
                  "characters)";
        else if (!(r->link = strdup(link)))
            bad = "out of memory";
        else
            sha256_hex(raw, r->sha);
        r->served =
            !bad && served_recent(&s->srv->served, s->who.uid, r->sha, uv_now(s->srv->loop));
        /* The holds' bounds are per uid, in the database: a user's
         * subordinate uids would each have them. Their files are copies. */
        r->subordinate = s->who.charged != s->who.uid;
        const hubd_config_t *cfg = s->srv->cfg;
        r->bounds = (holds_bounds_t){cfg->max_holds_per_user, cfg->max_held_bytes_per_user,
                                     cfg->max_cache_size, cfg->max_hold_text_per_user,
                                     cfg->max_holds_per_blob};
    } else if (op == OP_UNHOLD && proto_get(m, "link")) {
        const char *link = proto_get(m, "link");
        if (!valid_link(link))
            bad = "link= must be an absolute path of at most 4096 bytes, no control characters";
        else if (!(r->link = strdup(link)))
            bad = "out of memory";
    }
    if (!bad && op != OP_HOLDS && !valid_label(label))
        bad = "needs label= (1 to 512 bytes, no control characters)";
    else if (!bad && op != OP_HOLDS && !(r->label = strdup(label)))
        bad = "out of memory";
    if (bad) {
        reply_err(&s->t, id, "bad_request", bad);
        goto fail;
    }
    if (op == OP_HOLDS && proto_get(m, "all") && !session_is_admin(s)) {
        /* Asked for everyone's: say no rather than list only the caller's. */
        const char *group = s->srv->cfg->admin_group ? s->srv->cfg->admin_group : "";
        char msg[320];
        snprintf(msg, sizeof msg,
                 "every user's holds (all=1) are for root, hubd's user and the admin group%s%s; "
                 "yours: without all=",
                 *group ? " " : "", group);
        reply_err(&s->t, id, "permission_denied", msg);
        goto fail;
    }
    if (op != OP_HOLD) {
        int64_t uid = op == OP_HOLDS ? r->of_uid : (int64_t)r->uid;
        if (other_uid(s, m, id, &uid))
            goto fail;
        if (op == OP_HOLDS)
            r->of_uid = uid;
        else
            r->uid = (uid_t)uid;
    }
    r->s = s;
    r->store = s->srv->store;
    r->db = s->srv->db;
    r->tracker = jobs_work(s->srv->jobs);
    snprintf(r->id, sizeof r->id, "%s", id);
    r->work.data = r;
    int qrc = uv_queue_work(s->srv->loop, &r->work, hold_work, after_hold);
    if (qrc) {
        reply_err(&s->t, id, "internal", uv_strerror(qrc));
        goto fail;
    }
    worktrack_hold(r->tracker); /* a shutdown waits for it (the pool has not run it yet) */
    list_push_front(&s->holds, &r->node);
    return;
fail:
    free(r->label);
    free(r->link);
    free(r);
}

void verbs_hold_close(session_t *s)
{
    list_node_t *n;
    while ((n = list_first(&s->holds))) { /* they finish in the pool; nobody hears */
        hold_req_t *r = list_entry(n, hold_req_t, node);
        list_remove(&r->node);
        r->s = NULL;
    }
}
