/* materialize: copy a blob descriptor into a file of the calling user. */
#include "materialize.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h> /* FICLONE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COPY_BUF_SIZE (1u << 20) /* read/write fallback buffer: 1 MiB */
#define RANGE_CHUNK (1u << 30)   /* bytes asked of one copy_file_range call */
#define TEMP_TRIES 64            /* temp names tried before giving up on EEXIST */
#define FALLBACK (-EOPNOTSUPP)   /* "this copy method does not apply here" */

/* A fresh suffix for a temp name. getrandom never blocks with GRND_NONBLOCK;
 * if it cannot answer, the clock and pid are unique enough with O_EXCL. */
static unsigned temp_suffix(int attempt)
{
    unsigned r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned)ts.tv_nsec ^ (unsigned)getpid() << 12 ^ (unsigned)attempt;
}

/* Names the temp file "<dir>/.<base>.hubctl-XXXXXXXX": in dest's directory so
 * the final rename(2) is atomic, hidden so a half-written file is not taken
 * for the real one. The base is cut to keep the name under NAME_MAX. dest
 * may be a path, or one name in a folder's descriptor (the same rule). */
static int temp_path(const char *dest, int attempt, char *out, size_t cap)
{
    const char *slash = strrchr(dest, '/');
    int dirlen = slash ? (int)(slash - dest + 1) : 0;
    const char *base = slash ? slash + 1 : dest;
    int n = snprintf(out, cap, "%.*s.%.200s.hubctl-%08x", dirlen, dest, base, temp_suffix(attempt));
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    return 0;
}

/* Creates the temp file in dirfd; mode 0644 is narrowed by the caller's
 * umask. */
static int open_temp(int dirfd, const char *dest, char *tmp, size_t cap)
{
    for (int i = 0; i < TEMP_TRIES; i++) {
        int rc = temp_path(dest, i, tmp, cap);
        if (rc < 0)
            return rc;
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Errors of copy_file_range(2) that mean "not between these two files" (other
 * file systems, old kernels, special files) rather than a failed copy. */
static int range_unsupported(int err)
{
    return err == EXDEV || err == EINVAL || err == ENOSYS || err == EOPNOTSUPP || err == EBADF ||
           err == ETXTBSY;
}

/* Copies [*off, size) in the kernel, advancing *off. Explicit offsets on both
 * sides: hubd may hand one open file to several clients, who then share its
 * file offset. Returns 0 when done, FALLBACK to continue another way from
 * *off, or a negative errno. */
static int copy_range(int src, int dst, uint64_t size, uint64_t *off)
{
    while (*off < size) {
        uint64_t left = size - *off;
        loff_t in = (loff_t)*off, out = (loff_t)*off;
        ssize_t n =
            copy_file_range(src, &in, dst, &out, left < RANGE_CHUNK ? left : RANGE_CHUNK, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return range_unsupported(errno) ? FALLBACK : -errno;
        if (n == 0)
            return FALLBACK; /* some file systems say 0 for "not here": let read() decide */
        *off += (uint64_t)n;
    }
    return 0;
}

/* All n bytes of buf to fd at off, or in order with seq (a pipe, a
 * terminal: -o -). */
static int write_all(int fd, const char *buf, size_t n, uint64_t off, int seq)
{
    while (n > 0) {
        ssize_t w = seq ? write(fd, buf, n) : pwrite(fd, buf, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        buf += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* The portable path: pread/pwrite (write with seq) through a 1 MiB buffer
 * from *off on. A source shorter than `size` is -EIO: the blob is not what
 * DONE said. */
static int copy_rw(int src, int dst, uint64_t size, uint64_t *off, int seq)
{
    char *buf = malloc(COPY_BUF_SIZE);
    if (!buf)
        return -ENOMEM;
    int rc = 0;
    while (rc == 0 && *off < size) {
        uint64_t left = size - *off;
        ssize_t n = pread(src, buf, left < COPY_BUF_SIZE ? left : COPY_BUF_SIZE, (off_t)*off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = -errno;
        else if (n == 0)
            rc = -EIO;
        else if ((rc = write_all(dst, buf, (size_t)n, *off, seq)) == 0)
            *off += (uint64_t)n;
    }
    free(buf);
    return rc;
}

/* Cheapest first: a reflink shares the blocks (btrfs, XFS) and costs nothing;
 * copy_file_range keeps the bytes in the kernel (and may reflink or offload
 * on its own); read/write works everywhere. */
static int copy_blob(int src, int dst, uint64_t size, int *clone_err)
{
    if (ioctl(dst, FICLONE, src) == 0) {
        *clone_err = 0;
        return 0;
    }
    *clone_err = errno;
    uint64_t off = 0;
    int rc = copy_range(src, dst, size, &off);
    if (rc == FALLBACK)
        rc = copy_rw(src, dst, size, &off, 0);
    return rc;
}

/* src_fd is the blob its DONE line describes: a regular file of size
 * bytes. 0, -EBADMSG, or -errno. */
static int check_blob(int src_fd, uint64_t size)
{
    struct stat st;
    if (fstat(src_fd, &st) < 0)
        return -errno;
    return S_ISREG(st.st_mode) && (uint64_t)st.st_size == size ? 0 : -EBADMSG;
}

int materialize_stream(int src_fd, uint64_t size, int out)
{
    int rc = check_blob(src_fd, size);
    if (rc)
        return rc;
    off_t off = 0;
    while ((uint64_t)off < size) {
        uint64_t left = size - (uint64_t)off;
        ssize_t n = sendfile(out, src_fd, &off, left < RANGE_CHUNK ? left : RANGE_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EINVAL || errno == ENOSYS) && off == 0)
            break; /* an output sendfile cannot write to: read/write below */
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO; /* the blob is shorter than DONE said */
    }
    uint64_t done = (uint64_t)off;
    return done == size ? 0 : copy_rw(src_fd, out, size, &done, 1);
}

int materialize_file(int src_fd, uint64_t size, const char *dest)
{
    int clone_err;
    return materialize_file_how(src_fd, size, dest, &clone_err);
}

int materialize_file_how(int src_fd, uint64_t size, const char *dest, int *clone_err)
{
    return materialize_file_at(src_fd, size, AT_FDCWD, dest, clone_err);
}

int materialize_file_at(int src_fd, uint64_t size, int dirfd, const char *dest, int *clone_err)
{
    *clone_err = EOPNOTSUPP;
    int rc = check_blob(src_fd, size);
    if (rc)
        return rc;

    char tmp[PATH_MAX];
    int dst = open_temp(dirfd, dest, tmp, sizeof tmp);
    if (dst < 0)
        return dst;
    rc = copy_blob(src_fd, dst, size, clone_err);
    if (close(dst) < 0 && rc == 0)
        rc = -errno; /* NFS and friends report write errors at close */
    if (rc == 0 && renameat(dirfd, tmp, dirfd, dest) < 0)
        rc = -errno;
    if (rc < 0)
        unlinkat(dirfd, tmp, 0);
    return rc;
}
