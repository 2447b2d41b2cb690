/* print_config for the unit tests of config (test_config, test_config_keys):
 * config_print's text, in a buffer the caller frees. A header of static
 * functions: each test program is one translation unit. */
#ifndef HUBD_TEST_CONFIG_PRINT_H
#define HUBD_TEST_CONFIG_PRINT_H

#include "config.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#define PRINT_MAX (1 << 16)
static char *print_config(const hubd_config_t *cfg)
{
    /* fmemopen on a buffer of our own, not open_memstream(&local): gcc 12
     * then took the text for a pointer to that local (-Wdangling-pointer
     * with _FORTIFY_SOURCE). */
    char *text = calloc(1, PRINT_MAX);
    ck_assert_ptr_nonnull(text);
    FILE *f = fmemopen(text, PRINT_MAX, "w");
    ck_assert_ptr_nonnull(f);
    config_print(cfg, f);
    ck_assert(!ferror(f));
    ck_assert_int_lt(ftell(f), PRINT_MAX - 1); /* all of it, and its NUL */
    fclose(f);
    return text;
}

#endif
