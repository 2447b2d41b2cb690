/* hf_meta: the Hub's answer about one file, asked with a client's own
 * credentials, and what the daemon remembers of such answers (hf_meta.h).
 * Apart from httpd_hf.c so that the socket's FETCH of a Hub
 * URL asks the same question, the same way, into the same memory. */
#include "hf_meta.h"
#include "hub_req.h"
#include "textnum.h"
#include "url.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The Hub's headers the question keeps (the HTTP client knows none of
 * them), by their index in hub_wanted. */
enum { HUB_COMMIT, HUB_LINKED_ETAG, HUB_LINKED_SIZE, HUB_ERROR_CODE, HUB_ERROR_MESSAGE, HUB_N };
static const http_want_t hub_wanted[HUB_N] = {
    [HUB_COMMIT] = {"X-Repo-Commit", 0},          [HUB_LINKED_ETAG] = {"X-Linked-Etag", 0},
    [HUB_LINKED_SIZE] = {"X-Linked-Size", 0},     [HUB_ERROR_CODE] = {"X-Error-Code", 0},
    [HUB_ERROR_MESSAGE] = {"X-Error-Message", 0},
};

/* ---- pure helpers ------------------------------------------------------------ */

int hf_where_parse(const char *s, hf_where_t *out)
{
    memset(out, 0, sizeof *out);
    const char *t = s;
    size_t tl = strcspn(t, "?");
    const char *pre = "";
    if (strncmp(t, "datasets/", 9) == 0)
        pre = "datasets/", t += 9, tl -= 9;
    else if (strncmp(t, "spaces/", 7) == 0)
        pre = "spaces/", t += 7, tl -= 7;
    else if (strncmp(t, "models/", 7) == 0)
        t += 7, tl -= 7;
    /* What a dot segment would make of the path is the Hub's to decide,
     * not ours to guess: the parts must be what is asked. */
    if (url_path_has_dot_segment(t, tl))
        return -1;
    const char *res = NULL;
    for (const char *p = t; p + 9 <= t + tl; p++)
        if (strncmp(p, "/resolve/", 9) == 0) {
            res = p;
            break;
        }
    if (!res || res == t)
        return -1;
    const char *rv = res + 9, *end = t + tl;
    const char *slash = memchr(rv, '/', (size_t)(end - rv));
    if (!slash || slash == rv || slash + 1 >= end)
        return -1;
    out->prefix = strdup(pre);
    out->repo = strndup(t, (size_t)(res - t));
    out->rev = strndup(rv, (size_t)(slash - rv));
    out->path = strndup(slash + 1, (size_t)(end - slash - 1));
    if (out->prefix && out->repo && out->rev && out->path)
        return 0;
    hf_where_free(out);
    return -1;
}

void hf_where_free(hf_where_t *w)
{
    free(w->prefix);
    free(w->repo);
    free(w->rev);
    free(w->path);
    memset(w, 0, sizeof *w);
}

int hf_where_of_url(const char *upstream, const char *url, hf_where_t *out)
{
    url_t up, u;
    memset(out, 0, sizeof *out);
    if (!upstream || url_parse(upstream, &up, NULL))
        return 0;
    if (url_parse(url, &u, NULL)) {
        url_free(&up);
        return 0;
    }
    /* The upstream's path ("/" or "/mirror"): the URL's must go on under it. */
    size_t pl = strcspn(up.target, "?");
    while (pl && up.target[pl - 1] == '/')
        pl--;
    int under =
        url_same_origin(&up, &u) && strncmp(u.target, up.target, pl) == 0 && u.target[pl] == '/';
    int rc = under ? hf_where_parse(u.target + pl + 1, out) == 0 : 0;
    url_free(&up);
    url_free(&u);
    return rc;
}

void hf_where_keys(const hf_where_t *w, char key[512], char file_key[1024])
{
    snprintf(key, 512, "%s%s@%s", w->prefix, w->repo, w->rev);
    if (snprintf(file_key, 1024, "%s/%s", key, w->path) >= 1024)
        file_key[0] = '\0';
}

int64_t hf_range_total(const char *cr)
{
    const char *slash = cr ? strrchr(cr, '/') : NULL;
    if (!slash || slash[1] < '0' || slash[1] > '9')
        return -1;
    char *end;
    unsigned long long v = strtoull(slash + 1, &end, 10);
    return *end ? -1 : (int64_t)v;
}

int hf_sha256_of_etag(const char *etag, char out[65])
{
    if (!etag)
        return -1;
    if (strncmp(etag, "W/", 2) == 0)
        etag += 2;
    size_t n = strlen(etag);
    if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"')
        etag++, n -= 2;
    if (n != 64)
        return -1;
    for (size_t i = 0; i < 64; i++) {
        char ch = etag[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
            return -1;
        out[i] = ch >= 'A' && ch <= 'F' ? (char)(ch + 32) : ch;
    }
    out[64] = '\0';
    return 0;
}

/* ---- the memory ------------------------------------------------------------ */

/* Every remembered answer is one uid's, under one credential tag: another
 * user, or another token, never reads it, so what one asker made the Hub
 * say cannot become another's answer. The tables are bounded, and shared
 * fairly (slot_pick): a uid replaces its own oldest answer once it holds
 * HF_PER_UID, and takes another uid's only from one that holds at least
 * two more than it does, so that nobody's burst pushes out what a quieter
 * user was just told. A forgotten answer is only asked again. */
#define HF_SLOTS 256  /* entries of each table */
#define HF_PER_UID 16 /* of them one uid may hold */

/* What each entry begins with: whose it is, and until when. */
typedef struct hf_slot {
    uid_t uid;
    uint64_t until; /* uv_now() when it is forgotten; 0: free */
    char tag[65];   /* the credential tag ("" without credentials) */
} hf_slot_t;

/* A revision a HEAD resolved to a commit, for the GET that follows it: a
 * branch may move between the two, and the client must get the file the
 * HEAD described. */
#define HF_REV_TTL_MS 300000
typedef struct hf_rev {
    hf_slot_t head;
    char key[512]; /* "datasets/org/name@rev" */
    char commit[41];
} hf_rev_t;

/* What the Hub said of one file: the GET that follows a HEAD
 * (huggingface_hub's way) needs no second question, and a token the Hub
 * accepted stays accepted this long, no longer. */
#define HF_KNOWN_TTL_MS 60000
typedef struct hf_known {
    hf_slot_t head;
    char key[1024]; /* "datasets/org/name@rev/path" */
    hf_file_t file;
} hf_known_t;

/* Flat, one per daemon. */
struct hf_meta {
    uv_loop_t *loop;
    const hf_cluster_ops_t *cluster; /* the swarm's shared memory (main.c's hooks), or NULL */
    void *cluster_ctx;
    hf_rev_t revs[HF_SLOTS];
    hf_known_t known[HF_SLOTS];
};

void hf_meta_set_cluster(hf_meta_t *m, const hf_cluster_ops_t *ops, void *ctx)
{
    m->cluster = ops;
    m->cluster_ctx = ctx;
}

/* The record's fields, one a line, hex-encoded whole: every byte of an
 * ETag goes through the wire's line as it is. */
int hf_file_pack(const hf_file_t *f, char *out, size_t cap)
{
    char text[HF_RECORD_MAX / 2];
    int n = snprintf(text, sizeof text, "1\n%s\n%lld\n%d\n%s\n%s\n%s\n%s\n%d", f->commit,
                     (long long)f->size, f->lfs, f->sha256, f->etag, f->linked, f->linked_size,
                     f->stored);
    if (n < 0 || (size_t)n >= sizeof text || cap < 2 * (size_t)n + 1)
        return -1;
    for (int i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", (unsigned char)text[i]);
    return 0;
}

int hf_file_unpack(const char *hex, hf_file_t *f)
{
    char text[HF_RECORD_MAX / 2 + 1];
    size_t n = strlen(hex);
    if (n % 2 || n / 2 >= sizeof text)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        text[i] = (char)v;
    }
    text[n / 2] = '\0';
    if (memchr(text, '\0', n / 2))
        return -1;
    char *field[9], *p = text;
    int k = 0;
    /* strsep keeps empty fields (an ETag may be ""). */
    while (k < 9 && (field[k] = strsep(&p, "\n")) != NULL)
        k++;
    memset(f, 0, sizeof *f);
    if (k != 9 || p || strcmp(field[0], "1") != 0 || strlen(field[1]) >= sizeof f->commit ||
        strlen(field[4]) >= sizeof f->sha256 || strlen(field[5]) >= sizeof f->etag ||
        strlen(field[6]) >= sizeof f->linked || strlen(field[7]) >= sizeof f->linked_size)
        return -1;
    char *end;
    long long size = strtoll(field[2], &end, 10);
    if (*end || size < 0 || !*field[1])
        return -1;
    snprintf(f->commit, sizeof f->commit, "%s", field[1]);
    f->size = size;
    f->lfs = strcmp(field[3], "1") == 0;
    snprintf(f->sha256, sizeof f->sha256, "%s", field[4]);
    snprintf(f->etag, sizeof f->etag, "%s", field[5]);
    snprintf(f->linked, sizeof f->linked, "%s", field[6]);
    snprintf(f->linked_size, sizeof f->linked_size, "%s", field[7]);
    f->stored = strcmp(field[8], "1") == 0;
    return f->lfs && !hex_is(f->sha256, 64, 1) ? -1 : 0;
}

int hf_meta_new(uv_loop_t *loop, hf_meta_t **out)
{
    hf_meta_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->loop = loop;
    *out = m;
    return 0;
}

void hf_meta_free(hf_meta_t *m)
{
    free(m);
}

#define SLOT(base, stride, i) ((hf_slot_t *)((char *)(base) + (size_t)(i) * (stride)))

/* How many live entries uid has, and the oldest of them (-1: none). */
static int uid_count(void *base, size_t stride, uid_t uid, uint64_t now, int *oldest)
{
    int count = 0;
    *oldest = -1;
    for (int i = 0; i < HF_SLOTS; i++) {
        hf_slot_t *h = SLOT(base, stride, i);
        if (h->until <= now || h->uid != uid)
            continue;
        count++;
        if (*oldest < 0 || h->until < SLOT(base, stride, *oldest)->until)
            *oldest = i;
    }
    return count;
}

/* Where uid's new entry goes among the HF_SLOTS entries at base (each
 * stride bytes, beginning with an hf_slot_t): its own oldest when it holds
 * HF_PER_UID, else a free or expired entry, else the oldest of the uid
 * holding most when that is at least two more than uid holds; -1: not
 * remembered. 256 x 256 comparisons at most, once per question to the Hub. */
static int slot_pick(void *base, size_t stride, uid_t uid, uint64_t now)
{
    int own_oldest;
    int own = uid_count(base, stride, uid, now, &own_oldest);
    if (own >= HF_PER_UID)
        return own_oldest;
    for (int i = 0; i < HF_SLOTS; i++)
        if (SLOT(base, stride, i)->until <= now)
            return i;
    int best = -1, best_count = own + 1; /* must reach own + 2 */
    for (int i = 0; i < HF_SLOTS; i++) {
        int oldest, n = uid_count(base, stride, SLOT(base, stride, i)->uid, now, &oldest);
        if (n > best_count)
            best = oldest, best_count = n;
    }
    return best;
}

/* The live entry of (uid, tag) whose key (at key_off in each entry) is
 * key, or -1. */
static int slot_find(void *base, size_t stride, size_t key_off, uid_t uid, const char *tag,
                     const char *key, uint64_t now)
{
    for (int i = 0; i < HF_SLOTS; i++) {
        hf_slot_t *h = SLOT(base, stride, i);
        if (h->until > now && h->uid == uid && strcmp(h->tag, tag) == 0 &&
            strcmp((char *)h + key_off, key) == 0)
            return i;
    }
    return -1;
}

/* The entry (uid, tag, key) is written to: its own, else slot_pick's,
 * with its head set; NULL when it is not remembered. */
static hf_slot_t *slot_take(void *base, size_t stride, size_t key_off, uid_t uid, const char *tag,
                            const char *key, uint64_t now, uint64_t ttl)
{
    int i = slot_find(base, stride, key_off, uid, tag, key, now);
    if (i < 0)
        i = slot_pick(base, stride, uid, now);
    if (i < 0)
        return NULL;
    hf_slot_t *h = SLOT(base, stride, i);
    h->uid = uid;
    h->until = now + ttl;
    snprintf(h->tag, sizeof h->tag, "%s", tag);
    return h;
}

const char *hf_meta_rev_lookup(hf_meta_t *m, uid_t uid, const char *tag, const char *key)
{
    int i = slot_find(m->revs, sizeof m->revs[0], offsetof(hf_rev_t, key), uid, tag, key,
                      uv_now(m->loop));
    return i < 0 ? NULL : m->revs[i].commit;
}

void hf_meta_rev_remember(hf_meta_t *m, uid_t uid, const char *tag, const char *key,
                          const char *commit)
{
    if (strlen(commit) != 40 || strlen(key) >= sizeof m->revs[0].key ||
        strlen(tag) >= sizeof m->revs[0].head.tag)
        return;
    hf_rev_t *r = (hf_rev_t *)slot_take(m->revs, sizeof m->revs[0], offsetof(hf_rev_t, key), uid,
                                        tag, key, uv_now(m->loop), HF_REV_TTL_MS);
    if (!r)
        return;
    snprintf(r->key, sizeof r->key, "%s", key);
    memcpy(r->commit, commit, 41);
}

const hf_file_t *hf_meta_known(hf_meta_t *m, uid_t uid, const char *tag, const char *key)
{
    if (!key[0])
        return NULL;
    int i = slot_find(m->known, sizeof m->known[0], offsetof(hf_known_t, key), uid, tag, key,
                      uv_now(m->loop));
    return i < 0 ? NULL : &m->known[i].file;
}

static void known_remember(hf_meta_t *m, uid_t uid, const char *tag, const char *key,
                           const hf_file_t *f)
{
    if (!key[0] || strlen(key) >= sizeof m->known[0].key ||
        strlen(tag) >= sizeof m->known[0].head.tag)
        return;
    hf_known_t *k = (hf_known_t *)slot_take(m->known, sizeof m->known[0], offsetof(hf_known_t, key),
                                            uid, tag, key, uv_now(m->loop), HF_KNOWN_TTL_MS);
    if (!k)
        return;
    snprintf(k->key, sizeof k->key, "%s", key);
    k->file = *f;
}

/* ---- a question ------------------------------------------------------------ */

struct hf_ask {
    hf_meta_t *m;
    char *url;     /* asked of the Hub once the cluster has no record */
    char *hdrs;    /* its header lines */
    void *cluster; /* the cluster's question in flight, or NULL */
    char **cred;   /* the credential lines, to tell the cluster (NULL: not told) */
    size_t ncred;
    int from_cluster; /* the answer is the cluster's record: not told back */
    struct http_client *http;
    hub_req_t *req; /* the request in flight (hub_req.h): the question, then the CDN's byte */
    uid_t uid;      /* whose answer it is */
    char tag[65];
    char *file_key;
    hf_file_t file; /* an LFS file's answer, while its CDN is asked */
    hf_meta_cb cb;
    void *arg;
};

static void ask_free(hf_ask_t *a)
{
    for (size_t i = 0; a->cred && i < a->ncred; i++)
        free(a->cred[i]);
    free(a->cred);
    free(a->url);
    free(a->hdrs);
    free(a->file_key);
    free(a);
}

/* The file's metadata out of the answer: 0, or -1 when it lacks what a
 * client needs (or a value is too long to keep). */
static int file_of(const hub_answer_t *a, hf_file_t *f)
{
    memset(f, 0, sizeof *f);
    const char *commit = a->wanted[HUB_COMMIT];
    f->lfs = a->status >= 300 && a->status < 400;
    const char *lsize = a->wanted[HUB_LINKED_SIZE];
    f->size = f->lfs ? (lsize ? atoll(lsize) : -1)
                     : (a->status == 206 ? hf_range_total(a->content_range) : a->content_length);
    if (!commit || strlen(commit) >= sizeof f->commit || f->size < 0 ||
        (f->lfs && hf_sha256_of_etag(a->wanted[HUB_LINKED_ETAG], f->sha256)))
        return -1;
    snprintf(f->commit, sizeof f->commit, "%s", commit);
    if (snprintf(f->etag, sizeof f->etag, "%s", a->etag ? a->etag : "") >= (int)sizeof f->etag)
        return -1;
    if (f->lfs) {
        snprintf(f->linked, sizeof f->linked, "%s", a->wanted[HUB_LINKED_ETAG]);
        if (snprintf(f->linked_size, sizeof f->linked_size, "%s", lsize) >=
            (int)sizeof f->linked_size)
            return -1;
    }
    return 0;
}

/* The one end of a question: the asker is told, then the handle goes. */
static void finish(hf_ask_t *a, const hf_meta_answer_t *ans)
{
    a->cb(a->arg, ans);
    ask_free(a);
}

/* The file named: remembered for the asker (and, the Hub's own answer to
 * credentials, for the cluster), and told. */
static void named(hf_ask_t *a, const hf_file_t *f)
{
    known_remember(a->m, a->uid, a->tag, a->file_key, f);
    char rec[HF_RECORD_MAX];
    if (a->m->cluster && a->cred && !a->from_cluster && hf_file_pack(f, rec, sizeof rec) == 0)
        a->m->cluster->tell(a->m->cluster_ctx, (const char *const *)a->cred, a->ncred, a->file_key,
                            rec);
    hf_meta_answer_t ans = {.kind = HF_META_FILE, .file = f};
    finish(a, &ans);
}

/* The CDN's answer to the first byte of an LFS file (cdn_ask): the file is
 * stored there for the repo when it answers that byte of an object of the
 * size the Hub named. Anything else (no answer, a 404, another size) names
 * the file all the same, unstored: its digest is still what the download
 * is verified against, but it vouches for nobody. */
static void cdn_answered(void *arg, const char *code, const char *msg, hub_answer_t *h)
{
    hf_ask_t *a = arg;
    (void)msg;
    a->req = NULL;
    int64_t total = !code && h->status == 206   ? hf_range_total(h->content_range)
                    : !code && h->status == 200 ? h->content_length
                                                : -1;
    a->file.stored = total >= 0 && total == a->file.size;
    named(a, &a->file);
}

/* An LFS file vouches for its asker only if the bytes are what the Hub
 * serves from this repo: a pointer committed to repo B that names repo A's
 * digest must not open A's blob, cached for a user of A, to readers of B.
 * The Hub's CDN keeps each repo's objects apart (its paths are the
 * repo's), so one byte of the Location it answered, asked as the client
 * would download it (no credentials go to another origin), says whether
 * this client could have downloaded those bytes itself. 0 while it is
 * asked, else -1 (the file is named unstored at once). */
static int cdn_ask(hf_ask_t *a, const char *location)
{
    hub_req_opts_t o = {.headers = "Range: bytes=0-0\r\n", .keep = HUB_BODY_NONE};
    return hub_req_start(a->http, location, &o, cdn_answered, a, &a->req, NULL) ? -1 : 0;
}

/* The Hub's answer (hub_req.h; its same-origin redirects followed): a
 * redirect elsewhere (an LFS file's CDN), a 200 or a 206 names the file,
 * which is remembered for this credential tag; anything else is a
 * refusal, which names nothing, whatever it carries. */
static void answered(void *arg, const char *code, const char *msg, hub_answer_t *h)
{
    hf_ask_t *a = arg;
    a->req = NULL;
    if (code) {
        hf_meta_answer_t ans = {.kind = HF_META_FAILED, .code = code, .msg = msg};
        finish(a, &ans);
        return;
    }
    int names = (h->status >= 300 && h->status < 400 && h->location) || h->status == 200 ||
                h->status == 206;
    if (!names) {
        hf_meta_answer_t ans = {.kind = HF_META_REFUSED,
                                .status = h->status,
                                .error_code = h->wanted[HUB_ERROR_CODE],
                                .error_message = h->wanted[HUB_ERROR_MESSAGE],
                                .commit = h->wanted[HUB_COMMIT]};
        finish(a, &ans);
        return;
    }
    hf_file_t f;
    if (file_of(h, &f)) {
        hf_meta_answer_t ans = {
            .kind = HF_META_FAILED,
            .code = "http_parse",
            .msg =
                "the Hub's answer has no X-Repo-Commit, size or (for an LFS file) X-Linked-Etag"};
        finish(a, &ans);
        return;
    }
    if (f.lfs) {
        a->file = f;
        if (cdn_ask(a, h->location) == 0)
            return;
        named(a, &a->file); /* not stored: the CDN cannot be asked */
        return;
    }
    named(a, &f);
}

/* The Hub's question, as hf_meta_ask's URL and header lines say: 0 or a
 * negative errno (*why set), and then no callback. */
static int hub_ask(hf_ask_t *a, const char **why)
{
    /* One byte, or a redirect's or an error's text: no body is kept. */
    hub_req_opts_t o = {.headers = a->hdrs,
                        .wanted = hub_wanted,
                        .nwanted = HUB_N,
                        .max_hops = HUB_REQ_MAX_HOPS,
                        .keep = HUB_BODY_NONE};
    return hub_req_start(a->http, a->url, &o, answered, a, &a->req, why);
}

/* A copy of the credential lines, to tell the cluster what the Hub says. */
static int cluster_take(hf_ask_t *a, const char *const *cred, size_t ncred)
{
    a->cred = calloc(ncred, sizeof *a->cred);
    if (!a->cred)
        return -1;
    a->ncred = ncred;
    for (size_t i = 0; i < ncred; i++)
        if (!(a->cred[i] = strdup(cred[i])))
            return -1; /* ask_free frees what was copied */
    return 0;
}

/* The cluster's answer: its record answers as the Hub's would; none (or
 * one that does not read), and the Hub is asked now. */
static void cluster_answered(void *arg, const char *record)
{
    hf_ask_t *a = arg;
    a->cluster = NULL;
    hf_file_t f;
    if (record && hf_file_unpack(record, &f) == 0) {
        a->from_cluster = 1;
        named(a, &f);
        return;
    }
    const char *why = NULL;
    int rc = hub_ask(a, &why);
    if (rc) {
        hf_meta_answer_t ans = {.kind = HF_META_FAILED,
                                .code = rc == -EACCES   ? "forbidden"
                                        : rc == -EINVAL ? "bad_url"
                                                        : "internal",
                                .msg = why ? why : "cannot ask the Hub"};
        finish(a, &ans);
    }
}

int hf_meta_ask(hf_meta_t *m, struct http_client *http, const char *url, uid_t uid, const char *tag,
                const char *file_key, const char *const *cred, size_t ncred, hf_meta_cb cb,
                void *arg, hf_ask_t **out, const char **why)
{
    hf_ask_t *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->m = m;
    a->http = http;
    a->uid = uid;
    a->cb = cb;
    a->arg = arg;
    snprintf(a->tag, sizeof a->tag, "%s", tag);
    a->file_key = strdup(file_key);
    char *hdrs = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&hdrs, &len);
    if (f) {
        fputs("Range: bytes=0-0\r\n", f);
        for (size_t i = 0; i < ncred; i++)
            fprintf(f, "%s\r\n", cred[i]);
        if (fclose(f)) {
            free(hdrs);
            hdrs = NULL;
        }
    }
    a->hdrs = hdrs;
    a->url = strdup(url);
    if (!hdrs || !a->file_key || !a->url) {
        ask_free(a);
        return -ENOMEM;
    }
    int rc = 0;
    /* The cluster is asked first; the Hub if it has no record (a URL the
     * Hub's request refuses then fails the question, rather than here). */
    if (m->cluster && ncred && *file_key && cluster_take(a, cred, ncred) == 0)
        a->cluster = m->cluster->ask(m->cluster_ctx, (const char *const *)a->cred, a->ncred,
                                     file_key, cluster_answered, a);
    if (!rc && !a->cluster)
        rc = hub_ask(a, why);
    if (rc) {
        ask_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void hf_meta_abort(hf_ask_t *a)
{
    if (a->cluster)
        a->m->cluster->cancel(a->m->cluster_ctx, a->cluster);
    hub_req_abort(a->req);
    ask_free(a);
}
