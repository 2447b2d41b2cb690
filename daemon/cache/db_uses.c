/* db_uses: a hit's use of a blob and of its entry, queued in memory and
 * written in batches.
 *
 * A hit wrote three rows in three transactions, each with the fsyncs of
 * synchronous=FULL: 0.7 ms of a 0.75 ms hit went to the disk. Uses are
 * hints (the eviction order, `accessed` for people, and the uids that
 * asked for an entry, which only widens what LIST shows them), so a crash
 * may lose the last second of them, never more: db_touch takes the use
 * sequence number at the hit, so the order is the hits' order, and queues
 * the use; db_uses_flush writes the queue in one transaction. The fetch
 * layer flushes every second (jobs.c), the readers of the order (LIST's
 * pages, eviction) before they read, and main before db_close.
 *
 * The queue holds one use per key (blob, entry, credential tag, uid): a
 * repeated use takes the place of the one queued, with its later time and
 * sequence numbers, which are all the order reads (the statements keep the
 * max). 8 sessions hitting 50 files queued 40,000 uses in a few seconds,
 * one UPDATE each in the pool: 16% of hubd's CPU samples while they hit. */
#include "db_internal.h"
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DB_USES_SLOTS (2 * DB_USES_BOUND) /* a power of two: the index is at most half full */

static uint32_t use_key(const db_use_t *u)
{
    uint32_t h = db_fnv(DB_FNV_BASIS ^ (uint32_t)u->uid, u->sha256);
    return db_fnv(db_fnv(h, u->cred_tag), u->url ? u->url : "");
}

static int same_use(const db_use_t *a, const db_use_t *b)
{
    return a->uid == b->uid && strcmp(a->sha256, b->sha256) == 0 &&
           strcmp(a->cred_tag, b->cred_tag) == 0 && !a->url == !b->url &&
           (!a->url || strcmp(a->url, b->url) == 0);
}

/* The index's slot of u's key (uses_mu held): the one naming a queued use
 * of that key, else the empty one where it goes. NULL without an index. */
static uint32_t *use_slot(db_t *db, const db_use_t *u)
{
    if (!db->uses_index && !(db->uses_index = calloc(DB_USES_SLOTS, sizeof *db->uses_index)))
        return NULL; /* uses are then queued apart, as before */
    for (uint32_t i = use_key(u);; i++) {
        uint32_t *slot = &db->uses_index[i & (DB_USES_SLOTS - 1)];
        if (!*slot || same_use(&db->uses[*slot - 1], u))
            return slot;
    }
}

/* Queues a use, the queue holding at most `bound`: 0, 1 when it holds
 * DB_USES_MAX or more (to be written), or -ENOMEM when it had no room. */
static int queue_use(db_t *db, const char *sha256, const char *url, const char *cred_tag, uid_t uid,
                     size_t bound)
{
    db_use_t u = {.uid = uid, .when = (int64_t)time(NULL)};
    snprintf(u.sha256, sizeof u.sha256, "%s", sha256);
    snprintf(u.cred_tag, sizeof u.cred_tag, "%s", cred_tag ? cred_tag : "");
    if (url && !(u.url = strdup(url)))
        return -ENOMEM;
    pthread_mutex_lock(&db->uses_mu);
    u.seq_blob = (int64_t)(atomic_fetch_add(&db->seq, 1) + 1);
    u.seq_ent = url ? (int64_t)(atomic_fetch_add(&db->seq, 1) + 1) : 0;
    uint32_t *slot = use_slot(db, &u);
    if (slot && *slot) { /* queued already: this later use takes its place */
        db_use_t *o = &db->uses[*slot - 1];
        o->when = u.when;
        o->seq_blob = u.seq_blob;
        o->seq_ent = u.seq_ent;
        pthread_mutex_unlock(&db->uses_mu);
        free(u.url);
        return 0;
    }
    int rc = 0;
    if (db->nuses == db->uses_cap) {
        size_t cap = db->uses_cap ? db->uses_cap * 2 : 64;
        db_use_t *v = cap <= bound ? realloc(db->uses, cap * sizeof *v) : NULL;
        if (v) {
            db->uses = v;
            db->uses_cap = cap;
        }
    }
    if (db->nuses < db->uses_cap) {
        db->uses[db->nuses++] = u;
        if (slot)
            *slot = (uint32_t)db->nuses;
    } else {
        rc = -ENOMEM;
    }
    if (!rc)
        rc = db->nuses >= DB_USES_MAX;
    pthread_mutex_unlock(&db->uses_mu);
    if (rc < 0)
        free(u.url);
    return rc;
}

int db_touch(db_t *db, const char *sha256, const char *url, const char *cred_tag, uid_t uid)
{
    int rc = queue_use(db, sha256, url, cred_tag, uid, DB_USES_MAX);
    if (rc < 0) { /* no room: this use is written alone, after the queue */
        rc = db_uses_flush(db);
        return rc ? rc : db_touch(db, sha256, url, cred_tag, uid);
    }
    return rc ? db_uses_flush(db) : 0;
}

int db_touch_queue(db_t *db, const char *sha256, const char *url, const char *cred_tag, uid_t uid)
{
    return queue_use(db, sha256, url, cred_tag, uid, DB_USES_BOUND);
}

size_t db_uses_pending(db_t *db)
{
    pthread_mutex_lock(&db->uses_mu);
    size_t n = db->nuses;
    pthread_mutex_unlock(&db->uses_mu);
    return n;
}

static const char *const use_sql[] = {
    "UPDATE blobs SET accessed = max(accessed, ?2), seq = max(seq, ?3) WHERE sha256 = ?1",
    "UPDATE entries SET accessed = max(accessed, ?3), seq = max(seq, ?4)"
    " WHERE url = ?1 AND cred_tag = ?2",
    /* As db_record_download's requester row: only for an entry there is. */
    "INSERT INTO requesters(url, cred_tag, uid) SELECT ?1, ?2, ?3"
    " WHERE EXISTS (SELECT 1 FROM entries WHERE url = ?1 AND cred_tag = ?2)"
    " ON CONFLICT DO NOTHING",
};

static int step(sqlite3 *h, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_sq_err(h, "a use");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

/* The uses v[0, n) inside the open transaction. */
static int write_uses(sqlite3 *h, const db_use_t *v, size_t n)
{
    sqlite3_stmt *st[3] = {NULL, NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++)
        if (sqlite3_prepare_v2(h, use_sql[i], -1, &st[i], NULL) != SQLITE_OK)
            rc = db_sq_err(h, "prepare a use");
    for (size_t i = 0; i < n && !rc; i++) {
        const db_use_t *u = &v[i];
        sqlite3_bind_text(st[0], 1, u->sha256, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st[0], 2, u->when);
        sqlite3_bind_int64(st[0], 3, u->seq_blob);
        rc = step(h, st[0]);
        if (rc || !u->url)
            continue;
        sqlite3_bind_text(st[1], 1, u->url, -1, SQLITE_STATIC);
        sqlite3_bind_text(st[1], 2, u->cred_tag, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st[1], 3, u->when);
        sqlite3_bind_int64(st[1], 4, u->seq_ent);
        rc = step(h, st[1]);
        if (rc)
            continue;
        sqlite3_bind_text(st[2], 1, u->url, -1, SQLITE_STATIC);
        sqlite3_bind_text(st[2], 2, u->cred_tag, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st[2], 3, (int64_t)u->uid);
        rc = step(h, st[2]);
    }
    for (int i = 0; i < 3; i++)
        sqlite3_finalize(st[i]);
    return rc;
}

int db_uses_flush(db_t *db)
{
    /* The writer's (recursive) mutex first, held until the COMMIT: a
     * reader of the order that flushes meanwhile waits for this write, not
     * an empty queue (the uses taken here not yet written). */
    sqlite3 *h = db->wr;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    pthread_mutex_lock(&db->uses_mu);
    db_use_t *v = db->uses;
    size_t n = db->nuses;
    db->uses = NULL;
    db->nuses = db->uses_cap = 0;
    if (n && db->uses_index) /* LIST flushes before each page, mostly with nothing queued */
        memset(db->uses_index, 0, DB_USES_SLOTS * sizeof *db->uses_index);
    pthread_mutex_unlock(&db->uses_mu);
    int rc = n ? db_tx_begin(h) : 0;
    if (n && !rc)
        rc = db_tx_end(h, write_uses(h, v, n));
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    if (!n) {
        free(v);
        return 0;
    }
    if (rc)
        log_warn("%zu uses of cached files not recorded (%s): the eviction order may be off", n,
                 strerror(-rc));
    for (size_t i = 0; i < n; i++)
        free(v[i].url);
    free(v);
    return rc;
}
