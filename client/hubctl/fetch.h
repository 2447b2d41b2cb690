/* fetch: `hubctl fetch URL...`, downloading each URL through the cache.
 *
 * Every argument is checked and every FETCH queued before connecting, so a
 * bad argument never reaches the daemon. The paths (or --json results) are
 * printed one per URL in argument order, each as soon as it and all before
 * it have their answer; with -o the client copies each file itself from the
 * descriptor that came with DONE (materialize.h). */
#ifndef HUBCTL_FETCH_H
#define HUBCTL_FETCH_H

#include "cli.h"

/* Runs the fetch; returns the worst exit code of its URLs (3, then 4, then
 * 1), or EXIT_USAGE. */
int fetch_run(const cli_t *c);

#endif
