/* sweep: reconcile_folder's steps, one at a time, in the pool (sweep.h). */
#include "sweep.h"
#include "log.h"
#include "reconcile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sweep {
    uv_loop_t *loop;
    worktrack_t *work;
    store_t *store;
    db_t *db;
    uv_work_t item;
    unsigned next; /* the step the item does, or does next */
    int rc;        /* the item's outcome */
    int out;       /* the item is in the pool */
    int stopped;   /* sweep_stop was called: freed when the item is back */
    int pages;     /* then db_check_pages: the start skipped its quick_check */
    uint64_t t0;   /* loop time it began */
    reconcile_report_t rep;
};

static void step(sweep_t *s);

static void step_work(uv_work_t *w)
{
    sweep_t *s = w->data;
    if (s->next < RECONCILE_FOLDERS)
        s->rc = reconcile_folder(s->store, s->db, s->next, &s->rep);
    else /* last: the pages' check the start skipped */
        s->rc = s->pages ? db_check_pages(s->db) : 0;
}

static void step_done(uv_work_t *w, int status)
{
    sweep_t *s = w->data;
    s->out = 0;
    worktrack_release(s->work);
    if (s->stopped) {
        free(s);
        return;
    }
    if (s->next == RECONCILE_FOLDERS) { /* the pages' check */
        if (s->rc == -EUCLEAN)
            log_err("the database is damaged (quick_check, above): hubd goes on with what it "
                    "can read; restart it to set the file aside and rebuild it from blobs/");
        return;
    }
    if (status || s->rc) {
        log_warn("start-up check of blobs/: stopped at folder %u of %u (%s); the next start "
                 "checks again",
                 s->next, RECONCILE_FOLDERS, strerror(status ? -status : -s->rc));
        /* A bad page may be why: the pages' check says, and if so the next
         * start rebuilds. */
        s->next = RECONCILE_FOLDERS;
        s->pages = 1;
        step(s);
        return;
    }
    if (++s->next == RECONCILE_FOLDERS)
        log_info("start-up check of blobs/ done in the background in %.1f s: %u row(s) "
                 "forgotten, %u file(s) quarantined",
                 (double)(uv_now(s->loop) - s->t0) / 1000, s->rep.rows_forgotten,
                 s->rep.quarantined);
    if (s->next < RECONCILE_FOLDERS || s->pages)
        step(s);
}

static void step(sweep_t *s)
{
    s->item.data = s;
    worktrack_hold(s->work);
    s->out = 1;
    if (uv_queue_work(s->loop, &s->item, step_work, step_done)) {
        s->out = 0;
        worktrack_release(s->work);
    }
}

int sweep_start(uv_loop_t *loop, worktrack_t *work, store_t *store, db_t *db, int pages,
                sweep_t **out)
{
    sweep_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    *s = (sweep_t){
        .loop = loop, .work = work, .store = store, .db = db, .pages = pages, .t0 = uv_now(loop)};
    step(s);
    *out = s;
    return 0;
}

void sweep_stop(sweep_t *s)
{
    if (!s)
        return;
    if (s->out)
        s->stopped = 1; /* the item frees it */
    else
        free(s);
}
