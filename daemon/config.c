/* config: defaults, INI file (libinih), and key=value setters. */
#include "config.h"
#include "log.h"

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
    cfg->max_per_host = 8;
    cfg->connect_timeout_ms = 30 * 1000;
    cfg->idle_timeout_ms = 60 * 1000;
    cfg->first_byte_timeout_ms = 60 * 1000;
    cfg->retries = 5;
    cfg->retry_delay_ms = 500;
    cfg->retry_max_delay_ms = 30 * 1000;
    cfg->deadline_ms = 0;
    cfg->keepalive_ms = 30 * 1000;
    cfg->max_redirects = 10;
    cfg->log_level = LOG_LVL_INFO;
    cfg->socket_path = default_socket();
    cfg->cache_dir = default_cache_dir();
    /* Measured on the project machine (bench/tls_cipher_speed.c): mbedTLS
     * 2.28 decrypts ChaCha20-Poly1305 faster than AES-GCM here. */
    cfg->tls_ciphers = strdup("chacha20-poly1305,aes-128-gcm,aes-256-gcm");
    if (!cfg->socket_path || !cfg->cache_dir || !cfg->tls_ciphers)
        return -ENOMEM;
    return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return -EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'K':
    case 'k':
        shift = 10;
        end++;
        break;
    case 'M':
    case 'm':
        shift = 20;
        end++;
        break;
    case 'G':
    case 'g':
        shift = 30;
        end++;
        break;
    case 'T':
    case 't':
        shift = 40;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i' && shift) /* accept "MiB"-style spellings too */
        end++;
    if ((*end == 'B' || *end == 'b') && shift)
        end++;
    if (*end != '\0')
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Durations: plain seconds, or with an "ms" or "s" suffix. */
static int parse_ms(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || errno || *s == '-')
        return -EINVAL;
    unsigned long mult = 1000;
    if (strcmp(end, "ms") == 0)
        mult = 1;
    else if (*end != '\0' && strcmp(end, "s") != 0)
        return -EINVAL;
    if (v > UINT_MAX / mult)
        return -ERANGE;
    *out = (unsigned)(v * mult);
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
    int rc = config_parse_size(value, &v);
    if (rc)
        return rc;
    if (v < min || v > max)
        return -EINVAL;
    *slot = (size_t)v;
    return 0;
}

int config_set(hubd_config_t *cfg, const char *key, const char *value)
{
    if (strcmp(key, "socket") == 0)
        return set_string(&cfg->socket_path, value);
    if (strcmp(key, "cache_dir") == 0)
        return set_string(&cfg->cache_dir, value);
    if (strcmp(key, "read_buffer_size") == 0)
        return set_size(&cfg->read_buffer_size, value, 4096, 64u << 20);
    if (strcmp(key, "max_inflight") == 0)
        return set_size(&cfg->max_inflight, value, 64 * 1024, 1ull << 32);
    if (strcmp(key, "max_downloads") == 0)
        return parse_uint(value, 1, 10000, &cfg->max_downloads);
    if (strcmp(key, "max_per_host") == 0)
        return parse_uint(value, 1, 10000, &cfg->max_per_host);
    if (strcmp(key, "connect_timeout") == 0)
        return parse_ms(value, &cfg->connect_timeout_ms);
    if (strcmp(key, "idle_timeout") == 0)
        return parse_ms(value, &cfg->idle_timeout_ms);
    if (strcmp(key, "first_byte_timeout") == 0)
        return parse_ms(value, &cfg->first_byte_timeout_ms);
    if (strcmp(key, "retries") == 0)
        return parse_uint(value, 0, 100, &cfg->retries);
    if (strcmp(key, "retry_delay") == 0)
        return parse_ms(value, &cfg->retry_delay_ms);
    if (strcmp(key, "retry_max_delay") == 0)
        return parse_ms(value, &cfg->retry_max_delay_ms);
    if (strcmp(key, "deadline") == 0)
        return parse_ms(value, &cfg->deadline_ms);
    if (strcmp(key, "keepalive_timeout") == 0)
        return parse_ms(value, &cfg->keepalive_ms);
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
};

static int on_ini_key(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *ctx = user;
    if (*section && strcmp(section, "hubd") != 0) {
        snprintf(ctx->err, ctx->errlen, "unknown section [%s]", section);
        ctx->rc = -EINVAL;
        return 0;
    }
    int rc = config_set(ctx->cfg, name, value);
    if (rc == -ENOENT)
        snprintf(ctx->err, ctx->errlen, "unknown key '%s'", name);
    else if (rc)
        snprintf(ctx->err, ctx->errlen, "bad value '%s' for key '%s'", value, name);
    ctx->rc = rc;
    return rc == 0;
}

int config_load_file(hubd_config_t *cfg, const char *path, char *err, size_t errlen)
{
    char why[512] = "syntax error";
    struct ini_ctx ctx = {cfg, why, sizeof why, 0};
    FILE *f = fopen(path, "r");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    int line = ini_parse_file(f, on_ini_key, &ctx);
    fclose(f);
    if (line == 0)
        return 0;
    snprintf(err, errlen, "%s:%d: %s", path, line, why);
    return ctx.rc ? ctx.rc : -EINVAL;
}

void config_free(hubd_config_t *cfg)
{
    free(cfg->socket_path);
    free(cfg->cache_dir);
    free(cfg->ca_file);
    free(cfg->ca_path);
    free(cfg->tls_ciphers);
    free(cfg->tls_insecure_hosts);
    cfg->socket_path = cfg->cache_dir = cfg->ca_file = cfg->ca_path = NULL;
    cfg->tls_ciphers = cfg->tls_insecure_hosts = NULL;
}
