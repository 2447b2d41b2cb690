/* cli: hubctl's command line, and the table of commands it runs.
 *
 * cli_parse fills a cli_t from argv; cli_dispatch checks which options and
 * operands the command takes and runs it. The cli_t lives for the whole run
 * (main owns it) and every command reads it; nothing writes it after
 * cli_parse. */
#ifndef HUBCTL_CLI_H
#define HUBCTL_CLI_H

#include "usage.h"

#include <stddef.h>

#define CLI_RUN (-1) /* cli_parse: go on and run the command */

typedef struct cli {
    const char *socket;   /* --socket, NULL for the default */
    const char *command;  /* first operand: fetch, status, stats, ls */
    const char *sha256;   /* --sha256 HEX */
    const char *dest;     /* -o DEST */
    const char *input;    /* -i FILE: URLs (and sha256=) one per line; "-": stdin */
    int quiet;            /* -q */
    int json;             /* --json */
    int progress;         /* --progress */
    int refresh;          /* --refresh */
    int prometheus;       /* --prometheus (stats) */
    int force;            /* --force (rm): even a blob users' HF caches hold */
    const char *max_size; /* --max-size (gc) */
    char **headers;       /* -H, in order (fetch); copies, freed by cli_free */
    size_t nheaders;
    /* hf download (hf_cli.h) */
    const char *repo_type; /* --repo-type model|dataset|space */
    const char *revision;  /* --revision: branch, tag, commit or refs/pr/N */
    const char *cache_dir; /* --cache-dir: the HF cache */
    const char *local_dir; /* --local-dir: plain files there instead */
    const char *token;     /* --token: a Hub token */
    const char **include;  /* --include GLOB, in order; the array is cli_free's */
    size_t ninclude;
    const char **exclude; /* --exclude GLOB, in order; likewise */
    size_t nexclude;
    int warm;                 /* --warm: into hubd's cache only */
    const char *max_workers;  /* --max-workers N: FETCHes out at once */
    int force_download;       /* --force-download: fetched and placed again */
    const char *use_symlinks; /* --local-dir-use-symlinks (deprecated, ignored) */
    int resume_download;      /* --resume-download (deprecated, ignored) */
    int dry_run;              /* --dry-run: list what would be fetched, fetch nothing */
    const char *format;       /* --format auto|human|agent|json|quiet (json and quiet also
                                 set json and quiet: cli_parse) */
    int json_files;           /* --json-files: one object per file (hf download) */
    /* hf ls, hf rm (hf_holds.h) parse their own options: argv from the
     * subcommand on, untouched by cli_parse; NULL otherwise */
    char **hf_argv;
    int hf_argc;
    const char **args; /* operands after the command (URLs) */
    size_t nargs;      /* entries of args */
} cli_t;

/* Options may stand anywhere; "--" ends them, and a lone "-" is an operand.
 * Returns CLI_RUN to go on, or an exit code (help and version end the
 * program successfully, here). Call cli_free either way. */
int cli_parse(int argc, char **argv, cli_t *c);

/* Runs the command; returns the exit code. */
int cli_dispatch(const cli_t *c);

void cli_free(cli_t *c);

#endif
