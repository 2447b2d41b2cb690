/* out: human-readable output, shared by every command.
 *
 * Sizes and times as people read them, bounded lines for the progress
 * display and table cells, and the one rule for anything the daemon sent:
 * reply values are percent-decoded and may hold any byte, so control bytes
 * are shown as '?' and never reach the user's terminal. Stateless. */
#ifndef HUBCTL_OUT_H
#define HUBCTL_OUT_H

#include "proto.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "512 B", "1.5 KiB", "123.4 MiB": binary units, one decimal. Returns buf. */
const char *out_bytes(uint64_t n, char *buf, size_t cap);

/* "42s", "3m07s", "2h15m". Returns buf. */
const char *out_eta(uint64_t s, char *buf, size_t cap);

/* Prints s with control bytes as '?'. */
void out_clean(FILE *f, const char *s);
/* A malloc'd copy of s with control bytes as '?'. */
char *out_clean_copy(const char *s);
/* "CODE: MSG\n", both cleaned: the tail of every error the daemon sent
 * (no_space: and that it is hubd's cache, for its admin to free). */
void out_reason(FILE *f, const char *code, const char *msg);
/* uids "UID,UID" as user names ("-" when none; a uid without a name as the
 * number), at most cap bytes. */
void out_user_names(const char *uids, char *out, size_t cap);

/* A bounded line buffer: progress lines and table cells are cut, never
 * overflowed. Start one as {.len = 0}. */
typedef struct out_line {
    char buf[512]; /* NUL-terminated text */
    size_t len;    /* bytes used, < sizeof buf */
} out_line_t;

__attribute__((format(printf, 2, 3))) void out_line_add(out_line_t *l, const char *fmt, ...);
/* "123.4 MiB / 256.0 MiB", or "123.4 MiB" while the total is unknown. */
void out_line_amount(out_line_t *l, uint64_t done, int has_total, uint64_t total);

/* Reply fields for display: the value or dflt; a byte count human-readable
 * or "?" if it is not a number; a Unix time as local "YYYY-MM-DD HH:MM" or
 * "?". */
const char *out_get_or(const proto_msg_t *m, const char *key, const char *dflt);
const char *out_field_bytes(const proto_msg_t *m, const char *key, char *buf, size_t cap);
const char *out_field_time(const proto_msg_t *m, const char *key, char *buf, size_t cap);

#endif
