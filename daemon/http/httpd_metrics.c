/* httpd_metrics: the one route of the metrics endpoint's server
 * (httpd_deps_t.metrics): GET or HEAD /metrics answers the page
 * (metrics.h) once its pool item has made it; any other target is 404.
 * The front's checks come first, as for every route (Host, cross-site, the
 * method: 405 for all but GET and HEAD, a body: 413). */
#include "httpd_internal.h"
#include "metrics.h"

#include <stdlib.h>
#include <string.h>

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct mreq {
    metrics_ask_t ask; /* in the metrics' queue until the page comes */
    hconn_t *c;
} mreq_t;

/* Every target: /metrics is answered, the rest refused here. */
static int metrics_match(const char *target)
{
    (void)target;
    return 1;
}

static void on_page(void *arg, const char *body, size_t len, int err)
{
    mreq_t *r = arg;
    hconn_t *c = r->c;
    if (err)
        hanswer_text(c, 503, "busy", "the metrics page could not be made; ask again", 0);
    else
        hanswer_bytes(c, 200, CONTENT_TYPE, body, len);
}

static void metrics_handle(hconn_t *c, void *mem)
{
    (void)mem;
    const char *t = c->req->target;
    size_t path = strcspn(t, "?"); /* Prometheus may add params= */
    if (path != strlen("/metrics") || strncmp(t, "/metrics", path) != 0) {
        hanswer_text(c, 404, "not_found", "this endpoint answers /metrics only", 0);
        return;
    }
    mreq_t *r = calloc(1, sizeof *r);
    if (!r) {
        hanswer_text(c, 503, "busy", "no memory for the metrics page", 1);
        return;
    }
    r->c = c;
    c->rstate = r; /* before the ask: its callback may come at once */
    metrics_ask(c->srv->d.metrics, &r->ask, on_page, r);
}

static void metrics_abandon(hconn_t *c)
{
    mreq_t *r = c->rstate;
    metrics_cancel(&r->ask);
    free(r);
    c->rstate = NULL;
}

const hroute_t hroute_metrics = {
    .match = metrics_match,
    .handle = metrics_handle,
    .abandon = metrics_abandon,
};
