/* hf_meta: the question hubd asks the Hugging Face Hub about one file
 * before it serves it, with the client's own
 * credentials: `GET {hf_upstream}/{prefix}{repo}/resolve/{rev}/{path}` with
 * `Range: bytes=0-0`. A small file answers 206 (or 200) with its length and
 * git ETag; an LFS file 302 to its CDN with X-Linked-Etag (its SHA-256) and
 * X-Linked-Size. Relative redirects (a renamed repo: same origin) are
 * followed (hub_req.h, at most HUB_REQ_MAX_HOPS); a redirect to another
 * origin is the LFS file's. Every answer carries X-Repo-Commit.
 *
 * Two ways in ask it: the HTTP front's /hf route (httpd_hf.c) and a FETCH
 * of a Hub URL with credentials over the socket (verbs_fetch.c). Both share
 * one memory (hf_meta_t, one per daemon, owned by the session server).
 * Every answer in it is one asker's: a uid and its credential tag, and
 * nobody else reads it; each uid holds a bounded share, and a burst of one
 * uid's questions does not push out another's answers (hf_meta.c's
 * slot_pick):
 * - what the Hub said of a file, for a minute (hf_meta_known): the GET
 *   after a HEAD asks no second time, and another token is always asked.
 *   Only an answer that names a file is kept: a refusal is asked again
 *   each time.
 * - a revision a HEAD resolved to a commit, for five minutes
 *   (hf_meta_rev_*): the GET after a HEAD gets the file the HEAD described.
 *   The caller remembers it only under the key of the repo and revision
 *   its question named.
 *
 * Why one module: an LFS file's SHA-256 the Hub names to a client's own
 * credentials vouches for that client (job.h's `vouched`): the same code
 * must decide what counts as the Hub naming it (never a refusal: a 4xx
 * names nothing, whatever headers it carries) for every way in. It
 * vouches only when the Hub's CDN answers the first byte of the file at
 * the Location the Hub gave (`stored`): a pointer committed to one repo
 * naming another repo's digest names bytes its repo does not hold.
 *
 * Loop thread only. Callbacks never come from inside hf_meta_ask or
 * hf_meta_abort (http.h's rule). */
#ifndef HUBD_HF_META_H
#define HUBD_HF_META_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct http_client;

/* What the Hub said of one file. */
typedef struct hf_file {
    char commit[41];
    int64_t size;
    int lfs;          /* the Hub redirected to its CDN: sha256 is the file's */
    char sha256[65];  /* an LFS file's (X-Linked-Etag), else "" */
    char etag[136];   /* the Hub's ETag as sent, or "" */
    char linked[136]; /* X-Linked-Etag as sent (LFS), or "" */
    char linked_size[24];
    int stored; /* an LFS file whose CDN answered its first byte, of that size: the bytes are
                   this repo's, and the digest may vouch (job.h) */
} hf_file_t;

/* A resolve path's parts, malloc'd (hf_where_free). */
typedef struct hf_where {
    char *prefix; /* "datasets/", "spaces/" or "" (a "models/" prefix is dropped) */
    char *repo;   /* "org/name" (or "name") */
    char *rev;    /* as spelled (percent-encoded stays so) */
    char *path;   /* "dir/file", without a query */
} hf_where_t;

/* s is what follows "/hf/" or "{hf_upstream}/":
 * "[datasets/|spaces/|models/]{repo}/resolve/{rev}/{path}[?query]". 0 with
 * the parts, -1 for another form, a "." or ".." segment in any spelling
 * (url_path_has_dot_segment: the Hub would read another path), or no
 * memory; then nothing to free. Pure. */
int hf_where_parse(const char *s, hf_where_t *out);
void hf_where_free(hf_where_t *w);

/* Whether url is a Hub resolve URL under upstream (hf_upstream: the same
 * origin, under its path): 1 with its parts in *out (hf_where_free), 0
 * when it is another URL (or does not parse, or no memory). Pure. */
int hf_where_of_url(const char *upstream, const char *url, hf_where_t *out);

/* The memory's keys for w: "prefix repo@rev" (the revision's) and
 * key + "/path" (the file's; "" when it does not fit). Pure. */
void hf_where_keys(const hf_where_t *w, char key[512], char file_key[1024]);

/* "bytes 0-0/1234" → 1234; -1 when not that form. Pure. */
int64_t hf_range_total(const char *content_range);

/* A quoted (or weak) ETag's bare value into out: 0 when it is 64 hex
 * digits (an LFS file's SHA-256), lower-cased, else -1. Pure. */
int hf_sha256_of_etag(const char *etag, char out[65]);

/* ---- the memory ----------------------------------------------------------- */

typedef struct hf_meta hf_meta_t;

int hf_meta_new(uv_loop_t *loop, hf_meta_t **out);
/* Every question must have ended or been aborted before. NULL is fine. */
void hf_meta_free(hf_meta_t *m);

/* The commit a HEAD of uid with credential tag ("" without credentials)
 * announced for key, or NULL (forgotten, or never). */
const char *hf_meta_rev_lookup(hf_meta_t *m, uid_t uid, const char *tag, const char *key);
void hf_meta_rev_remember(hf_meta_t *m, uid_t uid, const char *tag, const char *key,
                          const char *commit);

/* What the Hub said of file_key to uid's credential tag within the last
 * minute, or NULL. Valid until the next call into the module. */
const hf_file_t *hf_meta_known(hf_meta_t *m, uid_t uid, const char *tag, const char *file_key);

/* ---- the cluster's memory --------------------------------------------------
 *
 * In a swarm (daemon/fleet/), the nodes share what the Hub said of a file
 * to a credential, so that the cluster asks the Hub about once a minute
 * per credential and file rather than once per node. A question with
 * credentials asks the cluster first (ask); a record there answers it as
 * the Hub's own answer would (the same file, vouching as it did); none,
 * and the Hub is asked, and what it names is told to the cluster (tell).
 * A refusal is never shared: a grant may come at any time. The hooks are
 * main.c's, which joins them to the swarm; a record is text (hf_file_pack). */
#define HF_RECORD_MAX 1024 /* a record's hex digits, with the NUL */

typedef struct hf_cluster_ops {
    /* cb(arg, record or NULL: ask the Hub) once, never from inside ask;
     * returns a handle for cancel, or NULL (ask the Hub now). */
    void *(*ask)(void *ctx, const char *const *cred, size_t ncred, const char *file_key,
                 void (*cb)(void *arg, const char *record), void *arg);
    void (*cancel)(void *ctx, void *handle);
    void (*tell)(void *ctx, const char *const *cred, size_t ncred, const char *file_key,
                 const char *record);
} hf_cluster_ops_t;

/* Start-up: the cluster's hooks (NULL: none, as on one machine). */
void hf_meta_set_cluster(hf_meta_t *m, const hf_cluster_ops_t *ops, void *ctx);

/* A file's record, as lowercase hex of its fields (less than
 * HF_RECORD_MAX digits), and back: 0, or -1 (too long; not a record). Pure. */
int hf_file_pack(const hf_file_t *f, char *out, size_t cap);
int hf_file_unpack(const char *hex, hf_file_t *f);

/* ---- a question ------------------------------------------------------------ */

typedef enum {
    HF_META_FILE,    /* the Hub named the file (file): to these credentials */
    HF_META_REFUSED, /* the Hub answered, but not with the file: status, its error */
    HF_META_FAILED,  /* no answer: code and msg (dns, connect, timeout, redirect,
                        http_parse, tls_verify, ...: PROTOCOL.md's codes) */
} hf_meta_kind_t;

typedef struct hf_meta_answer {
    hf_meta_kind_t kind;
    const hf_file_t *file;     /* FILE */
    int status;                /* REFUSED: the Hub's status (4xx, 5xx, or another) */
    const char *error_code;    /* REFUSED: its X-Error-Code, or NULL */
    const char *error_message; /* REFUSED: its X-Error-Message, or NULL */
    const char *commit;        /* REFUSED: its X-Repo-Commit, or NULL */
    const char *code, *msg;    /* FAILED */
} hf_meta_answer_t;

/* The answer (valid during the call only). The question is over: its
 * handle is freed after the call returns. */
typedef void (*hf_meta_cb)(void *arg, const hf_meta_answer_t *a);

typedef struct hf_ask hf_ask_t;

/* Asks the Hub about the file at url (a resolve URL under hf_upstream)
 * through http (the downloads' client: proxies, network policy) with the
 * credential header lines cred ("Name: value"). A file it names is
 * remembered under (uid, tag, file_key) (file_key "": not remembered). 0 and
 * *out (for hf_meta_abort) until cb is called once; else -EINVAL (url does
 * not parse: *why), -EACCES (the network policy refuses the Hub's host) or
 * -ENOMEM, and no callback. */
int hf_meta_ask(hf_meta_t *m, struct http_client *http, const char *url, uid_t uid, const char *tag,
                const char *file_key, const char *const *cred, size_t ncred, hf_meta_cb cb,
                void *arg, hf_ask_t **out, const char **why);

/* The asker goes (its client left): the request is aborted, no callback
 * comes, the handle is freed. */
void hf_meta_abort(hf_ask_t *a);

#endif
