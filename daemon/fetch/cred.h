/* cred: request headers from clients, and the credential tag of a fetch.
 *
 * A client may send request headers with a FETCH (a token for a gated
 * model). They are checked here (names are tokens; no CR, LF or NUL; no
 * header that is hubd's to set: Host, Content-Length, Transfer-Encoding,
 * Connection, Range and the like; bounded count and size), then go to the
 * first origin only (transfer_start checks every hop: a redirect to another
 * origin goes without them).
 * All of them (a token may hide in any header: Authorization, Cookie,
 * PRIVATE-TOKEN, X-Api-Key...) make the fetch's credential tag: HMAC-SHA256
 * under a per-cache secret of their names and values. An entry fetched
 * with headers is served only to requests with the same tag; the values
 * themselves are never stored, logged or echoed. */
#ifndef HUBD_CRED_H
#define HUBD_CRED_H

#include <stddef.h>

#define CRED_MAX_HEADERS 16
#define CRED_MAX_HEADER_LEN 4096 /* one "Name: value" */
#define CRED_MAX_TOTAL 8192      /* all of them */

typedef struct cred_secret {
    unsigned char key[32];
} cred_secret_t;

/* Start-up: reads <cache_dir>/secret, creating it (0600, from getrandom)
 * the first time. A secret of another size or mode is an error. */
int cred_secret_load(const char *cache_dir, cred_secret_t *out);

/* Checks the headers ("Name: value" each) and builds the lines to send
 * ("Name: value
"..., malloc'd into *block, NULL when there are none)
 * and the tag ("" without headers, else 64 hex digits). On a bad header
 * returns -EINVAL with why (which never quotes a value). */
int cred_build(const cred_secret_t *secret, const char *const *headers, size_t n, char **block,
               char tag[65], const char **why);

#endif
