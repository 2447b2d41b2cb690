/* hf_repo: HFREPO's pure parts (hf_repo.h). */
#include "hf_repo.h"
#include "proto.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

static int id_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.';
}

/* One part of a repo id: n bytes of s. */
static int part_ok(const char *s, size_t n)
{
    if (n == 0 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!id_char(s[i]))
            return 0;
        if (i && (s[i] == '-' || s[i] == '.') && s[i - 1] == s[i])
            return 0; /* "--" or ".." */
    }
    return 1;
}

int hf_repo_id_ok(const char *repo)
{
    size_t n = strlen(repo);
    if (n == 0 || n > HF_REPO_ID_MAX)
        return 0;
    const char *slash = strchr(repo, '/');
    if (!slash)
        return part_ok(repo, n);
    return part_ok(repo, (size_t)(slash - repo)) && part_ok(slash + 1, strlen(slash + 1));
}

const char *hf_repo_prefix(const char *type)
{
    if (strcmp(type, "model") == 0)
        return "";
    if (strcmp(type, "dataset") == 0)
        return "datasets/";
    if (strcmp(type, "space") == 0)
        return "spaces/";
    return NULL;
}

char *hf_repo_api_url(const char *upstream, const char *type, const char *repo, const char *rev)
{
    size_t n = strlen(rev);
    char *enc = malloc(3 * n + 1);
    if (!enc)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)rev[i];
        if (id_char((char)ch) || ch == '~')
            enc[k++] = (char)ch;
        else
            k += (size_t)sprintf(enc + k, "%%%02X", ch);
    }
    enc[k] = '\0';
    char *out = NULL;
    if (asprintf(&out, "%s/api/%ss/%s/revision/%s?blobs=true", upstream, type, repo, enc) < 0)
        out = NULL;
    free(enc);
    return out;
}

/* ---- the Hub's answer, read as a stream ---------------------------------------
 *
 * The answer is read by yajl's callback parser, never made into a tree: a
 * tree costs what its nodes cost (jansson spent ~210 bytes on each `{}` of
 * a lying answer's siblings, 1.25 GB for 16 MiB of them), and the listing
 * needs only a few members at known places. A small state machine follows
 * those places (at_t); the value of any other key, whatever it holds, is
 * skipped with a depth counter. Each sibling's line is written when its
 * object closes, so a sibling the listing cannot use stops the parse
 * there. What stays in memory is one sibling's fields, the parser's own
 * state and its copy of the current string when it had escapes.
 *
 * As jansson's tree did, the last of two equal keys counts; a sibling's
 * keys, and the root's, may come in any order ("sha" after "siblings":
 * the lines are written, and the answer is refused at its end if no
 * commit came). */

/* Why an answer is not a listing (hf_listing_t.error). */
static const char ERR_NOT_JSON[] = "the Hub's answer is not JSON";
static const char ERR_NO_SHA[] = "the Hub's answer has no sha (40 hex digits) or no siblings";
static const char ERR_SIBLING[] = "a file of the Hub's answer has no rfilename, blobId or size";
static const char ERR_PATH_LONG[] = "a file's path is too long for a protocol line";
static const char ERR_TWO_LISTS[] = "the Hub's answer has two siblings lists";

/* Nesting read at most: jansson's bound, which the listing had; deeper is
 * not JSON here either. It keeps yajl's own stack (a byte a level) small. */
#define LISTING_MAX_DEPTH 2048

/* Where the next event of the parser lands. */
typedef enum {
    AT_TOP,      /* the root value to come */
    AT_ROOT,     /* in the root object: a key, or its end */
    AT_SHA,      /* root.sha's value */
    AT_ID,       /* root.id's value */
    AT_SIBLINGS, /* root.siblings' value */
    AT_LIST,     /* in siblings: a sibling, or the array's end */
    AT_SIB,      /* in a sibling: a key, or its end */
    AT_PATH,     /* sibling.rfilename's value */
    AT_BLOB,     /* sibling.blobId's value */
    AT_SIZE,     /* sibling.size's value */
    AT_LFS,      /* sibling.lfs's value */
    AT_LFS_OBJ,  /* in sibling.lfs: a key, or its end */
    AT_LFS_SHA,  /* lfs.sha256's value */
    AT_LFS_SIZE, /* lfs.size's value */
    AT_IGNORE,   /* the value of a key not read */
    AT_SKIP,     /* inside a value not read: skip counts its open containers */
    AT_DONE,     /* after the root */
} at_t;

/* The members read, by the object they are in (one row each); any other
 * key's value is skipped. */
static const struct member {
    at_t in;         /* the object */
    const char *key; /* the member's key */
    at_t value;      /* where its value lands */
} members[] = {
    {AT_ROOT, "sha", AT_SHA},           /* the commit the listing is of */
    {AT_ROOT, "id", AT_ID},             /* a renamed repo's new id */
    {AT_ROOT, "siblings", AT_SIBLINGS}, /* the files */
    {AT_SIB, "rfilename", AT_PATH},     /* the file's path in the repo */
    {AT_SIB, "blobId", AT_BLOB},        /* its git blob */
    {AT_SIB, "size", AT_SIZE},          /* its bytes */
    {AT_SIB, "lfs", AT_LFS},            /* an LFS file's object */
    {AT_LFS_OBJ, "sha256", AT_LFS_SHA}, /* its content's SHA-256 */
    {AT_LFS_OBJ, "size", AT_LFS_SIZE},  /* its bytes, when the sibling has no size */
};

/* A "size": absent, or present and a non-negative integer or not. */
typedef struct size_field {
    int present;    /* the key came (its last value counts) */
    int ok;         /* that value is an integer in [0, INT64_MAX] */
    uint64_t value; /* when ok */
} size_field_t;

/* A sibling's rfilename. */
typedef enum {
    PATH_NONE, /* absent, or not a string of 1 byte or more without a NUL */
    PATH_OK,   /* in path_text */
    PATH_LONG, /* longer than a protocol line holds */
} path_state_t;

/* A sibling's lfs.sha256. */
typedef enum {
    SHA_NONE, /* absent, or not a string: the line has no sha256= */
    SHA_OK,   /* 64 lowercase hex digits, in sha */
    SHA_BAD,  /* a string that is not */
} sha_state_t;

/* One sibling, as its members come; zeroed up to path_text for each. */
typedef struct sibling {
    path_state_t path;              /* rfilename */
    int blob_ok;                    /* blobId is 40 lowercase hex digits, in blob */
    char blob[41];                  /* NUL-terminated when blob_ok */
    size_field_t size;              /* sibling.size */
    int lfs_obj;                    /* the last "lfs" is an object */
    size_field_t lfs_size;          /* lfs.size */
    sha_state_t sha256;             /* lfs.sha256 */
    char sha[65];                   /* NUL-terminated when SHA_OK */
    char path_text[PROTO_MAX_LINE]; /* NUL-terminated when PATH_OK */
} sibling_t;

/* The parse's state, malloc'd: a sibling's path may be 16 KiB, too much
 * for a pool thread's stack. Zeroed up to sib when the parse begins. */
typedef struct listing_parse {
    at_t at;           /* where the next event lands */
    at_t back;         /* where a value read or skipped returns to: its object */
    size_t skip;       /* AT_SKIP: its containers still open */
    size_t depth;      /* containers open, all told */
    int sha_ok;        /* the last "sha" is 40 hex digits, in out->commit */
    int list_ok;       /* the last "siblings" is an array */
    int lists;         /* siblings arrays read */
    const char *error; /* why the parse was stopped (static), or NULL */
    int rc;            /* 0, or how writing a line failed (a negative errno) */
    FILE *f;           /* where the lines go */
    hf_listing_t *out; /* the answer's commit, id and counts */
    sibling_t sib;     /* the sibling being read */
} listing_parse_t;

/* 1 when the n bytes of s are len lowercase hex digits. */
static int hex_ok(const unsigned char *s, size_t n, size_t len)
{
    if (n != len)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* A JSON number's text (yajl's, well-formed) as a non-negative integer
 * that jansson's json_int_t holds, as the tree parser read a size: no
 * fraction, no exponent, "-0" is 0. */
static int size_of(const char *s, size_t n, uint64_t *out)
{
    size_t i = n && s[0] == '-';
    uint64_t v = 0;
    if (i == n)
        return 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (s[0] == '-' && v)
        return 0;
    *out = v;
    return 1;
}

/* The parse stops with why. */
static int stop(listing_parse_t *p, const char *why)
{
    p->error = why;
    return 0;
}

/* A container opens: one more level, within the bound. */
static int deeper(listing_parse_t *p)
{
    return ++p->depth > LISTING_MAX_DEPTH ? stop(p, ERR_NOT_JSON) : 1;
}

/* A closed sibling: its line, or why the answer is not a listing. The
 * checks are the tree parser's, in its order. */
static int sibling_end(listing_parse_t *p)
{
    sibling_t *b = &p->sib;
    const size_field_t *size = b->size.present ? &b->size : b->lfs_obj ? &b->lfs_size : NULL;
    if (b->path == PATH_NONE || !b->blob_ok || !size || !size->present || !size->ok ||
        b->sha256 == SHA_BAD)
        return stop(p, ERR_SIBLING);
    if (b->path == PATH_LONG)
        return stop(p, ERR_PATH_LONG);
    char buf[PROTO_MAX_LINE];
    proto_writer_t w;
    proto_begin(&w, buf, sizeof buf, "");
    proto_add(&w, "path", b->path_text);
    proto_add_u64(&w, "size", size->value);
    proto_add(&w, "blob", b->blob);
    if (b->sha256 == SHA_OK)
        proto_add(&w, "sha256", b->sha);
    int len = proto_end(&w);
    if (len < 2)
        return stop(p, ERR_PATH_LONG);
    /* proto_begin's verb is empty: the line starts with the first field's space. */
    errno = 0;
    if (fwrite(buf + 1, 1, (size_t)len - 1, p->f) != (size_t)len - 1) {
        p->rc = errno ? -errno : -ENOMEM;
        return 0;
    }
    p->out->files++;
    p->out->size += size->value;
    p->out->bytes += (size_t)len - 1;
    return 1;
}

/* A size member's value. */
static void size_value(size_field_t *sz, int is_number, const char *s, size_t n)
{
    sz->present = 1;
    sz->ok = is_number && size_of(s, n, &sz->value);
}

typedef enum { V_STRING, V_NUMBER, V_OTHER, V_MAP, V_ARRAY } vkind_t;

/* A value (a scalar's whole text, or a container's opening) lands where
 * p->at says. A scalar goes back to its object; a container that is read
 * opens its own state; any other is skipped whole. */
static int on_value(listing_parse_t *p, vkind_t k, const unsigned char *s, size_t n)
{
    int open = k == V_MAP || k == V_ARRAY;
    if (open && !deeper(p))
        return 0;
    at_t at = p->at;
    if (at == AT_SKIP) {
        p->skip += open;
        return 1;
    }
    sibling_t *b = &p->sib;
    p->at = p->back;
    switch (at) {
    case AT_TOP:
        if (k == V_MAP) {
            p->at = AT_ROOT;
            return 1;
        }
        /* an array is JSON without a sha (refused at the end); jansson took
         * no other root */
        p->back = AT_DONE;
        if (k != V_ARRAY)
            return stop(p, ERR_NOT_JSON);
        break;
    case AT_SHA:
        p->sha_ok = k == V_STRING && hex_ok(s, n, 40);
        if (p->sha_ok) {
            memcpy(p->out->commit, s, 40);
            p->out->commit[40] = '\0';
        }
        break;
    case AT_ID:
        p->out->id[0] = '\0';
        if (k == V_STRING && n < sizeof p->out->id && !memchr(s, '\0', n)) {
            memcpy(p->out->id, s, n);
            p->out->id[n] = '\0';
            if (!hf_repo_id_ok(p->out->id))
                p->out->id[0] = '\0';
        }
        break;
    case AT_SIBLINGS:
        p->list_ok = k == V_ARRAY;
        if (!p->list_ok)
            break;
        /* a second list would need the first one's lines taken back */
        if (p->lists++)
            return stop(p, ERR_TWO_LISTS);
        p->at = AT_LIST;
        return 1;
    case AT_LIST:
        if (k != V_MAP)
            return stop(p, ERR_SIBLING);
        memset(b, 0, offsetof(sibling_t, path_text)); /* PATH_NONE, SHA_NONE */
        p->at = AT_SIB;
        return 1;
    case AT_PATH:
        b->path = PATH_NONE;
        if (k == V_STRING && n && !memchr(s, '\0', n)) {
            b->path = n < sizeof b->path_text ? PATH_OK : PATH_LONG;
            if (b->path == PATH_OK) {
                memcpy(b->path_text, s, n);
                b->path_text[n] = '\0';
            }
        }
        break;
    case AT_BLOB:
        b->blob_ok = k == V_STRING && hex_ok(s, n, 40);
        if (b->blob_ok) {
            memcpy(b->blob, s, 40);
            b->blob[40] = '\0';
        }
        break;
    case AT_SIZE:
        size_value(&b->size, k == V_NUMBER, (const char *)s, n);
        break;
    case AT_LFS:
        b->lfs_obj = k == V_MAP;
        b->lfs_size = (size_field_t){0};
        b->sha256 = SHA_NONE;
        if (b->lfs_obj) {
            p->at = AT_LFS_OBJ;
            return 1;
        }
        break;
    case AT_LFS_SHA:
        b->sha256 = k != V_STRING ? SHA_NONE : hex_ok(s, n, 64) ? SHA_OK : SHA_BAD;
        if (b->sha256 == SHA_OK) {
            memcpy(b->sha, s, 64);
            b->sha[64] = '\0';
        }
        break;
    case AT_LFS_SIZE:
        size_value(&b->lfs_size, k == V_NUMBER, (const char *)s, n);
        break;
    default: /* AT_IGNORE; no value comes where a key or an end must */
        break;
    }
    if (open) { /* a container where a scalar is read, or a key not read */
        p->skip = 1;
        p->at = AT_SKIP;
    }
    return 1;
}

/* A container closes: the one p->at is in. */
static int on_end(listing_parse_t *p)
{
    p->depth--;
    switch (p->at) {
    case AT_SKIP:
        if (--p->skip == 0)
            p->at = p->back;
        return 1;
    case AT_ROOT:
        p->at = AT_DONE;
        return 1;
    case AT_LIST: /* the siblings array */
        p->at = p->back = AT_ROOT;
        return 1;
    case AT_SIB:
        p->at = AT_LIST;
        return sibling_end(p);
    case AT_LFS_OBJ:
        p->at = p->back = AT_SIB;
        return 1;
    default: /* the parser matches ends with opens */
        return 1;
    }
}

/* A key of the object p->at is in: where its value lands. */
static int on_key(void *ctx, const unsigned char *key, size_t n)
{
    listing_parse_t *p = ctx;
    if (p->at == AT_SKIP)
        return 1;
    p->back = p->at;
    p->at = AT_IGNORE;
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
        if (members[i].in == p->back && strlen(members[i].key) == n &&
            memcmp(members[i].key, key, n) == 0)
            p->at = members[i].value;
    return 1;
}

static int on_null(void *ctx)
{
    return on_value(ctx, V_OTHER, NULL, 0);
}

static int on_bool(void *ctx, int v)
{
    (void)v;
    return on_value(ctx, V_OTHER, NULL, 0);
}

static int on_number(void *ctx, const char *s, size_t n)
{
    return on_value(ctx, V_NUMBER, (const unsigned char *)s, n);
}

static int on_string(void *ctx, const unsigned char *s, size_t n)
{
    return on_value(ctx, V_STRING, s, n);
}

static int on_map(void *ctx)
{
    return on_value(ctx, V_MAP, NULL, 0);
}

static int on_array(void *ctx)
{
    return on_value(ctx, V_ARRAY, NULL, 0);
}

static int on_close(void *ctx)
{
    return on_end(ctx);
}

/* Numbers come as their text (yajl_number): a size is checked as text,
 * never rounded through a double. */
static const yajl_callbacks listing_cbs = {
    .yajl_null = on_null,
    .yajl_boolean = on_bool,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_close,
    .yajl_start_array = on_array,
    .yajl_end_array = on_close,
};

int hf_repo_listing_to(const char *json, size_t n, FILE *f, hf_listing_t *out)
{
    memset(out, 0, sizeof *out);
    listing_parse_t *p = malloc(sizeof *p);
    if (!p)
        return -ENOMEM;
    memset(p, 0, offsetof(listing_parse_t, sib));
    p->at = AT_TOP;
    p->back = AT_DONE;
    p->f = f;
    p->out = out;
    yajl_handle h = yajl_alloc(&listing_cbs, NULL, p);
    if (!h) {
        free(p);
        return -ENOMEM;
    }
    yajl_status st = yajl_parse(h, (const unsigned char *)(json ? json : ""), n);
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    yajl_free(h);
    int rc = p->rc;
    if (!rc && st != yajl_status_ok)
        out->error = p->error ? p->error : ERR_NOT_JSON;
    else if (!rc && (!p->sha_ok || !p->list_ok))
        out->error = ERR_NO_SHA;
    free(p);
    errno = 0;
    if (!rc && !out->error && fflush(f))
        rc = errno ? -errno : -ENOMEM;
    return rc ? rc : out->error ? -EINVAL : 0;
}

int hf_repo_listing(const char *json, size_t n, hf_listing_t *out)
{
    char *lines = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&lines, &len);
    if (!f) {
        memset(out, 0, sizeof *out);
        return -ENOMEM;
    }
    int rc = hf_repo_listing_to(json, n, f, out);
    if (fclose(f) && !rc)
        rc = -ENOMEM;
    if (rc) {
        free(lines);
        return rc;
    }
    out->lines = lines;
    out->lines_len = len;
    return 0;
}

void hf_listing_free(hf_listing_t *l)
{
    free(l->lines);
    l->lines = NULL;
    l->lines_len = 0;
}
