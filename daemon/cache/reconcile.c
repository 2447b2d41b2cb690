/* reconcile: start-up agreement between hubd.db and blobs/. */
#include "reconcile.h"
#include "log.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A file under tmp/ with a second name: a commit cut short (store_commit). */
typedef struct linked_part {
    dev_t dev;
    ino_t ino;
    uint64_t id;
} linked_part_t;

typedef struct known {
    char (*sha)[65]; /* sorted digests of the rows whose file is fine */
    size_t n, cap;
    int dir_fd; /* the cache dir: every name below is relative to it */
    db_t *db;
    linked_part_t *links; /* tmp/<id>.part files with more than one name */
    size_t nlinks, caplinks;
    char (*forget)[65]; /* rows to drop: collected first, the statement is open */
    size_t nforget, capforget;
    int err;
} known_t;

/* Room for one more element in the array *v of n elements (cap allocated). */
static int grow(void **v, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*v, c * elem);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

/* <dir_fd>/<rel>, opened as a folder, or NULL. Never through a link: a
 * folder someone replaced by a link would send the walk, its renames and
 * unlinks, elsewhere. */
static DIR *open_in(int dir_fd, const char *rel)
{
    int fd = openat(dir_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (fd >= 0 && !d)
        close(fd);
    return d;
}

static void blob_rel(const char *sha, char *buf, size_t cap)
{
    snprintf(buf, cap, "blobs/%.2s/%s", sha, sha);
}

static void tmp_rel(uint64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "tmp/%llu.part", (unsigned long long)id);
}

/* A file hubd may hand out: regular (not a link, whatever it points to),
 * and hubd's own (another owner could change its bytes at any time). */
static int is_own_file(const struct stat *st)
{
    return S_ISREG(st->st_mode) && st->st_uid == geteuid();
}

static int push(char (**v)[65], size_t *n, size_t *cap, const char *sha)
{
    int rc = grow((void **)v, *n, cap, sizeof **v);
    if (!rc)
        snprintf((*v)[(*n)++], 65, "%s", sha);
    return rc;
}

static void check_row(void *arg, const char *sha, uint64_t size)
{
    known_t *k = arg;
    char rel[96];
    struct stat st;
    blob_rel(sha, rel, sizeof rel);
    /* lstat: a link under blobs/ is not a blob, whatever it points to; its
     * row goes and walk_blobs moves the link itself to quarantine/. */
    int ok = strlen(sha) == 64 && fstatat(k->dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
             is_own_file(&st) && (uint64_t)st.st_size == size;
    int rc =
        ok ? push(&k->sha, &k->n, &k->cap, sha) : push(&k->forget, &k->nforget, &k->capforget, sha);
    if (rc)
        k->err = rc;
}

static int cmp_sha(const void *a, const void *b)
{
    return strcmp(a, b);
}

static int is_blob_name(const char *dir, const char *name)
{
    if (strlen(name) != 64 || strncmp(name, dir, 2) != 0)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

/* Moves blobs/<rel> to quarantine/<rel with '/' as '-'>: by name, so a
 * link is moved as a link, never followed. */
static int quarantine(int dir_fd, const char *rel, const char *why)
{
    char from[PATH_MAX], to[PATH_MAX];
    snprintf(from, sizeof from, "blobs/%s", rel);
    snprintf(to, sizeof to, "quarantine/%s", rel);
    for (char *p = to + strlen("quarantine/"); *p; p++)
        if (*p == '/')
            *p = '-';
    if (mkdirat(dir_fd, "quarantine", 0700) && errno != EEXIST)
        return -errno;
    if (renameat(dir_fd, from, dir_fd, to))
        return -errno;
    log_warn("quarantined blobs/%s: %s", rel, why);
    return 0;
}

/* "<digits>.part" to its id, or 0. */
static uint64_t part_id(const char *name)
{
    char *end;
    if (name[0] < '1' || name[0] > '9')
        return 0;
    unsigned long long id = strtoull(name, &end, 10);
    return strcmp(end, ".part") == 0 ? (uint64_t)id : 0;
}

/* Lists the partial files that are also named under blobs/ (or anywhere):
 * a crash came between a commit's link and the transaction that records
 * it, or between that transaction and the unlink of the tmp name. */
static void find_linked_parts(known_t *k)
{
    DIR *d = open_in(k->dir_fd, "tmp");
    if (!d)
        return;
    struct dirent *e;
    struct stat st;
    while ((e = readdir(d)) != NULL) {
        uint64_t id = part_id(e->d_name);
        if (!id || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_nlink < 2)
            continue;
        if ((k->err = grow((void **)&k->links, k->nlinks, &k->caplinks, sizeof *k->links)))
            break;
        k->links[k->nlinks++] = (linked_part_t){.dev = st.st_dev, .ino = st.st_ino, .id = id};
    }
    closedir(d);
}

/* An unrecorded blob that is the same file as partial `id`'s: the download
 * finished, was linked into blobs/, and the crash came before its row. Its
 * bytes were hashed on the way in and made durable before the link, as for
 * any commit; the row says whose they are. Records the entry and drops the
 * row (one transaction), then the tmp name. 0 when recorded, 1 when the row
 * does not describe this file (gone, or another length: it is quarantined),
 * a negative errno when the database failed (the walk stops). */
static int adopt(known_t *k, const char *sha, const struct stat *st, uint64_t id)
{
    char *url = NULL, *cred = NULL;
    db_partial_t p;
    int rc = db_get_partial(k->db, id, &url, &cred, &p);
    if (rc)
        return rc == -ENOENT ? 1 : rc;
    if (p.total >= 0 && (uint64_t)p.total != (uint64_t)st->st_size) {
        rc = 1;
    } else {
        db_record_t rec = {.url = url,
                           .cred_tag = cred,
                           .sha256 = sha,
                           .size = (uint64_t)st->st_size,
                           .etag = p.etag,
                           .last_modified = p.last_modified,
                           .partial_id = id};
        rc = db_record_download(k->db, &rec);
    }
    if (!rc) {
        char rel[64];
        tmp_rel(id, rel, sizeof rel);
        unlinkat(k->dir_fd, rel, 0);
        log_info("recorded the download of %s (blob %s), finished just before a crash", url, sha);
    }
    db_partial_free(&p);
    free(url);
    free(cred);
    return rc;
}

/* 0 when blobs/<dir>/<name> was a commit cut short and is recorded now, 1
 * when it was not one, a negative errno when the database failed. */
static int try_adopt(known_t *k, int dir_fd, const char *name)
{
    struct stat st;
    if (!k->nlinks || fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) || !is_own_file(&st) ||
        st.st_nlink < 2)
        return 1;
    for (size_t i = 0; i < k->nlinks; i++)
        if (k->links[i].dev == st.st_dev && k->links[i].ino == st.st_ino)
            return adopt(k, name, &st, k->links[i].id);
    return 1;
}

/* One two-letter folder's files: those the rows name stay, a commit cut
 * short is recorded, the rest go to quarantine/. */
static void walk_folder(known_t *k, const char *aa, DIR *dir, reconcile_report_t *rep)
{
    struct dirent *e;
    while (!k->err && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (is_blob_name(aa, e->d_name)) {
            if (k->n && bsearch(e->d_name, k->sha, k->n, sizeof *k->sha, cmp_sha))
                continue;
            int rc = try_adopt(k, dirfd(dir), e->d_name);
            if (rc <= 0) {
                if (rc == 0)
                    rep->recovered++;
                k->err = rc;
                continue;
            }
        }
        char rel[PATH_MAX];
        snprintf(rel, sizeof rel, "%s/%s", aa, e->d_name);
        if (quarantine(k->dir_fd, rel, "no database row names it") == 0)
            rep->quarantined++;
    }
}

/* A top-level name under blobs/: its folder walked, or (not a two-letter
 * folder, or a link to one: nothing of ours) moved to quarantine/. */
static void walk_top(known_t *k, const char *name, reconcile_report_t *rep)
{
    char sub[PATH_MAX];
    snprintf(sub, sizeof sub, "blobs/%s", name);
    DIR *dir = NULL;
    if (strlen(name) == 2 && !(dir = open_in(k->dir_fd, sub))) {
        if (errno == ENOENT) /* no such folder (a background step's): nothing to walk */
            return;
        if (errno != ENOTDIR && errno != ELOOP) {
            k->err = -errno; /* a folder that cannot be read now (EMFILE...): not moved */
            return;
        }
    }
    if (!dir) {
        if (quarantine(k->dir_fd, name, "not a folder of blobs") == 0)
            rep->quarantined++;
        return;
    }
    walk_folder(k, name, dir, rep);
    closedir(dir);
}

/* Walks blobs/: two-letter folders of files named by their digest. Stops at
 * a database error (k->err): a file is quarantined only when the database
 * was read and does not name it, never because it could not be read. */
static void walk_blobs(known_t *k, reconcile_report_t *rep)
{
    DIR *top = open_in(k->dir_fd, "blobs");
    if (!top)
        return;
    struct dirent *d;
    while (!k->err && (d = readdir(top)) != NULL)
        if (d->d_name[0] != '.')
            walk_top(k, d->d_name, rep);
    closedir(top);
}

typedef struct partials {
    store_t *store;
    uint64_t *keep; /* ids of the partials kept, to be sorted */
    size_t n, cap;
    uint64_t *drop; /* rows to forget: collected first, the statement is open */
    size_t ndrop, capdrop;
    uint64_t max_id;
    int err;
} partials_t;

static int push_id(uint64_t **v, size_t *n, size_t *cap, uint64_t id)
{
    int rc = grow((void **)v, *n, cap, sizeof **v);
    if (!rc)
        (*v)[(*n)++] = id;
    return rc;
}

/* A row is kept when its file holds at least the bytes it records (durable,
 * or to the end of its last finished range); the bytes after them may not
 * have reached the disk before a crash, so they go.
 * store_tmp_reopen cuts through an fd and only a regular file of hubd's with
 * one name: never a link (a planted tmp/<id>.part -> a file of root's would
 * have that file cut), never a file with a second name (a commit not
 * adopted above: cutting it would cut the other name's bytes too). */
static void check_partial(void *arg, uint64_t id, uint64_t keep)
{
    partials_t *p = arg;
    if (id > p->max_id)
        p->max_id = id;
    int fd = -1;
    int ok = keep > 0 && store_tmp_reopen(p->store, id, keep, &fd) == 0;
    if (fd >= 0)
        close(fd);
    int rc =
        ok ? push_id(&p->keep, &p->n, &p->cap, id) : push_id(&p->drop, &p->ndrop, &p->capdrop, id);
    if (rc)
        p->err = rc;
}

static int cmp_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* "<digits>.part" naming a kept row, or 0. */
static int is_kept_partial(const partials_t *p, const char *name)
{
    uint64_t key = part_id(name);
    return key && p->n && bsearch(&key, p->keep, p->n, sizeof *p->keep, cmp_id) != NULL;
}

static int reconcile_partials(store_t *store, db_t *db, reconcile_report_t *rep)
{
    partials_t p = {.store = store};
    int rc = db_each_partial(db, check_partial, &p);
    if (!rc)
        rc = p.err;
    int dir_fd = store_dir_fd(store);
    for (size_t i = 0; !rc && i < p.ndrop; i++) {
        char rel[64];
        tmp_rel(p.drop[i], rel, sizeof rel);
        unlinkat(dir_fd, rel, 0); /* if it is there at all; a link goes, not its target */
        if ((rc = db_forget_partial(db, p.drop[i])) == 0)
            rep->partials_lost++;
    }
    DIR *d = rc ? NULL : open_in(dir_fd, "tmp");
    if (d) {
        if (p.n)
            qsort(p.keep, p.n, sizeof *p.keep, cmp_id);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' || is_kept_partial(&p, e->d_name))
                continue;
            if (unlinkat(dirfd(d), e->d_name, 0) == 0)
                rep->tmp_removed++;
        }
        closedir(d);
    }
    rep->partials_kept = (unsigned)p.n;
    rep->max_partial_id = p.max_id;
    free(p.keep);
    free(p.drop);
    if (rep->tmp_removed)
        log_info("removed %u unfinished download(s) left in tmp/ without a record",
                 rep->tmp_removed);
    if (rep->partials_kept || rep->partials_lost)
        log_info("start-up check: %u partial download(s) kept for resuming, %u dropped (file "
                 "gone or short)",
                 rep->partials_kept, rep->partials_lost);
    return rc;
}

/* The rows k->db lists (by each_rows) checked against their files: the
 * bad ones forgotten, the good ones sorted in k->sha for the walk. */
static int check_rows(known_t *k, reconcile_report_t *rep, const char *aa)
{
    int rc = aa ? db_each_blob_in(k->db, aa, check_row, k) : db_each_blob(k->db, check_row, k);
    if (!rc)
        rc = k->err;
    for (size_t i = 0; !rc && i < k->nforget; i++) {
        log_warn("blob %s is listed but its file is gone, the wrong size or not a regular file "
                 "of hubd's: forgotten",
                 k->forget[i]);
        if ((rc = db_forget_blob(k->db, k->forget[i], 0)) == 0)
            rep->rows_forgotten++;
    }
    if (!rc && k->n) /* qsort and bsearch want a real array, even for none */
        qsort(k->sha, k->n, sizeof *k->sha, cmp_sha);
    return rc;
}

static void known_free(known_t *k)
{
    free(k->sha);
    free(k->forget);
    free(k->links);
}

int reconcile_cache(store_t *store, db_t *db, reconcile_report_t *rep)
{
    known_t k = {.dir_fd = store_dir_fd(store), .db = db};
    memset(rep, 0, sizeof *rep);
    int rc = check_rows(&k, rep, NULL);
    if (!rc) {
        find_linked_parts(&k);
        rc = k.err;
    }
    if (!rc) {
        walk_blobs(&k, rep);
        rc = k.err;
    }
    known_free(&k);
    if (rep->rows_forgotten || rep->quarantined || rep->recovered)
        log_info("start-up check: %u row(s) forgotten, %u file(s) quarantined, %u finished "
                 "download(s) recorded",
                 rep->rows_forgotten, rep->quarantined, rep->recovered);
    if (!rc)
        rc = reconcile_partials(store, db, rep);
    if (!rc) /* STATS' holds and held_bytes, after the rows forgotten above */
        rc = db_holds_refresh(db);
    return rc;
}

int reconcile_start(store_t *store, db_t *db, reconcile_report_t *rep, int *swept)
{
    known_t k = {.dir_fd = store_dir_fd(store), .db = db};
    memset(rep, 0, sizeof *rep);
    find_linked_parts(&k);
    int rc = k.err, cut_short = k.nlinks > 0;
    known_free(&k);
    *swept = rc == 0 && cut_short;
    if (rc)
        return rc;
    if (cut_short) /* rare (a crash inside a commit): everything now, as before */
        return reconcile_cache(store, db, rep);
    rc = reconcile_partials(store, db, rep);
    if (!rc)
        rc = db_holds_refresh(db);
    return rc;
}

int reconcile_folder(store_t *store, db_t *db, unsigned n, reconcile_report_t *rep)
{
    known_t k = {.dir_fd = store_dir_fd(store), .db = db};
    db_lock(db);
    int rc = 0;
    if (n < 256) {
        char aa[3];
        snprintf(aa, sizeof aa, "%02x", n);
        rc = check_rows(&k, rep, aa);
        if (!rc) {
            walk_top(&k, aa, rep);
            rc = k.err;
        }
    } else { /* the names under blobs/ that are not two-letter folders */
        DIR *top = open_in(k.dir_fd, "blobs");
        struct dirent *d;
        while (top && !k.err && (d = readdir(top)) != NULL)
            if (d->d_name[0] != '.' &&
                !(strlen(d->d_name) == 2 && isxdigit(d->d_name[0]) && isxdigit(d->d_name[1]) &&
                  !isupper(d->d_name[0]) && !isupper(d->d_name[1])))
                walk_top(&k, d->d_name, rep);
        if (top)
            closedir(top);
        rc = k.err;
    }
    db_unlock(db);
    known_free(&k);
    if (rep->rows_forgotten) /* their holds went with them */
        db_holds_refresh(db);
    return rc;
}

typedef struct found {
    db_found_blob_t *v;
    size_t n, cap;
} found_t;

/* Oldest first: the rebuilt use order (the real one was in the database). */
static int cmp_found(const void *a, const void *b)
{
    const db_found_blob_t *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* One blobs/<aa>/ folder: public blobs into f, private ones to quarantine/. */
static int rebuild_dir(int dir_fd, const char *aa, found_t *f, unsigned *quarantined)
{
    char sub[16];
    snprintf(sub, sizeof sub, "blobs/%.2s", aa);
    DIR *dir = open_in(dir_fd, sub);
    if (!dir)
        return 0; /* not a folder: reconcile_cache quarantines it */
    int rc = 0;
    struct dirent *e;
    struct stat st;
    while (!rc && (e = readdir(dir)) != NULL) {
        if (!is_blob_name(aa, e->d_name) ||
            fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !is_own_file(&st))
            continue; /* reconcile_cache quarantines it */
        if (!(st.st_mode & 0004)) {
            /* Fetched with credentials (store_commit made it 0400, and read
             * grants may show in its group bits): which
             * credentials may open it was in the lost entries, so no one
             * may; the next fetch with them downloads it again. */
            char rel[96];
            snprintf(rel, sizeof rel, "%.2s/%.64s", aa, e->d_name); /* a blob name */
            if (quarantine(dir_fd, rel, "private, and whose it was is lost with the database") == 0)
                (*quarantined)++;
            continue;
        }
        if ((rc = grow((void **)&f->v, f->n, &f->cap, sizeof *f->v)) != 0)
            break;
        db_found_blob_t *b = &f->v[f->n++];
        snprintf(b->sha256, sizeof b->sha256, "%.64s", e->d_name);
        b->size = (uint64_t)st.st_size;
        b->mtime = (int64_t)st.st_mtime;
    }
    closedir(dir);
    return rc;
}

int reconcile_rebuild(store_t *store, db_t *db, unsigned *recovered, unsigned *quarantined)
{
    int dir_fd = store_dir_fd(store);
    found_t f = {0};
    *recovered = *quarantined = 0;
    DIR *top = open_in(dir_fd, "blobs");
    if (!top)
        return 0; /* no blobs/ yet: nothing to recover */
    int rc = 0;
    struct dirent *d;
    while (!rc && (d = readdir(top)) != NULL)
        if (d->d_name[0] != '.' && strlen(d->d_name) == 2)
            rc = rebuild_dir(dir_fd, d->d_name, &f, quarantined);
    closedir(top);
    if (!rc && f.n) {
        qsort(f.v, f.n, sizeof *f.v, cmp_found);
        rc = db_add_blobs(db, f.v, f.n);
    }
    if (!rc)
        *recovered = (unsigned)f.n;
    free(f.v);
    return rc;
}

/* rename(2) that never replaces: renameat2's RENAME_NOREPLACE, or where
 * the file system lacks it (EINVAL), a check first (start-up is alone in
 * the cache). -1 and errno, EEXIST when `to` exists. */
static int rename_new(int dir_fd, const char *from, const char *to)
{
    struct stat st;
    if (renameat2(dir_fd, from, dir_fd, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL)
        return -1;
    if (fstatat(dir_fd, to, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        errno = EEXIST;
        return -1;
    }
    return renameat(dir_fd, from, dir_fd, to);
}

int reconcile_set_aside(store_t *store, const char *name, char *aside, size_t cap)
{
    static const char *const suffixes[] = {"-wal", "-shm"};
    int dir_fd = store_dir_fd(store);
    long long now = (long long)time(NULL);
    char rel[128], from[160], to[160];
    /* A new name every time (RENAME_NOREPLACE): a second rebuild in the
     * same second, in a restart loop say, must not replace the first one's
     * evidence. */
    for (int n = 0;; n++) {
        if (n)
            snprintf(rel, sizeof rel, "%s.corrupt-%lld.%d", name, now, n);
        else
            snprintf(rel, sizeof rel, "%s.corrupt-%lld", name, now);
        if (rename_new(dir_fd, name, rel) == 0)
            break;
        if (errno != EEXIST || n == 99) {
            int err = errno;
            log_err("cannot set %s/%s aside: %s", store_dir(store), name, strerror(err));
            return -err;
        }
    }
    snprintf(aside, cap, "%s/%s", store_dir(store), rel);
    /* Its WAL (and index) go with it under matching names, so that sqlite3
     * on the set-aside file sees what it held; a new database must not
     * start from them either. */
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(from, sizeof from, "%s%s", name, suffixes[i]);
        snprintf(to, sizeof to, "%s%s", rel, suffixes[i]);
        if (rename_new(dir_fd, from, to) && errno != ENOENT) {
            int err = errno;
            log_err("cannot set %s/%s aside: %s", store_dir(store), from, strerror(err));
            return -err;
        }
    }
    return 0;
}
