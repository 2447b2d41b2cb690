/* config_keys: hubd's settings as one table, in the manner of
 * redis's static_configs[]. A row per key says how its value is read (its
 * type), where it goes (offsetof into hubd_config_t), its default, its
 * bounds, whether SIGHUP applies it, and one line of help. config.c walks
 * the rows for the defaults, config_set and the file, config_print and the
 * reload. A new key is a new row here; etc/hubd.conf and hubd.conf(5) must
 * name it too (unit_config and packaging_conf_doc fail until they do). */
#include "config_internal.h"
#include "log.h"
#include "mirror.h"
#include "netpolicy.h"
#include "proxy.h"
#include "url.h"
#include "textnum.h"
#include "workers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The row's field in cfg, as a T. */
#define SLOT(cfg, k, T) ((T *)(void *)((char *)(cfg) + (k)->off))
#define CSLOT(cfg, k, T) ((const T *)(const void *)((const char *)(cfg) + (k)->off))

/* ---- numbers ---- */

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end || errno || *s == '-' || v < min || v > max)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* A timeout that 0 would turn into "fail at once" (every download would
 * fail): at least 1 ms. */
static int parse_timeout(const char *s, unsigned *out)
{
    unsigned v;
    int rc = parse_duration_ms(s, &v);
    if (rc)
        return rc;
    if (v == 0)
        return -EDOM;
    *out = v;
    return 0;
}

/* Permission bits in octal, owner able to read and write. */
static int parse_mode(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 8);
    if (end == s || *end || errno || *s == '-' || v > 0777 || (v & 0600) != 0600)
        return -EINVAL;
    *out = (unsigned)v;
    return 0;
}

/* yes/no (also true/false, on/off, 1/0). */
static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false",
                                                                                "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -EINVAL;
}

static void print_size(FILE *out, const char *key, uint64_t v)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && v && v % 1024 == 0) { /* the largest unit that is exact */
        v /= 1024;
        u++;
    }
    if (u < 0)
        fprintf(out, "%s = %llu\n", key, (unsigned long long)v);
    else
        fprintf(out, "%s = %llu%c\n", key, (unsigned long long)v, units[u]);
}

static void print_ms(FILE *out, const char *key, unsigned ms)
{
    if (ms % 1000 == 0)
        fprintf(out, "%s = %us\n", key, ms / 1000);
    else
        fprintf(out, "%s = %ums\n", key, ms);
}

/* A size's field is an unsigned, a size_t or a uint64_t: k->width says. */
static uint64_t size_load(const hubd_config_t *cfg, const config_key_t *k)
{
    if (k->width == sizeof(unsigned))
        return *CSLOT(cfg, k, unsigned);
    uint64_t v;
    memcpy(&v, CSLOT(cfg, k, char), sizeof v);
    return v;
}

static void size_store(hubd_config_t *cfg, const config_key_t *k, uint64_t v)
{
    if (k->width == sizeof(unsigned))
        *SLOT(cfg, k, unsigned) = (unsigned)v;
    else
        memcpy(SLOT(cfg, k, char), &v, sizeof v);
}

/* A size: out of bounds is -EINVAL; so is what parse_size refuses, but for
 * its -ERANGE (a unit past 64 bits) in the rows marked CONFIG_ERANGE, the
 * keys that always reported it so. */
static int parse_size_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    uint64_t v;
    int rc = parse_size(value, &v);
    if (rc)
        return k->flags & CONFIG_ERANGE ? rc : -EINVAL;
    if (v < k->min || v > k->max)
        return -EINVAL;
    size_store(cfg, k, v);
    return 0;
}

static void print_size_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    if (k->flags & CONFIG_IN_BYTES)
        fprintf(out, "%s = %llu\n", k->name, (unsigned long long)size_load(cfg, k));
    else
        print_size(out, k->name, size_load(cfg, k));
}

static int parse_uint_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    return parse_uint(value, (unsigned)k->min, (unsigned)k->max, SLOT(cfg, k, unsigned));
}

/* A whole number past the row's bounds: say the bounds (a word that is no
 * number gets the generic message). */
static int explain_uint(const config_key_t *k, const char *value, int rc, char *err, size_t errlen)
{
    (void)rc;
    if (!*value || strspn(value, "0123456789") != strlen(value))
        return 0;
    snprintf(err, errlen, "bad value '%s' for key '%s': out of range (%llu to %llu)", value,
             k->name, (unsigned long long)k->min, (unsigned long long)k->max);
    return 1;
}

static void print_uint_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    fprintf(out, "%s = %u\n", k->name, *CSLOT(cfg, k, unsigned));
}

static int parse_duration_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    return parse_duration_ms(value, SLOT(cfg, k, unsigned));
}

static int parse_timeout_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    return parse_timeout(value, SLOT(cfg, k, unsigned));
}

static void print_duration_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    print_ms(out, k->name, *CSLOT(cfg, k, unsigned));
}

static int parse_mode_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    return parse_mode(value, SLOT(cfg, k, unsigned));
}

static void print_mode_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    fprintf(out, "%s = %04o\n", k->name, *CSLOT(cfg, k, unsigned));
}

static int parse_bool_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    return parse_bool(value, SLOT(cfg, k, int));
}

static void print_bool_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    fprintf(out, "%s = %s\n", k->name, *CSLOT(cfg, k, int) ? "yes" : "no");
}

static int parse_level_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    int lvl = log_level_parse(value);
    if (lvl < 0)
        return lvl;
    *SLOT(cfg, k, int) = lvl;
    return 0;
}

static void print_level_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    const char *name = "info";
    switch (*CSLOT(cfg, k, int)) {
    case LOG_LVL_ERR:
        name = "error";
        break;
    case LOG_LVL_WARN:
        name = "warning";
        break;
    case LOG_LVL_DEBUG:
        name = "debug";
        break;
    }
    fprintf(out, "%s = %s\n", k->name, name);
}

/* A plain value (number, mode, yes/no, level): compared and copied whole. */
static int differ_bytes(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    return memcmp(CSLOT(a, k, char), CSLOT(b, k, char), k->width) != 0;
}

static void take_bytes(hubd_config_t *cfg, const hubd_config_t *next, const config_key_t *k)
{
    memcpy(SLOT(cfg, k, char), CSLOT(next, k, char), k->width);
}

/* ---- strings (malloc'd) ---- */

static int set_string(char **slot, const char *value)
{
    if (!*value)
        return -EINVAL;
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*slot);
    *slot = copy;
    return 0;
}

/* A string whose being set matters, even empty (proxy = : none, not the
 * environment's). */
static int set_set_string(char **slot, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*slot);
    *slot = copy;
    return 0;
}

/* An optional string: empty means "none". */
static int set_optional(char **slot, const char *value)
{
    if (*value)
        return set_string(slot, value);
    free(*slot);
    *slot = NULL;
    return 0;
}

static int str_differs(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* *slot becomes a copy of next (NULL too); kept as it was without memory. */
static void take_string(char **slot, const char *next)
{
    if (!str_differs(*slot, next))
        return;
    char *v = next ? strdup(next) : NULL;
    if (v || !next) {
        free(*slot);
        *slot = v;
    }
}

/* The row's own check first (a list no URL's host could ever match, a
 * proxy URL hubd cannot use), then what the type makes of "". */
static int parse_string_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    if (k->check && k->check(value))
        return -EINVAL;
    return set_string(SLOT(cfg, k, char *), value);
}

static int parse_optional_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    if (k->check && k->check(value))
        return -EINVAL;
    return set_optional(SLOT(cfg, k, char *), value);
}

static int parse_set_string_key(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    if (k->check && k->check(value))
        return -EINVAL;
    return set_set_string(SLOT(cfg, k, char *), value);
}

/* ca_file's default is "the system bundle", which has no spelling: a
 * string that is not set is not printed. */
static void print_string_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    const char *v = *CSLOT(cfg, k, char *);
    if (v)
        fprintf(out, "%s = %s\n", k->name, v);
}

static void print_optional_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    const char *v = *CSLOT(cfg, k, char *);
    fprintf(out, "%s = %s\n", k->name, v ? v : "");
}

/* Not set: a comment, since then the environment decides. */
static void print_set_string_key(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    const char *v = *CSLOT(cfg, k, char *);
    if (v)
        fprintf(out, "%s = %s\n", k->name, v);
    else
        fprintf(out, "# %s: not set\n", k->name);
}

static int differ_string(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    return str_differs(*CSLOT(a, k, char *), *CSLOT(b, k, char *));
}

static void take_string_key(hubd_config_t *cfg, const hubd_config_t *next, const config_key_t *k)
{
    take_string(SLOT(cfg, k, char *), *CSLOT(next, k, char *));
}

static void release_string(hubd_config_t *cfg, const config_key_t *k)
{
    char **slot = SLOT(cfg, k, char *);
    free(*slot);
    *slot = NULL;
}

/* ---- min_free_space: a size, or a share of the file system ("5%") ---- */

#define FREE_PERCENT_MAX 50 /* the largest share min_free_space takes, in percent */

static int parse_free(hubd_config_t *cfg, const config_key_t *k, const char *s)
{
    (void)k;
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%') {
        char num[16];
        unsigned pct;
        if (n - 1 >= sizeof num)
            return -EINVAL;
        memcpy(num, s, n - 1);
        num[n - 1] = '\0';
        int rc = parse_uint(num, 0, FREE_PERCENT_MAX, &pct);
        if (rc)
            return rc;
        cfg->min_free_percent = pct;
        cfg->min_free_space = 0;
        return 0;
    }
    uint64_t v;
    if (parse_size(s, &v))
        return -EINVAL;
    cfg->min_free_space = v;
    cfg->min_free_percent = 0;
    return 0;
}

static void print_free(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    if (cfg->min_free_percent)
        fprintf(out, "%s = %u%%\n", k->name, cfg->min_free_percent);
    else
        print_size(out, k->name, cfg->min_free_space);
}

static int differ_free(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    (void)k;
    return a->min_free_space != b->min_free_space || a->min_free_percent != b->min_free_percent;
}

static void take_free(hubd_config_t *cfg, const hubd_config_t *next, const config_key_t *k)
{
    (void)k;
    cfg->min_free_space = next->min_free_space;
    cfg->min_free_percent = next->min_free_percent;
}

/* ---- mirror: repeatable, each line a rule ---- */

static void mirrors_clear(hubd_config_t *cfg, const config_key_t *k)
{
    (void)k;
    for (size_t i = 0; i < cfg->nmirrors; i++)
        mirror_rule_free(&cfg->mirrors[i]);
    cfg->nmirrors = 0;
}

/* Each line adds a rule; an empty value starts the list over (so a later
 * file or flag can drop what an earlier one set). */
static int add_mirror(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    if (!*value) {
        mirrors_clear(cfg, k);
        return 0;
    }
    if (cfg->nmirrors >= MIRROR_MAX_RULES)
        return -E2BIG;
    const char *why;
    int rc = mirror_rule_parse(value, &cfg->mirrors[cfg->nmirrors], &why);
    if (!rc)
        cfg->nmirrors++;
    return rc;
}

static void print_mirrors(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    for (size_t i = 0; i < cfg->nmirrors; i++) {
        char rule[2 * URL_MAX_LEN + 32];
        mirror_rule_format(&cfg->mirrors[i], rule, sizeof rule);
        fprintf(out, "%s = %s\n", k->name, rule);
    }
}

/* Whether two configs hold the same rules, in the same order. */
static int mirrors_differ(const hubd_config_t *a, const hubd_config_t *b, const config_key_t *k)
{
    (void)k;
    if (a->nmirrors != b->nmirrors)
        return 1;
    for (size_t i = 0; i < a->nmirrors; i++)
        if (strcmp(a->mirrors[i].prefix, b->mirrors[i].prefix) != 0 ||
            strcmp(a->mirrors[i].replacement, b->mirrors[i].replacement) != 0 ||
            a->mirrors[i].credentials != b->mirrors[i].credentials)
            return 1;
    return 0;
}

static int explain_mirror(const config_key_t *k, const char *value, int rc, char *err,
                          size_t errlen)
{
    if (rc == -E2BIG) {
        snprintf(err, errlen, "too many rules for key '%s' (at most %d)", k->name,
                 MIRROR_MAX_RULES);
        return 1;
    }
    if (rc != -EINVAL)
        return 0;
    mirror_rule_t r;
    const char *why = "bad rule";
    if (mirror_rule_parse(value, &r, &why) == 0) /* cannot be: it just failed */
        mirror_rule_free(&r);
    snprintf(err, errlen, "bad value '%s' for key '%s': %s", value, k->name, why);
    return 1;
}

/* ---- proxy: a set string, printed with its password masked ---- */

static int check_proxy(const char *value)
{
    proxy_t p = {.authz = NULL};
    int rc = *value ? proxy_parse(value, &p, NULL) : 0;
    proxy_free(&p);
    return rc;
}

/* One address other nodes can reach (not 0.0.0.0 or ::: it is also how
 * this node finds itself in fleet_peers), with port+1 free for metadata. */
static int check_fleet_listen(const char *value)
{
    struct sockaddr_storage ss;
    const char *why;
    if (!*value)
        return 0;
    if (hostport_parse_peer(value, &ss, &why))
        return -EINVAL;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        return in->sin_addr.s_addr == htonl(INADDR_ANY) || ntohs(in->sin_port) == 65535 ? -EINVAL
                                                                                        : 0;
    }
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
    return IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) || ntohs(in6->sin6_port) == 65535 ? -EINVAL : 0;
}

/* As set, the password masked; unset as a comment, since the environment
 * decides then (hubd --check-config adds what). */
static void print_proxy(const hubd_config_t *cfg, const config_key_t *k, FILE *out)
{
    const char *v = *CSLOT(cfg, k, char *);
    proxy_t p = {.authz = NULL};
    if (!v)
        fprintf(out, "# %s: not set, the environment decides (https_proxy, ...)\n", k->name);
    else if (!*v)
        fprintf(out, "%s =\n", k->name);
    else if (proxy_parse(v, &p, NULL) == 0)
        fprintf(out, "%s%s = %s\n", p.authz ? "# the password is not shown\n" : "", k->name,
                p.authz ? p.shown : p.label);
    proxy_free(&p);
}

/* The value may hold a password: not shown. */
static int explain_proxy(const config_key_t *k, const char *value, int rc, char *err, size_t errlen)
{
    (void)rc;
    const char *why = "";
    proxy_t p = {.authz = NULL};
    proxy_parse(value, &p, &why);
    proxy_free(&p);
    snprintf(err, errlen, "bad value for key '%s': %s", k->name, why);
    return 1;
}

/* ---- hf_upstream: the Hub's URL ---- */

/* Request paths ("/api/models/...") are appended to it: so absolute
 * http(s) (url_parse also refuses credentials), no query and no fragment,
 * and kept in url_parse's canonical spelling without a trailing '/'.
 * *canon is malloc'd. */
static int check_upstream(const char *value, char **canon, const char **why)
{
    url_t u;
    *why = "not an absolute http:// or https:// URL";
    if (url_parse(value, &u, why))
        return -EINVAL;
    int rc = 0;
    if (strchr(u.target, '?')) {
        *why = "a query has no place in it: request paths are appended to it";
        rc = -EINVAL;
    } else if (strchr(value, '#')) {
        *why = "a fragment has no place in it: request paths are appended to it";
        rc = -EINVAL;
    } else if (!(*canon = strdup(u.canonical))) {
        rc = -ENOMEM;
    } else {
        size_t n = strlen(*canon);
        while (n && (*canon)[n - 1] == '/')
            (*canon)[--n] = '\0';
    }
    url_free(&u);
    return rc;
}

static int parse_upstream(hubd_config_t *cfg, const config_key_t *k, const char *value)
{
    char *canon = NULL;
    const char *why;
    int rc = check_upstream(value, &canon, &why);
    if (!rc) {
        char **slot = SLOT(cfg, k, char *);
        free(*slot);
        *slot = canon;
    }
    return rc;
}

static int explain_upstream(const config_key_t *k, const char *value, int rc, char *err,
                            size_t errlen)
{
    if (rc != -EINVAL)
        return 0;
    char *canon = NULL;
    const char *why = "";
    check_upstream(value, &canon, &why);
    free(canon);
    snprintf(err, errlen, "bad value '%s' for key '%s': %s", value, k->name, why);
    return 1;
}

/* ---- computed defaults ---- */

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", a, b);
    return p;
}

static char *default_socket(void)
{
    const char *s = getenv("HUBD_SOCKET");
    if (s && *s)
        return strdup(s);
    s = getenv("XDG_RUNTIME_DIR");
    if (s && *s)
        return path_join(s, "hubd.sock");
    return strdup("/run/hubd/hubd.sock");
}

static char *default_cache_dir(void)
{
    /* systemd's CacheDirectory= says where (the first of a ':' list). */
    const char *cd = getenv("CACHE_DIRECTORY");
    if (cd && *cd) {
        size_t n = strcspn(cd, ":");
        return strndup(cd, n);
    }
    if (geteuid() == 0)
        return strdup("/var/cache/hubd");
    const char *s = getenv("XDG_CACHE_HOME");
    if (s && *s)
        return path_join(s, "hubd");
    s = getenv("HOME");
    if (s && *s)
        return path_join(s, ".cache/hubd");
    return NULL;
}

/* ---- the types ---- */

/* The kinds of value, as redis's typeInterface. Columns: name, parse,
 * print, differ, take (NULL: never reloaded), release (NULL: holds
 * nothing), explain (NULL: the generic reasons do). */
enum {
    T_STRING,
    T_OPTIONAL,
    T_SET_STRING,
    T_UINT,
    T_SIZE,
    T_DURATION,
    T_TIMEOUT,
    T_MODE,
    T_BOOL,
    T_LOG_LEVEL,
    T_FREE_SPACE,
    T_MIRROR,
    T_PROXY,
    T_URL
};

static const config_type_t types[] = {
    /* "" refused. */
    [T_STRING] = {"string", parse_string_key, print_string_key, differ_string, take_string_key,
                  release_string, NULL},
    /* "" is none (NULL). */
    [T_OPTIONAL] = {"optional string", parse_optional_key, print_optional_key, differ_string,
                    take_string_key, release_string, NULL},
    /* "" is set (and differs from NULL, not set). */
    [T_SET_STRING] = {"set string", parse_set_string_key, print_set_string_key, differ_string,
                      take_string_key, release_string, NULL},
    [T_UINT] = {"unsigned", parse_uint_key, print_uint_key, differ_bytes, take_bytes, NULL,
                explain_uint},
    [T_SIZE] = {"size", parse_size_key, print_size_key, differ_bytes, take_bytes, NULL, NULL},
    [T_DURATION] = {"duration", parse_duration_key, print_duration_key, differ_bytes, take_bytes,
                    NULL, NULL},
    /* A duration that cannot be 0. */
    [T_TIMEOUT] = {"timeout", parse_timeout_key, print_duration_key, differ_bytes, take_bytes, NULL,
                   NULL},
    [T_MODE] = {"octal mode", parse_mode_key, print_mode_key, differ_bytes, take_bytes, NULL, NULL},
    [T_BOOL] = {"yes/no", parse_bool_key, print_bool_key, differ_bytes, take_bytes, NULL, NULL},
    [T_LOG_LEVEL] = {"log level", parse_level_key, print_level_key, differ_bytes, take_bytes, NULL,
                     NULL},
    /* The irregular keys. min_free_space fills two fields. */
    [T_FREE_SPACE] = {"size or percent", parse_free, print_free, differ_free, take_free, NULL,
                      NULL},
    /* Read by jobs as they start; kept simple: a restart applies them. */
    [T_MIRROR] = {"mirror rule", add_mirror, print_mirrors, mirrors_differ, NULL, mirrors_clear,
                  explain_mirror},
    [T_PROXY] = {"proxy URL", parse_set_string_key, print_proxy, differ_string, take_string_key,
                 release_string, explain_proxy},
    [T_URL] = {"URL", parse_upstream, print_string_key, differ_string, take_string_key,
               release_string, explain_upstream},
};

/* ---- the table ---- */

#define FIELD(f) .off = offsetof(hubd_config_t, f), .width = sizeof(((hubd_config_t *)0)->f)
#define RELOAD CONFIG_RELOAD
#define NOMAX UINT64_MAX

/* One row per key, in config_print's order: that is the order of
 * `hubd --check-config` and of the keys a reload names as needing a
 * restart. RELOAD: a SIGHUP applies it (config_apply_runtime copies it;
 * main.c tells the modules that keep their own). The others are bound at
 * start-up: the socket, buffers, the cache's files, the TLS context, the
 * policy lists, the proxies, the mirror rules, the front's sockets. */
static const config_key_t config_keys[] = {
    /* The Unix socket; under systemd, hubd.socket's business. */
    {"socket", &types[T_STRING], FIELD(socket_path), .def_fn = default_socket,
     .help = "the Unix socket hubd listens on"},
    {"socket_mode", &types[T_MODE], FIELD(socket_mode), .def = "0660",
     .help = "the socket's permission bits, octal, owner read-write at least"},
    {"socket_group", &types[T_OPTIONAL], FIELD(socket_group), .def = "",
     .help = "the socket's group, whose members may fetch; empty: the daemon's own"},
    /* Who may do what. */
    {"admin_group", &types[T_OPTIONAL], FIELD(admin_group), .def = "hubd-admin", .flags = RELOAD,
     .help = "its members may rm, pin, unpin, gc and verify; empty: root only"},
    {"allow_users", &types[T_OPTIONAL], FIELD(allow_users), .def = "", .flags = RELOAD,
     .help = "if set (or allow_groups), only these users may connect (and root)"},
    {"allow_groups", &types[T_OPTIONAL], FIELD(allow_groups), .def = "", .flags = RELOAD,
     .help = "if set (or allow_users), only members of these groups may connect (and root)"},
    {"subuid_file", &types[T_OPTIONAL], FIELD(subuid_file), .def = "/etc/subuid", .flags = RELOAD,
     .help = "users' subordinate uid ranges (newuidmap's): a uid in one is its user for every "
             "per-user bound; empty: none"},
    {"max_requests_per_user", &types[T_UINT], FIELD(max_requests_per_user), .def = "1024", .min = 0,
     .max = 1000000, .flags = RELOAD, .help = "FETCHes one uid may have waiting; 0: no limit"},
    {"max_jobs_per_user", &types[T_UINT], FIELD(max_jobs_per_user), .def = "8", .min = 0,
     .max = 10000, .flags = RELOAD,
     .help = "downloads one uid may have transferring at once; 0: no limit"},
    {"max_holds_per_user", &types[T_UINT], FIELD(max_holds_per_user), .def = "100000", .min = 0,
     .max = 100000000, .flags = RELOAD,
     .help = "files one uid's HF caches may link into the store (HOLD); more are copied; 0: no "
             "limit"},
    {"max_held_bytes_per_user", &types[T_SIZE], FIELD(max_held_bytes_per_user), .def = "0",
     .min = 0, .max = NOMAX, .flags = RELOAD,
     .help = "bytes of the blobs one uid may hold linked; more are copied; 0: half of "
             "max_cache_size (else of the file system)"},
    {"max_hold_text_per_user", &types[T_SIZE], FIELD(max_hold_text_per_user), .def = "32M",
     .min = 0, .max = NOMAX, .flags = RELOAD, .help = "hubd.db bytes one uid's holds may take"},
    {"max_holds_per_blob", &types[T_UINT], FIELD(max_holds_per_blob), .def = "64", .min = 0,
     .max = 1000000, .flags = RELOAD, .help = "holds of one uid on one blob; 0: no limit"},
    {"hold_check_interval", &types[T_DURATION], FIELD(hold_check_interval_ms), .def = "10m",
     .flags = RELOAD, .help = "holds whose links are gone are dropped this often; 0: by eviction"},
    {"max_listing_bytes_per_user", &types[T_SIZE], FIELD(max_listing_bytes_per_user), .def = "64M",
     .min = 0, .max = NOMAX, .flags = RELOAD,
     .help = "bytes of HFREPO file lists one user keeps on the cache's disk; its oldest are "
             "emptied past it, everyone's past 8 times it; 0: no limit"},
    /* The cache. */
    {"cache_dir", &types[T_STRING], FIELD(cache_dir), .def_fn = default_cache_dir,
     .help = "the root of blobs/, tmp/ and hubd.db"},
    {"max_cache_size", &types[T_SIZE], FIELD(max_cache_size), .def = "0", .min = 0, .max = NOMAX,
     .flags = RELOAD, .help = "above this, the least recently used blobs are evicted; 0: none"},
    {"max_file_size", &types[T_SIZE], FIELD(max_file_size), .def = "0", .min = 0, .max = NOMAX,
     .flags = RELOAD, .help = "a download longer than this fails (too_large); 0: no limit"},
    /* Memory: the buffer pool and each job's pipeline are sized at start. */
    {"read_buffer_size", &types[T_SIZE], FIELD(read_buffer_size), .def = "256K", .min = 4096,
     .max = 64u << 20, .flags = CONFIG_ERANGE, .help = "bytes per pooled socket read buffer"},
    {"max_inflight", &types[T_SIZE], FIELD(max_inflight), .def = "16M", .min = 64 * 1024,
     .max = 1ull << 32, .flags = CONFIG_ERANGE,
     .help = "per download: body bytes waiting to be hashed and written before reading stops"},
    /* The pool's threads, sized once, before its first work (workers.h). */
    {"worker_threads", &types[T_UINT], FIELD(worker_threads), .def = "0", .min = 0,
     .max = WORKERS_MAX,
     .help = "threads that decrypt HTTPS and do the disk's work; 0: automatic (UV_THREADPOOL_SIZE, "
             "else the cores + 2, 4 to 128)"},
    /* Downloads and connections at once. */
    {"max_downloads", &types[T_UINT], FIELD(max_downloads), .def = "16", .min = 1, .max = 10000,
     .flags = RELOAD, .help = "downloads transferring at once; the rest wait queued"},
    {"max_per_host", &types[T_UINT], FIELD(max_per_host), .def = "16", .min = 1, .max = 10000,
     .flags = RELOAD, .help = "connections to one host:port at once, all downloads"},
    /* Segmented downloads. */
    {"segment_min_size", &types[T_SIZE], FIELD(segment_min_size), .def = "32M", .min = 0,
     .max = NOMAX, .flags = RELOAD,
     .help = "a longer file from a server that answers ranges comes in segments; 0: never"},
    {"segment_chunk_size", &types[T_SIZE], FIELD(segment_chunk_size), .def = "16M", .min = 1u << 20,
     .max = 1ull << 32, .flags = RELOAD | CONFIG_ERANGE,
     .help = "bytes asked for by one segment request"},
    {"max_connections_per_download", &types[T_UINT], FIELD(max_connections_per_download),
     .def = "16", .min = 1, .max = 64, .flags = RELOAD,
     .help = "connections one segmented download may use at once"},
    /* The budget holds at least a chunk's start. */
    {"segment_budget", &types[T_SIZE], FIELD(segment_budget), .def = "256M", .min = 1u << 20,
     .max = NOMAX, .flags = RELOAD,
     .help = "bytes a segmented download may hold beyond the hashed prefix"},
    {"segment_stall_timeout", &types[T_TIMEOUT], FIELD(segment_stall_timeout_ms), .def = "10s",
     .flags = RELOAD,
     .help = "a connection this silent on the chunk the hash waits for has it asked again"},
    /* Timeouts of an attempt, and of the whole fetch. */
    {"connect_timeout", &types[T_TIMEOUT], FIELD(connect_timeout_ms), .def = "30s", .flags = RELOAD,
     .help = "DNS and TCP connect, per attempt"},
    {"idle_timeout", &types[T_TIMEOUT], FIELD(idle_timeout_ms), .def = "60s", .flags = RELOAD,
     .help = "no byte from the origin for this long: the attempt fails"},
    {"keepalive_timeout", &types[T_DURATION], FIELD(keepalive_ms), .def = "30s", .flags = RELOAD,
     .help = "an idle pooled connection is closed after this"},
    {"first_byte_timeout", &types[T_TIMEOUT], FIELD(first_byte_timeout_ms), .def = "60s",
     .flags = RELOAD, .help = "request sent, no response byte for this long: the attempt fails"},
    {"deadline", &types[T_DURATION], FIELD(deadline_ms), .def = "0", .flags = RELOAD,
     .help = "the whole fetch, all attempts; 0: none"},
    /* Slow drips end by default: a server that takes a minute for its
     * headers, or sends less than 1 KiB/s for a minute, is dropped (and
     * retried, as any timeout). */
    {"header_timeout", &types[T_TIMEOUT], FIELD(header_timeout_ms), .def = "60s", .flags = RELOAD,
     .help = "request sent, response headers not all in for this long: the attempt fails"},
    {"low_speed_limit", &types[T_SIZE], FIELD(low_speed_limit), .def = "1024", .min = 0,
     .max = UINT_MAX, .flags = RELOAD | CONFIG_IN_BYTES,
     .help = "bytes/s a body must average over low_speed_time; 0: off"},
    {"low_speed_time", &types[T_DURATION], FIELD(low_speed_time_ms), .def = "60s", .flags = RELOAD,
     .help = "the window of low_speed_limit; 0: off"},
    /* The disk and the blobs on it. */
    {"min_free_space", &types[T_FREE_SPACE], FIELD(min_free_space), .def = "1G", .flags = RELOAD,
     .help = "bytes, or a percentage, that the cache's file system keeps free"},
    {"verify_interval", &types[T_DURATION], FIELD(verify_interval_ms), .def = "30d",
     .flags = RELOAD, .help = "each blob is hashed again in the background this often; 0: never"},
    {"revalidate_after", &types[T_DURATION], FIELD(revalidate_after_ms), .def = "0",
     .flags = RELOAD,
     .help = "a cached URL older than this is asked again (304 keeps it); 0: never"},
    /* Speed, retries, redirects, the log. */
    {"max_rate", &types[T_SIZE], FIELD(max_rate), .def = "0", .min = 0, .max = 1ull << 40,
     .flags = RELOAD | CONFIG_ERANGE,
     .help = "body bytes per second from origins, all downloads together; 0: any"},
    {"retries", &types[T_UINT], FIELD(retries), .def = "5", .min = 0, .max = 100, .flags = RELOAD,
     .help = "attempts after the first, for transient failures"},
    {"retry_delay", &types[T_DURATION], FIELD(retry_delay_ms), .def = "500ms", .flags = RELOAD,
     .help = "the first backoff; doubles per attempt, with jitter"},
    {"retry_max_delay", &types[T_DURATION], FIELD(retry_max_delay_ms), .def = "30s",
     .flags = RELOAD, .help = "the longest backoff (and honoured Retry-After)"},
    {"max_redirects", &types[T_UINT], FIELD(max_redirects), .def = "10", .min = 0, .max = 50,
     .flags = RELOAD, .help = "redirects followed per fetch"},
    {"log_level", &types[T_LOG_LEVEL], FIELD(log_level), .def = "info", .flags = RELOAD,
     .help = "error, warning, info or debug"},
    /* TLS. A reload reads the CA bundle again (main.c); the rest is the
     * TLS context, made once. */
    {"ca_file", &types[T_STRING], FIELD(ca_file), .flags = RELOAD,
     .help = "a PEM bundle of trusted CAs; not set: the system's"},
    {"ca_path", &types[T_OPTIONAL], FIELD(ca_path), .def = "", .flags = RELOAD,
     .help = "a folder of PEM CA certificates"},
    /* Measured on the project machine (bench/tls_cipher_speed.c): mbedTLS
     * 2.28 decrypts ChaCha20-Poly1305 faster than AES-GCM here. */
    {"tls_ciphers", &types[T_STRING], FIELD(tls_ciphers),
     .def = "chacha20-poly1305,aes-128-gcm,aes-256-gcm", .help = "AEADs offered, fastest first"},
    {"tls_insecure_hosts", &types[T_OPTIONAL], FIELD(tls_insecure_hosts), .def = "",
     .help = "hosts whose certificates are not checked"},
    /* The TLS context is made once: a change needs a restart. */
    {"ktls", &config_type_word, FIELD(ktls), .def = "auto",
     .help = "off or auto: the kernel decrypts AES-GCM downloads where it has TLS"},
    /* The policy lists. Link-local (where cloud metadata services answer:
     * 169.254.169.254, fd00:ec2::254, Alibaba's 100.100.100.200) and "this
     * network" are denied by default. */
    {"deny_networks", &types[T_OPTIONAL], FIELD(deny_networks), .def = DEFAULT_DENY_NETWORKS,
     .check = netpolicy_check_networks,
     .help = "CIDRs never connected to (cloud metadata, link-local)"},
    {"allow_networks", &types[T_OPTIONAL], FIELD(allow_networks), .def = "",
     .check = netpolicy_check_networks, .help = "exceptions to deny_networks"},
    /* An item no URL's host could ever match is refused. */
    {"allow_hosts", &types[T_OPTIONAL], FIELD(allow_hosts), .def = "",
     .check = netpolicy_check_hosts,
     .help = "if set, the only hosts fetched from (\"*.x\" for subdomains)"},
    {"deny_hosts", &types[T_OPTIONAL], FIELD(deny_hosts), .def = "", .check = netpolicy_check_hosts,
     .help = "hosts never fetched from"},
    /* Not set by default: the environment decides (proxy.h). */
    {"proxy", &types[T_PROXY], FIELD(proxy), .check = check_proxy,
     .help = "the forward proxy, http://[user:password@]host[:port]; empty: none"},
    {"no_proxy", &types[T_SET_STRING], FIELD(no_proxy),
     .help = "hosts that go direct (curl's list)"},
    {"mirror", &types[T_MIRROR], FIELD(mirrors), .def = "",
     .help = "PREFIX REPLACEMENT [credentials]; repeatable, an empty value drops them all"},
    {"mirror_fallback", &types[T_BOOL], FIELD(mirror_fallback), .def = "yes",
     .help = "a failing mirror gives way to the original URL"},
    /* The HTTP front. */
    {"http_listen", &config_type_listen, FIELD(http_listen), .def = "",
     .help = "the HTTP front's loopback host:port items; empty: off"},
    {"hf_upstream", &types[T_URL], FIELD(hf_upstream), .def = DEFAULT_HF_UPSTREAM,
     .help = "where the HTTP front sends Hugging Face Hub requests"},
    /* nginx's client_header_timeout is 60 s. */
    {"http_header_timeout", &types[T_TIMEOUT], FIELD(http_header_timeout_ms), .def = "30s",
     .flags = RELOAD,
     .help = "the HTTP front: a request's head (and body) within this long, and a Hub API "
             "request's wait for its turn"},
    /* The scrape endpoint for Prometheus (http/metrics.h): unauthenticated. */
    {"metrics_listen", &config_type_listen, FIELD(metrics_listen), .def = "",
     .help = "the metrics endpoint's loopback host:port items; empty: off"},
    {"metrics_user_label", &config_type_word, FIELD(metrics_user_label), .def = "name",
     .flags = RELOAD, .help = "name or uid: what labels the per-user metrics"},
    /* The cluster swarm (daemon/fleet/, docs/FLEET.md). fleet_listen,
     * fleet_peers, fleet_ca, fleet_cert and fleet_key go together: one
     * without the others stops the start (config_check_fleet). */
    {"fleet_listen", &types[T_OPTIONAL], FIELD(fleet_listen), .def = "",
     .check = check_fleet_listen,
     .help = "the swarm's peer address, ip:port (port+1 answers metadata); empty: no swarm"},
    {"fleet_tracker", &types[T_OPTIONAL], FIELD(fleet_tracker), .def = "",
     .help = "an announce URL (opentracker); empty: peers come from fleet_peers alone"},
    {"fleet_peers", &types[T_OPTIONAL], FIELD(fleet_peers), .def = "", .flags = RELOAD,
     .help = "a file of every node's fleet_listen, one a line; re-read on SIGHUP"},
    {"fleet_ca", &types[T_OPTIONAL], FIELD(fleet_ca), .def = "",
     .help = "the cluster CA's certificate (PEM): only peers it signed are served"},
    {"fleet_cert", &types[T_OPTIONAL], FIELD(fleet_cert), .def = "",
     .help = "this node's certificate (PEM), signed by fleet_ca"},
    {"fleet_key", &types[T_OPTIONAL], FIELD(fleet_key), .def = "",
     .help = "this node's private key (PEM, unencrypted; readable by hubd alone)"},
    {"fleet_wait", &types[T_TIMEOUT], FIELD(fleet_wait_ms), .def = "60s", .flags = RELOAD,
     .help = "how long a node waits for a file's seed to start before it fetches the file itself"},
};

const config_key_t *config_key_table(size_t *n)
{
    *n = sizeof config_keys / sizeof config_keys[0];
    return config_keys;
}

const config_key_t *config_key_find(const char *name)
{
    for (size_t i = 0; i < sizeof config_keys / sizeof config_keys[0]; i++)
        if (strcmp(config_keys[i].name, name) == 0)
            return &config_keys[i];
    return NULL;
}

const char *config_key_type(const config_key_t *k)
{
    return k->type->name;
}
