/* segments: a download over several connections (see segments.h). The
 * chunk table, the lanes and their requests, the scheduling of chunks and
 * connections: what segplan.h's pure decisions (and its SEG_* rules) say,
 * applied, logged and counted here. The pipeline (pipeline.h) writes what
 * the lanes get and hashes the written prefix back from the page cache;
 * the job hears of what happens through segs_ops_t. Loop thread. */
#include "segments.h"
#include "errcode.h"
#include "job_internal.h"
#include "log.h"
#include "proxy.h"
#include "segplan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seg_lane {
    job_t *job;
    unsigned idx;          /* its number in segs' lanes[] (a chunk's lane) */
    const segs_ops_t *ops; /* the job's (kept for the close callback) */
    transfer_t xfer;
    seg_chunk_t *chunk;    /* being fetched (or waiting for a retry), NULL: idle */
    pipeline_cursor_t cur; /* its bytes' way into the pipeline (tag: chunk) */
    uv_timer_t timer;      /* the backoff before its next attempt; a failed start's report */
    uint64_t last_byte;    /* uv_now of its last byte, or of its request */
    unsigned attempts;     /* failed attempts since its last byte */
    int waiting;           /* the timer is armed */
    uint64_t t_req;        /* uv_now of its current request */
    uint64_t t_win;        /* its rate's window: since, and bytes in it */
    uint64_t got_win;
    uint64_t off_win;   /* ms of the window not the connection's: paused, or the loop late */
    uint64_t rate;      /* bytes per second over its last window; 0: none yet */
    uint64_t got_round; /* bytes since the growth's last mark (segplan_grow's `least`) */
    unsigned pieces;    /* chunks received whole: the size of its next (segplan_lane_piece) */
} seg_lane_t;

struct segs {
    seg_chunk_t **chunks; /* sorted by start, covering [0, tail) without overlap */
    size_t n, cap;
    uint64_t tail;  /* [tail, total) is not cut yet: cut as lanes take it (segplan_tail_cut) */
    uint64_t total; /* the file's length */
    uint64_t chunk; /* the size of the chunks cut from the tail */
    seg_lane_t *lanes[SEG_MAX_LANES];
    unsigned nlanes;
    seg_growth_t grow;     /* connections wanted, and the round judging the next step */
    uint64_t main_round;   /* the main transfer's bytes since the growth's last mark */
    int disturbed;         /* paused, or the loop late, since the last growth tick */
    uint64_t t_rate;       /* the lanes' rates last measured (uv_now) */
    uint64_t t_paused;     /* when the download's pause began (uv_now); 0: not paused */
    uint64_t t_tick;       /* the last progress tick (uv_now); 0: none yet */
    char *url;             /* where lanes ask: the main transfer's last hop */
    seg_chunk_t *main;     /* the chunk the main transfer fetches, or NULL */
    const segs_ops_t *ops; /* the job's */
};

static void lane_start(seg_lane_t *l);
static int room_for_more(job_t *job);

/* ---- the chunk table ------------------------------------------------------- */

static uint64_t len_of(const seg_chunk_t *c)
{
    return c->end - c->start;
}

static int chunk_insert(segs_t *s, size_t at, uint64_t start, uint64_t end)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        seg_chunk_t **v = realloc(s->chunks, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->chunks = v;
        s->cap = cap;
    }
    seg_chunk_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->start = start;
    c->end = end;
    c->lane = -1;
    memmove(s->chunks + at + 1, s->chunks + at, (s->n - at) * sizeof *s->chunks);
    s->chunks[at] = c;
    s->n++;
    return 0;
}

/* Whether the job may use several connections at all. */
static int segs_allowed(const job_t *job)
{
    const hubd_config_t *cfg = job->js->cfg;
    const char *shown;
    if (!cfg->segment_min_size || cfg->max_connections_per_download < 2 || job->no_segments ||
        strcmp(transfer_source(&job->xfer, &shown), "origin") != 0)
        return 0;
    /* Plain http through a caching proxy (Squid): it fetches whole files
     * once and joins the requests for one (collapsed forwarding) only
     * when they ask for it whole. A mirror is such a tier too. */
    return !(strcmp(job->xfer.url.scheme, "http") == 0 && job->js->proxies &&
             proxy_for(job->js->proxies, &job->xfer.url));
}

uint64_t segs_first_end(const job_t *job)
{
    return segs_allowed(job) && !job->resume_len && !job->resume_ranges
               ? job->js->cfg->segment_chunk_size
               : 0;
}

static void segs_free_table(segs_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->chunks[i]);
    free(s->chunks);
    free(s->url);
    free(s);
}

/* Chunks of at most `chunk` bytes for [from, to), appended: a resumed
 * partial's gap, at most SEG_SPAN_MAX of them. */
static int add_span(segs_t *s, uint64_t from, uint64_t to, uint64_t chunk)
{
    if (to > from && (to - from - 1) / chunk >= SEG_SPAN_MAX)
        return -E2BIG;
    for (uint64_t at = from; at < to; at += chunk)
        if (chunk_insert(s, s->n, at, to - at > chunk ? at + chunk : to))
            return -ENOMEM;
    return 0;
}

/* A chunk already on disk (a resumed partial's). */
static int add_done(segs_t *s, uint64_t from, uint64_t to)
{
    if (chunk_insert(s, s->n, from, to))
        return -ENOMEM;
    seg_chunk_t *c = s->chunks[s->n - 1];
    c->got = c->written = to - from;
    return 0;
}

/* The rest of the file, from tail, is cut as lanes take it. */
static void segs_start(job_t *job, segs_t *s, uint64_t tail, const segs_ops_t *ops)
{
    s->ops = ops;
    const hubd_config_t *cfg = job->js->cfg;
    s->tail = tail;
    s->total = (uint64_t)job->file.total;
    s->chunk = cfg->segment_chunk_size;
    s->t_rate = uv_now(job->js->loop);
    segplan_grow_start(&s->grow, cfg->max_connections_per_download);
    job->seg = s;
}

int segs_begin(job_t *job, const segs_ops_t *ops)
{
    const hubd_config_t *cfg = job->js->cfg;
    uint64_t chunk = job->xfer.end;
    int64_t size = job->file.total;
    if (job->seg || !chunk || size < 0 || (uint64_t)size <= cfg->segment_min_size ||
        (uint64_t)size <= chunk || !job_validator(job))
        return 0;
    segs_t *s = calloc(1, sizeof *s);
    if (!s || !(s->url = strdup(job->xfer.url.canonical))) {
        free(s);
        return -ENOMEM;
    }
    /* The first chunk only (the main transfer's): the rest is cut as
     * lanes take it, so the announced length sizes nothing. */
    if (chunk_insert(s, 0, 0, chunk)) {
        segs_free_table(s);
        return -ENOMEM;
    }
    s->main = s->chunks[0];
    segs_start(job, s, chunk, ops);
    pipeline_segmented(&job->pipe, s->main); /* the main cursor's bytes are its chunk's */
    log_info("job %llu: %llu bytes in chunks of %llu over up to %u connections",
             (unsigned long long)job->id, (unsigned long long)size, (unsigned long long)chunk,
             cfg->max_connections_per_download);
    return 0;
}

int segs_resume(job_t *job, const char *ranges, const segs_ops_t *ops)
{
    const hubd_config_t *cfg = job->js->cfg;
    if (job->seg || !ranges || job->file.total < 0 || !job_validator(job) || !segs_allowed(job))
        return 0;
    segs_t *s = calloc(1, sizeof *s);
    if (!s || !(s->url = strdup(job->key))) { /* lanes resolve its redirects again */
        free(s);
        return 0;
    }
    uint64_t total = (uint64_t)job->file.total, at = job->resume_len, a, b, extra = 0;
    int rc = at ? add_done(s, 0, at) : 0;
    while (!rc && (rc = db_ranges_next(&ranges, &a, &b)) == 1) {
        rc = a < at || b > total ? -1 : 0;
        if (!rc)
            rc = add_span(s, at, a, cfg->segment_chunk_size);
        if (!rc)
            rc = add_done(s, a, b);
        extra += b - a;
        at = b;
    }
    if (rc) {
        log_warn("job %llu: the recorded ranges of %s do not fit: resuming as one stream",
                 (unsigned long long)job->id, job->key);
        segs_free_table(s);
        return 0;
    }
    segs_start(job, s, at, ops); /* from the last range on: cut as lanes take it */
    pipeline_segmented(&job->pipe, NULL);
    pipeline_resumed_ranges(&job->pipe, extra, segs_prefix(job));
    log_info("job %llu: resuming %s over several connections: %llu bytes of %llu on disk",
             (unsigned long long)job->id, job->key, (unsigned long long)job->pipe.received,
             (unsigned long long)total);
    job->js->stats.segmented++;
    return 1;
}

seg_chunk_t *segs_main_chunk(const job_t *job)
{
    return job->seg ? job->seg->main : NULL;
}

void segs_main_body(job_t *job, size_t n)
{
    seg_chunk_t *c = segs_main_chunk(job);
    if (c) {
        c->got += n;
        job->seg->main_round += n;
    }
}

/* The main transfer lets go of its chunk: the lanes fetch the rest. */
static void main_release(job_t *job)
{
    pipeline_segmented(&job->pipe, NULL); /* its last batch still belongs to the main's chunk */
    job->seg->main = NULL;
}

void segs_main_ended(job_t *job)
{
    main_release(job);
    segs_pump(job);
}

int segs_main_failed(job_t *job, const char *code, const char *msg)
{
    if (!job->seg || !errcode_is_transient(code) || job->js->shutting_down)
        return 0;
    log_info("job %llu: the first connection failed (%s: %s): the others fetch the rest",
             (unsigned long long)job->id, code, msg);
    job->js->stats.segment_retries++;
    transfer_abort(&job->xfer);
    main_release(job);
    segs_pump(job);
    return 1;
}

uint64_t segs_prefix(const job_t *job)
{
    const segs_t *s = job->seg;
    for (size_t i = 0; i < s->n; i++)
        if (s->chunks[i]->written < len_of(s->chunks[i]))
            return s->chunks[i]->start + s->chunks[i]->written;
    return s->tail; /* the file's end once all is cut */
}

uint64_t segs_written_sum(const job_t *job)
{
    uint64_t n = 0;
    for (size_t i = 0; i < job->seg->n; i++)
        n += job->seg->chunks[i]->written;
    return n;
}

char *segs_ranges(const job_t *job)
{
    const segs_t *s = job->seg;
    uint64_t prefix = segs_prefix(job), a = 0, b = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        const seg_chunk_t *c = s->chunks[i];
        if (c->start <= prefix || !c->written)
            continue;
        if (b && c->start == b) { /* adjoins the last (whole) one: one range */
            b = c->start + c->written;
        } else {
            if (b)
                fprintf(f, "%s%llu-%llu", ftell(f) ? "," : "", (unsigned long long)a,
                        (unsigned long long)b);
            a = c->start;
            b = c->start + c->written;
        }
    }
    if (b)
        fprintf(f, "%s%llu-%llu", ftell(f) ? "," : "", (unsigned long long)a,
                (unsigned long long)b);
    int empty = ftell(f) == 0;
    if (fclose(f) || empty) {
        free(text);
        return NULL;
    }
    return text;
}

void segs_chunk_written(void *tag, uint64_t bytes)
{
    seg_chunk_t *c = tag;
    c->written += bytes;
}

int segs_received_all(const job_t *job)
{
    const segs_t *s = job->seg;
    if (s->tail < s->total)
        return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->chunks[i]->got < len_of(s->chunks[i]))
            return 0;
    return 1;
}

unsigned segs_connections(const job_t *job)
{
    unsigned n = job->xfer.req ? 1 : 0;
    if (job->seg)
        for (unsigned i = 0; i < job->seg->nlanes; i++)
            n += job->seg->lanes[i]->xfer.req != NULL;
    return n;
}

/* ---- a lane's bytes ------------------------------------------------------- */

/* What the lane holds goes to the pipeline (written at its offset, hashed
 * later from the page cache). */
static void lane_seal(seg_lane_t *l)
{
    pipeline_seal(&l->job->pipe, &l->cur);
}

int segs_seal_stale(job_t *job, uint64_t now)
{
    int n = 0;
    for (unsigned i = 0; job->seg && i < job->seg->nlanes; i++)
        n += pipeline_seal_stale(&job->pipe, &job->seg->lanes[i]->cur, now);
    return n;
}

/* The lane is done with its chunk (whole): idle, for the next one. */
static void lane_chunk_done(seg_lane_t *l)
{
    lane_seal(l);
    if (l->chunk) {
        l->chunk->lane = -1;
        l->pieces++;
    }
    l->chunk = NULL;
    l->cur.tag = NULL;
    l->attempts = 0;
}

/* Whether a callback of the lane's transfer comes too late: the job failed
 * or restarts (the request was ours to drop). */
static int lane_gone(const seg_lane_t *l)
{
    return l->job->state == JOB_FAILED || l->job->state == JOB_RESTARTING ||
           l->job->state == JOB_DONE;
}

static void lane_failure(transfer_t *t, const char *code, const char *msg);

static int lane_head(transfer_t *t, const disposition_t *d, const http_response_t *resp)
{
    seg_lane_t *l = t->owner;
    job_t *job = l->job;
    (void)resp;
    switch (d->kind) {
    case DISP_FAIL:
        l->ops->fail(job, d->code, d->msg);
        return HTTP_BODY_DISCARD;
    case DISP_RESTART:
        /* The ranges do not fit together (the file changed, or the server
         * does not answer them as asked): all again, as one stream. */
        l->ops->restart(job, d->why);
        return HTTP_BODY_DISCARD;
    case DISP_TAKE:
        /* A lane takes only the range it asked for: a 200 (even to a range
         * from byte 0) may be another version of the file. */
        if (d->status != 206 || d->total != job->file.total) {
            l->ops->restart(job, d->status != 206 ? "a range answered with the whole file"
                                                  : "a range answered with another length");
            return HTTP_BODY_DISCARD;
        }
        return HTTP_BODY_DELIVER;
    default: /* a redirect or a status: at the end of the exchange */
        return HTTP_BODY_DISCARD;
    }
}

static void lane_body(transfer_t *t, buf_t *buf, const char *p, size_t n)
{
    seg_lane_t *l = t->owner;
    job_t *job = l->job;
    seg_chunk_t *c = l->chunk;
    if (!c)
        return;
    uint64_t left = len_of(c) - c->got;
    if (n > left)
        n = (size_t)left; /* a chunk split under the request: the rest is another's */
    if (n) {
        l->last_byte = uv_now(job->js->loop);
        l->attempts = 0;
        l->got_win += n;
        l->got_round += n;
        if (pipeline_append(&job->pipe, &l->cur, c->start + c->got, buf, p, n)) {
            l->ops->fail(job, "internal", "out of memory");
            return;
        }
        c->got += n;
    }
    if (c->got == len_of(c) && t->end > c->end) {
        /* Split: what follows is another lane's. This connection goes. */
        transfer_abort(t);
        lane_chunk_done(l);
        segs_pump(job);
        return;
    }
    if (job->state == JOB_BODY)
        l->ops->took(job, n);
}

static void lane_end(transfer_t *t)
{
    seg_lane_t *l = t->owner;
    seg_chunk_t *c = l->chunk;
    if (lane_gone(l))
        return;
    if (t->disp.kind == DISP_REDIRECT) { /* at the next hop */
        if (c)
            lane_start(l);
        return;
    }
    if (c && c->got < len_of(c)) {
        char m[160];
        snprintf(m, sizeof m, "the range ended at byte %llu of %llu-%llu",
                 (unsigned long long)(c->start + c->got), (unsigned long long)c->start,
                 (unsigned long long)c->end - 1);
        lane_failure(t, "truncated", m);
        return;
    }
    lane_chunk_done(l);
    segs_pump(l->job);
}

static void on_lane_timer(uv_timer_t *timer)
{
    seg_lane_t *l = timer->data;
    job_t *job = l->job;
    l->waiting = 0;
    if (l->xfer.begin_code) { /* a request that could not start */
        const char *code = l->xfer.begin_code;
        l->xfer.begin_code = NULL;
        l->ops->fail(job, code, l->xfer.begin_msg);
        return;
    }
    if (job->state == JOB_BODY && l->chunk)
        lane_start(l);
}

static void lane_failure(transfer_t *t, const char *code, const char *msg)
{
    seg_lane_t *l = t->owner;
    job_t *job = l->job;
    jobs_t *js = job->js;
    const hubd_config_t *cfg = js->cfg;
    if (lane_gone(l))
        return;
    lane_seal(l); /* what came is kept: the next attempt asks for the rest */
    transfer_abort(t);
    if (l->chunk && l->chunk->got == len_of(l->chunk)) { /* cut after its last byte */
        lane_chunk_done(l);
        segs_pump(job);
        return;
    }
    segs_t *s = job->seg;
    retry_in_t in = {.code = code,
                     .attempts = l->attempts,
                     .retries = cfg->retries,
                     .shutting_down = js->shutting_down,
                     .lane = 1,
                     .want = s->grow.want,
                     .retry_after_ms = t->disp.retry_after_ms,
                     .base_ms = cfg->retry_delay_ms,
                     .max_ms = cfg->retry_max_delay_ms,
                     .rnd = (uint64_t)random()};
    retry_out_t out;
    retry_decide(&in, &out);
    if (out.verdict == RETRY_FAIL) {
        char m[600];
        if (out.after_n)
            snprintf(m, sizeof m, "%s (after %u attempts)", msg, l->attempts + 1);
        l->ops->fail(job, code, out.after_n ? m : msg);
        return;
    }
    js->stats.segment_retries++;
    if (out.fewer) {
        segplan_throttled(&s->grow); /* the server says too many: one fewer, for good */
        if (segs_connections(job) >= s->grow.want) {
            /* Over the number now wanted: this lane lets its chunk go to
             * one that is connected, and stays idle. */
            seg_chunk_t *c = l->chunk;
            c->lane = -1;
            l->chunk = NULL;
            l->cur.tag = NULL;
            disposition_clear(&t->disp);
            log_info("job %llu: %s: one connection fewer (%u)", (unsigned long long)job->id, code,
                     s->grow.want);
            segs_pump(job);
            return;
        }
    }
    if (out.rewind)
        transfer_rewind(t); /* a signed URL expired: resolve the job's URL again */
    disposition_clear(&t->disp);
    l->attempts++;
    log_info("job %llu: a connection's range %llu-%llu failed (%s: %s): again in %llu ms",
             (unsigned long long)job->id,
             (unsigned long long)(l->chunk ? l->chunk->start + l->chunk->got : 0),
             (unsigned long long)(l->chunk ? l->chunk->end - 1 : 0), code, msg,
             (unsigned long long)out.delay_ms);
    l->waiting = 1;
    uv_timer_start(&l->timer, on_lane_timer, out.delay_ms, 0);
}

static const transfer_cbs_t lane_cbs = {lane_head, lane_body, lane_end, lane_failure};

/* ---- lanes ---------------------------------------------------------------- */

/* The time of the lane's rate window its connection had: not the
 * download's pauses (backpressure: the disk or the hash behind), nor the
 * loop's lateness (a busy machine). A lane slow for those is not a slow
 * connection: cutting it would have the origin send its bytes in flight
 * twice. */
static uint64_t lane_active_ms(const seg_lane_t *l, uint64_t now)
{
    uint64_t span = now - l->t_win;
    return span > l->off_win ? span - l->off_win : 0;
}

/* ms that were not the lanes' (a pause, the loop late): each lane's
 * silence, its request's age and its rate window leave them out. */
static void lanes_forgive(segs_t *s, uint64_t ms, uint64_t now)
{
    for (unsigned i = 0; i < s->nlanes; i++) {
        seg_lane_t *l = s->lanes[i];
        l->off_win += ms;
        l->t_req = now - l->t_req > ms ? l->t_req + ms : now;
        l->last_byte = now - l->last_byte > ms ? l->last_byte + ms : now;
    }
}

static void lane_start(seg_lane_t *l)
{
    seg_chunk_t *c = l->chunk;
    uint64_t now = uv_now(l->job->js->loop);
    uint64_t active = lane_active_ms(l, now);
    if (active >= SEG_RATE_MS / 4 && l->got_win) /* the last request's rate */
        l->rate = l->got_win * 1000 / active;
    l->last_byte = l->t_req = l->t_win = now;
    l->got_win = l->off_win = 0;
    if (transfer_start(&l->xfer, c->start + c->got, c->end, 0)) {
        l->waiting = 1; /* the lane's timer reports it, a turn later */
        uv_timer_start(&l->timer, on_lane_timer, 0, 0);
    }
}

static seg_lane_t *lane_new(job_t *job)
{
    segs_t *s = job->seg;
    if (s->nlanes == SEG_MAX_LANES)
        return NULL;
    seg_lane_t *l = calloc(1, sizeof *l);
    url_t u;
    if (!l || url_parse(s->url, &u, NULL)) {
        free(l);
        return NULL;
    }
    l->job = job;
    l->idx = s->nlanes;
    l->ops = s->ops;
    transfer_init(&l->xfer, &lane_cbs, l, &job->file, job->js->http, job->js->cfg, job->id, &u, 0);
    l->xfer.paused = (job->flags & JOB_PAUSED) != 0;
    uv_timer_init(job->js->loop, &l->timer);
    l->timer.data = l;
    job->handles_open++;
    s->lanes[s->nlanes++] = l;
    return l;
}

static void lane_assign(seg_lane_t *l, seg_chunk_t *c)
{
    l->chunk = c;
    l->cur.tag = c;
    c->lane = (int)l->idx;
    lane_start(l);
}

/* Whether the download may open (or keep busy) one more connection
 * (segplan_may_connect): its first always; else fewer than it wants, and
 * the host has room left after the downloads waiting for a connection to
 * it (a large file must not keep a small one, another user's, waiting). */
static int room_for_more(job_t *job)
{
    unsigned host_conns = 0, waiting = 0;
    job->seg->ops->host_load(job, &host_conns, &waiting);
    return segplan_may_connect(segs_connections(job), job->seg->grow.want, host_conns, waiting,
                               job->js->cfg->max_per_host);
}

/* What segplan's decisions read of each lane, as it is now (a request
 * starts and ends between two decisions: taken again for each). */
static void lanes_view(const segs_t *s, seg_lane_view_t *v)
{
    for (unsigned i = 0; i < s->nlanes; i++) {
        const seg_lane_t *l = s->lanes[i];
        v[i] = (seg_lane_view_t){
            .rate = l->rate, .t_req = l->t_req, .requesting = l->xfer.req != NULL};
    }
}

/* The first chunk nobody fetches, within the budget beyond the hashed
 * prefix (segplan_next_chunk), or else a new one cut from the tail
 * (segplan_tail_cut) for a lane that received `pieces` chunks whole (its
 * first ones are short: segplan_lane_piece); NULL when none. */
static seg_chunk_t *next_chunk(job_t *job, unsigned pieces)
{
    segs_t *s = job->seg;
    uint64_t limit = job->pipe.hashed + job->js->cfg->segment_budget;
    long i = segplan_next_chunk(s->chunks, s->n, s->main, limit);
    if (i >= 0)
        return s->chunks[i];
    uint64_t end = segplan_tail_cut(s->tail, s->total, segplan_lane_piece(s->chunk, pieces), limit,
                                    s->grow.want);
    if (!end || chunk_insert(s, s->n, s->tail, end))
        return NULL;
    s->tail = end;
    return s->chunks[s->n - 1];
}

/* At the end (all cut and taken): the lane fetching the most halves it, and the second half
 * is a new chunk (segplan_split says which and where). NULL when no chunk
 * is worth it. On a fast link the rest is soon there anyway: the origin
 * then sends the file once, not 4% more (the demo checks it). */
static seg_chunk_t *split_chunk(job_t *job)
{
    segs_t *s = job->seg;
    seg_lane_view_t v[SEG_MAX_LANES];
    seg_split_t sp;
    if (!segplan_at_the_end(s->chunks, s->n, s->main, s->tail, s->total))
        return NULL; /* the budget holds the lanes back: they wait for the hash */
    lanes_view(s, v);
    if (!segplan_split(s->chunks, s->n, v, &sp))
        return NULL;
    seg_chunk_t *c = s->chunks[sp.at];
    if (chunk_insert(s, sp.at + 1, sp.mid, c->end))
        return NULL;
    c->end = sp.mid;
    log_debug("job %llu: split %llu-%llu at %llu", (unsigned long long)job->id,
              (unsigned long long)c->start, (unsigned long long)s->chunks[sp.at + 1]->end - 1,
              (unsigned long long)sp.mid);
    return s->chunks[sp.at + 1];
}

void segs_pump(job_t *job)
{
    segs_t *s = job->seg;
    if (!s || job->state != JOB_BODY)
        return;
    /* What was sealed outside pipeline_append (a lane's chunk done, split,
     * failed or stalled; the main transfer's last batch) goes to the
     * pipeline's items now: a seal starts none, and nothing else may come
     * to start one. With every lane idle, held back by segment_budget, and
     * the hash waiting for that very batch, the download stood still for
     * good (4M chunks, a 12M budget, max_rate 16M: at 32 of 64 MiB). The
     * progress tick comes here too, so no seal waits longer than a tick. */
    pipeline_pump(&job->pipe);
    if (segs_received_all(job)) {
        for (unsigned i = 0; i < s->nlanes; i++)
            lane_seal(s->lanes[i]);
        s->ops->received_all(job);
        return;
    }
    if (job->flags & JOB_PAUSED)
        return;
    const hubd_config_t *cfg = job->js->cfg;
    /* Idle lanes first (their connections are kept alive), then new ones
     * while more connections are wanted and the host allows them. */
    int idle = 0;
    for (unsigned i = 0; i < s->nlanes && !idle; i++) {
        seg_lane_t *l = s->lanes[i];
        if (l->chunk || l->waiting)
            continue;
        seg_chunk_t *c = NULL;
        if (room_for_more(job)) /* at least one connection, always */
            if (!(c = next_chunk(job, l->pieces)))
                c = split_chunk(job);
        if (c)
            lane_assign(l, c);
        else
            idle = 1;
    }
    /* Idle lanes (or the main transfer, its first chunk done) gave
     * connections back: a download waiting for one starts before this one
     * adds a lane. */
    if (job->js->stats.queued && (idle || segs_connections(job) < s->grow.want))
        s->ops->released(job);
    while (room_for_more(job) && s->nlanes < cfg->max_connections_per_download) {
        seg_chunk_t *c = next_chunk(job, 0);
        if (!c)
            c = split_chunk(job);
        seg_lane_t *l = c ? lane_new(job) : NULL;
        if (!l)
            break;
        lane_assign(l, c);
    }
}

/* Each busy lane's rate over its window (at least half of SEG_RATE_MS). */
static void lanes_rate(segs_t *s, uint64_t now)
{
    for (unsigned i = 0; i < s->nlanes; i++) {
        seg_lane_t *l = s->lanes[i];
        if (!l->chunk || !l->xfer.req || now - l->t_win < SEG_RATE_MS / 2)
            continue;
        uint64_t active = lane_active_ms(l, now);
        if (active < SEG_RATE_MS / 4 && now - l->t_win < 4 * SEG_RATE_MS)
            continue; /* mostly paused: wait for more of its own time */
        if (active >= SEG_RATE_MS / 4)
            l->rate = l->got_win * 1000 / active;
        l->got_win = l->off_win = 0;
        l->t_win = now;
    }
}

/* Whether the lane on chunk c, which the hash waits for, is far slower
 * than the others (segplan_far_slower): its connection is served slowly
 * and holds up the whole download, while a new one would be served like
 * the others. */
static int far_slower(const segs_t *s, const seg_chunk_t *c, uint64_t now, uint64_t *median)
{
    seg_lane_view_t v[SEG_MAX_LANES];
    lanes_view(s, v);
    return segplan_far_slower(c, v, s->nlanes, now, median);
}

/* The growth's tick (segplan_grow): what the connections brought since
 * its last mark, and the next step when a round is judged. */
static void grow(job_t *job, uint64_t now)
{
    segs_t *s = job->seg;
    seg_grow_in_t in = {.now = now,
                        .received = job->pipe.received,
                        .connections = segs_connections(job),
                        .least = job->xfer.req ? s->main_round : UINT64_MAX,
                        .max = job->js->cfg->max_connections_per_download,
                        .disturbed = s->disturbed || (job->flags & JOB_PAUSED)};
    for (unsigned i = 0; i < s->nlanes; i++)
        if (s->lanes[i]->xfer.req && s->lanes[i]->got_round < in.least)
            in.least = s->lanes[i]->got_round;
    if (in.least == UINT64_MAX)
        in.least = 0;
    s->disturbed = 0;
    unsigned was = s->grow.want;
    if (segplan_grow(&s->grow, &in)) {
        s->main_round = 0;
        for (unsigned i = 0; i < s->nlanes; i++)
            s->lanes[i]->got_round = 0;
    }
    if (s->grow.want != was)
        log_info("job %llu: %u connections brought %llu bytes/s: %u wanted now%s",
                 (unsigned long long)job->id, was, (unsigned long long)s->grow.rate, s->grow.want,
                 s->grow.want < was ? " (they added little)" : "");
}

void segs_tick(job_t *job, uint64_t now)
{
    segs_t *s = job->seg;
    if (!s || job->state != JOB_BODY)
        return;
    const hubd_config_t *cfg = job->js->cfg;
    /* A tick late by far: the loop (the machine) was busy, not the lanes'
     * connections. That time counts for no lane's silence or rate. */
    if (s->t_tick && now - s->t_tick > 2 * PROGRESS_INTERVAL_MS) {
        lanes_forgive(s, now - s->t_tick - PROGRESS_INTERVAL_MS, now);
        s->disturbed = 1;
    }
    s->t_tick = now;
    if (now - s->t_rate >= SEG_RATE_MS) {
        s->t_rate = now;
        lanes_rate(s, now);
    }
    grow(job, now);
    /* The chunk the hash waits for: a silent connection there, or one far
     * slower than the others, holds up the whole download; another one
     * asks for the rest of it. */
    for (size_t i = 0; i < s->n; i++) {
        seg_chunk_t *c = s->chunks[i];
        if (c->got == len_of(c))
            continue;
        seg_lane_t *l = c->lane >= 0 ? s->lanes[c->lane] : NULL;
        uint64_t median = 0;
        if (l && l->xfer.req && !(job->flags & JOB_PAUSED) &&
            now - l->last_byte < cfg->segment_stall_timeout_ms && far_slower(s, c, now, &median)) {
            log_warn("job %llu: %llu-%llu at %llu bytes/s, the other connections' median %llu: "
                     "asked for again on another connection",
                     (unsigned long long)job->id, (unsigned long long)(c->start + c->got),
                     (unsigned long long)c->end - 1, (unsigned long long)l->rate,
                     (unsigned long long)median);
            c->slow_retried = 1;
            lane_seal(l);
            transfer_abort(&l->xfer); /* not an attempt that failed: its bytes came */
            job->js->stats.segment_retries++;
            lane_start(l);
        } else if (l && l->xfer.req && !(job->flags & JOB_PAUSED) &&
                   now - l->last_byte >= cfg->segment_stall_timeout_ms) {
            char m[160];
            snprintf(m, sizeof m, "no byte of %llu-%llu for %llu ms",
                     (unsigned long long)(c->start + c->got), (unsigned long long)c->end - 1,
                     (unsigned long long)(now - l->last_byte));
            lane_seal(l);
            transfer_abort(&l->xfer); /* its connection goes: a new one is opened */
            retry_in_t in = {.code = "timeout",
                             .attempts = l->attempts,
                             .retries = cfg->retries,
                             .shutting_down = job->js->shutting_down,
                             .lane = 1,
                             .want = s->grow.want};
            retry_out_t out; /* no backoff: the silence was the wait */
            retry_decide(&in, &out);
            if (out.verdict == RETRY_FAIL) { /* silent every time: give up */
                char f[200];
                snprintf(f, sizeof f, "%s (after %u attempts)", m, l->attempts + 1);
                s->ops->fail(job, "timeout", f);
                return;
            }
            l->attempts++; /* a byte sets it back to 0 */
            log_warn("job %llu: %s: asked for again", (unsigned long long)job->id, m);
            job->js->stats.segment_retries++;
            lane_start(l);
        }
        break;
    }
    segs_pump(job);
}

void segs_set_paused(job_t *job, int paused)
{
    if (!job->seg)
        return;
    segs_t *s = job->seg;
    uint64_t now = uv_now(job->js->loop);
    for (unsigned i = 0; i < s->nlanes; i++) {
        transfer_set_paused(&s->lanes[i]->xfer, paused);
        if (!paused) /* the pause was ours: silence is counted from now */
            s->lanes[i]->last_byte = now;
    }
    if (paused)
        s->disturbed = 1; /* the growth's round is not the origin's rate */
    if (paused && !s->t_paused) {
        s->t_paused = now ? now : 1;
    } else if (!paused && s->t_paused) {
        /* Nor does the pause count for a rate or a request's age. */
        lanes_forgive(s, now - s->t_paused, now);
        s->t_paused = 0;
    }
    if (!paused)
        segs_pump(job);
}

void segs_stop(job_t *job)
{
    segs_t *s = job->seg;
    if (!s)
        return;
    for (unsigned i = 0; i < s->nlanes; i++) {
        seg_lane_t *l = s->lanes[i];
        transfer_abort(&l->xfer);
        uv_timer_stop(&l->timer);
        l->waiting = 0;
        lane_seal(l);
    }
}

static void on_lane_closed(uv_handle_t *h)
{
    seg_lane_t *l = h->data;
    job_t *job = l->job;
    const segs_ops_t *ops = l->ops;
    free(l);
    ops->handle_closed(job);
}

void segs_reset(job_t *job)
{
    segs_t *s = job->seg;
    if (!s)
        return;
    segs_stop(job);
    for (unsigned i = 0; i < s->nlanes; i++) {
        seg_lane_t *l = s->lanes[i];
        transfer_free(&l->xfer);
        uv_close((uv_handle_t *)&l->timer, on_lane_closed);
    }
    segs_free_table(s);
    job->seg = NULL;
}
