/* holds: HOLD and UNHOLD on the cache's files and rows, and the link check
 * eviction runs first. Pool threads. */
#include "holds.h"
#include "grant.h"
#include "linkcheck.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* The blob's file, never through a link (as store_open_blob). */
static int open_blob(const store_t *store, const char *sha, struct stat *st)
{
    char path[PATH_MAX];
    store_blob_path(store, sha, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ELOOP ? -EIO : -errno;
    if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
        close(fd);
        return -EIO;
    }
    return fd;
}

/* A grant changes the file's ctime, which a hit compares with the identity
 * recorded at commit (a changed file is re-hashed before it is served):
 * when the recorded identity was the file's just before, record the new
 * one. One that differed already is left for the hit to judge. The caller
 * holds db_lock. */
static void keep_identity(db_t *db, const char *sha, int fd, const struct stat *before)
{
    db_blob_stat_t rec, was = db_blob_stat_of(before);
    struct stat now;
    if (db_get_blob_stat(db, sha, &rec) || !rec.ino || memcmp(&rec, &was, sizeof rec) ||
        fstat(fd, &now))
        return;
    db_blob_stat_t bs = db_blob_stat_of(&now);
    db_set_blob_stat(db, sha, &bs);
}

/* uid no longer holds sha: its grant goes (a public blob has none). The
 * caller holds db_lock. */
static void ungrant(const store_t *store, db_t *db, uid_t uid, const char *sha)
{
    struct stat st;
    int fd = open_blob(store, sha, &st);
    if (fd < 0)
        return; /* gone: so is its ACL */
    if (!(st.st_mode & 0004)) {
        int rc = grant_remove(fd, uid);
        if (rc && rc != -EOPNOTSUPP && rc != -ENOTSUP)
            log_warn("blob %s: cannot remove the read grant of uid %u: %s", sha, (unsigned)uid,
                     strerror(-rc));
        else if (!rc)
            keep_identity(db, sha, fd, &st);
    }
    close(fd);
}

/* The held bytes one uid may have: the setting, else half of what the
 * cache may hold (max_cache_size, else the file system's size), so that one
 * user's pins leave at least half of it to everyone's eviction. 0: no
 * bound (the size could not be told). */
static uint64_t bytes_bound(const holds_bounds_t *b, int fd)
{
    struct statvfs vfs;
    if (b->max_bytes)
        return b->max_bytes;
    if (b->cache_max)
        return b->cache_max / 2;
    return fstatvfs(fd, &vfs) ? 0 : (uint64_t)vfs.f_blocks * vfs.f_frsize / 2;
}

int holds_add(store_t *store, db_t *db, const holds_bounds_t *b, const db_hold_t *h, int served,
              int *readable, int *over)
{
    *readable = *over = 0;
    db_blob_stat_t rec;
    struct stat st;
    db_lock(db);
    int rc = db_get_blob_stat(db, h->sha256, &rec); /* -ENOENT: no such blob */
    int fd = rc ? rc : open_blob(store, h->sha256, &st);
    if (fd < 0) {
        rc = fd == -ENOENT ? -ENOENT : fd;
        goto out;
    }
    /* Public or not, only bytes this uid was given: a hold pins them in
     * the cache, and a pin is for what the user has. */
    db_hold_bounds_t bounds = {b->max_holds, bytes_bound(b, fd), b->max_text, b->max_per_blob};
    rc = served ? db_hold_fits(db, h, &bounds) : -EPERM;
    if (rc > 0) { /* past a bound: no row, the client copies */
        *over = rc;
        rc = 0;
    } else if (!rc && (st.st_mode & 0004)) { /* public by o+r alone (a grant's mask shows
                                                 in the group bits) */
        *readable = 1;
    } else if (!rc) {
        rc = grant_add(fd, h->uid, GRANT_MAX_USERS);
        if (!rc) {
            *readable = 1;
            keep_identity(db, h->sha256, fd, &st);
        } else if (rc == -ENOSPC || rc == -EOPNOTSUPP || rc == -ENOTSUP) {
            log_info("blob %s: no read grant for uid %u (%s): the client copies", h->sha256,
                     (unsigned)h->uid,
                     rc == -ENOSPC ? "it has the most named users already"
                                   : "the file system keeps no ACLs");
            rc = 0;
        }
    }
    close(fd);
    char moved_from[65] = "";
    if (!rc && *readable)
        rc = db_hold_add(db, h, moved_from);
    /* The link held another blob before, which uid holds no more: its
     * grant goes, as UNHOLD's would. */
    if (!rc && moved_from[0])
        ungrant(store, db, h->uid, moved_from);
out:
    db_unlock(db);
    return rc;
}

typedef struct release_ctx {
    const store_t *store;
    db_t *db;
    uid_t uid;
} release_ctx_t;

static void on_released(void *arg, const char *sha)
{
    release_ctx_t *c = arg;
    ungrant(c->store, c->db, c->uid, sha);
}

int holds_release(store_t *store, db_t *db, uid_t uid, const char *label, const char *link,
                  unsigned *released)
{
    release_ctx_t c = {store, db, uid};
    db_lock(db);
    int rc = db_hold_release(db, uid, label, link, released, on_released, &c);
    db_unlock(db);
    return rc;
}

/* lstat and readlink look at the link itself, never following it; its
 * parent directories are resolved as any path is, with hubd's rights,
 * symlinks included. Not narrowed further (openat2's RESOLVE_NO_SYMLINKS,
 * or a parent owned by uid), on purpose: HF caches often sit behind a
 * symlinked home or HF_HOME, or in a group's shared folder, and such a check
 * would drop their holds (and grants) wrongly, while it would keep nothing
 * from anyone: the row is uid's own, so what a path through hubd's rights
 * can decide is whether uid keeps its own hold, and what it can learn is
 * whether a symlink of uid's, to this blob, stands there. */
int holds_link_stands(const store_t *store, const char *link, uid_t uid, const char *sha256)
{
    /* Within a deadline: the link is in a user's folder, which may be a
     * file system that never answers (linkcheck.h); then it is kept. */
    linkcheck_t lc;
    int rc = linkcheck_read(link, LINKCHECK_TIMEOUT_MS, NULL, &lc);
    if (rc)
        return rc == -ENOENT || rc == -ENOTDIR ? 0 : rc;
    /* The user's own link: another's (or a file put in its place) says
     * nothing about what this user still uses. */
    if (!S_ISLNK(lc.st.st_mode) || lc.st.st_uid != uid)
        return 0;
    char want[PATH_MAX];
    store_blob_path(store, sha256, want, sizeof want);
    return strcmp(lc.target, want) == 0;
}

/* Holds to check, copied out of the statement. */
typedef struct held {
    uid_t uid;
    int64_t created;
    char sha[65];
    char *label, *link;
} held_t;

typedef struct helds {
    held_t *v;
    size_t n, cap;
    int err;
} helds_t;

static void collect(void *arg, const db_hold_t *h)
{
    helds_t *a = arg;
    if (a->err || strlen(h->sha256) != 64)
        return;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        held_t *p = realloc(a->v, cap * sizeof *p);
        if (!p) {
            a->err = -ENOMEM;
            return;
        }
        a->v = p;
        a->cap = cap;
    }
    held_t *x = &a->v[a->n];
    x->uid = h->uid;
    x->created = h->created;
    memcpy(x->sha, h->sha256, 65);
    x->label = strdup(h->label);
    x->link = strdup(h->link);
    if (!x->label || !x->link) {
        free(x->label);
        free(x->link);
        a->err = -ENOMEM;
        return;
    }
    a->n++;
}

int holds_prune(store_t *store, db_t *db, unsigned max)
{
    helds_t a = {0};
    int rc = db_holds_each(db, max, (int64_t)time(NULL) - HOLDS_GRACE, collect, &a);
    if (!rc)
        rc = a.err;
    int dropped = 0;
    unsigned unanswered = 0; /* links that did not answer in time: said once a run */
    for (size_t i = 0; i < a.n; i++) {
        held_t *x = &a.v[i];
        /* Without the lock: a link in a slow home folder must not stall
         * the commits. db_hold_drop deletes only the row seen here. */
        int stands = rc ? 1 : holds_link_stands(store, x->link, x->uid, x->sha);
        if ((stands == -ETIMEDOUT || stands == -EAGAIN) && unanswered++ == 0)
            log_warn("hold of uid %u on blob %s: its link %s did not answer within %u ms (a "
                     "file system that hangs?): kept, as are the others that do not answer",
                     (unsigned)x->uid, x->sha, x->link, LINKCHECK_TIMEOUT_MS);
        if (stands == 0) {
            db_hold_t h = {x->uid, x->label, x->sha, x->link, x->created};
            int still = 1;
            db_lock(db);
            if (db_hold_drop(db, &h, &still) == 0) {
                dropped++;
                log_info("hold of uid %u on blob %s (%s) dropped: its link %s is gone",
                         (unsigned)x->uid, x->sha, x->label, x->link);
                if (!still)
                    ungrant(store, db, x->uid, x->sha);
            }
            db_unlock(db);
        }
        free(x->label);
        free(x->link);
    }
    free(a.v);
    if (unanswered > 1)
        log_warn("holds: %u links did not answer in time: their holds are kept", unanswered);
    return rc ? rc : dropped;
}
