/* Unit tests for the verb table: which verbs exist, who may call them,
 * which need an id=, and what an id= may be. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

START_TEST(verbs_unknown_and_case_sensitive)
{
    ck_assert_ptr_null(verbs_find("NOPE"));
    ck_assert_ptr_null(verbs_find("fetch")); /* verbs are upper case, as sent */
    ck_assert_ptr_null(verbs_find(""));
    ck_assert_ptr_null(verbs_find("FETCHX"));
}
END_TEST

START_TEST(verbs_anyone_may_call)
{
    static const char *const open[] = {"FETCH", "HELLO", "STATUS", "STATS", "LIST"};
    for (size_t i = 0; i < sizeof open / sizeof open[0]; i++) {
        const verb_t *v = verbs_find(open[i]);
        ck_assert_ptr_nonnull(v);
        ck_assert_str_eq(v->name, open[i]);
        ck_assert_int_eq(v->who, VERB_ANYONE);
        ck_assert_ptr_nonnull(v->fn);
    }
    ck_assert_str_eq(verbs_find("FETCH")->id_rule, "FETCH needs id= (1 to 64 printable bytes)");
    ck_assert_ptr_null(verbs_find("HELLO")->id_rule);
    ck_assert_ptr_null(verbs_find("STATUS")->id_rule);
}
END_TEST

START_TEST(verbs_admin_only)
{
    static const char *const admin[] = {"RM", "PIN", "UNPIN", "GC", "VERIFY"};
    for (size_t i = 0; i < sizeof admin / sizeof admin[0]; i++) {
        const verb_t *v = verbs_find(admin[i]);
        ck_assert_ptr_nonnull(v);
        ck_assert_int_eq(v->who, VERB_ADMIN);
        ck_assert_str_eq(v->id_rule, "admin requests need id= (1 to 64 printable bytes)");
    }
    ck_assert_int_ne(verbs_find("PIN")->arg, verbs_find("UNPIN")->arg);
}
END_TEST

/* FLEET names every user's downloads in the swarm: admins only, no id=
 * (answered at once, in order, as STATUS is). */
START_TEST(verbs_fleet_is_for_admins)
{
    const verb_t *v = verbs_find("FLEET");
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->who, VERB_ADMIN);
    ck_assert_ptr_null(v->id_rule);
    ck_assert_ptr_nonnull(v->fn);
}
END_TEST

START_TEST(verbs_ids)
{
    char id[VERB_ID_MAX + 2];
    memset(id, 'a', sizeof id);
    id[VERB_ID_MAX] = '\0';
    ck_assert(verbs_valid_id(id));
    id[VERB_ID_MAX] = 'a';
    id[VERB_ID_MAX + 1] = '\0';
    ck_assert(!verbs_valid_id(id)); /* 65 bytes */
    ck_assert(verbs_valid_id("1"));
    ck_assert(verbs_valid_id("job-7/x"));
    ck_assert(!verbs_valid_id(""));
    ck_assert(!verbs_valid_id("a b"));
    ck_assert(!verbs_valid_id("a\tb"));
    ck_assert(!verbs_valid_id("\xc3\xa9"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("verbs");
    TCase *tc = tcase_create("verbs");
    tcase_add_test(tc, verbs_unknown_and_case_sensitive);
    tcase_add_test(tc, verbs_anyone_may_call);
    tcase_add_test(tc, verbs_admin_only);
    tcase_add_test(tc, verbs_fleet_is_for_admins);
    tcase_add_test(tc, verbs_ids);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
