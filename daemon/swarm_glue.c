/* swarm_glue: the cluster swarm's wiring into the daemon (swarm_glue.h). */
#include "swarm_glue.h"

#include <errno.h>
#include <stdio.h>

#ifdef HUBD_HAVE_FLEET
#include "fleet.h"
#include "hf_meta.h"
#endif

#ifdef HUBD_HAVE_FLEET
/* The Hub's answers about files, shared with the swarm (hf_meta.h, "the
 * cluster's memory"; fleet.h, "Verdicts"): the key names the credential
 * and the file together. */
static void *cluster_ask(void *ctx, const char *const *cred, size_t ncred, const char *file_key,
                         void (*cb)(void *arg, const char *record), void *arg)
{
    char key[65];
    return fleet_verdict_key(ctx, cred, ncred, file_key, key)
               ? NULL
               : fleet_verdict_ask(ctx, key, cb, arg);
}

static void cluster_cancel(void *ctx, void *handle)
{
    (void)ctx;
    fleet_verdict_cancel(handle);
}

static void cluster_tell(void *ctx, const char *const *cred, size_t ncred, const char *file_key,
                         const char *record)
{
    char key[65];
    if (!fleet_verdict_key(ctx, cred, ncred, file_key, key))
        fleet_verdict_tell(ctx, key, record);
}

static const hf_cluster_ops_t cluster_ops = {cluster_ask, cluster_cancel, cluster_tell};
#endif

#ifdef HUBD_HAVE_FLEET
static void fleet_file_line(void *arg, const fleet_file_info_t *fi)
{
    session_fleet_file(arg, &(session_fleet_file_t){.sha256 = fi->sha256,
                                                    .state = fi->state,
                                                    .size = fi->size,
                                                    .done = fi->done,
                                                    .up = fi->up,
                                                    .down = fi->down,
                                                    .peers = (uint64_t)fi->peers,
                                                    .info_hash = fi->info_hash,
                                                    .info_hash_v1 = fi->info_hash_v1});
}

static void fleet_peer_line(void *arg, const fleet_peer_info_t *pi)
{
    session_fleet_peer(
        arg, &(session_fleet_peer_t){
                 .addr = pi->peer, .up = pi->up, .down = pi->down, .files = (uint64_t)pi->files});
}

/* FLEET's answer: the swarm's status (fleet.h) told to the sessions' sink,
 * the one place that knows both shapes. */
static const char *fleet_reply(void *arg, session_fleet_sink_t *sink)
{
    fleet_info_t info;
    fleet_status(arg, fleet_file_line, fleet_peer_line, sink, &info);
    session_fleet_node(sink, &(session_fleet_node_t){.listen = info.listen,
                                                     .members = info.members,
                                                     .up = info.up,
                                                     .down = info.down,
                                                     .from_swarm = info.from_swarm,
                                                     .seeded_from_origin = info.from_origin_as_seed,
                                                     .fell_back = info.fell_back,
                                                     .bad_pieces = info.bad_pieces,
                                                     .banned = info.banned,
                                                     .meta_refused = info.meta_refused});
    return NULL;
}
#else
/* FLEET without the swarm built in: why (arg). */
static const char *fleet_absent(void *arg, session_fleet_sink_t *sink)
{
    (void)sink;
    return arg;
}
#endif

void swarm_glue_attach(struct fleet *f, session_server_t *server)
{
#ifdef HUBD_HAVE_FLEET
    if (!f)
        return;
    session_server_set_fleet(server, fleet_reply, f);
    hf_meta_set_cluster(session_server_hf(server), &cluster_ops, f);
#else
    (void)f;
    session_server_set_fleet(server, fleet_absent,
                             "this hubd is not in a swarm: it was built without "
                             "libtorrent-rasterbar");
#endif
}

void swarm_glue_stop(struct fleet *f, session_server_t *server)
{
#ifdef HUBD_HAVE_FLEET
    if (!f)
        return;
    if (server) {
        hf_meta_set_cluster(session_server_hf(server), NULL, NULL);
        session_server_set_fleet(server, NULL, NULL);
    }
    fleet_stop(f, NULL, NULL);
#else
    (void)f, (void)server;
#endif
}

int swarm_glue_start(uv_loop_t *loop, const hubd_config_t *cfg, jobs_t *js, store_t *store,
                     struct fleet **out, char *err, size_t cap)
{
    *out = NULL;
#ifdef HUBD_HAVE_FLEET
    return fleet_configured(cfg) ? fleet_new(loop, cfg, js, store, out, err, cap) : 0;
#else
    (void)loop, (void)js, (void)store;
    return swarm_glue_check(cfg, err, cap);
#endif
}

void swarm_glue_reload(struct fleet *f)
{
#ifdef HUBD_HAVE_FLEET
    if (f)
        fleet_reload(f);
#else
    (void)f;
#endif
}

int swarm_glue_check(const hubd_config_t *cfg, char *err, size_t cap)
{
#ifdef HUBD_HAVE_FLEET
    return fleet_configured(cfg) ? fleet_check_config(cfg, err, cap) : 0;
#else
    if (!cfg->fleet_listen && !cfg->fleet_peers && !cfg->fleet_ca && !cfg->fleet_cert &&
        !cfg->fleet_key && !cfg->fleet_tracker)
        return 0;
    snprintf(err, cap,
             "fleet_* is set, and this hubd was built without libtorrent-rasterbar: "
             "it cannot join a swarm");
    return -ENOTSUP;
#endif
}
