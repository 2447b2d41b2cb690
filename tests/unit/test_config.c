/* Unit tests for config: sizes, durations, the INI file and its errors. */
#include "config.h"
#include "log.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpfile_path[64];

static const char *write_conf(const char *text)
{
    snprintf(tmpfile_path, sizeof tmpfile_path, "/tmp/hubd-config-test-XXXXXX");
    int fd = mkstemp(tmpfile_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return tmpfile_path;
}

START_TEST(config_parse_size_suffixes)
{
    uint64_t v;
    ck_assert_int_eq(config_parse_size("4096", &v), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(config_parse_size("256K", &v), 0);
    ck_assert_uint_eq(v, 256 * 1024);
    ck_assert_int_eq(config_parse_size("3M", &v), 0);
    ck_assert_uint_eq(v, 3u << 20);
    ck_assert_int_eq(config_parse_size("2GiB", &v), 0);
    ck_assert_uint_eq(v, 2ull << 30);
    ck_assert_int_eq(config_parse_size("1t", &v), 0);
    ck_assert_uint_eq(v, 1ull << 40);
    ck_assert_int_eq(config_parse_size("", &v), -EINVAL);
    ck_assert_int_eq(config_parse_size("-1", &v), -EINVAL);
    ck_assert_int_eq(config_parse_size("12X", &v), -EINVAL);
    ck_assert_int_eq(config_parse_size("K", &v), -EINVAL);
    ck_assert_int_eq(config_parse_size("99999999999T", &v), -ERANGE);
}
END_TEST

START_TEST(config_set_validates_values)
{
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_uint_eq(cfg.read_buffer_size, 256 * 1024);
    ck_assert_int_eq(config_set(&cfg, "read_buffer_size", "1M"), 0);
    ck_assert_uint_eq(cfg.read_buffer_size, 1 << 20);
    ck_assert_int_eq(config_set(&cfg, "read_buffer_size", "100"), -EINVAL); /* below 4K */
    ck_assert_int_eq(config_set(&cfg, "connect_timeout", "250ms"), 0);
    ck_assert_uint_eq(cfg.connect_timeout_ms, 250);
    ck_assert_int_eq(config_set(&cfg, "idle_timeout", "7s"), 0);
    ck_assert_uint_eq(cfg.idle_timeout_ms, 7000);
    ck_assert_int_eq(config_set(&cfg, "idle_timeout", "7 minutes"), -EINVAL);
    ck_assert_int_eq(config_set(&cfg, "max_downloads", "0"), -EINVAL);
    ck_assert_int_eq(config_set(&cfg, "max_redirects", "3"), 0);
    ck_assert_uint_eq(cfg.max_redirects, 3);
    ck_assert_int_eq(config_set(&cfg, "log_level", "debug"), 0);
    ck_assert_int_eq(cfg.log_level, LOG_LVL_DEBUG);
    ck_assert_int_eq(config_set(&cfg, "log_level", "loud"), -EINVAL);
    ck_assert_int_eq(config_set(&cfg, "no_such_key", "1"), -ENOENT);
    ck_assert_int_eq(config_set(&cfg, "cache_dir", "/x/y"), 0);
    ck_assert_str_eq(cfg.cache_dir, "/x/y");
    config_free(&cfg);
}
END_TEST

START_TEST(config_file_sets_keys)
{
    hubd_config_t cfg;
    char err[600] = "";
    ck_assert_int_eq(config_defaults(&cfg), 0);
    const char *path = write_conf("# comment\n[hubd]\nmax_per_host = 3\nsocket = /tmp/x.sock\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), 0);
    ck_assert_uint_eq(cfg.max_per_host, 3);
    ck_assert_str_eq(cfg.socket_path, "/tmp/x.sock");
    unlink(path);
    config_free(&cfg);
}
END_TEST

START_TEST(config_file_errors_name_file_line_key)
{
    hubd_config_t cfg;
    char err[600] = "";
    ck_assert_int_eq(config_defaults(&cfg), 0);
    const char *path = write_conf("[hubd]\nmax_downloads = 4\n\nmax_dowloads = 5\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_ptr_nonnull(strstr(err, ":4:"));
    ck_assert_ptr_nonnull(strstr(err, "unknown key 'max_dowloads'"));
    unlink(path);

    path = write_conf("idle_timeout = soon\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, ":1: bad value 'soon' for key 'idle_timeout'"));
    unlink(path);

    path = write_conf("[other]\nx = 1\n");
    ck_assert_int_lt(config_load_file(&cfg, path, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "unknown section [other]"));
    unlink(path);

    ck_assert_int_eq(config_load_file(&cfg, "/nonexistent/hubd.conf", err, sizeof err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/hubd.conf"));
    config_free(&cfg);
}
END_TEST

/* The shipped etc/hubd.conf with every key uncommented must parse and give
 * back exactly the defaults it documents. */
START_TEST(config_shipped_file_documents_defaults)
{
    FILE *f = fopen(HUBD_SOURCE_DIR "/etc/hubd.conf", "r");
    ck_assert_ptr_nonnull(f);
    char text[8192] = "", line[512];
    while (fgets(line, sizeof line, f)) {
        /* "#key = value" lines are the documented defaults */
        if (line[0] == '#' && line[1] >= 'a' && line[1] <= 'z' && strchr(line, '='))
            strcat(text, line + 1);
        else if (line[0] == '[')
            strcat(text, line);
    }
    fclose(f);
    hubd_config_t def, cfg;
    char err[600] = "";
    ck_assert_int_eq(config_defaults(&def), 0);
    ck_assert_int_eq(config_defaults(&cfg), 0);
    const char *path = write_conf(text);
    ck_assert_msg(config_load_file(&cfg, path, err, sizeof err) == 0, "%s", err);
    unlink(path);
    ck_assert_uint_eq(cfg.read_buffer_size, def.read_buffer_size);
    ck_assert_uint_eq(cfg.max_inflight, def.max_inflight);
    ck_assert_uint_eq(cfg.max_downloads, def.max_downloads);
    ck_assert_uint_eq(cfg.max_per_host, def.max_per_host);
    ck_assert_uint_eq(cfg.connect_timeout_ms, def.connect_timeout_ms);
    ck_assert_uint_eq(cfg.idle_timeout_ms, def.idle_timeout_ms);
    ck_assert_uint_eq(cfg.keepalive_ms, def.keepalive_ms);
    ck_assert_uint_eq(cfg.first_byte_timeout_ms, def.first_byte_timeout_ms);
    ck_assert_uint_eq(cfg.deadline_ms, def.deadline_ms);
    ck_assert_uint_eq(cfg.retries, def.retries);
    ck_assert_uint_eq(cfg.retry_delay_ms, def.retry_delay_ms);
    ck_assert_uint_eq(cfg.retry_max_delay_ms, def.retry_max_delay_ms);
    ck_assert_uint_eq(cfg.max_redirects, def.max_redirects);
    ck_assert_int_eq(cfg.log_level, def.log_level);
    ck_assert_str_eq(cfg.tls_ciphers, def.tls_ciphers);
    ck_assert_ptr_null(cfg.ca_path);
    ck_assert_ptr_null(cfg.tls_insecure_hosts);
    ck_assert_uint_eq(cfg.socket_mode, def.socket_mode);
    ck_assert_ptr_null(cfg.socket_group);
    ck_assert_str_eq(cfg.admin_group, def.admin_group);
    ck_assert_uint_eq(cfg.max_cache_size, def.max_cache_size);
    ck_assert_str_eq(cfg.deny_networks, def.deny_networks);
    ck_assert_uint_eq(cfg.max_requests_per_user, def.max_requests_per_user);
    ck_assert_uint_eq(cfg.max_jobs_per_user, def.max_jobs_per_user);
    ck_assert_uint_eq(cfg.max_file_size, def.max_file_size);
    ck_assert_ptr_null(cfg.allow_users);
    ck_assert_ptr_null(cfg.allow_groups);
    ck_assert_ptr_null(cfg.allow_networks);
    ck_assert_ptr_null(cfg.allow_hosts);
    config_free(&def);
    config_free(&cfg);
}
END_TEST

/* SIGHUP: run-time keys move over, the others are named. */
START_TEST(config_reload_splits_runtime_and_restart_keys)
{
    hubd_config_t cur, next;
    char restart[300];
    ck_assert_int_eq(config_defaults(&cur), 0);
    ck_assert_int_eq(config_defaults(&next), 0);
    ck_assert_int_eq(config_set(&next, "max_cache_size", "2G"), 0);
    ck_assert_int_eq(config_set(&next, "retries", "9"), 0);
    ck_assert_int_eq(config_set(&next, "admin_group", "wheel"), 0);
    ck_assert_int_eq(config_set(&next, "read_buffer_size", "64K"), 0);
    ck_assert_int_eq(config_set(&next, "socket_mode", "0600"), 0);
    config_apply_runtime(&cur, &next, restart, sizeof restart);
    ck_assert_uint_eq(cur.max_cache_size, 2ull << 30);
    ck_assert_uint_eq(cur.retries, 9);
    ck_assert_str_eq(cur.admin_group, "wheel");
    ck_assert_uint_eq(cur.read_buffer_size, 256 * 1024); /* unchanged: needs a restart */
    ck_assert_str_eq(restart, "socket_mode, read_buffer_size");
    config_apply_runtime(&cur, &cur, restart, sizeof restart);
    ck_assert_str_eq(restart, "");
    ck_assert_int_eq(config_set(&cur, "socket_mode", "0400"), -EINVAL); /* owner cannot write */
    config_free(&cur);
    config_free(&next);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, config_parse_size_suffixes);
    tcase_add_test(tc, config_set_validates_values);
    tcase_add_test(tc, config_file_sets_keys);
    tcase_add_test(tc, config_file_errors_name_file_line_key);
    tcase_add_test(tc, config_shipped_file_documents_defaults);
    tcase_add_test(tc, config_reload_splits_runtime_and_restart_keys);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
