/* hf_json: the Hub's API answers made fit to pass the front (see
 * hf_json.h). */
#include "hf_json.h"
#include "url.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

/* ---- the filter ---------------------------------------------------------------
 *
 * yajl's parser calls back with each event; each goes to yajl_gen, which
 * writes it again, unless it is within a member dropped. The members
 * dropped are counted with a depth (drop), nothing of them is kept. */

_Static_assert(HF_JSON_MAX_DEPTH < YAJL_MAX_DEPTH, "yajl_gen refuses YAJL_MAX_DEPTH levels");

typedef struct filter {
    yajl_gen g;    /* writes through print_out into out */
    char *out;     /* the output, cap bytes allocated */
    size_t len;    /* of it written */
    size_t cap;    /* the bound the output keeps (hf_json.h: the input's length) */
    int overflow;  /* the output would have passed cap (it cannot): the filter fails */
    int drop_next; /* a dropped key came: its value is not written */
    size_t drop;   /* > 0: within a dropped value, its containers still open */
    size_t depth;  /* containers open in the output */
    int too_deep;  /* a container would pass HF_JSON_MAX_DEPTH: nothing more is written */
    int gen_error; /* yajl_gen refused an event (it cannot: they come from a parser) */
} filter_t;

/* yajl_gen's output: appended to out, within cap. The allocation is made
 * once, of cap bytes: only the pages written are touched. */
static void print_out(void *ctx, const char *s, size_t n)
{
    filter_t *f = ctx;
    if (f->overflow || n > f->cap - f->len) {
        f->overflow = 1;
        return;
    }
    memcpy(f->out + f->len, s, n);
    f->len += n;
}

/* Whether an event is written: not within a dropped member, and not past
 * the depth yajl_gen writes. A scalar ends a dropped member's value. */
static int writes(filter_t *f)
{
    if (f->drop_next) {
        f->drop_next = 0;
        return 0;
    }
    return !f->drop && !f->too_deep;
}

static int gen_ok(filter_t *f, yajl_gen_status st)
{
    f->gen_error |= st != yajl_gen_status_ok;
    return !f->gen_error && !f->overflow;
}

static int f_null(void *ctx)
{
    filter_t *f = ctx;
    return !writes(f) || gen_ok(f, yajl_gen_null(f->g));
}

static int f_bool(void *ctx, int v)
{
    filter_t *f = ctx;
    return !writes(f) || gen_ok(f, yajl_gen_bool(f->g, v));
}

static int f_number(void *ctx, const char *s, size_t n)
{
    filter_t *f = ctx;
    return !writes(f) || gen_ok(f, yajl_gen_number(f->g, s, n));
}

static int f_string(void *ctx, const unsigned char *s, size_t n)
{
    filter_t *f = ctx;
    return !writes(f) || gen_ok(f, yajl_gen_string(f->g, s, n));
}

static int is_xet_key(const unsigned char *k, size_t n)
{
    return (n == 7 && memcmp(k, "xetHash", 7) == 0) ||
           (n == 10 && memcmp(k, "xetEnabled", 10) == 0);
}

static int f_key(void *ctx, const unsigned char *k, size_t n)
{
    filter_t *f = ctx;
    if (f->drop || f->too_deep)
        return 1;
    if (is_xet_key(k, n)) {
        f->drop_next = 1;
        return 1;
    }
    return gen_ok(f, yajl_gen_string(f->g, k, n));
}

/* A container opens: within a dropped value, one more level of it; a
 * dropped member's value, the first; else written, within the depth. */
static int f_open(filter_t *f, int map)
{
    if (f->drop) {
        f->drop++;
        return 1;
    }
    if (f->drop_next) {
        f->drop_next = 0;
        f->drop = 1;
        return 1;
    }
    if (f->too_deep)
        return 1;
    if (f->depth == HF_JSON_MAX_DEPTH) {
        f->too_deep = 1; /* the parse goes on: JSON or not decides what the answer is */
        return 1;
    }
    f->depth++;
    return gen_ok(f, map ? yajl_gen_map_open(f->g) : yajl_gen_array_open(f->g));
}

static int f_close(filter_t *f, int map)
{
    if (f->drop) {
        f->drop--;
        return 1;
    }
    if (f->too_deep)
        return 1;
    f->depth--;
    return gen_ok(f, map ? yajl_gen_map_close(f->g) : yajl_gen_array_close(f->g));
}

static int f_map_open(void *ctx)
{
    return f_open(ctx, 1);
}

static int f_map_close(void *ctx)
{
    return f_close(ctx, 1);
}

static int f_array_open(void *ctx)
{
    return f_open(ctx, 0);
}

static int f_array_close(void *ctx)
{
    return f_close(ctx, 0);
}

/* Numbers as their text (yajl_number): never rounded through a double. */
static const yajl_callbacks filter_cbs = {
    .yajl_null = f_null,
    .yajl_boolean = f_bool,
    .yajl_number = f_number,
    .yajl_string = f_string,
    .yajl_start_map = f_map_open,
    .yajl_map_key = f_key,
    .yajl_end_map = f_map_close,
    .yajl_start_array = f_array_open,
    .yajl_end_array = f_array_close,
};

int hf_json_filter(const char *in, size_t n, char **out, size_t *out_len)
{
    return hf_json_filter_at(in, n, 0, out, out_len);
}

int hf_json_filter_at(const char *in, size_t n, size_t room, char **out, size_t *out_len)
{
    if (n == 0)
        return 1; /* not JSON */
    if (room > SIZE_MAX - n)
        return -ENOMEM;
    char *buf = malloc(room + n);
    filter_t f = {.cap = n, .out = buf ? buf + room : NULL};
    yajl_gen g = f.out ? yajl_gen_alloc(NULL) : NULL;
    yajl_handle h = g ? yajl_alloc(&filter_cbs, NULL, &f) : NULL;
    if (!h) {
        if (g)
            yajl_gen_free(g);
        free(buf);
        return -ENOMEM;
    }
    f.g = g;
    yajl_gen_config(g, yajl_gen_print_callback, print_out, &f);
    /* Bytes that are not UTF-8 in a string do not make the answer "not
     * JSON" (it would pass unfiltered): they pass as they are. */
    yajl_config(h, yajl_dont_validate_strings, 1);
    yajl_status st = yajl_parse(h, (const unsigned char *)in, n);
    if (st == yajl_status_ok)
        st = yajl_complete_parse(h);
    yajl_free(h);
    yajl_gen_free(g);
    int rc = f.gen_error || f.overflow           ? -ENOMEM /* neither can be: see hf_json.h */
             : st == yajl_status_client_canceled ? -ENOMEM
             : st != yajl_status_ok              ? 1
             : f.too_deep                        ? HF_JSON_TOO_DEEP
                                                 : 0;
    if (rc) {
        free(buf);
        return rc;
    }
    char *shrunk = realloc(buf, room + f.len); /* its unused tail goes back */
    *out = shrunk ? shrunk : buf;
    *out_len = f.len;
    return 0;
}

/* Where upstream's origin ends ("https://host:port"), for a path-only URL. */
static size_t origin_len(const char *upstream)
{
    const char *s = strstr(upstream, "://");
    const char *slash = s ? strchr(s + 3, '/') : NULL;
    return slash ? (size_t)(slash - upstream) : strlen(upstream);
}

int hf_url_rewrite(const char *url, size_t n, const char *upstream, const char *front, char **out)
{
    *out = NULL;
    char *abs = NULL;
    int len = n && url[0] == '/' && !(n > 1 && url[1] == '/')
                  ? asprintf(&abs, "%.*s%.*s", (int)origin_len(upstream), upstream, (int)n, url)
                  : asprintf(&abs, "%.*s", (int)n, url);
    if (len < 0)
        return -ENOMEM;
    url_t u;
    int parsed = url_parse(abs, &u, NULL) == 0;
    free(abs);
    if (!parsed)
        return 0; /* not a URL: not the Hub's */
    size_t ul = strlen(upstream);
    int rc = 0;
    if (strncmp(u.canonical, upstream, ul) == 0 && u.canonical[ul] == '/' &&
        asprintf(out, "%s%s", front, u.canonical + ul) < 0) {
        *out = NULL;
        rc = -ENOMEM;
    }
    url_free(&u);
    return rc;
}

/* Whether a link's parameters name a xet relation (rel="xet-auth"...). */
static int rel_is_xet(const char *params, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++) {
        if (strncasecmp(params + i, "rel=", 4) != 0)
            continue;
        for (size_t j = i + 4; j + 3 <= n && params[j] != ';'; j++)
            if (strncasecmp(params + j, "xet", 3) == 0)
                return 1;
    }
    return 0;
}

int hf_link_rewrite(const char *link, const char *upstream, const char *front, char **out)
{
    *out = NULL;
    char *acc = NULL;
    size_t acc_len = 0;
    FILE *f = open_memstream(&acc, &acc_len);
    if (!f)
        return -ENOMEM;
    int first = 1, rc = 0;
    const char *p = link;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (*p != '<')
            break; /* the end, or not a link: the rest is dropped */
        const char *gt = strchr(p, '>');
        if (!gt)
            break;
        const char *url = p + 1, *params = gt + 1, *end = params;
        int quoted = 0;
        for (; *end && (quoted || *end != ','); end++)
            if (*end == '"')
                quoted = !quoted;
        p = end;
        size_t plen = (size_t)(end - params);
        while (plen && (params[plen - 1] == ' ' || params[plen - 1] == '\t'))
            plen--;
        if (rel_is_xet(params, plen))
            continue;
        char *mine = NULL;
        if (hf_url_rewrite(url, (size_t)(gt - url), upstream, front, &mine)) {
            rc = -ENOMEM;
            break;
        }
        if (!mine)
            continue; /* not the Hub's: a client would leave the front */
        fprintf(f, "%s<%s>%.*s", first ? "" : ", ", mine, (int)plen, params);
        first = 0;
        free(mine);
    }
    if (fclose(f) || rc) {
        free(acc);
        return rc ? rc : -ENOMEM;
    }
    if (first) {
        free(acc);
        return 0;
    }
    *out = acc;
    return 0;
}
