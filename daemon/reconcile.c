/* reconcile: start-up agreement between hubd.db and blobs/. */
#include "reconcile.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct known {
    char (*sha)[65]; /* sorted digests of the rows whose file is fine */
    size_t n, cap;
    store_t *store;
    char (*forget)[65]; /* rows to drop: collected first, the statement is open */
    size_t nforget, capforget;
    int err;
} known_t;

static int push(char (**v)[65], size_t *n, size_t *cap, const char *sha)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        char(*p)[65] = realloc(*v, c * sizeof **v);
        if (!p)
            return -ENOMEM;
        *v = p;
        *cap = c;
    }
    snprintf((*v)[(*n)++], 65, "%s", sha);
    return 0;
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

/* Walks blobs/: two-letter folders of files named by their digest. */
static void walk_blobs(known_t *k, const char *root, reconcile_report_t *rep)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/blobs", root);
    DIR *top = opendir(path);
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
            if (is_blob_name(d->d_name, e->d_name) && k->n &&
                bsearch(e->d_name, k->sha, k->n, sizeof *k->sha, cmp_sha))
                continue;
            char rel[PATH_MAX];
            snprintf(rel, sizeof rel, "%s/%s", d->d_name, e->d_name);
            if (quarantine(root, rel) == 0)
                rep->quarantined++;
        }
        closedir(dir);
    }
    closedir(top);
}

int reconcile_cache(store_t *store, db_t *db, reconcile_report_t *rep)
{
    known_t k = {.store = store};
    memset(rep, 0, sizeof *rep);
    int rc = db_each_blob(db, check_row, &k);
    if (!rc)
        rc = k.err;
    for (size_t i = 0; !rc && i < k.nforget; i++) {
        log_warn("blob %s is listed but its file is gone or the wrong size: forgotten",
                 k.forget[i]);
        if ((rc = db_forget_blob(db, k.forget[i])) == 0)
            rep->rows_forgotten++;
    }
    if (!rc) {
        if (k.n) /* qsort and bsearch want a real array, even for none */
            qsort(k.sha, k.n, sizeof *k.sha, cmp_sha);
        walk_blobs(&k, store_dir(store), rep);
    }
    free(k.sha);
    free(k.forget);
    if (rep->rows_forgotten || rep->quarantined)
        log_info("start-up check: %u row(s) forgotten, %u file(s) quarantined", rep->rows_forgotten,
                 rep->quarantined);
    return rc;
}
