/* Unit tests for the job state machine of daemon/fetch/job.c: the
 * transition table, allowed and refused changes. */
#include "job_internal.h"

#include <check.h>
#include <stdlib.h>

/* Every transition the code makes, and nothing else. */
static const struct {
    job_state_t from, to;
} ok[] = {
    {JOB_QUEUED, JOB_RESUMING},       {JOB_QUEUED, JOB_CONNECTING},
    {JOB_QUEUED, JOB_FAILED},         {JOB_RESUMING, JOB_CONNECTING},
    {JOB_RESUMING, JOB_BODY_DONE},    {JOB_RESUMING, JOB_FAILED},
    {JOB_CONNECTING, JOB_CONNECTING}, {JOB_CONNECTING, JOB_BODY},
    {JOB_CONNECTING, JOB_RETRY_WAIT}, {JOB_CONNECTING, JOB_RESTARTING},
    {JOB_CONNECTING, JOB_FAILED},     {JOB_BODY, JOB_BODY_DONE},
    {JOB_BODY, JOB_RETRY_WAIT},       {JOB_BODY, JOB_FAILED},
    {JOB_RETRY_WAIT, JOB_CONNECTING}, {JOB_RETRY_WAIT, JOB_RESTARTING},
    {JOB_RETRY_WAIT, JOB_FAILED},     {JOB_RESTARTING, JOB_CONNECTING},
    {JOB_RESTARTING, JOB_FAILED},     {JOB_BODY_DONE, JOB_COMMITTING},
    {JOB_BODY_DONE, JOB_FAILED},      {JOB_COMMITTING, JOB_DONE},
    {JOB_COMMITTING, JOB_FAILED},
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
    ck_assert(!job_transition_ok(JOB_NSTATES, JOB_QUEUED));  /* out of range */
}
END_TEST

START_TEST(job_state_names_for_status)
{
    /* STATUS shows the sub-steps as the states users know. */
    ck_assert_str_eq(job_state_names[JOB_RETRY_WAIT], "retrying");
    ck_assert_str_eq(job_state_names[JOB_RESTARTING], "retrying");
    ck_assert_str_eq(job_state_names[JOB_BODY_DONE], "body");
    for (int s = 0; s < JOB_NSTATES; s++)
        ck_assert_ptr_nonnull(job_state_names[s]);
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
