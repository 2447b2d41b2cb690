/* reconcile: make the database and blobs/ agree, once, at start-up.
 *
 * After a crash, a disk clean-up by hand or a restore, the two may differ.
 * Rows whose blob file is gone (or has the wrong size, or is not a regular
 * file of hubd's: a symbolic link is never followed) are forgotten, so the
 * next fetch downloads again instead of failing; files under blobs/ that no
 * row names, or that are not named like a blob, are moved to quarantine/ for
 * a person to look at, never served, except a commit cut short: a blob that
 * is the same file (a hard link) as a partial whose row is still there is
 * recorded for that row's URL. Partial downloads recorded in the
 * partials table are cut back (through an fd, never a link) to their
 * durable length and kept for resuming; a row whose file is gone, short, a
 * link or has a second name is dropped, and a name under tmp/ that no row
 * names is removed (a link goes, not what it points to). A database error
 * stops it before anything is moved: a file is quarantined only when the
 * rows were all read and none names it. Runs before the loop starts. */
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

/* 0, or a negative errno: then nothing may be trusted to have been checked
 * (a database error stops it, rather than read as "no row names it");
 * -EUCLEAN when SQLite found the database corrupt. */
int reconcile_cache(store_t *store, db_t *db, reconcile_report_t *report);

/* Start-up, the loop not running: what must be done before anything is
 * served, in time that does not grow with the cache (a start must not
 * keep clients waiting longer the more the cache holds):
 * the partials (cut back and kept, or dropped) and tmp/. The blobs' side
 * (rows against files) is left to reconcile_folder, in the background,
 * and *swept is 0; unless a commit was cut short by a crash (a partial
 * with a second name under blobs/, to be recorded before its row goes):
 * then all of reconcile_cache runs now, and *swept is 1. */
int reconcile_start(store_t *store, db_t *db, reconcile_report_t *report, int *swept);

/* Pool thread, while hubd serves: step n of the blobs' side of
 * reconcile_cache: folder blobs/<n as two hex digits> (n < 256) against
 * its rows, or (n == 256) the names under blobs/ that are no such folder.
 * Under the writer's lock, as commits and removals hold it, so a blob
 * linked and recorded meanwhile is seen whole or not at all. Adds what it
 * did to *report. A hit meanwhile on a row whose file is gone downloads
 * again (as it always could); a file no row names is not served. */
#define RECONCILE_FOLDERS 257
int reconcile_folder(store_t *store, db_t *db, unsigned n, reconcile_report_t *report);

/* Start-up, the database closed: renames <cache_dir>/<name> and its -wal
 * and -shm to <name>.corrupt-<unix time>[.<n>] (and -wal, -shm), for a
 * person to look at; aside gets the new path of <name>. */
int reconcile_set_aside(store_t *store, const char *name, char *aside, size_t cap);

/* After a corrupt database was set aside, into a new empty one: a blob row,
 * without entries, for every file under blobs/ named like a blob that is a
 * regular file of hubd's and public (0444); their names are their digests
 * (hashed when they were committed), their sizes are the files'. A private
 * blob (0400, fetched with credentials) is moved to quarantine/: the
 * credential tags that may open it were in the lost entries. Entries, pins
 * and partial rows are lost; reconcile_cache then runs as usual. */
int reconcile_rebuild(store_t *store, db_t *db, unsigned *recovered, unsigned *quarantined);

#endif
