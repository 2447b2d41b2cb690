/* usage: how every command of hubctl refuses its command line. Below cli.c
 * and the commands it dispatches (fetch, listing, admin, hf, help), which
 * all say it the same way. */
#ifndef HUBCTL_USAGE_H
#define HUBCTL_USAGE_H

/* "hubctl: <message>" and a pointer to --help on stderr. Returns
 * EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) int usage_error(const char *fmt, ...);

#endif
