/* Unit tests for daemon/fetch/job.c: the state machine's transition table
 * (allowed and refused changes) and the waiters' written-bytes
 * notification. */
#include "job_internal.h"
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* Every transition the code makes, and nothing else. */
static const struct {
    job_state_t from, to;
} ok[] = {
    {JOB_QUEUED, JOB_RESUMING},
    {JOB_QUEUED, JOB_CONNECTING},
    {JOB_QUEUED, JOB_FAILED},
    {JOB_RESUMING, JOB_CONNECTING},
    {JOB_RESUMING, JOB_BODY_DONE},
    {JOB_RESUMING, JOB_FAILED},
    {JOB_RESUMING, JOB_BODY},
    {JOB_CONNECTING, JOB_CONNECTING},
    {JOB_CONNECTING, JOB_BODY},
    {JOB_CONNECTING, JOB_RETRY_WAIT},
    {JOB_CONNECTING, JOB_RESTARTING},
    {JOB_CONNECTING, JOB_FAILED},
    {JOB_BODY, JOB_BODY_DONE},
    {JOB_BODY, JOB_RETRY_WAIT},
    {JOB_BODY, JOB_FAILED},
    {JOB_BODY, JOB_CONNECTING},
    {JOB_BODY, JOB_RESTARTING},
    {JOB_RETRY_WAIT, JOB_CONNECTING},
    {JOB_RETRY_WAIT, JOB_RESTARTING},
    {JOB_RETRY_WAIT, JOB_FAILED},
    {JOB_RESTARTING, JOB_CONNECTING},
    {JOB_RESTARTING, JOB_FAILED},
    {JOB_BODY_DONE, JOB_COMMITTING},
    {JOB_BODY_DONE, JOB_FAILED},
    {JOB_COMMITTING, JOB_DONE},
    {JOB_COMMITTING, JOB_FAILED},
    /* The cluster swarm: it takes a job going active, then hands it to the
     * re-hash (every byte in) or to the origin, or it fails. */
    {JOB_QUEUED, JOB_SWARM},
    {JOB_SWARM, JOB_RESUMING},
    {JOB_SWARM, JOB_CONNECTING},
    {JOB_SWARM, JOB_FAILED},
};

static int listed(job_state_t from, job_state_t to)
{
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (ok[i].from == from && ok[i].to == to)
            return 1;
    return 0;
}

START_TEST(job_transitions_allowed)
{
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ck_assert_msg(job_transition_ok(ok[i].from, ok[i].to), "%s -> %s refused",
                      job_state_names[ok[i].from], job_state_names[ok[i].to]);
}
END_TEST

START_TEST(job_transitions_refused)
{
    for (int from = 0; from < JOB_NSTATES; from++)
        for (int to = 0; to < JOB_NSTATES; to++)
            if (!listed(from, to))
                ck_assert_msg(!job_transition_ok(from, to), "%d -> %d allowed", from, to);
    /* The ones that matter most: */
    ck_assert(!job_transition_ok(JOB_DONE, JOB_FAILED));     /* told once */
    ck_assert(!job_transition_ok(JOB_FAILED, JOB_QUEUED));   /* final */
    ck_assert(!job_transition_ok(JOB_BODY, JOB_COMMITTING)); /* not before the last byte */
    ck_assert(!job_transition_ok(JOB_QUEUED, JOB_BODY));     /* no body without a request */
    ck_assert(!job_transition_ok(JOB_SWARM, JOB_BODY_DONE)); /* the swarm's bytes re-hashed first */
    ck_assert(!job_transition_ok(JOB_NSTATES, JOB_QUEUED));  /* out of range */
}
END_TEST

START_TEST(job_state_names_for_status)
{
    /* STATUS shows the sub-steps as the states users know. */
    ck_assert_str_eq(job_state_names[JOB_RETRY_WAIT], "retrying");
    ck_assert_str_eq(job_state_names[JOB_RESTARTING], "retrying");
    ck_assert_str_eq(job_state_names[JOB_BODY], "downloading");
    ck_assert_str_eq(job_state_names[JOB_BODY_DONE], "downloading");
    for (int s = 0; s < JOB_NSTATES; s++)
        ck_assert_ptr_nonnull(job_state_names[s]);
}
END_TEST

static unsigned calls[2];
static uint64_t last_written, last_durable;

static void count_written(job_waiter_t *w, uint64_t written, uint64_t durable)
{
    (void)w;
    calls[0]++;
    last_written = written;
    last_durable = durable;
}

/* Leaves from its own callback, as a session whose client went away. */
static void leave_when_told(job_waiter_t *w, uint64_t written, uint64_t durable)
{
    (void)written;
    (void)durable;
    calls[1]++;
    jobs_cancel(w);
}

START_TEST(job_tells_waiters_what_is_written)
{
    job_t *job = calloc(1, sizeof *job);
    list_init(&job->waiters);
    job_waiter_t told = {.on_written = count_written}, leaving = {.on_written = leave_when_told},
                 quiet = {0}; /* no on_written: not told */
    job_waiter_link(job, &quiet);
    job_waiter_link(job, &leaving);
    job_waiter_link(job, &told);
    job->pipe.on_disk = 3 << 20;
    job->pipe.durable = 1 << 20;
    job_notify_written(job);
    ck_assert_uint_eq(calls[0], 1);
    ck_assert_uint_eq(calls[1], 1);
    ck_assert_uint_eq(last_written, 3 << 20);
    ck_assert_uint_eq(last_durable, 1 << 20);
    ck_assert_uint_eq(job->nwaiters, 2); /* the one that left is gone */
    ck_assert_ptr_null(leaving.job);

    job->pipe.on_disk = 0; /* restarted from byte 0 */
    job->pipe.durable = 0;
    job_notify_written(job);
    ck_assert_uint_eq(calls[0], 2);
    ck_assert_uint_eq(calls[1], 1);
    ck_assert_uint_eq(last_written, 0);
    jobs_cancel(&told);
    jobs_cancel(&quiet);
    ck_assert_uint_eq(job->nwaiters, 0);
    free(job);
}
END_TEST

static unsigned restart_calls;
static uint64_t restart_written = 1, restart_durable = 1;

static void note_written(job_waiter_t *w, uint64_t written, uint64_t durable)
{
    (void)w;
    restart_calls++;
    restart_written = written;
    restart_durable = durable;
}

static void on_http_closed(void *arg)
{
    *(int *)arg = 1;
}

/* A restart from byte 0 drops what the partial held: the waiters hear that
 * it holds nothing (written 0), as job.h promises, before the new request. */
START_TEST(job_restart_tells_waiters_nothing_is_written)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    jobs_t js = {.loop = &loop, .cfg = &cfg};
    list_init(&js.active);
    list_init(&js.all);
    list_init(&js.queue);
    bufpool_init(&js.pool, cfg.read_buffer_size, 8);
    ck_assert_int_eq(http_client_new(&loop, &cfg, &js.pool, NULL, &js.http), 0);

    job_t *job = calloc(1, sizeof *job);
    ck_assert_ptr_nonnull(job);
    list_init(&job->waiters);
    job->js = &js;
    job->ro_fd = -1;
    url_t u;
    ck_assert_int_eq(url_parse("http://127.0.0.1:9/file", &u, NULL), 0);
    job->key = strdup(u.canonical);
    job->file.key = job->key;
    job->file.total = -1;
    transfer_init(&job->xfer, &job_xfer_cbs, job, &job->file, js.http, &cfg, 1, &u, 1);
    pipeline_init(&job->pipe, &loop, &cfg, NULL, NULL, &js.pool, &js.stats.bytes_from_origin,
                  &job_pipe_ops, job);
    job->pipe.total = &job->file.total;
    job->state = JOB_RESTARTING; /* the old attempt's items are all back */
    job->pipe.received = job->pipe.sealed = job->pipe.written = job->pipe.on_disk = 3 << 20;
    job->pipe.durable = 1 << 20;
    job_waiter_t w = {.on_written = note_written};
    job_waiter_link(job, &w);

    job_step(job);
    ck_assert_int_eq(job->state, JOB_CONNECTING);
    ck_assert_uint_eq(restart_calls, 1);
    ck_assert_uint_eq(restart_written, 0);
    ck_assert_uint_eq(restart_durable, 0);

    transfer_abort(&job->xfer);
    jobs_cancel(&w);
    transfer_free(&job->xfer);
    free(job->key);
    free(job);
    int closed = 0;
    http_client_close(js.http, on_http_closed, &closed);
    while (!closed)
        uv_run(&loop, UV_RUN_ONCE);
    uv_run(&loop, UV_RUN_DEFAULT);
    bufpool_destroy(&js.pool);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    config_free(&cfg);
}
END_TEST

static Suite *job_suite(void)
{
    Suite *s = suite_create("job");
    TCase *tc = tcase_create("states");

    tcase_add_test(tc, job_transitions_allowed);
    tcase_add_test(tc, job_transitions_refused);
    tcase_add_test(tc, job_state_names_for_status);
    suite_add_tcase(s, tc);

    TCase *waiters = tcase_create("waiters");
    tcase_add_test(waiters, job_tells_waiters_what_is_written);
    tcase_add_test(waiters, job_restart_tells_waiters_nothing_is_written);
    suite_add_tcase(s, waiters);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(job_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
