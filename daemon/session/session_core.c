/* session_core: what a verb may ask of its session (session_core.h): its
 * descriptors pinned, a wake-up, whether its peer administers the cache.
 * Calls only below it (the transport, the quota, the principal); the
 * session's pump is reached through the server's pointer. */
#include "session_core.h"

int session_is_admin(const session_t *s)
{
    return principal_is_admin(&s->srv->acl, &s->who);
}

/* ---- descriptors pinned -------------------------------------------------------- */

/* Blob descriptors pinned for a session (and its uid): a hit item opening
 * one, or a DONE line waiting to pass one, or one passed and not yet read. */
void session_pin(session_t *s)
{
    s->nfds++;
    quota_fd_pin(&s->srv->quota, &s->who);
}

/* One fewer: the session may parse again, and so may the uid's other
 * sessions that waited for its budget. */
void session_unpin(session_t *s)
{
    s->nfds--;
    if (quota_fd_unpin(&s->srv->quota, &s->who)) {
        list_node_t *n, *tmp;
        list_foreach_safe(&s->srv->sessions, n, tmp)
        {
            session_t *o = list_entry(n, session_t, node);
            if (o != s && o->who.uid == s->who.uid && (o->in_len || !transport_reading(&o->t)))
                session_kick(o);
        }
    }
    session_kick(s);
}

/* ---- wake-ups ------------------------------------------------------------------ */

/* The transport's timer calls the session's on_tick, which pumps. */
void session_kick(session_t *s)
{
    if (!s->closing)
        transport_kick(&s->t);
}

void session_resume(session_t *s)
{
    s->srv->pump(s);
}
