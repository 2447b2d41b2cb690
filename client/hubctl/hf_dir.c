/* hf_dir: folders below a named root, walked without following a link. */
#include "hf_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_CLOEXEC)

/* mkdir -p of the root: the folder the user named is made as any path is,
 * following the links in its own path, as they asked. */
static int mkdir_p(const char *root)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", root) >= (int)sizeof buf)
        return -ENAMETOOLONG;
    for (char *p = buf + 1;; p++) {
        p = strchr(p, '/');
        if (p)
            *p = '\0';
        if (mkdir(buf, 0777) < 0 && errno != EEXIST)
            return -errno;
        if (!p)
            return 0;
        *p = '/';
    }
}

static int refuse(hf_dir_refusal_t *why, int err, unsigned owner)
{
    why->err = err;
    why->owner = owner;
    return err;
}

/* The folder `name` in the folder at: not followed if it is a link, made
 * first when asked, and the running user's. A descriptor or a negative
 * errno. */
static int open_below(int at, const char *name, int flags, hf_dir_refusal_t *why)
{
    struct stat st;
    int fd = openat(at, name, DIR_FLAGS | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && (flags & HF_DIR_CREATE)) {
        if (mkdirat(at, name, 0777) < 0 && errno != EEXIST)
            return -errno;
        /* opened like any other: a link may have taken its place meanwhile */
        fd = openat(at, name, DIR_FLAGS | O_NOFOLLOW);
    }
    if (fd < 0) {
        int err = errno;
        /* a link under O_NOFOLLOW | O_DIRECTORY is ENOTDIR (ELOOP without
         * O_DIRECTORY on older kernels): lstat tells a link from a file */
        if ((err == ENOTDIR || err == ELOOP) && fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return refuse(why, S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR, 0);
        return -err;
    }
    if (fstat(fd, &st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        return refuse(why, -EPERM, (unsigned)st.st_uid);
    }
    return fd;
}

/* A name of rel that may be opened: not empty, ".", "..", nor too long. */
static int name_ok(const char *name, size_t n)
{
    return n > 0 && n <= NAME_MAX && !(n == 1 && name[0] == '.') &&
           !(n == 2 && name[0] == '.' && name[1] == '.');
}

int hf_dir_open(const char *root, const char *rel, int flags, hf_dir_refusal_t *why)
{
    why->err = 0;
    snprintf(why->path, sizeof why->path, "%s", root);
    int fd = open(root, DIR_FLAGS);
    if (fd < 0 && errno == ENOENT && (flags & HF_DIR_CREATE)) {
        int rc = mkdir_p(root);
        if (rc < 0)
            return rc;
        fd = open(root, DIR_FLAGS);
    }
    if (fd < 0)
        return -errno;
    for (const char *name = rel; *name;) {
        size_t n = strcspn(name, "/");
        char part[NAME_MAX + 1];
        if (!name_ok(name, n) || (name[n] == '/' && !name[n + 1])) {
            close(fd);
            return -EINVAL;
        }
        memcpy(part, name, n);
        part[n] = '\0';
        size_t len = strlen(why->path);
        snprintf(why->path + len, sizeof why->path - len, "/%s", part);
        int next = open_below(fd, part, flags, why);
        close(fd);
        if (next < 0)
            return next;
        fd = next;
        name += n + (name[n] == '/');
    }
    return fd;
}

int hf_dir_open_parent(const char *root, const char *rel, int flags, hf_dir_refusal_t *why,
                       const char **base)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(rel, '/');
    size_t n = slash ? (size_t)(slash - rel) : 0;
    why->err = 0;
    *base = slash ? slash + 1 : rel;
    if (!name_ok(*base, strlen(*base)))
        return -EINVAL;
    if (n >= sizeof dir)
        return -ENAMETOOLONG;
    memcpy(dir, rel, n);
    dir[n] = '\0';
    return hf_dir_open(root, dir, flags, why);
}

const char *hf_dir_explain(const hf_dir_refusal_t *why, char *buf, size_t cap)
{
    if (why->err == -EPERM)
        snprintf(buf, cap,
                 "refusing %s: it is owned by uid %u, not by you (uid %u); below the cache "
                 "folder or local dir named, only folders of your own are written in",
                 why->path, why->owner, (unsigned)geteuid());
    else if (why->err == -ELOOP)
        snprintf(buf, cap,
                 "refusing %s: it is a symbolic link; below the cache folder or local dir "
                 "named, no link is followed",
                 why->path);
    else if (why->err == -ENOTDIR)
        snprintf(buf, cap, "refusing %s: it is not a folder", why->path);
    else
        snprintf(buf, cap, "%s", strerror(-why->err));
    return buf;
}
