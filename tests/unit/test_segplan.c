/* Unit tests for daemon/fetch/segplan.c: the decisions of a download over
 * several connections, pure functions of the chunk table, the lanes' rates
 * and the clock. Which chunk comes next, which is split and where, which
 * lane is far slower, how many connections are wanted, how large a lane's
 * next chunk is. */
#include "segplan.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#define MiB ((uint64_t)1 << 20)

/* A table of up to 16 chunks, each pointed to as segments.c's is. */
typedef struct table {
    seg_chunk_t c[16];
    seg_chunk_t *p[16];
    size_t n;
} table_t;

/* Appends [start, end) with got bytes received, fetched by `lane` (-1: none). */
static seg_chunk_t *add(table_t *t, uint64_t start, uint64_t end, uint64_t got, int lane)
{
    ck_assert_uint_lt(t->n, 16);
    seg_chunk_t *c = &t->c[t->n];
    *c = (seg_chunk_t){.start = start, .end = end, .got = got, .lane = lane};
    t->p[t->n++] = c;
    return c;
}

/* A table of n chunks of `len` bytes from 0, none fetched. */
static void even(table_t *t, size_t n, uint64_t len)
{
    t->n = 0;
    for (size_t i = 0; i < n; i++)
        add(t, i * len, (i + 1) * len, 0, -1);
}

/* A lane with a request in flight at `rate` bytes/s, asked at t_req. */
static seg_lane_view_t busy(uint64_t rate, uint64_t t_req)
{
    return (seg_lane_view_t){.rate = rate, .t_req = t_req, .requesting = 1};
}

/* ---- next chunk ----------------------------------------------------------- */

START_TEST(segplan_next_chunk_skips_main_busy_and_complete)
{
    table_t t = {0};
    even(&t, 5, 8 * MiB);
    t.c[1].lane = 0;          /* fetched by a lane */
    t.c[2].got = 8 * MiB;     /* all received */
    t.c[3].got = 8 * MiB - 1; /* one byte left: still to fetch */
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, &t.c[0], UINT64_MAX), 3);
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, UINT64_MAX), 0); /* no main */
    t.c[3].got = 8 * MiB;
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, &t.c[0], UINT64_MAX), 4);
    t.c[4].lane = 2;
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, &t.c[0], UINT64_MAX), -1); /* none left */
    ck_assert_int_eq(segplan_next_chunk(t.p, 0, NULL, UINT64_MAX), -1);      /* no table */
}
END_TEST

START_TEST(segplan_next_chunk_stops_at_the_budget)
{
    table_t t = {0};
    even(&t, 4, 8 * MiB);
    t.c[0].got = 8 * MiB;
    t.c[1].lane = 0;
    /* Chunk 2 starts at 16 MiB: handed out only below the limit. */
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, 16 * MiB + 1), 2);
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, 16 * MiB), -1);
    /* What a chunk got counts: it is fetched from there. */
    t.c[2].got = MiB;
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, 17 * MiB + 1), 2);
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, 17 * MiB), -1);
    /* A chunk past the limit ends the search, even with free ones after. */
    t.c[1].lane = -1;
    t.c[1].got = 0;
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, 8 * MiB + 1), 1);
    ck_assert_int_eq(segplan_next_chunk(t.p, t.n, NULL, 8 * MiB), -1);
}
END_TEST

/* ---- split ---------------------------------------------------------------- */

START_TEST(segplan_split_picks_the_chunk_with_most_left)
{
    table_t t = {0};
    /* At 1 MiB/s each rest takes well over SEG_SPLIT_MIN_MS. */
    seg_lane_view_t lanes[4] = {busy(MiB, 0), busy(MiB, 0), busy(MiB, 0), busy(MiB, 0)};
    add(&t, 0, 32 * MiB, 20 * MiB, 0);         /* 12 MiB left */
    add(&t, 32 * MiB, 64 * MiB, 10 * MiB, 1);  /* 22 MiB left */
    add(&t, 64 * MiB, 96 * MiB, 16 * MiB, 2);  /* 16 MiB left */
    add(&t, 96 * MiB, 128 * MiB, 0, -1);       /* 32 MiB, no lane: not split */
    add(&t, 128 * MiB, 160 * MiB, 8 * MiB, 3); /* 24 MiB left */
    seg_split_t sp;
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
    ck_assert_uint_eq(sp.at, 4);

    lanes[3].requesting = 0; /* waiting for a retry: not split */
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
    ck_assert_uint_eq(sp.at, 1);

    lanes[1].rate = 0; /* no rate yet: not split */
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
    ck_assert_uint_eq(sp.at, 2);

    t.c[0].got = 16 * MiB; /* as much left as chunk 2: the first of equals */
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
    ck_assert_uint_eq(sp.at, 0);
}
END_TEST

START_TEST(segplan_split_refuses_a_small_or_quick_rest)
{
    table_t t = {0};
    seg_lane_view_t lanes[1] = {busy(MiB, 0)};
    seg_split_t sp;
    /* At least 2 * SEG_SPLIT_MIN left. */
    add(&t, 0, 64 * MiB, 64 * MiB - 2 * SEG_SPLIT_MIN, 0);
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
    t.c[0].got++;
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 0);

    /* At least SEG_SPLIT_MIN_MS left at the lane's rate. */
    t.c[0].got = 0;
    lanes[0].rate = 64 * MiB * 1000 / SEG_SPLIT_MIN_MS; /* exactly SEG_SPLIT_MIN_MS */
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
    lanes[0].rate++;
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 0);

    /* A quick lane's chunk is passed over for a slower one's, smaller. */
    add(&t, 64 * MiB, 72 * MiB, 0, 1);
    seg_lane_view_t two[2] = {lanes[0], busy(MiB, 0)};
    ck_assert_int_eq(segplan_split(t.p, t.n, two, &sp), 1);
    ck_assert_uint_eq(sp.at, 1);

    t.n = 0; /* nothing at all */
    ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 0);
}
END_TEST

START_TEST(segplan_split_cuts_aligned_inside_the_rest)
{
    table_t t = {0};
    seg_lane_view_t lanes[1] = {busy(MiB, 0)};
    seg_split_t sp;
    uint64_t starts[] = {0, 12345, 3 * MiB + 777, 100 * MiB + 1};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
        for (uint64_t got = 0; got < 6 * MiB; got += 333333) {
            t.n = 0;
            uint64_t s = starts[i], e = s + 10 * MiB + 4099;
            seg_chunk_t *c = add(&t, s, e, got, 0);
            ck_assert_int_eq(segplan_split(t.p, t.n, lanes, &sp), 1);
            uint64_t from = s + got, left = e - from;
            ck_assert_uint_eq(sp.at, 0);
            ck_assert_uint_eq(sp.mid % SEG_ALIGN, 0);
            ck_assert_uint_gt(sp.mid, from);
            ck_assert_uint_lt(sp.mid, c->end);
            /* The middle of the rest, rounded down to SEG_ALIGN. */
            ck_assert_uint_le(sp.mid, from + left / 2);
            ck_assert_uint_gt(sp.mid + SEG_ALIGN, from + left / 2);
            ck_assert_uint_eq(c->end, e); /* the caller cuts */
        }
}
END_TEST

/* ---- far slower ----------------------------------------------------------- */

/* Lane 0 on a chunk with 8 MiB left at 64 KiB/s (128 s), asked at 0; the
 * others at 1 MiB/s. */
static seg_chunk_t slow_chunk(void)
{
    return (seg_chunk_t){.start = 0, .end = 16 * MiB, .got = 8 * MiB, .lane = 0};
}

START_TEST(segplan_far_slower_needs_two_others)
{
    seg_chunk_t c = slow_chunk();
    seg_lane_view_t lanes[3] = {busy(64 << 10, 0), busy(MiB, 0), busy(0, 0)};
    uint64_t median = 0;
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 0);
    ck_assert_uint_eq(median, 0); /* not compared */
    lanes[2].rate = MiB;
    lanes[2].requesting = 0; /* idle: its last chunk's rate counts */
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 1);
    ck_assert_uint_eq(median, MiB);
    /* The upper middle of the others' rates. */
    seg_lane_view_t more[5] = {busy(64 << 10, 0), busy(MiB, 0), busy(4 * MiB, 0), busy(2 * MiB, 0),
                               busy(3 * MiB, 0)};
    ck_assert_int_eq(segplan_far_slower(&c, more, 5, 10000, &median), 1);
    ck_assert_uint_eq(median, 3 * MiB);
    more[0].rate = 5 * MiB; /* the slow lane is not one of the others */
    more[1].rate = 64 << 10;
    c.lane = 1;
    ck_assert_int_eq(segplan_far_slower(&c, more, 5, 10000, &median), 1);
    ck_assert_uint_eq(median, 4 * MiB);
}
END_TEST

START_TEST(segplan_far_slower_waits_for_its_request)
{
    seg_chunk_t c = slow_chunk();
    seg_lane_view_t lanes[3] = {busy(64 << 10, 5000), busy(MiB, 0), busy(MiB, 0)};
    uint64_t median = 0;
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 5000 + SEG_SLOW_MIN_MS - 1, &median), 0);
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 5000 + SEG_SLOW_MIN_MS, &median), 1);
    c.slow_retried = 1; /* once per chunk */
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 5000 + 10 * SEG_SLOW_MIN_MS, &median), 0);
}
END_TEST

START_TEST(segplan_far_slower_below_the_median_by_the_factor)
{
    seg_chunk_t c = slow_chunk();
    seg_lane_view_t lanes[3] = {busy(MiB / SEG_SLOW_FACTOR, 0), busy(MiB, 0), busy(MiB, 0)};
    uint64_t median = 0;
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 0); /* exactly: not */
    ck_assert_uint_eq(median, MiB);
    lanes[0].rate--;
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 1);
    lanes[0].rate = 0; /* no rate at all: far slower */
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 1);
}
END_TEST

START_TEST(segplan_far_slower_only_with_much_left)
{
    seg_chunk_t c = slow_chunk();
    uint64_t rate = 64 << 10;
    seg_lane_view_t lanes[3] = {busy(rate, 0), busy(MiB, 0), busy(MiB, 0)};
    uint64_t median = 0;
    /* Exactly SEG_SLOW_MIN_MS left at its rate: it may as well finish. */
    c.got = c.end - rate * SEG_SLOW_MIN_MS / 1000;
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 0);
    c.got--;
    ck_assert_int_eq(segplan_far_slower(&c, lanes, 3, 10000, &median), 1);
}
END_TEST

/* ---- growth --------------------------------------------------------------- */

START_TEST(segplan_grow_starts_with_a_few)
{
    seg_growth_t g;
    segplan_grow_start(&g, 16);
    ck_assert_uint_eq(g.want, SEG_START_CONNS);
    ck_assert_int_eq(g.phase, SEG_RAMP_DOUBLING);
    ck_assert_uint_eq(g.prev, 0);
    ck_assert_int_eq(g.measuring, 0);
    segplan_grow_start(&g, 2);
    ck_assert_uint_eq(g.want, 2);
}
END_TEST

/* A download's clock and byte count, and the tick that feeds segplan_grow. */
typedef struct ramp {
    seg_growth_t g;
    uint64_t now, received;
    unsigned max, most; /* most: the most connections wanted so far */
} ramp_t;

static int tick(ramp_t *r, unsigned connections, uint64_t least, int disturbed)
{
    seg_grow_in_t in = {.now = r->now,
                        .received = r->received,
                        .connections = connections,
                        .least = least,
                        .max = r->max,
                        .disturbed = disturbed};
    int mark = segplan_grow(&r->g, &in);
    if (r->g.want > r->most)
        r->most = r->g.want;
    return mark;
}

/* One round with every wanted connection busy and receiving, the total at
 * `rate` bytes per second: the tick that opens the window, then the one
 * SEG_RAMP_MS later that judges it (the time bound: each connection got
 * less than SEG_RAMP_BYTES). The connections wanted after. */
static unsigned round_at(ramp_t *r, uint64_t rate)
{
    ck_assert_int_eq(tick(r, r->g.want, 1, 0), 1); /* the window opens: a mark */
    ck_assert_int_eq(r->g.measuring, 1);
    uint64_t from = r->received, part = rate * (SEG_RAMP_MS - 1) / 1000;
    r->now += SEG_RAMP_MS - 1;
    r->received += part;
    ck_assert_int_eq(tick(r, r->g.want, 1, 0), 0); /* not yet */
    r->now += 1;
    r->received = from + rate * SEG_RAMP_MS / 1000; /* the rate, to the byte when even */
    ck_assert_int_eq(tick(r, r->g.want, 1, 0), 1);  /* judged */
    ck_assert_int_eq(r->g.measuring, 0);
    return r->g.want;
}

static void ramp_start(ramp_t *r, unsigned max)
{
    *r = (ramp_t){.now = 1000, .max = max};
    segplan_grow_start(&r->g, max);
    r->most = r->g.want;
}

START_TEST(segplan_grow_doubles_while_the_rate_grows_in_proportion)
{
    /* An origin that caps each connection at 16 MiB/s, as CDNs do. */
    uint64_t cap = 16 * MiB;
    ramp_t r;
    ramp_start(&r, 16);
    ck_assert_uint_eq(round_at(&r, 4 * cap), 8); /* the start's round: the base */
    ck_assert_uint_eq(r.g.prev, 4);
    ck_assert_uint_eq(r.g.base, 4 * cap);
    ck_assert_uint_eq(round_at(&r, 8 * cap), 16);
    ck_assert_uint_eq(r.g.base, 8 * cap);
    ck_assert_int_eq(r.g.phase, SEG_RAMP_DOUBLING);
    /* At max: no round any more. */
    ck_assert_int_eq(tick(&r, 16, 1, 0), 0);
    ck_assert_int_eq(r.g.measuring, 0);
    ck_assert_uint_eq(r.g.want, 16);
    /* A doubling that brought half of the proportion still pays (TCP's slow
     * start of the new connections over their first MiBs). */
    ramp_start(&r, 64);
    round_at(&r, 4 * cap);
    ck_assert_uint_eq(round_at(&r, 6 * cap), 16);
}
END_TEST

START_TEST(segplan_grow_judges_on_the_first_mibs)
{
    ramp_t r;
    ramp_start(&r, 16);
    /* Not every wanted connection busy, or one not receiving yet (a new
     * one connecting): no window. */
    ck_assert_int_eq(tick(&r, 3, 1, 0), 0);
    ck_assert_int_eq(tick(&r, 4, 0, 0), 0);
    ck_assert_int_eq(r.g.measuring, 0);
    ck_assert_int_eq(tick(&r, 4, 1, 0), 1);
    ck_assert_int_eq(r.g.measuring, 1);
    /* Each connection's SEG_RAMP_BYTES judge the round before SEG_RAMP_MS. */
    r.now += 100;
    r.received += 8 * MiB;
    ck_assert_int_eq(tick(&r, 4, SEG_RAMP_BYTES - 1, 0), 0);
    ck_assert_int_eq(tick(&r, 4, SEG_RAMP_BYTES, 0), 1);
    ck_assert_uint_eq(r.g.rate, 80 * MiB);
    ck_assert_uint_eq(r.g.want, 8);
    /* A connection that ends within the round (a failure, no chunk left)
     * restarts it: the rate of fewer says nothing of the step. */
    ck_assert_int_eq(tick(&r, 8, 1, 0), 1);
    r.now += 50;
    ck_assert_int_eq(tick(&r, 7, 1, 0), 1);
    ck_assert_int_eq(r.g.measuring, 0);
    ck_assert_uint_eq(r.g.want, 8);
}
END_TEST

START_TEST(segplan_grow_stops_when_the_rate_does_not)
{
    /* Loopback nginx with no cap: one connection fills what hubd can take;
     * more bring nothing. Before slow start: 4 at first, a fifth after a
     * second, grown out after that one added nothing. Now: one doubling
     * (one round), then the fifth, then back to 4 for good. */
    uint64_t full = 900 * MiB;
    ramp_t r;
    ramp_start(&r, 16);
    ck_assert_uint_eq(round_at(&r, full), 8);
    ck_assert_uint_eq(round_at(&r, full + full / 20), 5); /* 5% more: noise */
    ck_assert_int_eq(r.g.phase, SEG_RAMP_LINEAR);
    ck_assert_uint_eq(r.g.prev, 4);
    ck_assert_uint_eq(r.g.base, full); /* the fifth is judged against the 4 */
    ck_assert_uint_eq(round_at(&r, full), 4);
    ck_assert_int_eq(r.g.phase, SEG_RAMP_OUT);
    ck_assert_uint_eq(r.most, 8);
    ck_assert_uint_le(r.g.want, 5); /* no more than before */
    /* For good, whatever the rate does. */
    ck_assert_int_eq(tick(&r, 4, 1, 0), 0);
    r.now += 10 * SEG_RAMP_MS;
    r.received += 10 * full;
    ck_assert_int_eq(tick(&r, 4, SEG_RAMP_BYTES, 0), 0);
    ck_assert_uint_eq(r.g.want, 4);
}
END_TEST

START_TEST(segplan_grow_pays_from_a_quarter_of_the_proportion)
{
    /* 4 brought 64 MiB/s: 8 pay from 80 MiB/s (a quarter of 64 more). */
    ramp_t r;
    ramp_start(&r, 16);
    round_at(&r, 64 * MiB);
    ck_assert_uint_eq(round_at(&r, 80 * MiB), 16);
    ramp_start(&r, 16);
    round_at(&r, 64 * MiB);
    ck_assert_uint_eq(round_at(&r, 80 * MiB - 1000), 5);
}
END_TEST

START_TEST(segplan_grow_goes_on_one_at_a_time_below_a_limit)
{
    /* 16 MiB/s a connection, 76.8 MiB/s in all (4.8 connections' worth):
     * 8 bring 20% more than 4, under a quarter of the proportion; one more
     * at a time from 4, each paying a tenth at least. */
    uint64_t cap = 16 * MiB, total = 4 * cap + 4 * cap / 5;
    ramp_t r;
    ramp_start(&r, 16);
    round_at(&r, 4 * cap);
    ck_assert_uint_eq(round_at(&r, total), 5);
    ck_assert_uint_eq(round_at(&r, total), 6); /* +20% for the fifth: paid */
    ck_assert_int_eq(r.g.phase, SEG_RAMP_LINEAR);
    ck_assert_uint_eq(r.g.base, total);
    /* The sixth adds under a tenth: back to 5, for good. */
    ck_assert_uint_eq(round_at(&r, total + total / 11), 5);
    ck_assert_int_eq(r.g.phase, SEG_RAMP_OUT);

    /* A link that 6 connections fill: 8 pay (by more than a quarter), 16 do
     * not: back to 8, then 9 adds nothing. */
    total = 6 * cap;
    ramp_start(&r, 32); /* at max, no round would judge the 16 */
    round_at(&r, 4 * cap);
    ck_assert_uint_eq(round_at(&r, total), 16);
    ck_assert_uint_eq(round_at(&r, total), 9);
    ck_assert_uint_eq(round_at(&r, total), 8);
    ck_assert_int_eq(r.g.phase, SEG_RAMP_OUT);
}
END_TEST

START_TEST(segplan_grow_stays_within_max)
{
    uint64_t cap = 16 * MiB;
    ramp_t r;
    ramp_start(&r, 12);
    ck_assert_uint_eq(round_at(&r, 4 * cap), 8);
    ck_assert_uint_eq(round_at(&r, 8 * cap), 12); /* not 16 */
    ck_assert_int_eq(tick(&r, 12, 1, 0), 0);
    ck_assert_uint_eq(r.most, 12);
    /* A max below the start: no round at all. */
    ramp_start(&r, 3);
    ck_assert_uint_eq(r.g.want, 3);
    ck_assert_int_eq(tick(&r, 3, 1, 0), 0);
    ck_assert_int_eq(r.g.measuring, 0);
    /* A max raised by a reload: the growth goes on. */
    r.max = 16;
    ck_assert_uint_eq(round_at(&r, 3 * cap), 6);
}
END_TEST

START_TEST(segplan_grow_waits_out_a_pause)
{
    ramp_t r;
    ramp_start(&r, 16);
    ck_assert_int_eq(tick(&r, 4, 1, 0), 1); /* the window opens */
    r.now += SEG_RAMP_MS;
    r.received += MiB; /* paused most of it: a low rate that is hubd's */
    ck_assert_int_eq(tick(&r, 4, 1, 1), 1);
    ck_assert_int_eq(r.g.measuring, 0);
    ck_assert_uint_eq(r.g.want, 4);
    ck_assert_uint_eq(r.g.prev, 0);
    /* Paused at every tick (hubd paces the download): no round ever. */
    for (int i = 0; i < 50; i++) {
        r.now += 100;
        r.received += MiB;
        ck_assert_int_eq(tick(&r, 4, SEG_RAMP_BYTES, 1), 1);
    }
    ck_assert_uint_eq(r.g.want, 4);
    /* The pause over: a round as ever. */
    ck_assert_uint_eq(round_at(&r, 64 * MiB), 8);
}
END_TEST

START_TEST(segplan_grow_never_again_after_too_many)
{
    /* A 429 or 503 on each of the 4 connections the doubling added: one
     * fewer for each, and no growth into that server again. */
    uint64_t cap = 16 * MiB;
    ramp_t r;
    ramp_start(&r, 16);
    round_at(&r, 4 * cap);
    ck_assert_uint_eq(r.g.want, 8);
    ck_assert_int_eq(tick(&r, 8, 1, 0), 1); /* a window open */
    for (int i = 0; i < 4; i++)
        segplan_throttled(&r.g);
    ck_assert_uint_eq(r.g.want, 4);
    ck_assert_int_eq(r.g.phase, SEG_RAMP_OUT);
    ck_assert_int_eq(r.g.measuring, 0);
    r.now += SEG_RAMP_MS;
    r.received += 100 * cap;
    ck_assert_int_eq(tick(&r, 4, SEG_RAMP_BYTES, 0), 0);
    ck_assert_uint_eq(r.g.want, 4);
    /* Never below one. */
    for (int i = 0; i < 6; i++)
        segplan_throttled(&r.g);
    ck_assert_uint_eq(r.g.want, 1);
}
END_TEST

START_TEST(segplan_lane_piece_starts_small)
{
    /* 2, 4, 8, then 16 MiB: a new connection's rate is known after 2. */
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 0), SEG_FIRST_PIECE);
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 1), 4 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 2), 8 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 3), 16 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 31), 16 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 32), 16 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(16 * MiB, 4000000000u), 16 * MiB);
    /* Chunks smaller than the first piece, or between two: the chunk. */
    ck_assert_uint_eq(segplan_lane_piece(MiB, 0), MiB);
    ck_assert_uint_eq(segplan_lane_piece(3 * MiB, 0), 2 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(3 * MiB, 1), 3 * MiB);
    ck_assert_uint_eq(segplan_lane_piece(UINT64_MAX, 63), UINT64_MAX);
    /* Cut from the tail of a 512 MiB file: the lanes' first chunks after
     * the main transfer's 16 MiB; the end still shares the rest. */
    ck_assert_uint_eq(
        segplan_tail_cut(16 * MiB, 512 * MiB, segplan_lane_piece(16 * MiB, 0), UINT64_MAX, 4),
        18 * MiB);
    ck_assert_uint_eq(
        segplan_tail_cut(18 * MiB, 512 * MiB, segplan_lane_piece(16 * MiB, 1), UINT64_MAX, 4),
        22 * MiB);
    ck_assert_uint_eq(
        segplan_tail_cut(500 * MiB, 512 * MiB, segplan_lane_piece(16 * MiB, 3), UINT64_MAX, 4),
        503 * MiB);
}
END_TEST

/* ---- fair shares of a host ---------------------------------------------------- */

START_TEST(segplan_may_connect_keeps_one_always)
{
    /* Its only connection: kept, however full the host and whoever waits. */
    ck_assert_int_eq(segplan_may_connect(0, 4, 16, 5, 16), 1);
    ck_assert_int_eq(segplan_may_connect(0, 1, 40, 0, 16), 1);
}
END_TEST

START_TEST(segplan_may_connect_yields_to_a_waiting_download)
{
    /* 4 downloads of 4 fill the host's 16; a lane of one ends
     * its chunk (15 left): with nobody waiting it takes the next... */
    ck_assert_int_eq(segplan_may_connect(3, 4, 15, 0, 16), 1);
    /* ...with another download waiting it does not: the connection is the
     * waiting one's. */
    ck_assert_int_eq(segplan_may_connect(3, 4, 15, 1, 16), 0);
    /* Nor is a lane added while one waits, with room for the one only. */
    ck_assert_int_eq(segplan_may_connect(4, 8, 14, 1, 16), 1);
    ck_assert_int_eq(segplan_may_connect(4, 8, 15, 1, 16), 0);
    ck_assert_int_eq(segplan_may_connect(4, 8, 12, 4, 16), 0);
    /* Two waiting: the next two connections given back are theirs. */
    ck_assert_int_eq(segplan_may_connect(3, 4, 14, 2, 16), 0);
}
END_TEST

START_TEST(segplan_may_connect_stays_below_want_and_max)
{
    ck_assert_int_eq(segplan_may_connect(4, 4, 4, 0, 16), 0);  /* as many as it wants */
    ck_assert_int_eq(segplan_may_connect(3, 8, 16, 0, 16), 0); /* the host is full */
    ck_assert_int_eq(segplan_may_connect(3, 8, 20, 0, 16), 0); /* over (a SIGHUP lowered it) */
    ck_assert_int_eq(segplan_may_connect(1, 2, 0xffffffffu, 1, 16), 0); /* no wrap */
}
END_TEST

/* ---- the tail, cut as lanes take it ----------------------------------------- */

START_TEST(segplan_tail_cut_cuts_one_chunk_within_the_budget)
{
    /* The next chunk from the tail, the last one shorter. */
    ck_assert_uint_eq(segplan_tail_cut(MiB, 10 * MiB, MiB, UINT64_MAX, 1), 2 * MiB);
    ck_assert_uint_eq(segplan_tail_cut(9 * MiB, 10 * MiB - 1, MiB, UINT64_MAX, 1), 10 * MiB - 1);
    /* Nothing left to cut, or the tail is at or past the budget's limit. */
    ck_assert_uint_eq(segplan_tail_cut(10 * MiB, 10 * MiB, MiB, UINT64_MAX, 1), 0);
    ck_assert_uint_eq(segplan_tail_cut(4 * MiB, 10 * MiB, MiB, 4 * MiB, 1), 0);
    ck_assert_uint_eq(segplan_tail_cut(4 * MiB, 10 * MiB, MiB, 4 * MiB + 1, 1), 5 * MiB);
    ck_assert_uint_eq(segplan_tail_cut(0, 10 * MiB, 0, UINT64_MAX, 1), 0); /* no size: no cut */
}
END_TEST

START_TEST(segplan_tail_cut_of_a_huge_total_is_one_chunk)
{
    /* A total of 2^63-1 or near UINT64_MAX: one chunk, no overflow; the
     * table grows by one entry per chunk taken, never by the total. */
    uint64_t lie = INT64_MAX;
    ck_assert_uint_eq(segplan_tail_cut(MiB, lie, MiB, 2 * MiB, 1), 2 * MiB);
    ck_assert_uint_eq(segplan_tail_cut(lie - 5, lie, MiB, UINT64_MAX, 1), lie);
    ck_assert_uint_eq(segplan_tail_cut(UINT64_MAX - MiB, UINT64_MAX, 16 * MiB, UINT64_MAX, 1),
                      UINT64_MAX);
    /* Cut to the budget and no further: 256 MiB of budget, 16 MiB chunks. */
    uint64_t tail = 16 * MiB, end;
    size_t cuts = 0;
    while ((end = segplan_tail_cut(tail, lie, 16 * MiB, 256 * MiB, 1)) != 0) {
        ck_assert_uint_eq(end, tail + 16 * MiB);
        tail = end;
        cuts++;
    }
    ck_assert_uint_eq(cuts, 15);
    ck_assert_uint_eq(tail, 256 * MiB);
}
END_TEST

START_TEST(segplan_tail_cut_shares_the_end_among_the_lanes)
{
    /* 64 MiB in 16 MiB chunks over 4 connections, the first
     * chunk the main transfer's: the lanes take 12, 9, 6.75 (rounded up
     * to 64 KiB) ... MiB, so they end together without a split. */
    ck_assert_uint_eq(segplan_tail_cut(16 * MiB, 64 * MiB, 16 * MiB, UINT64_MAX, 4), 28 * MiB);
    ck_assert_uint_eq(segplan_tail_cut(28 * MiB, 64 * MiB, 16 * MiB, UINT64_MAX, 4), 37 * MiB);
    ck_assert_uint_eq(segplan_tail_cut(37 * MiB, 64 * MiB, 16 * MiB, UINT64_MAX, 4),
                      37 * MiB + 27 * MiB / 4);
    /* Far from the end: whole chunks, as with one lane. */
    ck_assert_uint_eq(segplan_tail_cut(0, 1024 * MiB, 16 * MiB, UINT64_MAX, 16), 16 * MiB);
    /* Never below SEG_PIECE_MIN, nor above the chunk; the last piece is the rest. */
    ck_assert_uint_eq(segplan_tail_cut(60 * MiB, 64 * MiB, 16 * MiB, UINT64_MAX, 8),
                      60 * MiB + SEG_PIECE_MIN);
    ck_assert_uint_eq(segplan_tail_cut(63 * MiB, 64 * MiB, 16 * MiB, UINT64_MAX, 8), 64 * MiB);
    ck_assert_uint_eq(segplan_tail_cut(60 * MiB, 64 * MiB, MiB, UINT64_MAX, 2), 61 * MiB);
    /* The budget still holds. */
    ck_assert_uint_eq(segplan_tail_cut(60 * MiB, 64 * MiB, 16 * MiB, 60 * MiB, 2), 0);
}
END_TEST

START_TEST(segplan_at_the_end_only_when_all_is_cut_and_taken)
{
    table_t t = {0};
    add(&t, 0, 16 * MiB, MiB, -1); /* the main transfer's */
    add(&t, 16 * MiB, 32 * MiB, MiB, 0);
    add(&t, 32 * MiB, 48 * MiB, 0, -1);
    /* A free chunk (held back by the budget or not): not the end. */
    ck_assert_int_eq(segplan_at_the_end(t.p, t.n, t.p[0], 48 * MiB, 48 * MiB), 0);
    t.c[2].lane = 1;
    ck_assert_int_eq(segplan_at_the_end(t.p, t.n, t.p[0], 48 * MiB, 48 * MiB), 1);
    /* More of the file to cut from the tail: not the end either. */
    ck_assert_int_eq(segplan_at_the_end(t.p, t.n, t.p[0], 48 * MiB, 64 * MiB), 0);
    /* A chunk all received needs nobody. */
    t.c[2].lane = -1;
    t.c[2].got = 16 * MiB;
    ck_assert_int_eq(segplan_at_the_end(t.p, t.n, t.p[0], 48 * MiB, 48 * MiB), 1);
}
END_TEST

static Suite *segplan_suite(void)
{
    Suite *s = suite_create("segplan");
    TCase *chunks = tcase_create("chunks");
    TCase *slow = tcase_create("slow");
    TCase *grow = tcase_create("grow");

    tcase_add_test(chunks, segplan_next_chunk_skips_main_busy_and_complete);
    tcase_add_test(chunks, segplan_next_chunk_stops_at_the_budget);
    tcase_add_test(chunks, segplan_split_picks_the_chunk_with_most_left);
    tcase_add_test(chunks, segplan_split_refuses_a_small_or_quick_rest);
    tcase_add_test(chunks, segplan_split_cuts_aligned_inside_the_rest);
    tcase_add_test(chunks, segplan_tail_cut_cuts_one_chunk_within_the_budget);
    tcase_add_test(chunks, segplan_tail_cut_of_a_huge_total_is_one_chunk);
    tcase_add_test(chunks, segplan_tail_cut_shares_the_end_among_the_lanes);
    tcase_add_test(chunks, segplan_at_the_end_only_when_all_is_cut_and_taken);
    suite_add_tcase(s, chunks);

    tcase_add_test(slow, segplan_far_slower_needs_two_others);
    tcase_add_test(slow, segplan_far_slower_waits_for_its_request);
    tcase_add_test(slow, segplan_far_slower_below_the_median_by_the_factor);
    tcase_add_test(slow, segplan_far_slower_only_with_much_left);
    suite_add_tcase(s, slow);

    tcase_add_test(chunks, segplan_lane_piece_starts_small);
    tcase_add_test(grow, segplan_grow_starts_with_a_few);
    tcase_add_test(grow, segplan_grow_doubles_while_the_rate_grows_in_proportion);
    tcase_add_test(grow, segplan_grow_judges_on_the_first_mibs);
    tcase_add_test(grow, segplan_grow_stops_when_the_rate_does_not);
    tcase_add_test(grow, segplan_grow_pays_from_a_quarter_of_the_proportion);
    tcase_add_test(grow, segplan_grow_goes_on_one_at_a_time_below_a_limit);
    tcase_add_test(grow, segplan_grow_stays_within_max);
    tcase_add_test(grow, segplan_grow_waits_out_a_pause);
    tcase_add_test(grow, segplan_grow_never_again_after_too_many);
    tcase_add_test(grow, segplan_may_connect_keeps_one_always);
    tcase_add_test(grow, segplan_may_connect_yields_to_a_waiting_download);
    tcase_add_test(grow, segplan_may_connect_stays_below_want_and_max);
    suite_add_tcase(s, grow);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(segplan_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
