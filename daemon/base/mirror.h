/* mirror: URL prefix rewrites to a site mirror (the `mirror` config key).
 *
 * A rule `PREFIX REPLACEMENT [credentials]` says that a URL starting with
 * PREFIX is fetched from REPLACEMENT followed by the rest of the URL. Both
 * are absolute http(s) URLs, kept in canonical form (url.h), so a rule
 * written `HTTPS://HuggingFace.co:443/` matches the cache key
 * `https://huggingface.co/...`. The cache key stays the original URL: this
 * module only says where the bytes are asked for.
 *
 * Pure functions of their arguments, no I/O: the config parses rules with
 * them, the fetch layer picks and applies one per job. Any thread. */
#ifndef HUBD_MIRROR_H
#define HUBD_MIRROR_H

#include <stddef.h>

#define MIRROR_MAX_RULES 32 /* rules a config may hold */

typedef struct mirror_rule {
    char *prefix;      /* canonical URL prefix a key must start with (malloc'd) */
    char *replacement; /* canonical URL the rest is appended to (malloc'd) */
    int credentials;   /* the client's request headers may go to the mirror */
} mirror_rule_t;

/* Parses "PREFIX REPLACEMENT [credentials]" (words separated by blanks).
 * Returns 0 with *out filled (mirror_rule_free it), or -EINVAL with a
 * static reason in *why, or -ENOMEM. */
int mirror_rule_parse(const char *text, mirror_rule_t *out, const char **why);

void mirror_rule_free(mirror_rule_t *r);

/* Writes the rule as mirror_rule_parse reads it (for --check-config).
 * Returns what snprintf returns. */
int mirror_rule_format(const mirror_rule_t *r, char *buf, size_t cap);

/* The rule for url (canonical), or NULL: of those whose prefix it starts
 * with, the one with the longest prefix (the first of equals). */
const mirror_rule_t *mirror_match(const mirror_rule_t *rules, size_t n, const char *url);

/* The URL to ask the mirror for: r's replacement + what follows its prefix
 * in url (which must start with it). Returns 0 with *out malloc'd, or
 * -ENOMEM. */
int mirror_rewrite(const mirror_rule_t *r, const char *url, char **out);

#endif
