/* json: hubctl's --json output.
 *
 * Values come percent-decoded off the wire and may hold any byte; what is
 * written is always valid UTF-8 JSON. Stateless; writes to any FILE. */
#ifndef HUBCTL_JSON_H
#define HUBCTL_JSON_H

#include "proto.h"

#include <stdio.h>

/* s as a JSON string; a byte that is not valid UTF-8 becomes U+FFFD. */
void json_str(FILE *f, const char *s);

/* One reply line as a JSON object: every key, numbers as numbers, so keys a
 * newer daemon adds reach the user without a client update. A repeated key
 * keeps its first value, as proto_get does. One style for every command:
 * the protocol's id is left out, flags (pinned, removed_blob) are
 * booleans, users= is an array of uids, errors_by_code= an object of
 * counts by code, and msg= is "message". */
void json_msg(FILE *f, const proto_msg_t *m);
/* json_msg, with key as null when the line has none (a field that is
 * absent for a reason: ls's cred of a public entry). */
void json_msg_or_null(FILE *f, const proto_msg_t *m, const char *key);

/* The one shape of a failure, as a value: {"code": ..., "message": ...}. */
void json_error(FILE *f, const char *code, const char *message);

/* "code:n,code:n" as an object {"code": n, ...}. */
void json_counts(FILE *f, const char *list);

#endif
