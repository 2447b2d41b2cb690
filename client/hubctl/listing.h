/* listing: the read-only commands status, stats (with --prometheus) and ls.
 *
 * One request, one whole reply, printed only once it is complete so that a
 * failure leaves no half table or half JSON behind. Each function runs its
 * command to the end and returns the exit code. */
#ifndef HUBCTL_LISTING_H
#define HUBCTL_LISTING_H

#include "cli.h"

int listing_status(const cli_t *c);
int listing_stats(const cli_t *c);
int listing_ls(const cli_t *c);

#endif
