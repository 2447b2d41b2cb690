/* Unit tests for config: sizes, durations, the INI file and its errors (the
 * settings table is test_config_keys.c's). */
#include "config.h"
#include "config_print.h"
#include "log.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <limits.h>
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

    /* Several errors: the line and the message are the first one's (inih
     * reports the first line and reads on). */
    path = write_conf("[hubd]\nretries = lots\nmax_downloads = zero\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, ":2: bad value 'lots' for key 'retries'"));
    unlink(path);
    path = write_conf("[hubd]\nnot a key line\nretries = lots\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, ":2: syntax error"));
    unlink(path);
    /* A line longer than inih reads at once is still one line. */
    char longer[1024];
    snprintf(longer, sizeof longer, "[hubd]\nallow_hosts = %0400d\nretries = lots\n", 0);
    ck_assert_int_eq(config_load_string(&cfg, longer, err, sizeof err), -EINVAL);
    ck_assert_str_eq(err, "<string>:3: bad value 'lots' for key 'retries'");
    ck_assert_int_eq(
        config_load_string(&cfg, "retries = 1\nretries = lots\nx = 1\n", err, sizeof err), -EINVAL);
    ck_assert_str_eq(err, "<string>:2: bad value 'lots' for key 'retries'");

    ck_assert_int_eq(config_load_file(&cfg, "/nonexistent/hubd.conf", err, sizeof err), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/hubd.conf"));
    config_free(&cfg);
}
END_TEST

/* A timeout of 0 would fail every download at once:
 * each of the four is refused with -EDOM, in any unit, and keeps its value;
 * the file loader says why. */
START_TEST(config_zero_timeouts_are_refused)
{
    static const char *const keys[] = {"connect_timeout", "idle_timeout", "first_byte_timeout",
                                       "header_timeout"};
    static const char *const zeros[] = {"0", "0ms", "0s", "0m", "0h", "0d", "000"};
    hubd_config_t cfg, def;
    char err[600], text[128];
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_int_eq(config_defaults(&def), 0);
    const unsigned *slot[] = {&cfg.connect_timeout_ms, &cfg.idle_timeout_ms,
                              &cfg.first_byte_timeout_ms, &cfg.header_timeout_ms};
    const unsigned dflt[] = {def.connect_timeout_ms, def.idle_timeout_ms, def.first_byte_timeout_ms,
                             def.header_timeout_ms};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        ck_assert_uint_gt(dflt[k], 0);
        for (size_t z = 0; z < sizeof zeros / sizeof zeros[0]; z++) {
            ck_assert_msg(config_set(&cfg, keys[k], zeros[z]) == -EDOM, "%s = %s", keys[k],
                          zeros[z]);
            ck_assert_uint_eq(*slot[k], dflt[k]);
        }
        /* The smallest that works. */
        ck_assert_int_eq(config_set(&cfg, keys[k], "1ms"), 0);
        ck_assert_uint_eq(*slot[k], 1);

        snprintf(text, sizeof text, "[hubd]\nretries = 2\n%s = 0\n", keys[k]);
        const char *path = write_conf(text);
        ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), -EDOM);
        ck_assert_msg(strstr(err, path) && strstr(err, ":3:"), "%s", err);
        ck_assert_msg(strstr(err, keys[k]), "%s", err);
        ck_assert_msg(strstr(err, "a timeout of 0 would fail every download"), "%s", err);
        unlink(path);
    }
    config_free(&cfg);
    config_free(&def);
}
END_TEST

/* 0 still means "none" or "off" where it always did. */
START_TEST(config_zero_means_none_where_documented)
{
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_uint_eq(cfg.deadline_ms, 0); /* the default: no deadline */
    ck_assert_int_eq(config_set(&cfg, "deadline", "10m"), 0);
    ck_assert_uint_eq(cfg.deadline_ms, 600000);
    ck_assert_int_eq(config_set(&cfg, "deadline", "0"), 0);
    ck_assert_uint_eq(cfg.deadline_ms, 0);
    ck_assert_int_eq(config_set(&cfg, "deadline", "0s"), 0);
    ck_assert_uint_eq(cfg.deadline_ms, 0);
    ck_assert_int_eq(config_set(&cfg, "low_speed_limit", "0"), 0); /* off */
    ck_assert_uint_eq(cfg.low_speed_limit, 0);
    ck_assert_int_eq(config_set(&cfg, "low_speed_time", "0"), 0); /* off */
    ck_assert_uint_eq(cfg.low_speed_time_ms, 0);
    ck_assert_int_eq(config_set(&cfg, "verify_interval", "0"), 0); /* never */
    ck_assert_uint_eq(cfg.verify_interval_ms, 0);
    ck_assert_int_eq(config_set(&cfg, "retry_delay", "0"), 0);
    ck_assert_uint_eq(cfg.retry_delay_ms, 0);
    config_free(&cfg);
}
END_TEST

/* Durations: plain seconds, or ms, s, m, h, d; at most what milliseconds
 * in an unsigned hold (49 days and a bit). */
START_TEST(config_duration_suffixes)
{
    static const struct {
        const char *text;
        unsigned ms;
    } ok[] = {
        {"5", 5000},     {"1500ms", 1500},  {"2s", 2000},         {"3m", 180000},
        {"1h", 3600000}, {"2d", 172800000}, {"49d", 4233600000u}, {"4294967295ms", UINT32_MAX},
    };
    static const char *const bad[] = {"",   "s",    "5x",   "1.5s", "-1s", "5 s",
                                      "5S", "5sec", "1ms5", "+",    "ms"};
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ck_assert_msg(config_set(&cfg, "idle_timeout", ok[i].text) == 0, "%s", ok[i].text);
        ck_assert_uint_eq(cfg.idle_timeout_ms, ok[i].ms);
        ck_assert_int_eq(config_set(&cfg, "verify_interval", ok[i].text), 0);
        ck_assert_uint_eq(cfg.verify_interval_ms, ok[i].ms);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(config_set(&cfg, "header_timeout", bad[i]) == -EINVAL, "'%s'", bad[i]);
    ck_assert_int_eq(config_set(&cfg, "idle_timeout", "50d"), -ERANGE);
    ck_assert_int_eq(config_set(&cfg, "idle_timeout", "4294968s"), -ERANGE);
    ck_assert_int_eq(config_set(&cfg, "deadline", "99999999999999999999"), -EINVAL);
    config_free(&cfg);
}
END_TEST

/* config_print's text of the new keys, and that it reads back
 * to the same values (hubd --check-config prints it). */

/* Removes the first occurrence of line from text, which must have it. */
static void cut_line(char *text, const char *line)
{
    char *at = strstr(text, line);
    ck_assert_ptr_nonnull(at);
    size_t n = strlen(line);
    memmove(at, at + n, strlen(at + n) + 1);
}

START_TEST(config_new_keys_print_and_read_back)
{
    static const struct {
        const char *key, *value, *printed;
    } cases[] = {
        {"header_timeout", "1500ms", "header_timeout = 1500ms\n"},
        {"connect_timeout", "2m", "connect_timeout = 120s\n"},
        {"deadline", "0", "deadline = 0s\n"},
        {"low_speed_limit", "2K", "low_speed_limit = 2048\n"},
        {"low_speed_time", "30s", "low_speed_time = 30s\n"},
        {"min_free_space", "1G", "min_free_space = 1G\n"},
        {"min_free_space", "5%", "min_free_space = 5%\n"},
        {"min_free_space", "1536M", "min_free_space = 1536M\n"},
        {"min_free_space", "0", "min_free_space = 0\n"},
        {"verify_interval", "7d", "verify_interval = 604800s\n"},
        {"verify_interval", "0", "verify_interval = 0s\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hubd_config_t cfg, back;
        char err[600] = "";
        ck_assert_int_eq(config_defaults(&cfg), 0);
        ck_assert_int_eq(config_defaults(&back), 0);
        ck_assert_msg(config_set(&cfg, cases[i].key, cases[i].value) == 0, "%s = %s", cases[i].key,
                      cases[i].value);
        char *text = print_config(&cfg);
        ck_assert_msg(strstr(text, cases[i].printed), "%s = %s printed as:\n%s", cases[i].key,
                      cases[i].value, text);
        const char *path = write_conf(text);
        ck_assert_msg(config_load_file(&back, path, err, sizeof err) == 0, "%s", err);
        unlink(path);
        ck_assert_uint_eq(back.header_timeout_ms, cfg.header_timeout_ms);
        ck_assert_uint_eq(back.connect_timeout_ms, cfg.connect_timeout_ms);
        ck_assert_uint_eq(back.deadline_ms, cfg.deadline_ms);
        ck_assert_uint_eq(back.low_speed_limit, cfg.low_speed_limit);
        ck_assert_uint_eq(back.low_speed_time_ms, cfg.low_speed_time_ms);
        ck_assert_uint_eq(back.min_free_space, cfg.min_free_space);
        ck_assert_uint_eq(back.min_free_percent, cfg.min_free_percent);
        ck_assert_uint_eq(back.verify_interval_ms, cfg.verify_interval_ms);
        free(text);
        config_free(&cfg);
        config_free(&back);
    }

    /* A size and a share replace each other. */
    hubd_config_t cfg;
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_uint_eq(cfg.min_free_space, 1ull << 30);
    ck_assert_uint_eq(cfg.min_free_percent, 0);
    ck_assert_int_eq(config_set(&cfg, "min_free_space", "5%"), 0);
    ck_assert_uint_eq(cfg.min_free_percent, 5);
    ck_assert_uint_eq(cfg.min_free_space, 0);
    ck_assert_int_eq(config_set(&cfg, "min_free_space", "1G"), 0);
    ck_assert_uint_eq(cfg.min_free_space, 1ull << 30);
    ck_assert_uint_eq(cfg.min_free_percent, 0);
    static const char *const bad_free[] = {"51%", "x%", "-5%", "5.5%", "1Q", "", "%%"};
    for (size_t i = 0; i < sizeof bad_free / sizeof bad_free[0]; i++)
        ck_assert_msg(config_set(&cfg, "min_free_space", bad_free[i]) == -EINVAL, "'%s'",
                      bad_free[i]);
    ck_assert_uint_eq(cfg.min_free_space, 1ull << 30); /* unchanged by the refusals */
    ck_assert_int_eq(config_set(&cfg, "low_speed_limit", "5G"), -EINVAL); /* above UINT_MAX */
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
    ck_assert_uint_eq(cfg.segment_min_size, def.segment_min_size);
    ck_assert_uint_eq(cfg.segment_chunk_size, def.segment_chunk_size);
    ck_assert_uint_eq(cfg.max_connections_per_download, def.max_connections_per_download);
    ck_assert_uint_eq(cfg.segment_budget, def.segment_budget);
    ck_assert_uint_eq(cfg.segment_stall_timeout_ms, def.segment_stall_timeout_ms);
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
    ck_assert_str_eq(cfg.hf_upstream, def.hf_upstream);
    ck_assert_ptr_null(cfg.http_listen.text); /* "# http_listen = ..." is an example, not read */
    config_free(&cfg);

    /* The file as shipped (and as the .deb installs it) has one active
     * line, on purpose: http_listen, whose default is off but which the
     * package turns on. Everything else it leaves at the
     * defaults. */
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_msg(config_load_file(&cfg, HUBD_SOURCE_DIR "/etc/hubd.conf", err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(cfg.http_listen.text, "127.0.0.1:8399, [::1]:8399");
    ck_assert_uint_eq(cfg.http_listen.n, 2);
    char *shipped = print_config(&cfg), *defaults = print_config(&def);
    cut_line(shipped, "http_listen = 127.0.0.1:8399, [::1]:8399\n");
    cut_line(defaults, "http_listen = \n");
    ck_assert_str_eq(shipped, defaults);
    free(shipped);
    free(defaults);
    config_free(&def);
    config_free(&cfg);
}
END_TEST

/* mirror: repeatable, checked at load (errors name file, line
 * and key), capped, printed back as read; mirror_fallback is yes/no; a
 * reload names both as needing a restart. */
START_TEST(config_mirror_rules)
{
    hubd_config_t cfg, back;
    char err[600] = "";
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_int_eq(cfg.mirror_fallback, 1);
    ck_assert_uint_eq(cfg.nmirrors, 0);
    const char *path =
        write_conf("[hubd]\nmirror = https://127.0.0.1:9/ http://127.0.0.1:8080/hf/\n"
                   "mirror = http://127.0.0.2/a/ http://127.0.0.1:8081/ credentials\n"
                   "mirror_fallback = no\n");
    ck_assert_msg(config_load_file(&cfg, path, err, sizeof err) == 0, "%s", err);
    unlink(path);
    ck_assert_uint_eq(cfg.nmirrors, 2);
    ck_assert_str_eq(cfg.mirrors[0].prefix, "https://127.0.0.1:9/");
    ck_assert_str_eq(cfg.mirrors[0].replacement, "http://127.0.0.1:8080/hf/");
    ck_assert_int_eq(cfg.mirrors[0].credentials, 0);
    ck_assert_int_eq(cfg.mirrors[1].credentials, 1);
    ck_assert_int_eq(cfg.mirror_fallback, 0);

    char *text = print_config(&cfg);
    ck_assert_ptr_nonnull(strstr(text, "mirror = https://127.0.0.1:9/ http://127.0.0.1:8080/hf/\n"
                                       "mirror = http://127.0.0.2/a/ http://127.0.0.1:8081/ "
                                       "credentials\nmirror_fallback = no\n"));
    ck_assert_int_eq(config_defaults(&back), 0);
    path = write_conf(text);
    ck_assert_msg(config_load_file(&back, path, err, sizeof err) == 0, "%s", err);
    unlink(path);
    free(text);
    ck_assert_uint_eq(back.nmirrors, 2);
    ck_assert_str_eq(back.mirrors[1].prefix, cfg.mirrors[1].prefix);
    ck_assert_int_eq(back.mirror_fallback, 0);

    char restart[300];
    ck_assert_int_eq(config_set(&back, "mirror", ""), 0); /* an empty value drops them all */
    ck_assert_uint_eq(back.nmirrors, 0);
    ck_assert_int_eq(config_set(&back, "mirror_fallback", "yes"), 0);
    config_apply_runtime(&cfg, &back, restart, sizeof restart);
    ck_assert_str_eq(restart, "mirror, mirror_fallback");
    ck_assert_uint_eq(cfg.nmirrors, 2); /* kept until the restart */

    static const char *const bad[] = {"https://127.0.0.1/", "ftp://127.0.0.1/ http://127.0.0.1/",
                                      "https://127.0.0.1/ http://127.0.0.1/ creds"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(config_set(&back, "mirror", bad[i]) == -EINVAL, "'%s'", bad[i]);
    ck_assert_int_eq(config_set(&back, "mirror_fallback", "maybe"), -EINVAL);
    ck_assert_uint_eq(back.nmirrors, 0);
    for (int i = 0; i < MIRROR_MAX_RULES; i++)
        ck_assert_int_eq(config_set(&back, "mirror", "https://127.0.0.1/ http://127.0.0.1:1/"), 0);
    ck_assert_int_eq(config_set(&back, "mirror", "https://127.0.0.1/ http://127.0.0.1:1/"), -E2BIG);

    path = write_conf("[hubd]\nretries = 1\nmirror = https://127.0.0.1/ http://127.0.0.1/ creds\n");
    ck_assert_int_eq(config_load_file(&cfg, path, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_msg(strstr(err, ":3: bad value 'https://127.0.0.1/ http://127.0.0.1/ creds' for key "
                              "'mirror': the third word of a rule can only be 'credentials'"),
                  "%s", err);
    unlink(path);
    config_free(&cfg);
    config_free(&back);
}
END_TEST

/* http_listen and hf_upstream: parsed at load into what the
 * listener and the front use, printed back to the same values, bad values
 * named with file, line, key and item, both needing a restart. */
START_TEST(config_http_listen_and_hf_upstream)
{
    hubd_config_t cfg, back;
    char err[600] = "", restart[300];
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_ptr_null(cfg.http_listen.text); /* off by default */
    ck_assert_uint_eq(cfg.http_listen.n, 0);
    ck_assert_str_eq(cfg.hf_upstream, "https://huggingface.co");

    ck_assert_int_eq(config_set(&cfg, "http_listen", "127.0.0.1:8399, [::1]:8399"), 0);
    ck_assert_uint_eq(cfg.http_listen.n, 2);
    const struct sockaddr_in *v4 = (const void *)&cfg.http_listen.addrs[0];
    const struct sockaddr_in6 *v6 = (const void *)&cfg.http_listen.addrs[1];
    ck_assert_int_eq(v4->sin_family, AF_INET);
    ck_assert_uint_eq(ntohs(v4->sin_port), 8399);
    ck_assert_uint_eq(ntohl(v4->sin_addr.s_addr), 0x7f000001);
    ck_assert_int_eq(v6->sin6_family, AF_INET6);
    ck_assert_int_eq(memcmp(&v6->sin6_addr, &in6addr_loopback, sizeof v6->sin6_addr), 0);
    ck_assert_int_eq(config_set(&cfg, "hf_upstream", "HTTP://127.0.0.1:8080/hf/"), 0);
    ck_assert_str_eq(cfg.hf_upstream, "http://127.0.0.1:8080/hf");
    ck_assert_uint_eq(cfg.http_header_timeout_ms, 30000); /* the default */
    ck_assert_int_eq(config_set(&cfg, "http_header_timeout", "1500ms"), 0);
    ck_assert_int_eq(config_set(&cfg, "http_header_timeout", "0"), -EDOM); /* never "none" */
    ck_assert_uint_eq(cfg.http_header_timeout_ms, 1500);

    char *text = print_config(&cfg);
    ck_assert_msg(strstr(text, "\nhttp_listen = 127.0.0.1:8399, [::1]:8399\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nhttp_header_timeout = 1500ms\n"), "%s", text);
    ck_assert_msg(strstr(text, "\nhf_upstream = http://127.0.0.1:8080/hf\n"), "%s", text);
    ck_assert_int_eq(config_defaults(&back), 0);
    const char *path = write_conf(text);
    ck_assert_msg(config_load_file(&back, path, err, sizeof err) == 0, "%s", err);
    unlink(path);
    free(text);
    ck_assert_str_eq(back.http_listen.text, cfg.http_listen.text);
    ck_assert_uint_eq(back.http_listen.n, 2);
    ck_assert_int_eq(
        memcmp(back.http_listen.addrs, cfg.http_listen.addrs, 2 * sizeof cfg.http_listen.addrs[0]),
        0);
    ck_assert_str_eq(back.hf_upstream, cfg.hf_upstream);
    ck_assert_uint_eq(back.http_header_timeout_ms, 1500);

    /* Off again: printed empty, read back as off. */
    ck_assert_int_eq(config_set(&back, "http_listen", " "), 0);
    ck_assert_ptr_null(back.http_listen.text);
    ck_assert_uint_eq(back.http_listen.n, 0);
    text = print_config(&back);
    ck_assert_msg(strstr(text, "\nhttp_listen = \n"), "%s", text);
    free(text);
    ck_assert_int_eq(config_set(&back, "hf_upstream", "https://huggingface.co/"), 0);
    config_apply_runtime(&cfg, &back, restart, sizeof restart);
    ck_assert_str_eq(restart, "http_listen, hf_upstream");
    ck_assert_uint_eq(cfg.http_listen.n, 2);             /* kept until the restart */
    ck_assert_uint_eq(cfg.http_header_timeout_ms, 1500); /* applied now */

    /* Refusals leave the value as it was. */
    static const char *const bad_listen[] = {"0.0.0.0:8399",   "192.168.1.1:80", "[::]:1",
                                             "example.org:80", "127.0.0.1",      "127.0.0.1:0",
                                             "127.0.0.1:1,"};
    for (size_t i = 0; i < sizeof bad_listen / sizeof bad_listen[0]; i++)
        ck_assert_msg(config_set(&cfg, "http_listen", bad_listen[i]) == -EINVAL, "'%s'",
                      bad_listen[i]);
    ck_assert_int_eq(config_set(&cfg, "http_listen",
                                "localhost:1,localhost:2,localhost:3,localhost:4,localhost:5,"
                                "localhost:6,localhost:7,localhost:8"),
                     0);
    ck_assert_uint_eq(cfg.http_listen.n, 16);
    ck_assert_int_eq(config_set(&cfg, "http_listen",
                                "localhost:1,localhost:2,localhost:3,localhost:4,localhost:5,"
                                "localhost:6,localhost:7,localhost:8,localhost:9"),
                     -E2BIG);
    ck_assert_uint_eq(cfg.http_listen.n, 16);
    static const char *const bad_up[] = {"",
                                         "huggingface.co",
                                         "ftp://huggingface.co",
                                         "https://huggingface.co/?a=1",
                                         "https://huggingface.co/#top",
                                         "https://user:pw@huggingface.co"};
    for (size_t i = 0; i < sizeof bad_up / sizeof bad_up[0]; i++)
        ck_assert_msg(config_set(&cfg, "hf_upstream", bad_up[i]) == -EINVAL, "'%s'", bad_up[i]);
    ck_assert_str_eq(cfg.hf_upstream, "http://127.0.0.1:8080/hf");

    /* The file loader names file, line, key and the item. */
    path = write_conf("[hubd]\nretries = 1\nhttp_listen = 127.0.0.1:8399, 0.0.0.0:8399\n");
    ck_assert_int_eq(config_load_file(&back, path, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_msg(strstr(err, ":3: http_listen: 0.0.0.0:8399 is not a loopback address: the "
                              "HTTP front serves this machine only"),
                  "%s", err);
    unlink(path);
    path = write_conf("hf_upstream = https://huggingface.co/api?x=1\n");
    ck_assert_int_eq(config_load_file(&back, path, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, ":1: bad value 'https://huggingface.co/api?x=1' for key "
                              "'hf_upstream': a query has no place in it"),
                  "%s", err);
    unlink(path);
    config_free(&cfg);
    config_free(&back);
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
    tcase_add_test(tc, config_zero_timeouts_are_refused);
    tcase_add_test(tc, config_zero_means_none_where_documented);
    tcase_add_test(tc, config_duration_suffixes);
    tcase_add_test(tc, config_new_keys_print_and_read_back);
    tcase_add_test(tc, config_shipped_file_documents_defaults);
    tcase_add_test(tc, config_reload_splits_runtime_and_restart_keys);
    tcase_add_test(tc, config_mirror_rules);
    tcase_add_test(tc, config_http_listen_and_hf_upstream);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
