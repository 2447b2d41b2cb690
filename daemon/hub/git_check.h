/* git_check: whether a stored file is the git blob the Hub's ETag names,
 * and the entry forgotten when it is not: a small file's bytes have no
 * SHA-256 from the Hub, so its git blob id is what vouches for them.
 *
 * The Hub's ETag of a small (non-LFS) file is its git blob SHA-1,
 * sha1("blob <size>\0" + bytes); hubd's own digest (SHA-256) cannot be
 * checked against it until the bytes are stored. Both routes that fetch a
 * Hub file after asking the Hub about it check the stored file before any
 * byte or descriptor goes out: the HTTP front's /hf (httpd_hf.c) and the
 * socket's FETCH of a Hub URL (verbs_fetch.c). On a mismatch the entry
 * (its URL and credential tag, while it still names these bytes) is
 * removed in the same pool item, as `hubctl rm` would, so that the next
 * request downloads the file again instead of getting the same wrong bytes
 * for ever.
 *
 * Loop thread API. The file is read by its descriptor (pread) in one pool
 * item. done() comes exactly once, on the loop, unless the caller cancels
 * first (its client went away): the item then runs to its end (it may
 * change the cache), answers nobody and frees itself. A shutdown waits for
 * it (env.work). */
#ifndef HUBD_GIT_CHECK_H
#define HUBD_GIT_CHECK_H

#include <stdint.h>
#include <uv.h>

#include "db.h"
#include "job.h"
#include "store.h"
#include "worktrack.h"

/* Larger files are not checked (the Hub's small files are under 10 MB):
 * git_check_start says -EFBIG and the caller serves the file unchecked. */
#define GIT_CHECK_MAX_SIZE (64ull * 1024 * 1024)

typedef struct git_check git_check_t;

/* What the item needs of the daemon; copied by git_check_start. */
typedef struct git_check_env {
    uv_loop_t *loop;
    worktrack_t *work; /* what a shutdown waits for (jobs_work) */
    store_t *store;
    db_t *db;
} git_check_env_t;

typedef struct git_check_result {
    int status;               /* 0, or a libuv error: the item did not run (nothing checked) */
    int match;                /* the file's git SHA-1 is the one wanted */
    const char *want;         /* the SHA-1 wanted (the Hub's ETag), 40 hex digits */
    const char *got;          /* the file's, "" when it could not be read */
    int forgotten;            /* on a mismatch: the entry was removed */
    const job_result_t *file; /* the download's result given to git_check_start, its fd
                                 still open: valid during done() */
} git_check_result_t;

typedef void (*git_check_done_cb)(void *arg, const git_check_result_t *r);

/* The git blob SHA-1 an ETag names (40 lowercase hex digits, quoted, weak
 * or not) into sha1: 1, or 0 when it is not one (an LFS file's ETag, none). */
int git_check_etag(const char *etag, char sha1[41]);

/* Checks the stored file of res (a successful job_result_t; its fd is
 * referenced and its strings copied) against want, the Hub's git blob
 * SHA-1; on a mismatch forgets the entry of url (as jobs_fetch keys it:
 * canonical) fetched with cred_tag ("" for none). 0 and *out (for git_check_cancel), or -EFBIG
 * (larger than GIT_CHECK_MAX_SIZE: not checked), -ENOMEM or a libuv error: then no callback comes.
 */
int git_check_start(const git_check_env_t *env, const job_result_t *res, const char *url,
                    const char *cred_tag, const char *want, git_check_done_cb done, void *arg,
                    git_check_t **out);

/* No done() for this check any more: its caller is gone. */
void git_check_cancel(git_check_t *g);

#endif
