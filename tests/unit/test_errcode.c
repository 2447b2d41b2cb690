/* Unit tests for daemon/base/errcode.c: the table of error codes. Each row
 * is where its id says, every code of PROTOCOL.md's table has one, the
 * origin's statuses fall in their rows or classes, and the columns say what
 * the retry rules, the HTTP front and STATS did before the table (the same
 * behaviour, read from one place). */
#include "errcode.h"
#include "job.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(errcode_rows_stand_at_their_ids_with_unique_names)
{
    for (int i = 0; i < EC_COUNT; i++) {
        const errcode_t *e = errcode_row((errcode_id_t)i);
        ck_assert_int_eq(e->id, i);
        ck_assert_ptr_nonnull(e->name);
        ck_assert_ptr_eq(errcode_of(e->name), e);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(errcode_row((errcode_id_t)j)->name, e->name);
    }
    ck_assert_int_eq(errcode_row(EC_COUNT)->id, EC_OTHER);
}
END_TEST

/* The STATS buckets are the ones STATS prints (JOBS_ERROR_CODES), and
 * every bucket there but "other" is some row's. */
START_TEST(errcode_buckets_are_the_stats_buckets)
{
    static const char *const buckets[JOBS_NERROR_CODES] = {JOBS_ERROR_CODES};
    for (int i = 0; i < EC_COUNT; i++) {
        const char *b = errcode_row((errcode_id_t)i)->bucket;
        int found = 0;
        for (int k = 0; k < JOBS_NERROR_CODES; k++)
            found |= strcmp(buckets[k], b) == 0;
        ck_assert_msg(found, "row %s: bucket %s is not a STATS bucket", errcode_row(i)->name, b);
    }
    for (int k = 0; k < JOBS_NERROR_CODES; k++) {
        int used = 0;
        for (int i = 0; i < EC_COUNT; i++)
            used |= strcmp(errcode_row((errcode_id_t)i)->bucket, buckets[k]) == 0;
        ck_assert_msg(used, "STATS bucket %s has no row", buckets[k]);
    }
}
END_TEST

/* Every code PROTOCOL.md's "Error codes" table lists has a row of its own
 * (http_NNN: the class rows). */
START_TEST(errcode_every_documented_code_has_a_row)
{
    FILE *f = fopen(HUBD_SOURCE_DIR "/docs/PROTOCOL.md", "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int in_table = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "## Error codes", 14) == 0)
            in_table = 1;
        else if (in_table && strncmp(line, "## ", 3) == 0)
            break;
        if (!in_table || strncmp(line, "| `", 3) != 0)
            continue;
        char code[64];
        if (sscanf(line, "| `%63[a-z_0-9N]`", code) != 1)
            continue;
        if (strcmp(code, "http_NNN") == 0)
            strcpy(code, "http_418");
        ck_assert_msg(errcode_of(code)->id != EC_OTHER, "PROTOCOL.md's %s has no row", code);
        n++;
    }
    fclose(f);
    ck_assert_int_ge(n, 20);
}
END_TEST

START_TEST(errcode_http_statuses_fall_in_their_rows)
{
    ck_assert_int_eq(errcode_of("http_404")->id, EC_HTTP_404);
    ck_assert_int_eq(errcode_of("http_418")->id, EC_HTTP_4XX);
    ck_assert_int_eq(errcode_of("http_502")->id, EC_HTTP_5XX);
    ck_assert_int_eq(errcode_of("http_503")->id, EC_HTTP_503);
    ck_assert_int_eq(errcode_of("no such code")->id, EC_OTHER);
    ck_assert_int_eq(errcode_of(NULL)->id, EC_OTHER);
}
END_TEST

/* What was retried before the table still is, and nothing else. */
START_TEST(errcode_transient_codes)
{
    static const char *const yes[] = {"connect",  "timeout",  "truncated", "tls",      "http_408",
                                      "http_429", "http_500", "http_502",  "http_503", "proxy"};
    static const char *const no[] = {
        "dns",        "tls_verify", "http_parse",    "redirect", "http_403",     "http_404",
        "http_410",   "http_400",   "hash_mismatch", "io",       "no_space",     "forbidden",
        "proxy_auth", "too_large",  "internal",      "bad_url",  "proxy_refused"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        ck_assert_msg(errcode_is_transient(yes[i]), "%s", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(!errcode_is_transient(no[i]), "%s", no[i]);
    ck_assert_int_eq(errcode_of("http_429")->retry, EC_THROTTLE);
    ck_assert_int_eq(errcode_of("http_503")->retry, EC_THROTTLE);
    ck_assert_int_eq(errcode_of("http_500")->retry, EC_TRANSIENT);
}
END_TEST

START_TEST(errcode_front_statuses)
{
    static const struct {
        const char *code;
        int status;
    } cases[] = {
        {NULL, 200},
        {"http_401", 401},
        {"http_403", 403},
        {"http_404", 404},
        {"http_410", 410},
        {"http_451", 451},
        {"http_400", 502},
        {"http_429", 502},
        {"http_500", 502},
        {"http_503", 502},
        {"timeout", 504},
        {"forbidden", 403},
        {"bad_url", 400},
        {"bad_request", 400},
        {"unsupported_scheme", 400},
        {"too_many_requests", 429},
        {"shutting_down", 503},
        {"busy", 503},
        {"no_space", 507},
        {"io", 500},
        {"internal", 500},
        {"permission_denied", 403},
        {"dns", 502},
        {"connect", 502},
        {"hash_mismatch", 502},
        {"proxy", 502},
        {"proxy_refused", 502},
        {"tls_verify", 502},
        {"something new", 502},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(errcode_front_status(cases[i].code) == cases[i].status, "%s: %d, not %d",
                      cases[i].code ? cases[i].code : "(none)", errcode_front_status(cases[i].code),
                      cases[i].status);
}
END_TEST

START_TEST(errcode_lane_and_job_columns)
{
    ck_assert(errcode_of("http_403")->resolve_again);
    ck_assert(errcode_of("http_410")->resolve_again);
    ck_assert(!errcode_of("http_404")->resolve_again);
    ck_assert(errcode_of("shutting_down")->resumable);
    ck_assert(!errcode_of("internal")->resumable);
    ck_assert(errcode_of("not_modified")->not_failure);
    ck_assert(!errcode_of("timeout")->not_failure);
    ck_assert_str_eq(errcode_of("http_404")->bucket, "http_4xx");
    ck_assert_str_eq(errcode_of("http_599")->bucket, "http_5xx");
    ck_assert_str_eq(errcode_of("proxy")->bucket, "other");
    ck_assert_str_eq(errcode_of("dns")->bucket, "dns");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errcode");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, errcode_rows_stand_at_their_ids_with_unique_names);
    tcase_add_test(tc, errcode_buckets_are_the_stats_buckets);
    tcase_add_test(tc, errcode_every_documented_code_has_a_row);
    tcase_add_test(tc, errcode_http_statuses_fall_in_their_rows);
    tcase_add_test(tc, errcode_transient_codes);
    tcase_add_test(tc, errcode_front_statuses);
    tcase_add_test(tc, errcode_lane_and_job_columns);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
