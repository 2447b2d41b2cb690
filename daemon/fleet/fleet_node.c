/* fleet_node: the swarm's node (fleet.h): its start and stop, the reload
 * of the member list, the metadata it answers other nodes, the fetches it
 * starts for them, its clock, and what `hubctl fleet status` shows. */
#include "fleet_internal.h"
#include "log.h"
#include "sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fleet_configured(const hubd_config_t *cfg)
{
    return cfg->fleet_listen || cfg->fleet_peers || cfg->fleet_ca || cfg->fleet_cert ||
           cfg->fleet_key || cfg->fleet_tracker;
}

/* A PEM file's text (at most 1 MiB), malloc'd; NULL with err set. */
static char *read_pem(const char *key, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s %s: %s", key, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap + 1);
    ssize_t n = 0;
    while (buf && len < cap && (n = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)n;
    int e = n < 0 ? errno : 0;
    close(fd);
    if (!buf || e || len == 0) {
        snprintf(err, errlen, "%s %s: %s", key, path,
                 !buf ? "out of memory"
                 : e  ? strerror(e)
                      : "empty");
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

int fleet_check_config(const hubd_config_t *cfg, char *err, size_t errlen)
{
    const struct {
        const char *name, *value;
    } need[] = {{"fleet_listen", cfg->fleet_listen},
                {"fleet_peers", cfg->fleet_peers},
                {"fleet_ca", cfg->fleet_ca},
                {"fleet_cert", cfg->fleet_cert},
                {"fleet_key", cfg->fleet_key}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!need[i].value) {
            snprintf(err, errlen,
                     "the swarm needs fleet_listen, fleet_peers, fleet_ca, fleet_cert and "
                     "fleet_key together: %s is not set",
                     need[i].name);
            return -EINVAL;
        }
    fleet_peers_t peers;
    int rc = fleet_peers_load(cfg->fleet_peers, cfg->fleet_listen, &peers, err, errlen);
    if (rc)
        return rc;
    fleet_peers_free(&peers);
    fmeta_identity_t *id = NULL;
    rc = fmeta_identity_new(cfg->fleet_ca, cfg->fleet_cert, cfg->fleet_key, &id, err, errlen);
    fmeta_identity_free(id);
    return rc;
}

static void maybe_done(fleet_t *f);
static void fleet_item_back(fleet_t *f);

/* ---- the metadata other nodes ask for, and the fetches it starts --------- */

typedef struct warm {
    job_waiter_t w;
    fleet_t *f;
    char sha[65];
} warm_t;

static void warm_start(job_waiter_t *w, fetch_kind_t kind, uint64_t id)
{
    (void)w, (void)kind, (void)id;
}

static void warm_progress(job_waiter_t *w, const job_progress_t *p)
{
    (void)w, (void)p;
}

/* A fetch for another node failed: remembered in the ring, in place of
 * the oldest failure once it is full. */
static void warm_remember(fleet_t *f, const char *sha)
{
    warm_failure_t *wf = &f->warm_failed[f->warm_failed_next++ % WARM_FAILED_MAX];
    snprintf(wf->sha, sizeof wf->sha, "%s", sha);
    wf->at = uv_now(f->loop) | 1;
}

static int warm_recently_failed(const fleet_t *f, const char *sha)
{
    uint64_t now = uv_now(f->loop);
    for (size_t i = 0; i < WARM_FAILED_MAX; i++) {
        const warm_failure_t *wf = &f->warm_failed[i];
        if (wf->at && now - wf->at < WARM_AGAIN_MS && strcmp(wf->sha, sha) == 0)
            return 1;
    }
    return 0;
}

static void warm_finish(job_waiter_t *w, const job_result_t *res)
{
    warm_t *wm = (warm_t *)w;
    fleet_t *f = wm->f;
    f->warm_out--;
    if (f->stopping) {
        free(wm);
        maybe_done(f);
        return;
    }
    if (!res->err_code && res->path)
        fleet_offer(f, wm->sha, res->size, res->path); /* a hit is seeded here */
    else if (res->err_code) {
        /* The asker hears NONE for a while and, after fleet_wait, fetches
         * it itself: its client then hears the origin's own answer. */
        log_warn("fleet: %s: the fetch another node asked for failed: %s: %s", wm->sha,
                 res->err_code, res->err_msg ? res->err_msg : "");
        warm_remember(f, wm->sha);
    }
    free(wm);
}

/* A public file a member asked for and this node neither has nor fetches:
 * it is fetched (or found in the cache) and then seeded. Only without
 * credentials: a URL that needs a token is never fetched on another's
 * word. */
static int warm_fetch(fleet_t *f, const char *sha, const char *url)
{
    if (f->warm_out >= WARM_MAX || f->stopping)
        return -EAGAIN;
    warm_t *wm = calloc(1, sizeof *wm);
    if (!wm)
        return -ENOMEM;
    wm->f = f;
    snprintf(wm->sha, sizeof wm->sha, "%s", sha);
    wm->w.on_start = warm_start;
    wm->w.on_progress = warm_progress;
    wm->w.on_finish = warm_finish;
    wm->w.uid = getuid();
    const char *code = NULL, *msg = NULL;
    int rc = jobs_fetch(f->jobs, url, sha, NULL, 0, &wm->w, &code, &msg);
    if (rc) {
        log_info("fleet: %s: cannot fetch %s for another node: %s: %s", sha, url, code ? code : "",
                 msg ? msg : "");
        free(wm);
        return rc;
    }
    f->warm_out++;
    return 0;
}

static int is_hex64(const char *s)
{
    size_t i = 0;
    for (; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return i == 64;
}

/* A blob this node has but does not seed (it was in the cache before the
 * start, or before the swarm), asked for without a URL (a gated file):
 * looked for in the pool, then seeded; not there, the asker hears NONE
 * (the failure ring) and goes on down its order. As many at once as warm
 * fetches, with which they share the count. */
typedef struct probe_item {
    uv_work_t work;
    fleet_t *f;
    char sha[65];
    char path[PATH_MAX];
    uint64_t size;
    int found;
} probe_item_t;

static void probe_work(uv_work_t *req)
{
    probe_item_t *it = req->data;
    struct stat st;
    it->found = stat(it->path, &st) == 0 && S_ISREG(st.st_mode);
    it->size = it->found ? (uint64_t)st.st_size : 0;
}

static void after_probe(uv_work_t *req, int status)
{
    probe_item_t *it = req->data;
    fleet_t *f = it->f;
    f->warm_out--;
    if (!status && it->found && !f->stopping)
        fleet_offer(f, it->sha, it->size, it->path);
    else if (!f->stopping)
        warm_remember(f, it->sha);
    free(it);
    fleet_item_back(f);
}

static int probe_blob(fleet_t *f, const char *sha)
{
    if (f->warm_out >= WARM_MAX || f->stopping)
        return -EAGAIN;
    probe_item_t *it = calloc(1, sizeof *it);
    if (!it)
        return -ENOMEM;
    it->f = f;
    snprintf(it->sha, sizeof it->sha, "%s", sha);
    store_blob_path(f->store, sha, it->path, sizeof it->path);
    it->work.data = it;
    f->warm_out++;
    f->items++;
    uv_queue_work(f->loop, &it->work, probe_work, after_probe);
    return 0;
}

static fmeta_status_t on_lookup(void *arg, const char *sha, const char *url, const char *peer,
                                const unsigned char **torrent, size_t *len)
{
    fleet_t *f = arg;
    if (f->stopping || !is_hex64(sha))
        return FMETA_NONE;
    ffile_t *ff = ff_find(f, sha);
    if (ff && ff->torrent && (ff->state == FF_SEEDING || ff->state == FF_SWARMED)) {
        *torrent = ff->torrent;
        *len = ff->torrent_len;
        return FMETA_HAVE;
    }
    if (ff && ff->state == FF_FETCHING && !ff->job && !jobs_running(f->jobs, ff->job_id))
        ff_set(ff, FF_IDLE); /* its origin download failed: no longer fetching */
    if (ff && ff->state != FF_IDLE)
        return FMETA_FETCHING;
    if (!warm_recently_failed(f, sha) && url && warm_fetch(f, sha, url) == 0) {
        log_info("fleet: %s: %s asked for it: fetching it to seed", sha, peer);
        return FMETA_FETCHING;
    }
    if (!warm_recently_failed(f, sha) && !url && probe_blob(f, sha) == 0)
        return FMETA_FETCHING; /* a blob of the cache, not yet seeded? */
    if (ff)
        ff_release(ff);
    return FMETA_NONE;
}

/* ---- the clock: asks again, progress, stalls, the sweep ------------------ */

static void poll_events(fleet_t *f)
{
    lt_event_t ev[32];
    int n;
    do {
        n = lt_session_poll(f->ses, ev, 32);
        for (int i = 0; i < n; i++)
            fleet_on_event(f, &ev[i]);
    } while (n == 32);
}

static void on_async(uv_async_t *a)
{
    fleet_t *f = a->data;
    if (f->ses && !f->stopping)
        poll_events(f);
}

typedef struct sweep_item {
    uv_work_t work;
    fleet_t *f;
    size_t n;
    struct {
        char sha[65];
        char path[PATH_MAX];
        int gone;
    } * v;
} sweep_item_t;

static void sweep_work(uv_work_t *req)
{
    sweep_item_t *it = req->data;
    struct stat st;
    for (size_t i = 0; i < it->n; i++)
        it->v[i].gone = stat(it->v[i].path, &st) != 0 && errno == ENOENT;
}

static void after_sweep(uv_work_t *req, int status)
{
    sweep_item_t *it = req->data;
    fleet_t *f = it->f;
    f->sweep_out = 0;
    for (size_t i = 0; !status && !f->stopping && i < it->n; i++) {
        if (!it->v[i].gone)
            continue;
        ffile_t *ff = ff_find(f, it->v[i].sha);
        const char *path = ff && ff->state == FF_SEEDING ? ff->blob : ff ? ff->part : "";
        if (!ff || (ff->state != FF_SEEDING && ff->state != FF_SWARMED) ||
            strcmp(path, it->v[i].path) != 0)
            continue;
        /* Evicted or removed: nothing to seed it from. */
        log_info("fleet: %s: left the cache: no longer seeded", ff->sha);
        ff_remove_torrent(ff);
        ff_set(ff, FF_IDLE);
        ff_release(ff);
    }
    free(it->v);
    free(it);
    fleet_item_back(f);
}

static void start_sweep(fleet_t *f)
{
    size_t n = 0;
    for (list_node_t *x = list_first(&f->files); x; x = list_next(&f->files, x)) {
        ffile_t *ff = list_entry(x, ffile_t, node);
        n += (ff->state == FF_SEEDING || ff->state == FF_SWARMED) && ff->t;
    }
    if (!n)
        return;
    sweep_item_t *it = calloc(1, sizeof *it);
    if (it)
        it->v = calloc(n, sizeof *it->v);
    if (!it || !it->v) {
        free(it);
        return;
    }
    for (list_node_t *x = list_first(&f->files); x; x = list_next(&f->files, x)) {
        ffile_t *ff = list_entry(x, ffile_t, node);
        if ((ff->state != FF_SEEDING && ff->state != FF_SWARMED) || !ff->t)
            continue;
        snprintf(it->v[it->n].sha, sizeof it->v[it->n].sha, "%s", ff->sha);
        snprintf(it->v[it->n].path, sizeof it->v[it->n].path, "%s",
                 ff->state == FF_SEEDING ? ff->blob : ff->part);
        it->n++;
    }
    it->f = f;
    it->work.data = it;
    f->sweep_out = 1;
    f->items++;
    uv_queue_work(f->loop, &it->work, sweep_work, after_sweep);
}

static void on_tick(uv_timer_t *t)
{
    fleet_t *f = t->data;
    uint64_t now = uv_now(f->loop);
    poll_events(f);
    /* The figures read below are those of the last tick's request: asking
     * libtorrent and waiting, torrent by torrent, held this loop for
     * seconds on a loaded node, and its asks went unanswered. */
    lt_session_post_updates(f->ses);
    list_node_t *n, *tmp;
    list_foreach_safe(&f->files, n, tmp)
    {
        ffile_t *ff = list_entry(n, ffile_t, node);
        if (ff->state == FF_IDLE) {
            ff_release(ff);
            continue;
        }
        if (ff->state == FF_FETCHING && !ff->job && !jobs_running(f->jobs, ff->job_id)) {
            /* Its download from the origin ended without a blob (a commit
             * makes it MAKING): no one fetches it now. Left for the next
             * ask of it to notice, every failed download of a file this
             * node is the seed of kept a file here for good. */
            ff_set(ff, FF_IDLE);
            ff_release(ff);
            continue;
        }
        /* An ask due again: a seed still fetching, or a busy one (SWARMING:
         * a stall's ask that timed out). */
        if ((ff->state == FF_ASKING || ff->state == FF_SWARMING) && ff->job && !ff->ask &&
            ff->next_ask && now >= ff->next_ask) {
            ff_ask(ff);
            continue;
        }
        if (ff->state != FF_SWARMING || !ff->job || !ff->t)
            continue;
        lt_torrent_stats_t st;
        lt_torrent_stats_seen(ff->t, &st);
        if (st.bytes_done != ff->last_done) {
            ff->stalls = 0;
            ff->last_done = st.bytes_done;
            ff->last_move = now;
            jobs_swarm_progress(ff->job, st.bytes_done);
        } else if (now - ff->last_move >= STALL_MS && !ff->ask) {
            /* Nothing new for a while: the seed may have gone. The order is
             * asked again from its top; this node takes the file over if
             * every node before it is down. */
            ff->last_move = now;
            if (++ff->stalls >= 2 && ff->spoiled) {
                /* Again, after pieces failed: libtorrent may have banned
                 * the honest peers too (each that sent a block of a piece
                 * a liar spoiled is blamed with it). The torrent starts
                 * over on the same partial, its peer list fresh; the
                 * verified pieces stay. Without a spoiled piece a stall is
                 * a slow swarm, and starting over would only add the
                 * check of the partial and a handshake with every member:
                 * at 64 nodes of 2 cores, restarts every 20 s made the
                 * load that stalled the swarm. */
                log_info("fleet: %s: no new piece in %u s, twice: the torrent starts over on "
                         "what it has",
                         ff->sha, 2 * STALL_MS / 1000);
                ff->stalls = 0;
                ff->then_check = 1;
                ff_remove_torrent(ff);
                continue;
            }
            log_info("fleet: %s: no new piece in %u s: asking its seed again", ff->sha,
                     STALL_MS / 1000);
            ff_ask_from_top(ff);
            continue;
        }
        if (now - ff->peers_at >= PEERS_AGAIN_MS && (size_t)st.peers + 1 < f->peers.n)
            ff_add_peers(ff);
    }
    if (!f->sweep_out && now - f->swept_at >= SWEEP_MS) {
        f->swept_at = now;
        start_sweep(f);
    }
}

/* libtorrent's thread: only the signal (lt_shim.h). */
static void on_notify(void *arg)
{
    uv_async_send(arg);
}

/* ---- start, reload, stop ----------------------------------------------- */

int fleet_new(uv_loop_t *loop, const hubd_config_t *cfg, jobs_t *js, store_t *store, fleet_t **out,
              char *err, size_t errlen)
{
    int rc = fleet_check_config(cfg, err, errlen);
    if (rc)
        return rc;
    fleet_t *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    f->loop = loop;
    f->cfg = cfg;
    f->jobs = js;
    f->store = store;
    f->item_back = fleet_item_back;
    list_init(&f->files);
    char *cert = NULL, *key = NULL;
    if ((rc = fleet_peers_load(cfg->fleet_peers, cfg->fleet_listen, &f->peers, err, errlen)) ||
        (rc = fmeta_identity_new(cfg->fleet_ca, cfg->fleet_cert, cfg->fleet_key, &f->id, err,
                                 errlen)))
        goto fail;
    f->ca_pem = read_pem("fleet_ca", cfg->fleet_ca, err, errlen);
    if (f->ca_pem) {
        sha256_ctx_t sc;
        sha256_init(&sc);
        sha256_update(&sc, f->ca_pem, strlen(f->ca_pem));
        sha256_final(&sc, f->verdict_secret);
    }
    if (fleet_verdicts_new(f)) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    cert = read_pem("fleet_cert", cfg->fleet_cert, err, errlen);
    key = cert ? read_pem("fleet_key", cfg->fleet_key, err, errlen) : NULL;
    if (!f->ca_pem || !cert || !key) {
        rc = -EINVAL;
        goto fail;
    }
    const fleet_peer_t *me = &f->peers.v[f->peers.self];
    snprintf(f->listen_ip, sizeof f->listen_ip, "%s", me->ip);
    if (me->port >= 65535) {
        snprintf(err, errlen, "fleet_listen's port %d: the metadata exchange needs port+1",
                 me->port);
        rc = -EINVAL;
        goto fail;
    }
    uv_async_init(loop, &f->async, on_async);
    uv_timer_init(loop, &f->tick);
    f->async.data = f->tick.data = f;
    f->handles = 2;
    lt_config_t lc = {.listen_ip = me->ip,
                      .tcp_port = -1, /* SSL torrents only: no plain peer port */
                      .ssl_port = me->port,
                      .cert_pem = cert,
                      .key_pem = key,
                      .notify = on_notify,
                      .notify_arg = &f->async};
    lt_why_t why;
    rc = lt_session_new(&lc, &f->ses, &why);
    memset(key, 0, strlen(key));
    free(key);
    free(cert);
    key = cert = NULL;
    if (rc) {
        snprintf(err, errlen, "the swarm's peer port %s: %s", me->text, why.text);
        goto fail_handles;
    }
    if ((rc = fmeta_server_start(loop, f->id, me->ip, me->port + 1, on_lookup, f, &f->meta, err,
                                 errlen)))
        goto fail_handles;
    fmeta_server_set_verdicts(f->meta, fleet_verdict_lookup, f);
    uv_timer_start(&f->tick, on_tick, TICK_MS, TICK_MS);
    jobs_set_swarm(js, &fleet_swarm_ops, f);
    log_info("fleet: a member of %zu: pieces on %s, metadata on port %d%s%s", f->peers.n, me->text,
             me->port + 1, cfg->fleet_tracker ? ", tracker " : "",
             cfg->fleet_tracker ? cfg->fleet_tracker : "");
    *out = f;
    return 0;

fail_handles:
    /* Nothing was started that needs the loop: the session (if any) is
     * freed here, at start-up, and the handles close with the loop's run. */
    lt_session_free(f->ses);
    uv_close((uv_handle_t *)&f->async, NULL);
    uv_close((uv_handle_t *)&f->tick, NULL);
    fmeta_identity_free(f->id);
    fleet_peers_free(&f->peers);
    fleet_verdicts_free(f);
    free(f->ca_pem);
    /* f itself stays until the handles' close: leaked at a failed start,
     * which ends the process. */
    return rc;
fail:
    free(cert);
    free(key);
    fleet_verdicts_free(f);
    fmeta_identity_free(f->id);
    fleet_peers_free(&f->peers);
    free(f->ca_pem);
    free(f);
    return rc;
}

typedef struct reload_item {
    uv_work_t work;
    fleet_t *f;
    char *path, *self;
    fleet_peers_t peers;
    char err[300];
    int rc;
} reload_item_t;

static void reload_work(uv_work_t *req)
{
    reload_item_t *it = req->data;
    it->rc = fleet_peers_load(it->path, it->self, &it->peers, it->err, sizeof it->err);
}

static void after_reload(uv_work_t *req, int status)
{
    reload_item_t *it = req->data;
    fleet_t *f = it->f;
    f->reload_out = 0;
    if (status || it->rc) {
        log_err("fleet: %s: the members stay as they were",
                status ? "the reload was cancelled" : it->err);
    } else if (!f->stopping) {
        fleet_peers_free(&f->peers);
        f->peers = it->peers;
        it->peers.v = NULL;
        log_info("fleet: fleet_peers read again: %zu members", f->peers.n);
    }
    fleet_peers_free(&it->peers);
    free(it->path);
    free(it->self);
    free(it);
    fleet_item_back(f);
}

void fleet_reload(fleet_t *f)
{
    if (f->reload_out || f->stopping || !f->cfg->fleet_peers)
        return;
    reload_item_t *it = calloc(1, sizeof *it);
    if (!it)
        return;
    /* Copies: a later reload may change the config's strings. */
    it->path = strdup(f->cfg->fleet_peers);
    it->self = strdup(f->cfg->fleet_listen);
    if (!it->path || !it->self) {
        free(it->path);
        free(it->self);
        free(it);
        return;
    }
    it->f = f;
    it->work.data = it;
    f->reload_out = 1;
    f->items++;
    uv_queue_work(f->loop, &it->work, reload_work, after_reload);
}

/* ---- status --------------------------------------------------------------- */

void fleet_status(fleet_t *f, void (*file)(void *arg, const fleet_file_info_t *fi),
                  void (*peer)(void *arg, const fleet_peer_info_t *pi), void *arg,
                  fleet_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->listen = f->peers.v[f->peers.self].text;
    info->members = f->peers.n;
    info->up = f->up_gone;
    info->down = f->down_gone;
    info->from_swarm = f->from_swarm;
    info->from_origin_as_seed = f->from_origin;
    info->fell_back = f->fell_back;
    info->bad_pieces = f->bad_pieces;
    info->banned = f->banned;
    fmeta_server_stats_t ms;
    fmeta_server_stats(f->meta, &ms);
    info->meta_refused = ms.refused;
    fleet_verdicts_counts(f, &info->verdicts_served, &info->verdicts_leased, &info->verdicts_told);
    fleet_peer_info_t *peers = calloc(STATUS_PEERS, sizeof *peers);
    char(*names)[64] = calloc(STATUS_PEERS, sizeof *names);
    lt_peer_info_t *pi = calloc(STATUS_PEERS, sizeof *pi);
    size_t npeers = 0;
    for (list_node_t *n = list_first(&f->files); n; n = list_next(&f->files, n)) {
        ffile_t *ff = list_entry(n, ffile_t, node);
        fleet_file_info_t fi = {.sha256 = ff->sha,
                                .state = ff_names[ff->state],
                                .size = ff->size,
                                .info_hash = ff->info_hash,
                                .info_hash_v1 = ff->info_hash_v1};
        lt_torrent_stats_t st;
        if (ff->t && !lt_torrent_stats(ff->t, &st)) {
            fi.done = st.bytes_done;
            fi.up = st.bytes_up;
            fi.down = st.bytes_down;
            fi.peers = st.peers;
            fi.size = st.size;
            info->up += st.bytes_up;
            info->down += st.bytes_down;
        }
        if (ff->state != FF_IDLE)
            file(arg, &fi);
        int k = ff->t && pi ? lt_torrent_peers(ff->t, pi, STATUS_PEERS) : 0;
        for (int i = 0; i < k && peers && names; i++) {
            size_t j = 0;
            while (j < npeers && strcmp(names[j], pi[i].peer) != 0)
                j++;
            if (j == npeers) {
                if (npeers == STATUS_PEERS)
                    continue;
                snprintf(names[j], sizeof names[j], "%s", pi[i].peer);
                peers[j].peer = names[j];
                npeers++;
            }
            peers[j].up += pi[i].bytes_up;
            peers[j].down += pi[i].bytes_down;
            peers[j].files++;
        }
    }
    for (size_t j = 0; j < npeers; j++)
        peer(arg, &peers[j]);
    free(peers);
    free(names);
    free(pi);
}

static void fleet_item_back(fleet_t *f)
{
    f->items--;
    if (f->stopping)
        maybe_done(f);
}

static void maybe_done(fleet_t *f)
{
    if (f->handles || f->items || f->warm_out || f->ses)
        return;
    list_node_t *n, *tmp;
    list_foreach_safe(&f->files, n, tmp)
    {
        ffile_t *ff = list_entry(n, ffile_t, node);
        list_remove(&ff->node);
        free(ff->url);
        free(ff->torrent);
        free(ff);
    }
    fmeta_identity_free(f->id);
    fleet_peers_free(&f->peers);
    fleet_verdicts_free(f);
    free(f->ca_pem);
    void (*done)(void *) = f->done;
    void *arg = f->done_arg;
    free(f);
    if (done)
        done(arg);
}

static void on_handle_closed(uv_handle_t *h)
{
    fleet_t *f = h->data;
    f->handles--;
    maybe_done(f);
}

typedef struct free_item {
    uv_work_t work;
    fleet_t *f;
    lt_session_t *ses;
} free_item_t;

static void free_work(uv_work_t *req)
{
    free_item_t *it = req->data;
    lt_session_free(it->ses);
}

static void after_free(uv_work_t *req, int status)
{
    free_item_t *it = req->data;
    fleet_t *f = it->f;
    (void)status;
    free(it);
    f->ses = NULL;
    f->items--; /* maybe_done runs as the async closes */
    /* notify runs no more: the async may close now (lt_shim.h). */
    uv_close((uv_handle_t *)&f->async, on_handle_closed);
}

static void after_meta_closed(void *arg)
{
    fleet_item_back(arg);
}

void fleet_stop(fleet_t *f, void (*done)(void *arg), void *arg)
{
    f->stopping = 1;
    f->done = done;
    f->done_arg = arg;
    jobs_set_swarm(f->jobs, NULL, NULL);
    for (list_node_t *n = list_first(&f->files); n; n = list_next(&f->files, n)) {
        ffile_t *ff = list_entry(n, ffile_t, node);
        if (ff->ask) {
            fmeta_ask_cancel(ff->ask);
            ff->ask = NULL;
        }
        ff->t = NULL; /* freed with the session */
    }
    uv_timer_stop(&f->tick);
    uv_close((uv_handle_t *)&f->tick, on_handle_closed);
    f->items++;
    fmeta_server_close(f->meta, after_meta_closed, f);
    free_item_t *it = calloc(1, sizeof *it);
    if (!it) { /* no memory for the item: stopped here, at shutdown */
        lt_session_free(f->ses);
        f->ses = NULL;
        uv_close((uv_handle_t *)&f->async, on_handle_closed);
        return;
    }
    it->f = f;
    it->ses = f->ses;
    it->work.data = it;
    f->items++;
    uv_queue_work(f->loop, &it->work, free_work, after_free);
}
