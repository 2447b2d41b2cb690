/* http_range: one byte range of a known size (see the header). */
#include "http_range.h"

#include <stddef.h>
#include <strings.h>

/* Digits at *p into *v (no overflow past 2^63); 1 when there was one. */
static int read_u64(const char **p, uint64_t *v)
{
    const char *s = *p;
    uint64_t n = 0;
    while (*s >= '0' && *s <= '9') {
        if (n > (UINT64_MAX >> 1) / 10)
            return 0; /* larger than any file: not a number we serve */
        n = n * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s == *p)
        return 0;
    *p = s;
    *v = n;
    return 1;
}

static const char *skip_ows(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

range_kind_t http_range_parse(const char *value, uint64_t size, uint64_t *first, uint64_t *last)
{
    if (!value)
        return RANGE_NONE;
    const char *p = skip_ows(value);
    if (strncasecmp(p, "bytes=", 6) != 0)
        return RANGE_NONE; /* another unit: ignored */
    p = skip_ows(p + 6);
    uint64_t a = 0, b = 0;
    int has_a = read_u64(&p, &a);
    if (*p != '-')
        return RANGE_NONE;
    p++;
    int has_b = read_u64(&p, &b);
    p = skip_ows(p);
    if (*p != '\0')
        return RANGE_NONE; /* several ranges, or junk: the whole file */
    if (!has_a && !has_b)
        return RANGE_NONE;
    if (!has_a) { /* "-n": the last n bytes */
        if (b == 0 || size == 0)
            return RANGE_UNSATISFIABLE;
        *first = b >= size ? 0 : size - b;
        *last = size - 1;
        return RANGE_ONE;
    }
    if (has_b && b < a)
        return RANGE_NONE; /* invalid: ignored, as the RFC says */
    if (a >= size)
        return RANGE_UNSATISFIABLE;
    *first = a;
    *last = has_b && b < size ? b : size - 1;
    return RANGE_ONE;
}
