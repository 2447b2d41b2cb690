/* Unit tests for hub_req's pure parts: the Hub's refusal in its own words
 * (one text for HFREPO and the socket's FETCH), and a body taken with its
 * charge to a budget, given back once. The request itself is driven by the
 * integration tests (test_hub_socket.py, test_front_hf*.py). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "hub_req.h"
#include "quota.h"

START_TEST(hub_req_refusal_in_the_hubs_words)
{
    char code[16], msg[64];
    hub_refusal(403, "GatedRepo", "Access restricted", code, msg, sizeof msg);
    ck_assert_str_eq(code, "http_403");
    ck_assert_str_eq(msg, "GatedRepo: Access restricted");
    hub_refusal(404, "RepoNotFound", NULL, code, msg, sizeof msg);
    ck_assert_str_eq(msg, "RepoNotFound");
    hub_refusal(401, NULL, "Invalid credentials", code, msg, sizeof msg);
    ck_assert_str_eq(msg, "Invalid credentials");
    hub_refusal(500, NULL, NULL, code, msg, sizeof msg);
    ck_assert_str_eq(code, "http_500");
    ck_assert_str_eq(msg, "the Hub answered HTTP 500");
}
END_TEST

START_TEST(hub_req_taken_body_carries_its_charge)
{
    hub_budget_t b = {.max = 100};
    hub_answer_t a;
    memset(&a, 0, sizeof a);
    bytebuf_init(&a.body, 64);
    ck_assert_int_eq(bytebuf_append(&a.body, "0123456789", 10), 0);
    a.charged = 10;
    b.used = 30; /* this one's 10, and another's 20 */
    bytebuf_t out;
    ck_assert_uint_eq(hub_answer_take_body(&a, &out), 10);
    ck_assert_uint_eq(bytebuf_len(&out), 10);
    ck_assert_uint_eq(bytebuf_len(&a.body), 0);
    ck_assert_uint_eq(a.charged, 0);
    bytebuf_free(&out);
    hub_budget_release(&b, 10);
    ck_assert_uint_eq(b.used, 20);
    hub_budget_release(&b, 50); /* never below zero */
    ck_assert_uint_eq(b.used, 0);
    hub_budget_release(NULL, 5);
}
END_TEST

START_TEST(hub_req_one_budget_for_the_daemon)
{
    /* HFREPO and the /hf/api routes name the same one, for all users */
    hub_budget_t *b = hub_budget();
    ck_assert_ptr_eq(b, hub_budget());
    ck_assert_uint_eq(b->max, HUB_BUDGET);
    ck_assert_uint_eq(b->max, 64u << 20);
    ck_assert_uint_eq(b->used, 0);
}
END_TEST

START_TEST(hub_req_hfrepos_in_flight_per_uid)
{
    quota_t q = {0};
    principal_t alice = {.uid = 1000, .charged = 1000}, bob = {.uid = 1001, .charged = 1001};
    char msg[160];
    for (int i = 0; i < QUOTA_USER_MAX_HFREPOS; i++)
        ck_assert_int_eq(quota_hfrepo_begin(&q, &alice, msg, sizeof msg), 0);
    ck_assert_int_ne(quota_hfrepo_begin(&q, &alice, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "uid 1000 has 4 HFREPO requests in flight already (at most 4 at once)");
    ck_assert_int_eq(quota_hfrepo_begin(&q, &bob, msg, sizeof msg), 0); /* per uid */
    quota_hfrepo_end(&q, &alice);
    ck_assert_int_eq(quota_hfrepo_begin(&q, &alice, msg, sizeof msg), 0);
    ck_assert_int_eq(quota_request_admit(&q, &alice, 0, msg, sizeof msg), 0); /* 0: no limit */
    ck_assert_int_ne(quota_request_admit(&q, &alice, 1, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "uid 1000 has 1 requests waiting already (max_requests_per_user)");
    quota_free(&q);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hub_req");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, hub_req_refusal_in_the_hubs_words);
    tcase_add_test(tc, hub_req_taken_body_carries_its_charge);
    tcase_add_test(tc, hub_req_one_budget_for_the_daemon);
    tcase_add_test(tc, hub_req_hfrepos_in_flight_per_uid);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
