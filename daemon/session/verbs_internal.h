/* verbs_internal: the handlers of verbs.c's table, one file per family
 * (verbs_fetch.c, verbs_hf.c, verbs_list.c, verbs_admin.c, verbs_hold.c,
 * verbs_fleet.c), and what they share.
 * Private to the verbs; loop thread only. */
#ifndef HUBD_VERBS_INTERNAL_H
#define HUBD_VERBS_INTERNAL_H

#include "reply.h"
#include "verbs.h"

/* verbs_fetch.c: FETCH id= url= [sha256=] [header=]... */
void verbs_fetch(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_fetch_close(session_t *s);
/* CANCEL id= target=JOB|URL */
void verbs_cancel(session_t *s, const proto_msg_t *m, const char *id, int arg);
/* INTERRUPT id=: the session's FETCHes leave; a download each was alone on stops */
void verbs_interrupt(session_t *s, const proto_msg_t *m, const char *id, int arg);

/* verbs_hf.c: HFREPO id= repo= [type=] [revision=] [header=]... */
void verbs_hfrepo(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_hf_close(session_t *s);

/* verbs_list.c: STATUS and LIST, streamed a page at a time. */
void verbs_status(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_list(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_stream_step(session_t *s);
void verbs_list_close(session_t *s);

/* verbs_hold.c: HOLD, UNHOLD, HOLDS (arg: which), each in the pool. */
#define VERB_HOLD 0
#define VERB_UNHOLD 1
#define VERB_HOLDS 2
void verbs_hold(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_hold_close(session_t *s);

/* verbs_fleet.c: FLEET, the cluster swarm, from the hook main.c sets. */
void verbs_fleet(session_t *s, const proto_msg_t *m, const char *id, int arg);

/* verbs_admin.c: RM, PIN, UNPIN, VERIFY (arg: the admin_op_t), and GC. */
void verbs_admin(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_gc(session_t *s, const proto_msg_t *m, const char *id, int arg);
void verbs_admin_close(session_t *s);

#endif
