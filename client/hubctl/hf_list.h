/* hf_list: a repo's file list as hubd's REPO reply hands it over, and the
 * --include / --exclude filter over it.
 *
 * The list comes as a descriptor of one line per file, in the protocol's
 * encoding (PROTOCOL.md, HFREPO): `path=P size=N blob=GITOID40
 * [sha256=HEX64]`. It is read whole, checked line by line (a line that
 * does not parse is an error: a half list would look like a smaller repo),
 * and owned by the hf_list_t. Single-threaded. */
#ifndef HUBCTL_HF_LIST_H
#define HUBCTL_HF_LIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct hf_file {
    char *path;      /* the file's path in the repo, decoded; owned */
    uint64_t size;   /* bytes */
    char blob[41];   /* its git blob id, lower-case hex */
    char sha256[65]; /* an LFS file's sha256, lower-case hex, else "" */
} hf_file_t;

typedef struct hf_list {
    hf_file_t *files; /* in the order of the list */
    size_t n;         /* entries of files */
} hf_list_t;

/* Reads the list from fd (by offset, from 0; fd is not closed). Returns 0,
 * or a negative errno with a reason in err (-EBADMSG: a bad line). */
int hf_list_read(int fd, hf_list_t *l, char *err, size_t errcap);
void hf_list_free(hf_list_t *l);

/* The name of f's blob in the HF cache: the sha256 of an LFS file, else
 * the git blob id (huggingface_hub's etag). */
const char *hf_file_etag(const hf_file_t *f);

/* Is path wanted by huggingface_hub's filter_repo_objects rules: with
 * include patterns, one must match; no exclude pattern may. A pattern
 * ending in "/" is that and "*"; fnmatch without FNM_PATHNAME, so "*" also
 * spans "/", as Python's fnmatch. */
int hf_list_wanted(const char *path, const char *const *include, size_t ninclude,
                   const char *const *exclude, size_t nexclude);

#endif
