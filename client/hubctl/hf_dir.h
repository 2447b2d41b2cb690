/* hf_dir: the folders below a root the user named (the HF cache folder,
 * or --local-dir), opened without following a link.
 *
 * The root is the user's own word and is resolved as any path is, links in
 * it included. Below it, each folder is opened one name at a time from the
 * previous one's descriptor with O_NOFOLLOW | O_DIRECTORY (made first with
 * mkdirat when asked, then opened the same way), and must belong to the
 * running user (st_uid == geteuid(); root gets no exception). In a shared
 * cache or local dir, another user could otherwise plant `sub ->
 * ~victim/dir`, and the victim's own run would write there with the
 * victim's rights. Callers then create, rename, link and unlink by one
 * name relative to the descriptor they get, so nothing is written through
 * a link and nothing outside the root is touched.
 *
 * A refusal fills an hf_dir_refusal_t: which folder, and why. Blocking,
 * single-threaded; nothing is kept between calls. */
#ifndef HUBCTL_HF_DIR_H
#define HUBCTL_HF_DIR_H

#include <limits.h>
#include <stddef.h>

#define HF_DIR_CREATE 1 /* make the folders missing (0777 & ~umask), the root too */

typedef struct hf_dir_refusal {
    char path[PATH_MAX]; /* the folder refused: the root, '/', the names up to it */
    int err;             /* -ELOOP a link, -ENOTDIR not a folder, -EPERM another's; 0 none */
    unsigned owner;      /* its owner's uid, with -EPERM */
} hf_dir_refusal_t;

/* Opens the folder root/rel: rel is names joined by '/' (none empty, "."
 * or ".."; "" is the root itself). Returns its descriptor (O_RDONLY,
 * close-on-exec; the caller's to close) or a negative errno: -ENOENT when
 * a folder is missing and flags lack HF_DIR_CREATE, -EINVAL for a bad
 * name; a refusal returns why->err and fills *why (why->err is 0 after any
 * other outcome). */
int hf_dir_open(const char *root, const char *rel, int flags, hf_dir_refusal_t *why);

/* hf_dir_open of the folder holding rel's last name; *base is that name
 * (a pointer into rel). */
int hf_dir_open_parent(const char *root, const char *rel, int flags, hf_dir_refusal_t *why,
                       const char **base);

/* The refusal in words ("/c/models--o--m/blobs is a symbolic link..."),
 * into buf; returns buf. */
const char *hf_dir_explain(const hf_dir_refusal_t *why, char *buf, size_t cap);

#endif
