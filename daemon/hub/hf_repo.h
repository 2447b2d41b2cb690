/* hf_repo: the pure parts of HFREPO (verbs_hf.c): the Hub's repo
 * id rules, the API path of a revision, and the Hub's answer (the JSON of
 * `/api/{type}s/{repo}/revision/{rev}?blobs=true`) made into the listing
 * the client reads from REPO's descriptor, one protocol line per file:
 *
 *   path=P size=N blob=GITOID40 [sha256=HEX64]
 *
 * Pure functions, any thread (hf_repo_listing runs in a pool item). */
#ifndef HUBD_HF_REPO_H
#define HUBD_HF_REPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HF_REPO_ID_MAX 96 /* the Hub's bound on "org/name" */

/* 1 when repo is a repo id the Hub accepts: "name" or "org/name", each
 * part of letters, digits, '-', '_' and '.', not beginning or ending with
 * '-' or '.', without "--" or "..", at most HF_REPO_ID_MAX bytes. */
int hf_repo_id_ok(const char *repo);

/* "model", "dataset", "space": the resolve URL's prefix ("", "datasets/",
 * "spaces/"), or NULL for another type. */
const char *hf_repo_prefix(const char *type);

/* The API URL asked: "{upstream}/api/{type}s/{repo}/revision/{rev}?blobs=true",
 * rev percent-encoded whole (RFC 3986 unreserved kept, '/' as %2F, as
 * huggingface_hub quotes it). malloc'd, or NULL (no memory). */
char *hf_repo_api_url(const char *upstream, const char *type, const char *repo, const char *rev);

/* What the Hub's answer says. */
typedef struct hf_listing {
    char commit[41]; /* "sha" */
    char id[128];    /* "id" when it is a valid repo id (a renamed repo's new one), else "" */
    uint64_t files;  /* siblings */
    uint64_t size;   /* their bytes */
    char *lines;     /* the listing (malloc'd), lines_len bytes */
    size_t lines_len;
    uint64_t bytes;    /* the listing's length, in lines or written to a file */
    const char *error; /* why the answer is not a listing (static), or NULL */
} hf_listing_t;

/* Reads the n bytes of json into out: 0, or -EINVAL with out->error (not
 * JSON, no 40-hex "sha", no "siblings" array, a sibling without
 * rfilename, blobId or size), -ENOMEM. out->lines is the caller's to free
 * on success (hf_listing_free).
 *
 * The answer is read as a stream (yajl), never as a tree: its members may
 * come in any order, any other member is skipped whatever it holds, and
 * the first sibling the listing cannot use stops the read with its error
 * (before the answer's end is read: an answer wrong in two ways gets the
 * first wrong thing found). */
int hf_repo_listing(const char *json, size_t n, hf_listing_t *out);

/* As hf_repo_listing, but each line goes to f as its sibling is read (and
 * f is flushed): out->lines stays NULL. What the read holds in memory,
 * besides the answer's own n bytes, is at most n more (yajl's copy of a
 * string with escapes, or of a last token cut short) and a constant (one
 * sibling's fields and line, 32 KiB; yajl's stack: at most 2048 levels are read):
 * HF_REPO_COST bytes a byte of answer, which HFREPO charges the Hub's
 * budget (hub_req.h). On an error some lines may be in f: the caller
 * drops f. 0, -EINVAL (out->error), -ENOMEM, or why writing to f failed
 * (a negative errno). */
int hf_repo_listing_to(const char *json, size_t n, FILE *f, hf_listing_t *out);

#define HF_REPO_COST                                                                               \
    2 /* bytes of memory a byte of answer costs hf_repo_listing_to, its own included */

void hf_listing_free(hf_listing_t *l);

#endif
