/* Unit tests for daemon/fetch/disposition.c: what a response head means for
 * the request that got it (206 validation, Content-Range checks, redirect
 * rules, which statuses retry, Retry-After), the backoff schedule and what
 * a failed attempt leads to (retry_decide, for the job's transfer and for a
 * lane). Pure functions: no loop, no socket. */
#include "disposition.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static url_t base;

static void setup(void)
{
    ck_assert_int_eq(url_parse("https://127.0.0.1/files/a.bin", &base, NULL), 0);
}

static void teardown(void)
{
    url_free(&base);
}

/* A head with only a status; the tests set the rest. */
static disp_head_t head(int status)
{
    return (disp_head_t){.status = status, .content_length = -1};
}

/* A request for the whole file (offset 0), nothing known. */
static disp_request_t whole(void)
{
    return (disp_request_t){.url = &base, .total = -1, .max_redirects = 5};
}

/* A resumed request: offset bytes held of a file of `total` (or -1). */
static disp_request_t resumed(uint64_t offset, int64_t total, const char *etag)
{
    disp_request_t r = whole();
    r.offset = offset;
    r.total = total;
    r.etag = etag;
    return r;
}

static disposition_t decide(const disp_head_t *h, const disp_request_t *r)
{
    disposition_t d;
    memset(&d, 0, sizeof d);
    disposition_of(h, r, &d);
    return d;
}

START_TEST(disposition_takes_a_whole_file)
{
    disp_head_t h = head(200);
    h.content_length = 1234;
    disp_request_t r = whole();
    disposition_t d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_TAKE);
    ck_assert_int_eq(d.total, 1234);
    ck_assert_int_eq(d.new_validators, 1);

    h = head(203); /* unknown length */
    d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_TAKE);
    ck_assert_int_eq(d.total, -1);
}
END_TEST

START_TEST(disposition_takes_the_range_asked_for)
{
    disp_head_t h = head(206);
    h.content_range = "bytes 100-999/1000";
    h.content_length = 900;
    h.etag = "\"v1\"";
    disp_request_t r = resumed(100, 1000, "\"v1\"");
    disposition_t d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_TAKE);
    ck_assert_int_eq(d.total, 1000);
    ck_assert_int_eq(d.new_validators, 0); /* a range keeps the validators we have */

    /* "*": the length known before stands. */
    h.content_range = "bytes 100-999/*";
    d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_TAKE);
    ck_assert_int_eq(d.total, 1000);

    /* A range that stops before the end is taken (the end of the body
     * finds it short, and that is retried). */
    h.content_range = "bytes 100-499/1000";
    h.content_length = 400;
    d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_TAKE);
    ck_assert_int_eq(d.total, 1000);
}
END_TEST

/* Each head must restart the resumed request from byte 0. */
static void restarts(const disp_head_t *h, const disp_request_t *r, const char *why)
{
    disposition_t d = decide(h, r);
    ck_assert_msg(d.kind == DISP_RESTART, "status %d range %s: kind %d", h->status,
                  h->content_range ? h->content_range : "-", d.kind);
    ck_assert_str_eq(d.why, why);
}

START_TEST(disposition_checks_the_content_range)
{
    const char *wrong = "the range sent is not the one asked for";
    disp_request_t r = resumed(100, 1000, "\"v1\"");
    disp_head_t h = head(206);
    h.content_length = -1;

    h.content_range = NULL; /* none */
    restarts(&h, &r, wrong);
    h.content_range = "bytes 100"; /* no end */
    restarts(&h, &r, wrong);
    h.content_range = "bytes 0-999/1000"; /* not where we asked */
    restarts(&h, &r, wrong);
    h.content_range = "bytes 101-999/1000";
    restarts(&h, &r, wrong);
    h.content_range = "bytes 500-100/1000"; /* ends before it starts */
    r = resumed(500, 1000, NULL);
    restarts(&h, &r, wrong);
    r = resumed(100, 1000, "\"v1\"");
    h.content_range = "bytes 100-999/2000"; /* another length: another file */
    restarts(&h, &r, wrong);
    h.content_range = "bytes 100-1000/1000"; /* past the end */
    restarts(&h, &r, wrong);
    h.content_range = "bytes 100-999/99999999999999999999"; /* over INT64_MAX */
    r = resumed(100, -1, NULL);
    restarts(&h, &r, wrong);

    /* A Content-Length that is not the range's. */
    r = resumed(100, 1000, NULL);
    h.content_range = "bytes 100-999/1000";
    h.content_length = 899;
    restarts(&h, &r, wrong);

    /* Another ETag: the file changed. */
    h.content_length = 900;
    h.etag = "\"v2\"";
    r = resumed(100, 1000, "\"v1\"");
    restarts(&h, &r, wrong);

    /* Neither response knows the length: the range proves nothing. */
    h.etag = NULL;
    h.content_range = "bytes 100-999/*";
    r = resumed(100, -1, NULL);
    restarts(&h, &r, "a range of a file of unknown length");
}
END_TEST

START_TEST(disposition_restarts_when_the_range_is_ignored)
{
    const char *why = "the server sent the whole file (or refused the range)";
    disp_request_t r = resumed(100, 1000, NULL);
    int statuses[] = {200, 203, 416};
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        disp_head_t h = head(statuses[i]);
        restarts(&h, &r, why);
    }
    /* Without a Range asked for, a 416 or a 206 is just an error status. */
    r = whole();
    disp_head_t h = head(416);
    ck_assert_int_eq(decide(&h, &r).kind, DISP_STATUS);
    h = head(206);
    h.content_range = "bytes 0-9/10";
    ck_assert_int_eq(decide(&h, &r).kind, DISP_STATUS);
}
END_TEST

START_TEST(disposition_follows_redirects_within_the_rules)
{
    int statuses[] = {301, 302, 303, 307, 308};
    disp_request_t r = whole();
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        disp_head_t h = head(statuses[i]);
        h.location = "/other/b.bin";
        disposition_t d = decide(&h, &r);
        ck_assert_int_eq(d.kind, DISP_REDIRECT);
        ck_assert_str_eq(d.location, "https://127.0.0.1/other/b.bin");
        disposition_clear(&d);
        ck_assert_int_eq(d.kind, DISP_NONE);
        ck_assert_ptr_null(d.location);
    }
    disp_head_t h = head(300); /* not a redirect we follow */
    h.location = "/x";
    ck_assert_int_eq(decide(&h, &r).kind, DISP_STATUS);

    h = head(302); /* no Location */
    disposition_t d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_FAIL);
    ck_assert_str_eq(d.code, "redirect");
    ck_assert_str_eq(d.msg, "HTTP 302 redirect without a Location");
    h.location = "";
    ck_assert_int_eq(decide(&h, &r).kind, DISP_FAIL);

    h.location = "/x"; /* too many */
    r.redirects = 5;
    d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_FAIL);
    ck_assert_str_eq(d.msg, "more than 5 redirects");
    r.redirects = 4;
    d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_REDIRECT);
    disposition_clear(&d);
}
END_TEST

START_TEST(disposition_refuses_a_downgrade)
{
    url_t next;
    char msg[300];
    ck_assert_int_eq(disposition_follow(&base, "http://127.0.0.1/a", &next, msg, sizeof msg),
                     -EINVAL);
    ck_assert_str_eq(msg, "refused a redirect from https to http (http://127.0.0.1/a)");
    ck_assert_int_eq(disposition_follow(&base, "https://localhost/a", &next, msg, sizeof msg), 0);
    ck_assert_str_eq(next.host, "localhost");
    url_free(&next);
    ck_assert_int_eq(disposition_follow(&base, "ftp://x/", &next, msg, sizeof msg), -EINVAL);
    ck_assert_int_eq(strncmp(msg, "redirect to an unusable URL: ", 29), 0);

    url_t plain;
    ck_assert_int_eq(url_parse("http://127.0.0.1/", &plain, NULL), 0);
    ck_assert_int_eq(disposition_follow(&plain, "https://127.0.0.1/b", &next, msg, sizeof msg),
                     0); /* an upgrade is fine */
    url_free(&next);
    url_free(&plain);
}
END_TEST

START_TEST(disposition_reads_retry_after)
{
    disp_head_t h = head(503);
    h.retry_after = "7";
    disp_request_t r = whole();
    disposition_t d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_STATUS);
    ck_assert_int_eq(d.status, 503);
    ck_assert_uint_eq(d.retry_after_ms, 7000);

    ck_assert_uint_eq(disposition_retry_after_ms(NULL), 0);
    ck_assert_uint_eq(disposition_retry_after_ms("0"), 0);
    ck_assert_uint_eq(disposition_retry_after_ms("86399"), 86399000u);
    ck_assert_uint_eq(disposition_retry_after_ms("86400"), 0); /* a day or more: ignored */
    ck_assert_uint_eq(disposition_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT"), 0);
    ck_assert_uint_eq(disposition_retry_after_ms("5s"), 0);
    ck_assert_uint_eq(disposition_retry_after_ms(""), 0);
}
END_TEST

/* A 407 from a proxy (plain http in absolute form) fails at once as the
 * proxy's, not as the origin's http_407, and names what to set; an
 * origin's 407 is a status like any. */
START_TEST(disposition_407_is_the_proxys)
{
    disp_head_t h = head(407);
    h.from_proxy = 1;
    disp_request_t r = whole();
    disposition_t d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_FAIL);
    ck_assert_str_eq(d.code, "proxy_auth");
    ck_assert_ptr_nonnull(strstr(d.msg, "user:password@"));
    h.from_proxy = 0; /* an origin's (direct, or inside a tunnel): just a status */
    d = decide(&h, &r);
    ck_assert_int_eq(d.kind, DISP_STATUS);
}
END_TEST

START_TEST(disposition_says_which_failures_retry)
{
    const char *yes[] = {"connect",  "timeout",  "truncated", "tls",      "http_408", "http_429",
                         "http_500", "http_502", "http_503",  "http_599", "proxy"};
    const char *no[] = {"dns",       "tls_verify", "http_parse", "redirect", "hash_mismatch",
                        "no_space",  "io",         "http_400",   "http_404", "http_416",
                        "forbidden", "too_large",  "http_206",   "internal", "proxy_auth"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        ck_assert_msg(disposition_is_transient(yes[i]), "%s should retry", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(!disposition_is_transient(no[i]), "%s should not retry", no[i]);
}
END_TEST

START_TEST(disposition_backoff_doubles_with_jitter)
{
    /* rnd 0: the low end of the jitter, d/2; a large rnd of the form
     * k*(d/2+1) - 1: the high end, d. */
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 0, 0, 0), 500);
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 0, 0, 500), 1000);
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 0, 0, 501), 500); /* wraps */
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 1, 0, 1000), 2000);
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 3, 0, 0), 4000);
    /* The doubling stops once max is reached, and the delay never passes it. */
    ck_assert_uint_eq(disposition_backoff_ms(1000, 5000, 10, 0, 0), 4000);
    ck_assert_uint_eq(disposition_backoff_ms(1000, 5000, 10, 0, 4000), 5000);
    /* Retry-After is a floor, within max. */
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 0, 30000, 0), 30000);
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 0, 90000, 0), 60000);
    ck_assert_uint_eq(disposition_backoff_ms(1000, 60000, 2, 100, 0), 2000);
    for (uint64_t rnd = 0; rnd < 5000; rnd += 7) {
        uint64_t d = disposition_backoff_ms(200, 10000, 2, 0, rnd);
        ck_assert(d >= 400 && d <= 800);
    }
}
END_TEST

/* ---- retry_decide: one rule for the job's transfer and a lane's ---------- */

/* A failed attempt of the job's own transfer: 3 retries, 1 s doubling to
 * a minute, no deadline. */
static retry_in_t job_in(const char *code, unsigned attempts)
{
    return (retry_in_t){
        .code = code, .attempts = attempts, .retries = 3, .base_ms = 1000, .max_ms = 60000};
}

/* The same for a segment's connection, `want` connections wanted. */
static retry_in_t lane_in(const char *code, unsigned attempts, unsigned want)
{
    retry_in_t in = job_in(code, attempts);
    in.lane = 1;
    in.want = want;
    return in;
}

static retry_out_t retry(const retry_in_t *in)
{
    retry_out_t out;
    memset(&out, 0xff, sizeof out); /* every field must be set */
    retry_decide(in, &out);
    return out;
}

START_TEST(disposition_retry_fails_the_job_on_a_final_code)
{
    const char *final[] = {"http_404", "http_403", "http_410", "dns", "tls_verify", "no_space"};
    for (size_t i = 0; i < sizeof final / sizeof final[0]; i++)
        for (unsigned attempts = 0; attempts < 3; attempts++) {
            retry_in_t in = job_in(final[i], attempts);
            retry_out_t out = retry(&in);
            ck_assert_msg(out.verdict == RETRY_FAIL, "%s", final[i]);
            ck_assert_int_eq(out.after_n, 0); /* no "(after N attempts)" */
            ck_assert_int_eq(out.deadline, 0);
            ck_assert_int_eq(out.rewind, 0);
            ck_assert_int_eq(out.fewer, 0);
        }
}
END_TEST

START_TEST(disposition_retry_backs_off_the_job_on_a_transient_code)
{
    const char *transient[] = {"timeout",  "connect",  "truncated",
                               "http_500", "http_429", "http_503"};
    for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++)
        for (uint64_t rnd = 0; rnd < 2000; rnd += 97) {
            retry_in_t in = job_in(transient[i], 0);
            in.rnd = rnd;
            retry_out_t out = retry(&in);
            ck_assert_msg(out.verdict == RETRY_AGAIN, "%s", transient[i]);
            ck_assert_uint_ge(out.delay_ms, 500); /* [base/2, base] on attempt 0 */
            ck_assert_uint_le(out.delay_ms, 1000);
            ck_assert_int_eq(out.rewind, 0);
            ck_assert_int_eq(out.fewer, 0); /* the job's transfer has no lanes to give up */
        }
    retry_in_t in = job_in("timeout", 2); /* the backoff doubles per attempt */
    ck_assert_uint_ge(retry(&in).delay_ms, 2000);
    ck_assert_uint_le(retry(&in).delay_ms, 4000);
}
END_TEST

START_TEST(disposition_retry_fails_the_job_when_retries_are_spent)
{
    retry_in_t in = job_in("timeout", 2);
    ck_assert_int_eq(retry(&in).verdict, RETRY_AGAIN);
    in.attempts = 3;
    retry_out_t out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_FAIL);
    ck_assert_int_eq(out.after_n, 1);
    ck_assert_int_eq(out.deadline, 0);
    in = job_in("timeout", 0); /* no retries at all: the only attempt */
    in.retries = 0;
    out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_FAIL);
    ck_assert_int_eq(out.after_n, 0);
}
END_TEST

START_TEST(disposition_retry_fails_a_hopeless_job)
{
    retry_in_t in = job_in("connect", 1);
    in.hopeless = 1;
    retry_out_t out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_FAIL);
    ck_assert_int_eq(out.after_n, 1);
    in.hopeless = 0;
    ck_assert_int_eq(retry(&in).verdict, RETRY_AGAIN);
}
END_TEST

START_TEST(disposition_retry_fails_the_job_at_its_deadline)
{
    retry_in_t in = job_in("timeout", 0);
    in.rnd = 0; /* a delay of base/2: 500 ms */
    in.deadline_ms = 10000;
    in.elapsed_ms = 9499;
    retry_out_t out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_AGAIN);
    ck_assert_uint_eq(out.delay_ms, 500);
    in.elapsed_ms = 9500; /* the wait would reach the deadline */
    out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_FAIL);
    ck_assert_int_eq(out.deadline, 1);
    ck_assert_int_eq(out.after_n, 0);
    in.lane = 1; /* a lane's retries do not look at the job's deadline */
    in.want = 4;
    ck_assert_int_eq(retry(&in).verdict, RETRY_AGAIN);
}
END_TEST

START_TEST(disposition_retry_rewinds_a_lane_on_an_expired_link)
{
    const char *expired[] = {"http_403", "http_410"};
    for (size_t i = 0; i < 2; i++) {
        retry_in_t in = lane_in(expired[i], 0, 4);
        retry_out_t out = retry(&in);
        ck_assert_msg(out.verdict == RETRY_AGAIN, "%s", expired[i]);
        ck_assert_int_eq(out.rewind, 1);
        ck_assert_int_eq(out.fewer, 0);
        ck_assert_uint_le(out.delay_ms, 1000);
    }
}
END_TEST

/* The expired link's Retry-After says nothing of the one resolved again
 * (as when the rewind dropped it before the backoff was worked out); a
 * throttled lane's is kept. */
START_TEST(disposition_retry_a_rewound_lane_ignores_retry_after)
{
    retry_in_t in = lane_in("http_403", 0, 4);
    in.retry_after_ms = 5000;
    retry_out_t out = retry(&in);
    ck_assert_int_eq(out.rewind, 1);
    ck_assert_uint_le(out.delay_ms, 1000);
    in = lane_in("http_429", 0, 4);
    in.retry_after_ms = 5000;
    out = retry(&in);
    ck_assert_uint_ge(out.delay_ms, 5000);
}
END_TEST

START_TEST(disposition_retry_fails_a_lane_on_a_final_code)
{
    const char *final[] = {"http_404", "http_401", "dns", "no_space", "http_416"};
    for (size_t i = 0; i < sizeof final / sizeof final[0]; i++) {
        retry_in_t in = lane_in(final[i], 0, 4);
        retry_out_t out = retry(&in);
        ck_assert_msg(out.verdict == RETRY_FAIL, "%s", final[i]);
        ck_assert_int_eq(out.after_n, 0);
        ck_assert_int_eq(out.rewind, 0);
    }
    retry_in_t in = lane_in("timeout", 0, 4);
    retry_out_t out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_AGAIN);
    ck_assert_int_eq(out.rewind, 0);
    ck_assert_int_eq(out.fewer, 0);
}
END_TEST

START_TEST(disposition_retry_asks_a_throttled_lane_for_one_fewer)
{
    const char *busy[] = {"http_429", "http_503"};
    for (size_t i = 0; i < 2; i++) {
        retry_in_t in = lane_in(busy[i], 0, 2);
        in.retry_after_ms = 7000;
        retry_out_t out = retry(&in);
        ck_assert_msg(out.verdict == RETRY_AGAIN, "%s", busy[i]);
        ck_assert_int_eq(out.fewer, 1);
        ck_assert_uint_eq(out.delay_ms, 7000); /* after its Retry-After */
        in.want = 1;                           /* the last one stays */
        out = retry(&in);
        ck_assert_int_eq(out.verdict, RETRY_AGAIN);
        ck_assert_int_eq(out.fewer, 0);
    }
    retry_in_t in = lane_in("http_500", 0, 4); /* a server error is not a throttle */
    ck_assert_int_eq(retry(&in).fewer, 0);
}
END_TEST

START_TEST(disposition_retry_fails_a_lane_when_retries_are_spent)
{
    const char *codes[] = {"timeout", "http_503", "http_403"};
    for (size_t i = 0; i < 3; i++) {
        retry_in_t in = lane_in(codes[i], 2, 4);
        ck_assert_int_eq(retry(&in).verdict, RETRY_AGAIN);
        in.attempts = 3;
        retry_out_t out = retry(&in);
        ck_assert_msg(out.verdict == RETRY_FAIL, "%s", codes[i]);
        ck_assert_int_eq(out.after_n, 1);
        ck_assert_int_eq(out.fewer, 0);
        ck_assert_int_eq(out.rewind, 0);
    }
}
END_TEST

START_TEST(disposition_retry_fails_both_when_shutting_down)
{
    retry_in_t in = job_in("timeout", 0);
    in.shutting_down = 1;
    retry_out_t out = retry(&in);
    ck_assert_int_eq(out.verdict, RETRY_FAIL);
    ck_assert_int_eq(out.deadline, 0);
    in = lane_in("timeout", 0, 4);
    in.shutting_down = 1;
    ck_assert_int_eq(retry(&in).verdict, RETRY_FAIL);
    in = lane_in("http_410", 0, 4);
    in.shutting_down = 1;
    ck_assert_int_eq(retry(&in).verdict, RETRY_FAIL);
}
END_TEST

/* ---- an announced length ------------------------------------------------- */

START_TEST(disposition_length_refuses_what_cannot_be_kept)
{
    char msg[300];
    const uint64_t G = (uint64_t)1 << 30;
    disp_room_t room = {.max_file_size = 0, .fs_size = 250 * G, .floor = G};
    /* No max_file_size: what fits the file system less its floor goes on
     * (its free space is the write item's to judge). */
    ck_assert_ptr_null(disposition_length(100 * G, 1, &room, msg, sizeof msg));
    ck_assert_ptr_null(disposition_length(249 * G, 1, &room, msg, sizeof msg));
    ck_assert_ptr_null(disposition_length(0, 1, &room, msg, sizeof msg));
    /* A total no eviction can make room for: no_space, named. */
    ck_assert_str_eq(disposition_length(249 * G + 1, 1, &room, msg, sizeof msg), "no_space");
    ck_assert_str_eq(disposition_length(1000000000000000ull, 1, &room, msg, sizeof msg),
                     "no_space");
    ck_assert_ptr_nonnull(strstr(msg, "the origin announced 1000000000000000 bytes"));
    ck_assert_str_eq(disposition_length(INT64_MAX, 1, &room, msg, sizeof msg), "no_space");
    ck_assert_ptr_nonnull(strstr(msg, "9223372036854775807 bytes"));
    ck_assert_str_eq(disposition_length(UINT64_MAX, 0, &room, msg, sizeof msg), "no_space");
    ck_assert_ptr_nonnull(strstr(msg, "the download reached"));
    /* max_file_size first: too_large, naming both. */
    room.max_file_size = G;
    ck_assert_ptr_null(disposition_length(G, 1, &room, msg, sizeof msg));
    ck_assert_str_eq(disposition_length(INT64_MAX, 1, &room, msg, sizeof msg), "too_large");
    ck_assert_ptr_nonnull(strstr(msg, "max_file_size (1073741824 bytes)"));
    ck_assert_ptr_nonnull(strstr(msg, "announced 9223372036854775807 bytes"));
    /* The file system's size unknown: only max_file_size judges. */
    room = (disp_room_t){.floor = G};
    ck_assert_ptr_null(disposition_length(INT64_MAX, 1, &room, msg, sizeof msg));
    /* A floor as large as the file system: nothing fits. */
    room = (disp_room_t){.fs_size = G, .floor = 2 * G};
    ck_assert_str_eq(disposition_length(1, 1, &room, msg, sizeof msg), "no_space");
}
END_TEST

static Suite *disposition_suite(void)
{
    Suite *s = suite_create("disposition");
    TCase *head_tc = tcase_create("head");
    TCase *retry = tcase_create("retry");

    tcase_add_checked_fixture(head_tc, setup, teardown);
    tcase_add_test(head_tc, disposition_takes_a_whole_file);
    tcase_add_test(head_tc, disposition_407_is_the_proxys);
    tcase_add_test(head_tc, disposition_takes_the_range_asked_for);
    tcase_add_test(head_tc, disposition_checks_the_content_range);
    tcase_add_test(head_tc, disposition_restarts_when_the_range_is_ignored);
    tcase_add_test(head_tc, disposition_follows_redirects_within_the_rules);
    tcase_add_test(head_tc, disposition_refuses_a_downgrade);
    tcase_add_test(head_tc, disposition_reads_retry_after);
    tcase_add_test(head_tc, disposition_length_refuses_what_cannot_be_kept);
    suite_add_tcase(s, head_tc);

    tcase_add_test(retry, disposition_says_which_failures_retry);
    tcase_add_test(retry, disposition_backoff_doubles_with_jitter);
    tcase_add_test(retry, disposition_retry_fails_the_job_on_a_final_code);
    tcase_add_test(retry, disposition_retry_backs_off_the_job_on_a_transient_code);
    tcase_add_test(retry, disposition_retry_fails_the_job_when_retries_are_spent);
    tcase_add_test(retry, disposition_retry_fails_a_hopeless_job);
    tcase_add_test(retry, disposition_retry_fails_the_job_at_its_deadline);
    tcase_add_test(retry, disposition_retry_rewinds_a_lane_on_an_expired_link);
    tcase_add_test(retry, disposition_retry_a_rewound_lane_ignores_retry_after);
    tcase_add_test(retry, disposition_retry_fails_a_lane_on_a_final_code);
    tcase_add_test(retry, disposition_retry_asks_a_throttled_lane_for_one_fewer);
    tcase_add_test(retry, disposition_retry_fails_a_lane_when_retries_are_spent);
    tcase_add_test(retry, disposition_retry_fails_both_when_shutting_down);
    suite_add_tcase(s, retry);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(disposition_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
