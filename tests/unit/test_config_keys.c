/* Unit tests for config: the settings table, one row per key,
 * which parsing, the defaults, config_print and the reload all read; and
 * that hubd.conf(5) and etc/hubd.conf document every row. */
#include "config.h"
#include "config_print.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each row: a name found by config_key_find, a type, one line of help; a
 * size held in an unsigned has bounds that fit it. */
START_TEST(config_table_rows_are_well_formed)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    ck_assert_uint_ge(n, 50);
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        ck_assert_msg(config_key_find(k->name) == k, "%s: found twice or not at all", k->name);
        ck_assert_msg(k->help && *k->help && !strchr(k->help, '\n'), "%s: help", k->name);
        ck_assert_msg(config_key_type(k) && *config_key_type(k), "%s: type", k->name);
        ck_assert_msg(!(k->def && k->def_fn), "%s: two defaults", k->name);
        ck_assert_msg(k->min <= k->max, "%s: bounds", k->name);
        if (strcmp(config_key_type(k), "size") == 0 && k->width == sizeof(unsigned))
            ck_assert_msg(k->max <= UINT_MAX, "%s: max past its field", k->name);
    }
    ck_assert_ptr_null(config_key_find("no_such_key"));
}
END_TEST

/* Every default is a value its parser takes, and gives what
 * config_defaults gives; the defaults print and read back to the same. */
START_TEST(config_table_defaults_parse_and_print_back)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    hubd_config_t def, cfg;
    char err[600] = "";
    ck_assert_int_eq(config_defaults(&def), 0);
    char *want = print_config(&def);
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        char *computed = k->def_fn ? k->def_fn() : NULL;
        const char *text = k->def ? k->def : computed;
        if (!text) { /* unset by default (ca_file, proxy, no_proxy): no "key = " line */
            char line[128];
            snprintf(line, sizeof line, "\n%s = ", k->name);
            ck_assert_msg(!strstr(want, line), "%s: printed while unset", k->name);
            continue;
        }
        ck_assert_int_eq(config_defaults(&cfg), 0);
        ck_assert_msg(config_set(&cfg, k->name, text) == 0, "%s = %s refused", k->name, text);
        char *got = print_config(&cfg);
        ck_assert_msg(strcmp(got, want) == 0, "%s = %s is not the default:\n%s", k->name, text,
                      got);
        free(got);
        free(computed);
        config_free(&cfg);
    }
    ck_assert_int_eq(config_defaults(&cfg), 0);
    ck_assert_msg(config_load_string(&cfg, want, err, sizeof err) == 0, "%s", err);
    char *again = print_config(&cfg);
    ck_assert_str_eq(again, want);
    free(again);
    free(want);
    config_free(&cfg);
    config_free(&def);
}
END_TEST

/* A number's bounds in its row are what its parser takes. */
START_TEST(config_table_bounds_are_the_parsers)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    size_t checked = 0;
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        const char *type = config_key_type(k);
        if (strcmp(type, "unsigned") != 0 && strcmp(type, "size") != 0)
            continue;
        hubd_config_t cfg;
        char v[32];
        ck_assert_int_eq(config_defaults(&cfg), 0);
        snprintf(v, sizeof v, "%llu", (unsigned long long)k->min);
        ck_assert_msg(config_set(&cfg, k->name, v) == 0, "%s = %s (its min) refused", k->name, v);
        snprintf(v, sizeof v, "%llu", (unsigned long long)k->max);
        ck_assert_msg(config_set(&cfg, k->name, v) == 0, "%s = %s (its max) refused", k->name, v);
        if (k->min > 0) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)k->min - 1);
            ck_assert_msg(config_set(&cfg, k->name, v) == -EINVAL, "%s = %s taken", k->name, v);
        }
        if (k->max < UINT64_MAX) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)k->max + 1);
            ck_assert_msg(config_set(&cfg, k->name, v) == -EINVAL, "%s = %s taken", k->name, v);
        }
        config_free(&cfg);
        checked++;
    }
    ck_assert_uint_ge(checked, 15);
}
END_TEST

/* The text of a file of the source tree (freed by the caller). */
static char *read_source(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", HUBD_SOURCE_DIR, rel);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s", path);
    char *text = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(text);
    size_t len = fread(text, 1, (1 << 20) - 1, f);
    ck_assert(feof(f));
    fclose(f);
    text[len] = '\0';
    return text;
}

/* Whether line (up to its '\n') starts with key and then one of ends. */
static int starts_with_key(const char *line, const char *key, const char *ends)
{
    size_t n = strlen(key);
    return strncmp(line, key, n) == 0 &&
           (line[n] == '\0' || line[n] == '\n' || strchr(ends, line[n]));
}

/* etc/hubd.conf names it ("key =", "#key =" or "# key ="). */
static int conf_names(const char *text, const char *key)
{
    for (const char *l = text; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *p = l;
        if (*p == '#')
            p += p[1] == ' ' ? 2 : 1;
        char k[128];
        snprintf(k, sizeof k, "%s =", key);
        if (strncmp(p, k, strlen(k)) == 0)
            return 1;
    }
    return 0;
}

/* hubd.conf(5)'s tagged paragraph for it: ".TP" or ".TQ", then ".B",
 * ".BI" or ".BR" and the key (quoted or not), as packaging_conf_doc reads
 * the page. Returns its tag line, or NULL. */
static const char *man_entry(const char *text, const char *key)
{
    const char *prev = "";
    for (const char *l = text; l; prev = l, l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(prev, ".TP\n", 4) != 0 && strncmp(prev, ".TQ\n", 4) != 0)
            continue;
        if (strncmp(l, ".B", 2) != 0)
            continue;
        const char *p = l + 2;
        if (*p == 'I' || *p == 'R')
            p++;
        if (*p != ' ' && *p != '\t')
            continue;
        p += strspn(p, " \t");
        p += *p == '"';
        if (starts_with_key(p, key, " \t\""))
            return l;
    }
    return NULL;
}

/* What the entry at tag says of a reload: "Reload: yes" 1, "Reload: no"
 * 0, neither -1 (up to the next entry or section). */
static int man_reload(const char *tag)
{
    const char *end = tag + strlen(tag);
    static const char *const next[] = {"\n.TP\n", "\n.SS", "\n.SH"};
    for (size_t i = 0; i < sizeof next / sizeof next[0]; i++) {
        const char *e = strstr(tag, next[i]);
        end = e && e < end ? e : end;
    }
    const char *r = strstr(tag, "Reload: ");
    if (!r || r > end)
        return -1;
    return strncmp(r + 8, "yes", 3) == 0 ? 1 : strncmp(r + 8, "no", 2) == 0 ? 0 : -1;
}

START_TEST(config_table_keys_are_documented)
{
    char *conf = read_source("etc/hubd.conf"), *man = read_source("docs/man/hubd.conf.5");
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        ck_assert_msg(conf_names(conf, k->name), "etc/hubd.conf does not name %s", k->name);
        const char *entry = man_entry(man, k->name);
        ck_assert_msg(entry, "docs/man/hubd.conf.5 has no entry for %s", k->name);
        /* The page says whether a reload applies it: as the row does. */
        int reload = man_reload(entry);
        ck_assert_msg(reload >= 0, "docs/man/hubd.conf.5: no 'Reload: yes|no' for %s", k->name);
        ck_assert_msg(reload == !!(k->flags & CONFIG_RELOAD),
                      "%s: docs/man/hubd.conf.5 says Reload: %s, the row says otherwise", k->name,
                      reload ? "yes" : "no");
    }
    ck_assert(!conf_names(conf, "no_such_key") && !man_entry(man, "no_such_key"));
    ck_assert(!man_entry(man, "socket_")); /* a key, not a prefix of one */
    free(conf);
    free(man);
}
END_TEST

/* A value for the row other than its default: the first of its type's
 * candidates that it takes and that prints differently. */
static const char *other_value(const config_key_t *k, const char *defaults, char *buf, size_t cap)
{
    static const struct {
        const char *type, *values[3];
    } cand[] = {
        {"string", {"/tmp/hubd-other"}},
        {"optional string", {"other.example", "10.1.0.0/16", "10.1.0.1:7000"}},
        {"set string", {"other.example"}},
        {"proxy URL", {"http://user:pw@proxy.example:3128"}},
        {"duration", {"1234ms"}},
        {"timeout", {"1234ms"}},
        {"octal mode", {"0600"}},
        {"yes/no", {"no"}},
        {"log level", {"debug"}},
        {"size or percent", {"5%"}},
        {"mirror rule", {"https://huggingface.co/ http://127.0.0.1:8080/hf/ credentials"}},
        {"host:port list", {"127.0.0.1:8399, [::1]:8399"}},
        {"URL", {"http://127.0.0.1:8080/hf"}},
        {"word", {"uid", "off"}},
    };
    const char *type = config_key_type(k), *tries[3] = {NULL};
    char lo[32], hi[32];
    if (strcmp(type, "unsigned") == 0 || strcmp(type, "size") == 0) {
        snprintf(lo, sizeof lo, "%llu", (unsigned long long)k->min);
        snprintf(hi, sizeof hi, "%llu", (unsigned long long)k->max);
        tries[0] = lo;
        tries[1] = hi;
    }
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (strcmp(cand[i].type, type) == 0)
            memcpy(tries, cand[i].values, sizeof tries);
    for (size_t i = 0; i < 3 && tries[i]; i++) {
        hubd_config_t cfg;
        ck_assert_int_eq(config_defaults(&cfg), 0);
        int differs = 0;
        if (config_set(&cfg, k->name, tries[i]) == 0) {
            char *text = print_config(&cfg);
            differs = strcmp(text, defaults) != 0;
            free(text);
        }
        config_free(&cfg);
        if (differs) {
            snprintf(buf, cap, "%s", tries[i]);
            return buf;
        }
    }
    ck_abort_msg("%s: no other value for type '%s' (add one to other_value)", k->name, type);
    return NULL;
}

/* SIGHUP applies exactly the rows marked reloadable: each is taken alone;
 * each other one that changed is named, alone and all together, in the
 * rows' order (which is also the print-out's). */
START_TEST(config_reload_applies_exactly_the_reloadable_rows)
{
    size_t n;
    const config_key_t *keys = config_key_table(&n);
    hubd_config_t def, cur, next, all, expect;
    char restart[1024], names[1024] = "", v[256];
    ck_assert_int_eq(config_defaults(&def), 0);
    ck_assert_int_eq(config_defaults(&all), 0);
    ck_assert_int_eq(config_defaults(&expect), 0);
    char *defaults = print_config(&def);
    size_t reloadable = 0;
    for (size_t i = 0; i < n; i++) {
        const config_key_t *k = &keys[i];
        other_value(k, defaults, v, sizeof v);
        ck_assert_int_eq(config_defaults(&cur), 0);
        ck_assert_int_eq(config_defaults(&next), 0);
        ck_assert_int_eq(config_set(&next, k->name, v), 0);
        ck_assert_int_eq(config_set(&all, k->name, v), 0);
        char *wanted = print_config(&next);
        config_apply_runtime(&cur, &next, restart, sizeof restart);
        char *got = print_config(&cur);
        if (k->flags & CONFIG_RELOAD) {
            ck_assert_msg(restart[0] == '\0', "%s = %s: '%s' need a restart", k->name, v, restart);
            ck_assert_msg(strcmp(got, wanted) == 0, "%s = %s not taken:\n%s", k->name, v, got);
            ck_assert_int_eq(config_set(&expect, k->name, v), 0);
            reloadable++;
        } else {
            ck_assert_msg(strcmp(restart, k->name) == 0, "%s = %s: restart '%s'", k->name, v,
                          restart);
            ck_assert_msg(strcmp(got, defaults) == 0, "%s = %s taken:\n%s", k->name, v, got);
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? ", " : "", k->name);
        }
        free(wanted);
        free(got);
        config_free(&cur);
        config_free(&next);
    }
    ck_assert_uint_gt(reloadable, 0);
    ck_assert_uint_lt(reloadable, n);

    /* All at once. The print-out names every row, in the rows' order. */
    char *text = print_config(&all);
    const char *at = text;
    for (size_t i = 0; i < n; i++) {
        char line[128];
        snprintf(line, sizeof line, "\n%s = ", keys[i].name);
        const char *p = strstr(at, line);
        ck_assert_msg(p != NULL, "%s not printed after the row before it:\n%s", keys[i].name, text);
        at = p + 1;
    }
    free(text);
    ck_assert_int_eq(config_defaults(&cur), 0);
    config_apply_runtime(&cur, &all, restart, sizeof restart);
    ck_assert_str_eq(restart, names);
    char *got = print_config(&cur), *wanted = print_config(&expect);
    ck_assert_str_eq(got, wanted);
    free(got);
    free(wanted);
    free(defaults);
    config_free(&cur);
    config_free(&all);
    config_free(&expect);
    config_free(&def);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_keys");
    TCase *tc = tcase_create("config_keys");
    tcase_add_test(tc, config_table_rows_are_well_formed);
    tcase_add_test(tc, config_table_defaults_parse_and_print_back);
    tcase_add_test(tc, config_table_bounds_are_the_parsers);
    tcase_add_test(tc, config_table_keys_are_documented);
    tcase_add_test(tc, config_reload_applies_exactly_the_reloadable_rows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
