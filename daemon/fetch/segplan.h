/* segplan: the decisions of a download over several connections
 * (segments.h), as pure functions of the chunk table and the lanes' rates.
 *
 * Which chunk an idle lane takes next, which chunk is split near the end
 * and where, whether the lane the hash waits for is far slower than the
 * others, and when one more connection is wanted. segments.c gathers what
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
#define SEG_GROW_MS 1000            /* one more connection at most this often... */
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

/* How many connections a download wants, and how it got there. */
typedef struct seg_growth {
    unsigned want;         /* connections wanted now */
    int grown_out;         /* the rate stopped growing with more connections */
    uint64_t t_grow;       /* when want last changed (ms) */
    uint64_t rate_at_grow; /* the total rate then (bytes per second) */
} seg_growth_t;

/* The start: SEG_START_CONNS connections (the main one included), at
 * most max. */
void segplan_grow_start(seg_growth_t *g, unsigned max, uint64_t now);

/* Once per rate window (the total rate just measured): while every wanted
 * connection is busy (connections >= want), not paused, below max and at
 * least SEG_GROW_MS after the last change, one more connection is wanted,
 * as long as the last one added a tenth to the rate; once it did not, the
 * download is grown out and stays at what it has. */
void segplan_grow(seg_growth_t *g, uint64_t rate, uint64_t now, unsigned connections, unsigned max,
                  int paused);

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
