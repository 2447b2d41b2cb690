/* segments: one download over several connections.
 *
 * A download asks first for its first chunk (`Range: bytes=0-(chunk-1)`):
 * size and validator in one round trip. When the answer says the file is
 * longer than segment_min_size and has a validator, the rest is cut into
 * chunks of segment_chunk_size, one at a time as lanes take them (so the
 * length announced, checked first by the job, sizes nothing), and fetched
 * by lanes: each a transfer of its own (its own connection, kept alive
 * from chunk to chunk), asking for one chunk at a time in ascending order
 * with If-Range. The job's own
 * (main) transfer goes on with the first chunk, hashed from memory as
 * always; the lanes' bytes are written at their offsets and hashed later
 * from the page cache, as the contiguous written prefix grows
 * (pipeline.c). The commit waits for the hash to reach the end: no second
 * pass over the file.
 *
 * How many: 4 connections at first, twice as many each round of their
 * first MiBs while the total rate grows about in proportion, then one
 * more at a time (segplan_grow), up to max_connections_per_download and
 * max_per_host (every download's connections to the host); one fewer on a
 * 429 or 503 (after its Retry-After), and no growth after it. A lane's
 * first chunks are short (segplan_lane_piece). The host's connections are shared
 * fairly: while another download (another user's, say) waits for one, no
 * lane is added and a lane that ends its chunk takes no other, so the
 * waiting one starts within about one chunk's round trip
 * (segplan_may_connect). A lane is never cut mid-chunk. New chunks are handed out only
 * within segment_budget bytes of the hashed prefix, smaller near the end so
 * the lanes end together; only at the end (all cut and taken) does an idle
 * lane split the largest chunk still being fetched: cutting a request
 * closes its connection, and the origin's bytes in flight are paid twice.
 * The lane on the chunk the hash waits for, silent for
 * segment_stall_timeout (the download's pauses and a late loop not
 * counted), is dropped and its chunk asked for again from where it
 * stopped.
 *
 * Anything that says the ranges do not fit together (a 200 or 416 to a
 * range, another Content-Range, length or ETag) restarts the download from
 * byte 0 as one stream: bytes from several responses are trusted only
 * while they all agree.
 *
 * Segments reports to its job only through segs_ops_t (or by returning):
 * a failure, a restart, bytes taken, the body complete, the host's room,
 * connections given back, a lane's handle closed. The job's fields it
 * reads; its state it never changes. Each lane is a transfer owner
 * (transfer.h) and appends to the job's pipeline through its own cursor.
 *
 * Loop thread only. The job owns its segs_t (job->seg); each lane owns its
 * transfer and timer and is freed from the timer's close callback. */
#ifndef HUBD_SEGMENTS_H
#define HUBD_SEGMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "bufpool.h"

struct job;
typedef struct segs segs_t;
typedef struct seg_chunk seg_chunk_t;

/* What segments tells its job (owner: the job). */
typedef struct segs_ops {
    void (*fail)(struct job *job, const char *code, const char *msg);
    /* The ranges do not fit together: from byte 0, as one stream. */
    void (*restart)(struct job *job, const char *why);
    /* n body bytes came on a lane (max_rate). */
    void (*took)(struct job *job, size_t n);
    /* Every byte came (the lanes' sealed): the body is done. */
    void (*received_all)(struct job *job);
    /* The host's load: every download's connections to it, and the
     * downloads waiting for a first one (max_per_host, segplan_may_connect). */
    void (*host_load)(struct job *job, unsigned *conns, unsigned *waiting);
    /* Idle lanes gave connections back: queued downloads may start. */
    void (*released)(struct job *job);
    /* One of the job's handles (a lane's timer) is closed. */
    void (*handle_closed)(struct job *job);
} segs_ops_t;

/* The end (exclusive) of the range a new download asks for first, or 0 to
 * ask for the whole file (segments off, a mirror, a resumed partial, or a
 * download that fell back to one stream). */
uint64_t segs_first_end(const struct job *job);

/* The main transfer took the first response head, to a request for
 * [0, first_end): segments start when the file is long enough and has a
 * validator (job->seg is set; the pipeline is told). 0, or -ENOMEM (the
 * download then goes on as one stream). */
int segs_begin(struct job *job, const segs_ops_t *ops);

/* The chunk the main transfer's bytes belong to, NULL when not segmented
 * (or the main transfer let go of it). */
seg_chunk_t *segs_main_chunk(const struct job *job);
/* n more bytes of the main transfer's chunk arrived. */
void segs_main_body(struct job *job, size_t n);

/* The main transfer's response ended (its chunk whole, or cut short: the
 * lanes fetch what is missing). The caller moves the pipeline on. */
void segs_main_ended(struct job *job);
/* The main transfer failed: its chunk goes to the lanes from where it
 * stopped. Returns 1 when so (the failure is handled), 0 when the job is
 * to fail. */
int segs_main_failed(struct job *job, const char *code, const char *msg);

/* bytes of the chunk tag (a pipeline batch's tag) are on disk, in file
 * order per chunk. */
void segs_chunk_written(void *tag, uint64_t bytes);
/* Bytes on disk from byte 0 without a gap. */
uint64_t segs_prefix(const struct job *job);
/* Every byte received (the download's body is complete). */
int segs_received_all(const struct job *job);
/* Hands what the lanes sealed on to the pipeline (pipeline_pump), then
 * hands out chunks, adds, splits and replaces lanes; from job_step, the
 * progress tick and each lane's change. */
void segs_pump(struct job *job);
/* The progress tick: the rate, growth and stalls. */
void segs_tick(struct job *job, uint64_t now);
/* Seals the lanes' batches that are pipeline_batch_stale; returns how many
 * (the caller pumps). */
int segs_seal_stale(struct job *job, uint64_t now);
/* Backpressure for every lane. */
void segs_set_paused(struct job *job, int paused);
/* Bytes written in all (every chunk's), for checkpoints. */
uint64_t segs_written_sum(const struct job *job);
/* The finished ranges past the written prefix, "a-b,..." (db.h; malloc'd),
 * or NULL when there are none (or no memory: then only the prefix is
 * recorded, which is safe). */
char *segs_ranges(const struct job *job);
/* A recorded partial with ranges past its re-hashed prefix (job->resume_len,
 * the pipeline's received there): chunks for the gaps (job->seg set, the
 * pipeline told of the ranges). 1 when so: the job goes to BODY and calls
 * segs_pump; 0 when it goes on as one stream from resume_len. */
int segs_resume(struct job *job, const char *ranges, const segs_ops_t *ops);

/* Connections open for the download now, the main one included. */
unsigned segs_connections(const struct job *job);

/* The job fails or restarts: every lane's request dropped, timers stopped,
 * what they hold sealed. */
void segs_stop(struct job *job);
/* No pool item of the job in flight: the lanes close (their memory goes
 * in the close callbacks, counted in job->handles_open), the chunks and
 * segs_t go, job->seg is NULL. */
void segs_reset(struct job *job);

#endif
