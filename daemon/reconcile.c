/* reconcile: start-up agreement between hubd.db and blobs/. */
#include "reconcile.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    store_t *store;
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

/* <root>/<name>, opened as a folder, or NULL. */
static DIR *open_in(const char *root, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, name);
    return opendir(path);
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
    char path[PATH_MAX];
    struct stat st;
    store_blob_path(k->store, sha, path, sizeof path);
    int ok = strlen(sha) == 64 && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
             (uint64_t)st.st_size == size;
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

/* Moves blobs/<rel> to quarantine/<rel with '/' as '-'>. */
static int quarantine(const char *root, const char *rel)
{
    char from[2 * PATH_MAX + 16], to[2 * PATH_MAX + 32], flat[PATH_MAX];
    snprintf(flat, sizeof flat, "%s", rel);
    for (char *p = flat; *p; p++)
        if (*p == '/')
            *p = '-';
    snprintf(from, sizeof from, "%s/blobs/%s", root, rel);
    snprintf(to, sizeof to, "%s/quarantine", root);
    if (mkdir(to, 0700) && errno != EEXIST)
        return -errno;
    snprintf(to, sizeof to, "%s/quarantine/%s", root, flat);
    if (rename(from, to))
        return -errno;
    log_warn("quarantined blobs/%s: no database row names it", rel);
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
static void find_linked_parts(known_t *k, const char *root)
{
    DIR *d = open_in(root, "tmp");
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
 * row (one transaction), then the tmp name. 0 when recorded. */
static int adopt(known_t *k, const char *sha, const struct stat *st, uint64_t id)
{
    char *url = NULL, *cred = NULL;
    db_partial_t p;
    int rc = db_get_partial(k->db, id, &url, &cred, &p);
    if (rc)
        return rc;
    if (p.total >= 0 && (uint64_t)p.total != (uint64_t)st->st_size) {
        rc = -EIO; /* not what the row describes: left to quarantine */
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
        char path[PATH_MAX];
        store_tmp_path(k->store, id, path, sizeof path);
        unlink(path);
        log_info("recorded the download of %s (blob %s), finished just before a crash", url, sha);
    }
    db_partial_free(&p);
    free(url);
    free(cred);
    return rc;
}

/* 0 when blobs/<dir>/<name> was a commit cut short and is recorded now. */
static int try_adopt(known_t *k, int dir_fd, const char *name)
{
    struct stat st;
    if (!k->nlinks || fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
        st.st_nlink < 2)
        return -ENOENT;
    for (size_t i = 0; i < k->nlinks; i++)
        if (k->links[i].dev == st.st_dev && k->links[i].ino == st.st_ino)
            return adopt(k, name, &st, k->links[i].id);
    return -ENOENT;
}

/* Walks blobs/: two-letter folders of files named by their digest. */
static void walk_blobs(known_t *k, const char *root, reconcile_report_t *rep)
{
    DIR *top = open_in(root, "blobs");
    if (!top)
        return;
    struct dirent *d;
    while ((d = readdir(top)) != NULL) {
        if (d->d_name[0] == '.')
            continue;
        char sub[PATH_MAX];
        snprintf(sub, sizeof sub, "%s/blobs/%s", root, d->d_name);
        DIR *dir = strlen(d->d_name) == 2 ? opendir(sub) : NULL;
        if (!dir) { /* not a two-letter folder: nothing of ours */
            if (quarantine(root, d->d_name) == 0)
                rep->quarantined++;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            if (is_blob_name(d->d_name, e->d_name)) {
                if (k->n && bsearch(e->d_name, k->sha, k->n, sizeof *k->sha, cmp_sha))
                    continue;
                if (try_adopt(k, dirfd(dir), e->d_name) == 0) {
                    rep->recovered++;
                    continue;
                }
            }
            char rel[PATH_MAX];
            snprintf(rel, sizeof rel, "%s/%s", d->d_name, e->d_name);
            if (quarantine(root, rel) == 0)
                rep->quarantined++;
        }
        closedir(dir);
    }
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

/* A row is kept when its file holds at least the durable bytes; the bytes
 * after them may not have reached the disk before a crash, so they go. */
static void check_partial(void *arg, uint64_t id, uint64_t durable)
{
    partials_t *p = arg;
    char path[PATH_MAX];
    struct stat st;
    if (id > p->max_id)
        p->max_id = id;
    store_tmp_path(p->store, id, path, sizeof path);
    /* A file with a second name (a commit not adopted above) is never cut:
     * that would cut the other name's bytes too. Its row goes. */
    int ok = stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
             (uint64_t)st.st_size >= durable && durable > 0;
    if (ok && (uint64_t)st.st_size > durable && truncate(path, (off_t)durable) != 0)
        ok = 0;
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
    for (size_t i = 0; !rc && i < p.ndrop; i++) {
        char path[PATH_MAX];
        store_tmp_path(store, p.drop[i], path, sizeof path);
        unlink(path); /* if it is there at all */
        if ((rc = db_forget_partial(db, p.drop[i])) == 0)
            rep->partials_lost++;
    }
    DIR *d = rc ? NULL : open_in(store_dir(store), "tmp");
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

int reconcile_cache(store_t *store, db_t *db, reconcile_report_t *rep)
{
    known_t k = {.store = store, .db = db};
    memset(rep, 0, sizeof *rep);
    int rc = db_each_blob(db, check_row, &k);
    if (!rc)
        rc = k.err;
    for (size_t i = 0; !rc && i < k.nforget; i++) {
        log_warn("blob %s is listed but its file is gone or the wrong size: forgotten",
                 k.forget[i]);
        if ((rc = db_forget_blob(db, k.forget[i], 0)) == 0)
            rep->rows_forgotten++;
    }
    if (!rc) {
        if (k.n) /* qsort and bsearch want a real array, even for none */
            qsort(k.sha, k.n, sizeof *k.sha, cmp_sha);
        find_linked_parts(&k, store_dir(store));
        rc = k.err;
    }
    if (!rc)
        walk_blobs(&k, store_dir(store), rep);
    free(k.sha);
    free(k.forget);
    free(k.links);
    if (rep->rows_forgotten || rep->quarantined || rep->recovered)
        log_info("start-up check: %u row(s) forgotten, %u file(s) quarantined, %u finished "
                 "download(s) recorded",
                 rep->rows_forgotten, rep->quarantined, rep->recovered);
    if (!rc)
        rc = reconcile_partials(store, db, rep);
    return rc;
}
