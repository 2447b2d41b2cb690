/* cache: eviction, verification and removal, in pool threads. */
#include "cache.h"
#include "holds.h"
#include "log.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define EVICT_BATCH 256 /* victims read, forgotten and unlinked a transaction at a time */
#define VERIFY_CHUNK (1u << 20)

typedef struct victim {
    char sha[65];
    uint64_t size;
} victim_t;

typedef struct victims {
    victim_t v[EVICT_BATCH];
    unsigned n;
} victims_t;

static void add_victim(void *arg, const char *sha, uint64_t size)
{
    victims_t *vs = arg;
    if (vs->n < EVICT_BATCH && strlen(sha) == 64) {
        memcpy(vs->v[vs->n].sha, sha, 65);
        vs->v[vs->n++].size = size;
    }
}

static atomic_int cancelled; /* a shutdown: long walks stop early */

void cache_cancel_all(void)
{
    atomic_store(&cancelled, 1);
}

/* ---- room for removals on a full disk -------------------------------------- */

#define RESERVE_MAX (8u << 20)   /* plenty for a delete transaction's WAL pages */
#define RESERVE_MIN (256u << 10) /* on a small file system, 1% of it, at least this */

static void reserve_path(const store_t *store, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/reserve", store_dir(store));
}

int cache_reserve_make(store_t *store)
{
    char path[PATH_MAX];
    reserve_path(store, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct stat st;
    struct statvfs v;
    uint64_t want = RESERVE_MAX;
    if (fstatvfs(fd, &v) == 0 && (uint64_t)v.f_blocks * v.f_frsize / 100 < want)
        want = (uint64_t)v.f_blocks * v.f_frsize / 100;
    if (want < RESERVE_MIN)
        want = RESERVE_MIN;
    int rc = fstat(fd, &st) ? errno : 0;
    if (!rc && (uint64_t)st.st_size < want)
        rc = posix_fallocate(fd, 0, (off_t)want);
    close(fd);
    if (rc) /* a part-made reserve would only waste what it holds */
        unlink(path);
    return -rc;
}

/* Frees the reserve: 1 when there was one to free. */
static int reserve_release(store_t *store)
{
    char path[PATH_MAX];
    reserve_path(store, path, sizeof path);
    if (unlink(path))
        return 0;
    log_warn("the cache's file system is full: released the room kept (%s) so that blobs can "
             "still be removed",
             path);
    return 1;
}

/* Row first, then file: a crash in between leaves a file no row names,
 * which start-up quarantines; never a row without its file. Both under the
 * writer's lock, so a commit of the same content cannot slip its rename
 * between them (and lose its file).
 *
 * On a full disk SQLite cannot write even a delete (the WAL grows): then a
 * removal asked for by an admin takes the file first, since it goes anyway
 * (a crash in between leaves a row without its file, which start-up
 * forgets, and a hit that finds the file gone downloads again), and if that
 * freed too little, or for an eviction, the reserve goes. */
static int drop_blob(store_t *store, db_t *db, const char *sha, int unless_pinned)
{
    db_lock(db);
    int rc = db_forget_blob(db, sha, unless_pinned);
    if (rc == -ENOSPC && !unless_pinned) { /* eviction must not unlink a pinned one */
        store_unlink_blob(store, sha);
        rc = db_forget_blob(db, sha, unless_pinned);
    }
    if (rc == -ENOSPC && reserve_release(store))
        rc = db_forget_blob(db, sha, unless_pinned);
    if (!rc)
        store_unlink_blob(store, sha);
    db_unlock(db);
    db_holds_refresh(db); /* its holds went with it */
    return rc;
}

/* The first victims of vs whose sizes reach `over` (all of them, at
 * most): their rows go in one transaction, then their files, all under
 * the writer's lock, row first as in drop_blob. Returns how many were
 * tried, each rcs[i] 0 (gone), -EBUSY, -ENOENT, or 1 when the batch's
 * transaction failed (a full disk: each then goes by drop_blob, which
 * knows what to do then). */
static unsigned batch_forget(store_t *store, db_t *db, const victims_t *vs, uint64_t over, int *rcs)
{
    const char *shas[EVICT_BATCH];
    unsigned n = 0;
    uint64_t sum = 0;
    while (n < vs->n && sum < over) {
        shas[n] = vs->v[n].sha;
        sum += vs->v[n++].size;
    }
    const char *gone[EVICT_BATCH];
    unsigned ngone = 0;
    db_lock(db);
    int rc = db_forget_blobs(db, shas, n, 1, rcs);
    for (unsigned i = 0; i < n; i++) {
        if (rc)
            rcs[i] = 1;
        else if (!rcs[i])
            gone[ngone++] = shas[i];
    }
    store_unlink_blobs(store, gone, ngone); /* several at once: each may wait on the disk */
    db_unlock(db);
    db_holds_refresh(db); /* the holds of what went went with it */
    return n;
}

int cache_drop(store_t *store, db_t *db, const char *sha256)
{
    return drop_blob(store, db, sha256, 1);
}

int cache_evict(store_t *store, db_t *db, uint64_t target, const char *keep, uint64_t fence,
                cache_evict_result_t *out)
{
    memset(out, 0, sizeof *out);
    int rc = db_total_size(db, fence, &out->size);
    /* A held blob is not a candidate (db_lru leaves it): first drop the
     * holds whose links are gone, so that their blobs can go. */
    if (!rc && out->size > target && holds_prune(store, db, HOLDS_CHECK_MAX) < 0)
        log_warn("eviction: the holds could not be checked; held blobs stay");
    while (!rc && out->size > target && !atomic_load(&cancelled)) {
        victims_t vs = {.n = 0};
        if ((rc = db_lru(db, EVICT_BATCH, keep, fence, add_victim, &vs)) != 0 || vs.n == 0)
            break; /* only pinned blobs (and keep) are left */
        unsigned dropped = 0;
        int rcs[EVICT_BATCH];
        unsigned n = batch_forget(store, db, &vs, out->size - target, rcs);
        for (unsigned i = 0; i < n && out->size > target; i++) {
            rc = rcs[i] == 1 ? drop_blob(store, db, vs.v[i].sha, 1) : rcs[i];
            if (rc == -EBUSY || rc == -ENOENT) { /* pinned or removed meanwhile */
                rc = 0;
                continue;
            }
            if (rc)
                break;
            dropped++;
            log_info("evicted blob %s (%llu bytes, least recently used)", vs.v[i].sha,
                     (unsigned long long)vs.v[i].size);
            out->evicted++;
            out->freed += vs.v[i].size;
            out->size -= vs.v[i].size < out->size ? vs.v[i].size : out->size;
        }
        if (!dropped && !rc) /* nothing of this batch could go: do not spin */
            break;
    }
    return rc;
}

/* Passes of cache_gc: blobs committed during a pass may keep the cache
 * above target; a few passes take them, and a steady stream of commits
 * cannot keep a GC from answering. */
#define GC_PASSES 4

int cache_gc(store_t *store, db_t *db, uint64_t target, cache_gc_result_t *out)
{
    memset(out, 0, sizeof *out);
    int rc = 0;
    for (unsigned pass = 0; pass < GC_PASSES && !rc; pass++) {
        cache_evict_result_t ev;
        rc = cache_evict(store, db, target, NULL, UINT64_MAX, &ev);
        out->evicted += ev.evicted;
        out->freed += ev.freed;
        /* The size the answer gives is the committed one that STATS reads,
         * not this pass's own count: anything else that removed or added
         * blobs meanwhile is in it. */
        uint64_t blobs;
        db_cache_size(db, &out->size, &blobs);
        if (ev.size > target) /* only what eviction passes over is left */
            break;
        if (out->size <= target)
            break;
    }
    if (!rc && atomic_load(&cancelled))
        rc = -ECANCELED;
    int r;
    if (!rc && out->size > target && (r = db_kept(db, &out->kept)) != 0) {
        memset(&out->kept, 0, sizeof out->kept); /* the GC itself is done */
        log_warn("gc: what stayed above the target could not be counted: %s", strerror(-r));
    }
    return rc;
}

/* ---- verify ------------------------------------------------------------- */

typedef struct all_blobs {
    victim_t *v;
    size_t n, cap;
    int err;
} all_blobs_t;

static void collect_blob(void *arg, const char *sha, uint64_t size)
{
    all_blobs_t *a = arg;
    if (a->n == a->cap) {
        size_t c = a->cap ? a->cap * 2 : 256;
        victim_t *p = realloc(a->v, c * sizeof *p);
        if (!p) {
            a->err = -ENOMEM;
            return;
        }
        a->v = p;
        a->cap = c;
    }
    snprintf(a->v[a->n].sha, sizeof a->v[a->n].sha, "%s", sha);
    a->v[a->n++].size = size;
}

/* NULL when the file is whole and hashes to its name, else why not. *st
 * gets the file's stat, taken before reading it (st_ino 0 when it could not
 * be opened). */
static const char cannot_open[] = "cannot be opened now";

static const char *check_blob(const char *path, const victim_t *b, uint8_t *buf, struct stat *st)
{
    st->st_ino = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    /* Out of descriptors or memory says nothing about the blob (and any
     * local user can run hubd out of descriptors): cannot_open, which no
     * caller takes for bad. */
    if (fd < 0)
        return errno == ENOENT ? "missing" : errno == ELOOP ? "not a regular file" : cannot_open;
    if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
        close(fd);
        return "not a regular file";
    }
    if ((uint64_t)st->st_size != b->size) {
        close(fd);
        return "size differs";
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    sha256_ctx_t sha;
    sha256_init(&sha);
    ssize_t n;
    while ((n = read(fd, buf, VERIFY_CHUNK)) > 0 && !atomic_load(&cancelled))
        sha256_update(&sha, buf, (size_t)n);
    close(fd);
    if (n < 0)
        return "unreadable";
    if (atomic_load(&cancelled))
        return NULL; /* not checked to the end: not reported bad either */
    uint8_t digest[32];
    char hex[65];
    sha256_final(&sha, digest);
    sha256_hex(digest, hex);
    return strcmp(hex, b->sha) == 0 ? NULL : "content differs";
}

static void quarantine_blob(store_t *store, const char *sha, const char *path)
{
    char dir[PATH_MAX], to[PATH_MAX + 80];
    snprintf(dir, sizeof dir, "%s/quarantine", store_dir(store));
    if (mkdir(dir, 0700) && errno != EEXIST)
        return;
    snprintf(to, sizeof to, "%s/%s", dir, sha);
    if (rename(path, to) && errno != ENOENT)
        log_warn("cannot quarantine blob %s: %s", sha, strerror(errno));
}

int cache_quarantine(store_t *store, db_t *db, const char *sha256, const char *why)
{
    char path[PATH_MAX];
    store_blob_path(store, sha256, path, sizeof path);
    db_lock(db);
    int rc = db_forget_blob(db, sha256, 0); /* row first, as drop_blob */
    if (!rc || rc == -ENOENT)
        quarantine_blob(store, sha256, path);
    db_unlock(db);
    db_holds_refresh(db);
    log_warn("blob %s: %s: quarantined and forgotten", sha256, why);
    return rc;
}

int cache_verify(store_t *store, db_t *db, unsigned *checked, cache_bad_t **bad)
{
    all_blobs_t all = {0};
    *checked = 0;
    *bad = NULL;
    int rc = db_each_blob(db, collect_blob, &all);
    if (!rc)
        rc = all.err;
    uint8_t *buf = rc ? NULL : malloc(VERIFY_CHUNK);
    if (!rc && !buf)
        rc = -ENOMEM;
    for (size_t i = 0; !rc && i < all.n && !atomic_load(&cancelled); i++) {
        char path[PATH_MAX];
        store_blob_path(store, all.v[i].sha, path, sizeof path);
        struct stat st;
        const char *why = check_blob(path, &all.v[i], buf, &st);
        (*checked)++;
        if (why == cannot_open)
            log_warn("verify: blob %s %s: %s; not checked", all.v[i].sha, why, strerror(errno));
        if (!why || why == cannot_open)
            continue;
        log_warn("verify: blob %s is bad (%s): quarantined and forgotten", all.v[i].sha, why);
        quarantine_blob(store, all.v[i].sha, path);
        cache_bad_t *b = calloc(1, sizeof *b);
        if (b) {
            memcpy(b->sha256, all.v[i].sha, 65);
            snprintf(b->why, sizeof b->why, "%s", why);
            b->next = *bad;
            *bad = b;
        }
        rc = db_forget_blob(db, all.v[i].sha, 0);
        if (rc == -ENOENT) /* removed meanwhile */
            rc = 0;
    }
    free(buf);
    free(all.v);
    db_holds_refresh(db);
    /* STATS' totals are counters (db_totals.c): checked here against the
     * table, and mended if they drifted. */
    uint64_t was_bytes = 0, was_blobs = 0;
    if (!rc && db_totals_check(db, &was_bytes, &was_blobs) == 1)
        log_warn("verify: the cache's totals said %llu bytes in %llu blobs, the table other: "
                 "counted again",
                 (unsigned long long)was_bytes, (unsigned long long)was_blobs);
    return rc;
}

/* Whether path still names the file that st describes (not replaced by a
 * commit of the same digest meanwhile). */
static int same_file(const char *path, const struct stat *st)
{
    struct stat now;
    return lstat(path, &now) == 0 && now.st_ino == st->st_ino && now.st_dev == st->st_dev;
}

int cache_verify_one(store_t *store, db_t *db, const char *sha256, uint64_t size, int64_t now)
{
    char path[PATH_MAX];
    uint8_t *buf = malloc(VERIFY_CHUNK);
    if (!buf)
        return -ENOMEM;
    victim_t b;
    snprintf(b.sha, sizeof b.sha, "%s", sha256);
    b.size = size;
    store_blob_path(store, sha256, path, sizeof path);
    struct stat st;
    const char *why = check_blob(path, &b, buf, &st);
    free(buf);
    if (atomic_load(&cancelled))
        return -ECANCELED;
    if (why == cannot_open)
        return -EAGAIN; /* another time */
    int rc = 0;
    db_lock(db);
    if (why && (!st.st_ino || same_file(path, &st))) {
        cache_quarantine(store, db, sha256, why);
        rc = -EBADMSG;
    } else if (!why && same_file(path, &st)) {
        /* Verified: from now on hits compare the file with this identity
         * (the one a commit recorded, unless a cache from before had none). */
        db_blob_stat_t bs = db_blob_stat_of(&st);
        db_set_verified(db, sha256, now, &bs);
    }
    db_unlock(db);
    return rc;
}

void cache_bad_free(cache_bad_t *bad)
{
    while (bad) {
        cache_bad_t *next = bad->next;
        free(bad);
        bad = next;
    }
}

/* An entry (and its blob when it was the last): cache_remove by URL and
 * cache_forget. */
static int remove_entry(store_t *store, db_t *db, const char *url, const char *cred_tag,
                        const char *only_sha, int *removed_blob)
{
    char sha[65];
    int gone = 0;
    *removed_blob = 0;
    db_lock(db);
    int rc = db_remove_entry(db, url, cred_tag, only_sha, sha, &gone);
    if (rc == -ENOSPC && reserve_release(store)) /* a full disk: see drop_blob */
        rc = db_remove_entry(db, url, cred_tag, only_sha, sha, &gone);
    if (!rc && gone) {
        store_unlink_blob(store, sha);
        *removed_blob = 1;
    }
    db_unlock(db);
    db_holds_refresh(db);
    return rc;
}

int cache_remove(store_t *store, db_t *db, const char *url_or_sha, int force, cache_holders_t *held,
                 int *removed_blob)
{
    *removed_blob = 0;
    held->total = 0;
    size_t n = strspn(url_or_sha, "0123456789abcdef");
    int by_sha = n == 64 && url_or_sha[64] == '\0';
    /* The check and the removal under one lock: a HOLD of the blob cannot
     * come between them (holds_add takes it too). */
    db_lock(db);
    int rc =
        force ? 0
              : db_rm_holders(db, url_or_sha, by_sha, held->uid, CACHE_HOLDERS_MAX, &held->total);
    if (!rc && held->total)
        rc = -EBUSY;
    else if (!rc && by_sha && (rc = drop_blob(store, db, url_or_sha, 0)) == 0)
        *removed_blob = 1;
    else if (!rc && !by_sha)
        rc = remove_entry(store, db, url_or_sha, "", NULL, removed_blob);
    db_unlock(db);
    return rc;
}

int cache_forget(store_t *store, db_t *db, const char *url, const char *cred_tag,
                 const char *sha256, int *removed_blob)
{
    return remove_entry(store, db, url, cred_tag, sha256, removed_blob);
}
