/* util: what every hubctl module leans on: the exit codes scripts branch on,
 * the version, and allocation that ends the program when memory runs out.
 *
 * hubctl is blocking, single-threaded and short-lived: a CLI without memory
 * has nothing better to do than say so and stop, so nothing here returns
 * NULL. Nothing here keeps state. */
#ifndef HUBCTL_UTIL_H
#define HUBCTL_UTIL_H

#include <stddef.h>

#ifndef HUBCTL_VERSION
#define HUBCTL_VERSION HUBD_VERSION /* the project's (CMakeLists.txt) */
#endif

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Exit codes. Scripts branch on them, so --help documents them. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,      /* a download failed (any ERR but hash_mismatch) */
    EXIT_USAGE = 2,       /* bad command line */
    EXIT_UNREACHABLE = 3, /* no daemon, or it went away before answering */
    EXIT_VERIFY = 4,      /* ERR code=hash_mismatch */
};

/* Says "hubctl: out of memory" and exits with EXIT_FAILED. */
_Noreturn void xoom(void);
void *xrealloc(void *p, size_t n);
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);

/* Both set and equal; a missing reply field never matches. */
int str_eq(const char *a, const char *b);

/* close(2) unless fd is -1 (no descriptor came). */
void close_fd(int fd);

#endif
