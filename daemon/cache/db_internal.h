/* db_internal: what db.c, db_partial.c and db_holds.c share: the connections, the
 * prepared statements and the helpers that run statements and
 * transactions. Private to the db module. */
#ifndef HUBD_DB_INTERNAL_H
#define HUBD_DB_INTERNAL_H

#include "db.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

/* Where db_holds_each stopped: the last hold it gave, in its order. */
typedef struct db_hold_pos {
    int set;                           /* 0: from the start */
    int64_t seq, rowid;                /* its blob's */
    uid_t uid;                         /* the hold's key */
    char label[DB_HOLD_LABEL_MAX + 1]; /* ...  */
    char link[DB_HOLD_LINK_MAX + 1];   /* ... */
} db_hold_pos_t;

/* FNV-1a over s and a 0xff after it (so that "ab","c" and "a","bc"
 * differ), from h: chain it over a key's parts from DB_FNV_BASIS. The
 * memo's and the uses queue's in-memory indexes (db_memo.c, db_uses.c). */
#define DB_FNV_BASIS 2166136261u
static inline uint32_t db_fnv(uint32_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 16777619u;
    return (h ^ 0xff) * 16777619u;
}

/* A hit's use of a blob (and of its entry, url set), queued (db_uses.c). */
typedef struct db_use {
    char sha256[65];
    char *url; /* malloc'd; NULL: the blob alone (found by digest) */
    char cred_tag[65];
    uid_t uid;
    int64_t when;              /* time(NULL) of the hit */
    int64_t seq_blob, seq_ent; /* its use sequence numbers, taken at the hit */
} db_use_t;

/* db_memo.c: what a remembered look-up was. */
typedef enum { MEMO_BLOB_ANY = 1, MEMO_BLOB_FOR, MEMO_ENTRY } db_memo_kind_t;
typedef struct db_memo_slot db_memo_slot_t;

struct db {
    sqlite3 *rd;                  /* loop thread only */
    _Atomic uint64_t seq;         /* last use sequence number given out (under wr's mutex;
                                     read from any thread: db_use_seq) */
    sqlite3 *wr;                  /* pool threads only (serialized mode) */
    sqlite3 *rp;                  /* pool threads' reads that must not wait for a commit
                                     (serialized mode; WAL: they see the last commit) */
    sqlite3_stmt *blob_stat;      /* on rp */
    sqlite3_stmt *find_entry;     /* on rd */
    sqlite3_stmt *find_blob;      /* on rd */
    sqlite3_stmt *find_part;      /* on rd */
    sqlite3_stmt *find_blob_for;  /* on rd */
    sqlite3_stmt *find_rev;       /* on rd (db_revs.c) */
    _Atomic uint64_t holds;       /* hold rows (db_holds.c; read from any thread) */
    _Atomic uint64_t held_bytes;  /* the size of the blobs they hold, each once */
    _Atomic int holds_dirty;      /* holds deleted with their blob: db_holds_refresh recounts */
    db_hold_pos_t holds_next;     /* db_holds_each resumes after it (under wr's mutex) */
    int holds_counted;            /* the TEMP counts by uid are made (db_holds.c; wr's mutex) */
    _Atomic uint64_t total_bytes; /* the blobs' sizes, as committed (db_totals.c) */
    _Atomic uint64_t total_blobs; /* and their rows */
    int64_t pending_bytes;        /* the open transaction's changes to them (wr's mutex) */
    int64_t pending_blobs;
    int64_t committing_bytes; /* those of a COMMIT under way (db_totals.c) */
    int64_t committing_blobs;
    char *path;                  /* hubd.db's path, for db_check_pages' own connection */
    _Atomic int damaged;         /* db_check_pages found a bad page */
    _Atomic int pages_checked;   /* this run checked every page (at open, or db_check_pages) */
    _Atomic uint64_t lookup_gen; /* bumped once a commit changed what the loop's look-ups read
                                    (db_memo.c) */
    int pending_lookups;         /* the open transaction changed such a row (wr's mutex) */
    int committing_lookups;      /* and its COMMIT is under way */
    db_memo_slot_t **memo;       /* the remembered look-ups (loop thread; NULL until the first) */
    uint64_t memo_answers;       /* look-ups answered from it */
    pthread_mutex_t uses_mu;     /* guards the queue of uses (db_uses.c) */
    db_use_t *uses;              /* hits not yet written */
    size_t nuses, uses_cap;
    uint32_t *uses_index; /* DB_USES_SLOTS: 1 + the place in uses of each key, or 0 */
};

/* db_totals.c: the triggers and hooks that keep total_bytes and
 * total_blobs, and their first count. Writer connection, at open. */
int db_totals_init(db_t *db);

/* Version 6. A row per link a user's HF cache has into hubd's store:
 * (uid, label, link), label being the repo and revision
 * ("models/org/name@main"). No foreign key to blobs: a blob's removal
 * (admin RM, quarantine) deletes its holds itself, in the same transaction;
 * eviction leaves a held blob. holds_sha256 serves both look-ups by blob.
 * A macro, not a symbol of db_holds.c: db.c migrates, and calls nothing
 * there. */
#define DB_HOLDS_SCHEMA                                                                            \
    "CREATE TABLE holds ("                                                                         \
    "  uid     INTEGER NOT NULL,"                                                                  \
    "  label   TEXT NOT NULL,"                                                                     \
    "  link    TEXT NOT NULL,"                                                                     \
    "  sha256  TEXT NOT NULL,"                                                                     \
    "  created INTEGER NOT NULL,"                                                                  \
    "  PRIMARY KEY (uid, label, link)) WITHOUT ROWID;"                                             \
    "CREATE INDEX holds_sha256 ON holds(sha256, uid);"

/* Version 7. The blobs' total size and count, one row kept by triggers as
 * blob rows come and go, in the same transactions: start-up reads it
 * instead of summing the table (0.3 s at a million blobs). Filled once
 * when made; db_totals_check compares it with the table and mends it. */
#define DB_TOTALS_SCHEMA                                                                           \
    "CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 1), bytes INTEGER NOT NULL,"          \
    "  blobs INTEGER NOT NULL);"                                                                   \
    "INSERT INTO totals SELECT 1, coalesce(sum(size), 0), count(*) FROM blobs;"                    \
    "CREATE TRIGGER totals_add AFTER INSERT ON blobs BEGIN"                                        \
    "  UPDATE totals SET bytes = bytes + NEW.size, blobs = blobs + 1; END;"                        \
    "CREATE TRIGGER totals_drop AFTER DELETE ON blobs BEGIN"                                       \
    "  UPDATE totals SET bytes = bytes - OLD.size, blobs = blobs - 1; END;"                        \
    "CREATE TRIGGER totals_size AFTER UPDATE OF size ON blobs BEGIN"                               \
    "  UPDATE totals SET bytes = bytes - OLD.size + NEW.size; END;"

/* Version 8. The commit the Hub last named for a repo's revision to a
 * credential tag ("" without credentials), and the uid whose question it
 * answered (each uid's share is bounded: db_rev_note). */
#define DB_REVS_SCHEMA                                                                             \
    "CREATE TABLE hf_revs ("                                                                       \
    "  repo      TEXT NOT NULL,"                                                                   \
    "  rev       TEXT NOT NULL,"                                                                   \
    "  cred_tag  TEXT NOT NULL,"                                                                   \
    "  commit_id TEXT NOT NULL,"                                                                   \
    "  uid       INTEGER NOT NULL,"                                                                \
    "  seen      INTEGER NOT NULL,"                                                                \
    "  PRIMARY KEY (repo, rev, cred_tag)) WITHOUT ROWID;"                                          \
    "CREATE INDEX hf_revs_uid ON hf_revs(uid, seen);"

/* Logs a failed statement; a full disk is -ENOSPC (ERR code=no_space),
 * anything else -EIO. */
int db_sq_err(sqlite3 *h, const char *what);
/* Whether an SQLite result code says the file is damaged (CORRUPT, NOTADB). */
int db_is_corrupt(int sqlite_rc);
/* As db_sq_err, but -EUCLEAN when SQLite says the file is corrupt (db_open's
 * caller sets it aside and rebuilds). */
int db_sq_err_or_corrupt(sqlite3 *h, const char *what);
/* Runs one statement with text/int64 parameters given as a NUL-terminated
 * description: 't' text (may be NULL -> SQL NULL), 'i' int64. */
int db_exec(sqlite3 *h, const char *sql, const char *types, ...);
/* Makes the SQL function fn_name (its user data arg) and then runs sql,
 * the TEMP triggers that call it (db_totals.c, db_memo.c). */
int db_temp_triggers(sqlite3 *h, const char *fn_name, int nargs,
                     void (*fn)(sqlite3_context *, int, sqlite3_value **), void *arg,
                     const char *sql);
/* db_exec keeps its statements prepared (db_err.c): h's are finalized
 * here, before h closes. */
void db_exec_forget(sqlite3 *h);
/* A write transaction on the writer connection, holding its mutex from
 * begin to end so another pool thread cannot interleave statements;
 * db_tx_end commits when rc is 0, else rolls back, and returns the outcome. */
int db_tx_begin(sqlite3 *h);
int db_tx_end(sqlite3 *h, int rc);
/* A blob's recorded identity from columns col..col+2 of a row (ino,
 * mtime_ns, ctime_ns: db_blobstat.c). */
void db_column_stat(sqlite3_stmt *st, int col, db_blob_stat_t *out);

/* db_memo.c. db_memo_init makes the triggers that mark a change (writer,
 * at open). db_memo_get sets *gen to the generation a miss's statement
 * must be remembered with (read before that statement runs), and returns
 * the answer remembered for (kind, key, tag) when no commit has changed a
 * row since, else NULL; db_memo_answer copies it out (any of sha_out,
 * stat_out, meta_out may be NULL). db_memo_put remembers a found row.
 * Loop thread. */
int db_memo_init(db_t *db);
void db_memo_free(db_t *db);
const db_memo_slot_t *db_memo_get(db_t *db, db_memo_kind_t kind, const char *key, const char *tag,
                                  uint64_t *gen);
void db_memo_answer(const db_memo_slot_t *m, char sha_out[65], uint64_t *size_out,
                    db_blob_stat_t *stat_out, db_entry_meta_t *meta_out);
void db_memo_put(db_t *db, db_memo_kind_t kind, const char *key, const char *tag, uint64_t gen,
                 const char sha[65], uint64_t size, const db_blob_stat_t *stat,
                 const db_entry_meta_t *meta);

#endif
