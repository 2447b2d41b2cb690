/* pool: the keep-alive pool, idle connections kept per origin for reuse.
 *
 * Knows entries only (embed a pool_entry_t in the connection): which origin
 * ("scheme://host:port") each may serve, most recently used first, and a
 * cap over all origins. The owner of the connections closes what the pool
 * hands back (evicted) and runs the idle timers. Loop thread only. */
#ifndef HUBD_POOL_H
#define HUBD_POOL_H

#include "list.h"

#define POOL_KEY_MAX 600 /* "scheme://host:port", and " via http://proxy:port" */

typedef struct pool_entry {
    list_node_t link;       /* in pool_t.idle while idle */
    char key[POOL_KEY_MAX]; /* the origin (and proxy) it may serve */
} pool_entry_t;

typedef struct pool {
    list_t idle;  /* most recently used first */
    unsigned n;   /* length of idle */
    unsigned max; /* cap over all origins */
} pool_t;

void pool_init(pool_t *p, unsigned max);
/* An entry for origin key, in no pool. */
void pool_entry_init(pool_entry_t *e, const char *key);

/* e goes idle as the most recently used. Returns the oldest entry, removed,
 * when the pool went over its cap (the caller closes it), else NULL. */
pool_entry_t *pool_put(pool_t *p, pool_entry_t *e);
/* The most recently used idle entry for key, removed; NULL if none. */
pool_entry_t *pool_take(pool_t *p, const char *key);
/* Takes e out; nothing if it is not idle. */
void pool_remove(pool_t *p, pool_entry_t *e);
/* Some idle entry (still in), NULL when empty: for closing them all. */
pool_entry_t *pool_any(const pool_t *p);

#endif
