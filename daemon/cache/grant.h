/* grant: read grants on a private blob, as POSIX ACL entries (libacl).
 *
 * A private blob is 0400, readable by hubd alone; clients read it through
 * the fd DONE passes. A user whose HF cache links to the blob (HOLD) needs
 * to open it by name: grant_add gives that uid a `user:UID:r--` entry, so
 * the link needs no second copy of the bytes. The mask is recomputed from
 * the entries, so it is r-- (every entry is r--): the file's group bits
 * show it (0440) though no group was given anything, which is why the store
 * judges a blob public by its o+r bit alone.
 *
 * Pool threads only (each call is a getxattr and a setxattr on the file).
 * Every function takes an fd open on the blob (O_RDONLY is enough: hubd
 * owns the file). Errors are negative errno. */
#ifndef HUBD_GRANT_H
#define HUBD_GRANT_H

#include <sys/types.h>

#define GRANT_MAX_USERS 32 /* named users per blob: bounds the xattr and the audit */

/* Gives uid read access. 0 when granted (or already), -ENOSPC when max
 * named users have a grant already (none is made), -EOPNOTSUPP when the
 * file system keeps no ACLs, other negative errno. */
int grant_add(int fd, uid_t uid, unsigned max);

/* Takes uid's entry away (0 also when it had none). When no named entry is
 * left the ACL is made minimal again (no xattr, mode 0400). */
int grant_remove(int fd, uid_t uid);

/* The number of named users granted, or a negative errno. */
int grant_count(int fd);

/* Copies from_fd's named entries onto to_fd (a new file of the same
 * private bytes replacing the old under its name), so that the grants
 * outlive the replacement. 0 also when from_fd has none. */
int grant_copy(int from_fd, int to_fd);

#endif
