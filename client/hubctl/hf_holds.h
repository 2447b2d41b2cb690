/* hf_holds: `hubctl hf ls` and `hubctl hf rm`, the holds side of the HF
 * cache (docs/PROTOCOL.md: HOLDS, UNHOLD).
 *
 * Each takes argv as `hf` hands it on: argv[0] is the subcommand ("ls" or
 * "rm"), then its options and operands, which may include --socket PATH
 * (the daemon's socket; else the default). They return an exit code
 * (util.h). Blocking, single-threaded, as the rest of hubctl. */
#ifndef HUBCTL_HF_HOLDS_H
#define HUBCTL_HF_HOLDS_H

/* hf ls [--all | --uid N] [--json] [--socket PATH]: the caller's holds
 * (--all: every user's, for an admin; a user sees their own), one line per
 * repo and revision: files and bytes held in hubd's store. */
int hf_ls_main(int argc, char **argv);

/* hf rm REPO [--repo-type model|dataset|space] [--revision R]
 * [--cache-dir DIR] [--socket PATH]: removes from the caller's HF cache
 * the repo's snapshot of revision R (default: every snapshot): its
 * snapshot links, the refs naming it and the blobs no snapshot left uses;
 * then releases the holds of exactly the blob links it removed (UNHOLD
 * label= link=, for each label of the repo: its refs and snapshots), so
 * that hubd may evict what nobody else holds, and the same repo linked
 * from another cache folder keeps its holds and grants. The folder is
 * hf download's (hf_find_cache_dir). Prints what it freed. */
int hf_rm_main(int argc, char **argv);

#endif
