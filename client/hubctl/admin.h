/* admin: the verbs that change the cache: rm, pin, unpin, gc and verify.
 *
 * Each sends one request (id=1) and waits for OK or ERR; verify's BAD lines
 * come before its OK. Output is held in memory and printed once the answer
 * is whole. The daemon decides who may ask (root or its admin group). */
#ifndef HUBCTL_ADMIN_H
#define HUBCTL_ADMIN_H

#include "cli.h"

/* Runs verb (RM, PIN, UNPIN, GC or VERIFY) with the operand and --max-size
 * of c; returns the exit code (EXIT_VERIFY when verify found a bad blob). */
int admin_run(const cli_t *c, const char *verb);

#endif
