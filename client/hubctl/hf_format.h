/* hf_format: what `hubctl hf download` prints on stdout, in the shapes of
 * huggingface_hub's `hf download --format auto|human|agent|json|quiet`
 * (--json and -q being --format json and quiet there too).
 *
 * A download's result is one path (the snapshot folder, the one FILE's, or
 * the local dir): hf prints it as "✓ Downloaded" and "  path: P" (human),
 * "path=P" (agent), {"path": P} (json) or P alone (quiet). hubctl's default
 * (auto) is the path alone, as it always printed it: scripts take it with
 * $(...). A dry run prints hf's "[dry-run] Will download N files (out of M)
 * totalling S." and a table of FILE and SIZE (huggingface_hub's _format_size,
 * "-" for a file that would not be fetched): padded (human, auto; hubctl
 * adds a CACHED column), tab-separated (agent), a JSON array of
 * {"file", "size"} (json), or the file names (quiet).
 *
 * --json-files is hubctl's own: one JSON object per file instead, as each
 * file ends (hf_download.c writes them), or a dry run's huggingface_hub
 * DryRunFileInfo fields (filename, file_size, is_cached, will_download,
 * local_path, commit_hash). Single-threaded; nothing here talks to hubd. */
#ifndef HUBCTL_HF_FORMAT_H
#define HUBCTL_HF_FORMAT_H

#include "cli.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
    HF_FMT_AUTO,  /* the default: the path alone; a dry run as human */
    HF_FMT_HUMAN, /* hf's human shape */
    HF_FMT_AGENT, /* hf's agent shape: key=value, tab-separated tables */
    HF_FMT_JSON,  /* --json, --format json */
    HF_FMT_QUIET, /* -q, --format quiet: the path, or the file names */
} hf_format_t;

/* The format c asks for (cli_parse made --format json and quiet into
 * --json and -q). A usage error (EXIT_USAGE, said) for a value that is
 * none, two shapes asked at once (--format human with --json; --json-files
 * with --json or --format), or --warm with a shape of the path (it places
 * nothing); -q with --json or --json-files only quiets stderr, as before.
 * Returns 0 or EXIT_USAGE. */
int hf_format_pick(const cli_t *c, hf_format_t *fmt);

/* A download's result, path, on stdout in fmt's shape. */
void hf_format_result(hf_format_t fmt, const char *path);

/* One file of a dry run: what a run without --dry-run would do. */
typedef struct hf_dry_file {
    char *filename;    /* its path in the repo; owned */
    uint64_t size;     /* its size in bytes */
    int cached;        /* already in the HF cache (or the local dir) */
    int will_download; /* not cached, or --force-download */
    char *local_path;  /* where it is, or would be; owned */
} hf_dry_file_t;

typedef struct hf_dry {
    hf_dry_file_t *files; /* in the order added; owned */
    size_t n, cap;        /* entries used, and allocated */
    char *commit;         /* the commit the files are at, or NULL when unknown; owned */
} hf_dry_t;

/* Adds a file (the strings are copied). */
void hf_dry_add(hf_dry_t *d, const char *filename, uint64_t size, int cached, int will_download,
                const char *local_path);

/* The dry run on stdout: fmt's shape, or with json_files one object per
 * file. */
void hf_dry_print(const hf_dry_t *d, hf_format_t fmt, int json_files);

void hf_dry_free(hf_dry_t *d);

#endif
