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
 * folder, the one FILE's path, or with --json one object per file), or
 * says on stderr what is not cached and exits 1. Single-threaded. */
#ifndef HUBCTL_HF_OFFLINE_H
#define HUBCTL_HF_OFFLINE_H

#include "hf_cli.h"

/* Is HF_HUB_OFFLINE (else, when it is unset or empty, TRANSFORMERS_OFFLINE)
 * 1, on, yes or true, in any case, as huggingface_hub reads it? */
int hf_offline(void);

/* The offline hf download of o (checked by hf_cli). Returns the exit
 * code. */
int hf_offline_run(const hf_opts_t *o);

#endif
