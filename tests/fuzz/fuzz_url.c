/* fuzz_url: URL parsing, the canonical form (the cache key) and redirect
 * resolution (daemon/base/url.c).
 *
 * The input is "BASE\nREF" (no newline: REF is empty). Checks:
 * - url_parse(BASE) either fails with a reason, or gives http(s), a
 *   lower-case host, a target starting with '/', and a canonical form that
 *   parses again to the very same parts and canonical form (idempotent);
 * - url_resolve(BASE, REF): a result that parses has an idempotent canonical
 *   form too; when REF is itself an absolute URL that parses, the result
 *   parses to REF's canonical form (RFC 3986 5.2.2 with R.scheme defined).
 */
#include "url.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static int same_url(const url_t *a, const url_t *b)
{
    return strcmp(a->scheme, b->scheme) == 0 && strcmp(a->host, b->host) == 0 &&
           a->port == b->port && a->ipv6 == b->ipv6 && strcmp(a->target, b->target) == 0 &&
           strcmp(a->canonical, b->canonical) == 0;
}

/* Parses text; on success checks the parts and that the canonical form is a
 * fixed point. Returns url_parse's result; *u is to be freed on 0. */
static int parse_checked(const char *text, url_t *u)
{
    const char *why = NULL;
    int rc = url_parse(text, u, &why);
    if (rc) {
        CHECK(rc == -EINVAL || rc == -EPROTONOSUPPORT || rc == -ENOMEM);
        CHECK(rc == -ENOMEM || (why && *why));
        return rc;
    }
    CHECK(strcmp(u->scheme, "http") == 0 || strcmp(u->scheme, "https") == 0);
    CHECK(u->host[0] && u->port != 0 && u->target[0] == '/');
    for (const char *h = u->host; *h; h++)
        CHECK(!(*h >= 'A' && *h <= 'Z'));
    CHECK(strchr(u->target, '#') == NULL);
    CHECK(strncmp(u->canonical, u->scheme, strlen(u->scheme)) == 0);
    CHECK(url_same_origin(u, u));
    char hp[300];
    CHECK(url_hostport(u, hp, sizeof hp) > 0);

    url_t again;
    CHECK(url_parse(u->canonical, &again, &why) == 0);
    CHECK(same_url(u, &again));
    url_free(&again);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len > 3 * URL_MAX_LEN) /* longer inputs only test the length check */
        return 0;
    const uint8_t *nl = memchr(data, '\n', len);
    size_t bl = nl ? (size_t)(nl - data) : len;
    char *base = strndup((const char *)data, bl);
    char *ref = nl ? strndup((const char *)nl + 1, len - bl - 1) : strdup("");
    CHECK(base && ref);

    url_t u;
    if (parse_checked(base, &u) == 0) {
        char *out = NULL;
        int rc = url_resolve(&u, ref, &out);
        if (rc == 0) {
            url_t r;
            CHECK(out);
            if (parse_checked(out, &r) == 0)
                url_free(&r);
            free(out);
        } else {
            CHECK(rc == -EINVAL || rc == -ENOMEM);
        }
        /* An absolute reference that parses resolves to itself. */
        url_t abs;
        if (ref[0] && parse_checked(ref, &abs) == 0) {
            out = NULL;
            CHECK(url_resolve(&u, ref, &out) == 0);
            url_t r;
            CHECK(url_parse(out, &r, NULL) == 0);
            CHECK(strcmp(r.canonical, abs.canonical) == 0);
            url_free(&r);
            free(out);
            url_free(&abs);
        }
        url_free(&u);
    }
    free(base);
    free(ref);
    return 0;
}
