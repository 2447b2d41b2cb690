/* segplan: the decisions of a segmented download as pure functions (see
 * the header). */
#include "segplan.h"

#include <assert.h>
#include <stdlib.h>

static uint64_t left_of(const seg_chunk_t *c)
{
    return c->end - c->start - c->got;
}

long segplan_next_chunk(seg_chunk_t *const *chunks, size_t n, const seg_chunk_t *main,
                        uint64_t limit)
{
    for (size_t i = 0; i < n; i++) {
        const seg_chunk_t *c = chunks[i];
        if (c->start + c->got >= limit)
            return -1;
        if (c->lane < 0 && c != main && left_of(c))
            return (long)i;
    }
    return -1;
}

uint64_t segplan_tail_cut(uint64_t tail, uint64_t total, uint64_t chunk, uint64_t limit,
                          unsigned lanes)
{
    if (tail >= total || tail >= limit || !chunk)
        return 0;
    uint64_t rest = total - tail, piece = chunk;
    if (lanes > 1 && rest / lanes < chunk) { /* near the end: the lanes share the rest */
        piece = (rest / lanes + SEG_ALIGN - 1) / SEG_ALIGN * SEG_ALIGN;
        if (piece < SEG_PIECE_MIN)
            piece = SEG_PIECE_MIN;
        if (piece > chunk)
            piece = chunk;
    }
    return rest > piece ? tail + piece : total; /* no overflow near UINT64_MAX */
}

int segplan_at_the_end(seg_chunk_t *const *chunks, size_t n, const seg_chunk_t *main, uint64_t tail,
                       uint64_t total)
{
    return tail >= total && segplan_next_chunk(chunks, n, main, UINT64_MAX) < 0;
}

int segplan_split(seg_chunk_t *const *chunks, size_t n, const seg_lane_view_t *lanes,
                  seg_split_t *out)
{
    size_t best = n;
    uint64_t most = 0;
    for (size_t i = 0; i < n; i++) {
        const seg_chunk_t *c = chunks[i];
        uint64_t left = left_of(c);
        const seg_lane_view_t *l = c->lane >= 0 ? &lanes[c->lane] : NULL;
        /* Milliseconds left before dividing: right for any SEG_SPLIT_MIN_MS. */
        if (l && l->requesting && left > most && l->rate &&
            left * 1000 / l->rate >= SEG_SPLIT_MIN_MS) {
            most = left;
            best = i;
        }
    }
    if (best == n || most < 2 * SEG_SPLIT_MIN)
        return 0;
    const seg_chunk_t *c = chunks[best];
    uint64_t mid = (c->start + c->got + most / 2) / SEG_ALIGN * SEG_ALIGN;
    if (mid <= c->start + c->got || mid >= c->end) /* not while SEG_SPLIT_MIN >= SEG_ALIGN */
        return 0;
    out->at = best;
    out->mid = mid;
    return 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int segplan_far_slower(const seg_chunk_t *c, const seg_lane_view_t *lanes, unsigned nlanes,
                       uint64_t now, uint64_t *median)
{
    assert(c->lane >= 0 && (unsigned)c->lane < nlanes && nlanes <= SEG_MAX_LANES);
    const seg_lane_view_t *l = &lanes[c->lane];
    if (c->slow_retried || now - l->t_req < SEG_SLOW_MIN_MS)
        return 0;
    uint64_t v[SEG_MAX_LANES];
    unsigned n = 0;
    for (unsigned i = 0; i < nlanes; i++)
        if (i != (unsigned)c->lane && lanes[i].rate) /* an idle lane's: its last chunk's */
            v[n++] = lanes[i].rate;
    if (n < 2)
        return 0;
    qsort(v, n, sizeof *v, cmp_u64);
    *median = v[n / 2];
    return l->rate * SEG_SLOW_FACTOR < *median && left_of(c) * 1000 > l->rate * SEG_SLOW_MIN_MS;
}

uint64_t segplan_lane_piece(uint64_t chunk, unsigned done)
{
    if (done >= 32 || ((uint64_t)SEG_FIRST_PIECE << done) >= chunk)
        return chunk;
    return (uint64_t)SEG_FIRST_PIECE << done;
}

void segplan_grow_start(seg_growth_t *g, unsigned max)
{
    *g = (seg_growth_t){.want = SEG_START_CONNS < max ? SEG_START_CONNS : max,
                        .phase = SEG_RAMP_DOUBLING};
}

/* Whether the step from g->prev connections (rate g->base) to g->want paid:
 * the rate grew by a quarter of the proportion and by a tenth (see the
 * header for why both). */
static int step_paid(const seg_growth_t *g, uint64_t rate)
{
    uint64_t added = g->want > g->prev ? g->want - g->prev : 0;
    uint64_t quarter = g->base * added / g->prev / 4, tenth = g->base / 10;
    return rate >= g->base + (quarter > tenth ? quarter : tenth);
}

/* The round's rate is in: the next step, or the way back. */
static void judge(seg_growth_t *g, uint64_t rate, unsigned max)
{
    g->rate = rate;
    if (!g->prev || step_paid(g, rate)) { /* the start's round has nothing to pay for */
        g->prev = g->want;
        g->base = rate;
        unsigned next = g->phase == SEG_RAMP_DOUBLING ? g->want * 2 : g->want + 1;
        g->want = next < max ? next : max;
        return;
    }
    /* The added connections added little: back to the count before them. A
     * limit may lie between it and the doubling: one more at a time from
     * there, judged against the same base. */
    if (g->phase == SEG_RAMP_DOUBLING && g->prev + 1 < g->want) {
        g->phase = SEG_RAMP_LINEAR;
        g->want = g->prev + 1;
    } else {
        g->phase = SEG_RAMP_OUT;
        g->want = g->prev;
    }
}

int segplan_grow(seg_growth_t *g, const seg_grow_in_t *in)
{
    if (g->phase == SEG_RAMP_OUT || g->want >= in->max) {
        g->measuring = 0;
        return 0;
    }
    if (in->disturbed) { /* hubd held the rate back: it says nothing of the origin */
        g->measuring = 0;
        return 1;
    }
    if (!g->measuring) {
        /* Every wanted connection busy (those over a count backed off from
         * gone), each receiving since the step. */
        if (in->connections != g->want || !in->least)
            return 0;
        g->measuring = 1;
        g->t_win = in->now;
        g->at_win = in->received;
        return 1;
    }
    if (in->connections != g->want) { /* one ended or failed within the round: again */
        g->measuring = 0;
        return 1;
    }
    uint64_t span = in->now - g->t_win;
    if (!span || (in->least < SEG_RAMP_BYTES && span < SEG_RAMP_MS))
        return 0;
    g->measuring = 0;
    judge(g, (in->received - g->at_win) * 1000 / span, in->max);
    return 1;
}

void segplan_throttled(seg_growth_t *g)
{
    if (g->want > 1)
        g->want--;
    g->phase = SEG_RAMP_OUT;
    g->measuring = 0;
}

int segplan_may_connect(unsigned conns, unsigned want, unsigned host_conns, unsigned host_waiting,
                        unsigned max_per_host)
{
    if (!conns) /* its first (or only) one: it waited its turn for it */
        return 1;
    return conns < want && (uint64_t)host_conns + host_waiting < max_per_host;
}
