/* quota: what each user holds across all its sessions, and its limits.
 *
 * Per user: a principal's charged uid (its uid, however it was learned, or
 * the user whose subordinate uids hold it: principal_charge), so that one
 * person's 65,536 subordinate uids share one user's bounds: the FETCHes waiting
 * (bounded by max_requests_per_user), the HFREPOs in flight (bounded by
 * QUOTA_USER_MAX_HFREPOS: each may hold up to 16 MiB of the Hub's answer,
 * and a tree of it in the pool) and the blob descriptors pinned for it
 * (bounded by QUOTA_USER_MAX_FDS; while at the bound its sessions parse no
 * more lines). A uid's counters are created on first use and kept.
 *
 * This is the front's bound on waiting requests. The fetch layer bounds the
 * jobs a uid created (queued or running) by the same setting: a job
 * outlives a client that hangs up, a waiting request does not.
 *
 * Loop thread only. A quota_t starts zeroed; quota_free frees it. */
#ifndef HUBD_QUOTA_H
#define HUBD_QUOTA_H

#include <stddef.h>

#include "principal.h"

#define QUOTA_USER_MAX_FDS 64    /* blob descriptors pinned for one uid, all sessions */
#define QUOTA_USER_MAX_HFREPOS 4 /* HFREPOs in flight for one uid, all sessions */

typedef struct quota_user quota_user_t;

typedef struct quota {
    quota_user_t *users; /* one per uid seen, in no order */
    size_t nusers;
} quota_t;

void quota_free(quota_t *q);

/* One more FETCH of p waits: 0, or -EAGAIN when its uid has max waiting
 * already (max 0: no limit; also when there is no memory to count it).
 * *waiting says how many wait for the uid. */
int quota_request_begin(quota_t *q, const principal_t *p, unsigned max, unsigned *waiting);
/* A FETCH of p waits no more. */
void quota_request_end(quota_t *q, const principal_t *p);
/* quota_request_begin for the ways in that refuse in words (the socket's
 * FETCH and HFREPO, the HTTP front's 429): 0, or -EAGAIN with the one
 * refusal message of max_requests_per_user in msg. */
int quota_request_admit(quota_t *q, const principal_t *p, unsigned max, char *msg, size_t cap);

/* One more HFREPO of p in flight: 0, or -EAGAIN with why in msg when its
 * uid has QUOTA_USER_MAX_HFREPOS already (or no memory to count it). */
int quota_hfrepo_begin(quota_t *q, const principal_t *p, char *msg, size_t cap);
void quota_hfrepo_end(quota_t *q, const principal_t *p);

/* One more, or one fewer, blob descriptor pinned for p. quota_fd_unpin
 * returns 1 when the uid was at QUOTA_USER_MAX_FDS: its other sessions may
 * parse again. */
void quota_fd_pin(quota_t *q, const principal_t *p);
int quota_fd_unpin(quota_t *q, const principal_t *p);
/* Whether p's uid has QUOTA_USER_MAX_FDS pinned. */
int quota_fds_full(const quota_t *q, const principal_t *p);

#endif
