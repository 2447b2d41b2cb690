/* reconcile: make the database and blobs/ agree, once, at start-up.
 *
 * After a crash, a disk clean-up by hand or a restore, the two may differ.
 * Rows whose blob file is gone (or has the wrong size) are forgotten, so the
 * next fetch downloads again instead of failing; files under blobs/ that no
 * row names, or that are not named like a blob, are moved to quarantine/ for
 * a person to look at, never served. Runs before the loop starts. */
#ifndef HUBD_RECONCILE_H
#define HUBD_RECONCILE_H

#include "db.h"
#include "store.h"

typedef struct reconcile_report {
    unsigned rows_forgotten; /* blob rows (and their entries) without a usable file */
    unsigned quarantined;    /* files under blobs/ that no row names */
} reconcile_report_t;

int reconcile_cache(store_t *store, db_t *db, reconcile_report_t *report);

#endif
