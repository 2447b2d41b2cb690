/* wipe: see wipe.h. */
#include "wipe.h"

#include <stdlib.h>
#include <string.h>

void wipe_free_n(void *p, size_t n)
{
    if (!p)
        return;
    explicit_bzero(p, n);
    free(p);
}

void wipe_free(char *s)
{
    if (s)
        wipe_free_n(s, strlen(s));
}
