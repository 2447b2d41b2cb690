/* hf_layout: the Hugging Face cache and --local-dir on disk. */
#include "hf_layout.h"

#include "materialize.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mbedtls/sha1.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HASH_CHUNK 65536                       /* bytes read per pread when hashing */
#define META_DIR ".cache/huggingface/download" /* --local-dir metadata, as huggingface_hub */
#define MTIME_SLACK 1e-6                       /* the metadata time is printed to the microsecond */

/* A malloc'd printf. */
__attribute__((format(printf, 1, 2))) static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        xoom();
    va_end(ap);
    return s;
}

void hf_layout_init(hf_layout_t *l, const char *cache_dir, const char *local_dir, const char *type,
                    const char *repo)
{
    l->local = local_dir != NULL;
    l->refused.err = 0;
    if (l->local) {
        l->root = xstrdup(local_dir);
        l->top = xstrdup(local_dir);
        l->below = xstrdup("");
        return;
    }
    /* models--org--name: huggingface_hub's repo_folder_name */
    char name[256];
    size_t n = 0;
    for (const char *p = repo; *p && n + 3 < sizeof name; p++) {
        if (*p == '/')
            name[n++] = '-', name[n++] = '-';
        else
            name[n++] = *p;
    }
    name[n] = '\0';
    l->root = xasprintf("%s/%ss--%s", cache_dir, type, name);
    l->top = xstrdup(cache_dir);
    l->below = xasprintf("%ss--%s/", type, name);
}

void hf_layout_free(hf_layout_t *l)
{
    free(l->root);
    free(l->top);
    free(l->below);
    l->root = l->top = l->below = NULL;
}

int hf_path_safe(const char *path)
{
    if (!*path || path[0] == '/')
        return 0;
    for (const char *p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
            return 0;
    for (const char *seg = path;;) {
        size_t n = strcspn(seg, "/");
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return 0;
        if (!seg[n])
            return 1;
        seg += n + 1;
    }
}

int hf_path_is_meta(const char *path)
{
    static const char meta[] = ".cache/huggingface";
    size_t n = sizeof meta - 1;
    return strncmp(path, meta, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* ---- below the root, through hf_dir --------------------------------------- */

/* The folder holding rel's last name ({below}rel: rel in the repo folder,
 * or in the local dir), walked by hf_dir from the root named; *base is
 * that name in *relp, which the caller frees. A descriptor or -errno. */
static int open_parent(hf_layout_t *l, const char *rel, int flags, char **relp, const char **base)
{
    *relp = xasprintf("%s%s", l->below, rel);
    return hf_dir_open_parent(l->top, *relp, flags, &l->refused, base);
}

/* close(2) of a folder's descriptor, unless open_parent failed (< 0). */
static void close_dir(int dirfd)
{
    if (dirfd >= 0)
        close(dirfd);
}

/* A name beside name in the same folder for a file being made:
 * ".{name}.hubctl-XXXXXXXX". Malloc'd. */
static char *temp_beside(const char *name)
{
    unsigned r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (unsigned)getpid() ^ (unsigned)time(NULL);
    return xasprintf(".%.200s.hubctl-%08x", name, r);
}

/* Writes n bytes of data to name in the folder dirfd, by temp file and
 * rename: a link planted at name is replaced, never followed. */
static int write_file_at(int dirfd, const char *name, const char *data, size_t n)
{
    int rc = 0;
    char *tmp = temp_beside(name);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        free(tmp);
        return rc;
    }
    if (write(fd, data, n) != (ssize_t)n)
        rc = errno ? -errno : -EIO;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dirfd, tmp, 0);
    free(tmp);
    return rc;
}

/* A symlink name -> target in the folder dirfd, made beside it and
 * renamed over whatever was there. */
static int symlink_at(const char *target, int dirfd, const char *name)
{
    int rc = 0;
    char *tmp = temp_beside(name);
    if (symlinkat(target, dirfd, tmp) < 0)
        rc = -errno;
    else if (renameat(dirfd, tmp, dirfd, name) < 0) {
        rc = -errno;
        unlinkat(dirfd, tmp, 0);
    }
    free(tmp);
    return rc;
}

int hf_layout_check(hf_layout_t *l)
{
    static const char *const cache[] = {"", "refs", "blobs", "snapshots"};
    static const char *const local[] = {".cache", ".cache/huggingface", META_DIR};
    const char *const *sub = l->local ? local : cache;
    size_t n = l->local ? ARRAY_LEN(local) : ARRAY_LEN(cache);
    for (size_t i = 0; i < n; i++) {
        char *rel = xasprintf("%s%s", l->below, sub[i]);
        size_t len = strlen(rel);
        if (len && rel[len - 1] == '/')
            rel[len - 1] = '\0'; /* the repo folder itself */
        int fd = hf_dir_open(l->top, rel, 0, &l->refused);
        free(rel);
        if (fd < 0 && l->refused.err)
            return fd;
        close_dir(fd); /* missing, or unreadable: the writes say so */
    }
    return 0;
}

const char *hf_layout_why(const hf_layout_t *l, int rc, char *buf, size_t cap)
{
    if (l->refused.err && l->refused.err == rc)
        return hf_dir_explain(&l->refused, buf, cap);
    snprintf(buf, cap, "%s", strerror(-rc));
    return buf;
}

int hf_layout_write_ref(hf_layout_t *l, const char *revision, const char *commit)
{
    if (l->local || strcmp(revision, commit) == 0)
        return 0;
    if (!hf_path_safe(revision))
        return -EINVAL;
    char *rel = xasprintf("refs/%s", revision), *relp;
    const char *base;
    int dirfd = open_parent(l, rel, HF_DIR_CREATE, &relp, &base);
    free(rel);
    if (dirfd < 0) {
        free(relp);
        return dirfd;
    }
    char cur[64];
    int rc = 0, fd = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    ssize_t n = fd >= 0 ? read(fd, cur, sizeof cur) : -1;
    close_fd(fd);
    if (n != (ssize_t)strlen(commit) || memcmp(cur, commit, (size_t)n) != 0)
        rc = write_file_at(dirfd, base, commit, strlen(commit));
    close(dirfd);
    free(relp);
    return rc;
}

char *hf_layout_blob(const hf_layout_t *l, const char *etag)
{
    return xasprintf("%s/blobs/%s", l->root, etag);
}

char *hf_layout_file(const hf_layout_t *l, const char *commit, const char *path)
{
    if (l->local)
        return xasprintf("%s/%s", l->root, path);
    return xasprintf("%s/snapshots/%s/%s", l->root, commit, path);
}

char *hf_layout_folder(const hf_layout_t *l, const char *commit)
{
    if (l->local)
        return xstrdup(l->root);
    return xasprintf("%s/snapshots/%s", l->root, commit);
}

/* Writes data (n bytes) to rel below the root, its folders made: by temp
 * file and rename. */
static int write_rel(hf_layout_t *l, const char *rel, const char *data, size_t n)
{
    char *relp;
    const char *base;
    int dirfd = open_parent(l, rel, HF_DIR_CREATE, &relp, &base);
    int rc = dirfd < 0 ? dirfd : write_file_at(dirfd, base, data, n);
    close_dir(dirfd);
    free(relp);
    return rc;
}

/* --local-dir's metadata of path: commit, etag, and a time no earlier
 * than the file's mtime. Also the .gitignore that keeps .cache out of git,
 * as huggingface_hub writes it (kept when it is a file; a link in its
 * place is replaced). */
static int write_metadata(hf_layout_t *l, const char *path, const char *commit, const char *etag)
{
    char *relp;
    const char *base;
    struct stat st;
    int dirfd = open_parent(l, ".cache/huggingface/.gitignore", HF_DIR_CREATE, &relp, &base);
    int rc = dirfd < 0 ? dirfd : 0;
    if (rc == 0 && (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)))
        rc = write_file_at(dirfd, base, "*", 1);
    close_dir(dirfd);
    free(relp);
    if (rc < 0)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + MTIME_SLACK;
    char *text = xasprintf("%s\n%s\n%.6f\n", commit, etag, now);
    char *meta = xasprintf(META_DIR "/%s.metadata", path);
    rc = write_rel(l, meta, text, strlen(text));
    free(meta);
    free(text);
    return rc;
}

/* Reads --local-dir metadata: 1 when it names commit or etag and its time
 * is not earlier than mtime (the file was not changed since); 0, or a
 * refusal of a folder on the way. */
static int metadata_matches(hf_layout_t *l, const char *path, const char *commit, const char *etag,
                            double mtime)
{
    char *meta = xasprintf(META_DIR "/%s.metadata", path), *relp;
    const char *base;
    int dirfd = open_parent(l, meta, 0, &relp, &base);
    int fd = dirfd < 0 ? -1 : openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    close_dir(dirfd);
    free(relp);
    free(meta);
    if (!f) {
        close_fd(fd);
        return dirfd < 0 && l->refused.err ? dirfd : 0;
    }
    char c[128] = "", e[128] = "";
    double t = 0;
    int ok = fscanf(f, "%127s %127s %lf", c, e, &t) == 3;
    fclose(f);
    return ok && (strcmp(c, commit) == 0 || strcmp(e, etag) == 0) && mtime <= t + MTIME_SLACK;
}

int hf_layout_present(hf_layout_t *l, const char *commit, const char *path, const char *etag,
                      uint64_t size)
{
    char *rel = l->local ? xstrdup(path) : xasprintf("blobs/%s", etag), *relp;
    const char *base;
    int dirfd = open_parent(l, rel, 0, &relp, &base);
    free(rel);
    if (dirfd < 0) {
        free(relp);
        return l->refused.err ? dirfd : 0;
    }
    /* opened, not stat'ed: a link into hubd's store whose grant is gone
     * (EACCES) is not there for its user; fetched and held again, it is.
     * The last name is followed if a link (a blob is one, into the store):
     * only read, never written through; the folders on the way were not. */
    struct stat st;
    int fd = openat(dirfd, base, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int there =
        fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
    close_fd(fd);
    close(dirfd);
    free(relp);
    if (!there || !l->local)
        return there;
    double mtime = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec / 1e9;
    return metadata_matches(l, path, commit, etag, mtime);
}

int hf_layout_blob_symlink(hf_layout_t *l, const char *etag, const char *target)
{
    char *rel = xasprintf("blobs/%s", etag), *relp;
    const char *base;
    int dirfd = open_parent(l, rel, HF_DIR_CREATE, &relp, &base);
    int rc = dirfd < 0 ? dirfd : symlink_at(target, dirfd, base);
    close_dir(dirfd);
    free(relp);
    free(rel);
    return rc;
}

int hf_layout_place_copy(hf_layout_t *l, const char *commit, const char *path, const char *etag,
                         int fd, uint64_t size, int *clone_err)
{
    char *rel = l->local ? xstrdup(path) : xasprintf("blobs/%s", etag), *relp;
    const char *base;
    *clone_err = EOPNOTSUPP;
    int dirfd = open_parent(l, rel, HF_DIR_CREATE, &relp, &base);
    int rc = dirfd < 0 ? dirfd : materialize_file_at(fd, size, dirfd, base, clone_err);
    close_dir(dirfd);
    free(relp);
    free(rel);
    if (rc == 0 && l->local)
        rc = write_metadata(l, path, commit, etag);
    return rc;
}

int hf_layout_snapshot_link(hf_layout_t *l, const char *commit, const char *path, const char *etag)
{
    /* ../../blobs/{etag}, one ../ more per folder of path */
    size_t depth = 0;
    for (const char *p = path; (p = strchr(p, '/')) != NULL; p++)
        depth++;
    char *target = xrealloc(NULL, 3 * depth + strlen(etag) + 16);
    char *t = target;
    for (size_t i = 0; i < depth + 2; i++, t += 3)
        memcpy(t, "../", 3);
    sprintf(t, "blobs/%s", etag);
    char *rel = xasprintf("snapshots/%s/%s", commit, path), *relp, cur[PATH_MAX];
    const char *base;
    int dirfd = open_parent(l, rel, HF_DIR_CREATE, &relp, &base);
    int rc = dirfd < 0 ? dirfd : 0;
    ssize_t n = rc < 0 ? -1 : readlinkat(dirfd, base, cur, sizeof cur - 1);
    if (rc == 0 && (n < 0 || (size_t)n != strlen(target) || memcmp(cur, target, (size_t)n) != 0))
        rc = symlink_at(target, dirfd, base);
    close_dir(dirfd);
    free(relp);
    free(rel);
    free(target);
    return rc;
}

int hf_git_blob_check(int fd, uint64_t size, const char *blob_hex)
{
    static unsigned char buf[HASH_CHUNK];
    unsigned char out[20];
    char head[32], hex[41];
    int hl = snprintf(head, sizeof head, "blob %llu", (unsigned long long)size);
    mbedtls_sha1_context ctx;
    mbedtls_sha1_init(&ctx);
    /* the header's NUL is hashed too */
    int rc = mbedtls_sha1_starts_ret(&ctx) == 0 &&
                     mbedtls_sha1_update_ret(&ctx, (const unsigned char *)head, (size_t)hl + 1) == 0
                 ? 0
                 : -EIO;
    for (uint64_t off = 0; rc == 0 && off < size;) {
        uint64_t left = size - off;
        ssize_t n = pread(fd, buf, left < sizeof buf ? left : sizeof buf, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = n < 0 ? -errno : -EBADMSG; /* shorter than the listing said */
        else if (mbedtls_sha1_update_ret(&ctx, buf, (size_t)n) != 0)
            rc = -EIO;
        else
            off += (uint64_t)n;
    }
    if (rc == 0 && mbedtls_sha1_finish_ret(&ctx, out) != 0)
        rc = -EIO;
    mbedtls_sha1_free(&ctx);
    if (rc < 0)
        return rc;
    for (int i = 0; i < 20; i++)
        sprintf(hex + 2 * i, "%02x", out[i]);
    return strcasecmp(hex, blob_hex) == 0 ? 0 : -EBADMSG;
}
