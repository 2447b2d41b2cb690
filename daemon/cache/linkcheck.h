/* linkcheck: what a user's link is (lstat, and readlink when it is a
 * symlink), given at most a deadline.
 *
 * Why: the links that holds name are in users' folders, where a user can
 * put a FUSE file system whose server never answers (or a dead network
 * mount): an lstat there sleeps until the server answers, and a thread that
 * waits for it would stall what it runs for (eviction, on hubd-bg). The
 * look-up runs on a thread of its own, detached; the caller waits for it at
 * most timeout_ms and then goes on without it (-ETIMEDOUT), leaving it to
 * end whenever the file system answers, touching only its own request.
 * While LINKCHECK_STUCK_MAX such threads are still stuck, no new one is
 * started (-EAGAIN at once): a stuck file system costs at most that many
 * threads, and a caller at most one timeout per look-up.
 *
 * Any thread but the loop's (it blocks up to timeout_ms). */
#ifndef HUBD_LINKCHECK_H
#define HUBD_LINKCHECK_H

#include <limits.h>
#include <sys/stat.h>

#define LINKCHECK_TIMEOUT_MS 2000 /* what holds give one link */
#define LINKCHECK_STUCK_MAX 4     /* look-ups left waiting on a file system */

typedef struct linkcheck {
    struct stat st;        /* lstat's */
    char target[PATH_MAX]; /* readlink's, when st is a symlink ("" else) */
} linkcheck_t;

/* How a look-up is made: 0 with out filled, or a negative errno. The
 * default does lstat, then readlink for a symlink; a test passes its own. */
typedef int (*linkcheck_fn)(const char *path, linkcheck_t *out);

/* Looks path up with look (NULL: the default) within timeout_ms: 0 with
 * *out, look's negative errno, -ETIMEDOUT (it did not answer in time),
 * -EAGAIN (too many are stuck already), -ENAMETOOLONG, or -ENOMEM /
 * -EAGAIN when no thread can be made. */
int linkcheck_read(const char *path, unsigned timeout_ms, linkcheck_fn look, linkcheck_t *out);

/* Look-ups given up on that have not answered yet. */
unsigned linkcheck_stuck(void);

#endif
