/* reply: one protocol line built on the stack and queued on a transport.
 *
 * A line that cannot be made (longer than the protocol allows) is logged
 * and dropped; an ERR whose message does not fit goes without it, keeping
 * its code. Loop thread only. */
#ifndef HUBD_REPLY_H
#define HUBD_REPLY_H

#include "proto.h"
#include "transport.h"

typedef struct reply {
    proto_writer_t w;
    char buf[PROTO_MAX_LINE];
} reply_t;

/* Starts a line: then proto_add* on &r->w. */
void reply_begin(reply_t *r, const char *verb);

/* Queues the line: 1, or 0 when it could not be made (too long). */
int reply_send(transport_t *t, reply_t *r);

/* Ends the line for a caller that sends it its own way (with an fd): its
 * length, or 0 when it could not be made. */
size_t reply_end(reply_t *r);

/* ERR [id=] code= msg=. */
void reply_err(transport_t *t, const char *id, const char *code, const char *msg);

#endif
