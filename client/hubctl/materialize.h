/* materialize: turn a blob descriptor received from hubd into a file of the
 * calling user.
 *
 * hubd never writes outside its cache. A user who wants a copy elsewhere makes
 * it themselves from the read-only descriptor that came with DONE, so the copy
 * is theirs, obeys their umask, and stays correct even if the blob is evicted
 * meanwhile.
 */
#ifndef HUBCTL_MATERIALIZE_H
#define HUBCTL_MATERIALIZE_H

#include <stdint.h>

/* Copies the `size` bytes of src_fd into a new file at dest, atomically: a
 * temporary file beside dest (O_EXCL, mode 0644 & ~umask), filled by reflink,
 * else copy_file_range(2), else read/write, then renamed over dest. src_fd is
 * read only by offset and never closed. Returns 0 or a negative errno;
 * -EBADMSG when src_fd is not a regular file of `size` bytes (the descriptor
 * does not match its DONE line). On failure nothing is left behind. */
int materialize_file(int src_fd, uint64_t size, const char *dest);

/* materialize_file, and *clone_err says how: 0 when the file is a reflink,
 * else why the reflink could not be made (an errno: EOPNOTSUPP, EXDEV...)
 * and the bytes were copied. */
int materialize_file_how(int src_fd, uint64_t size, const char *dest, int *clone_err);

/* materialize_file_how of dest relative to the folder dirfd (AT_FDCWD: as
 * a path): the temp file, the rename and any cleanup all happen in that
 * folder's descriptor, so a link planted in place of a folder on dest's
 * path is never followed (hf download's walk, hf_dir.h, opened dirfd). */
int materialize_file_at(int src_fd, uint64_t size, int dirfd, const char *dest, int *clone_err);

/* Writes the `size` bytes of src_fd to out in order (`-o -`: stdout, a pipe
 * or a terminal), by sendfile(2), else read/write. Returns 0 or a negative
 * errno; -EBADMSG as materialize_file. */
int materialize_stream(int src_fd, uint64_t size, int out);

#endif
