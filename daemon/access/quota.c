/* quota: per-user counters (by charged uid), a small array searched
 * linearly (a daemon sees few distinct users: subordinate uids are
 * charged to theirs). */
#include "quota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

struct quota_user {
    uid_t uid;
    unsigned waiting; /* FETCHes waiting, all sessions (max_requests_per_user) */
    unsigned hfrepos; /* HFREPOs in flight, all sessions (QUOTA_USER_MAX_HFREPOS) */
    unsigned fds;     /* blob descriptors pinned, all sessions (QUOTA_USER_MAX_FDS) */
};

void quota_free(quota_t *q)
{
    free(q->users);
    q->users = NULL;
    q->nusers = 0;
}

/* The uid's counters, created at 0 when asked to (NULL: absent, or no
 * memory). */
static quota_user_t *find(const quota_t *q, uid_t uid)
{
    for (size_t i = 0; i < q->nusers; i++)
        if (q->users[i].uid == uid)
            return &q->users[i];
    return NULL;
}

static quota_user_t *find_or_add(quota_t *q, uid_t uid)
{
    quota_user_t *u = find(q, uid);
    if (u)
        return u;
    u = realloc(q->users, (q->nusers + 1) * sizeof *u);
    if (!u)
        return NULL;
    q->users = u;
    q->users[q->nusers] = (quota_user_t){.uid = uid};
    return &q->users[q->nusers++];
}

int quota_request_begin(quota_t *q, const principal_t *p, unsigned max, unsigned *waiting)
{
    quota_user_t *u = find_or_add(q, p->charged);
    *waiting = u ? u->waiting : 0;
    if (!u || (max && u->waiting >= max))
        return -EAGAIN;
    u->waiting++;
    return 0;
}

void quota_request_end(quota_t *q, const principal_t *p)
{
    quota_user_t *u = find(q, p->charged);
    if (u && u->waiting)
        u->waiting--;
}

int quota_request_admit(quota_t *q, const principal_t *p, unsigned max, char *msg, size_t cap)
{
    unsigned waiting;
    int rc = quota_request_begin(q, p, max, &waiting);
    if (rc)
        snprintf(msg, cap, "uid %u has %u requests waiting already (max_requests_per_user)",
                 (unsigned)p->charged, waiting);
    return rc;
}

int quota_hfrepo_begin(quota_t *q, const principal_t *p, char *msg, size_t cap)
{
    quota_user_t *u = find_or_add(q, p->charged);
    if (u && u->hfrepos < QUOTA_USER_MAX_HFREPOS) {
        u->hfrepos++;
        return 0;
    }
    snprintf(msg, cap, "uid %u has %u HFREPO requests in flight already (at most %u at once)",
             (unsigned)p->charged, u ? u->hfrepos : 0, QUOTA_USER_MAX_HFREPOS);
    return -EAGAIN;
}

void quota_hfrepo_end(quota_t *q, const principal_t *p)
{
    quota_user_t *u = find(q, p->charged);
    if (u && u->hfrepos)
        u->hfrepos--;
}

void quota_fd_pin(quota_t *q, const principal_t *p)
{
    quota_user_t *u = find_or_add(q, p->charged);
    if (u)
        u->fds++;
}

int quota_fd_unpin(quota_t *q, const principal_t *p)
{
    quota_user_t *u = find(q, p->charged);
    if (!u || !u->fds) /* its pin was not counted (no memory then) */
        return 0;
    return u->fds-- == QUOTA_USER_MAX_FDS;
}

int quota_fds_full(const quota_t *q, const principal_t *p)
{
    const quota_user_t *u = find(q, p->charged);
    return u && u->fds >= QUOTA_USER_MAX_FDS;
}
