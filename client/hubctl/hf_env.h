/* hf_env: what the Hub's clients read from the user's environment, as
 * huggingface_hub reads it: whether a repo id is one, the token, and the
 * HF cache's folder. Below the hf commands (hf_cli, hf_holds, hf_download),
 * which all need them. Single-threaded (getpwuid). */
#ifndef HUBCTL_HF_ENV_H
#define HUBCTL_HF_ENV_H

/* A Hub repo id as the Hub accepts it: "name" or "org/name", each part of
 * letters, digits, '-', '_' and '.', not starting or ending with '-' or
 * '.', no "--" or "..", at most 96 bytes. */
int hf_repo_id_ok(const char *repo);

/* The token as the Hub's clients find it: --token, else $HF_TOKEN, else
 * the file $HF_TOKEN_PATH, else $HF_HOME/token, else
 * $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token;
 * whitespace stripped; empty is none. Returns a malloc'd token or NULL. */
char *hf_find_token(const char *given);

/* The HF cache folder: given, else $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. Malloc'd,
 * "~" expanded as huggingface_hub does, made absolute against the working
 * directory (the links HOLD names are absolute). hf download and hf rm. */
char *hf_find_cache_dir(const char *given);

/* dir made absolute against the working directory (it may not exist yet:
 * no realpath): --cache-dir and --local-dir, as the links name them.
 * Malloc'd. */
char *hf_absolute(const char *dir);

#endif
