/* hf_layout: the Hugging Face cache on disk, as huggingface_hub writes it,
 * and the plain files of --local-dir.
 *
 *   {cache}/{type}s--{org}--{name}/refs/{revision}       the commit, no newline
 *   {cache}/{type}s--{org}--{name}/blobs/{etag}          the file's bytes
 *   {cache}/{type}s--{org}--{name}/snapshots/{commit}/{path}
 *                                   -> ../../blobs/{etag} (one ../ more per folder)
 *   {local}/{path}, {local}/.cache/huggingface/download/{path}.metadata
 *                                   (commit, etag, UNIX time: three lines)
 *
 * etag: the LFS sha256, else the git blob id. Every file is made under a
 * temp name and renamed, so a reader sees the old or the new, never a half.
 * A blob is placed by the caller's choice: a symlink into hubd's store (its
 * read grant already made), or a reflink or copy from hubd's descriptor.
 *
 * The cache folder or local dir is the root the user named; every folder
 * below it ({type}s--{org}--{name} and all under it, or the local dir's
 * sub folders and .cache/) is walked by hf_dir.h: no link followed, each
 * the running user's, and each file made, renamed or linked by its name in
 * its folder's descriptor. A folder refused leaves its reason in
 * l->refused (hf_layout_why says it), and nothing is written there.
 * Blocking file-system calls; single-threaded; the hf_layout_t is the
 * caller's. Returns are 0 or a negative errno unless said. */
#ifndef HUBCTL_HF_LAYOUT_H
#define HUBCTL_HF_LAYOUT_H

#include "hf_dir.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hf_layout {
    char *root;               /* the repo folder in the cache, or the local dir; owned */
    char *top;                /* the root named: the cache folder, or the local dir; owned */
    char *below;              /* "{type}s--{org}--{name}/" below top, "" for the local dir; owned */
    int local;                /* --local-dir: plain files and metadata */
    hf_dir_refusal_t refused; /* the last folder hf_dir refused (err 0: none) */
} hf_layout_t;

/* The repo folder of (type, repo) under cache_dir, or local_dir when
 * given. Nothing is made yet. */
void hf_layout_init(hf_layout_t *l, const char *cache_dir, const char *local_dir, const char *type,
                    const char *repo);
void hf_layout_free(hf_layout_t *l);

/* Is path a safe relative path to place under a folder: no empty, "." or
 * ".." segment, not absolute, no backslash or control byte? A Hub that
 * names "../x" must not write outside the snapshot. */
int hf_path_safe(const char *path);

/* Is path (a Hub file's) .cache/huggingface or under it, where --local-dir
 * keeps its metadata? Such a file would overwrite another's: refused there. */
int hf_path_is_meta(const char *path);

/* The folders already there that every run writes in (the repo folder
 * and its refs/, blobs/ and snapshots/; the local dir's .cache/huggingface
 * /download), walked before anything is asked of hubd: 0, or a refusal
 * (hf_layout_why). A missing one is no error. */
int hf_layout_check(hf_layout_t *l);

/* Why an hf_layout call returned rc: the folder refused, else strerror. */
const char *hf_layout_why(const hf_layout_t *l, int rc, char *buf, size_t cap);

/* refs/{revision} holds commit, unless revision is the commit itself. */
int hf_layout_write_ref(hf_layout_t *l, const char *revision, const char *commit);

/* Malloc'd paths: blobs/{etag}; the file as the user sees it
 * (snapshots/{commit}/{path}, or {local}/{path}); the snapshot folder (or
 * the local dir). */
char *hf_layout_blob(const hf_layout_t *l, const char *etag);
char *hf_layout_file(const hf_layout_t *l, const char *commit, const char *path);
char *hf_layout_folder(const hf_layout_t *l, const char *commit);

/* Is the file there already, so that nothing need be fetched? Cache: its
 * blob opens for reading (a file, or a symlink into hubd's store that
 * resolves to one of size bytes; a link whose read grant is gone is not).
 * Local dir: the file exists, its metadata names commit or etag, and the
 * file is not newer than the metadata. 1 yes, 0 no, or a refusal (< 0) of
 * a folder on the way. */
int hf_layout_present(hf_layout_t *l, const char *commit, const char *path, const char *etag,
                      uint64_t size);

/* blobs/{etag} as a symlink to target (hubd's store path). */
int hf_layout_blob_symlink(hf_layout_t *l, const char *etag, const char *target);

/* blobs/{etag} (cache) or {local}/{path} (local dir) filled from fd's size
 * bytes: a reflink, else a copy. *clone_err: 0 when it was a reflink, else
 * why not (an errno). Local: writes its metadata after it. */
int hf_layout_place_copy(hf_layout_t *l, const char *commit, const char *path, const char *etag,
                         int fd, uint64_t size, int *clone_err);

/* snapshots/{commit}/{path} -> ../../blobs/{etag}, unless it is so. */
int hf_layout_snapshot_link(hf_layout_t *l, const char *commit, const char *path, const char *etag);

/* Do fd's size bytes have git blob id blob_hex (SHA-1 of "blob SIZE\0"
 * and the bytes)? 0 yes, -EBADMSG no, or -errno when unreadable. */
int hf_git_blob_check(int fd, uint64_t size, const char *blob_hex);

#endif
