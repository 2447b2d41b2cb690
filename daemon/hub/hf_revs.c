/* hf_revs: see hf_revs.h. */
#include "hf_revs.h"
#include "log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 1024        /* what was last noted: direct-mapped, a power of two */
#define RENOTE_AFTER 3600 /* seconds: `seen` kept fresh for the per-uid order */

/* What was last sent to the pool for one (repo, rev, tag, uid). */
typedef struct slot {
    char *key; /* repo "\n" rev "\n" tag "\n" uid, or NULL */
    char commit[41];
    uint64_t when;
} slot_t;

/* Counts the notes in the pool; outlives hf_revs_free while any is. */
typedef struct gate {
    unsigned inflight;
    int orphaned;
} gate_t;

struct hf_revs {
    uv_loop_t *loop;
    worktrack_t *work;
    db_t *db;
    gate_t *gate;
    slot_t slots[SLOTS];
};

typedef struct note {
    uv_work_t work;
    db_t *db;
    worktrack_t *work_track;
    gate_t *gate;
    uid_t uid;
    int rc;
    char commit[41];
    char tag[65];
    char *repo, *rev; /* one allocation: repo's */
} note_t;

int hf_revs_new(uv_loop_t *loop, worktrack_t *work, db_t *db, hf_revs_t **out)
{
    hf_revs_t *r = calloc(1, sizeof *r);
    if (!r || !(r->gate = calloc(1, sizeof *r->gate))) {
        free(r);
        return -ENOMEM;
    }
    r->loop = loop;
    r->work = work;
    r->db = db;
    *out = r;
    return 0;
}

void hf_revs_free(hf_revs_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < SLOTS; i++)
        free(r->slots[i].key);
    if (r->gate->inflight)
        r->gate->orphaned = 1; /* the last note's after frees it */
    else
        free(r->gate);
    free(r);
}

static int is_commit(const char *s)
{
    return strlen(s) == 40 && strspn(s, "0123456789abcdef") == 40;
}

static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

static void note_work(uv_work_t *w)
{
    note_t *n = w->data;
    n->rc = db_rev_note(n->db, n->repo, n->rev, n->tag, n->commit, n->uid, HF_REVS_PER_UID);
}

static void note_after(uv_work_t *w, int status)
{
    note_t *n = w->data;
    if (status == 0 && n->rc)
        log_warn("cannot note the Hub's commit of %s@%s: %s", n->repo, n->rev, strerror(-n->rc));
    if (--n->gate->inflight == 0 && n->gate->orphaned)
        free(n->gate);
    worktrack_release(n->work_track);
    free(n->repo);
    free(n);
}

void hf_revs_note(hf_revs_t *r, const char *repo, const char *rev, const char *tag, uid_t uid,
                  const char *commit)
{
    if (!r || is_commit(rev) || !is_commit(commit))
        return;
    char *key = NULL;
    if (asprintf(&key, "%s\n%s\n%s\n%u", repo, rev, tag, (unsigned)uid) < 0)
        return;
    slot_t *s = &r->slots[fnv(key) & (SLOTS - 1)];
    uint64_t now = uv_now(r->loop) / 1000;
    if (s->key && strcmp(s->key, key) == 0 && strcmp(s->commit, commit) == 0 &&
        now - s->when < RENOTE_AFTER) {
        free(key);
        return;
    }
    if (r->gate->inflight >= HF_REVS_INFLIGHT) {
        free(key);
        return;
    }
    note_t *n = calloc(1, sizeof *n);
    size_t lr = strlen(repo);
    if (!n || !(n->repo = malloc(lr + strlen(rev) + 2))) {
        free(n);
        free(key);
        return;
    }
    memcpy(n->repo, repo, lr + 1);
    n->rev = n->repo + lr + 1;
    strcpy(n->rev, rev);
    snprintf(n->tag, sizeof n->tag, "%s", tag);
    memcpy(n->commit, commit, 41);
    n->uid = uid;
    n->db = r->db;
    n->gate = r->gate;
    n->work_track = r->work;
    n->work.data = n;
    if (uv_queue_work(r->loop, &n->work, note_work, note_after)) {
        free(n->repo);
        free(n);
        free(key);
        return;
    }
    worktrack_hold(r->work); /* a shutdown waits for it: it writes the db */
    r->gate->inflight++;
    free(s->key);
    s->key = key;
    memcpy(s->commit, commit, 41);
    s->when = now;
}

int hf_revs_find(hf_revs_t *r, const char *repo, const char *rev, const char *tag, char commit[41])
{
    if (is_commit(rev)) {
        memcpy(commit, rev, 41);
        return 0;
    }
    return r ? db_rev_find(r->db, repo, rev, tag, commit) : -ENOENT;
}
