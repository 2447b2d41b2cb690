#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Noreturn void xoom(void)
{
    fputs("hubctl: out of memory\n", stderr);
    exit(EXIT_FAILED);
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        xoom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        xoom();
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

int str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}
