/* fuzz_config: the INI settings file (daemon/base/config.c through libinih).
 *
 * The input is an INI text, loaded over the defaults by config_load_string
 * (config_load_file's parser and per-key handler). Whatever the outcome,
 * config_print must run and config_free must leave no leak (LeakSanitizer).
 * When it loads, the printed settings (what `hubd --check-config` shows)
 * must load again and print the same text: config_print's promise. That
 * comparison is skipped for the values libinih (third-party) cannot read
 * back whatever the printing: lines of INI_MAX_LINE bytes or more (cut), and
 * " ;" inside a value (an inline comment on a key line; only a continuation
 * line of a multi-line value keeps it).
 */
#include "config.h"

#include <ctype.h>
#include <ini.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static char *print_config(const hubd_config_t *cfg, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    CHECK(f);
    config_print(cfg, f);
    CHECK(fclose(f) == 0);
    return text;
}

/* Whether libinih can read text back as it is: no line of INI_MAX_LINE
 * bytes or more (cut), no ';' after white space (an inline comment, which
 * a continuation line of a multi-line value keeps but a key line drops). */
static int ini_representable(const char *text)
{
    for (const char *p = text; *p; p++)
        if (*p == ';' && p > text && isspace((unsigned char)p[-1]))
            return 0;
    while (*text) {
        size_t n = strcspn(text, "\n");
        if (n + 1 >= INI_MAX_LINE)
            return 0;
        text += n + (text[n] == '\n');
    }
    return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* Defaults that depend on the environment: make them the same each run. */
    setenv("HUBD_SOCKET", "/run/hubd-fuzz.sock", 1);
    setenv("CACHE_DIRECTORY", "/var/cache/hubd-fuzz", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char *text = strndup((const char *)data, len); /* inih reads a C string */
    CHECK(text);
    hubd_config_t cfg;
    char err[600] = "";
    CHECK(config_defaults(&cfg) == 0);
    int rc = config_load_string(&cfg, text, err, sizeof err);
    CHECK(rc == 0 || (rc < 0 && err[0]));
    size_t n1;
    char *out1 = print_config(&cfg, &n1);
    if (rc == 0 && ini_representable(out1)) {
        hubd_config_t again;
        CHECK(config_defaults(&again) == 0);
        CHECK(config_load_string(&again, out1, err, sizeof err) == 0);
        size_t n2;
        char *out2 = print_config(&again, &n2);
        if (n1 != n2 || memcmp(out1, out2, n1) != 0) {
            fprintf(stderr, "config_print, loaded:\n%s\nprinted again:\n%s\n", out1, out2);
            abort();
        }
        free(out2);
        config_free(&again);
    }
    free(out1);
    config_free(&cfg);
    free(text);
    return 0;
}
