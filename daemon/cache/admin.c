/* admin: one pool work item per administrator request. */
#include "admin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct admin_req {
    uv_work_t work;
    worktrack_t *tracker; /* held while the item is in flight */
    store_t *store;
    db_t *db;
    admin_op_t op;
    char *target;
    int force; /* RM: even a held blob */
    admin_result_t res;
    cache_bad_t *bad;
    void (*done)(void *arg, const admin_result_t *r); /* NULL once cancelled */
    void *arg;
};

static unsigned in_flight; /* loop thread only */

int admin_busy(void)
{
    return in_flight > 0;
}

static void admin_work(uv_work_t *w)
{
    admin_req_t *req = w->data;
    admin_result_t *r = &req->res;
    switch (req->op) {
    case ADMIN_RM:
        r->rc =
            cache_remove(req->store, req->db, req->target, req->force, &r->held, &r->removed_blob);
        break;
    case ADMIN_PIN:
    case ADMIN_UNPIN:
        r->rc = db_set_pinned(req->db, req->target, req->op == ADMIN_PIN);
        break;
    case ADMIN_VERIFY:
        r->rc = cache_verify(req->store, req->db, &r->checked, &req->bad);
        r->bad = req->bad;
        break;
    }
    if (r->rc == 0 && req->op == ADMIN_RM)
        cache_reserve_make(req->store); /* a full disk may have taken it */
}

static void after_admin(uv_work_t *w, int status)
{
    admin_req_t *req = w->data;
    (void)status;
    in_flight--;
    if (req->done)
        req->done(req->arg, &req->res);
    worktrack_release(req->tracker);
    cache_bad_free(req->bad);
    free(req->target);
    free(req);
}

int admin_start(uv_loop_t *loop, worktrack_t *work, store_t *store, db_t *db, admin_op_t op,
                const char *target, int force, void (*done)(void *arg, const admin_result_t *r),
                void *arg, admin_req_t **out)
{
    admin_req_t *req = calloc(1, sizeof *req);
    if (!req || (target && !(req->target = strdup(target)))) {
        free(req);
        return -ENOMEM;
    }
    req->tracker = work;
    req->store = store;
    req->db = db;
    req->op = op;
    req->force = force;
    req->done = done;
    req->arg = arg;
    in_flight++;
    req->work.data = req;
    worktrack_hold(work);
    uv_queue_work(loop, &req->work, admin_work, after_admin);
    *out = req;
    return 0;
}

void admin_cancel(admin_req_t *req)
{
    req->done = NULL;
}
