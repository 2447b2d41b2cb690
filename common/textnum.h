/* textnum: the numbers people write in hubd's config, on hubctl's command
 * line and on the wire: sizes ("512M", "2GiB"), durations ("30s",
 * "250ms") and hex digits. One spelling everywhere, so what the config
 * file accepts the command line accepts too. */
#ifndef HUBD_TEXTNUM_H
#define HUBD_TEXTNUM_H

#include <stddef.h>
#include <stdint.h>

/* Strict decimal: digits only, fitting 64 bits. 0 or -EINVAL. */
int parse_u64(const char *s, uint64_t *out);

/* Bytes, or with K, M, G or T (powers of 1024; "MiB", "MB", "Mi"
 * spellings, any case). 0, -EINVAL (digits past 64 bits too), or -ERANGE
 * when the unit takes it past 64 bits. */
int parse_size(const char *s, uint64_t *out);

/* Milliseconds: plain seconds, or with "ms", "s", "m", "h" or "d"; at most
 * UINT_MAX ms (49 days). 0, -EINVAL, or -ERANGE past that. */
int parse_duration_ms(const char *s, unsigned *out);

/* The value of one hex digit, or -1. Written out rather than isxdigit() so
 * the locale cannot widen what is accepted. */
int hex_value(int ch);

/* 1 when s is exactly n hex digits (lower-case only when lower_only). */
int hex_is(const char *s, size_t n, int lower_only);

#endif
