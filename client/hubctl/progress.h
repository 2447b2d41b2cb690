/* progress: what `hubctl fetch` shows on stderr while downloads run.
 *
 * On a terminal, one line redrawn in place at most every 0.1 s: a single
 * URL's amount, percentage, rate and ETA, or one aggregate for several.
 * With --progress to a file or pipe, a plain line per URL at most once a
 * second, and a final one when it is done. -q shows nothing. Works on the
 * fetch_t of fetch.c (fetch_internal.h); single-threaded. hf download sets
 * per_file: under the total, a line per running file on a terminal. */
#ifndef HUBCTL_PROGRESS_H
#define HUBCTL_PROGRESS_H

#include "fetch_internal.h"

/* The monotonic clock, in seconds: the fetch's start and its final line. */
double progress_now(void);

/* How progress is shown for these options and this stderr. */
prog_mode_t progress_mode(const cli_t *c);

/* After HIT, QUEUED, ATTACHED or PROGRESS for r. */
void progress_update(fetch_t *f, req_t *r);

/* After DONE or ERR: a TTY ends its line once everything is settled, else
 * clears it for the messages that follow; plain mode prints a final line. */
void progress_settled(fetch_t *f, const req_t *r);

/* Redraws the TTY line (at most every 0.1 s unless force). */
void progress_draw(fetch_t *f, int force);

/* Takes the TTY line off the screen before other output. */
void progress_clear(fetch_t *f);

#endif
