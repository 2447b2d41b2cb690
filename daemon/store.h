/* store: the cache's files on disk.
 *
 *   <cache_dir>/blobs/ab/ab12...   complete, verified, read-only, by SHA-256
 *   <cache_dir>/tmp/<id>.part      being downloaded; never served. id is a job's
 *                                  partial id (the partials row, when recorded)
 *
 * store_open runs once at start-up on the loop thread before the loop runs.
 * Every other function does blocking file I/O and is called only from libuv
 * pool threads (a job's work items); they touch no shared mutable state. */
#ifndef HUBD_STORE_H
#define HUBD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct store store_t;

int store_open(const char *cache_dir, store_t **out);
void store_close(store_t *s);
const char *store_dir(const store_t *s);

/* Paths into caller buffers (PATH_MAX is enough). */
void store_blob_path(const store_t *s, const char *hex, char *buf, size_t cap);
void store_tmp_path(const store_t *s, uint64_t id, char *buf, size_t cap);

/* Pool thread: create (truncate) the partial file of a job, mode 0600. */
int store_tmp_create(const store_t *s, uint64_t id, int *fd_out);

/* Pool thread: open an existing partial to resume it, read-write, cut to
 * its first `keep` bytes. -ESTALE when it holds fewer than that. */
int store_tmp_reopen(const store_t *s, uint64_t id, uint64_t keep, int *fd_out);

/* Pool thread: make the partial durable and visible under its digest:
 * fsync, chmod 0444 (0400 for a private blob: fetched with credentials, and
 * not public already), hard-link into blobs/<aa>/ (rename where that cannot
 * be), fsync the folder(s). Closes fd in every case. On success *ro_fd is a
 * new read-only descriptor of the blob, tmp/<id>.part may still name it
 * too, and *created says whether the name under blobs/ is new (else the
 * same bytes were there and were replaced). Either way the caller then
 * records the blob (or, on failure, drops the partial's row, and the new
 * name with store_unlink_blob when *created) and only then the partial's
 * name (store_discard with fd -1), so that no row ever names a missing
 * file. On failure before the new name nothing appears under blobs/. */
int store_commit(const store_t *s, int fd, uint64_t id, const char *hex, int private_blob,
                 int *ro_fd, int *created);

/* Pool thread: remove blobs/<aa>/<hex> (a commit whose row could not be
 * written; eviction). A name already gone is fine. */
void store_unlink_blob(const store_t *s, const char *hex);

/* Pool thread: drop a failed job's partial, or a committed one's tmp name
 * (fd may be -1; a name already gone is fine). */
void store_discard(const store_t *s, int fd, uint64_t id);

/* Pool thread: open a blob read-only (never through a symlink) and check
 * that it is a regular file of the size the database says. -ENOENT when
 * gone, -EIO otherwise. *st_out gets its fstat (may be NULL). */
int store_open_blob(const store_t *s, const char *hex, uint64_t size, int *fd_out,
                    struct stat *st_out);

#endif
