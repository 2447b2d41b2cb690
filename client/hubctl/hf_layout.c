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
    if (l->local) {
        l->root = xstrdup(local_dir);
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
}

void hf_layout_free(hf_layout_t *l)
{
    free(l->root);
    l->root = NULL;
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

int hf_mkdirs_for(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(buf, 0777) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return 0;
}

/* A name beside path for a file being made: ".{base}.hubctl-XXXXXXXX".
 * Malloc'd. */
static char *temp_beside(const char *path)
{
    unsigned r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (unsigned)getpid() ^ (unsigned)time(NULL);
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path + 1) : 0;
    return xasprintf("%.*s.%.200s.hubctl-%08x", dir, path, path + dir, r);
}

/* Writes n bytes of data to path by temp file and rename. */
static int write_file_atomic(const char *path, const char *data, size_t n)
{
    int rc = hf_mkdirs_for(path);
    if (rc < 0)
        return rc;
    char *tmp = temp_beside(path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = -errno;
        free(tmp);
        return rc;
    }
    if (write(fd, data, n) != (ssize_t)n)
        rc = errno ? -errno : -EIO;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* A symlink at path to target, made beside it and renamed over whatever
 * was there. */
static int symlink_atomic(const char *target, const char *path)
{
    int rc = hf_mkdirs_for(path);
    if (rc < 0)
        return rc;
    char *tmp = temp_beside(path);
    if (symlink(target, tmp) < 0)
        rc = -errno;
    else if (rename(tmp, path) < 0) {
        rc = -errno;
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

int hf_layout_write_ref(const hf_layout_t *l, const char *revision, const char *commit)
{
    if (l->local || strcmp(revision, commit) == 0)
        return 0;
    if (!hf_path_safe(revision))
        return -EINVAL;
    char *path = xasprintf("%s/refs/%s", l->root, revision);
    char cur[64];
    int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, cur, sizeof cur) : -1;
    close_fd(fd);
    if (n != (ssize_t)strlen(commit) || memcmp(cur, commit, (size_t)n) != 0)
        rc = write_file_atomic(path, commit, strlen(commit));
    free(path);
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

static char *meta_path(const hf_layout_t *l, const char *path)
{
    return xasprintf("%s/" META_DIR "/%s.metadata", l->root, path);
}

/* --local-dir's metadata of path: commit, etag, and a time no earlier
 * than the file's mtime. Also the .gitignore that keeps .cache out of git,
 * as huggingface_hub writes it. */
static int write_metadata(const hf_layout_t *l, const char *path, const char *commit,
                          const char *etag)
{
    char *ignore = xasprintf("%s/.cache/huggingface/.gitignore", l->root);
    struct stat st;
    int rc = stat(ignore, &st) == 0 ? 0 : write_file_atomic(ignore, "*", 1);
    free(ignore);
    if (rc < 0)
        return rc;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + MTIME_SLACK;
    char *text = xasprintf("%s\n%s\n%.6f\n", commit, etag, now);
    char *meta = meta_path(l, path);
    rc = write_file_atomic(meta, text, strlen(text));
    free(meta);
    free(text);
    return rc;
}

/* Reads --local-dir metadata: 1 when it names commit or etag and its time
 * is not earlier than mtime (the file was not changed since). */
static int metadata_matches(const hf_layout_t *l, const char *path, const char *commit,
                            const char *etag, double mtime)
{
    char *meta = meta_path(l, path);
    FILE *f = fopen(meta, "r");
    free(meta);
    if (!f)
        return 0;
    char c[128] = "", e[128] = "";
    double t = 0;
    int ok = fscanf(f, "%127s %127s %lf", c, e, &t) == 3;
    fclose(f);
    return ok && (strcmp(c, commit) == 0 || strcmp(e, etag) == 0) && mtime <= t + MTIME_SLACK;
}

int hf_layout_present(const hf_layout_t *l, const char *commit, const char *path, const char *etag,
                      uint64_t size)
{
    char *file = l->local ? hf_layout_file(l, commit, path) : hf_layout_blob(l, etag);
    /* opened, not stat'ed: a link into hubd's store whose grant is gone
     * (EACCES) is not there for its user; fetched and held again, it is */
    struct stat st;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int there =
        fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == size;
    close_fd(fd);
    free(file);
    if (!there || !l->local)
        return there;
    double mtime = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec / 1e9;
    return metadata_matches(l, path, commit, etag, mtime);
}

int hf_layout_blob_symlink(const hf_layout_t *l, const char *etag, const char *target)
{
    char *blob = hf_layout_blob(l, etag);
    int rc = symlink_atomic(target, blob);
    free(blob);
    return rc;
}

int hf_layout_place_copy(const hf_layout_t *l, const char *commit, const char *path,
                         const char *etag, int fd, uint64_t size, int *clone_err)
{
    char *dest = l->local ? hf_layout_file(l, commit, path) : hf_layout_blob(l, etag);
    int rc = hf_mkdirs_for(dest);
    if (rc == 0)
        rc = materialize_file_how(fd, size, dest, clone_err);
    free(dest);
    if (rc == 0 && l->local)
        rc = write_metadata(l, path, commit, etag);
    return rc;
}

int hf_layout_snapshot_link(const hf_layout_t *l, const char *commit, const char *path,
                            const char *etag)
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
    char *link = hf_layout_file(l, commit, path), cur[PATH_MAX];
    ssize_t n = readlink(link, cur, sizeof cur - 1);
    int rc = 0;
    if (n < 0 || (size_t)n != strlen(target) || memcmp(cur, target, (size_t)n) != 0)
        rc = symlink_atomic(target, link);
    free(link);
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
