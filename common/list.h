/* list: one intrusive doubly linked list for every queue in hubd.
 *
 * A list_t is a circular list with a sentinel: an empty list points at
 * itself, so linking and unlinking never branch on "first" or "last", and a
 * node can be unlinked without knowing its list. A node that is in no list
 * has NULL links (list_node_init, or zeroed memory), which list_linked
 * tells apart. A list must be list_init'ed before use; zeroed memory is not
 * an empty list. Not thread-safe: each list belongs to one thread. */
#ifndef HUBD_LIST_H
#define HUBD_LIST_H

#include <stddef.h>

typedef struct list_node {
    struct list_node *prev, *next;
} list_node_t;

typedef struct list {
    list_node_t head;
} list_t;

/* The struct of the given type whose `member` is at ptr: the one place the
 * offset arithmetic is written (list_entry, and any embedded handle or
 * waiter back to its owner). */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))
#define list_entry(node, type, member) container_of(node, type, member)

static inline void list_init(list_t *l)
{
    l->head.prev = l->head.next = &l->head;
}

static inline void list_node_init(list_node_t *n)
{
    n->prev = n->next = NULL;
}

static inline int list_empty(const list_t *l)
{
    return l->head.next == &l->head;
}

/* 1 when n is in some list. */
static inline int list_linked(const list_node_t *n)
{
    return n->next != NULL;
}

static inline void list_insert_between_(list_node_t *n, list_node_t *prev, list_node_t *next)
{
    n->prev = prev;
    n->next = next;
    prev->next = n;
    next->prev = n;
}

static inline void list_push_front(list_t *l, list_node_t *n)
{
    list_insert_between_(n, &l->head, l->head.next);
}

static inline void list_push_back(list_t *l, list_node_t *n)
{
    list_insert_between_(n, l->head.prev, &l->head);
}

/* Unlinks n from its list; a node in no list is left as it is. */
static inline void list_remove(list_node_t *n)
{
    if (!n->next)
        return;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

/* First or last node, or NULL when empty. */
static inline list_node_t *list_first(const list_t *l)
{
    return list_empty(l) ? NULL : l->head.next;
}

static inline list_node_t *list_last(const list_t *l)
{
    return list_empty(l) ? NULL : l->head.prev;
}

/* The node after n in l, or NULL at the end. */
static inline list_node_t *list_next(const list_t *l, const list_node_t *n)
{
    return n->next == &l->head ? NULL : n->next;
}

static inline list_node_t *list_pop_front(list_t *l)
{
    list_node_t *n = list_first(l);
    if (n)
        list_remove(n);
    return n;
}

static inline size_t list_length(const list_t *l)
{
    size_t n = 0;
    for (const list_node_t *p = l->head.next; p != &l->head; p = p->next)
        n++;
    return n;
}

/* Walks l; the body may unlink (or free) the current node, not others. */
#define list_foreach_safe(l, n, tmp)                                                               \
    for ((n) = (l)->head.next, (tmp) = (n)->next; (n) != &(l)->head; (n) = (tmp), (tmp) = (n)->next)

#endif
