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
 * keeps its first value, as proto_get does. */
void json_msg(FILE *f, const proto_msg_t *m);

#endif
