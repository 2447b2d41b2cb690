/* hf_json: the Hugging Face Hub's API answers made fit to pass the HTTP
 * front: the xet hints taken out of their JSON, and their Link
 * header pointed at the front. A client that saw a xet hash or a xet
 * enabled repo would fetch the file from the xet CAS around hubd.
 *
 * Pure functions, any thread (hf_json_filter runs in a libuv pool item). */
#ifndef HUBD_HF_JSON_H
#define HUBD_HF_JSON_H

#include <stddef.h>

/* The n bytes of in, read as JSON (any value) and written back compact
 * into *out (malloc'd, *out_len bytes) without any "xetHash" or
 * "xetEnabled" member (key and value, whatever the value holds), at any
 * depth (objects in arrays in objects...). Numbers pass as their text
 * (1e400 and 12345678901234567890 too: nothing is rounded), strings as
 * yajl_gen writes them again (control characters escaped, "\/" as '/', a
 * \uXXXX as its UTF-8; bytes that are not UTF-8 pass as they are, so that
 * such a string does not make the answer pass unfiltered).
 *
 * 0; 1 when in is not JSON (an error page: it passes as it is, *out
 * untouched); HF_JSON_TOO_DEEP when it is JSON nested deeper than
 * HF_JSON_MAX_DEPTH outside the members dropped (yajl_gen writes no
 * deeper): it cannot be filtered, and must not pass as it is; -ENOMEM.
 *
 * The answer is read as a stream (yajl) and written as it is read: no
 * tree. Besides in's n bytes, the filter holds its output (never longer
 * than in: whitespace and members go, escapes only get shorter, and
 * nothing is escaped that JSON allowed raw), yajl's copy of a string with
 * escapes or of a last token cut short (at most n) and yajl's stack (a
 * byte a level, within n): at most HF_JSON_COST bytes a byte of answer,
 * which the /hf/api routes charge the Hub's budget (hub_req.h). */
int hf_json_filter(const char *in, size_t n, char **out, size_t *out_len);

/* As hf_json_filter, the output at *out + room: room bytes are left before
 * it, for the caller to write an HTTP head in (the body is then sent
 * without a copy). */
int hf_json_filter_at(const char *in, size_t n, size_t room, char **out, size_t *out_len);

#define HF_JSON_TOO_DEEP 2    /* hf_json_filter: JSON it cannot write again */
#define HF_JSON_MAX_DEPTH 127 /* containers open at once that it writes: yajl_gen's bound */
#define HF_JSON_COST 3        /* bytes of memory a byte of answer costs hf_json_filter */

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
