/* listings: the HFREPO listings alive, counted against their uid (see
 * listings.h). A flat list, oldest first: at most LISTINGS_MAX entries,
 * walked once per HFREPO answered. */
#include "listings.h"
#include "list.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct listing {
    list_node_t node; /* in listings.alive, oldest first; detached once emptied */
    const void *owner;
    uid_t uid;
    int fd;         /* hubd's writable descriptor */
    uint64_t bytes; /* what the file holds */
    uv_fs_t req;    /* the ftruncate, then its end */
} listing_t;

struct listings {
    uv_loop_t *loop;
    list_t alive;
    uint64_t count, bytes; /* of alive */
};

int listings_new(uv_loop_t *loop, listings_t **out)
{
    listings_t *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->loop = loop;
    list_init(&l->alive);
    *out = l;
    return 0;
}

void listings_free(listings_t *l)
{
    if (!l)
        return;
    list_node_t *n;
    while ((n = list_first(&l->alive))) {
        listing_t *e = list_entry(n, listing_t, node);
        list_remove(&e->node);
        close(e->fd);
        free(e);
    }
    free(l);
}

static void on_emptied(uv_fs_t *req)
{
    listing_t *e = req->data;
    if (req->result < 0)
        log_warn("a file list of uid %u (%llu bytes) could not be emptied: %s", (unsigned)e->uid,
                 (unsigned long long)e->bytes, uv_strerror((int)req->result));
    uv_fs_req_cleanup(req);
    close(e->fd); /* its blocks went with the ftruncate: a cheap close */
    free(e);
}

/* e leaves the count, and owns itself until its file is emptied. */
static void empty(listings_t *l, listing_t *e)
{
    list_remove(&e->node);
    l->count--;
    l->bytes -= e->bytes;
    e->req.data = e;
    if (uv_fs_ftruncate(l->loop, &e->req, e->fd, 0, on_emptied)) {
        close(e->fd); /* the last descriptor may free the blocks here: rare */
        free(e);
    }
}

/* The oldest alive of uid (any uid when all), other than keep, or NULL. */
static listing_t *oldest(listings_t *l, uid_t uid, int all, const listing_t *keep)
{
    for (list_node_t *n = list_first(&l->alive); n; n = list_next(&l->alive, n)) {
        listing_t *e = list_entry(n, listing_t, node);
        if (e != keep && (all || e->uid == uid))
            return e;
    }
    return NULL;
}

static void of_uid(const listings_t *l, uid_t uid, uint64_t *count, uint64_t *bytes)
{
    *count = *bytes = 0;
    for (list_node_t *n = list_first(&l->alive); n; n = list_next(&l->alive, n)) {
        const listing_t *e = list_entry(n, listing_t, node);
        if (e->uid == uid)
            (*count)++, *bytes += e->bytes;
    }
}

int listings_add(listings_t *l, const void *owner, uid_t uid, int wfd, uint64_t bytes,
                 uint64_t max_bytes)
{
    listing_t *e = calloc(1, sizeof *e);
    if (!e) {
        close(wfd);
        return -ENOMEM;
    }
    e->owner = owner;
    e->uid = uid;
    e->fd = wfd;
    e->bytes = bytes;
    list_push_back(&l->alive, &e->node);
    l->count++;
    l->bytes += bytes;
    if (max_bytes && bytes > max_bytes) {
        empty(l, e);
        return -EFBIG;
    }
    uint64_t n, held;
    listing_t *old;
    for (of_uid(l, uid, &n, &held);
         (n > LISTINGS_PER_UID || (max_bytes && held > max_bytes)) && (old = oldest(l, uid, 0, e));
         of_uid(l, uid, &n, &held))
        empty(l, old);
    uint64_t total_max = max_bytes * LISTINGS_TOTAL_FACTOR;
    while ((l->count > LISTINGS_MAX || (total_max && l->bytes > total_max)) &&
           (old = oldest(l, uid, 1, e)))
        empty(l, old);
    return 0;
}

void listings_owner_gone(listings_t *l, const void *owner)
{
    list_node_t *n = list_first(&l->alive);
    while (n) {
        listing_t *e = list_entry(n, listing_t, node);
        n = list_next(&l->alive, n);
        if (e->owner == owner)
            empty(l, e);
    }
}

void listings_stats(const listings_t *l, uint64_t *count, uint64_t *bytes)
{
    *count = l->count;
    *bytes = l->bytes;
}
