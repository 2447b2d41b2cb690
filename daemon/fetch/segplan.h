/* segplan: the decisions of a download over several connections
 * (segments.h), as pure functions of the chunk table and the lanes' rates.
 *
 * Which chunk an idle lane takes next, which chunk is split near the end
 * and where, whether the lane the hash waits for is far slower than the
 * others, how many connections are wanted, and how large a lane's next
 * chunk is. segments.c gathers what
 * they read (its chunk table, a view of each lane, the total rate, the
 * clock), calls them, and does what they say: it assigns, inserts, aborts,
 * logs and counts. These only answer.
 *
 * Pure: no I/O, no libuv, no clock (`now` is an argument, in milliseconds
 * of the caller's clock), no globals, no logging, no allocation. Any
 * thread; the unit tests (tests/unit/test_segplan.c) call them directly. */
#ifndef HUBD_SEGPLAN_H
#define HUBD_SEGPLAN_H

#include <stddef.h>
#include <stdint.h>

#define SEG_MAX_LANES 64            /* lanes of one download at most */
#define SEG_START_CONNS 4           /* connections at first, the main one included */
#define SEG_RAMP_BYTES (2u << 20)   /* a round: each connection's next this many bytes... */
#define SEG_RAMP_MS 500             /* ...or this long, whichever first (segplan_grow) */
#define SEG_RATE_MS 1000            /* a lane's own rate is measured over about this long */
#define SEG_FIRST_PIECE (2u << 20)  /* a lane's first chunk (segplan_lane_piece) */
#define SEG_SPLIT_MIN (2u << 20)    /* a chunk is split only with at least this much left */
#define SEG_SPLIT_MIN_MS 1000       /* ...and at least this long left at its lane's rate */
#define SEG_ALIGN ((uint64_t)65536) /* where a split cuts */
#define SEG_SLOW_MIN_MS 3000        /* a lane's rate is judged after this long */
#define SEG_SLOW_FACTOR 8           /* "far slower": below the others' median / this */
#define SEG_PIECE_MIN (2u << 20)    /* the smallest piece cut from the tail near the end */

/* One chunk of the file. The table (segments.c's) is sorted by start and
 * covers [0, total) without overlap. */
typedef struct seg_chunk {
    uint64_t start, end; /* [start, end) of the file */
    uint64_t got;        /* bytes received from start (sealed or in a lane's batch) */
    uint64_t written;    /* bytes on disk from start */
    int lane;            /* the lane fetching it (its number in the lanes' views), -1: none */
    int slow_retried;    /* asked for again once for being far slower */
} seg_chunk_t;

/* What the decisions need of a lane, gathered by the caller just before it
 * asks (a lane's request starts and ends between two questions). */
typedef struct seg_lane_view {
    uint64_t rate;  /* bytes per second over its last window; 0: none yet */
    uint64_t t_req; /* when its current request started (ms) */
    int requesting; /* a request in flight (not idle, not waiting to retry) */
} seg_lane_view_t;

/* The index of the first chunk that no lane fetches, that is not `main`
 * (the main transfer's, or NULL) and that is not all received, among the
 * chunks that start (from what they got) below `limit`: the hashed prefix
 * plus segment_budget, so the lanes do not run too far ahead of the hash.
 * -1 when none. */
long segplan_next_chunk(seg_chunk_t *const *chunks, size_t n, const seg_chunk_t *main,
                        uint64_t limit);

/* The chunk table is cut lazily: it covers [0, tail) of the file, and the
 * rest is cut into chunks of `chunk` bytes only as lanes take them, so a
 * length the origin announces (a Content-Range total of 2^63-1) sizes
 * nothing: the table grows with the bytes that come, within the budget.
 * Near the end the pieces shrink: once the rest is less than
 * `lanes` chunks, a piece is the rest divided by `lanes` (the connections
 * wanted), rounded up to SEG_ALIGN, at least SEG_PIECE_MIN, so the lanes
 * end together and no split (which closes a connection with its bytes in
 * flight) is needed to even out the end. The end of the next chunk to cut
 * at tail, when segplan_next_chunk found none in the table: tail + the
 * piece, or total for the last one; 0 when none is to be cut (all cut, or
 * tail at or past `limit`, the same budget as segplan_next_chunk's). */
uint64_t segplan_tail_cut(uint64_t tail, uint64_t total, uint64_t chunk, uint64_t limit,
                          unsigned lanes);

/* The chunk size a lane asks segplan_tail_cut for: SEG_FIRST_PIECE for its
 * first chunk, twice its last for each next one, up to `chunk`
 * (segment_chunk_size); `done`: the chunks the lane received whole. The
 * ends shrink, and so do the starts: a new connection's rate is unknown
 * (the origin may cap it, TCP is still in slow start), so it is not handed
 * 16 MiB at once. A lane that the growth did not pay for (segplan_grow)
 * is left idle after a short chunk rather than a long one, and a download
 * that ramps up has chunks for its new connections. The extra requests
 * cost a round trip each on a connection kept alive: 3 per lane at 16 MiB. */
uint64_t segplan_lane_piece(uint64_t chunk, unsigned done);

/* Whether the download is at its end: every byte cut from the tail and no
 * chunk in the table free to take (whatever the budget). Only then is a
 * chunk split: a lane that the budget holds back waits for the hash (a
 * split would not move the hash on, and would cost the split lane's
 * connection and its bytes in flight, paid twice by the origin). */
int segplan_at_the_end(seg_chunk_t *const *chunks, size_t n, const seg_chunk_t *main, uint64_t tail,
                       uint64_t total);

/* The most chunks one span of a resumed partial (a gap between its
 * recorded ranges) is cut into at once: ranges are recorded within the
 * budget of the prefix, so more means a record not to be trusted. */
#define SEG_SPAN_MAX 65536

/* A split: chunk `at` ends at `mid` from now on; [mid, its old end) is a
 * new chunk, inserted after it by the caller. */
typedef struct seg_split {
    size_t at;
    uint64_t mid; /* a multiple of SEG_ALIGN, strictly inside what is left of the chunk */
} seg_split_t;

/* Near the end, when no chunk is left to hand out: which chunk an idle
 * lane halves (segplan_at_the_end only). Among the chunks whose lane has a request in flight and a
 * rate, the one with the most left (the first of equals), if the rest
 * takes its lane at least SEG_SPLIT_MIN_MS; worth it only with at least
 * 2 * SEG_SPLIT_MIN left. A split costs the bytes already in flight past
 * the cut (the lane's connection is closed there: on a fast link, socket
 * buffers of several MiB) and gains half the chunk's time left, hence the
 * rule on its lane's rate. The cut is the middle of what is left, rounded
 * down to SEG_ALIGN. 1 with *out set, 0 when no chunk is worth it.
 * lanes: indexed by the chunks' lane numbers. */
int segplan_split(seg_chunk_t *const *chunks, size_t n, const seg_lane_view_t *lanes,
                  seg_split_t *out);

/* Whether the lane on chunk c (c->lane, which must be set), c being the
 * chunk the hash waits for, is far slower than the others: judged after
 * SEG_SLOW_MIN_MS on its request, with at least two other lanes with a
 * rate to compare with (busy or idle: an idle lane's is its last chunk's),
 * its rate below their median / SEG_SLOW_FACTOR, and the rest of c would
 * still take it over SEG_SLOW_MIN_MS. Once per chunk (c->slow_retried).
 * A connection the server (or the path) serves slowly holds up the whole
 * download while a new one would be served like the others. *median is
 * set (for the log) whenever the others were compared. */
int segplan_far_slower(const seg_chunk_t *c, const seg_lane_view_t *lanes, unsigned nlanes,
                       uint64_t now, uint64_t *median);

/* How many connections a download wants, as TCP finds its window: slow
 * start, then linear growth, then none.
 *
 * SEG_RAMP_DOUBLING: twice the connections each round (at most max) while
 * the total rate grows about in proportion: an origin that caps each
 * connection (as CDNs do, at some 16 MiB/s) is used by 16 connections
 * within a few rounds, not 12 seconds of one more each. SEG_RAMP_LINEAR:
 * a doubling did not pay: back to the count before it, plus one, and one
 * more each round that pays (a limit between the two: a total cap, a
 * link). SEG_RAMP_OUT: a step did not pay (back to the count before it),
 * or the server said too many (429, 503: one fewer): the count stays, for
 * good.
 *
 * A round is judged on the rate the connections of the last step bring
 * in their first MiBs: it waits until every wanted connection has a
 * request in flight and each has received a byte since the step (their
 * connects, TLS handshakes and first round trips are not counted), then
 * measures the total rate until each has received SEG_RAMP_BYTES more or
 * SEG_RAMP_MS went by, whichever comes first. 2 MiB covers a new
 * connection's TCP slow start up to 16 MiB/s at a 50 ms round trip, so
 * its rate is judged near what it will carry; the time bound ends the
 * round early when connections are slow (1 MiB/s: a window of 500 ms),
 * where that slow start is short. A pause (backpressure, max_rate) or a
 * late loop restarts the round: a rate that hubd held back says nothing of
 * the origin, and a download that hubd itself paces keeps its count.
 *
 * A step paid when the rate grew by at least a quarter of what the added
 * connections would add in proportion, and by at least a tenth.
 * Per-connection caps give about all of the proportion (a little less
 * while the new connections leave TCP slow start); a shared bottleneck
 * (one connection fills the link, or hubd's CPU is the bound) gives about
 * none, give or take a short window's noise of a few percent: a quarter
 * lies well between the two for a doubling (+25%). For one more of n it
 * is 1/(4n), under that noise: the tenth (the rule before slow start) is
 * the least a connection must add to be worth the origin's slot. */
typedef enum {
    SEG_RAMP_DOUBLING, /* slow start: twice the connections each round */
    SEG_RAMP_LINEAR,   /* a doubling did not pay: one more each round that pays */
    SEG_RAMP_OUT,      /* grown out: the count stays */
} seg_ramp_t;

typedef struct seg_growth {
    unsigned want;    /* connections wanted now */
    unsigned prev;    /* wanted before the last step, with rate `base`; 0: none yet */
    uint64_t base;    /* the total rate prev connections brought (bytes per second) */
    seg_ramp_t phase; /* how the next step grows */
    int measuring;    /* the round's window is open (else: waiting for every connection) */
    uint64_t t_win;   /* the window's start (ms) */
    uint64_t at_win;  /* the bytes received then */
    uint64_t rate;    /* the last round's total rate (bytes per second), for the log */
} seg_growth_t;

/* What segplan_grow reads, gathered by the caller on each progress tick. */
typedef struct seg_grow_in {
    uint64_t now;         /* ms */
    uint64_t received;    /* body bytes of the download so far, every connection's */
    unsigned connections; /* with a request in flight now, the main one included */
    uint64_t least;       /* the fewest bytes one of those received since the last mark */
    unsigned max;         /* max_connections_per_download */
    int disturbed;        /* paused, or the loop late, now or since the last call */
} seg_grow_in_t;

/* The start: SEG_START_CONNS connections (the main one included), at
 * most max; slow start. */
void segplan_grow_start(seg_growth_t *g, unsigned max);

/* Once per progress tick: waits, measures, judges a round and steps (see
 * above); nothing once grown out or at max. 1 when the caller is to mark:
 * count each connection's bytes (`least`) from now on (a step was taken,
 * a window opened, or a round restarts). */
int segplan_grow(seg_growth_t *g, const seg_grow_in_t *in);

/* The server said too many (a 429 or 503 on a connection: retry_decide's
 * `fewer`): one connection fewer (at least one), and no growth again. */
void segplan_throttled(seg_growth_t *g);

/* Fair shares of a host, so one user's segmented downloads cannot keep
 * another's waiting: whether a download may give one of
 * its lanes a chunk (keep that connection busy, or open one more). conns:
 * the download's connections now; want: as many as it wants; host_conns:
 * every download's connections to the host; host_waiting: the downloads
 * waiting for a first connection to it (queued, held by nothing else).
 * A download always keeps one connection (conns 0: yes); beyond that, only
 * below want and while the host has room after those waiting. So a
 * waiting download, whoever's it is, gets the connection that the next
 * lane to end its chunk gives back: no lane is added before it, and no
 * lane is cut mid-chunk (the bytes in flight would be fetched twice). */
int segplan_may_connect(unsigned conns, unsigned want, unsigned host_conns, unsigned host_waiting,
                        unsigned max_per_host);

#endif
