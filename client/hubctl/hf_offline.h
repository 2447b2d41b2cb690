/* hf_offline: `hubctl hf download` with HF_HUB_OFFLINE set, as the Hub's
 * own clients answer then: no network and no hubd (no socket is opened),
 * only what the HF cache, or --local-dir, already holds.
 *
 * The lookup is huggingface_hub's (try_to_load_from_cache, and the offline
 * branches of hf_hub_download and snapshot_download): a revision that is a
 * commit (40 lower-case hex) is taken as it is, else refs/{revision} names
 * the commit; each FILE named must be snapshots/{commit}/{FILE} and
 * resolve (a link to a blob an admin removed is not a file); with no FILE
 * named, the folder snapshots/{commit} must exist. --local-dir: each
 * {local}/{FILE} is a regular file; with no FILE named, the folder exists
 * and is not empty. It prints what the online run prints (the snapshot
 * folder, the one FILE's path, in --format's shape, or with --json-files
 * one object per file; --dry-run: the files found, as in place), or
 * says on stderr what is not cached and exits 1.
 *
 * The same answer serves a run that cannot reach the Hub (hubd answers
 * HFREPO, or a file's FETCH, with one of the codes hf_offline_outage
 * names), as huggingface_hub falls back on its cache when its HEAD or
 * repo-info call fails so: a note on stderr names the reason, and when the
 * cache does not hold the answer either, the Hub's reason is the error.
 * Single-threaded. */
#ifndef HUBCTL_HF_OFFLINE_H
#define HUBCTL_HF_OFFLINE_H

#include "hf_cli.h"
#include "hf_layout.h"

/* Is HF_HUB_OFFLINE (else, when it is unset or empty, TRANSFORMERS_OFFLINE)
 * 1, on, yes or true, in any case, as huggingface_hub reads it? */
int hf_offline(void);

/* The offline hf download of o (checked by hf_cli). Returns the exit
 * code. */
int hf_offline_run(const hf_opts_t *o);

/* Does hubd's ERR code say that the Hub gave no answer (it cannot be
 * reached, timed out, or failed: a 5xx), rather than an answer about the
 * repo (401, 403, 404) or a refusal of hubd's own? */
int hf_offline_outage(const char *code);

/* The answer of hf_offline_run, for a run whose HFREPO got the outage
 * code and msg (hubd's, cleaned here): "note: cannot reach the Hub (...)"
 * once on stderr and the cached answer, else the Hub's reason and what is
 * not cached. Returns the exit code. */
int hf_offline_fallback(const hf_opts_t *o, const char *code, const char *msg);

/* A revision that is a commit, one FILE, no --local-dir or --warm, and
 * snapshots/{commit}/{FILE} resolves: the answer needs no request at all,
 * as huggingface_hub's hf_hub_download answers it (hf_offline_run prints
 * it). */
int hf_offline_commit_cached(const hf_opts_t *o);

/* Is repo file path at commit in l (snapshots/{commit}/{path} resolves,
 * or the local dir's {path} is a regular file), as the offline lookup
 * finds a file? For a file whose FETCH got an outage code. */
int hf_offline_has_file(const hf_layout_t *l, const char *commit, const char *path);

/* "hubctl: note: cannot reach the Hub (MSG; CODE): answered from the
 * cache DIR" on stderr (the local dir's, with --local-dir). */
void hf_offline_note(const hf_opts_t *o, const char *code, const char *msg);

#endif
