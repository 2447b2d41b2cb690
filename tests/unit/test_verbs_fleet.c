/* Unit tests for daemon/session/verbs_fleet.c, included to reach its sink:
 * what the hook tells becomes protocol lines, kept in bounded buffers, and
 * what is past the bound is counted, not kept. */
#include "../../daemon/session/verbs_fleet.c"

#include <check.h>
#include <stdlib.h>

static void sink_init(session_fleet_sink_t *k)
{
    memset(k, 0, sizeof *k);
    bytebuf_init(&k->files, FLEET_FILES_MAX);
    bytebuf_init(&k->peers, FLEET_PEERS_MAX);
}

static void sink_free(session_fleet_sink_t *k)
{
    bytebuf_free(&k->files);
    bytebuf_free(&k->peers);
}

/* The first line of b, parsed. */
static void first_line(const bytebuf_t *b, proto_msg_t *m)
{
    const char *p = bytebuf_data(b), *nl = memchr(p, '\n', bytebuf_len(b));
    ck_assert_ptr_nonnull(nl);
    ck_assert_int_eq(proto_parse(p, (size_t)(nl - p), m), 0);
}

START_TEST(verbs_fleet_lines_say_what_the_hook_told)
{
    session_fleet_sink_t k;
    sink_init(&k);
    char listen[32] = "10.0.0.11:7000";
    session_fleet_node(&k, &(session_fleet_node_t){.listen = listen, .members = 3, .up = 7});
    strcpy(listen, "changed"); /* the caller's string: copied */
    ck_assert_str_eq(k.node.listen, "10.0.0.11:7000");
    ck_assert_int_eq(k.node.members, 3);
    session_fleet_file(&k, &(session_fleet_file_t){.sha256 = "ab",
                                                   .state = "seeding",
                                                   .size = 10,
                                                   .done = 10,
                                                   .up = 4,
                                                   .peers = 1,
                                                   .info_hash = "",
                                                   .info_hash_v1 = "cd"});
    session_fleet_peer(&k,
                       &(session_fleet_peer_t){.addr = "10.0.0.12:7000", .down = 9, .files = 2});
    proto_msg_t m;
    first_line(&k.files, &m);
    ck_assert_str_eq(m.verb, "FILE");
    ck_assert_str_eq(proto_get(&m, "sha256"), "ab");
    ck_assert_str_eq(proto_get(&m, "state"), "seeding");
    ck_assert_str_eq(proto_get(&m, "done"), "10");
    ck_assert_str_eq(proto_get(&m, "up"), "4");
    ck_assert_ptr_null(proto_get(&m, "info_hash")); /* unknown yet: left out */
    ck_assert_str_eq(proto_get(&m, "info_hash_v1"), "cd");
    first_line(&k.peers, &m);
    ck_assert_str_eq(m.verb, "PEER");
    ck_assert_str_eq(proto_get(&m, "addr"), "10.0.0.12:7000");
    ck_assert_str_eq(proto_get(&m, "down"), "9");
    ck_assert_str_eq(proto_get(&m, "files"), "2");
    ck_assert_int_eq(k.nfiles, 1);
    ck_assert_int_eq(k.npeers, 1);
    sink_free(&k);
}
END_TEST

/* A node seeding a large cache: the FILE lines stop at the bound, the rest
 * are counted; every line kept is whole. */
START_TEST(verbs_fleet_files_past_the_bound_are_counted)
{
    session_fleet_sink_t k;
    sink_init(&k);
    char sha[65];
    unsigned n = 10000;
    for (unsigned i = 0; i < n; i++) {
        snprintf(sha, sizeof sha, "%064u", i);
        session_fleet_file(&k, &(session_fleet_file_t){.sha256 = sha,
                                                       .state = "seeding",
                                                       .size = 1ull << 40,
                                                       .done = 1ull << 40,
                                                       .info_hash = sha,
                                                       .info_hash_v1 = "0123456789"});
    }
    ck_assert_uint_gt(k.files_left, 0);
    ck_assert_uint_eq(k.nfiles + k.files_left, n);
    ck_assert_uint_le(bytebuf_len(&k.files), FLEET_FILES_MAX);
    size_t lines = 0;
    for (size_t i = 0; i < bytebuf_len(&k.files); i++)
        lines += bytebuf_data(&k.files)[i] == '\n';
    ck_assert_uint_eq(lines, k.nfiles);
    ck_assert_int_eq(bytebuf_data(&k.files)[bytebuf_len(&k.files) - 1], '\n');
    sink_free(&k);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("verbs_fleet");
    TCase *tc = tcase_create("verbs_fleet");
    tcase_add_test(tc, verbs_fleet_lines_say_what_the_hook_told);
    tcase_add_test(tc, verbs_fleet_files_past_the_bound_are_counted);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
