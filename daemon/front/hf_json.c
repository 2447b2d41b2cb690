/* hf_json: the Hub's API answers made fit to pass the front (see
 * hf_json.h). */
#include "hf_json.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t hf_strip_xet(json_t *v)
{
    size_t removed = 0;
    if (json_is_object(v)) {
        removed += json_object_del(v, "xetHash") == 0;
        removed += json_object_del(v, "xetEnabled") == 0;
        const char *key;
        json_t *member;
        json_object_foreach(v, key, member) removed += hf_strip_xet(member);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) removed += hf_strip_xet(item);
    }
    return removed;
}

int hf_json_filter(const char *in, size_t n, char **out, size_t *out_len)
{
    json_error_t err;
    /* Any value (the tree is an array), NUL in strings allowed so that a
     * valid answer is never taken for an error page. */
    json_t *v = json_loadb(in, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!v)
        return 1;
    hf_strip_xet(v);
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
    size_t need = json_dumpb(v, NULL, 0, flags);
    char *text = need ? malloc(need) : NULL;
    if (!text || json_dumpb(v, text, need, flags) != need) {
        free(text);
        json_decref(v);
        return -ENOMEM;
    }
    json_decref(v);
    *out = text;
    *out_len = need;
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
