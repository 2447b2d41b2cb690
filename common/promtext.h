/* promtext: Prometheus' text exposition format (version 0.0.4) of hubd's
 * counters, shared by `hubctl stats --prometheus` (which renders the STATS
 * line it is sent) and the daemon's own scrape endpoint (http/metrics.c,
 * which renders the same line it would send): one table of STATS fields and
 * their metric names, so that the two cannot name a counter differently,
 * and `hubctl stats --json` uses the same names.
 *
 * Pure, any thread; writes into a capped bytebuf (a full one is reported,
 * never grown past its cap). */
#ifndef HUBD_PROMTEXT_H
#define HUBD_PROMTEXT_H

#include "bytebuf.h"
#include "proto.h"

#include <stddef.h>
#include <stdint.h>

/* A STATS field and its metric. */
typedef struct promtext_metric {
    const char *key;  /* the STATS field (docs/PROTOCOL.md) */
    const char *name; /* the metric ("hubd_hits_total") */
    const char *type; /* "counter" or "gauge" */
    const char *help; /* one line, no backslash or newline */
} promtext_metric_t;

/* The rows, in the order they are rendered; *n is how many. */
const promtext_metric_t *promtext_metrics(size_t *n);

/* The metric of a STATS field, or NULL (errors_by_code: hubd_errors_total). */
const char *promtext_name_of(const char *key);

/* The metrics of one STATS line: each row whose field the line has (an
 * older daemon's line lacks some: left out, not 0), then hubd_errors_total
 * by code from errors_by_code. 0, or -ENOBUFS/-ENOMEM from the buffer. */
int promtext_stats(bytebuf_t *out, const proto_msg_t *stats);

/* A metric's HELP and TYPE lines. help must need no escaping. */
int promtext_family(bytebuf_t *out, const char *name, const char *type, const char *help);

/* `name{label="value"} v\n`, value escaped as the format says (backslash,
 * double quote and newline; a byte that is not valid UTF-8, or another
 * control byte, as '?'). */
int promtext_sample(bytebuf_t *out, const char *name, const char *label, const char *value,
                    uint64_t v);

/* value escaped as a label value into out (at most cap bytes, NUL
 * included; a longer result is cut at a character). Pure; for tests too. */
void promtext_escape(const char *value, char *out, size_t cap);

#endif
