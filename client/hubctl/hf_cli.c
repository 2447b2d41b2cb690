/* hf_cli: `hubctl hf SUBCOMMAND`: options, token and cache discovery. */
#include "hf_cli.h"

#include "hf_download.h"
#include "hf_holds.h"
#include "hf_offline.h"
#include "textnum.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPO_ID_MAX 96      /* huggingface_hub's validate_repo_id */
#define TOKEN_FILE_MAX 4096 /* a token file longer than this is not a token */

int hf_options_given(const cli_t *c)
{
    return c->repo_type || c->revision || c->cache_dir || c->local_dir || c->token || c->ninclude ||
           c->nexclude || c->warm || c->max_workers || c->force_download || c->use_symlinks ||
           c->resume_download || c->dry_run || c->format || c->json_files;
}

/* One part of a repo id: [A-Za-z0-9_.-]+, not starting or ending with '-'
 * or '.'. */
static int repo_part_ok(const char *s, size_t n)
{
    if (n == 0 || strchr("-.", s[0]) || strchr("-.", s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return 0;
    return 1;
}

int hf_repo_id_ok(const char *repo)
{
    size_t n = strlen(repo);
    const char *slash = strchr(repo, '/');
    if (n == 0 || n > REPO_ID_MAX || strstr(repo, "--") || strstr(repo, ".."))
        return 0;
    if (n > 4 && strcmp(repo + n - 4, ".git") == 0)
        return 0;
    if (!slash)
        return repo_part_ok(repo, n);
    return !strchr(slash + 1, '/') && repo_part_ok(repo, (size_t)(slash - repo)) &&
           repo_part_ok(slash + 1, n - (size_t)(slash - repo) - 1);
}

/* $HOME, else the password database's home: what expanduser reads. */
static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && *h)
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir ? pw->pw_dir : "/";
}

/* "~/x" as huggingface_hub's os.path.expanduser reads it. Malloc'd. */
static char *expand_home(const char *p)
{
    if (p[0] != '~' || (p[1] && p[1] != '/'))
        return xstrdup(p);
    const char *h = home_dir();
    char *out = xrealloc(NULL, strlen(h) + strlen(p));
    sprintf(out, "%s%s", h, p + 1);
    return out;
}

/* $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface,
 * then tail appended ("/hub", "/token"). Malloc'd. */
static char *hf_home_join(const char *tail)
{
    char buf[PATH_MAX];
    const char *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME");
    if (home && *home)
        snprintf(buf, sizeof buf, "%s%s", home, tail);
    else if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/huggingface%s", xdg, tail);
    else
        snprintf(buf, sizeof buf, "~/.cache/huggingface%s", tail);
    return expand_home(buf);
}

/* The token in s, stripped of surrounding white space; NULL when empty.
 * Malloc'd. */
static char *strip_token(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0)
        return NULL;
    char *t = xrealloc(NULL, n + 1);
    memcpy(t, s, n);
    t[n] = '\0';
    return t;
}

/* A token file's content, or NULL when it is missing, unreadable or empty
 * (the Hub's clients then go on without one). */
static char *read_token_file(const char *path)
{
    char buf[TOKEN_FILE_MAX + 1];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, TOKEN_FILE_MAX, f);
    fclose(f);
    buf[n] = '\0';
    return strip_token(buf);
}

char *hf_find_token(const char *given)
{
    const char *env = getenv("HF_TOKEN"), *path = getenv("HF_TOKEN_PATH");
    if (given)
        return strip_token(given);
    if (env && *env)
        return strip_token(env);
    char *file = path && *path ? expand_home(path) : hf_home_join("/token");
    char *tok = read_token_file(file);
    free(file);
    return tok;
}

/* dir made absolute against the working directory (it may not exist yet:
 * no realpath). Malloc'd. */
static char *absolute(const char *dir)
{
    char cwd[PATH_MAX];
    if (dir[0] == '/' || !getcwd(cwd, sizeof cwd))
        return xstrdup(dir);
    char *out = xrealloc(NULL, strlen(cwd) + strlen(dir) + 2);
    sprintf(out, "%s/%s", cwd, strcmp(dir, ".") == 0 ? "" : dir);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    return out;
}

char *hf_find_cache_dir(const char *given)
{
    const char *env = getenv("HF_HUB_CACHE");
    char *dir = given ? expand_home(given) : env && *env ? expand_home(env) : hf_home_join("/hub");
    char *abs = absolute(dir);
    free(dir);
    return abs;
}

/* Checks hf download's command line into o. Returns 0 or EXIT_USAGE. */
static int hf_download_plan(const cli_t *c, hf_opts_t *o)
{
    if (c->sha256 || c->dest || c->input || c->nheaders || c->refresh || c->max_size ||
        c->prometheus)
        return cli_usage_error("--sha256, -o, -i, -H, --refresh, --max-size and --prometheus are "
                               "not options of hf download");
    if (c->nargs < 2)
        return cli_usage_error("hf download needs a repo id (org/name)");
    o->repo = c->args[1];
    if (!hf_repo_id_ok(o->repo))
        return cli_usage_error("'%s' is not a Hub repo id (org/name or name)", o->repo);
    o->type = c->repo_type ? c->repo_type : "model";
    if (!str_eq(o->type, "model") && !str_eq(o->type, "dataset") && !str_eq(o->type, "space"))
        return cli_usage_error("--repo-type is model, dataset or space, not '%s'", o->type);
    o->revision = c->revision ? c->revision : "main";
    if (c->warm && (c->cache_dir || c->local_dir))
        return cli_usage_error("--warm fills hubd's cache only: no --cache-dir or --local-dir");
    if (c->warm && c->dry_run)
        return cli_usage_error("--dry-run lists what your HF cache lacks, and --warm fills "
                               "hubd's cache only: not both");
    if (hf_format_pick(c, &o->format) != 0)
        return EXIT_USAGE;
    o->files = c->args + 2;
    o->nfiles = c->nargs - 2;
    if (o->nfiles && (c->ninclude || c->nexclude) && !c->quiet)
        fputs("hubctl: warning: --include and --exclude are ignored when FILEs are named\n",
              stderr);
    if (c->max_workers) { /* hf download's, 8 by default; hubd bounds a session's 64 */
        uint64_t n;
        if (parse_u64(c->max_workers, &n) < 0 || n < 1 || n > HF_MAX_WORKERS)
            return cli_usage_error("--max-workers is a number from 1 to %d, not '%s'",
                                   HF_MAX_WORKERS, c->max_workers);
        o->max_workers = (size_t)n;
    }
    /* Deprecated in huggingface_hub, still in scripts copied from its docs. */
    if (c->use_symlinks && !c->quiet)
        fputs("hubctl: warning: --local-dir-use-symlinks is deprecated and ignored (as in "
              "`hf download`): --local-dir gets plain files\n",
              stderr);
    if (c->resume_download && !c->quiet)
        fputs("hubctl: warning: --resume-download is deprecated and ignored: downloads always "
              "resume\n",
              stderr);
    o->token = hf_find_token(c->token);
    if (c->local_dir)
        o->local_dir = absolute(c->local_dir);
    if (!c->warm)
        o->cache_dir = hf_find_cache_dir(c->cache_dir);
    return 0;
}

static int hf_download_cmd(const cli_t *c)
{
    hf_opts_t o = {.cli = c};
    int rc = hf_download_plan(c, &o);
    /* HF_HUB_OFFLINE, or a commit's file already cached: the cache alone,
     * as the Hub's clients answer them */
    if (rc == 0 && (hf_offline() || (!c->force_download && hf_offline_commit_cached(&o))))
        rc = hf_offline_run(&o);
    else if (rc == 0)
        rc = hf_download_run(&o);
    free(o.token);
    free(o.cache_dir);
    free(o.local_dir);
    return rc;
}

/* hf ls and hf rm take their own options (hf_holds.c): their argv as
 * cli_parse left it, with a --socket given before "hf" handed on. */
static int hf_raw(const cli_t *c, int (*run)(int argc, char **argv))
{
    char **v = xcalloc((size_t)c->hf_argc + 3, sizeof *v);
    int n = 0;
    v[n++] = c->hf_argv[0];
    if (c->socket)
        v[n++] = "--socket", v[n++] = (char *)c->socket;
    for (int k = 1; k < c->hf_argc; k++)
        v[n++] = c->hf_argv[k];
    int rc = run(n, v);
    free(v);
    return rc;
}

/* The subcommands of hf, one row each: ours parsed by cli_parse (run), or
 * parsing their own argv (raw). */
static const struct {
    const char *name;
    int (*run)(const cli_t *c);
    int (*raw)(int argc, char **argv);
} hf_commands[] = {
    {"download", hf_download_cmd, NULL}, /* REPO [FILE...]: into the HF cache */
    {"ls", NULL, hf_ls_main},            /* the holds: repos linked into HF caches */
    {"rm", NULL, hf_rm_main},            /* REPO: out of the HF cache, holds released */
};

int hf_run(const cli_t *c)
{
    if (c->nargs == 0)
        return cli_usage_error("hf needs a subcommand: download, ls or rm");
    for (size_t i = 0; i < ARRAY_LEN(hf_commands); i++) {
        if (!str_eq(c->args[0], hf_commands[i].name))
            continue;
        if (hf_commands[i].raw)
            return c->hf_argv ? hf_raw(c, hf_commands[i].raw) : EXIT_USAGE;
        return hf_commands[i].run(c);
    }
    return cli_usage_error("unknown hf subcommand '%s' (download, ls, rm)", c->args[0]);
}
