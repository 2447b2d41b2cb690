/* mirror: the rule syntax and the prefix rewrite (see mirror.h). */
#include "mirror.h"
#include "url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next blank-separated word of *p: its start and length, *p after it. */
static size_t next_word(const char **p, const char **start)
{
    const char *s = *p + strspn(*p, " \t");
    size_t n = strcspn(s, " \t");
    *start = s;
    *p = s + n;
    return n;
}

/* A word as a canonical http(s) URL, malloc'd in *out. */
static int canonical_of(const char *w, size_t n, char **out, const char **why)
{
    char *text = strndup(w, n);
    if (!text)
        return -ENOMEM;
    url_t u;
    int rc = url_parse(text, &u, why);
    free(text);
    if (rc)
        return -EINVAL;
    *out = strdup(u.canonical);
    url_free(&u);
    return *out ? 0 : -ENOMEM;
}

int mirror_rule_parse(const char *text, mirror_rule_t *out, const char **why)
{
    const char *p = text, *w[4];
    size_t n[4];
    int words = 0;
    memset(out, 0, sizeof *out);
    while (words < 4 && (n[words] = next_word(&p, &w[words])) > 0)
        words++;
    if (words < 2 || words > 3) {
        *why = "a rule is PREFIX REPLACEMENT [credentials]";
        return -EINVAL;
    }
    if (words == 3) {
        if (n[2] != strlen("credentials") || strncmp(w[2], "credentials", n[2]) != 0) {
            *why = "the third word of a rule can only be 'credentials'";
            return -EINVAL;
        }
        out->credentials = 1;
    }
    const char *reason = NULL;
    int rc = canonical_of(w[0], n[0], &out->prefix, &reason);
    if (!rc)
        rc = canonical_of(w[1], n[1], &out->replacement, &reason);
    if (rc) {
        *why = rc == -ENOMEM ? "out of memory" : "PREFIX and REPLACEMENT must be http(s) URLs";
        mirror_rule_free(out);
        return rc;
    }
    return 0;
}

void mirror_rule_free(mirror_rule_t *r)
{
    free(r->prefix);
    free(r->replacement);
    r->prefix = r->replacement = NULL;
    r->credentials = 0;
}

int mirror_rule_format(const mirror_rule_t *r, char *buf, size_t cap)
{
    return snprintf(buf, cap, "%s %s%s", r->prefix, r->replacement,
                    r->credentials ? " credentials" : "");
}

const mirror_rule_t *mirror_match(const mirror_rule_t *rules, size_t n, const char *url)
{
    const mirror_rule_t *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(rules[i].prefix);
        if (len > best_len && strncmp(url, rules[i].prefix, len) == 0) {
            best = &rules[i];
            best_len = len;
        }
    }
    return best;
}

int mirror_rewrite(const mirror_rule_t *r, const char *url, char **out)
{
    const char *rest = url + strlen(r->prefix);
    size_t a = strlen(r->replacement), b = strlen(rest);
    char *s = malloc(a + b + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, r->replacement, a);
    memcpy(s + a, rest, b + 1);
    *out = s;
    return 0;
}
