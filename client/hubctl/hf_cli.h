/* hf_cli: `hubctl hf SUBCOMMAND`, the Hugging Face commands.
 *
 * hf_run picks the subcommand (download; the holds' ls and rm) and, for
 * download, turns the command line and the environment into an hf_opts_t
 * the way the Hub's own clients read them: the token (--token, $HF_TOKEN,
 * $HF_TOKEN_PATH, $HF_HOME/token) and the cache folder (--cache-dir,
 * $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
 * ~/.cache/huggingface/hub). Everything is checked before hubd is asked
 * anything; with HF_HUB_OFFLINE set, hubd is not asked at all (hf_offline.h).
 * Single-threaded; the hf_opts_t lives on hf_run's stack. */
#ifndef HUBCTL_HF_CLI_H
#define HUBCTL_HF_CLI_H

#include "cli.h"
#include "hf_format.h"

typedef struct hf_opts {
    const cli_t *cli;     /* --json, -q, --progress, --socket, --include... */
    const char *repo;     /* org/name or name */
    const char *type;     /* model, dataset or space */
    const char *revision; /* --revision, else "main" */
    char *token;          /* the Hub token, stripped, or NULL; owned */
    char *cache_dir;      /* the HF cache folder, absolute; owned (NULL with --warm) */
    char *local_dir;      /* --local-dir, absolute, or NULL; owned */
    const char **files;   /* FILE operands: only these, by their repo path */
    size_t nfiles;        /* entries of files */
    size_t max_workers;   /* --max-workers, or 0: HF_MAX_IN_FLIGHT */
    hf_format_t format;   /* stdout's shape: --format, --json, -q (hf_format.h) */
} hf_opts_t;

/* --max-workers at most: hubd reads no more of a session's 64 FETCHes */
#define HF_MAX_WORKERS 32

/* `hubctl hf ...`: the subcommand in c->args[0]. Returns the exit code. */
int hf_run(const cli_t *c);

/* Were any of hf download's own options given (for the commands that take
 * none of them)? */
int hf_options_given(const cli_t *c);

#endif
