/* wipe: freeing memory that held a secret (a client's credential headers,
 * a request head that carries them, a proxy's password).
 *
 * Freed memory is handed out again, and a core dump or a later bug must not
 * find a user's token in it: every holder of credentials frees them through
 * here. Any thread. */
#ifndef HUBD_WIPE_H
#define HUBD_WIPE_H

#include <stddef.h>

/* Zeroes the NUL-terminated string s (explicit_bzero: not optimised away),
 * then frees it. NULL is fine. */
void wipe_free(char *s);

/* The same for n bytes at p (a buffer that may hold NULs). */
void wipe_free_n(void *p, size_t n);

#endif
