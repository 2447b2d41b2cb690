/* fleet: the cluster swarm (fleet.h): which node fetches a file, asking
 * its seed, swarming into the job's partial, and seeding what is cached.
 *
 * Each file the swarm knows is an ffile_t, keyed by its SHA-256, in one of
 * these states (ff_set checks every change against the table below):
 *
 *   ASKING   --the seed has it (HAVE)------------------> PREPARING
 *   PREPARING --the partial made, the torrent added----> SWARMING
 *   SWARMING --every piece in, the job checks them-----> SWARMED
 *   ASKING, SWARMING --this node is next in line-------> FETCHING (the origin)
 *   FETCHING, SWARMED, IDLE --the blob committed-------> MAKING (its torrent)
 *   MAKING   --the torrent made and added--------------> SEEDING
 *   SWARMED  --the blob committed: moved to its path---> SEEDING
 *   any      --the job went, the blob left, a failure--> IDLE (freed once nothing is out)
 *
 * A file is freed in IDLE once no ask, pool item or torrent removal is
 * out for it (ff_release). */
#include "fleet_internal.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

const char *const ff_names[FF_NSTATES] = {
    "idle", "asking", "preparing", "swarming", "swarmed", "fetching", "making", "seeding",
};

#define TO(s) (1u << (s))
static const unsigned ff_allowed[FF_NSTATES] = {
    /* A job takes the swarm (or this node is its seed); a blob is offered. */
    [FF_IDLE] = TO(FF_ASKING) | TO(FF_FETCHING) | TO(FF_MAKING),
    [FF_ASKING] = TO(FF_PREPARING) | TO(FF_FETCHING) | TO(FF_IDLE),
    [FF_PREPARING] = TO(FF_SWARMING) | TO(FF_FETCHING) | TO(FF_IDLE),
    [FF_SWARMING] = TO(FF_SWARMED) | TO(FF_FETCHING) | TO(FF_IDLE),
    [FF_SWARMED] = TO(FF_SEEDING) | TO(FF_MAKING) | TO(FF_IDLE),
    [FF_FETCHING] = TO(FF_MAKING) | TO(FF_IDLE) | TO(FF_ASKING),
    [FF_MAKING] = TO(FF_SEEDING) | TO(FF_IDLE),
    [FF_SEEDING] = TO(FF_IDLE) | TO(FF_MAKING),
};
#undef TO

void ff_set(ffile_t *ff, ff_state_t to)
{
    if (!(ff_allowed[ff->state] >> to & 1u)) {
        log_err("fleet: %s: no way from %s to %s (a bug): kept", ff->sha, ff_names[ff->state],
                ff_names[to]);
        return;
    }
    ff->state = to;
}

ffile_t *ff_find(fleet_t *f, const char *sha)
{
    for (list_node_t *n = list_first(&f->files); n; n = list_next(&f->files, n)) {
        ffile_t *ff = list_entry(n, ffile_t, node);
        if (strcmp(ff->sha, sha) == 0)
            return ff;
    }
    return NULL;
}

ffile_t *ff_get(fleet_t *f, const char *sha)
{
    ffile_t *ff = ff_find(f, sha);
    if (ff)
        return ff;
    ff = calloc(1, sizeof *ff);
    if (!ff)
        return NULL;
    ff->f = f;
    snprintf(ff->sha, sizeof ff->sha, "%s", sha);
    list_push_back(&f->files, &ff->node);
    return ff;
}

/* Frees an idle file once nothing is out for it. */
void ff_release(ffile_t *ff)
{
    if (ff->state != FF_IDLE || ff->job || ff->ask || ff->t || ff->removing || ff->items)
        return;
    list_remove(&ff->node);
    free(ff->url);
    free(ff->torrent);
    free(ff);
}

/* The torrent leaves the session (its file stays); then, on LT_EV_REMOVED,
 * what then_seed or then_origin says. */
void ff_remove_torrent(ffile_t *ff)
{
    if (!ff->t)
        return;
    fleet_t *f = ff->f;
    lt_torrent_stats_t st;
    int rc = lt_torrent_stats(ff->t, &st);
    uint64_t up = rc ? 0 : st.bytes_up, down = rc ? 0 : st.bytes_down;
    f->up_gone += up; /* the session's totals count the torrents in it only */
    f->down_gone += down;
    lt_torrent_remove(ff->t);
    ff->t = NULL;
    ff->removing = 1;
}

void ff_add_peers(ffile_t *ff)
{
    fleet_t *f = ff->f;
    lt_why_t why;
    for (size_t i = 0; ff->t && i < f->peers.n; i++)
        if (i != f->peers.self &&
            lt_torrent_add_peer(ff->t, f->peers.v[i].ip, f->peers.v[i].port, &why))
            log_warn("fleet: %s: peer %s: %s", ff->sha, f->peers.v[i].text, why.text);
    ff->peers_at = uv_now(f->loop);
}

/* Adds the torrent of ff->torrent for path; 0 or a negative errno. */
static int ff_add_torrent(ffile_t *ff, const char *path, lt_add_mode_t mode)
{
    lt_add_params_t p = {.torrent = ff->torrent,
                         .torrent_len = ff->torrent_len,
                         .path = path,
                         .mode = mode,
                         .user = ff,
                         .tracker = ff->f->cfg->fleet_tracker};
    lt_why_t why;
    int rc = lt_torrent_add(ff->f->ses, &p, &ff->t, &why);
    if (rc) {
        log_warn("fleet: %s: cannot add its torrent for %s: %s", ff->sha, path, why.text);
        return rc;
    }
    ff->spoiled = 0;
    ff_add_peers(ff);
    return 0;
}

/* ---- the job's side ------------------------------------------------------ */

/* The job goes to the origin: this node is next in line, or the seed did
 * not start. Once a torrent is gone (libtorrent writes no more into the
 * partial's name). */
static void ff_to_origin(ffile_t *ff, int seed, const char *why)
{
    fleet_t *f = ff->f;
    job_t *job = ff->job;
    if (ff->ask) {
        fmeta_ask_cancel(ff->ask);
        ff->ask = NULL;
    }
    ff_set(ff, FF_FETCHING);
    ff->job = NULL;
    if (seed) /* this node took the file over: it is the seed now */
        f->from_origin++;
    else
        f->fell_back++;
    if (ff->t) {
        ff->then_origin = 1;
        ff->job = job; /* kept until the removal is done */
        ff_remove_torrent(ff);
        return;
    }
    jobs_swarm_origin(job, why);
}

static void ff_drop_job(ffile_t *ff)
{
    if (ff->ask) {
        fmeta_ask_cancel(ff->ask);
        ff->ask = NULL;
    }
    ff->job = NULL;
    ff->then_origin = 0;
    if (ff->state == FF_ASKING || ff->state == FF_PREPARING || ff->state == FF_SWARMING ||
        ff->state == FF_FETCHING) {
        ff_remove_torrent(ff);
        ff_set(ff, FF_IDLE);
    }
    ff_release(ff);
}

typedef struct prep_item {
    uv_work_t work;
    ffile_t *ff;
    store_t *store;
    uint64_t part_id;
    uint64_t size;  /* the torrent's file */
    uint64_t avail; /* the cache's file system's free bytes, when short */
    int rc;
} prep_item_t;

/* The partial's name from its path: tmp/<id>.part. */
static uint64_t part_id_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return strtoull(slash ? slash + 1 : path, NULL, 10);
}

/* The partial, made empty; and room for the whole file first: libtorrent
 * writes through a memory map, where a full disk is a fault, not an
 * ENOSPC, and a download that cannot fit should say so before it starts. */
static void prep_work(uv_work_t *req)
{
    prep_item_t *it = req->data;
    int fd = -1;
    it->rc = store_tmp_create(it->store, it->part_id, &fd);
    struct statvfs v;
    if (!it->rc && fstatvfs(fd, &v) == 0 && (uint64_t)v.f_bavail * v.f_frsize < it->size) {
        it->avail = (uint64_t)v.f_bavail * v.f_frsize;
        it->rc = -ENOSPC;
        store_discard(it->store, fd, it->part_id); /* closes fd */
        return;
    }
    if (fd >= 0)
        close(fd);
}

static void prep_back(prep_item_t *it, int status)
{
    ffile_t *ff = it->ff;
    int rc = status ? status : it->rc;
    uint64_t it_avail_size[2] = {it->avail, it->rc == -ENOSPC ? it->size : 0};
    free(it);
    ff->items--;
    if (!ff->job || ff->state != FF_PREPARING) { /* the job went meanwhile */
        ff_release(ff);
        return;
    }
    if (rc) {
        job_t *job = ff->job;
        char msg[300];
        if (rc == -ENOSPC && it_avail_size[1])
            snprintf(msg, sizeof msg,
                     "the file is %llu bytes, more than the cache's file system has free (%llu) "
                     "(this is hubd's cache, not your disk or output folder: ask hubd's admin "
                     "to free room: hubctl gc, max_cache_size, min_free_space)",
                     (unsigned long long)it_avail_size[1], (unsigned long long)it_avail_size[0]);
        else
            snprintf(msg, sizeof msg, "cannot make the swarm download's partial file: %s",
                     strerror(-rc));
        ff_drop_job(ff);
        jobs_swarm_fail(job, rc == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    if (ff_add_torrent(ff, ff->part, LT_ADD_CHECK)) {
        ff_to_origin(ff, 0, "the seed's metadata cannot be used");
        return;
    }
    lt_torrent_stats_t st;
    lt_torrent_stats(ff->t, &st);
    ff->size = st.size;
    ff_set(ff, FF_SWARMING);
    ff->last_move = uv_now(ff->f->loop);
    ff->last_done = 0;
    jobs_swarm_sized(ff->job, st.size);
    log_info("fleet: %s: %llu bytes from the swarm (%zu members)", ff->sha,
             (unsigned long long)st.size, ff->f->peers.n);
}

/* Last, after the file may have gone: a stopping node may be done. */
static void after_prep(uv_work_t *req, int status)
{
    prep_item_t *it = req->data;
    fleet_t *f = it->ff->f;
    prep_back(it, status);
    f->item_back(f);
}

static void on_reply(void *arg, int rc, fmeta_status_t status, const unsigned char *torrent,
                     size_t len, const char *why);

/* The order is asked from its top: a new download, or a stalled one. */
void ff_ask_from_top(ffile_t *ff)
{
    ff->cand = 0;
    ff->cand_misses = 0;
    ff->ask_gap = ASK_AGAIN_MS;
    ff_ask(ff);
}

/* Whether an ask's failure says the node is busy rather than gone: no
 * answer in time, or the connection closed before it (a node at its cap of
 * connections turns new ones away). A refused connection, an unreachable
 * host or a TLS failure (not one of ours) says gone. */
static int busy(int rc)
{
    return rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EPIPE || rc == -ECONNABORTED;
}

/* The next ask of a node that is fetching the file (or has not started
 * it): twice as late each time, up to ASK_AGAIN_MAX_MS, give or take a
 * quarter. Every node that wants a file asks its seed: at a fixed 500 ms,
 * 32 nodes wanting 8 files made hundreds of TLS handshakes a second, and
 * the seeds, busy with them, answered too late and were taken for down.
 * The spread keeps the askers of one seed from coming in step. */
static void ask_later(ffile_t *ff, uint64_t now)
{
    uint64_t gap = ff->ask_gap ? ff->ask_gap : ASK_AGAIN_MS;
    uint64_t jitter = (uv_hrtime() / 1000) % (gap / 2 + 1);
    ff->next_ask = now + gap - gap / 4 + jitter;
    ff->ask_gap = gap * 2 < ASK_AGAIN_MAX_MS ? gap * 2 : ASK_AGAIN_MAX_MS;
}

/* Asks the file's next candidate, or takes it over when that is this node. */
void ff_ask(ffile_t *ff)
{
    fleet_t *f = ff->f;
    size_t *order = malloc(f->peers.n * sizeof *order);
    if (!order) {
        ff->next_ask = uv_now(f->loop) + ASK_AGAIN_MS;
        return;
    }
    fleet_peers_order(&f->peers, ff->sha, order);
    size_t c = ff->cand < f->peers.n ? order[ff->cand] : f->peers.self;
    free(order);
    ff->next_ask = 0;
    if (c == f->peers.self) {
        ff_to_origin(ff, 1,
                     ff->cand ? "the nodes before this one in the file's order are down: "
                                "this node is its seed now"
                              : "this node is the file's seed");
        return;
    }
    const fleet_peer_t *p = &f->peers.v[c];
    ff->ask = fmeta_ask(f->loop, f->id, p->ip, p->port + 1, ff->sha, ff->url, ASK_TIMEOUT_MS,
                        on_reply, ff);
    if (!ff->ask)
        ff->next_ask = uv_now(f->loop) + ASK_AGAIN_MS;
}

static void on_reply(void *arg, int rc, fmeta_status_t status, const unsigned char *torrent,
                     size_t len, const char *why)
{
    ffile_t *ff = arg;
    fleet_t *f = ff->f;
    uint64_t now = uv_now(f->loop);
    ff->ask = NULL;
    if (!ff->job)
        return;
    if (busy(rc) && !ff->cand_misses++)
        ff->miss_since = now;
    int still_busy =
        ff->cand_misses < ASK_MISSES_MAX || now - ff->miss_since < f->cfg->fleet_wait_ms;
    if (busy(rc) && still_busy) {
        /* Slow is not gone: a node busy with a crowd of peers answers late,
         * or turns connections away at its cap, and the next node in the
         * order would fetch the file from the origin again, the very load
         * that made this one slow (at 64 nodes of 2 cores, three misses in
         * a row were not rare). One that is gone refuses, or does this
         * for fleet_wait, as long as a seed may take to start a file. */
        log_info("fleet: %s: candidate %zu did not answer (%s; %d in a row): asked again", ff->sha,
                 ff->cand, why ? why : strerror(-rc), ff->cand_misses);
        ask_later(ff, now);
        return;
    }
    if (rc < 0) { /* down, or not one of ours: the next in the order */
        log_info("fleet: %s: candidate %zu did not answer (%s): asking the next", ff->sha, ff->cand,
                 why ? why : strerror(-rc));
        ff->cand++;
        ff->cand_misses = 0;
        ff->ask_gap = ASK_AGAIN_MS;
        ff_ask(ff);
        return;
    }
    ff->cand_misses = 0;
    if (ff->state == FF_SWARMING) {
        /* A stalled download asked again: someone holds the file or is
         * fetching it; offer the members again and wait. */
        ff->last_move = now;
        ff_add_peers(ff);
        return;
    }
    if (status == FMETA_FETCHING) {
        ff->none_since = 0;
        ask_later(ff, now);
        return;
    }
    if (status == FMETA_NONE) {
        if (!ff->none_since)
            ff->none_since = now;
        if (now - ff->none_since >= f->cfg->fleet_wait_ms) {
            ff_to_origin(ff, 0, "its seed has not started it within fleet_wait");
            return;
        }
        ask_later(ff, now);
        return;
    }
    unsigned char *copy = malloc(len);
    if (!copy) {
        ff->next_ask = now + ASK_AGAIN_MS;
        return;
    }
    memcpy(copy, torrent, len);
    free(ff->torrent);
    ff->torrent = copy;
    ff->torrent_len = len;
    ff_set(ff, FF_PREPARING);
    prep_item_t *it = calloc(1, sizeof *it);
    if (!it) {
        ff_to_origin(ff, 0, "out of memory");
        return;
    }
    it->ff = ff;
    it->store = f->store;
    it->part_id = part_id_of(ff->part);
    lt_torrent_size(ff->torrent, ff->torrent_len,
                    &it->size); /* 0 (no check) if it does not parse */
    it->work.data = it;
    ff->items++;
    f->items++;
    uv_queue_work(f->loop, &it->work, prep_work, after_prep);
}

static int hook_take(void *arg, job_t *job, const jobs_swarm_req_t *req)
{
    fleet_t *f = arg;
    if (f->stopping || f->peers.n < 2)
        return 0;
    ffile_t *ff = ff_get(f, req->sha256);
    if (!ff)
        return 0;
    if (ff->state == FF_FETCHING && !ff->job && !jobs_running(f->jobs, ff->job_id))
        ff_set(ff, FF_IDLE);               /* its last origin download ended without a blob */
    if (ff->job || ff->state != FF_IDLE) { /* one download of it at a time; seeding: lost blob */
        if (ff->state == FF_SEEDING) {
            ff_remove_torrent(ff);
            ff_set(ff, FF_IDLE);
        } else {
            return 0;
        }
    }
    size_t *order = malloc(f->peers.n * sizeof *order);
    if (!order)
        return 0;
    fleet_peers_order(&f->peers, req->sha256, order);
    int seed = order[0] == f->peers.self;
    free(order);
    ff->job_id = req->id;
    if (seed) { /* this node's to fetch: the others will ask it */
        log_info("fleet: %s: this node is the file's seed: fetching it from the origin",
                 req->sha256);
        ff_set(ff, FF_FETCHING);
        f->from_origin++;
        return 0;
    }
    free(ff->url);
    ff->url = req->credentials ? NULL : strdup(req->url);
    snprintf(ff->part, sizeof ff->part, "%s", req->part_path);
    ff->job = job;
    ff->none_since = 0;
    ff_set(ff, FF_ASKING);
    ff_ask_from_top(ff);
    return 1;
}

static void hook_drop(void *arg, job_t *job)
{
    fleet_t *f = arg;
    for (list_node_t *n = list_first(&f->files); n; n = list_next(&f->files, n)) {
        ffile_t *ff = list_entry(n, ffile_t, node);
        if (ff->job == job) {
            ff_drop_job(ff);
            return;
        }
    }
}

/* ---- seeding ------------------------------------------------------------ */

typedef struct make_item {
    uv_work_t work;
    ffile_t *ff;
    lt_make_params_t p;
    char path[PATH_MAX];
    lt_metadata_t md;
    lt_why_t why;
    int rc;
} make_item_t;

static void make_work(uv_work_t *req)
{
    make_item_t *it = req->data;
    it->rc = lt_torrent_make(&it->p, &it->md, &it->why);
}

static void make_back(make_item_t *it, int status)
{
    ffile_t *ff = it->ff;
    ff->items--;
    if (status || it->rc || ff->state != FF_MAKING || ff->f->stopping) {
        if (it->rc)
            log_warn("fleet: %s: cannot make its torrent: %s", ff->sha, it->why.text);
        free(it->md.bytes);
        free(it);
        if (ff->state == FF_MAKING)
            ff_set(ff, FF_IDLE);
        ff_release(ff);
        return;
    }
    free(ff->torrent);
    ff->torrent = it->md.bytes;
    ff->torrent_len = it->md.len;
    snprintf(ff->info_hash, sizeof ff->info_hash, "%s", it->md.info_hash);
    snprintf(ff->info_hash_v1, sizeof ff->info_hash_v1, "%s", it->md.info_hash_v1);
    free(it);
    if (ff_add_torrent(ff, ff->blob, LT_ADD_SEED)) {
        ff_set(ff, FF_IDLE);
        ff_release(ff);
        return;
    }
    ff_set(ff, FF_SEEDING);
    log_info("fleet: %s: seeding (%llu bytes, info-hash %s)", ff->sha, (unsigned long long)ff->size,
             ff->info_hash);
}

static void after_make(uv_work_t *req, int status)
{
    make_item_t *it = req->data;
    fleet_t *f = it->ff->f;
    make_back(it, status);
    f->item_back(f);
}

/* A complete blob of this node: seeded from its path in the cache. */
void fleet_offer(fleet_t *f, const char *sha, uint64_t size, const char *path)
{
    if (f->stopping)
        return;
    ffile_t *ff = ff_get(f, sha);
    if (!ff)
        return;
    if (ff->state == FF_SEEDING || ff->state == FF_MAKING)
        return;
    snprintf(ff->blob, sizeof ff->blob, "%s", path);
    ff->size = size;
    if (ff->state == FF_SWARMED && ff->torrent) {
        /* Its torrent seeds from the partial, whose name goes: it moves to
         * the blob (the same file) once libtorrent has let go of it. */
        ff_set(ff, FF_SEEDING);
        ff->then_seed = 1;
        ff_remove_torrent(ff);
        return;
    }
    if (ff->state == FF_ASKING || ff->state == FF_PREPARING || ff->state == FF_SWARMING)
        return; /* a hit raced a download of it: that download seeds it when done */
    ff_set(ff, FF_MAKING);
    make_item_t *it = calloc(1, sizeof *it);
    if (!it) {
        ff_set(ff, FF_IDLE);
        ff_release(ff);
        return;
    }
    it->ff = ff;
    snprintf(it->path, sizeof it->path, "%s", path);
    it->p = (lt_make_params_t){
        .path = it->path, .size = size, .piece_size = 0, .hybrid = 1, .ca_pem = f->ca_pem};
    it->work.data = it;
    ff->items++;
    f->items++;
    uv_queue_work(f->loop, &it->work, make_work, after_make);
}

static void hook_committed(void *arg, const char *sha256, uint64_t size, const char *path)
{
    fleet_offer(arg, sha256, size, path);
}

const jobs_swarm_ops_t fleet_swarm_ops = {hook_take, hook_drop, hook_committed};

/* ---- libtorrent's news ------------------------------------------------------ */

/* A torrent's file failed (a full disk, an I/O error): its download fails
 * with the usual code; a seed stops seeding. */
static void ff_file_failed(ffile_t *ff, const lt_event_t *ev)
{
    log_warn("fleet: %s: %s: %s", ff->sha, lt_event_name(ev->kind), ev->message);
    job_t *job = ff->job;
    if (job && ff->state == FF_SWARMING) {
        ff_drop_job(ff);
        char msg[240];
        snprintf(msg, sizeof msg, "the swarm could not write it: %s", ev->message);
        jobs_swarm_fail(job, ev->err == -ENOSPC ? "no_space" : "io", msg);
        return;
    }
    if (ff->state == FF_SEEDING || ff->state == FF_SWARMED) {
        ff_remove_torrent(ff);
        ff_set(ff, FF_IDLE);
    }
}

void fleet_on_event(fleet_t *f, const lt_event_t *ev)
{
    ffile_t *ff = ev->user;
    switch (ev->kind) {
    case LT_EV_FINISHED:
        if (ff && ff->job && ff->state == FF_SWARMING) {
            job_t *job = ff->job;
            ff->job = NULL;
            ff_set(ff, FF_SWARMED);
            f->from_swarm++;
            log_info("fleet: %s: every piece is in: checking its SHA-256", ff->sha);
            jobs_swarm_progress(job, ff->size);
            jobs_swarm_finished(job);
        }
        break;
    case LT_EV_HASH_FAILED:
        f->bad_pieces++;
        if (ff)
            ff->spoiled++;
        log_warn("fleet: %s: piece %d failed its hash check: dropped, asked again",
                 ff ? ff->sha : "?", ev->piece);
        break;
    case LT_EV_PEER_BANNED:
        f->banned++;
        if (ff)
            ff->spoiled++;
        log_warn("fleet: %s: peer %s banned: it sent pieces that failed their hash check",
                 ff ? ff->sha : "?", ev->peer);
        break;
    case LT_EV_TORRENT_ERROR:
    case LT_EV_FILE_ERROR:
        if (ff)
            ff_file_failed(ff, ev);
        break;
    case LT_EV_REMOVED:
        if (!ff)
            break;
        ff->removing = 0;
        if (ff->then_seed) {
            ff->then_seed = 0;
            if (ff->state == FF_SEEDING && !f->stopping &&
                ff_add_torrent(ff, ff->blob, LT_ADD_SEED))
                ff_set(ff, FF_IDLE);
        }
        if (ff->then_check) {
            ff->then_check = 0;
            if (ff->job && ff->state == FF_SWARMING && !f->stopping &&
                ff_add_torrent(ff, ff->part, LT_ADD_CHECK)) {
                job_t *job = ff->job;
                ff->job = NULL;
                ff_set(ff, FF_FETCHING);
                f->fell_back++;
                jobs_swarm_origin(job, "the swarm's torrent cannot start over");
            }
        }
        if (ff->then_origin) {
            job_t *job = ff->job;
            ff->then_origin = 0;
            ff->job = NULL;
            if (job)
                jobs_swarm_origin(job, "the swarm gave the file back");
        }
        ff_release(ff);
        break;
    case LT_EV_PEER_DISCONNECTED:
        if (ev->tls)
            log_info("fleet: peer %s: TLS refused: %s", ev->peer, ev->message);
        else
            log_debug("fleet: peer %s gone: %s", ev->peer, ev->message);
        break;
    case LT_EV_PEER_CONNECTED:
        log_debug("fleet: peer %s connected", ev->peer);
        break;
    case LT_EV_LISTEN_FAILED:
        log_err("fleet: the peer port: %s", ev->message);
        break;
    }
}
