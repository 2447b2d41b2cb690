/* Unit tests for bgwork: items run in order on a thread of its own, at a
 * lower priority than the loop's, and their dones come back on the loop. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bgwork.h"

enum { N = 8 };

typedef struct seen {
    bgwork_item_t items[N];
    int ran[N], finished[N]; /* the order each was worked and done in */
    int nran, nfinished;
    pid_t tid[N];
    int nice[N];
    char name[N][32];
    bgwork_t *bg;
    int chained; /* the last done queued one more */
} seen_t;

static void work(bgwork_item_t *it)
{
    seen_t *s = it->data;
    int i = (int)(it - s->items);
    s->ran[i] = s->nran++; /* one item at a time: no race */
    s->tid[i] = gettid();
    errno = 0;
    s->nice[i] = getpriority(PRIO_PROCESS, (id_t)s->tid[i]);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)s->tid[i]);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fgets(s->name[i], sizeof s->name[i], f))
            s->name[i][strcspn(s->name[i], "\n")] = 0;
        fclose(f);
    }
}

static void done(bgwork_item_t *it)
{
    seen_t *s = it->data;
    int i = (int)(it - s->items);
    ck_assert_int_eq(gettid(), getpid()); /* on the loop, the main thread */
    s->finished[i] = s->nfinished++;
    if (i == N - 2 && !s->chained) { /* a done may queue another */
        s->chained = 1;
        bgwork_queue(s->bg, &s->items[N - 1], work, done);
    }
}

START_TEST(bgwork_runs_items_in_order_on_a_lower_priority_thread)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    static seen_t s;
    memset(&s, 0, sizeof s);
    errno = 0;
    int mine = getpriority(PRIO_PROCESS, 0);
    ck_assert_int_eq(bgwork_start(&loop, &s.bg), 0);
    for (int i = 0; i < N - 1; i++) {
        s.items[i].data = &s;
        bgwork_queue(s.bg, &s.items[i], work, done);
    }
    s.items[N - 1].data = &s;
    ck_assert_uint_eq(bgwork_pending(s.bg), N - 1);
    /* Items out keep the loop running, as pool items do, until the last
     * done; then nothing does. */
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(s.nfinished, N);
    ck_assert_uint_eq(bgwork_pending(s.bg), 0);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(s.ran[i], i);
        ck_assert_int_eq(s.finished[i], i);
        ck_assert_int_ne(s.tid[i], getpid()); /* not the loop's thread */
        ck_assert_int_eq(s.tid[i], s.tid[0]); /* one thread for all */
        ck_assert_int_eq(s.nice[i], mine + BGWORK_NICE > 19 ? 19 : mine + BGWORK_NICE);
        ck_assert_str_eq(s.name[i], "hubd-bg");
    }
    /* The loop's own priority is untouched. */
    ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), mine);
    bgwork_stop(s.bg);
    /* The handle closes on the loop, and then nothing keeps it alive. */
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(bgwork_stops_when_nothing_was_queued)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    bgwork_t *bg;
    ck_assert_int_eq(bgwork_start(&loop, &bg), 0);
    /* Its handle alone does not keep the loop running. */
    ck_assert_int_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);
    bgwork_stop(bg);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bgwork");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bgwork_runs_items_in_order_on_a_lower_priority_thread);
    tcase_add_test(tc, bgwork_stops_when_nothing_was_queued);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
