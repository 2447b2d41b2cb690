/* listings: the HFREPO listings alive, counted against the uid that asked.
 *
 * A listing is a file with no name in the store's tmp/ (verbs_hf.c), on
 * the cache's disk while any descriptor of it is open: the client's, and
 * hubd's own writable one, kept here. So that clients cannot fill the
 * disk with listings they keep open (they escape max_cache_size and the
 * user quotas), hubd empties a listing (ftruncate to 0 on its own
 * descriptor, in the pool: the blocks go, whoever still has it open) and
 * lets it go when:
 * - the session that asked for it closes (the client has read it: hubctl
 *   and the Python client read it at once);
 * - its uid's listings would hold more than max_bytes, or more than
 *   LISTINGS_PER_UID of them would be alive: the uid's oldest first;
 * - all listings would hold more than LISTINGS_TOTAL_FACTOR x max_bytes,
 *   or more than LISTINGS_MAX be alive: anyone's oldest first (a user's
 *   many subordinate uids cannot hold more than that together).
 * A listing larger than max_bytes on its own is refused.
 *
 * Loop thread only. Each emptied listing owns itself until its pool
 * request is back (nothing here is touched then). */
#ifndef HUBD_LISTINGS_H
#define HUBD_LISTINGS_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#define LISTINGS_PER_UID 16      /* alive at once for one uid */
#define LISTINGS_MAX 1024        /* alive at once for everyone */
#define LISTINGS_TOTAL_FACTOR 8u /* everyone's bytes: this many times one uid's bound */

typedef struct listings listings_t;

/* 0 or -ENOMEM. */
int listings_new(uv_loop_t *loop, listings_t **out);
/* At shutdown: hubd's descriptors are closed (a listing's file goes with
 * the client's last one). NULL is fine. */
void listings_free(listings_t *l);

/* Records uid's listing of `bytes` bytes, asked by session `owner` (only
 * compared), with hubd's writable descriptor wfd (taken: closed here in
 * any case), and makes room for it as the bounds say (max_bytes 0: none).
 * 0, or -EFBIG when it alone is over max_bytes, or -ENOMEM (it is emptied
 * then). */
int listings_add(listings_t *l, const void *owner, uid_t uid, int wfd, uint64_t bytes,
                 uint64_t max_bytes);

/* The session owner closes: its listings are emptied. */
void listings_owner_gone(listings_t *l, const void *owner);

/* The listings alive and their bytes, for STATS. */
void listings_stats(const listings_t *l, uint64_t *count, uint64_t *bytes);

#endif
