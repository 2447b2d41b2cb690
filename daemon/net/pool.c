/* pool: idle connections per origin. A linear walk: the cap is small. */
#include "pool.h"

#include <stdio.h>
#include <string.h>

void pool_init(pool_t *p, unsigned max)
{
    list_init(&p->idle);
    p->n = 0;
    p->max = max;
}

void pool_entry_init(pool_entry_t *e, const char *key)
{
    list_node_init(&e->link);
    snprintf(e->key, sizeof e->key, "%s", key);
}

pool_entry_t *pool_put(pool_t *p, pool_entry_t *e)
{
    list_push_front(&p->idle, &e->link);
    if (++p->n <= p->max)
        return NULL;
    pool_entry_t *oldest = list_entry(list_last(&p->idle), pool_entry_t, link);
    pool_remove(p, oldest);
    return oldest;
}

pool_entry_t *pool_take(pool_t *p, const char *key)
{
    for (list_node_t *n = list_first(&p->idle); n; n = list_next(&p->idle, n)) {
        pool_entry_t *e = list_entry(n, pool_entry_t, link);
        if (strcmp(e->key, key) == 0) {
            pool_remove(p, e);
            return e;
        }
    }
    return NULL;
}

void pool_remove(pool_t *p, pool_entry_t *e)
{
    if (!list_linked(&e->link))
        return;
    list_remove(&e->link);
    p->n--;
}

pool_entry_t *pool_any(const pool_t *p)
{
    list_node_t *n = list_first(&p->idle);
    return n ? list_entry(n, pool_entry_t, link) : NULL;
}
