#include "textnum.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

int parse_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) /* too many digits for any unit: not a number we take */
        return -EINVAL;
    static const char units[] = "KMGT";
    /* Test the folded byte, not *end: ' ' folds to NUL, and strchr finds
     * the terminator, which would read as a fifth unit. */
    int up = *end & ~0x20;
    const char *u = up ? strchr(units, up) : NULL;
    unsigned shift = u ? 10 * (unsigned)(u - units + 1) : 0;
    if (u) {
        end++;
        end += *end == 'i';
        end += *end == 'B' || *end == 'b';
    }
    if (*end)
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    *out = (uint64_t)v << shift;
    return 0;
}

int parse_duration_ms(const char *s, unsigned *out)
{
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (errno) /* too many digits for any unit: not a number we take */
        return -EINVAL;
    static const struct {
        const char *suffix;
        unsigned long mult;
    } units[] = {{"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) != 0)
            continue;
        if (v > UINT_MAX / units[i].mult)
            return -ERANGE;
        *out = (unsigned)(v * units[i].mult);
        return 0;
    }
    return -EINVAL;
}

int hex_value(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int hex_is(const char *s, size_t n, int lower_only)
{
    for (size_t i = 0; i < n; i++)
        if (hex_value((unsigned char)s[i]) < 0 || (lower_only && s[i] >= 'A' && s[i] <= 'F'))
            return 0;
    return s[n] == '\0';
}
