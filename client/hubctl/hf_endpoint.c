/* hf_endpoint: is HF_ENDPOINT hubd's Hub? _hfopts.py's rules, in C. */
#include "hf_endpoint.h"

#include "out.h"
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A Hub URL as the Hub reads it (_hfopts._norm): the parts compared. */
typedef struct hub_url {
    char *mem;          /* a copy of the URL scheme and host point into; owned */
    char *path_mem;     /* path's; owned */
    const char *scheme; /* "http" or "https" */
    const char *host;   /* lower case, no brackets */
    unsigned port;      /* given, else the scheme's */
    const char *path;   /* without trailing '/' ("" for none); no query or fragment */
} hub_url_t;

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

/* Reads text as Python's urlsplit does, far enough for _norm: 0, or -1
 * when it is no http(s) URL with a host (urlsplit's ValueError included:
 * a bad port, a lone bracket). hub_url_free it either way. */
static int hub_url_parse(const char *text, hub_url_t *u)
{
    memset(u, 0, sizeof *u);
    char *s = u->mem = xstrdup(text), *w = s;
    for (const char *r = s; *r; r++) /* urlsplit drops tabs and newlines anywhere */
        if (*r != '\t' && *r != '\r' && *r != '\n')
            *w++ = *r;
    *w = '\0';
    while (isspace((unsigned char)*s)) /* _norm strips the ends */
        s++;
    for (size_t n = strlen(s); n > 0 && isspace((unsigned char)s[n - 1]);)
        s[--n] = '\0';
    size_t i = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
    if (i == 0 || s[i] != ':' || !isalpha((unsigned char)s[0]))
        return -1;
    s[i] = '\0';
    lower(s);
    u->scheme = s;
    if (!str_eq(s, "http") && !str_eq(s, "https"))
        return -1;
    char *rest = s + i + 1;
    if (strncmp(rest, "//", 2) != 0)
        return -1; /* no netloc: no host */
    char *netloc = rest + 2;
    size_t nl = strcspn(netloc, "/?#");
    size_t pl = strcspn(netloc + nl, "?#"); /* the path: up to the query or fragment */
    u->path_mem = xrealloc(NULL, pl + 1);
    memcpy(u->path_mem, netloc + nl, pl);
    u->path_mem[pl] = '\0';
    u->path = u->path_mem;
    netloc[nl] = '\0';
    for (size_t n = pl; n > 0 && u->path_mem[n - 1] == '/';)
        u->path_mem[--n] = '\0';
    if ((strchr(netloc, '[') != NULL) != (strchr(netloc, ']') != NULL))
        return -1; /* "Invalid IPv6 URL" */
    char *host = strrchr(netloc, '@') ? strrchr(netloc, '@') + 1 : netloc, *port;
    char *br = strchr(host, '[');
    if (br) {
        host = br + 1;
        char *close = strchr(host, ']');
        if (!close)
            return -1;
        *close = '\0';
        port = strchr(close + 1, ':');
    } else {
        port = strchr(host, ':');
    }
    if (port)
        *port++ = '\0';
    lower(host);
    u->host = host;
    if (!*host)
        return -1;
    unsigned long p = 0; /* digits only (any number of zeros first), at most 65535 */
    for (const char *d = port ? port : ""; *d; d++)
        if (!isdigit((unsigned char)*d) || (p = p * 10 + (unsigned long)(*d - '0')) > 65535)
            return -1;
    u->port = p ? (unsigned)p : str_eq(u->scheme, "https") ? 443 : 80; /* port 0: Python's falsy */
    return 0;
}

static void hub_url_free(hub_url_t *u)
{
    free(u->mem);
    free(u->path_mem);
}

static int is_loopback(const char *host)
{
    size_t n = strlen(host);
    return str_eq(host, "localhost") || str_eq(host, "127.0.0.1") || str_eq(host, "::1") ||
           strncmp(host, "127.", 4) == 0 || (n > 10 && strcmp(host + n - 10, ".localhost") == 0);
}

static int same(const hub_url_t *a, const hub_url_t *b)
{
    return str_eq(a->scheme, b->scheme) && str_eq(a->host, b->host) && a->port == b->port &&
           str_eq(a->path, b->path);
}

/* Is want the front at front: http, its port and path, loopback names? */
static int is_front(const hub_url_t *want, const char *front)
{
    hub_url_t f;
    int ok = hub_url_parse(front, &f) == 0 && str_eq(want->scheme, "http") &&
             want->port == f.port && str_eq(want->path, f.path) && is_loopback(want->host) &&
             is_loopback(f.host);
    hub_url_free(&f);
    return ok;
}

int hf_endpoint_means_hubd(const char *url, const char *upstream, const char *fronts)
{
    if (!upstream) /* a hubd too old to name its Hub */
        return 0;
    hub_url_t want, up;
    int parsed = hub_url_parse(url, &want) == 0, yes = parsed;
    if (parsed) {
        yes = hub_url_parse(upstream, &up) == 0 && same(&want, &up);
        hub_url_free(&up);
    }
    char *list = xstrdup(fronts ? fronts : ""), *save = NULL;
    int front = 0;
    for (char *f = strtok_r(list, ",", &save); f && parsed && !front;
         f = strtok_r(NULL, ",", &save))
        front = is_front(&want, f);
    free(list);
    hub_url_free(&want);
    return yes || front;
}

void hf_endpoint_check(const char *upstream, const char *fronts, int quiet)
{
    static int told; /* once per run */
    const char *env = getenv("HF_ENDPOINT");
    if (told || quiet || !env || !*env || hf_endpoint_means_hubd(env, upstream, fronts))
        return;
    told = 1;
    char *clean_env = out_clean_copy(env), *clean_up = out_clean_copy(upstream ? upstream : "");
    if (upstream)
        fprintf(stderr,
                "hubctl: note: HF_ENDPOINT=%s is not hubd's Hub: files come from %s (its "
                "hf_upstream), through hubd (hubd asks one Hub: hf_upstream in hubd.conf)\n",
                clean_env, clean_up);
    else
        fprintf(stderr,
                "hubctl: note: HF_ENDPOINT=%s is not hubd's Hub: files come from the Hub of its "
                "hf_upstream (this hubd is too old to say which), through hubd (hubd asks one "
                "Hub: hf_upstream in hubd.conf)\n",
                clean_env);
    free(clean_env);
    free(clean_up);
}
