/* cred: validation of client headers, and the HMAC credential tag. */
#include "cred.h"

#include <errno.h>
#include <fcntl.h>
#include <mbedtls/md.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

int cred_secret_load(const char *cache_dir, cred_secret_t *out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/secret", cache_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        unsigned char key[32];
        if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
            return -EIO;
        /* Written whole under a temporary name, then renamed: a crash never
         * leaves a short secret that would change every tag. */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.new", path);
        /* A new file: a stale name (a crash mid-way, or a link someone
         * planted) is unlinked, never written through. */
        if (unlink(tmp) && errno != ENOENT)
            return -errno;
        int w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (w < 0)
            return -errno;
        int ok = write(w, key, sizeof key) == (ssize_t)sizeof key && fsync(w) == 0;
        close(w);
        if (!ok || rename(tmp, path)) {
            unlink(tmp);
            return -EIO;
        }
        memcpy(out->key, key, sizeof key);
        return 0;
    }
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof out->key)
        rc = -EINVAL;
    else if ((st.st_mode & 077) || st.st_uid != geteuid())
        rc = -EPERM; /* readable, or replaceable, by others: every tag could be forged */
    else if (read(fd, out->key, sizeof out->key) != (ssize_t)sizeof out->key)
        rc = -EIO;
    close(fd);
    return rc;
}

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Headers that describe the message or the connection, which hubd makes
 * itself; a client's copy would break the framing or the resume logic. */
static int is_reserved(const char *name, size_t n)
{
    static const char *const reserved[] = {"host",
                                           "content-length",
                                           "transfer-encoding",
                                           "connection",
                                           "range",
                                           "if-range",
                                           "te",
                                           "trailer",
                                           "upgrade",
                                           "keep-alive",
                                           "expect",
                                           "accept-encoding",
                                           "content-encoding"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strlen(reserved[i]) == n && strncasecmp(name, reserved[i], n) == 0)
            return 1;
    /* Proxy-Authorization included: the proxy's credentials are hubd's
     * (its `proxy` setting), and a client's would reach the proxy, not the
     * origin it was meant for. */
    return n > 6 && strncasecmp(name, "proxy-", 6) == 0;
}

typedef struct parsed {
    const char *name, *value;
    size_t nlen, vlen;
} parsed_t;

static int cmp_parsed(const void *a, const void *b)
{
    const parsed_t *x = a, *y = b;
    size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
    int c = strncasecmp(x->name, y->name, n);
    if (c || x->nlen != y->nlen)
        return c ? c : (x->nlen < y->nlen ? -1 : 1);
    n = x->vlen < y->vlen ? x->vlen : y->vlen;
    c = memcmp(x->value, y->value, n);
    return c ? c : (x->vlen > y->vlen) - (x->vlen < y->vlen);
}

static int check_header(const char *h, parsed_t *p, const char **why)
{
    size_t len = strlen(h);
    const char *colon = strchr(h, ':');
    if (len > CRED_MAX_HEADER_LEN) {
        *why = "a header is longer than 4096 bytes";
        return -EINVAL;
    }
    if (!colon || colon == h) {
        *why = "a header must be 'Name: value'";
        return -EINVAL;
    }
    for (const char *c = h; c < colon; c++) {
        if (!is_tchar((unsigned char)*c)) {
            *why = "a header name may hold only token characters";
            return -EINVAL;
        }
    }
    p->name = h;
    p->nlen = (size_t)(colon - h);
    p->value = colon + 1 + strspn(colon + 1, " \t");
    p->vlen = strlen(p->value);
    while (p->vlen && (p->value[p->vlen - 1] == ' ' || p->value[p->vlen - 1] == '\t'))
        p->vlen--;
    for (size_t i = 0; i < p->vlen; i++) {
        unsigned char c = (unsigned char)p->value[i];
        if (c == '\r' || c == '\n' || c == 0 || (c < 0x20 && c != '\t') || c == 0x7f) {
            *why = "a header value may not hold CR, LF or other control bytes";
            return -EINVAL;
        }
    }
    if (is_reserved(p->name, p->nlen)) {
        *why = "Host, Content-Length, Transfer-Encoding, Connection, Range, If-Range, TE, "
               "Trailer, Upgrade, Keep-Alive, Expect, Accept-Encoding, Content-Encoding and "
               "Proxy-* (Proxy-Authorization too: set the proxy's user and password in hubd's "
               "proxy setting) are hubd's to send";
        return -EINVAL;
    }
    return 0;
}

int cred_build(const cred_secret_t *secret, const char *const *headers, size_t n, char **block,
               char tag[65], const char **why)
{
    parsed_t p[CRED_MAX_HEADERS];
    size_t total = 0;
    *block = NULL;
    tag[0] = '\0';
    if (n > CRED_MAX_HEADERS) {
        *why = "at most 16 headers";
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = check_header(headers[i], &p[i], why);
        if (rc)
            return rc;
        total += p[i].nlen + p[i].vlen + 4;
    }
    if (total > CRED_MAX_TOTAL) {
        *why = "the headers together are longer than 8192 bytes";
        return -EINVAL;
    }
    if (n == 0)
        return 0;
    char *b = malloc(total + 1), *o = b;
    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        o += sprintf(o, "%.*s: %.*s\r\n", (int)p[i].nlen, p[i].name, (int)p[i].vlen, p[i].value);
    *block = b;
    /* The tag: HMAC over every header in a canonical order (names in lower
     * case), so the same headers give the same tag however the client
     * orders or spells them. Every header counts, not only Authorization
     * and Cookie: PRIVATE-TOKEN, X-Api-Key and the like are credentials
     * too, and any header may change what the origin sends. */
    qsort(p, n, sizeof *p, cmp_parsed);
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    mbedtls_md_context_t ctx;
    mbedtls_md_init(&ctx);
    int rc = mbedtls_md_setup(&ctx, md, 1) || mbedtls_md_hmac_starts(&ctx, secret->key, 32);
    for (size_t i = 0; !rc && i < n; i++) {
        char lower[CRED_MAX_HEADER_LEN];
        for (size_t k = 0; k < p[i].nlen; k++)
            lower[k] = (char)((p[i].name[k] >= 'A' && p[i].name[k] <= 'Z') ? p[i].name[k] + 32
                                                                           : p[i].name[k]);
        rc = mbedtls_md_hmac_update(&ctx, (const unsigned char *)lower, p[i].nlen) ||
             mbedtls_md_hmac_update(&ctx, (const unsigned char *)":", 1) ||
             mbedtls_md_hmac_update(&ctx, (const unsigned char *)p[i].value, p[i].vlen) ||
             mbedtls_md_hmac_update(&ctx, (const unsigned char *)"\n", 1);
    }
    unsigned char mac[32];
    if (!rc)
        rc = mbedtls_md_hmac_finish(&ctx, mac);
    mbedtls_md_free(&ctx);
    if (rc) {
        free(b);
        *block = NULL;
        return -EIO;
    }
    for (int i = 0; i < 32; i++)
        sprintf(tag + 2 * i, "%02x", mac[i]);
    return 0;
}
