/* verbs: the table of request verbs, its dispatch, and the small verbs
 * answered at once (HELLO, STATS). */
#include "admin.h"
#include "log.h"
#include "verbs_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static void verb_hello(session_t *s, const proto_msg_t *m, const char *id, int arg);
static void verb_stats(session_t *s, const proto_msg_t *m, const char *id, int arg);

#define FETCH_ID_RULE "FETCH needs id= (1 to 64 printable bytes)"
#define HOLD_ID_RULE "HOLD, UNHOLD and HOLDS need id= (1 to 64 printable bytes)"
#define ADMIN_ID_RULE "admin requests need id= (1 to 64 printable bytes)"

static const verb_t verb_table[] = {
    /* Anyone: a download, the handshake, what runs, the counters, what is cached. */
    {"FETCH", verbs_fetch, 0, VERB_ANYONE, FETCH_ID_RULE},
    /* Anyone: a Hugging Face repo's file list, asked with the client's token. */
    {"HFREPO", verbs_hfrepo, 0, VERB_ANYONE, "HFREPO needs id= (1 to 64 printable bytes)"},
    {"HELLO", verb_hello, 0, VERB_ANYONE, NULL},
    {"STATUS", verbs_status, 0, VERB_ANYONE, NULL},
    {"STATS", verb_stats, 0, VERB_ANYONE, NULL},
    {"LIST", verbs_list, 0, VERB_ANYONE, NULL},
    /* Anyone, for a download of their own (an admin: any). */
    {"CANCEL", verbs_cancel, 0, VERB_ANYONE, "CANCEL needs id= (1 to 64 printable bytes)"},
    /* Anyone, for the session's own FETCHes: its client was interrupted. */
    {"INTERRUPT", verbs_interrupt, 0, VERB_ANYONE, "INTERRUPT needs id= (1 to 64 printable bytes)"},
    /* Anyone: a blob linked into their HF cache kept from eviction, with a
     * read grant when private (admins may release or list any uid's). */
    {"HOLD", verbs_hold, VERB_HOLD, VERB_ANYONE, HOLD_ID_RULE},
    {"UNHOLD", verbs_hold, VERB_UNHOLD, VERB_ANYONE, HOLD_ID_RULE},
    {"HOLDS", verbs_hold, VERB_HOLDS, VERB_ANYONE, HOLD_ID_RULE},
    /* Admins: requests that change or walk the whole cache, run in the pool. */
    {"RM", verbs_admin, ADMIN_RM, VERB_ADMIN, ADMIN_ID_RULE},
    {"PIN", verbs_admin, ADMIN_PIN, VERB_ADMIN, ADMIN_ID_RULE},
    {"UNPIN", verbs_admin, ADMIN_UNPIN, VERB_ADMIN, ADMIN_ID_RULE},
    {"GC", verbs_gc, 0, VERB_ADMIN, ADMIN_ID_RULE},
    {"VERIFY", verbs_admin, ADMIN_VERIFY, VERB_ADMIN, ADMIN_ID_RULE},
    /* Admins: the cluster swarm (its files are other users' downloads too). */
    {"FLEET", verbs_fleet, 0, VERB_ADMIN, NULL},
};

const verb_t *verbs_find(const char *name)
{
    for (size_t i = 0; i < sizeof verb_table / sizeof verb_table[0]; i++)
        if (strcmp(verb_table[i].name, name) == 0)
            return &verb_table[i];
    return NULL;
}

int verbs_valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > VERB_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)id[i]))
            return 0;
    return 1;
}

/* The row's rules, in this order (each answer names the first rule
 * broken): a known verb, a valid id= where one is needed, then who. */
void verbs_dispatch(session_t *s, const proto_msg_t *m, int admin)
{
    const verb_t *v = verbs_find(m->verb);
    if (!v) {
        reply_err(&s->t, NULL, "unknown_verb", m->verb);
        return;
    }
    const char *id = proto_get(m, "id");
    if (v->id_rule && (!id || !verbs_valid_id(id))) {
        reply_err(&s->t, NULL, "bad_request", v->id_rule);
        return;
    }
    if (v->who == VERB_ADMIN && !admin) {
        const char *group = s->srv->cfg->admin_group ? s->srv->cfg->admin_group : "";
        char msg[320];
        snprintf(msg, sizeof msg,
                 "cache administration needs root or membership of the admin group%s%s",
                 *group ? " " : "", group);
        log_warn("session pid %d uid %d: %s refused: not root or in the admin group%s%s",
                 (int)s->who.pid, (int)s->who.uid, m->verb, *group ? " " : "", group);
        reply_err(&s->t, id, "permission_denied", msg);
        return;
    }
    v->fn(s, m, id, v->arg);
}

void verbs_on_written(session_t *s)
{
    if (s->stream)
        verbs_stream_step(s);
}

void verbs_session_close(session_t *s)
{
    verbs_fetch_close(s);
    verbs_hf_close(s);
    verbs_admin_close(s);
    verbs_list_close(s);
    verbs_hold_close(s);
}

static void verb_hello(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)id, (void)arg;
    const char *v = proto_get(m, "proto");
    if (v && strcmp(v, "1") != 0) {
        reply_err(&s->t, NULL, "proto_version", "this hubd speaks protocol 1");
        return;
    }
    reply_t r;
    reply_begin(&r, "HELLO");
    proto_add_u64(&r.w, "proto", PROTO_VERSION);
    proto_add(&r.w, "server", "hubd/" HUBD_VERSION);
    /* Which Hub this hubd asks, and where its Hugging Face endpoint is:
     * what a client compares HF_ENDPOINT and its endpoint argument with. */
    proto_add(&r.w, "hf_upstream", s->srv->cfg->hf_upstream);
    if (s->srv->hf_front[0])
        proto_add(&r.w, "hf_front", s->srv->hf_front);
    reply_send(&s->t, &r);
}

static void verb_stats(session_t *s, const proto_msg_t *m, const char *id, int arg)
{
    (void)m, (void)id, (void)arg;
    reply_t r;
    reply_begin(&r, "STATS");
    session_server_stats(s->srv, &r.w);
    reply_send(&s->t, &r);
}

/* Here, by the verb: the metrics endpoint renders the same fields
 * (http/metrics.c), so that the two cannot differ. */
void session_server_stats(session_server_t *srv, proto_writer_t *w)
{
    jobs_stats_t st;
    jobs_stats(srv->jobs, &st);
    proto_add_u64(w, "hits", st.hits);
    proto_add_u64(w, "misses", st.misses);
    proto_add_u64(w, "attached", st.attached);
    proto_add_u64(w, "bytes_from_origin", st.bytes_from_origin);
    proto_add_u64(w, "bytes_served", st.bytes_served);
    proto_add_u64(w, "jobs_active", st.active);
    proto_add_u64(w, "jobs_queued", st.queued);
    proto_add_u64(w, "errors", st.errors);
    /* code:count pairs, only the codes seen, in one field. */
    char by_code[600] = "";
    size_t n = 0;
    for (unsigned i = 0; i < JOBS_NERROR_CODES && n < sizeof by_code; i++)
        if (st.errors_by_code[i])
            n +=
                (size_t)snprintf(by_code + n, sizeof by_code - n, "%s%s:%llu", n ? "," : "",
                                 jobs_error_code_name(i), (unsigned long long)st.errors_by_code[i]);
    proto_add(w, "errors_by_code", by_code);
    uint64_t bytes = 0, blobs = 0;
    db_cache_size(srv->db, &bytes, &blobs);
    proto_add_u64(w, "cache_bytes", bytes);
    proto_add_u64(w, "cache_blobs", blobs);
    proto_add_u64(w, "max_cache_size", srv->cfg->max_cache_size);
    proto_add_u64(w, "evicted", st.evicted);
    proto_add_u64(w, "evicted_bytes", st.evicted_bytes);
    proto_add_u64(w, "bad_blobs", st.bad_blobs);
    proto_add_u64(w, "segmented", st.segmented);
    proto_add_u64(w, "segment_retries", st.segment_retries);
    proto_add_u64(w, "segment_fallbacks", st.segment_fallbacks);
    proto_add_u64(w, "revalidated", st.revalidated);
    proto_add_u64(w, "commits", st.commits);
    proto_add_u64(w, "commit_groups", st.commit_groups);
    proto_add_u64(w, "commit_name_syncs", st.commit_name_syncs);
    proto_add_u64(w, "hits_on_loop", st.hits_on_loop);
    uint64_t holds = 0, held_bytes = 0; /* in memory: no SQLite on the loop */
    db_holds_stats(srv->db, &holds, &held_bytes);
    proto_add_u64(w, "holds", holds);
    proto_add_u64(w, "held_bytes", held_bytes);
    uint64_t listings, listing_bytes; /* one field: the line is at the codec's 32 */
    listings_stats(srv->listings, &listings, &listing_bytes);
    proto_add_u64(w, "listing_bytes", listing_bytes);
    session_front_stats_t hs = {0};
    if (srv->front_stats)
        srv->front_stats(srv->front_stats_arg, &hs);
    proto_add_u64(w, "http_connections", hs.connections);
    proto_add_u64(w, "http_requests", hs.requests);
    proto_add_u64(w, "http_bytes", hs.bytes);
    proto_add_u64(w, "http_refused", hs.refused);
    proto_add_u64(w, "sessions", srv->nsessions);
    proto_add_u64(w, "uptime", (uv_hrtime() - srv->started) / 1000000000u);
}
