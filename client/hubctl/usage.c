/* usage: see usage.h. */
#include "usage.h"

#include "util.h"

#include <stdarg.h>
#include <stdio.h>

int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hubctl: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nTry 'hubctl --help' for more information.\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}
