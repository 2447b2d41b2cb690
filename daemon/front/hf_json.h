/* hf_json: the Hugging Face Hub's API answers made fit to pass the HTTP
 * front (issue 13): the xet hints taken out of their JSON, and their Link
 * header pointed at the front. A client that saw a xet hash or a xet
 * enabled repo would fetch the file from the xet CAS around hubd.
 *
 * Pure functions, any thread (hf_json_filter runs in a libuv pool item). */
#ifndef HUBD_HF_JSON_H
#define HUBD_HF_JSON_H

#include <jansson.h>
#include <stddef.h>

/* Removes every "xetHash" and "xetEnabled" key of v, at any depth (objects
 * in arrays in objects...). Returns how many were removed. Recursion is
 * bounded by jansson's parser, which refuses documents nested deeper than
 * JSON_PARSER_MAX_DEPTH (2048). */
size_t hf_strip_xet(json_t *v);

/* The n bytes of in, read as JSON (any value), stripped (hf_strip_xet) and
 * written back compact into *out (malloc'd, *out_len bytes). 0; 1 when in
 * is not JSON (an error page: it passes as it is, *out untouched);
 * -ENOMEM. */
int hf_json_filter(const char *in, size_t n, char **out, size_t *out_len);

/* The Hub's Link value (RFC 8288 list of `<URL>; params`) for the front's
 * answer: each link whose URL is under upstream (hf_upstream, canonical,
 * no trailing '/') or a path on it ("/api/...") becomes
 * `<front + path>; params` (front: "http://127.0.0.1:8399/hf"); a link to
 * anywhere else, or with a rel naming xet, is dropped. The shape stays
 * `<URL>; rel="next"`, which @huggingface/hub matches with a regular
 * expression. *out is malloc'd, or NULL when no link is left. 0 or
 * -ENOMEM. */
int hf_link_rewrite(const char *link, const char *upstream, const char *front, char **out);

/* One URL of the Hub (absolute, or a path "/..." on it) as the front's:
 * front + its path when it is under upstream, else NULL in *out (not the
 * Hub's: dropped). For a redirect's Location. 0 or -ENOMEM. */
int hf_url_rewrite(const char *url, size_t n, const char *upstream, const char *front, char **out);

#endif
