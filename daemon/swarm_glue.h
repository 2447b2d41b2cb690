/* swarm_glue: where the daemon meets the cluster swarm (daemon/fleet/).
 *
 * The swarm is built only where libtorrent-rasterbar is (HUBD_HAVE_FLEET);
 * main.c calls these either way, and this file alone knows both the
 * swarm's shapes and the ways in's: FLEET's answer (the sessions' sink),
 * the Hub's answers shared among the nodes (hf_meta.h's cluster hooks),
 * and the start, reload and stop. Loop thread; start and check block
 * (start-up, --check-config). */
#ifndef HUBD_SWARM_GLUE_H
#define HUBD_SWARM_GLUE_H

#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "job.h"
#include "session.h"
#include "store.h"

struct fleet;

/* The fleet_* settings, when any is set: 0, or a negative errno with err
 * a sentence (a swarm asked of a build without one is -ENOTSUP). */
int swarm_glue_check(const hubd_config_t *cfg, char *err, size_t cap);
/* Starts the swarm when the settings ask for one (*out NULL otherwise). */
int swarm_glue_start(uv_loop_t *loop, const hubd_config_t *cfg, jobs_t *js, store_t *store,
                     struct fleet **out, char *err, size_t cap);
/* Once the sessions' server runs: FLEET answers from the swarm (or says
 * why there is none), and the Hub's answers are shared with it. */
void swarm_glue_attach(struct fleet *f, session_server_t *server);
/* SIGHUP: the member list is read again. NULL: nothing. */
void swarm_glue_reload(struct fleet *f);
/* Shutdown, after jobs_stop: the hooks go, then the swarm. NULL: nothing. */
void swarm_glue_stop(struct fleet *f, session_server_t *server);

#endif
