/* Unit tests for the decisions of daemon/fetch/pipeline.c, pure functions
 * of their arguments: batching (iovec merging, when a batch is sealed, how
 * many batches one work item takes), backpressure (pause and resume with
 * hysteresis), checkpoints, writeback and the room a write item needs. */
#include "job_internal.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static batch_t *batch_new(uint64_t offset, size_t bytes)
{
    batch_t *b = calloc(1, sizeof *b);
    ck_assert_ptr_nonnull(b);
    pipeline_batch_init(b);
    b->offset = offset;
    b->bytes = bytes;
    return b;
}

/* A pipeline on a loop of its own, with no store or database: what the
 * tests below hand it are batches already made. */
typedef struct pipe_fixture {
    uv_loop_t loop;
    hubd_config_t cfg;
    bufpool_t pool;
    uint64_t from_origin;
    int64_t total;
    pipeline_ops_t ops;
    pipeline_t p;
} pipe_fixture_t;

static void pipe_open(pipe_fixture_t *f, void (*item_done)(void *, const pipeline_done_t *))
{
    memset(f, 0, sizeof *f);
    ck_assert_int_eq(uv_loop_init(&f->loop), 0);
    ck_assert_int_eq(config_defaults(&f->cfg), 0);
    bufpool_init(&f->pool, f->cfg.read_buffer_size, 8);
    f->total = -1;
    f->ops.item_done = item_done;
    pipeline_init(&f->p, &f->loop, &f->cfg, NULL, NULL, &f->pool, &f->from_origin, &f->ops, NULL);
    f->p.total = &f->total;
}

static void pipe_close(pipe_fixture_t *f)
{
    bufpool_destroy(&f->pool);
    ck_assert_int_eq(uv_loop_close(&f->loop), 0);
    config_free(&f->cfg);
}

START_TEST(pipeline_batch_merges_contiguous_slices)
{
    static char mem1[4096], mem2[4096];
    buf_t b1 = {.data = mem1}, b2 = {.data = mem2};
    batch_t *b = batch_new(0, 0);

    ck_assert_int_eq(pipeline_batch_add(b, &b1, mem1, 100), 1); /* new buffer: a reference */
    ck_assert_int_eq(pipeline_batch_add(b, &b1, mem1 + 100, 50), 0);
    ck_assert_int_eq(b->niov, 1); /* follows the last slice: one iovec */
    ck_assert_uint_eq(b->iov[0].iov_len, 150);
    ck_assert_int_eq(pipeline_batch_add(b, &b1, mem1 + 400, 10), 0);
    ck_assert_int_eq(b->niov, 2); /* a gap: another iovec, the same buffer */
    ck_assert_int_eq(b->nbufs, 1);
    ck_assert_int_eq(pipeline_batch_add(b, &b2, mem2, 20), 1);
    ck_assert_int_eq(b->nbufs, 2);
    ck_assert_int_eq(b->niov, 3);
    ck_assert_uint_eq(b->bytes, 180);
    free(b);
}
END_TEST

START_TEST(pipeline_batch_grows_past_its_own_room)
{
    static char mem[16][4096];
    buf_t bufs[16];
    batch_t *b = batch_new(0, 0);
    ck_assert_int_eq(b->room, BATCH_FIRST_IOV);
    for (int i = 0; i < 16; i++) {
        bufs[i] = (buf_t){.data = mem[i]};
        ck_assert_int_eq(pipeline_batch_reserve(b), 0);
        ck_assert_int_eq(pipeline_batch_add(b, &bufs[i], mem[i] + i, 100 + (size_t)i), 1);
        /* Its own room until that is taken, then BATCH_MAX_IOV elsewhere. */
        ck_assert_int_eq(b->room, i < BATCH_FIRST_IOV ? BATCH_FIRST_IOV : BATCH_MAX_IOV);
        ck_assert(b->iov == b->iov_in ? i < BATCH_FIRST_IOV : i >= BATCH_FIRST_IOV);
    }
    ck_assert_int_eq(b->niov, 16);
    ck_assert_int_eq(b->nbufs, 16);
    for (int i = 0; i < 16; i++) { /* each kept across the move */
        ck_assert_ptr_eq(b->iov[i].iov_base, mem[i] + i);
        ck_assert_uint_eq(b->iov[i].iov_len, 100 + (size_t)i);
        ck_assert_ptr_eq(b->bufs[i], &bufs[i]);
    }
    pipeline_batch_release(b);
    ck_assert_ptr_eq(b->iov, b->iov_in);
    free(b);
}
END_TEST

START_TEST(pipeline_batch_full_at_size_or_slots)
{
    batch_t *b = batch_new(0, 0);
    b->bytes = 65535;
    ck_assert(!pipeline_batch_full(b, 65536));
    b->bytes = 65536;
    ck_assert(pipeline_batch_full(b, 65536));
    b->bytes = 10;
    b->niov = BATCH_MAX_IOV - 1;
    ck_assert(!pipeline_batch_full(b, 65536));
    b->niov = BATCH_MAX_IOV;
    ck_assert(pipeline_batch_full(b, 65536));
    b->niov = 1;
    b->nbufs = BATCH_MAX_IOV;
    ck_assert(pipeline_batch_full(b, 65536));
    free(b);
}
END_TEST

START_TEST(pipeline_a_slow_batch_is_stale_after_its_age)
{
    ck_assert(!pipeline_batch_stale(NULL, 5000));
    batch_t *b = batch_new(0, 0);
    b->t0 = 1000;
    ck_assert(!pipeline_batch_stale(b, 1000 + BATCH_MAX_AGE_MS)); /* nothing in it */
    b->bytes = 10;
    ck_assert(!pipeline_batch_stale(b, 1000 + BATCH_MAX_AGE_MS - 1));
    ck_assert(pipeline_batch_stale(b, 1000 + BATCH_MAX_AGE_MS));
    free(b);
}
END_TEST

START_TEST(pipeline_take_batches_caps_one_item)
{
    batch_t *head = NULL, **tail = &head;
    for (int i = 0; i < WORK_MAX_BATCHES + 5; i++) {
        *tail = batch_new((uint64_t)i * 10, 10);
        tail = &(*tail)->next;
    }
    batch_t *next = head, *first = NULL;
    ck_assert_int_eq(pipeline_take_batches(&next, &first), WORK_MAX_BATCHES);
    ck_assert_ptr_eq(first, head);
    ck_assert_uint_eq(next->offset, (uint64_t)WORK_MAX_BATCHES * 10);
    ck_assert_int_eq(pipeline_take_batches(&next, &first), 5);
    ck_assert_ptr_null(next);
    ck_assert_int_eq(pipeline_take_batches(&next, &first), 0);
    while (head) {
        batch_t *b = head;
        head = b->next;
        free(b);
    }
}
END_TEST

START_TEST(pipeline_backpressure_has_hysteresis)
{
    size_t max = 8u << 20;
    ck_assert(!pipeline_should_pause(max, max)); /* at the bound: still reading */
    ck_assert(pipeline_should_pause(max + 1, max));
    ck_assert(!pipeline_should_resume(max / 2 + 1, max)); /* not before half is gone */
    ck_assert(pipeline_should_resume(max / 2, max));
    ck_assert(pipeline_should_resume(0, max));
}
END_TEST

START_TEST(pipeline_checkpoint_by_bytes_or_time)
{
    ck_assert(!pipeline_checkpoint_due(100, 100, 10000, 0)); /* nothing new */
    ck_assert(!pipeline_checkpoint_due(50, 100, 10000, 0));
    ck_assert(!pipeline_checkpoint_due(100 + CHECKPOINT_MIN_BYTES, 100, CHECKPOINT_MS - 1,
                                       0)); /* too soon */
    ck_assert(pipeline_checkpoint_due(100 + CHECKPOINT_MIN_BYTES, 100, CHECKPOINT_MS, 0));
    /* Fewer bytes than CHECKPOINT_MIN_BYTES, however long: a fsync and a
     * row cost more than fetching them again (a slow download's 4 KiB a
     * write made 1,000 downloads at 8 KiB/s spend a third of hubd's CPU in
     * fdatasync). */
    ck_assert(!pipeline_checkpoint_due(99 + CHECKPOINT_MIN_BYTES, 100, 3600 * 1000, 0));
    ck_assert(pipeline_checkpoint_due(CHECKPOINT_BYTES, 0, 1, 0)); /* enough bytes */
    ck_assert(!pipeline_checkpoint_due(CHECKPOINT_BYTES - 1, 0, 1, 0));
}
END_TEST

START_TEST(pipeline_writeback_every_chunk)
{
    ck_assert(!pipeline_writeback_due(WRITEBACK_CHUNK - 1, 0));
    ck_assert(pipeline_writeback_due(WRITEBACK_CHUNK, 0));
    ck_assert(!pipeline_writeback_due(3 * WRITEBACK_CHUNK - 1, 2 * WRITEBACK_CHUNK));
}
END_TEST

START_TEST(pipeline_room_for_the_rest_of_the_file)
{
    batch_t *a = batch_new(1000, 300), *b = batch_new(1300, 200);
    a->next = b;
    ck_assert_uint_eq(pipeline_room_wanted(a, 2, -1), 500); /* unknown length: the batches */
    ck_assert_uint_eq(pipeline_room_wanted(a, 1, -1), 300);
    ck_assert_uint_eq(pipeline_room_wanted(a, 2, 1400), 500);   /* the batches are more */
    ck_assert_uint_eq(pipeline_room_wanted(a, 2, 10000), 9000); /* the rest of the file */
    free(a);
    free(b);
}
END_TEST

/* A lane's batch comes right after the last batch a hash item took: the
 * hash skips it (it is hashed later, from the file), and once it is written
 * it is freed. The pipeline must not go on pointing at it: it did, and one
 * segmented download in about twenty crashed on loopback (a use after free
 * in submit_work, in older builds too). */
START_TEST(pipeline_frees_a_lane_batch_the_hash_would_skip)
{
    pipe_fixture_t f;
    pipe_open(&f, NULL); /* nothing is reported here */

    batch_t *lane = batch_new(1 << 20, 4096);
    lane->from_file = lane->hashed = lane->written = 1; /* a lane's, on disk */
    f.p.head = f.p.tail = f.p.hash_next = lane;         /* where the last hash item left it */
    f.p.queued_bytes = 4096;
    pipeline_pump(&f.p);
    ck_assert_ptr_null(f.p.head);
    ck_assert_ptr_null(f.p.hash_next);
    ck_assert_ptr_null(f.p.write_next);
    ck_assert_uint_eq(f.p.queued_bytes, 0);
    ck_assert_uint_eq(f.p.items, 0); /* nothing left to hash or write */

    pipe_close(&f);
}
END_TEST

static int items_back;
static void count_item(void *owner, const pipeline_done_t *d)
{
    (void)owner;
    (void)d;
    items_back++;
}

/* A batch of 16 KiB or less is hashed on the loop as the pipeline pumps,
 * in order, with no pool item (a small file's body then needs only its
 * write item); a larger one goes to a hash item; and the hash is the same
 * as over the bytes in one piece. */
START_TEST(pipeline_hashes_a_small_batch_on_the_loop_and_a_large_one_in_an_item)
{
    pipe_fixture_t f;
    pipe_open(&f, count_item);
    static char data[4096 + 65536];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)(i * 7 + 3);

    batch_t *small = batch_new(0, 4096), *large = batch_new(4096, 65536);
    small->iov[0] = (struct iovec){data, 4096};
    large->iov[0] = (struct iovec){data + 4096, 65536};
    small->niov = large->niov = 1;
    small->written = large->written = 1; /* no write item here */
    f.p.head = f.p.hash_next = small;
    f.p.tail = small;
    f.p.queued_bytes = 4096;
    pipeline_pump(&f.p);
    ck_assert_uint_eq(f.p.hashed, 4096);
    ck_assert_uint_eq(f.p.items, 0); /* on the loop */
    ck_assert_ptr_null(f.p.head);    /* hashed and written: freed in the same pump */

    f.p.head = f.p.tail = f.p.hash_next = large;
    f.p.queued_bytes = 65536;
    pipeline_pump(&f.p);
    ck_assert_uint_eq(f.p.items, PIPE_HASH); /* too large for the loop */
    ck_assert_uint_eq(f.p.hashed, 4096);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(items_back, 1);
    ck_assert_uint_eq(f.p.hashed, 4096 + 65536);
    pipeline_pump(&f.p);
    ck_assert_ptr_null(f.p.head);

    uint8_t got[32], want[32];
    sha256_final(&f.p.sha, got);
    sha256_ctx_t one;
    sha256_init(&one);
    sha256_update(&one, data, sizeof data);
    sha256_final(&one, want);
    ck_assert_mem_eq(got, want, 32);

    pipe_close(&f);
}
END_TEST

/* A large batch in a hash item, then a small last batch whose write item
 * comes back first: the one pump after the hash item (job_step's) hashes
 * it on the loop and frees it, and the pipeline is drained. It stayed at
 * the head (hashed after the frees), and the job, its body all in, never
 * reached its commit (found by review). */
START_TEST(pipeline_a_small_last_batch_written_before_its_hash_goes_in_one_pump)
{
    pipe_fixture_t f;
    pipe_open(&f, count_item);
    static char data[65536 + 4096];
    batch_t *large = batch_new(0, 65536), *small = batch_new(65536, 4096);
    large->iov[0] = (struct iovec){data, 65536};
    small->iov[0] = (struct iovec){data + 65536, 4096};
    large->niov = small->niov = 1;
    large->written = 1; /* no write item here */
    f.p.head = f.p.tail = f.p.hash_next = large;
    f.p.queued_bytes = 65536;
    pipeline_pump(&f.p);
    ck_assert_uint_eq(f.p.items, PIPE_HASH);
    large->next = small; /* sealed meanwhile (as add_batch links it), and its write item is back */
    f.p.tail = small;
    f.p.hash_next = small;
    f.p.queued_bytes += 4096;
    small->written = 1;
    pipeline_pump(&f.p);
    ck_assert_int_eq(small->hashed, 0); /* in order: the hash item is out */
    uv_run(&f.loop, UV_RUN_DEFAULT);    /* the hash item comes back */
    pipeline_pump(&f.p);                /* job_step's one pump */
    ck_assert_ptr_null(f.p.head);
    ck_assert_int_eq(pipeline_drained(&f.p), 1);
    pipe_close(&f);
}
END_TEST

static Suite *pipeline_suite(void)
{
    Suite *s = suite_create("pipeline");
    TCase *batching = tcase_create("batching");
    TCase *pacing = tcase_create("pacing");

    tcase_add_test(batching, pipeline_batch_merges_contiguous_slices);
    tcase_add_test(batching, pipeline_batch_grows_past_its_own_room);
    tcase_add_test(batching, pipeline_batch_full_at_size_or_slots);
    tcase_add_test(batching, pipeline_take_batches_caps_one_item);
    tcase_add_test(batching, pipeline_a_slow_batch_is_stale_after_its_age);
    tcase_add_test(batching, pipeline_frees_a_lane_batch_the_hash_would_skip);
    tcase_add_test(batching, pipeline_hashes_a_small_batch_on_the_loop_and_a_large_one_in_an_item);
    tcase_add_test(batching, pipeline_a_small_last_batch_written_before_its_hash_goes_in_one_pump);
    suite_add_tcase(s, batching);

    tcase_add_test(pacing, pipeline_backpressure_has_hysteresis);
    tcase_add_test(pacing, pipeline_checkpoint_by_bytes_or_time);
    tcase_add_test(pacing, pipeline_writeback_every_chunk);
    tcase_add_test(pacing, pipeline_room_for_the_rest_of_the_file);
    suite_add_tcase(s, pacing);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pipeline_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
