/* metrics: the scrape endpoint's page (see metrics.h). */
#include "metrics.h"
#include "log.h"
#include "promtext.h"

#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_MAX (8u << 20) /* bytes of a page: 4096 users' four lines fit many times */
#define NAME_KEEP_MS 600000 /* a name found is used this long, then asked again */

/* A user's name as last found (the label's value), by uid. */
typedef struct name_entry {
    uid_t uid;
    uint64_t found; /* uv_now when asked */
    char name[72];
} name_entry_t;

/* One scrape's work: the pool item owns all of it while out. */
typedef struct scrape {
    uv_work_t work;
    metrics_t *m; /* NULL once m closed: the item frees itself */
    db_t *db;
    char stats[PROTO_MAX_LINE]; /* the STATS line, snapshot on the loop */
    size_t stats_len;
    int by_uid;            /* metrics_user_label = uid */
    uint64_t now;          /* uv_now at the snapshot */
    metrics_user_t *users; /* sorted by uid once the item runs */
    size_t n, cap;
    name_entry_t *names; /* the metrics' remembered names, taken while out */
    size_t nnames;
    bytebuf_t page;
    int err;
} scrape_t;

struct metrics {
    metrics_deps_t d;
    list_t askers;       /* metrics_ask_t waiting for the item out */
    scrape_t *item;      /* the item in the pool, or NULL */
    name_entry_t *names; /* sorted by uid; NULL while the item has them */
    size_t nnames;
};

/* ---- the page: pure ---------------------------------------------------- */

static const struct {
    const char *name, *type, *help;
} user_families[] = {
    {"hubd_user_served_bytes_total", "counter",
     "Bytes of the files handed out to the user since hubd started."},
    {"hubd_user_held_bytes", "gauge",
     "Bytes of the blobs the user holds (links into an HF cache), each once."},
    {"hubd_user_holds", "gauge", "Holds of the user (links into an HF cache)."},
    {"hubd_user_downloads_active", "gauge", "Downloads transferring now that the user started."},
};

int metrics_render_users(bytebuf_t *out, const char *label, const metrics_user_t *u, size_t n)
{
    int rc = 0;
    for (size_t f = 0; f < sizeof user_families / sizeof user_families[0] && !rc; f++) {
        rc = promtext_family(out, user_families[f].name, user_families[f].type,
                             user_families[f].help);
        for (size_t i = 0; i < n && !rc; i++) {
            uint64_t v = f == 0   ? u[i].served
                         : f == 1 ? u[i].held
                         : f == 2 ? u[i].holds
                                  : u[i].active;
            rc = promtext_sample(out, user_families[f].name, label, u[i].name, v);
        }
    }
    return rc;
}

/* ---- the pool item ------------------------------------------------------ */

static int by_uid_cmp(const void *a, const void *b)
{
    uid_t x = ((const metrics_user_t *)a)->uid, y = ((const metrics_user_t *)b)->uid;
    return x < y ? -1 : x > y;
}

static int name_cmp(const void *a, const void *b)
{
    uid_t x = ((const name_entry_t *)a)->uid, y = ((const name_entry_t *)b)->uid;
    return x < y ? -1 : x > y;
}

/* The uid's row, added (zeroed) when new; NULL past the cap. Loop: before
 * the item; pool: the holds, the first sorted n0 searched by bisection. */
static metrics_user_t *user_of(scrape_t *s, uid_t uid, size_t sorted)
{
    metrics_user_t key = {.uid = uid};
    metrics_user_t *u = sorted ? bsearch(&key, s->users, sorted, sizeof key, by_uid_cmp) : NULL;
    for (size_t i = sorted; !u && i < s->n; i++)
        if (s->users[i].uid == uid)
            u = &s->users[i];
    if (u)
        return u;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        metrics_user_t *t =
            s->n < 3 * METRICS_MAX_USERS ? realloc(s->users, cap * sizeof *t) : NULL;
        if (!t)
            return NULL;
        s->users = t;
        s->cap = cap;
    }
    u = &s->users[s->n++];
    memset(u, 0, sizeof *u);
    u->uid = uid;
    return u;
}

struct holds_ctx {
    scrape_t *s;
    size_t sorted; /* users[0..sorted) are sorted by uid */
};

static void add_holds(void *arg, uid_t uid, uint64_t holds, uint64_t bytes)
{
    struct holds_ctx *h = arg;
    metrics_user_t *u = user_of(h->s, uid, h->sorted);
    if (u) {
        u->holds = holds;
        u->held = bytes;
    }
}

/* Each user's label value: its uid, or its name (remembered, else asked
 * of NSS here, in the pool: it may block on a directory server). The
 * names remembered become those of this page's users. */
static int by_label_cmp(const void *a, const void *b)
{
    const metrics_user_t *x = *(metrics_user_t *const *)a, *y = *(metrics_user_t *const *)b;
    return strcmp(x->label, y->label);
}

/* metrics.h: one label per user, whatever the names. */
void metrics_unique_labels(metrics_user_t *u, size_t n)
{
    metrics_user_t **v = n ? malloc(n * sizeof *v) : NULL;
    if (!v)
        return;
    for (size_t i = 0; i < n; i++) {
        v[i] = &u[i];
        promtext_escape(v[i]->name, v[i]->label, sizeof v[i]->label);
    }
    qsort(v, n, sizeof *v, by_label_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && strcmp(v[i]->label, v[j]->label) == 0)
            j++;
        for (size_t k = i; j - i > 1 && k < j; k++)
            snprintf(v[k]->name, sizeof v[k]->name, "uid:%u", (unsigned)v[k]->uid);
        i = j;
    }
    free(v);
}

static void name_users(scrape_t *s)
{
    name_entry_t *next = s->by_uid ? NULL : calloc(s->n ? s->n : 1, sizeof *next);
    for (size_t i = 0; i < s->n; i++) {
        metrics_user_t *u = &s->users[i];
        snprintf(u->name, sizeof u->name, "%u", (unsigned)u->uid);
        if (s->by_uid || !next)
            continue;
        name_entry_t key = {.uid = u->uid};
        const name_entry_t *old =
            s->nnames ? bsearch(&key, s->names, s->nnames, sizeof key, name_cmp) : NULL;
        name_entry_t *e = &next[i];
        if (old && s->now - old->found < NAME_KEEP_MS) {
            *e = *old;
        } else {
            struct passwd pw, *res = NULL;
            char buf[16384];
            e->uid = u->uid;
            e->found = s->now;
            if (getpwuid_r(u->uid, &pw, buf, sizeof buf, &res) == 0 && res)
                snprintf(e->name, sizeof e->name, "%s", res->pw_name);
            else
                snprintf(e->name, sizeof e->name, "%s", u->name); /* no name: the uid */
        }
        snprintf(u->name, sizeof u->name, "%s", e->name);
    }
    if (s->by_uid || !next)
        return; /* the names are kept for when names come back */
    free(s->names);
    s->names = next;
    s->nnames = s->n;
    metrics_unique_labels(s->users, s->n);
}

static void scrape_work(uv_work_t *w)
{
    scrape_t *s = w->data;
    size_t loop_rows = s->n;
    if (s->n) /* users is NULL until the first */
        qsort(s->users, s->n, sizeof *s->users, by_uid_cmp);
    db_holds_refresh(s->db); /* counts gone stale after a removal: a no-op otherwise */
    struct holds_ctx h = {.s = s, .sorted = loop_rows};
    int rc = db_holds_by_uid(s->db, METRICS_MAX_USERS, add_holds, &h);
    if (rc)
        log_warn("metrics: the holds by user: %s", strerror(-rc)); /* the rest still shown */
    if (s->n) /* users is NULL until the first */
        qsort(s->users, s->n, sizeof *s->users, by_uid_cmp);
    if (s->n > METRICS_MAX_USERS)
        s->n = METRICS_MAX_USERS;
    name_users(s);
    proto_msg_t *msg = malloc(sizeof *msg);
    if (!msg) {
        s->err = -ENOMEM;
        return;
    }
    bytebuf_init(&s->page, PAGE_MAX);
    s->err = proto_parse(s->stats, s->stats_len, msg);
    if (!s->err)
        s->err = promtext_stats(&s->page, msg);
    if (!s->err)
        s->err = metrics_render_users(&s->page, s->by_uid ? "uid" : "user", s->users, s->n);
    free(msg);
}

static void scrape_free(scrape_t *s)
{
    bytebuf_free(&s->page);
    free(s->users);
    free(s->names);
    free(s);
}

static void start(metrics_t *m);

static void after_scrape(uv_work_t *w, int status)
{
    scrape_t *s = w->data;
    metrics_t *m = s->m;
    if (!m) { /* closed meanwhile */
        scrape_free(s);
        return;
    }
    m->item = NULL;
    m->names = s->names; /* back to the metrics for the next page */
    m->nnames = s->nnames;
    s->names = NULL;
    int err = status ? status : s->err;
    if (err)
        log_warn("metrics: the page could not be made: %s", strerror(-err));
    list_node_t *n;
    while ((n = list_first(&m->askers)) != NULL) {
        metrics_ask_t *a = list_entry(n, metrics_ask_t, node);
        list_remove(&a->node);
        a->waiting = 0;
        a->cb(a->arg, err ? NULL : bytebuf_data(&s->page), err ? 0 : bytebuf_len(&s->page), err);
    }
    scrape_free(s);
}

/* ---- the loop's side ---------------------------------------------------- */

static void add_served(void *arg, uid_t uid, uint64_t bytes)
{
    metrics_user_t *u = user_of(arg, uid, 0);
    if (u)
        u->served = bytes;
}

static void add_active(void *arg, uid_t uid, unsigned n)
{
    metrics_user_t *u = user_of(arg, uid, 0);
    if (u)
        u->active = n;
}

/* The item, with what the loop alone may read: the STATS line, the bytes
 * served and the downloads by uid (memory, no I/O). */
static void start(metrics_t *m)
{
    scrape_t *s = calloc(1, sizeof *s);
    int rc = s ? 0 : -ENOMEM;
    if (s) {
        s->m = m;
        s->db = m->d.db;
        s->now = uv_now(m->d.loop);
        s->by_uid = m->d.cfg->metrics_user_label == CONFIG_LABEL_UID;
        proto_writer_t w;
        proto_begin(&w, s->stats, sizeof s->stats, "STATS");
        m->d.stats(m->d.stats_arg, &w);
        int len = proto_end(&w);
        rc = len < 0 ? len : 0;
        s->stats_len = len > 0 ? (size_t)len - 1 : 0; /* without its '\n' */
        jobs_served_by_uid(m->d.jobs, add_served, s);
        jobs_active_by_uid(m->d.jobs, add_active, s);
        s->names = m->names;
        s->nnames = m->nnames;
        m->names = NULL;
        m->nnames = 0;
        s->work.data = s;
    }
    if (!rc && (rc = uv_queue_work(m->d.loop, &s->work, scrape_work, after_scrape)) == 0) {
        m->item = s;
        return;
    }
    if (s) {
        m->names = s->names; /* given back */
        m->nnames = s->nnames;
        s->names = NULL;
        scrape_free(s);
    }
    log_warn("metrics: cannot make the page: %s", strerror(-rc));
    /* No item: the askers hear it now (metrics_ask's caller among them). */
    list_node_t *n;
    while ((n = list_first(&m->askers)) != NULL) {
        metrics_ask_t *a = list_entry(n, metrics_ask_t, node);
        list_remove(&a->node);
        a->waiting = 0;
        a->cb(a->arg, NULL, 0, rc);
    }
}

void metrics_ask(metrics_t *m, metrics_ask_t *a, metrics_page_cb cb, void *arg)
{
    a->cb = cb;
    a->arg = arg;
    a->waiting = 1;
    list_push_back(&m->askers, &a->node);
    if (!m->item)
        start(m);
}

void metrics_cancel(metrics_ask_t *a)
{
    if (!a->waiting)
        return;
    list_remove(&a->node);
    a->waiting = 0;
}

int metrics_new(const metrics_deps_t *d, metrics_t **out)
{
    metrics_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->d = *d;
    list_init(&m->askers);
    *out = m;
    return 0;
}

void metrics_close(metrics_t *m)
{
    list_node_t *n;
    while ((n = list_first(&m->askers)) != NULL) {
        metrics_ask_t *a = list_entry(n, metrics_ask_t, node);
        list_remove(&a->node);
        a->waiting = 0;
    }
    if (m->item)
        m->item->m = NULL; /* it frees itself when back */
    free(m->names);
    free(m);
}
