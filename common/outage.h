/* outage: which of hubd's error codes say that the Hub gave no answer
 * (it cannot be reached, timed out, or failed with a 5xx), as against an
 * answer about a repo, a revision or a token (401, 403, 404) or a refusal
 * of hubd's own. On such a code the Hub's clients answer from their cache
 * (huggingface_hub's hf_hub_download and snapshot_download), and so do
 * hubctl, the Python client and hubd's /hf front. One list for all. Pure. */
#ifndef HUBD_OUTAGE_H
#define HUBD_OUTAGE_H

/* 1 for an outage code (docs/PROTOCOL.md, "Error codes"), else 0 (NULL
 * too). */
int outage_code(const char *code);

/* 1 for an HTTP status of the Hub that is no answer about the repo: a 5xx,
 * 408 (its front timed out) or 429 (rate-limited). */
int outage_status(int status);

#endif
