/* verbs_fleet: FLEET, the cluster swarm as this node sees it, told by the
 * hook main.c sets (session.h, session_server_set_fleet): a FLEET line of
 * the node's totals, a FILE line per file in the swarm, a PEER line per
 * peer connected, then END.
 *
 * The hook tells everything at once and the totals last (they add up the
 * files'), so the FILE and PEER lines wait in buffers until the FLEET line
 * has gone first. The buffers are bounded: a node seeds every blob of its
 * cache, which may be thousands, and one request must not make hubd hold
 * or queue more than about a megabyte for a client. Lines past the bound
 * are counted in END (files_left_off, peers_left_off), not sent. */
#include "bytebuf.h"
#include "verbs_internal.h"

#include <stdio.h>
#include <string.h>

#define FLEET_FILES_MAX (768u << 10) /* bytes of FILE lines in one reply: some 2,500 lines */
#define FLEET_PEERS_MAX (128u << 10) /* bytes of PEER lines (the swarm tells 256 at most) */

/* Without a hook: a hubd built with the swarm and no fleet_* settings, or
 * one whose main.c set none (the unit tests). */
#define FLEET_NONE "this hubd is not in a swarm: no fleet_* settings (docs/FLEET.md)"

struct session_fleet_sink {
    bytebuf_t files, peers;          /* the FILE and PEER lines, in the order told */
    uint64_t nfiles, npeers;         /* lines in them */
    uint64_t files_left, peers_left; /* lines left out: past the bound (or no memory) */
    session_fleet_node_t node;       /* the totals, once told */
    char listen[80];                 /* node.listen's copy */
};

/* The line in r joins b, or is counted as left out. */
static void sink_keep(bytebuf_t *b, reply_t *r, uint64_t *kept, uint64_t *left)
{
    size_t len = reply_end(r);
    if (len && bytebuf_append(b, r->buf, len) == 0)
        (*kept)++;
    else
        (*left)++;
}

void session_fleet_node(session_fleet_sink_t *sink, const session_fleet_node_t *node)
{
    sink->node = *node;
    snprintf(sink->listen, sizeof sink->listen, "%s", node->listen ? node->listen : "");
    sink->node.listen = sink->listen;
}

void session_fleet_file(session_fleet_sink_t *sink, const session_fleet_file_t *file)
{
    reply_t r;
    reply_begin(&r, "FILE");
    proto_add(&r.w, "sha256", file->sha256);
    proto_add(&r.w, "state", file->state);
    proto_add_u64(&r.w, "size", file->size);
    proto_add_u64(&r.w, "done", file->done);
    proto_add_u64(&r.w, "up", file->up);
    proto_add_u64(&r.w, "down", file->down);
    proto_add_u64(&r.w, "peers", file->peers);
    if (file->info_hash && *file->info_hash)
        proto_add(&r.w, "info_hash", file->info_hash);
    if (file->info_hash_v1 && *file->info_hash_v1)
        proto_add(&r.w, "info_hash_v1", file->info_hash_v1);
    sink_keep(&sink->files, &r, &sink->nfiles, &sink->files_left);
}

void session_fleet_peer(session_fleet_sink_t *sink, const session_fleet_peer_t *peer)
{
    reply_t r;
    reply_begin(&r, "PEER");
    proto_add(&r.w, "addr", peer->addr);
    proto_add_u64(&r.w, "up", peer->up);
    proto_add_u64(&r.w, "down", peer->down);
    proto_add_u64(&r.w, "files", peer->files);
    sink_keep(&sink->peers, &r, &sink->npeers, &sink->peers_left);
}

/* The reply, the hook's tale told: FLEET, the FILE and PEER lines, END. */
static void send_fleet(session_t *s, const session_fleet_sink_t *k)
{
    const session_fleet_node_t *n = &k->node;
    reply_t r;
    reply_begin(&r, "FLEET");
    proto_add(&r.w, "listen", n->listen);
    proto_add_u64(&r.w, "members", n->members);
    proto_add_u64(&r.w, "up", n->up);
    proto_add_u64(&r.w, "down", n->down);
    proto_add_u64(&r.w, "from_swarm", n->from_swarm);
    proto_add_u64(&r.w, "seeded_from_origin", n->seeded_from_origin);
    proto_add_u64(&r.w, "fell_back", n->fell_back);
    proto_add_u64(&r.w, "bad_pieces", n->bad_pieces);
    proto_add_u64(&r.w, "banned", n->banned);
    proto_add_u64(&r.w, "meta_refused", n->meta_refused);
    reply_send(&s->t, &r);
    if (bytebuf_len(&k->files))
        transport_send(&s->t, bytebuf_data(&k->files), bytebuf_len(&k->files));
    if (bytebuf_len(&k->peers))
        transport_send(&s->t, bytebuf_data(&k->peers), bytebuf_len(&k->peers));
    reply_begin(&r, "END");
    proto_add_u64(&r.w, "files", k->nfiles);
    proto_add_u64(&r.w, "peers", k->npeers);
    if (k->files_left)
        proto_add_u64(&r.w, "files_left_off", k->files_left);
    if (k->peers_left)
        proto_add_u64(&r.w, "peers_left_off", k->peers_left);
    reply_send(&s->t, &r);
}

void verbs_fleet(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)m, (void)id, (void)arg;
    if (!s->srv->fleet) {
        reply_err(&s->t, NULL, "not_in_swarm", FLEET_NONE);
        return;
    }
    session_fleet_sink_t k;
    memset(&k, 0, sizeof k);
    bytebuf_init(&k.files, FLEET_FILES_MAX);
    bytebuf_init(&k.peers, FLEET_PEERS_MAX);
    k.node.listen = k.listen;
    const char *why = s->srv->fleet(s->srv->fleet_arg, &k);
    if (why)
        reply_err(&s->t, NULL, "not_in_swarm", why);
    else
        send_fleet(s, &k);
    bytebuf_free(&k.files);
    bytebuf_free(&k.peers);
}
