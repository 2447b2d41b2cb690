/* Unit tests for common/promtext.c and the metrics page's per-user part
 * (http/metrics.c): label values escaped as the text exposition format
 * says, the STATS line rendered under the table's names, the per-user
 * families with every user in each. */
#include "metrics.h"
#include "promtext.h"
#include "proto.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static char *text_of(bytebuf_t *b)
{
    ck_assert_int_eq(bytebuf_append(b, "", 1), 0);
    return bytebuf_data(b);
}

START_TEST(promtext_escapes_label_values)
{
    char out[128];
    promtext_escape("plain", out, sizeof out);
    ck_assert_str_eq(out, "plain");
    /* A backslash, a double quote and a newline are escaped, nothing else. */
    promtext_escape("a\\b\"c\nd", out, sizeof out);
    ck_assert_str_eq(out, "a\\\\b\\\"c\\nd");
    /* UTF-8 passes; a byte that is none, or a control byte, is '?'. */
    promtext_escape("j\xc3\xbcrgen", out, sizeof out);
    ck_assert_str_eq(out, "j\xc3\xbcrgen");
    promtext_escape("x\xff\xc3y\tz", out, sizeof out);
    ck_assert_str_eq(out, "x??y?z");
    promtext_escape("\xed\xa0\x80", out, sizeof out); /* a surrogate */
    ck_assert_str_eq(out, "???");
    /* Cut at a whole escape, never in the middle of one. */
    promtext_escape("ab\"", out, 4);
    ck_assert_str_eq(out, "ab");
}
END_TEST

START_TEST(promtext_sample_line)
{
    bytebuf_t b;
    bytebuf_init(&b, 0);
    ck_assert_int_eq(promtext_sample(&b, "hubd_user_holds", "user", "o\"brien\\x", 3), 0);
    ck_assert_str_eq(text_of(&b), "hubd_user_holds{user=\"o\\\"brien\\\\x\"} 3\n");
    bytebuf_free(&b);
}
END_TEST

START_TEST(promtext_stats_under_the_tables_names)
{
    proto_msg_t *m = malloc(sizeof *m);
    const char line[] = "STATS hits=2 cache_bytes=5000 errors_by_code=http_4xx:1,timeout:3 bogus=1";
    ck_assert_int_eq(proto_parse(line, strlen(line), m), 0);
    bytebuf_t b;
    bytebuf_init(&b, 0);
    ck_assert_int_eq(promtext_stats(&b, m), 0);
    const char *t = text_of(&b);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE hubd_hits_total counter\nhubd_hits_total 2\n"));
    ck_assert_ptr_nonnull(
        strstr(t, "# TYPE hubd_cache_size_bytes gauge\nhubd_cache_size_bytes 5000\n"));
    ck_assert_ptr_nonnull(strstr(t, "hubd_errors_total{code=\"http_4xx\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "hubd_errors_total{code=\"timeout\"} 3\n"));
    ck_assert_ptr_null(strstr(t, "hubd_misses_total")); /* not in the line: left out */
    ck_assert_ptr_null(strstr(t, "bogus"));
    ck_assert_str_eq(promtext_name_of("bytes_served"), "hubd_served_bytes_total");
    ck_assert_ptr_null(promtext_name_of("bogus"));
    bytebuf_free(&b);
    free(m);
}
END_TEST

START_TEST(promtext_stats_bounded)
{
    proto_msg_t *m = malloc(sizeof *m);
    const char line[] = "STATS hits=2 misses=3";
    ck_assert_int_eq(proto_parse(line, strlen(line), m), 0);
    bytebuf_t b;
    bytebuf_init(&b, 64); /* the cap: refused, not grown past */
    ck_assert_int_lt(promtext_stats(&b, m), 0);
    ck_assert_uint_le(bytebuf_len(&b), 64);
    bytebuf_free(&b);
    free(m);
}
END_TEST

START_TEST(metrics_users_in_every_family)
{
    metrics_user_t u[2] = {{.uid = 1000, .served = 10, .holds = 1, .held = 5, .active = 0},
                           {.uid = 1001, .served = 0, .holds = 0, .held = 0, .active = 2}};
    strcpy(u[0].name, "ann");
    strcpy(u[1].name, "bob\"\\");
    bytebuf_t b;
    bytebuf_init(&b, 0);
    ck_assert_int_eq(metrics_render_users(&b, "user", u, 2), 0);
    const char *t = text_of(&b);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE hubd_user_served_bytes_total counter\n"
                                    "hubd_user_served_bytes_total{user=\"ann\"} 10\n"
                                    "hubd_user_served_bytes_total{user=\"bob\\\"\\\\\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(t, "hubd_user_held_bytes{user=\"ann\"} 5\n"));
    ck_assert_ptr_nonnull(strstr(t, "hubd_user_holds{user=\"ann\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(t, "hubd_user_downloads_active{user=\"bob\\\"\\\\\"} 2\n"));
    bytebuf_free(&b);
}
END_TEST

/* Labels that would read the same become each user's uid; the others stay. */
START_TEST(metrics_labels_stay_unique)
{
    metrics_user_t u[5] = {{.uid = 1000}, {.uid = 1001}, {.uid = 1002}, {.uid = 1003}, {.uid = 7}};
    strcpy(u[0].name, "ann");
    strcpy(u[1].name, "caf\xe9"); /* not UTF-8: '?' on the page */
    strcpy(u[2].name, "caf\xff"); /* the same, once escaped */
    strcpy(u[3].name, "7");       /* a user named as uid 7 */
    strcpy(u[4].name, "7");       /* uid 7, no name */
    metrics_unique_labels(u, 5);
    ck_assert_str_eq(u[0].name, "ann");
    ck_assert_str_eq(u[1].name, "uid:1001");
    ck_assert_str_eq(u[2].name, "uid:1002");
    ck_assert_str_eq(u[3].name, "uid:1003");
    ck_assert_str_eq(u[4].name, "uid:7");
    metrics_unique_labels(u, 0);
}
END_TEST

static Suite *promtext_suite(void)
{
    Suite *s = suite_create("promtext");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, promtext_escapes_label_values);
    tcase_add_test(tc, promtext_sample_line);
    tcase_add_test(tc, promtext_stats_under_the_tables_names);
    tcase_add_test(tc, promtext_stats_bounded);
    tcase_add_test(tc, metrics_users_in_every_family);
    tcase_add_test(tc, metrics_labels_stay_unique);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(promtext_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
