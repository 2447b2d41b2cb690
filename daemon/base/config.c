/* config: the walks over the settings table (config_keys.c): defaults,
 * key=value setters, the INI file (libinih) and its errors, the
 * --check-config print-out, what a reload may change. */
#include "config_internal.h"
#include "textnum.h"

#include <assert.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

/* Each row's default: its text through its own parser (so a default is a
 * value a file could give), or worked out from the environment (socket,
 * cache_dir), taken as the environment spells it. */
int config_defaults(hubd_config_t *cfg)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    int rc = 0;
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        int r = 0;
        if (k->def_fn) { /* a string's */
            char *v = k->def_fn();
            *(char **)(void *)((char *)cfg + k->off) = v;
            r = v ? 0 : -ENOMEM;
        } else if (k->def) {
            r = k->type->parse(cfg, k, k->def);
        }
        if (r && !rc)
            rc = r;
    }
    return rc;
}

int config_parse_size(const char *s, uint64_t *out)
{
    return parse_size(s, out);
}

int config_set(hubd_config_t *cfg, const char *key, const char *value)
{
    const config_key_t *k = config_key_find(key);
    return k ? k->type->parse(cfg, k, value) : -ENOENT;
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

/* Why a value was refused, when its type has nothing better to say. The
 * sizes marked CONFIG_ERANGE (a unit past 64 bits) reach -ERANGE too, with
 * the words they always had. */
static void explain_generic(const char *name, const char *value, int rc, char *err, size_t errlen)
{
    if (rc == -ERANGE)
        snprintf(err, errlen,
                 "bad value '%s' for key '%s': out of range (a duration: at most 49 days)", value,
                 name);
    else if (rc == -EDOM)
        snprintf(err, errlen,
                 "bad value '%s' for key '%s': a timeout of 0 would fail every download "
                 "(give at least 1ms)",
                 value, name);
    else
        snprintf(err, errlen, "bad value '%s' for key '%s'", value, name);
}

static int on_ini_key_checked(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *ctx = user;
    if (*section && strcmp(section, "hubd") != 0) {
        snprintf(ctx->err, ctx->errlen, "unknown section [%s]", section);
        ctx->rc = -EINVAL;
        return 0;
    }
    const config_key_t *k = config_key_find(name);
    int rc = k ? k->type->parse(ctx->cfg, k, value) : -ENOENT;
    /* The type says why when it knows more: the item of a list, a URL's
     * flaw, a proxy URL's (without its password). */
    if (!k)
        snprintf(ctx->err, ctx->errlen, "unknown key '%s'", name);
    else if (rc && !(k->type->explain && k->type->explain(k, value, rc, ctx->err, ctx->errlen)))
        explain_generic(name, value, rc, ctx->err, ctx->errlen);
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

void config_print(const hubd_config_t *cfg, FILE *out)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    fprintf(out, "[hubd]\n");
    for (size_t i = 0; i < n; i++)
        keys[i].type->print(cfg, &keys[i], out);
}

static void note_key(char *buf, size_t cap, const char *key)
{
    size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", key);
}

/* Row by row: a reloadable key's value is taken; any other that differs
 * is named, in the rows' order. */
void config_apply_runtime(hubd_config_t *cfg, const hubd_config_t *next, char *needs_restart,
                          size_t cap)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    needs_restart[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        if (k->flags & CONFIG_RELOAD) {
            assert(k->type->take); /* a row marked RELOAD has a type that can */
            k->type->take(cfg, next, k);
        } else if (k->type->differ(cfg, next, k)) {
            note_key(needs_restart, cap, k->name);
        }
    }
}

void config_free(hubd_config_t *cfg)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    for (size_t i = 0; i < n; i++)
        if (keys[i].type->release)
            keys[i].type->release(cfg, &keys[i]);
}

/* Fuzzing (tests/fuzz/fuzz_config.c): config_load_file's parse of text in
 * memory, with the same per-key handler; errors name "<string>:LINE". */
int config_load_string(hubd_config_t *cfg, const char *text, char *err, size_t errlen)
{
    char why[512] = "syntax error";
    struct ini_ctx ctx = {.cfg = cfg, .err = why, .errlen = sizeof why, .text = text};
    return load_ini(&ctx, "<string>", err, errlen);
}

int config_free_space_unmet(const hubd_config_t *cfg, char *why, size_t cap)
{
    char dir[PATH_MAX];
    struct statvfs v;
    if (cfg->min_free_percent || !cfg->min_free_space || !cfg->cache_dir ||
        snprintf(dir, sizeof dir, "%s", cfg->cache_dir) >= (int)sizeof dir)
        return 0;                   /* a share of the file system always fits it */
    while (statvfs(dir, &v) != 0) { /* not made yet: the folder it will be made in */
        char *slash = strrchr(dir, '/');
        if (errno != ENOENT || !slash || (slash == dir && dir[1] == '\0'))
            return 0;
        slash[slash == dir] = '\0'; /* "/a/b" to "/a", "/a" to "/" */
    }
    uint64_t total = (uint64_t)v.f_blocks * v.f_frsize;
    if (cfg->min_free_space <= total)
        return 0;
    snprintf(why, cap,
             "min_free_space (%llu bytes) is more than the whole file system of %s holds "
             "(%llu bytes): every download will be refused no_space; lower it, or give a "
             "share such as 5%%",
             (unsigned long long)cfg->min_free_space, cfg->cache_dir, (unsigned long long)total);
    return 1;
}
