/* pipeline: a download's body on its way to disk, as an object.
 *
 * Body slices point into pooled read buffers (bufpool.h); appended through
 * a cursor, they are grouped into batches of about read_buffer_size. Each
 * batch goes through two work items in the pool: a hash item (SHA-256,
 * sequential, owns sha) and a write item (pwritev at the batch's offset,
 * owns fd). At most one hash item and one write item are in flight, so
 * neither needs a lock, and the two run on different cores: measured on
 * the project machine, hashing (~1.8 GB/s with SHA-NI) and page-cache
 * writes cost about the same, so doing both in one item would halve the
 * throughput. A batch is freed when both have seen it. Above max_inflight
 * queued bytes the pipeline asks its owner to stop reading, and to read
 * again at half of it. Checkpoints (fdatasync, then the partials row)
 * bound what a crash can cost.
 *
 * Two kinds of cursor append: the main one (p->main), whose bytes follow
 * each other from byte 0 and are hashed from memory; and a segmented
 * download's lanes' (segments.h), whose batches are written at their own
 * offsets and hashed later: a prefix hash item reads them back from the
 * page cache once the bytes before them are on disk without a gap (the
 * owner's prefix op says how far) and the main cursor's are hashed.
 *
 * The pipeline is the one writer of its counters. It reports to its owner
 * (the job) only through pipeline_ops_t, never by calling up: a pool item
 * that came back, a tagged batch on disk, backpressure. It never changes
 * the owner's state: the owner decides what a report means.
 *
 * Loop thread, except the fields a pool item owns while in flight (each
 * says which). */
#ifndef HUBD_PIPELINE_H
#define HUBD_PIPELINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <uv.h>

#include "bufpool.h"
#include "config.h"
#include "db.h"
#include "sha256.h"
#include "store.h"

#define BATCH_MAX_IOV 64
/* A batch's first room, in the batch itself: a slow stream's batch holds a
 * few small buffers, and a fast one's few full ones (reads into one buffer
 * are one iovec); more is allocated up to BATCH_MAX_IOV. 1,000 slow
 * downloads held 2 MB of batches of BATCH_MAX_IOV. */
#define BATCH_FIRST_IOV 4
#define WORK_MAX_BATCHES 32 /* batches one work item takes at most */
/* A slow stream's batch is handed on after this: its buffers are held no
 * longer (a paced sender's bursts a second apart did not overlap then,
 * where at a second they did: 1,000 downloads at 8 KiB/s peaked at 28 MiB
 * against 35 MiB). */
#define BATCH_MAX_AGE_MS 500
#define WRITEBACK_CHUNK (8u << 20) /* start disk writeback every 8 MiB */
/* A checkpoint (fdatasync, then the partials row) once CHECKPOINT_BYTES are
 * on disk and not yet durable, or CHECKPOINT_MS have passed with at least
 * CHECKPOINT_MIN_BYTES. What a crash can cost (besides max_inflight, and a
 * slow stream's BATCH_MAX_AGE_MS in memory) is then the least of 32 MiB and
 * a quarter second of transfer, but not less than 64 KiB: under 1.2x of a
 * 256 MiB file, while a fast link pays one fdatasync of data already given
 * to writeback (WRITEBACK_CHUNK) per 32 MiB, and a slow one one per 64 KiB,
 * not one per write: fetching 64 KiB again costs less than the fdatasyncs
 * and rows that would keep it (1,000 downloads at 8 KiB/s spent a third of
 * hubd's CPU in them). */
#define CHECKPOINT_BYTES (32u << 20)
#define CHECKPOINT_MS 250
#define CHECKPOINT_MIN_BYTES (64u << 10)
#define REHASH_CHUNK (1u << 20)

typedef struct batch {
    struct batch *next;
    uint64_t offset; /* file offset of the first byte */
    uint64_t t0;     /* loop time of its first bytes (pipeline_batch_stale) */
    size_t bytes;    /* sum of iov lengths */
    int niov, nbufs;
    int room;            /* entries iov and bufs have: BATCH_FIRST_IOV or BATCH_MAX_IOV */
    struct iovec *iov;   /* iov_in, or an allocation that also holds bufs */
    buf_t **bufs;        /* one reference each: bufs_in, or in iov's allocation */
    int hashed, written; /* pipeline stages done */
    void *tag;           /* its cursor's tag when sealed (a chunk), else NULL */
    int from_file;       /* a lane's: hashed later from the file, not from memory */
    struct iovec iov_in[BATCH_FIRST_IOV];
    buf_t *bufs_in[BATCH_FIRST_IOV];
} batch_t;

/* Where appended bytes go: the batch being filled. */
typedef struct pipeline_cursor {
    batch_t *cur; /* being filled, or NULL */
    uint64_t off; /* a lane's: the file offset of cur's first byte */
    void *tag;    /* handed to pipeline_ops_t.tag_written with its batches (a chunk) */
} pipeline_cursor_t;

/* The pool items, one bit each in p->items. */
enum {
    PIPE_HASH = 1u << 0,  /* hash item (or prefix hash item): owns sha */
    PIPE_WRITE = 1u << 1, /* write item: owns fd and the write hand-over fields */
    PIPE_SYNC = 1u << 2,  /* checkpoint item: fdatasync beside the write item, ckpt */
};

/* What a pool item that came back reports: an error (code as in
 * PROTOCOL.md, NULL: none) and whether the waiters are to hear that the
 * file grew or became more durable. */
typedef struct pipeline_done {
    unsigned item; /* PIPE_* */
    const char *code;
    const char *msg;
    int grew; /* on_disk or durable moved: tell the waiters */
} pipeline_done_t;

typedef struct pipeline_ops {
    /* A pool item came back, its effects on the counters applied. The
     * owner decides what comes next (and moves the pipeline on). */
    void (*item_done)(void *owner, const pipeline_done_t *d);
    /* A batch of a tagged cursor is on disk (in write order per tag). */
    void (*tag_written)(void *owner, void *tag, uint64_t bytes);
    /* Bytes on disk from byte 0 without a gap: asked while segmented. */
    uint64_t (*prefix)(void *owner);
    /* Backpressure: stop (1) or start again (0) reading. */
    void (*set_paused)(void *owner, int paused);
} pipeline_ops_t;

typedef struct pipeline {
    uv_loop_t *loop;
    const hubd_config_t *cfg;
    store_t *store;
    db_t *db;
    bufpool_t *pool;
    uint64_t *from_origin; /* the jobs' bytes_from_origin counter */
    const int64_t *total;  /* the file's length as the owner knows it (-1 unknown) */
    const pipeline_ops_t *ops;
    void *owner;
    /* What the checkpoint item records its row under (the owner's). */
    uint64_t part_id;
    const char *key, *cred_tag;

    pipeline_cursor_t main; /* the bytes from byte 0 (the job's own transfer) */
    unsigned items;         /* PIPE_*: items in flight */
    int segmented;          /* lanes append too: the prefix hash follows ops->prefix */
    int paused;             /* backpressure asked the owner to stop reading */
    int tmp_made;           /* a write item has run: tmp/<part_id>.part may exist */
    atomic_int abandoned;   /* the download failed: a checkpoint in flight records nothing */

    /* Counters: written only here. */
    uint64_t received;     /* body bytes appended */
    uint64_t sealed;       /* bytes in the main cursor's sealed batches (its next offset) */
    uint64_t queued_bytes; /* bytes in batches not yet freed */
    uint64_t hashed;       /* bytes through sha, from byte 0 */
    uint64_t written;      /* bytes written without a gap from 0 (the write item's) */
    uint64_t flushed;      /* bytes already given to writeback */
    uint64_t on_disk;      /* written, as of the last write item back */
    uint64_t durable;      /* bytes fdatasync'ed and recorded (the loop's copy) */
    uint64_t durable_sum;  /* segmented: bytes written in all, as of the last checkpoint */
    uint64_t t_ckpt;       /* uv_now of the last checkpoint started */

    batch_t *head, *tail;              /* sealed, not yet both hashed and written */
    batch_t *hash_next, *write_next;   /* first sealed batch not yet given to each item */
    batch_t *hash_first, *write_first; /* what the item in flight covers */
    int hash_count, write_count;
    uv_work_t hash_work, write_work, sync_work;

    sha256_ctx_t sha;    /* owned by the hash item in flight, else the loop */
    int fd;              /* the partial; owned by the write item in flight */
    int write_err;       /* first write error (negative errno) */
    int space_short;     /* the write item found the floor would be crossed */
    int truncate_file;   /* the next write item empties the partial first (and clears it) */
    int fresh_file;      /* a write item made (or emptied) the file: unless resumed since
                          * (or segmented), it ends at `written` (owned as fd is) */
    int64_t total_hint;  /* the length as of the last write item (its copy) */
    uint64_t floor_hint; /* min_free_space then (the write item's copy) */
    unsigned floor_pct_hint;
    int hd_fd; /* the prefix hash item's file, range and outcome */
    uint64_t hd_from, hd_len;
    int hd_rc;
    int sync_err;       /* the checkpoint's fdatasync failed (negative errno) */
    db_partial_t ckpt;  /* what its row records (copies), owned by that item */
    uint64_t ckpt_sum;  /* segmented: bytes written in all, as the checkpoint saw */
    uint64_t ckpt_done; /* what the checkpoint made durable, 0 if it did not */
    int ckpt_saved;     /* the checkpoint item recorded its row */
} pipeline_t;

/* Idle, empty, with no file yet; the caller then sets part_id, key,
 * cred_tag (the owner's, kept for the checkpoint rows) and total. */
void pipeline_init(pipeline_t *p, uv_loop_t *loop, const hubd_config_t *cfg, store_t *store,
                   db_t *db, bufpool_t *pool, uint64_t *from_origin, const pipeline_ops_t *ops,
                   void *owner);

/* The one way bytes come in: n bytes at ptr, in the pooled read buffer buf
 * (a reference held while a batch has them), through cursor c (p->main,
 * or a lane's: off is then the file offset of ptr). A full batch is sealed
 * and the pipeline moved on; above max_inflight queued bytes what c holds
 * is handed on and the owner asked to stop reading. 0, or -ENOMEM. */
int pipeline_append(pipeline_t *p, pipeline_cursor_t *c, uint64_t off, buf_t *buf, const char *ptr,
                    size_t n);
/* The download starts now: checkpoints are due from now on. */
void pipeline_clock(pipeline_t *p, uint64_t now);
/* Hands what c holds on as a sealed batch (nothing if it holds nothing). */
void pipeline_seal(pipeline_t *p, pipeline_cursor_t *c);
/* Segmented: lanes append too, and the prefix hash follows ops->prefix.
 * What the main cursor holds is sealed first; its batches from now on
 * carry main_tag (NULL: the main cursor let go of its chunk). */
void pipeline_segmented(pipeline_t *p, void *main_tag);
/* Seals c's batch when pipeline_batch_stale; returns 1 if it did. */
int pipeline_seal_stale(pipeline_t *p, pipeline_cursor_t *c, uint64_t now);
/* Frees the batches both items are done with, starts the items that can
 * start, and asks the owner to read again below half of max_inflight. */
void pipeline_pump(pipeline_t *p);
/* No batch left, none being filled by the main cursor, no item in flight. */
int pipeline_drained(const pipeline_t *p);
/* Frees every batch, sealed or not. Only with no hash or write item in
 * flight (they point into the batches). */
void pipeline_drop(pipeline_t *p);
/* From byte 0 again (no item in flight, batches dropped): the hash and
 * the counters start over, and the next write item empties the file. */
void pipeline_restart(pipeline_t *p);
/* A recorded partial re-hashed (its sha now p->sha): its first len bytes
 * are in fd, durable, and the next bytes follow them. fd -1: it could not
 * be, and the hash starts over (the partial's name is still to go). */
void pipeline_resumed(pipeline_t *p, int fd, uint64_t len);
/* A resumed partial's ranges past its prefix were received earlier
 * (extra bytes); prefix: the bytes without a gap from 0 now. */
void pipeline_resumed_ranges(pipeline_t *p, uint64_t extra, uint64_t prefix);

/* A checkpoint is due now and none is in flight: bytes on disk in all
 * (on_disk_sum: the lanes' too when segmented) not yet durable, as
 * pipeline_checkpoint_due says. */
int pipeline_checkpoint_wanted(const pipeline_t *p, uint64_t on_disk_sum, uint64_t durable_sum,
                               uint64_t now);
/* Starts the checkpoint item: fdatasync, then row (taken: its strings are
 * freed when the item is back) is recorded with durable = on_disk. */
void pipeline_checkpoint(pipeline_t *p, db_partial_t *row, uint64_t on_disk_sum, uint64_t now);

/* The free-space floor of a file system: min_free_space, or its share. */
uint64_t pipeline_space_floor(const struct statvfs *v, uint64_t bytes, unsigned pct);
/* Reads back len bytes of fd from byte from into sha: a recorded partial
 * before resuming it, a segmented download's prefix. 0 or negative errno
 * (-ESTALE: the file is shorter). Pool thread. */
int pipeline_hash_file(int fd, uint64_t from, uint64_t len, sha256_ctx_t *sha);

/* An empty batch's room: its own BATCH_FIRST_IOV entries. */
void pipeline_batch_init(batch_t *b);
/* Room for one more iovec and buffer in b (not full: pipeline_batch_full):
 * its entries move to an allocation of BATCH_MAX_IOV when its own are
 * taken. 0, or -ENOMEM. */
int pipeline_batch_reserve(batch_t *b);
/* Frees what pipeline_batch_reserve allocated (not b, nor its references). */
void pipeline_batch_release(batch_t *b);

/* The pipeline's decisions, pure functions of their arguments: */
/* Appends n bytes at p, in buf, to b: one iovec with the last one when they
 * follow it in memory. Returns 1 when buf is new to b: the caller takes a
 * reference for it. b must have room (pipeline_batch_reserve). */
int pipeline_batch_add(batch_t *b, const buf_t *buf, const char *p, size_t n);
/* Whether b is to be sealed: about read_buffer_size bytes, or no room for
 * another iovec or buffer. */
int pipeline_batch_full(const batch_t *b, size_t read_buffer_size);
/* Whether b (NULL: none) holds bytes that came BATCH_MAX_AGE_MS or more
 * before now: a slow stream's batch, handed on so that its buffers go back
 * to the pool instead of waiting for read_buffer_size bytes. */
int pipeline_batch_stale(const batch_t *b, uint64_t now);
/* Backpressure with hysteresis: stop reading above max_inflight queued
 * bytes, read again at half of it. */
int pipeline_should_pause(uint64_t queued, size_t max_inflight);
int pipeline_should_resume(uint64_t queued, size_t max_inflight);
/* A checkpoint is due: bytes on disk not yet durable, and CHECKPOINT_BYTES
 * of them or CHECKPOINT_MS since the last one (now, t_ckpt: uv_now). */
int pipeline_checkpoint_due(uint64_t on_disk, uint64_t durable, uint64_t now, uint64_t t_ckpt);
/* Start writeback of what was written since `flushed`: every WRITEBACK_CHUNK. */
int pipeline_writeback_due(uint64_t written, uint64_t flushed);
/* Hands the sealed batches from *next on (at most WORK_MAX_BATCHES) to one
 * work item: *first is its first, *next moves past its last. Returns how many. */
int pipeline_take_batches(batch_t **next, batch_t **first);
/* The room a write item needs: its count batches from first, or the rest of
 * a file of total bytes from first's offset when that is more. */
uint64_t pipeline_room_wanted(const batch_t *first, int count, int64_t total);

#endif
