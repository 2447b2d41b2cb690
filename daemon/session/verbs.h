/* verbs: what a session's request lines do, as a table.
 *
 * Each verb is a row: its name, its handler, who may call it (anyone, or
 * admins: root, hubd's own uid, the admin group) and whether it needs an
 * id= (1 to 64 printable bytes). verbs_dispatch checks the row's rules in
 * a fixed order (an unknown verb, then id=, then who) before the handler
 * runs; the handlers answer on the session's transport, now or later
 * (FETCH waiters, admin requests in the pool, STATUS and LIST streamed a
 * page at a time). The verbs keep their state in the session
 * (session_core.h) and give it up in verbs_session_close.
 *
 * Loop thread only. */
#ifndef HUBD_VERBS_H
#define HUBD_VERBS_H

#include "proto.h"
#include "session_core.h"

#define VERB_ID_MAX 64 /* bytes of an id= */

typedef enum {
    VERB_ANYONE,
    VERB_ADMIN, /* root, hubd's own uid or the admin group */
} verb_who_t;

/* A handler: id is the request's valid id= when the row requires one,
 * else whatever was sent (or NULL); arg is the row's. */
typedef void (*verb_fn)(session_t *s, const proto_msg_t *m, const char *id, int arg);

typedef struct verb {
    const char *name; /* as sent, case-sensitive */
    verb_fn fn;
    int arg;             /* handed to fn (the admin operation) */
    verb_who_t who;      /* who may call it */
    const char *id_rule; /* id= required: the ERR message without a valid one; NULL: none */
} verb_t;

/* The row of a verb, or NULL. */
const verb_t *verbs_find(const char *name);

/* 1 when id is 1 to VERB_ID_MAX printable bytes. */
int verbs_valid_id(const char *id);

/* Runs one parsed request line. admin: whether the session's peer may
 * administer the cache now (session.c decides, from the access lists in
 * force), for the rows that need it. */
void verbs_dispatch(session_t *s, const proto_msg_t *m, int admin);

/* A reply was written: a stream may send its next page. */
void verbs_on_written(session_t *s);

/* The session closes: its waiters leave their jobs, its admin requests
 * and its listing page finish in the pool unheard. No reply is sent. */
void verbs_session_close(session_t *s);

#endif
