/* hf_cli: `hubctl hf SUBCOMMAND`: options, token and cache discovery. */
#include "hf_cli.h"

#include "hf_download.h"
#include "hf_env.h"
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

int hf_options_given(const cli_t *c)
{
    return c->repo_type || c->revision || c->cache_dir || c->local_dir || c->token || c->ninclude ||
           c->nexclude || c->warm || c->max_workers || c->force_download || c->use_symlinks ||
           c->resume_download || c->dry_run || c->format || c->json_files;
}

/* Checks hf download's command line into o. Returns 0 or EXIT_USAGE. */
static int hf_download_plan(const cli_t *c, hf_opts_t *o)
{
    if (c->sha256 || c->dest || c->input || c->nheaders || c->refresh || c->max_size ||
        c->prometheus)
        return usage_error("--sha256, -o, -i, -H, --refresh, --max-size and --prometheus are "
                           "not options of hf download");
    if (c->nargs < 2)
        return usage_error("hf download needs a repo id (org/name)");
    o->repo = c->args[1];
    if (!hf_repo_id_ok(o->repo))
        return usage_error("'%s' is not a Hub repo id (org/name or name)", o->repo);
    o->type = c->repo_type ? c->repo_type : "model";
    if (!str_eq(o->type, "model") && !str_eq(o->type, "dataset") && !str_eq(o->type, "space"))
        return usage_error("--repo-type is model, dataset or space, not '%s'", o->type);
    o->revision = c->revision ? c->revision : "main";
    if (c->warm && (c->cache_dir || c->local_dir))
        return usage_error("--warm fills hubd's cache only: no --cache-dir or --local-dir");
    if (c->warm && c->dry_run)
        return usage_error("--dry-run lists what your HF cache lacks, and --warm fills "
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
            return usage_error("--max-workers is a number from 1 to %d, not '%s'", HF_MAX_WORKERS,
                               c->max_workers);
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
        o->local_dir = hf_absolute(c->local_dir);
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
        return usage_error("hf needs a subcommand: download, ls or rm");
    for (size_t i = 0; i < ARRAY_LEN(hf_commands); i++) {
        if (!str_eq(c->args[0], hf_commands[i].name))
            continue;
        if (hf_commands[i].raw)
            return c->hf_argv ? hf_raw(c, hf_commands[i].raw) : EXIT_USAGE;
        return hf_commands[i].run(c);
    }
    return usage_error("unknown hf subcommand '%s' (download, ls, rm)", c->args[0]);
}
