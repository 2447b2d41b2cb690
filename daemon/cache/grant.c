/* grant: read grants as POSIX ACL entries, through libacl. */
#include "grant.h"

#include <acl/libacl.h>
#include <errno.h>
#include <stddef.h>
#include <sys/acl.h>

/* The ACL of fd, or NULL with errno set. A file without an extended ACL
 * gives the minimal one (owner, group, other) that its mode means. */
static acl_t acl_of(int fd)
{
    return acl_get_fd(fd);
}

/* The entry of named user uid in acl, and the count of named users (and
 * groups, in *named_other) beside it. */
static acl_entry_t find_user(acl_t acl, uid_t uid, unsigned *users, unsigned *named_other)
{
    acl_entry_t e, found = NULL;
    *users = 0;
    if (named_other)
        *named_other = 0;
    for (int r = acl_get_entry(acl, ACL_FIRST_ENTRY, &e); r == 1;
         r = acl_get_entry(acl, ACL_NEXT_ENTRY, &e)) {
        acl_tag_t tag;
        if (acl_get_tag_type(e, &tag))
            continue;
        if (tag == ACL_GROUP && named_other)
            (*named_other)++;
        if (tag != ACL_USER)
            continue;
        uid_t *q = acl_get_qualifier(e);
        if (q && *q == uid)
            found = e;
        else if (named_other)
            (*named_other)++;
        acl_free(q);
        (*users)++;
    }
    return found;
}

/* Writes acl to fd with a mask covering its entries (r--: every entry hubd
 * makes is read-only). */
static int set_acl(int fd, acl_t *acl)
{
    if (acl_calc_mask(acl) || acl_valid(*acl))
        return -EINVAL;
    return acl_set_fd(fd, *acl) ? -errno : 0;
}

static int errno_or(int fallback)
{
    return errno ? -errno : fallback;
}

int grant_add(int fd, uid_t uid, unsigned max)
{
    errno = 0;
    acl_t acl = acl_of(fd);
    if (!acl)
        return errno_or(-EIO);
    unsigned users;
    int rc = 0;
    if (find_user(acl, uid, &users, NULL))
        goto out; /* granted already */
    if (users >= max) {
        rc = -ENOSPC;
        goto out;
    }
    acl_entry_t e;
    acl_permset_t ps;
    if (acl_create_entry(&acl, &e) || acl_set_tag_type(e, ACL_USER) || acl_set_qualifier(e, &uid) ||
        acl_get_permset(e, &ps) || acl_clear_perms(ps) || acl_add_perm(ps, ACL_READ) ||
        acl_set_permset(e, ps)) {
        rc = errno_or(-ENOMEM);
        goto out;
    }
    rc = set_acl(fd, &acl);
out:
    acl_free(acl);
    return rc;
}

int grant_remove(int fd, uid_t uid)
{
    errno = 0;
    acl_t acl = acl_of(fd);
    if (!acl)
        return errno_or(-EIO);
    unsigned users, others;
    int rc = 0;
    acl_entry_t e = find_user(acl, uid, &users, &others);
    if (!e)
        goto out;
    if (acl_delete_entry(acl, e)) {
        rc = errno_or(-EIO);
        goto out;
    }
    if (others == 0) {
        /* The last named entry: without the mask the ACL is minimal, and
         * the kernel keeps it as the mode alone (0400 again, no xattr). */
        acl_entry_t m;
        for (int r = acl_get_entry(acl, ACL_FIRST_ENTRY, &m); r == 1;
             r = acl_get_entry(acl, ACL_NEXT_ENTRY, &m)) {
            acl_tag_t tag;
            if (acl_get_tag_type(m, &tag) == 0 && tag == ACL_MASK) {
                acl_delete_entry(acl, m);
                break;
            }
        }
        rc = acl_valid(acl) ? -EINVAL : acl_set_fd(fd, acl) ? -errno : 0;
        goto out;
    }
    rc = set_acl(fd, &acl);
out:
    acl_free(acl);
    return rc;
}

int grant_count(int fd)
{
    errno = 0;
    acl_t acl = acl_of(fd);
    if (!acl)
        return errno_or(-EIO);
    unsigned users;
    find_user(acl, (uid_t)-1, &users, NULL);
    acl_free(acl);
    return (int)users;
}

int grant_copy(int from_fd, int to_fd)
{
    errno = 0;
    acl_t acl = acl_of(from_fd);
    if (!acl)
        return errno == ENOTSUP || errno == EOPNOTSUPP ? 0 : errno_or(-EIO);
    unsigned users, others;
    find_user(acl, (uid_t)-1, &users, &others);
    int rc = users || others ? set_acl(to_fd, &acl) : 0;
    acl_free(acl);
    return rc;
}
