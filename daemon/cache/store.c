/* store: the layout under cache_dir and the crash-safe commit. */
#include "store.h"
#include "grant.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

struct store {
    char *dir;         /* cache_dir as given, without trailing slashes */
    int dir_fd;        /* open cache_dir; blobs/ and tmp/ are resolved relative to it */
    int lock_fd;       /* <cache_dir>/lock, flock'ed for the daemon's life */
    int syncfs_errors; /* a syncfs and a file's own wait stand for its fsync here */
};

/* Whether a small file's durability may rest on one syncfs of the file
 * system and its own sync_file_range wait, rather than on its fsync:
 * - a file's writeback error is kept per open file (errseq, Linux 4.14)
 *   and told to its descriptor by sync_file_range's wait as by fsync;
 * - syncfs returns the file system's own sync error (a failed journal
 *   commit) from Linux 5.17; before, sync_filesystem dropped it;
 * - the file system is one whose syncfs writes and flushes everything its
 *   files hold (ext4, XFS, btrfs, tmpfs). Not overlayfs (a descriptor's
 *   pages are not the upper file's, so its wait sees nothing) nor FUSE
 *   (syncfs may not reach the server, where an fsync does). */
static int syncfs_stands_for_fsync(int dir_fd)
{
    struct utsname u;
    unsigned major = 0, minor = 0;
    if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2 ||
        !(major > 5 || (major == 5 && minor >= 17)))
        return 0;
    struct statfs f;
    if (fstatfs(dir_fd, &f))
        return 0;
    switch ((unsigned long)f.f_type) {
    case 0xEF53:     /* ext2/3/4 */
    case 0x58465342: /* XFS */
    case 0x9123683E: /* btrfs */
    case 0x01021994: /* tmpfs */
        return 1;
    default:
        return 0;
    }
}

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

/* What hubd keeps directly in its cache dir, checked at every start. Absent
 * is fine (made when needed). hubd.db's name is main.c's and reserve's is
 * cache.c's, listed here so that one place decides what the cache holds. */
static const struct {
    const char *name;
    int dir; /* a folder, else a regular file */
} cache_names[] = {
    {"lock", 0},    {"secret", 0}, {"hubd.db", 0}, {"hubd.db-wal", 0}, {"hubd.db-shm", 0},
    {"reserve", 0}, {"blobs", 1},  {"tmp", 1},     {"quarantine", 1},
};

/* 0 when st (an lstat) is what hubd may use: of the wanted type, not a
 * symbolic link, owned by hubd's effective uid, not writable by group or
 * others. Else logs the path, what it is and what is wanted, and returns
 * -EPERM: someone else could have planted it, or could still change it. */
static int check_st(const char *root, const char *rel, const struct stat *st, int want_dir)
{
    uid_t me = geteuid();
    const char *want = want_dir ? "a folder" : "a regular file";
    char found[96];
    if (S_ISLNK(st->st_mode))
        snprintf(found, sizeof found, "a symbolic link");
    else if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
        snprintf(found, sizeof found, "not %s (mode %06o)", want, (unsigned)st->st_mode);
    else if (st->st_uid != me || (st->st_mode & 022))
        snprintf(found, sizeof found, "owned by uid %u with mode %04o", (unsigned)st->st_uid,
                 (unsigned)(st->st_mode & 07777));
    else
        return 0;
    log_err("unsafe cache dir: %s%s%s is %s; hubd (uid %u) wants %s owned by uid %u, not "
            "writable by group or others, and no symbolic link anywhere in its cache (chown, "
            "chmod or remove it, or set cache_dir to a folder of hubd's own)",
            root, rel ? "/" : "", rel ? rel : "", found, (unsigned)me, want, (unsigned)me);
    return -EPERM;
}

/* check_st of <dir_fd>/<rel>, if it exists. */
static int check_at(int dir_fd, const char *root, const char *rel, int want_dir)
{
    struct stat st;
    if (fstatat(dir_fd, rel, &st, AT_SYMLINK_NOFOLLOW))
        return errno == ENOENT ? 0 : -errno;
    return check_st(root, rel, &st, want_dir);
}

/* The two-letter folders under blobs/ hold what clients open: each must be
 * hubd's (a stray file there is reconcile's to quarantine). */
static int check_blob_dirs(int dir_fd, const char *root)
{
    int fd = openat(dir_fd, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d)) != NULL) {
        struct stat st;
        if (e->d_name[0] == '.' || strlen(e->d_name) != 2 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
            !(S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)))
            continue;
        char rel[16];
        snprintf(rel, sizeof rel, "blobs/%.2s", e->d_name); /* two letters, checked */
        rc = check_st(root, rel, &st, 1);
    }
    closedir(d);
    return rc;
}

/* Takes group and other bits off what is hubd's alone (tmp/, quarantine/,
 * the lock), in case an older hubd or a person made it looser: file names
 * of downloads in progress are no one else's business. Through an fd opened
 * without following links, so a chmod never lands elsewhere. */
static void tighten_at(int dir_fd, const char *rel, mode_t mode)
{
    int fd = openat(dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0 && (st.st_mode & 077) && fchmod(fd, mode))
        log_warn("cannot chmod %s to %04o: %s", rel, (unsigned)mode, strerror(errno));
    close(fd);
}

/* Every check of the layout; -EPERM (logged) at the first unsafe one. */
static int check_layout(const store_t *s)
{
    struct stat st;
    if (fstat(s->dir_fd, &st))
        return -errno;
    int rc = check_st(s->dir, NULL, &st, 1);
    for (size_t i = 0; !rc && i < sizeof cache_names / sizeof cache_names[0]; i++)
        rc = check_at(s->dir_fd, s->dir, cache_names[i].name, cache_names[i].dir);
    return rc ? rc : check_blob_dirs(s->dir_fd, s->dir);
}

int store_open(const char *cache_dir, store_t **out)
{
    /* Without trailing slashes: "link/" would resolve the link even for
     * lstat and O_NOFOLLOW. */
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", cache_dir) >= (int)sizeof dir)
        return -ENAMETOOLONG;
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
        dir[n - 1] = '\0';
    int rc = mkdir_p(dir, 0755);
    if (rc) {
        log_err("cannot create cache dir %s: %s", dir, strerror(-rc));
        return rc;
    }
    /* The cache dir itself must not be a link: one planted where the admin
     * pointed cache_dir would move the whole cache (lstat first for a clear
     * message, then O_NOFOLLOW so that what is checked is what is used). */
    struct stat st;
    if (lstat(dir, &st) == 0 && (rc = check_st(dir, NULL, &st, 1)) != 0)
        return rc;
    store_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->lock_fd = -1;
    s->dir = strdup(dir);
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (!s->dir || s->dir_fd < 0) {
        rc = s->dir ? -errno : -ENOMEM;
        goto fail;
    }
    s->syncfs_errors = syncfs_stands_for_fsync(s->dir_fd);
    /* Checks only read: they may come before the lock. */
    if ((rc = check_layout(s)) != 0) {
        store_close(s);
        return rc;
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
    tighten_at(s->dir_fd, "lock", 0600);
    tighten_at(s->dir_fd, "tmp", 0700);
    tighten_at(s->dir_fd, "quarantine", 0700);
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

int store_dir_fd(const store_t *s)
{
    return s->dir_fd;
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

/* store_tmp_create's: one create in tmp/ at a time, across stores too. */
static pthread_mutex_t tmp_create_mu = PTHREAD_MUTEX_INITIALIZER;

int store_tmp_create(const store_t *s, uint64_t id, int *fd_out)
{
    char rel[64];
    tmp_rel(id, rel, sizeof rel);
    /* A new file, never an old one: whatever has the name (a crashed job's
     * file, a name that is also a blob's, a planted link) is unlinked, which
     * removes the name and not what it points to, and O_EXCL|O_NOFOLLOW fail
     * rather than open anything that appears there meanwhile. Read too: a
     * segmented download's hash reads back what its connections wrote.
     * The name is free nearly always: the unlink only when it is not. */
    int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    /* One create at a time, waiting asleep: each holds tmp/'s lock in the
     * kernel while the file system finds a free inode, and the kernel has
     * the other pool threads spin for it. On ext4 without a journal, where
     * that search skips every inode freed in the last minutes, the spin
     * was a seventh of a small file's CPU in a flood of them. */
    pthread_mutex_lock(&tmp_create_mu);
    int fd = openat(s->dir_fd, rel, flags, 0600);
    if (fd < 0 && errno == EEXIST) {
        if (unlinkat(s->dir_fd, rel, 0) == 0 || errno == ENOENT)
            fd = openat(s->dir_fd, rel, flags, 0600);
    }
    int err = fd < 0 ? errno : 0;
    pthread_mutex_unlock(&tmp_create_mu);
    if (fd < 0)
        return -err;
    *fd_out = fd;
    return 0;
}

int store_tmp_unnamed(const store_t *s, int *fd_out)
{
    /* O_EXCL: the file can never be given a name (linkat through
     * /proc/PID/fd), by hubd or by a client that holds a descriptor of it. */
    int fd = openat(s->dir_fd, "tmp", O_TMPFILE | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) {
        if (fd < 0)
            return -errno;
        *fd_out = fd;
        return 0;
    }
    /* No O_TMPFILE here: a name of its own, unlinked at once (a crash
     * between the two leaves a file that start-up removes, as it removes
     * every file of tmp/ no partial row names). An unlinked file cannot be
     * linked again either. */
    static unsigned seq; /* any pool thread: a name taken is tried again */
    for (int i = 0; i < 16; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "tmp/unnamed-%ld-%u", (long)getpid(),
                 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
        fd = openat(s->dir_fd, rel, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            return -errno;
        if (unlinkat(s->dir_fd, rel, 0)) {
            int e = errno;
            close(fd);
            return -e;
        }
        *fd_out = fd;
        return 0;
    }
    return -EEXIST;
}

int store_tmp_reopen(const store_t *s, uint64_t id, uint64_t keep, int *fd_out)
{
    char rel[64];
    tmp_rel(id, rel, sizeof rel);
    /* O_NOFOLLOW: a link is not ours to cut (ELOOP). O_NONBLOCK: a FIFO in
     * its place must not hang the open; cleared once it is known regular. */
    int fd = openat(s->dir_fd, rel, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return errno == ELOOP ? -ESTALE : -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st))
        rc = -errno;
    else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1)
        rc = -ESTALE; /* not a file hubd made, or also named elsewhere: cutting it
                       * would cut the other name's bytes */
    else if ((uint64_t)st.st_size < keep)
        rc = -ESTALE; /* shorter than what the row promised: not ours to trust */
    else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) ||
             ((uint64_t)st.st_size > keep && ftruncate(fd, (off_t)keep)))
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
    int fd = openat(dir_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

/* The ACL entries of the blob named rel onto fd. */
static int keep_grants(const store_t *s, const char *rel, int fd)
{
    int old = openat(s->dir_fd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (old < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = grant_copy(old, fd);
    close(old);
    return rc == -EOPNOTSUPP || rc == -ENOTSUP ? 0 : rc;
}

int store_sync_all(const store_t *s)
{
    return syncfs(s->dir_fd) ? -errno : 0;
}

int store_sync_names(const store_t *s)
{
    return s->syncfs_errors ? store_sync_all(s) : -ENOTSUP;
}

int store_check_synced(const store_t *s, int fd)
{
    if (!s->syncfs_errors)
        return -ENOTSUP;
    /* Nothing is left to write: this only waits for writeback, and says
     * whether any of this file's failed since fd was opened. */
    unsigned all = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
    return sync_file_range(fd, 0, 0, all) ? -errno : 0;
}

int store_sync_blob_dir(const store_t *s, const char *hex, int new_dir)
{
    char rel_dir[16];
    snprintf(rel_dir, sizeof rel_dir, "blobs/%.2s", hex);
    int rc = fsync_dir_at(s->dir_fd, rel_dir);
    if (!rc && new_dir)
        rc = fsync_dir_at(s->dir_fd, "blobs");
    return rc;
}

int store_commit(const store_t *s, int fd, uint64_t id, const char *hex, int private_blob,
                 int *ro_fd, int *created, int *new_dir)
{
    char rel_tmp[64], rel_dir[16], rel_blob[96];
    tmp_rel(id, rel_tmp, sizeof rel_tmp);
    snprintf(rel_dir, sizeof rel_dir, "blobs/%.2s", hex);
    blob_rel(hex, rel_blob, sizeof rel_blob);
    int rc = 0;

    /* Data first (the caller's fsync), then the name: after a crash the
     * blob either is absent or holds every byte. A blob fetched with
     * credentials is readable by hubd alone (clients get it through the
     * fd); unless the same bytes are public already. */
    mode_t mode = 0444;
    struct stat st;
    /* Public by o+r alone: a private blob with read grants (grant.h) shows
     * their ACL mask in its group bits. */
    int had = fstatat(s->dir_fd, rel_blob, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    if (private_blob && !(had && (st.st_mode & 0004)))
        mode = 0400;
    if (fchmod(fd, mode)) {
        rc = -errno;
        goto fail;
    }
    /* The same private bytes again replace the file below: the grants of
     * the users whose HF caches link to it go over to the new one (after
     * the chmod, which would set the mask to none). */
    if (mode == 0400 && had && (rc = keep_grants(s, rel_blob, fd)) != 0)
        goto fail;
    /* The link below goes by name: the name must still be this file, so
     * that only the bytes just hashed can get a blob's name. */
    struct stat fst;
    if (fstat(fd, &fst) || fstatat(s->dir_fd, rel_tmp, &st, AT_SYMLINK_NOFOLLOW)) {
        rc = -errno;
        goto fail;
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != fst.st_dev || st.st_ino != fst.st_ino) {
        rc = -EIO;
        goto fail;
    }
    if (close(fd)) {
        fd = -1;
        rc = -errno;
        goto fail;
    }
    fd = -1;
    /* A second name, not a move: until the caller has recorded the blob
     * and dropped tmp/<id>.part, the two names are one file, so a crash in
     * between leaves the partials row pointing at the finished bytes, and
     * start-up records them (reconcile.c). Where the blob exists already
     * (the same bytes from another URL: replaced, as its mode may change)
     * or the file system has no hard links, a rename. The two-letter
     * folder is made when the link finds none (it nearly always exists:
     * a mkdir for every blob was a system call each for nothing). */
    *created = 1;
    int created_dir = 0, linked = linkat(s->dir_fd, rel_tmp, s->dir_fd, rel_blob, 0) == 0;
    if (!linked && errno == ENOENT) {
        created_dir = mkdirat(s->dir_fd, rel_dir, 0755) == 0;
        if (!created_dir && errno != EEXIST) {
            rc = -errno;
            *created = 0;
            goto fail;
        }
        linked = linkat(s->dir_fd, rel_tmp, s->dir_fd, rel_blob, 0) == 0;
    }
    if (!linked) {
        *created = errno != EEXIST;
        if (!link_unusable(errno) || renameat(s->dir_fd, rel_tmp, s->dir_fd, rel_blob)) {
            rc = -errno;
            *created = 0;
            goto fail;
        }
    }
    /* The new name lives in the folder's metadata: fsync it, and blobs/ too
     * when the two-letter folder is new (or the caller does, for a group). */
    if (new_dir)
        *new_dir = created_dir;
    else if ((rc = store_sync_blob_dir(s, hex, created_dir)) != 0)
        return rc; /* the blob is complete; only its durability is in doubt */
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

/* One store_unlink_blobs: the digests, and the next one to take (each
 * thread takes the next until none is left). */
typedef struct unlinks {
    const store_t *s;
    const char *const *hex;
    size_t n;
    atomic_size_t next;
} unlinks_t;

static void *unlink_some(void *arg)
{
    unlinks_t *u = arg;
    size_t i;
    while ((i = atomic_fetch_add(&u->next, 1)) < u->n)
        store_unlink_blob(u->s, u->hex[i]);
    return NULL;
}

#define UNLINKS_PER_HELPER 16 /* fewer files a thread than this: not worth starting one */

void store_unlink_blobs(const store_t *s, const char *const *hex, size_t n)
{
    unlinks_t u = {.s = s, .hex = hex, .n = n};
    atomic_init(&u.next, 0);
    pthread_t helper[STORE_UNLINKS - 1];
    size_t want = n / UNLINKS_PER_HELPER, started = 0;
    if (want > STORE_UNLINKS - 1)
        want = STORE_UNLINKS - 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024); /* a path and a log line */
    /* A helper that cannot start leaves its share to the others. */
    while (started < want && pthread_create(&helper[started], &attr, unlink_some, &u) == 0)
        started++;
    pthread_attr_destroy(&attr);
    unlink_some(&u);
    for (size_t i = 0; i < started; i++)
        pthread_join(helper[i], NULL);
}

/* The checks of an opened blob: a regular file of the size recorded. */
static int blob_fd_checked(int fd, uint64_t size, int *fd_out, struct stat *st_out)
{
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
    return blob_fd_checked(fd, size, fd_out, st_out);
}

/* The kernel has no openat2 with RESOLVE_CACHED (before 5.12): asked once,
 * then never again. Loop thread only. */
static int resolve_cached_missing;

int store_open_blob_cached(const store_t *s, const char *hex, uint64_t size, int *fd_out,
                           struct stat *st_out)
{
    if (resolve_cached_missing)
        return -EAGAIN;
    char rel[96];
    blob_rel(hex, rel, sizeof rel);
    /* RESOLVE_CACHED: every name on the way already in the kernel's lookup
     * cache, else EAGAIN (it would read the disk). NO_SYMLINKS as
     * O_NOFOLLOW is, for the whole path. */
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
                           .resolve = RESOLVE_CACHED | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH};
    int fd = (int)syscall(SYS_openat2, s->dir_fd, rel, &how, sizeof how);
    if (fd < 0 && (errno == ENOSYS || errno == EINVAL || errno == E2BIG))
        resolve_cached_missing = 1;
    if (fd < 0)
        return errno == ENOSYS || errno == EINVAL || errno == E2BIG ? -EAGAIN
               : errno == ELOOP                                     ? -EIO
                                                                    : -errno;
    return blob_fd_checked(fd, size, fd_out, st_out);
}
