/* interrupt: Ctrl-C while downloads run (PROTOCOL.md, INTERRUPT).
 *
 * `hf download` and curl stop when interrupted; so does hubctl, without
 * taking a download from anyone else. On SIGINT conn_run sends INTERRUPT on
 * the same session: each waiting FETCH is answered ERR code=interrupted
 * with what became of its download (stopped with its partial kept, or going
 * on for other waiters), then OK. This module keeps that account and says
 * it in one line. Only an explicit INTERRUPT stops a download: a hubctl
 * that is killed, or hangs up, leaves it to the cache, as before.
 *
 * The handler only sets a flag; everything else runs in conn_run's loop.
 * Single-threaded. */
#ifndef HUBCTL_INTERRUPT_H
#define HUBCTL_INTERRUPT_H

#include "proto.h"

#include <stdint.h>
#include <stdio.h>

#define EXIT_INTERRUPTED 130 /* 128 + SIGINT, as a shell reports a process it killed */

typedef struct interrupt_account {
    int answered;           /* INTERRUPT's OK came */
    int unknown;            /* the daemon does not know INTERRUPT (older hubd) */
    unsigned stopped;       /* downloads stopped, their partial kept */
    unsigned stopped_fresh; /* stopped, nothing kept: the origin gave no validator */
    unsigned going;         /* downloads going on for other waiters, or for the cache */
    unsigned going_waiters; /* the waiters they go on for (sum) */
    uint64_t going_job;     /* the first of them, for `hubctl cancel` */
    uint64_t kept;          /* bytes the stopped downloads had */
} interrupt_account_t;

/* SIGINT sets the flag from now on (no SA_RESTART: poll returns EINTR). */
void interrupt_arm(void);
/* Whether SIGINT came since interrupt_arm. */
int interrupt_pending(void);
/* SIGINT back to its default: a second Ctrl-C ends hubctl at once. */
void interrupt_disarm(void);

/* A line read after INTERRUPT was sent: the ERR code=interrupted lines are
 * counted. Returns 1 once INTERRUPT's answer (OK id=ID, or an older
 * daemon's ERR code=unknown_verb) came. */
int interrupt_take(interrupt_account_t *a, const char *id, const proto_msg_t *m);

/* The one line that says what happened and how to resume or cancel. */
void interrupt_say(const interrupt_account_t *a, FILE *err);

#endif
