/* store: the layout under cache_dir and the crash-safe commit. */
#include "store.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct store {
    char *dir;   /* cache_dir, absolute or as given */
    int dir_fd;  /* open cache_dir; blobs/ and tmp/ are resolved relative to it */
    int lock_fd; /* <cache_dir>/lock, flock'ed for the daemon's life */
};

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) && errno != EEXIST)
        return -errno;
    return 0;
}

int store_open(const char *cache_dir, store_t **out)
{
    int rc = mkdir_p(cache_dir, 0755);
    if (rc) {
        log_err("cannot create cache dir %s: %s", cache_dir, strerror(-rc));
        return rc;
    }
    store_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->lock_fd = -1;
    s->dir = strdup(cache_dir);
    s->dir_fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!s->dir || s->dir_fd < 0) {
        rc = s->dir ? -errno : -ENOMEM;
        goto fail;
    }
    /* One daemon per cache: a second one would cut the first one's partials
     * back at start-up while they are being written. Taken before anything
     * is touched; the kernel drops it when the process ends, crash or not. */
    s->lock_fd = openat(s->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->lock_fd < 0) {
        rc = -errno;
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB)) {
        rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
        if (rc == -EBUSY) {
            log_err("another hubd is using the cache dir %s", cache_dir);
            store_close(s);
            return rc;
        }
        goto fail;
    }
    if ((mkdirat(s->dir_fd, "blobs", 0755) && errno != EEXIST) ||
        (mkdirat(s->dir_fd, "tmp", 0700) && errno != EEXIST)) {
        rc = -errno;
        goto fail;
    }
    *out = s;
    return 0;
fail:
    log_err("cannot open cache dir %s: %s", cache_dir, strerror(-rc));
    store_close(s);
    return rc;
}

void store_close(store_t *s)
{
    if (!s)
        return;
    if (s->dir_fd >= 0)
        close(s->dir_fd);
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    free(s->dir);
    free(s);
}

const char *store_dir(const store_t *s)
{
    return s->dir;
}

void store_blob_path(const store_t *s, const char *hex, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/blobs/%.2s/%s", s->dir, hex, hex);
}

void store_tmp_path(const store_t *s, uint64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/tmp/%llu.part", s->dir, (unsigned long long)id);
}

/* Relative names under dir_fd, so the *at() calls need no long paths. */
static void tmp_rel(uint64_t id, char *buf, size_t cap)
{
    snprintf(buf, cap, "tmp/%llu.part", (unsigned long long)id);
}

int store_tmp_create(const store_t *s, uint64_t id, int *fd_out)
{
    char rel[64];
    tmp_rel(id, rel, sizeof rel);
    int fd = openat(s->dir_fd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    *fd_out = fd;
    return 0;
}

int store_tmp_reopen(const store_t *s, uint64_t id, uint64_t keep, int *fd_out)
{
    char rel[64];
    tmp_rel(id, rel, sizeof rel);
    int fd = openat(s->dir_fd, rel, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st))
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < keep)
        rc = -ESTALE; /* shorter than what the row promised: not ours to trust */
    else if ((uint64_t)st.st_size > keep && ftruncate(fd, (off_t)keep))
        rc = -errno;
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

static void blob_rel(const char *hex, char *buf, size_t cap)
{
    snprintf(buf, cap, "blobs/%.2s/%s", hex, hex);
}

static int fsync_dir_at(int dir_fd, const char *rel)
{
    int fd = openat(dir_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

/* linkat errors after which a rename does the job. */
static int link_unusable(int err)
{
    return err == EEXIST || err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == EMLINK;
}

int store_commit(const store_t *s, int fd, uint64_t id, const char *hex, int private_blob,
                 int *ro_fd, int *created)
{
    char rel_tmp[64], rel_dir[16], rel_blob[96];
    tmp_rel(id, rel_tmp, sizeof rel_tmp);
    snprintf(rel_dir, sizeof rel_dir, "blobs/%.2s", hex);
    blob_rel(hex, rel_blob, sizeof rel_blob);
    int rc = 0;

    /* Data first, then the name: after a crash the blob either is absent or
     * holds every byte. */
    /* A blob fetched with credentials is readable by hubd alone (clients get
     * it through the fd); unless the same bytes are public already. */
    mode_t mode = 0444;
    struct stat st;
    if (private_blob &&
        !(fstatat(s->dir_fd, rel_blob, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & 0044)))
        mode = 0400;
    if (fsync(fd) || fchmod(fd, mode)) {
        rc = -errno;
        goto fail;
    }
    if (close(fd)) {
        fd = -1;
        rc = -errno;
        goto fail;
    }
    fd = -1;
    int created_dir = mkdirat(s->dir_fd, rel_dir, 0755) == 0;
    if (!created_dir && errno != EEXIST) {
        rc = -errno;
        goto fail;
    }
    /* A second name, not a move: until the caller has recorded the blob
     * and dropped tmp/<id>.part, the two names are one file, so a crash in
     * between leaves the partials row pointing at the finished bytes, and
     * start-up records them (reconcile.c). Where the blob exists already
     * (the same bytes from another URL: replaced, as its mode may change)
     * or the file system has no hard links, a rename. */
    *created = 1;
    if (linkat(s->dir_fd, rel_tmp, s->dir_fd, rel_blob, 0)) {
        *created = errno != EEXIST;
        if (!link_unusable(errno) || renameat(s->dir_fd, rel_tmp, s->dir_fd, rel_blob)) {
            rc = -errno;
            *created = 0;
            goto fail;
        }
    }
    /* The new name lives in the folder's metadata: fsync it, and blobs/ too
     * when the two-letter folder is new. */
    if ((rc = fsync_dir_at(s->dir_fd, rel_dir)) != 0)
        return rc; /* the blob is complete; only its durability is in doubt */
    if (created_dir && (rc = fsync_dir_at(s->dir_fd, "blobs")) != 0)
        return rc;
    *ro_fd = openat(s->dir_fd, rel_blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    return *ro_fd < 0 ? -errno : 0;
fail:
    if (fd >= 0)
        close(fd);
    return rc; /* the caller drops the row, then the partial (store_discard) */
}

void store_discard(const store_t *s, int fd, uint64_t id)
{
    char rel[64];
    tmp_rel(id, rel, sizeof rel);
    if (fd >= 0)
        close(fd);
    if (unlinkat(s->dir_fd, rel, 0) && errno != ENOENT)
        log_warn("cannot remove partial %s: %s", rel, strerror(errno));
}

void store_unlink_blob(const store_t *s, const char *hex)
{
    char rel[96];
    blob_rel(hex, rel, sizeof rel);
    if (unlinkat(s->dir_fd, rel, 0) && errno != ENOENT)
        log_warn("cannot remove blob %s: %s", hex, strerror(errno));
}

int store_open_blob(const store_t *s, const char *hex, uint64_t size, int *fd_out,
                    struct stat *st_out)
{
    char rel[96];
    blob_rel(hex, rel, sizeof rel);
    /* O_NOFOLLOW: a link planted under blobs/ must never hand a client
     * another file's bytes. */
    int fd = openat(s->dir_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ELOOP ? -EIO : -errno;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
        close(fd);
        return -EIO;
    }
    if (st_out)
        *st_out = st;
    *fd_out = fd;
    return 0;
}
