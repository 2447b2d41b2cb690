/* store: the cache's files on disk.
 *
 *   <cache_dir>/                   0755 (clients open blob paths)
 *   <cache_dir>/blobs/ab/ab12...   complete, verified, read-only (0444, or 0400
 *                                  when private), by SHA-256; blobs/ and
 *                                  blobs/ab/ are 0755
 *   <cache_dir>/tmp/<id>.part      being downloaded; never served. id is a job's
 *                                  partial id (the partials row, when recorded)
 *   <cache_dir>/tmp/ (unnamed)     files with no name (store_tmp_unnamed): an
 *                                  HFREPO listing, gone with its last descriptor
 *   <cache_dir>/quarantine/        files start-up or verify would not serve
 *   <cache_dir>/hubd.db(-wal,-shm), lock, secret: hubd's alone
 * Every other file is 0600 and every other folder 0700.
 *
 * Nothing in the cache is followed through a symbolic link: a cache that
 * another user can write to (root hubd on a folder a user made) could
 * otherwise turn hubd's writes, chmods and links onto any file. So
 * store_open refuses to start on a cache whose folders or files are links,
 * are not owned by hubd's effective uid or are writable by group or others,
 * and every open below uses O_NOFOLLOW.
 *
 * store_open runs once at start-up on the loop thread before the loop runs.
 * Every other function does blocking file I/O and is called only from libuv
 * pool threads (a job's work items, and start-up); they touch no shared
 * mutable state. */
#ifndef HUBD_STORE_H
#define HUBD_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct store store_t;

/* Creates the layout as needed, takes the cache's lock and checks every
 * folder and file hubd keeps there (the list in store.c). -EPERM, logged
 * with the path, what was found and what is wanted, when one is unsafe;
 * -EBUSY when another hubd holds the cache. */
int store_open(const char *cache_dir, store_t **out);
void store_close(store_t *s);
const char *store_dir(const store_t *s);
/* The open cache dir, for *at() calls relative to it (start-up code). */
int store_dir_fd(const store_t *s);

/* Paths into caller buffers (PATH_MAX is enough). */
void store_blob_path(const store_t *s, const char *hex, char *buf, size_t cap);
void store_tmp_path(const store_t *s, uint64_t id, char *buf, size_t cap);

/* Pool thread: create the partial file of a job, new and empty, mode 0600,
 * open read-write (whatever had the name before is unlinked, never written
 * through). */
int store_tmp_create(const store_t *s, uint64_t id, int *fd_out);

/* Pool thread: a new file in tmp/ that has no name, mode 0600, open
 * read-write (O_TMPFILE|O_EXCL; where the filesystem has no O_TMPFILE,
 * created and unlinked at once), never to be linked: its bytes are on the
 * cache's disk, not in hubd's memory, until the last descriptor goes (an
 * HFREPO listing passed to a client). */
int store_tmp_unnamed(const store_t *s, int *fd_out);

/* Pool thread (or start-up): open an existing partial to resume it,
 * read-write, cut to its first `keep` bytes. -ESTALE when it holds fewer
 * than that, or is not a regular file of hubd's with one name (a link, or
 * a file also named elsewhere, is never cut). */
int store_tmp_reopen(const store_t *s, uint64_t id, uint64_t keep, int *fd_out);

/* Pool thread: make the partial (already fsync'ed by the caller: not
 * here, so that the caller's lock is not held over it) visible under its
 * digest: chmod 0444 (0400 for a private blob: fetched with credentials, and
 * not public already), hard-link into blobs/<aa>/ (rename where that cannot
 * be), fsync the folder(s). Closes fd in every case. On success *ro_fd is a
 * new read-only descriptor of the blob, tmp/<id>.part may still name it
 * too, and *created says whether the name under blobs/ is new (else the
 * same bytes were there and were replaced). Either way the caller then
 * records the blob (or, on failure, drops the partial's row, and the new
 * name with store_unlink_blob when *created) and only then the partial's
 * name (store_discard with fd -1), so that no row ever names a missing
 * file. On failure before the new name nothing appears under blobs/. */
/* new_dir NULL: the folders are fsync'ed here. Else that is the caller's
 * (a group commit links every blob of the group first, then syncs each
 * folder once: store_sync_blob_dir), and *new_dir says whether the blob's
 * two-letter folder was made (then blobs/ needs its fsync too). */
int store_commit(const store_t *s, int fd, uint64_t id, const char *hex, int private_blob,
                 int *ro_fd, int *created, int *new_dir);
/* Pool thread: syncfs(2) of the cache's file system: every file's data and
 * every name on it durable, with one device flush (a group commit's). */
int store_sync_all(const store_t *s);
/* Pool thread, after a store_sync_all that returned 0: whether the file
 * open as fd came through it without a writeback error since fd was
 * opened (syncfs reports an error once, maybe to another caller): 0, that
 * error, or -ENOTSUP where that does not stand for the file's own fsync
 * (before Linux 5.17, or a file system other than ext4, XFS, btrfs or
 * tmpfs: store.c says why). Waits, writes nothing, no device flush. */
int store_check_synced(const store_t *s, int fd);
/* Pool thread: the names made under blobs/ since the last sync made
 * durable by one syncfs, where that stands for each folder's fsync (as in
 * store_check_synced: a directory's blocks are written by syncfs as a
 * file's pages are, and a failed write is told to the next syncfs on
 * this store's descriptor). 0, the error, or -ENOTSUP: fsync each folder
 * then. */
int store_sync_names(const store_t *s);
/* Pool thread: fsync blobs/<hex's first two>/, and blobs/ when new_dir. */
int store_sync_blob_dir(const store_t *s, const char *hex, int new_dir);

/* Pool thread: remove blobs/<aa>/<hex> (a commit whose row could not be
 * written; eviction). A name already gone is fine. */
void store_unlink_blob(const store_t *s, const char *hex);
/* Pool thread: store_unlink_blob of n blobs, up to STORE_UNLINKS at once
 * (the caller's thread and helpers it starts and joins before it
 * returns). An unlink frees the file's blocks, and on a file system
 * mounted with `discard` each one waits for the disk's discard: one at a
 * time, a GC of 10,000 blobs of 32 KiB waited 1.4-3.6 s for them here. */
#define STORE_UNLINKS 8
void store_unlink_blobs(const store_t *s, const char *const *hex, size_t n);

/* Pool thread: drop a failed job's partial, or a committed one's tmp name
 * (fd may be -1; a name already gone is fine). */
void store_discard(const store_t *s, int fd, uint64_t id);

/* Pool thread: open a blob read-only (never through a symlink) and check
 * that it is a regular file of the size the database says. -ENOENT when
 * gone, -EIO otherwise. *st_out gets its fstat (may be NULL). */
int store_open_blob(const store_t *s, const char *hex, uint64_t size, int *fd_out,
                    struct stat *st_out);
/* Loop thread: the same, only where every name on the way is in the
 * kernel's lookup cache (openat2 RESOLVE_CACHED, Linux 5.12): no disk
 * read, so the loop may ask. -EAGAIN where it would read the disk, or the
 * kernel cannot tell: then store_open_blob in the pool. */
int store_open_blob_cached(const store_t *s, const char *hex, uint64_t size, int *fd_out,
                           struct stat *st_out);

#endif
