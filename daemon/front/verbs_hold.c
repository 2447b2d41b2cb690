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

#define HOLD_MAX_IN_FLIGHT 64 /* a session's requests in the pool; more: ERR busy */

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
    uid_t uid;      /* whose holds */
    int64_t of_uid; /* HOLDS: the uid listed, -1 every uid */
    int served;     /* HOLD: uid was answered DONE for the blob lately */
    char sha[65];
    char *label, *link;
    /* Results. */
    int rc;
    int readable;
    unsigned released;
    hold_line_t *lines;
    size_t nlines, cap;
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
    case OP_HOLD:
        r->rc =
            holds_add(r->store, r->db, r->uid, r->sha, r->label, r->link, r->served, &r->readable);
        break;
    case OP_UNHOLD:
        r->rc = holds_release(r->store, r->db, r->uid, r->label, &r->released);
        break;
    case OP_HOLDS: {
        int rc = db_holds_list(r->db, r->of_uid, collect_sum, r);
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
                  "the blob is private and this uid was not answered DONE for it in the last "
                  "10 minutes");
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
        for (size_t i = 0; i < r->nlines; i++) {
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
        break;
    }
    reply_send(&s->t, &rep);
}

static void after_hold(uv_work_t *w, int status)
{
    hold_req_t *r = w->data;
    (void)status;
    if (r->s) {
        list_remove(&r->node);
        send_result(r->s, r);
    }
    worktrack_release(r->tracker);
    for (size_t i = 0; i < r->nlines; i++)
        free(r->lines[i].label);
    free(r->lines);
    free(r->label);
    free(r->link);
    free(r);
}

static int count_in_flight(const session_t *s)
{
    int n = 0;
    for (const list_node_t *x = list_first(&s->holds); x; x = list_next(&s->holds, x))
        n++;
    return n;
}

/* A label: 1 to DB_HOLD_LABEL_MAX bytes, no control characters. */
static int valid_label(const char *l)
{
    size_t n = l ? strlen(l) : 0;
    if (n == 0 || n > DB_HOLD_LABEL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)l[i] < 0x20 || l[i] == 0x7f)
            return 0;
    return 1;
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
        else if (!link || link[0] != '/' || strlen(link) > DB_HOLD_LINK_MAX)
            bad = "HOLD needs link= (an absolute path of at most 4096 bytes)";
        else if (!(r->link = strdup(link)))
            bad = "out of memory";
        else
            sha256_hex(raw, r->sha);
        r->served =
            !bad && served_recent(&s->srv->served, s->who.uid, r->sha, uv_now(s->srv->loop));
    }
    if (!bad && op != OP_HOLDS && !valid_label(label))
        bad = "needs label= (1 to 512 bytes, no control characters)";
    else if (!bad && op != OP_HOLDS && !(r->label = strdup(label)))
        bad = "out of memory";
    if (bad) {
        reply_err(&s->t, id, "bad_request", bad);
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
    list_push_front(&s->holds, &r->node);
    r->work.data = r;
    worktrack_hold(r->tracker); /* a shutdown waits for it */
    uv_queue_work(s->srv->loop, &r->work, hold_work, after_hold);
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
