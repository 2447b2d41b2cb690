/* hf_repo: the pure parts of HFREPO (verbs_hf.c, issue 22): the Hub's repo
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
    const char *error; /* why the answer is not a listing (static), or NULL */
} hf_listing_t;

/* Reads the n bytes of json into out: 0, or -EINVAL with out->error (not
 * JSON, no 40-hex "sha", no "siblings" array, a sibling without
 * rfilename, blobId or size), -ENOMEM. out->lines is the caller's to free
 * on success (hf_listing_free). */
int hf_repo_listing(const char *json, size_t n, hf_listing_t *out);
void hf_listing_free(hf_listing_t *l);

#endif
