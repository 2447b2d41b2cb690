/* reconcile: make the database and blobs/ agree, once, at start-up.
 *
 * After a crash, a disk clean-up by hand or a restore, the two may differ.
 * Rows whose blob file is gone (or has the wrong size) are forgotten, so the
 * next fetch downloads again instead of failing; files under blobs/ that no
 * row names, or that are not named like a blob, are moved to quarantine/ for
 * a person to look at, never served, except a commit cut short: a blob that
 * is the same file (a hard link) as a partial whose row is still there is
 * recorded for that row's URL. Partial downloads recorded in the
 * partials table are cut back to their durable length and kept for resuming;
 * a row whose file is gone or short is dropped, and a file under tmp/ that no
 * row names is removed. Runs before the loop starts. */
#ifndef HUBD_RECONCILE_H
#define HUBD_RECONCILE_H

#include "db.h"
#include "store.h"

typedef struct reconcile_report {
    unsigned rows_forgotten; /* blob rows (and their entries) without a usable file */
    unsigned quarantined;    /* files under blobs/ that no row names */
    unsigned recovered;      /* commits cut short by a crash, recorded now */
    unsigned partials_kept;  /* resumable partials */
    unsigned partials_lost;  /* partial rows without (enough of) their file */
    unsigned tmp_removed;    /* files under tmp/ that no partial row names */
    uint64_t max_partial_id; /* new partials are numbered above this */
} reconcile_report_t;

int reconcile_cache(store_t *store, db_t *db, reconcile_report_t *report);

#endif
