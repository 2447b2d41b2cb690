/* config: defaults, INI file (libinih), and key=value setters. */
#include "config.h"
#include "hostport.h"
#include "log.h"
#include "mirror.h"
#include "netpolicy.h"
#include "proxy.h"
#include "url.h"
#include "textnum.h"

#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int config_defaults(hubd_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->read_buffer_size = 256 * 1024;
    cfg->max_inflight = 16 * 1024 * 1024;
    cfg->max_downloads = 16;
    cfg->max_per_host = 16;
    cfg->segment_min_size = 32u << 20;
    cfg->segment_chunk_size = 16u << 20;
    cfg->max_connections_per_download = 16;
    cfg->segment_budget = 256u << 20;
    cfg->segment_stall_timeout_ms = 10 * 1000;
    cfg->connect_timeout_ms = 30 * 1000;
    cfg->idle_timeout_ms = 60 * 1000;
    cfg->first_byte_timeout_ms = 60 * 1000;
    cfg->retries = 5;
    cfg->retry_delay_ms = 500;
    cfg->retry_max_delay_ms = 30 * 1000;
    cfg->deadline_ms = 0;
    /* Slow drips end by default: a server that takes a minute for its
     * headers, or sends less than 1 KiB/s for a minute, is dropped (and
     * retried, as any timeout). */
    cfg->header_timeout_ms = 60 * 1000;
    cfg->http_header_timeout_ms = 30 * 1000; /* nginx's client_header_timeout is 60 s */
    cfg->low_speed_limit = 1024;
    cfg->low_speed_time_ms = 60 * 1000;
    cfg->min_free_space = 1ull << 30;
    cfg->min_free_percent = 0;
    cfg->verify_interval_ms = 30u * 24 * 3600 * 1000;
    cfg->keepalive_ms = 30 * 1000;
    cfg->max_redirects = 10;
    cfg->log_level = LOG_LVL_INFO;
    cfg->socket_mode = 0660;
    cfg->max_requests_per_user = 1024;
    cfg->max_jobs_per_user = 8;
    cfg->max_cache_size = 0;
    cfg->admin_group = strdup("hubd-admin");
    cfg->mirror_fallback = 1;
    /* Link-local (where cloud metadata services answer: 169.254.169.254,
     * fd00:ec2::254, Alibaba's 100.100.100.200) and "this network". */
    cfg->deny_networks = strdup(DEFAULT_DENY_NETWORKS);
    cfg->hf_upstream = strdup(DEFAULT_HF_UPSTREAM);
    cfg->socket_path = default_socket();
    cfg->cache_dir = default_cache_dir();
    /* Measured on the project machine (bench/tls_cipher_speed.c): mbedTLS
     * 2.28 decrypts ChaCha20-Poly1305 faster than AES-GCM here. */
    cfg->tls_ciphers = strdup("chacha20-poly1305,aes-128-gcm,aes-256-gcm");
    if (!cfg->socket_path || !cfg->cache_dir || !cfg->tls_ciphers || !cfg->admin_group ||
        !cfg->deny_networks || !cfg->hf_upstream)
        return -ENOMEM;
    return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
    return parse_size(s, out);
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);

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

/* min_free_space: a size, or a share of the file system ("5%"). */
static int parse_free(hubd_config_t *cfg, const char *s)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%') {
        char num[16];
        unsigned pct;
        if (n - 1 >= sizeof num)
            return -EINVAL;
        memcpy(num, s, n - 1);
        num[n - 1] = '\0';
        int rc = parse_uint(num, 0, 50, &pct);
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

static int set_size(size_t *slot, const char *value, uint64_t min, uint64_t max)
{
    uint64_t v;
    int rc = parse_size(value, &v);
    if (rc)
        return rc;
    if (v < min || v > max)
        return -EINVAL;
    *slot = (size_t)v;
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

static void mirrors_clear(hubd_config_t *cfg)
{
    for (size_t i = 0; i < cfg->nmirrors; i++)
        mirror_rule_free(&cfg->mirrors[i]);
    cfg->nmirrors = 0;
}

/* `mirror` is repeatable: each line adds a rule; an empty value starts the
 * list over (so a later file or flag can drop what an earlier one set). */
static int add_mirror(hubd_config_t *cfg, const char *value)
{
    if (!*value) {
        mirrors_clear(cfg);
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

/* http_listen: parsed now, so that a bad item stops the start with the file
 * and line named, and the listener gets addresses it need not check again.
 * The text is kept as written for config_print; blank: the front is off. */
static int set_http_listen(hubd_config_t *cfg, const char *value, char *item, size_t itemcap,
                           const char **why)
{
    struct sockaddr_storage addrs[HOSTPORT_MAX_ADDRS];
    size_t n;
    int rc = hostport_parse_list(value, addrs, HOSTPORT_MAX_ADDRS, &n, item, itemcap, why);
    if (rc)
        return rc;
    char *text = NULL;
    if (n && !(text = strdup(value)))
        return -ENOMEM;
    free(cfg->http_listen);
    cfg->http_listen = text;
    memcpy(cfg->http_addrs, addrs, n * sizeof addrs[0]);
    cfg->nhttp_addrs = n;
    return 0;
}

/* hf_upstream: the Hub's URL, to which request paths ("/api/models/...")
 * are appended: so absolute http(s) (url_parse also refuses credentials),
 * no query and no fragment, and kept in url_parse's canonical spelling
 * without a trailing '/'. *canon is malloc'd. */
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

int config_set(hubd_config_t *cfg, const char *key, const char *value)
{
    if (strcmp(key, "socket") == 0)
        return set_string(&cfg->socket_path, value);
    if (strcmp(key, "cache_dir") == 0)
        return set_string(&cfg->cache_dir, value);
    if (strcmp(key, "socket_mode") == 0)
        return parse_mode(value, &cfg->socket_mode);
    if (strcmp(key, "socket_group") == 0)
        return set_optional(&cfg->socket_group, value);
    if (strcmp(key, "admin_group") == 0)
        return set_optional(&cfg->admin_group, value);
    if (strcmp(key, "allow_users") == 0)
        return set_optional(&cfg->allow_users, value);
    if (strcmp(key, "allow_groups") == 0)
        return set_optional(&cfg->allow_groups, value);
    if (strcmp(key, "max_requests_per_user") == 0)
        return parse_uint(value, 0, 1000000, &cfg->max_requests_per_user);
    if (strcmp(key, "max_jobs_per_user") == 0)
        return parse_uint(value, 0, 10000, &cfg->max_jobs_per_user);
    if (strcmp(key, "max_cache_size") == 0 || strcmp(key, "max_file_size") == 0) {
        uint64_t v;
        int rc = parse_size(value, &v);
        if (!rc)
            *(key[4] == 'c' ? &cfg->max_cache_size : &cfg->max_file_size) = v;
        return rc ? -EINVAL : 0;
    }
    if (strcmp(key, "read_buffer_size") == 0)
        return set_size(&cfg->read_buffer_size, value, 4096, 64u << 20);
    if (strcmp(key, "max_inflight") == 0)
        return set_size(&cfg->max_inflight, value, 64 * 1024, 1ull << 32);
    if (strcmp(key, "max_downloads") == 0)
        return parse_uint(value, 1, 10000, &cfg->max_downloads);
    if (strcmp(key, "max_per_host") == 0)
        return parse_uint(value, 1, 10000, &cfg->max_per_host);
    if (strcmp(key, "segment_min_size") == 0 || strcmp(key, "segment_budget") == 0) {
        uint64_t v;
        if (parse_size(value, &v))
            return -EINVAL;
        if (key[8] == 'b' && v < (1u << 20))
            return -EINVAL; /* the budget holds at least a chunk's start */
        *(key[8] == 'm' ? &cfg->segment_min_size : &cfg->segment_budget) = v;
        return 0;
    }
    if (strcmp(key, "segment_chunk_size") == 0)
        return set_size(&cfg->segment_chunk_size, value, 1u << 20, 1ull << 32);
    if (strcmp(key, "max_connections_per_download") == 0)
        return parse_uint(value, 1, 64, &cfg->max_connections_per_download);
    if (strcmp(key, "segment_stall_timeout") == 0)
        return parse_timeout(value, &cfg->segment_stall_timeout_ms);
    if (strcmp(key, "connect_timeout") == 0)
        return parse_timeout(value, &cfg->connect_timeout_ms);
    if (strcmp(key, "idle_timeout") == 0)
        return parse_timeout(value, &cfg->idle_timeout_ms);
    if (strcmp(key, "first_byte_timeout") == 0)
        return parse_timeout(value, &cfg->first_byte_timeout_ms);
    if (strcmp(key, "retries") == 0)
        return parse_uint(value, 0, 100, &cfg->retries);
    if (strcmp(key, "retry_delay") == 0)
        return parse_duration_ms(value, &cfg->retry_delay_ms);
    if (strcmp(key, "retry_max_delay") == 0)
        return parse_duration_ms(value, &cfg->retry_max_delay_ms);
    if (strcmp(key, "deadline") == 0)
        return parse_duration_ms(value, &cfg->deadline_ms);
    if (strcmp(key, "header_timeout") == 0)
        return parse_timeout(value, &cfg->header_timeout_ms);
    if (strcmp(key, "http_header_timeout") == 0)
        return parse_timeout(value, &cfg->http_header_timeout_ms);
    if (strcmp(key, "low_speed_limit") == 0) {
        uint64_t v;
        if (parse_size(value, &v) || v > UINT_MAX)
            return -EINVAL;
        cfg->low_speed_limit = (unsigned)v;
        return 0;
    }
    if (strcmp(key, "low_speed_time") == 0)
        return parse_duration_ms(value, &cfg->low_speed_time_ms);
    if (strcmp(key, "min_free_space") == 0)
        return parse_free(cfg, value);
    if (strcmp(key, "verify_interval") == 0)
        return parse_duration_ms(value, &cfg->verify_interval_ms);
    if (strcmp(key, "revalidate_after") == 0)
        return parse_duration_ms(value, &cfg->revalidate_after_ms);
    if (strcmp(key, "max_rate") == 0)
        return set_size(&cfg->max_rate, value, 0, 1ull << 40);
    if (strcmp(key, "keepalive_timeout") == 0)
        return parse_duration_ms(value, &cfg->keepalive_ms);
    if (strcmp(key, "max_redirects") == 0)
        return parse_uint(value, 0, 50, &cfg->max_redirects);
    if (strcmp(key, "ca_file") == 0)
        return set_string(&cfg->ca_file, value);
    if (strcmp(key, "ca_path") == 0)
        return set_optional(&cfg->ca_path, value);
    if (strcmp(key, "tls_ciphers") == 0)
        return set_string(&cfg->tls_ciphers, value);
    if (strcmp(key, "tls_insecure_hosts") == 0)
        return set_optional(&cfg->tls_insecure_hosts, value);
    if (strcmp(key, "deny_networks") == 0 || strcmp(key, "allow_networks") == 0) {
        if (netpolicy_check_networks(value))
            return -EINVAL;
        return set_optional(key[0] == 'd' ? &cfg->deny_networks : &cfg->allow_networks, value);
    }
    if (strcmp(key, "allow_hosts") == 0 || strcmp(key, "deny_hosts") == 0) {
        if (netpolicy_check_hosts(value)) /* an item no URL's host could ever match */
            return -EINVAL;
        return set_optional(key[0] == 'a' ? &cfg->allow_hosts : &cfg->deny_hosts, value);
    }
    if (strcmp(key, "proxy") == 0) {
        proxy_t p = {.authz = NULL};
        int rc = *value ? proxy_parse(value, &p, NULL) : 0;
        proxy_free(&p);
        return rc ? -EINVAL : set_set_string(&cfg->proxy, value);
    }
    if (strcmp(key, "no_proxy") == 0)
        return set_set_string(&cfg->no_proxy, value);
    if (strcmp(key, "mirror") == 0)
        return add_mirror(cfg, value);
    if (strcmp(key, "mirror_fallback") == 0)
        return parse_bool(value, &cfg->mirror_fallback);
    if (strcmp(key, "http_listen") == 0) {
        char item[HOSTPORT_TEXT_MAX];
        const char *why;
        return set_http_listen(cfg, value, item, sizeof item, &why);
    }
    if (strcmp(key, "hf_upstream") == 0) {
        char *canon = NULL;
        const char *why;
        int rc = check_upstream(value, &canon, &why);
        if (!rc) {
            free(cfg->hf_upstream);
            cfg->hf_upstream = canon;
        }
        return rc;
    }
    if (strcmp(key, "log_level") == 0) {
        int lvl = log_level_parse(value);
        if (lvl < 0)
            return lvl;
        cfg->log_level = lvl;
        return 0;
    }
    return -ENOENT;
}

struct ini_ctx {
    hubd_config_t *cfg;
    char *err;
    size_t errlen;
    int rc;
    FILE *f;          /* the file read, or NULL: */
    const char *text; /* the text read (config_load_string) */
    int lines;        /* lines read so far: the handler's is the last */
    int mid_line;     /* the last read ended inside a line (longer than inih reads) */
    int err_line;     /* the line err names (the first error's), 0: none yet */
};

/* inih reports the first error's line and goes on; only the first error's
 * message is kept, so that the two name the same line. */
static int on_ini_key_checked(void *user, const char *section, const char *name, const char *value);
static int on_ini_key(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *ctx = user;
    char why[512] = "";
    struct ini_ctx one = *ctx;
    one.err = why;
    one.errlen = sizeof why;
    one.rc = 0;
    int ok = on_ini_key_checked(&one, section, name, value);
    if (!ok && !ctx->err_line) {
        ctx->err_line = ctx->lines;
        ctx->rc = one.rc;
        snprintf(ctx->err, ctx->errlen, "%s", why);
    }
    return ok;
}

/* inih's reader, fgets-like over the file or the text, counting lines. */
static char *count_lines(char *str, int num, void *stream)
{
    struct ini_ctx *ctx = stream;
    char *r = NULL;
    if (ctx->f) {
        r = fgets(str, num, ctx->f);
    } else if (*ctx->text && num > 1) {
        size_t n = strcspn(ctx->text, "\n");
        n += ctx->text[n] == '\n';
        n = n < (size_t)num - 1 ? n : (size_t)num - 1;
        memcpy(str, ctx->text, n);
        str[n] = '\0';
        ctx->text += n;
        r = str;
    }
    /* inih reads a long line in several pieces: one line, counted once. */
    if (r && !ctx->mid_line)
        ctx->lines++;
    ctx->mid_line = r && r[0] && r[strlen(r) - 1] != '\n';
    return r;
}

/* Parses what ctx reads; label names it in err ("FILE:LINE: why"). */
static int load_ini(struct ini_ctx *ctx, const char *label, char *err, size_t errlen)
{
    int line = ini_parse_stream(count_lines, ctx, on_ini_key, ctx);
    if (line == 0)
        return 0;
    /* A syntax error before the first bad key: that is what the line has. */
    snprintf(err, errlen, "%s:%d: %s", label, line,
             ctx->err_line == line || ctx->err_line == 0 ? ctx->err : "syntax error");
    return ctx->rc && ctx->err_line == line ? ctx->rc : -EINVAL;
}

static int on_ini_key_checked(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *ctx = user;
    if (*section && strcmp(section, "hubd") != 0) {
        snprintf(ctx->err, ctx->errlen, "unknown section [%s]", section);
        ctx->rc = -EINVAL;
        return 0;
    }
    int rc = config_set(ctx->cfg, name, value);
    char item[HOSTPORT_TEXT_MAX];
    const char *reason = "";
    if (rc && rc != -ENOMEM && strcmp(name, "http_listen") == 0) {
        /* Parsed again for the item and the reason; the config is unchanged. */
        struct sockaddr_storage addrs[HOSTPORT_MAX_ADDRS];
        size_t n;
        hostport_parse_list(value, addrs, HOSTPORT_MAX_ADDRS, &n, item, sizeof item, &reason);
        snprintf(ctx->err, ctx->errlen, "http_listen: %s %s", item, reason);
    } else if (rc == -EINVAL && strcmp(name, "hf_upstream") == 0) {
        char *canon = NULL;
        check_upstream(value, &canon, &reason);
        free(canon);
        snprintf(ctx->err, ctx->errlen, "bad value '%s' for key 'hf_upstream': %s", value, reason);
    } else if (rc == -ENOENT)
        snprintf(ctx->err, ctx->errlen, "unknown key '%s'", name);
    else if (rc == -ERANGE)
        snprintf(ctx->err, ctx->errlen,
                 "bad value '%s' for key '%s': out of range (a duration: at most 49 days)", value,
                 name);
    else if (rc == -EDOM)
        snprintf(ctx->err, ctx->errlen,
                 "bad value '%s' for key '%s': a timeout of 0 would fail every download "
                 "(give at least 1ms)",
                 value, name);
    else if (rc && strcmp(name, "proxy") == 0) { /* the value may hold a password: not shown */
        const char *why = "";
        proxy_t p = {.authz = NULL};
        proxy_parse(value, &p, &why);
        proxy_free(&p);
        snprintf(ctx->err, ctx->errlen, "bad value for key 'proxy': %s", why);
    } else if (rc == -E2BIG)
        snprintf(ctx->err, ctx->errlen, "too many rules for key '%s' (at most %d)", name,
                 MIRROR_MAX_RULES);
    else if (rc == -EINVAL && strcmp(name, "mirror") == 0) {
        mirror_rule_t r;
        const char *why = "bad rule";
        if (mirror_rule_parse(value, &r, &why) == 0) /* cannot be: it just failed */
            mirror_rule_free(&r);
        snprintf(ctx->err, ctx->errlen, "bad value '%s' for key '%s': %s", value, name, why);
    } else if (rc)
        snprintf(ctx->err, ctx->errlen, "bad value '%s' for key '%s'", value, name);
    ctx->rc = rc;
    return rc == 0;
}

int config_load_file(hubd_config_t *cfg, const char *path, char *err, size_t errlen)
{
    char why[512] = "syntax error";
    struct ini_ctx ctx = {.cfg = cfg, .err = why, .errlen = sizeof why};
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    ctx.f = f;
    int rc = load_ini(&ctx, path, err, errlen);
    fclose(f);
    return rc;
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

static const char *level_name(int level)
{
    switch (level) {
    case LOG_LVL_ERR:
        return "error";
    case LOG_LVL_WARN:
        return "warning";
    case LOG_LVL_DEBUG:
        return "debug";
    default:
        return "info";
    }
}

/* proxy and no_proxy as set, the password masked; unset keys as comments,
 * since the environment decides then (hubd --check-config adds what). */
static void print_proxy(FILE *out, const hubd_config_t *cfg)
{
    proxy_t p = {.authz = NULL};
    if (!cfg->proxy)
        fprintf(out, "# proxy: not set, the environment decides (https_proxy, ...)\n");
    else if (!*cfg->proxy)
        fprintf(out, "proxy =\n");
    else if (proxy_parse(cfg->proxy, &p, NULL) == 0)
        fprintf(out, "%sproxy = %s\n", p.authz ? "# the password is not shown\n" : "",
                p.authz ? p.shown : p.label);
    proxy_free(&p);
    if (cfg->no_proxy)
        fprintf(out, "no_proxy = %s\n", cfg->no_proxy);
    else
        fprintf(out, "# no_proxy: not set\n");
}

void config_print(const hubd_config_t *cfg, FILE *out)
{
    fprintf(out, "[hubd]\n");
    fprintf(out, "socket = %s\n", cfg->socket_path);
    fprintf(out, "socket_mode = %04o\n", cfg->socket_mode);
    fprintf(out, "socket_group = %s\n", cfg->socket_group ? cfg->socket_group : "");
    fprintf(out, "admin_group = %s\n", cfg->admin_group ? cfg->admin_group : "");
    fprintf(out, "allow_users = %s\n", cfg->allow_users ? cfg->allow_users : "");
    fprintf(out, "allow_groups = %s\n", cfg->allow_groups ? cfg->allow_groups : "");
    fprintf(out, "max_requests_per_user = %u\n", cfg->max_requests_per_user);
    fprintf(out, "max_jobs_per_user = %u\n", cfg->max_jobs_per_user);
    fprintf(out, "cache_dir = %s\n", cfg->cache_dir);
    print_size(out, "max_cache_size", cfg->max_cache_size);
    print_size(out, "max_file_size", cfg->max_file_size);
    print_size(out, "read_buffer_size", cfg->read_buffer_size);
    print_size(out, "max_inflight", cfg->max_inflight);
    fprintf(out, "max_downloads = %u\n", cfg->max_downloads);
    fprintf(out, "max_per_host = %u\n", cfg->max_per_host);
    print_size(out, "segment_min_size", cfg->segment_min_size);
    print_size(out, "segment_chunk_size", cfg->segment_chunk_size);
    fprintf(out, "max_connections_per_download = %u\n", cfg->max_connections_per_download);
    print_size(out, "segment_budget", cfg->segment_budget);
    print_ms(out, "segment_stall_timeout", cfg->segment_stall_timeout_ms);
    print_ms(out, "connect_timeout", cfg->connect_timeout_ms);
    print_ms(out, "idle_timeout", cfg->idle_timeout_ms);
    print_ms(out, "keepalive_timeout", cfg->keepalive_ms);
    print_ms(out, "first_byte_timeout", cfg->first_byte_timeout_ms);
    print_ms(out, "deadline", cfg->deadline_ms);
    print_ms(out, "header_timeout", cfg->header_timeout_ms);
    fprintf(out, "low_speed_limit = %u\n", cfg->low_speed_limit);
    print_ms(out, "low_speed_time", cfg->low_speed_time_ms);
    if (cfg->min_free_percent)
        fprintf(out, "min_free_space = %u%%\n", cfg->min_free_percent);
    else
        print_size(out, "min_free_space", cfg->min_free_space);
    print_ms(out, "verify_interval", cfg->verify_interval_ms);
    print_ms(out, "revalidate_after", cfg->revalidate_after_ms);
    print_size(out, "max_rate", cfg->max_rate);
    fprintf(out, "retries = %u\n", cfg->retries);
    print_ms(out, "retry_delay", cfg->retry_delay_ms);
    print_ms(out, "retry_max_delay", cfg->retry_max_delay_ms);
    fprintf(out, "max_redirects = %u\n", cfg->max_redirects);
    fprintf(out, "log_level = %s\n", level_name(cfg->log_level));
    /* ca_file's default is "the system bundle", which has no spelling. */
    if (cfg->ca_file)
        fprintf(out, "ca_file = %s\n", cfg->ca_file);
    fprintf(out, "ca_path = %s\n", cfg->ca_path ? cfg->ca_path : "");
    fprintf(out, "tls_ciphers = %s\n", cfg->tls_ciphers);
    fprintf(out, "tls_insecure_hosts = %s\n",
            cfg->tls_insecure_hosts ? cfg->tls_insecure_hosts : "");
    fprintf(out, "deny_networks = %s\n", cfg->deny_networks ? cfg->deny_networks : "");
    fprintf(out, "allow_networks = %s\n", cfg->allow_networks ? cfg->allow_networks : "");
    fprintf(out, "allow_hosts = %s\n", cfg->allow_hosts ? cfg->allow_hosts : "");
    fprintf(out, "deny_hosts = %s\n", cfg->deny_hosts ? cfg->deny_hosts : "");
    print_proxy(out, cfg);
    for (size_t i = 0; i < cfg->nmirrors; i++) {
        char rule[2 * URL_MAX_LEN + 32];
        mirror_rule_format(&cfg->mirrors[i], rule, sizeof rule);
        fprintf(out, "mirror = %s\n", rule);
    }
    fprintf(out, "mirror_fallback = %s\n", cfg->mirror_fallback ? "yes" : "no");
    fprintf(out, "http_listen = %s\n", cfg->http_listen ? cfg->http_listen : "");
    fprintf(out, "hf_upstream = %s\n", cfg->hf_upstream);
    print_ms(out, "http_header_timeout", cfg->http_header_timeout_ms);
}

/* Whether two configs hold the same mirror rules, in the same order. */
static int mirrors_differ(const hubd_config_t *a, const hubd_config_t *b)
{
    if (a->nmirrors != b->nmirrors)
        return 1;
    for (size_t i = 0; i < a->nmirrors; i++)
        if (strcmp(a->mirrors[i].prefix, b->mirrors[i].prefix) != 0 ||
            strcmp(a->mirrors[i].replacement, b->mirrors[i].replacement) != 0 ||
            a->mirrors[i].credentials != b->mirrors[i].credentials)
            return 1;
    return 0;
}

static int str_differs(const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

static void note_key(char *buf, size_t cap, const char *key)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", key);
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

void config_apply_runtime(hubd_config_t *cfg, const hubd_config_t *next, char *needs_restart,
                          size_t cap)
{
    needs_restart[0] = '\0';
    cfg->log_level = next->log_level;
    cfg->max_cache_size = next->max_cache_size;
    cfg->max_file_size = next->max_file_size;
    cfg->max_downloads = next->max_downloads;
    cfg->max_per_host = next->max_per_host;
    cfg->segment_min_size = next->segment_min_size;
    cfg->segment_chunk_size = next->segment_chunk_size;
    cfg->max_connections_per_download = next->max_connections_per_download;
    cfg->segment_budget = next->segment_budget;
    cfg->segment_stall_timeout_ms = next->segment_stall_timeout_ms;
    cfg->connect_timeout_ms = next->connect_timeout_ms;
    cfg->idle_timeout_ms = next->idle_timeout_ms;
    cfg->first_byte_timeout_ms = next->first_byte_timeout_ms;
    cfg->keepalive_ms = next->keepalive_ms;
    cfg->deadline_ms = next->deadline_ms;
    cfg->header_timeout_ms = next->header_timeout_ms;
    cfg->http_header_timeout_ms = next->http_header_timeout_ms;
    cfg->low_speed_limit = next->low_speed_limit;
    cfg->low_speed_time_ms = next->low_speed_time_ms;
    cfg->min_free_space = next->min_free_space;
    cfg->min_free_percent = next->min_free_percent;
    cfg->verify_interval_ms = next->verify_interval_ms;
    cfg->revalidate_after_ms = next->revalidate_after_ms;
    cfg->max_rate = next->max_rate;
    cfg->retries = next->retries;
    cfg->retry_delay_ms = next->retry_delay_ms;
    cfg->retry_max_delay_ms = next->retry_max_delay_ms;
    cfg->max_redirects = next->max_redirects;
    cfg->max_requests_per_user = next->max_requests_per_user;
    cfg->max_jobs_per_user = next->max_jobs_per_user;
    take_string(&cfg->allow_users, next->allow_users);
    take_string(&cfg->allow_groups, next->allow_groups);
    take_string(&cfg->admin_group, next->admin_group);
    take_string(&cfg->ca_file, next->ca_file); /* the bundle is read again (main.c) */
    take_string(&cfg->ca_path, next->ca_path);
    /* Bound at start-up: sockets, buffers, files, the TLS context. */
    if (strcmp(cfg->socket_path, next->socket_path) != 0)
        note_key(needs_restart, cap, "socket");
    if (cfg->socket_mode != next->socket_mode)
        note_key(needs_restart, cap, "socket_mode");
    if (str_differs(cfg->socket_group, next->socket_group))
        note_key(needs_restart, cap, "socket_group");
    if (strcmp(cfg->cache_dir, next->cache_dir) != 0)
        note_key(needs_restart, cap, "cache_dir");
    if (cfg->read_buffer_size != next->read_buffer_size)
        note_key(needs_restart, cap, "read_buffer_size");
    if (cfg->max_inflight != next->max_inflight)
        note_key(needs_restart, cap, "max_inflight");
    if (strcmp(cfg->tls_ciphers, next->tls_ciphers) != 0)
        note_key(needs_restart, cap, "tls_ciphers");
    if (str_differs(cfg->tls_insecure_hosts, next->tls_insecure_hosts))
        note_key(needs_restart, cap, "tls_insecure_hosts");
    if (str_differs(cfg->deny_networks, next->deny_networks))
        note_key(needs_restart, cap, "deny_networks");
    if (str_differs(cfg->allow_networks, next->allow_networks))
        note_key(needs_restart, cap, "allow_networks");
    if (str_differs(cfg->allow_hosts, next->allow_hosts))
        note_key(needs_restart, cap, "allow_hosts");
    if (str_differs(cfg->deny_hosts, next->deny_hosts))
        note_key(needs_restart, cap, "deny_hosts");
    if (str_differs(cfg->proxy, next->proxy))
        note_key(needs_restart, cap, "proxy");
    if (str_differs(cfg->no_proxy, next->no_proxy))
        note_key(needs_restart, cap, "no_proxy");
    /* Read by jobs as they start; kept simple: a restart applies them. */
    if (mirrors_differ(cfg, next))
        note_key(needs_restart, cap, "mirror");
    if (cfg->mirror_fallback != next->mirror_fallback)
        note_key(needs_restart, cap, "mirror_fallback");
    /* The listening sockets are bound once (or systemd's). */
    if (str_differs(cfg->http_listen, next->http_listen))
        note_key(needs_restart, cap, "http_listen");
    if (strcmp(cfg->hf_upstream, next->hf_upstream) != 0)
        note_key(needs_restart, cap, "hf_upstream");
}

void config_free(hubd_config_t *cfg)
{
    free(cfg->socket_path);
    free(cfg->cache_dir);
    free(cfg->ca_file);
    free(cfg->ca_path);
    free(cfg->tls_ciphers);
    free(cfg->tls_insecure_hosts);
    free(cfg->socket_group);
    free(cfg->admin_group);
    free(cfg->allow_users);
    free(cfg->allow_groups);
    cfg->allow_users = cfg->allow_groups = NULL;
    free(cfg->deny_networks);
    free(cfg->allow_networks);
    free(cfg->allow_hosts);
    free(cfg->deny_hosts);
    free(cfg->proxy);
    free(cfg->no_proxy);
    cfg->proxy = cfg->no_proxy = NULL;
    cfg->socket_group = cfg->admin_group = NULL;
    cfg->deny_networks = cfg->allow_networks = cfg->allow_hosts = cfg->deny_hosts = NULL;
    cfg->socket_path = cfg->cache_dir = cfg->ca_file = cfg->ca_path = NULL;
    cfg->tls_ciphers = cfg->tls_insecure_hosts = NULL;
    mirrors_clear(cfg);
    free(cfg->http_listen);
    free(cfg->hf_upstream);
    cfg->http_listen = cfg->hf_upstream = NULL;
    cfg->nhttp_addrs = 0;
}

/* Fuzzing (tests/fuzz/fuzz_config.c): config_load_file's parse of text in
 * memory, with the same per-key handler; errors name "<string>:LINE". */
int config_load_string(hubd_config_t *cfg, const char *text, char *err, size_t errlen)
{
    char why[512] = "syntax error";
    struct ini_ctx ctx = {.cfg = cfg, .err = why, .errlen = sizeof why, .text = text};
    return load_ini(&ctx, "<string>", err, errlen);
}
