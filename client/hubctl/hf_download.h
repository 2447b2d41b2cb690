/* hf_download: `hubctl hf download`, a Hub repo through hubd into the HF
 * cache (hf_layout.h), a --local-dir, or (--warm) hubd's cache alone.
 *
 * One connection: HFREPO lists the repo at a commit (hubd asks the Hub's
 * API with the user's token); the files wanted (FILE operands, or
 * --include / --exclude) that are not on disk already are FETCHed from the
 * Hub's resolve URL at that commit, at most HF_MAX_IN_FLIGHT at a time;
 * each one's bytes are checked (hubd checks an LFS file's sha256, hubctl a
 * small file's git blob id through the descriptor), then HOLD asks hubd to
 * keep the blob and let the user read it, and the blob is placed: a
 * symlink into hubd's store, else a reflink, else a copy (said once). The
 * refs and snapshot links follow. Progress covers the whole repo; stdout
 * gets the snapshot folder (or the one FILE's path) in --format's shape
 * (hf_format.h), or with --json-files one object per file. --dry-run stops
 * at the listing: which files are in place and which would be fetched,
 * nothing written. HELLO's hf_upstream and hf_front are checked against
 * HF_ENDPOINT (hf_endpoint.h). */
#ifndef HUBCTL_HF_DOWNLOAD_H
#define HUBCTL_HF_DOWNLOAD_H

#include "hf_cli.h"

#define HF_MAX_IN_FLIGHT 8 /* FETCHes out at once */

/* Runs it; returns the exit code (the worst of the files': 3, 4, then 1). */
int hf_download_run(const hf_opts_t *o);

#endif
