/* db: schema, migrations and the handful of statements hubd runs. */
#include "db.h"
#include "db_internal.h"
#include "log.h"
#include "textnum.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DB_SCHEMA_VERSION 8

/* Version 1. entries are keyed by (url, cred_tag) so that a response fetched
 * with credentials is only ever served to the same credentials; blobs are
 * shared by content. */
static const char *const schema_v1 = "CREATE TABLE blobs ("
                                     "  sha256   TEXT PRIMARY KEY,"
                                     "  size     INTEGER NOT NULL,"
                                     "  created  INTEGER NOT NULL,"
                                     "  accessed INTEGER NOT NULL,"
                                     "  pinned   INTEGER NOT NULL DEFAULT 0);"
                                     "CREATE TABLE entries ("
                                     "  url           TEXT NOT NULL,"
                                     "  cred_tag      TEXT NOT NULL DEFAULT '',"
                                     "  sha256        TEXT NOT NULL REFERENCES blobs(sha256),"
                                     "  etag          TEXT,"
                                     "  last_modified TEXT,"
                                     "  created       INTEGER NOT NULL,"
                                     "  accessed      INTEGER NOT NULL,"
                                     "  PRIMARY KEY (url, cred_tag));"
                                     "CREATE INDEX entries_sha256 ON entries(sha256);"
                                     "CREATE INDEX blobs_accessed ON blobs(accessed);";

/* Version 2. A partial download that can be resumed after a restart: its
 * bytes are in tmp/<id>.part, of which the first `durable` were fdatasync'ed
 * before the row said so; the validators tie them to one version of the
 * URL's file (If-Range). One per (url, cred_tag). */
static const char *const schema_v2 = "CREATE TABLE partials ("
                                     "  id            INTEGER PRIMARY KEY,"
                                     "  url           TEXT NOT NULL,"
                                     "  cred_tag      TEXT NOT NULL DEFAULT '',"
                                     "  etag          TEXT,"
                                     "  last_modified TEXT,"
                                     "  total         INTEGER NOT NULL DEFAULT -1,"
                                     "  durable       INTEGER NOT NULL,"
                                     "  updated       INTEGER NOT NULL,"
                                     "  UNIQUE (url, cred_tag));";

/* busy_ms: how long a statement may wait for another connection's lock. The
 * writer (pool threads) waits long; the reader runs on the loop thread and
 * must not: in WAL mode a reader never needs to wait, so it gets little. */
/* Version 3. Least recently used is decided by a use sequence (seq), not
 * by the wall clock, which an admin or NTP may set back: eviction order
 * must not invert then. Each row gets the next number when it is recorded
 * or used; `accessed` stays, for people. A blob also keeps the identity of
 * its file as committed (inode, mtime and ctime in ns), checked on every
 * hit, and when it was last re-hashed (background verification); the use
 * sequence at which it was first recorded (hits do not change it: an
 * eviction run leaves out the blobs recorded after its targets were set);
 * and
 * whether its bytes were ever fetched without credentials (public: its file
 * is 0444, and knowing its digest is enough for a hit). Entries
 * list the uids that asked for them (requesters), so a signed URL's query
 * string is shown to them and to admins only. */
static const char *const schema_v3 =
    "ALTER TABLE blobs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE blobs ADD COLUMN ino INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE blobs ADD COLUMN mtime_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE blobs ADD COLUMN ctime_ns INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE blobs ADD COLUMN verified INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE blobs ADD COLUMN public INTEGER NOT NULL DEFAULT 0;"
    "UPDATE blobs SET public = EXISTS (SELECT 1 FROM entries e WHERE e.sha256 = blobs.sha256"
    "  AND e.cred_tag = '');"
    "ALTER TABLE entries ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE blobs ADD COLUMN recorded INTEGER NOT NULL DEFAULT 0;"
    "UPDATE blobs SET seq = r.n, recorded = r.n, verified = blobs.created FROM (SELECT rowid AS id,"
    "  row_number() OVER (ORDER BY accessed, created, rowid) AS n FROM blobs) AS r"
    "  WHERE blobs.rowid = r.id;"
    "UPDATE entries SET seq = r.n + (SELECT count(*) FROM blobs) FROM (SELECT rowid AS id,"
    "  row_number() OVER (ORDER BY accessed, rowid) AS n FROM entries) AS r"
    "  WHERE entries.rowid = r.id;"
    "DROP INDEX IF EXISTS blobs_accessed;"
    "CREATE INDEX blobs_seq ON blobs(seq);"
    "CREATE INDEX blobs_verified ON blobs(verified);"
    "CREATE INDEX entries_seq ON entries(seq);"
    "CREATE TABLE requesters ("
    "  url      TEXT NOT NULL,"
    "  cred_tag TEXT NOT NULL,"
    "  uid      INTEGER NOT NULL,"
    "  PRIMARY KEY (url, cred_tag, uid),"
    "  FOREIGN KEY (url, cred_tag) REFERENCES entries(url, cred_tag) ON DELETE CASCADE"
    ") WITHOUT ROWID;";

/* NOFOLLOW: a hubd.db that is a link (planted by someone who could write
 * the cache dir) is refused, not followed onto another file. */
static int open_conn(const char *path, int flags, int busy_ms, sqlite3 **out)
{
    int rc = sqlite3_open_v2(
        path, out, flags | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW, NULL);
    if (rc != SQLITE_OK)
        return db_sq_err_or_corrupt(*out, path);
    sqlite3_busy_timeout(*out, busy_ms);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(*out, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
        return db_sq_err_or_corrupt(*out, path);
    rc = sqlite3_step(st);
    const unsigned char *mode = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    int wal = mode && strcmp((const char *)mode, "wal") == 0;
    sqlite3_finalize(st);
    if (db_is_corrupt(rc)) {
        log_err("sqlite: %s: %s", path, sqlite3_errstr(rc));
        return -EUCLEAN;
    }
    if (!wal) {
        log_err("sqlite: %s: cannot use WAL journaling (is the file system local?)", path);
        return -EIO;
    }
    char *msg = NULL;
    rc = sqlite3_exec(*out, "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        log_err("sqlite: %s: %s", path, msg ? msg : "pragma failed");
        sqlite3_free(msg);
        return -EIO;
    }
    return 0;
}

/* Version 4. A segmented download's partial also holds finished ranges
 * past its durable prefix ("start-end,..." of byte offsets, end exclusive,
 * each made durable before the row said so; NULL: none). */
static const char *const schema_v4 = "ALTER TABLE partials ADD COLUMN ranges TEXT;";

/* Version 5. When an entry was last known to be the origin's current file
 * (unix seconds): downloaded, or a revalidation answered 304 Not Modified.
 * NULL: as created (entries from before). */
static const char *const schema_v5 = "ALTER TABLE entries ADD COLUMN validated INTEGER;";

static int migrate(sqlite3 *h)
{
    sqlite3_stmt *st;
    int version = 0;
    if (sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
        return db_sq_err_or_corrupt(h, "user_version");
    if (sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version == DB_SCHEMA_VERSION)
        return 0;
    if (version > DB_SCHEMA_VERSION) {
        log_err("database schema version %d is newer than this hubd (%d)", version,
                DB_SCHEMA_VERSION);
        return -EPROTO;
    }
    char *msg = NULL;
    int rc = sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 1)
        rc = sqlite3_exec(h, schema_v1, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 2)
        rc = sqlite3_exec(h, schema_v2, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 3)
        rc = sqlite3_exec(h, schema_v3, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 4)
        rc = sqlite3_exec(h, schema_v4, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 5)
        rc = sqlite3_exec(h, schema_v5, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 6) /* holds (db_holds.c) */
        rc = sqlite3_exec(h, DB_HOLDS_SCHEMA, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 7) /* the blobs' totals (db_totals.c) */
        rc = sqlite3_exec(h, DB_TOTALS_SCHEMA, NULL, NULL, &msg);
    if (rc == SQLITE_OK && version < 8) /* the Hub's revisions (db_revs.c) */
        rc = sqlite3_exec(h, DB_REVS_SCHEMA, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(h, "PRAGMA user_version=8; COMMIT", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        log_err("sqlite: creating schema: %s", msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
        return db_is_corrupt(rc) ? -EUCLEAN : -EIO;
    }
    return 0;
}

/* PRAGMA quick_check: every page and b-tree of the file is sound (what it
 * leaves out, that each index matches its table, costs a sort of every
 * table). A corrupt page read later would stop reconcile, or fail every
 * commit that touches it; found here, the file is set aside and rebuilt
 * instead. -EUCLEAN, with SQLite's first complaints logged, when not. */
static int quick_check(sqlite3 *h, const char *path)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, "PRAGMA quick_check(5)", -1, &st, NULL) != SQLITE_OK)
        return db_sq_err_or_corrupt(h, path);
    int rc, bad = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *msg = (const char *)sqlite3_column_text(st, 0);
        if (msg && strcmp(msg, "ok") == 0)
            continue;
        log_err("sqlite: %s: quick_check: %s", path, msg ? msg : "?");
        bad = 1;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && !db_is_corrupt(rc))
        return db_sq_err(h, path);
    if (rc != SQLITE_DONE)
        log_err("sqlite: %s: quick_check: %s", path, sqlite3_errstr(rc));
    return bad || rc != SQLITE_DONE ? -EUCLEAN : 0;
}

/* Opens path (and its -wal and -shm when they exist) without following a
 * link, checks it is a regular file of hubd's, and takes group and other
 * bits off: SQLite gives -wal and -shm the mode of the database file, and
 * other users must not read the URLs in them. A missing hubd.db is created
 * 0600 here, before SQLite would create it 0644. */
static int prepare_file(const char *path, const char *suffix)
{
    char name[PATH_MAX];
    if (snprintf(name, sizeof name, "%s%s", path, suffix) >= (int)sizeof name)
        return -ENAMETOOLONG;
    int create = suffix[0] ? 0 : O_CREAT;
    int fd = open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | create, 0600);
    if (fd < 0 && errno == ENOENT && !create)
        return 0;
    if (fd < 0) {
        int err = errno;
        log_err("cannot open %s: %s", name,
                err == ELOOP ? "it is a symbolic link (hubd follows none in its cache)"
                             : strerror(err));
        return -err;
    }
    struct stat st;
    int rc = fstat(fd, &st) ? -errno : 0;
    if (!rc && (!S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
        log_err("%s is not a regular file owned by uid %u (hubd's)", name, (unsigned)geteuid());
        rc = -EPERM;
    }
    if (!rc && (st.st_mode & 077) && fchmod(fd, 0600)) {
        rc = -errno;
        log_err("cannot chmod %s to 0600: %s", name, strerror(errno));
    }
    close(fd);
    return rc;
}

static int query_u64s(sqlite3 *h, const char *sql, const char *arg, uint64_t *a, uint64_t *b);

int db_open(const char *path, db_t **out)
{
    return db_open_ex(path, 1, out);
}

int db_open_ex(const char *path, int quick_check_it, db_t **out)
{
    db_t *db = calloc(1, sizeof *db);
    if (!db)
        return -ENOMEM;
    pthread_mutex_init(&db->uses_mu, NULL);
    if (!(db->path = strdup(path))) {
        free(db);
        return -ENOMEM;
    }
    int rc = prepare_file(path, "");
    if (!rc)
        rc = prepare_file(path, "-wal");
    if (!rc)
        rc = prepare_file(path, "-shm");
    if (!rc)
        rc = open_conn(path, SQLITE_OPEN_FULLMUTEX, 10000, &db->wr);
    /* Checked before migrating: a migration must not build on bad pages. */
    if (!rc && quick_check_it && !(rc = quick_check(db->wr, path)))
        atomic_store(&db->pages_checked, 1);
    if (!rc)
        rc = migrate(db->wr);
    uint64_t last = 0;
    if (!rc)
        rc = query_u64s(db->wr,
                        "SELECT max(coalesce((SELECT max(seq) FROM blobs), 0),"
                        " coalesce((SELECT max(seq) FROM entries), 0))",
                        NULL, &last, NULL);
    atomic_store(&db->seq, last);
    if (!rc)
        rc = db_totals_init(db); /* STATS' totals: counted once, then kept */
    if (!rc)
        rc = db_memo_init(db);         /* the hits' look-ups, remembered */
    atomic_store(&db->holds_dirty, 1); /* STATS' holds: counted at start-up */
    if (!rc)
        rc = open_conn(path, SQLITE_OPEN_NOMUTEX, 100, &db->rd);
    if (!rc)
        rc = open_conn(path, SQLITE_OPEN_FULLMUTEX, 1000, &db->rp);
    if (rc)
        goto fail;
    if (sqlite3_prepare_v2(db->rd,
                           "SELECT e.sha256, b.size, e.etag, e.last_modified,"
                           " coalesce(e.validated, e.created), b.ino, b.mtime_ns, b.ctime_ns"
                           " FROM entries e JOIN blobs b USING (sha256)"
                           " WHERE e.url = ?1 AND e.cred_tag = ?2",
                           -1, &db->find_entry, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->rd,
                           "SELECT size, ino, mtime_ns, ctime_ns FROM blobs WHERE sha256 = ?1", -1,
                           &db->find_blob, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->rd,
                           "SELECT id, etag, last_modified, total, durable, ranges FROM partials"
                           " WHERE url = ?1 AND cred_tag = ?2",
                           -1, &db->find_part, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->rd,
                           "SELECT b.size, b.ino, b.mtime_ns, b.ctime_ns FROM blobs b"
                           " WHERE b.sha256 = ?1 AND (b.public OR EXISTS"
                           " (SELECT 1 FROM entries e WHERE e.sha256 = b.sha256"
                           " AND e.cred_tag = ?2))",
                           -1, &db->find_blob_for, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->rd,
                           "SELECT commit_id FROM hf_revs WHERE repo = ?1 AND rev = ?2"
                           " AND cred_tag IN (?3, '') ORDER BY cred_tag = '' LIMIT 1",
                           -1, &db->find_rev, NULL) != SQLITE_OK) {
        rc = db_sq_err(db->rd, "prepare");
        goto fail;
    }
    if (sqlite3_prepare_v2(db->rp, "SELECT ino, mtime_ns, ctime_ns FROM blobs WHERE sha256 = ?1",
                           -1, &db->blob_stat, NULL) != SQLITE_OK) {
        rc = db_sq_err(db->rp, "prepare");
        goto fail;
    }
    *out = db;
    return 0;
fail:
    /* A damaged page may first show in any statement above. */
    if (rc == -EIO && ((db->wr && db_is_corrupt(sqlite3_errcode(db->wr))) ||
                       (db->rd && db_is_corrupt(sqlite3_errcode(db->rd)))))
        rc = -EUCLEAN;
    db_close(db);
    return rc;
}

void db_close(db_t *db)
{
    if (!db)
        return;
    db_memo_free(db);
    sqlite3_finalize(db->find_entry);
    sqlite3_finalize(db->find_blob);
    sqlite3_finalize(db->find_part);
    sqlite3_finalize(db->find_blob_for);
    sqlite3_finalize(db->find_rev);
    sqlite3_finalize(db->blob_stat);
    db_exec_forget(db->rp);
    db_exec_forget(db->rd);
    db_exec_forget(db->wr);
    sqlite3_close(db->rp);
    sqlite3_close(db->rd);
    sqlite3_close(db->wr);
    /* Uses not written (the owner flushes before: db_uses_flush) are lost:
     * they are hints. */
    for (size_t i = 0; i < db->nuses; i++)
        free(db->uses[i].url);
    free(db->uses);
    free(db->uses_index);
    pthread_mutex_destroy(&db->uses_mu);
    free(db->path);
    free(db);
}

int db_list_page(db_t *db, uint64_t before, unsigned max, uid_t uid,
                 void (*fn)(void *arg, const db_entry_t *e), void *arg)
{
    db_uses_flush(db); /* the order of use and who asked, as the hits made them */
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    /* A range of the entries_seq index: a page costs its rows, not the
     * table, and no read transaction outlives it (a client that reads
     * slowly must not hold the WAL). */
    if (sqlite3_prepare_v2(h,
                           "SELECT e.url, e.sha256, b.size, e.created, e.accessed, b.pinned, e.seq,"
                           " EXISTS (SELECT 1 FROM requesters r WHERE r.url = e.url"
                           " AND r.cred_tag = e.cred_tag AND r.uid = ?3), e.cred_tag"
                           " FROM entries e JOIN blobs b USING (sha256)"
                           " WHERE e.seq < ?1 ORDER BY e.seq DESC LIMIT ?2",
                           -1, &st, NULL) != SQLITE_OK) {
        int rc = db_sq_err(h, "list");
        sqlite3_mutex_leave(sqlite3_db_mutex(h));
        return rc;
    }
    sqlite3_bind_int64(st, 1, before ? (int64_t)before : INT64_MAX);
    sqlite3_bind_int(st, 2, (int)max);
    sqlite3_bind_int64(st, 3, (int64_t)uid);
    int rc, n = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        db_entry_t e = {
            .url = (const char *)sqlite3_column_text(st, 0),
            .sha256 = (const char *)sqlite3_column_text(st, 1),
            .size = (uint64_t)sqlite3_column_int64(st, 2),
            .created = sqlite3_column_int64(st, 3),
            .accessed = sqlite3_column_int64(st, 4),
            .pinned = sqlite3_column_int(st, 5),
            .seq = (uint64_t)sqlite3_column_int64(st, 6),
            .mine = sqlite3_column_int(st, 7),
            .cred_tag = (const char *)sqlite3_column_text(st, 8),
        };
        if (!e.cred_tag)
            e.cred_tag = "";
        if (e.url && e.sha256)
            fn(arg, &e);
        n++;
    }
    rc = rc == SQLITE_DONE ? n : db_sq_err(h, "list");
    sqlite3_finalize(st);
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

/* Runs one statement with text/int64 parameters given as a NULL-terminated
 * description: 't' text (may be NULL → SQL NULL), 'i' int64. */
/* The next use sequence number; the caller holds the writer's mutex. */
static int64_t next_seq(db_t *db)
{
    return (int64_t)(atomic_fetch_add(&db->seq, 1) + 1);
}

/* Adds uid to the requesters of (url, cred_tag)'s entry. */
static int add_requester(sqlite3 *h, const char *url, const char *cred_tag, uid_t uid)
{
    return db_exec(h,
                   "INSERT INTO requesters(url, cred_tag, uid) SELECT ?1, ?2, ?3"
                   " WHERE EXISTS (SELECT 1 FROM entries WHERE url = ?1 AND cred_tag = ?2)"
                   " ON CONFLICT DO NOTHING",
                   "tti", url, cred_tag, (int64_t)uid);
}

/* One record's statements, inside the caller's transaction. */
static int record_one(db_t *db, const db_record_t *rec, int64_t now)
{
    sqlite3 *h = db->wr;
    int rc = db_exec(h,
                     "INSERT INTO blobs(sha256, size, created, accessed, seq, recorded, verified,"
                     " public) VALUES (?1, ?2, ?3, ?3, ?4, ?4, ?3, ?5)"
                     " ON CONFLICT(sha256) DO UPDATE SET accessed = excluded.accessed,"
                     " seq = excluded.seq, public = max(public, excluded.public)",
                     "tiiii", rec->sha256, (int64_t)rec->size, now, next_seq(db),
                     (int64_t)(!rec->cred_tag || !*rec->cred_tag));
    if (!rc && rec->url)
        rc = db_exec(h,
                     "INSERT INTO entries(url, cred_tag, sha256, etag, last_modified, created,"
                     " accessed, seq, validated) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?6)"
                     " ON CONFLICT(url, cred_tag) DO UPDATE SET sha256 = excluded.sha256,"
                     " etag = excluded.etag, last_modified = excluded.last_modified,"
                     " accessed = excluded.accessed, seq = excluded.seq,"
                     " validated = excluded.validated",
                     "tttttii", rec->url, rec->cred_tag, rec->sha256, rec->etag, rec->last_modified,
                     now, next_seq(db));
    for (size_t i = 0; !rc && rec->url && i < rec->nuids; i++)
        rc = add_requester(h, rec->url, rec->cred_tag, rec->uids[i]);
    if (!rc && rec->partial_id) /* its bytes are the blob now */
        rc = db_exec(h, "DELETE FROM partials WHERE id = ?1", "i", (int64_t)rec->partial_id);
    return rc;
}

/* All n in one transaction, none alone: 0, or the first failure's (the
 * transaction rolled back). */
static int record_all(db_t *db, const db_record_t *recs, size_t n, int64_t now)
{
    sqlite3 *h = db->wr;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++)
        rc = record_one(db, &recs[i], now);
    return db_tx_end(h, rc);
}

int db_record_downloads(db_t *db, const db_record_t *recs, size_t n, int *rcs)
{
    int64_t now = (int64_t)time(NULL);
    sqlite3 *h = db->wr;
    /* Many: first all together. A savepoint for each (below) has SQLite
     * keep the pages each record changes in a sub-journal for the whole
     * transaction, which spills to a temporary file past 64 KiB: a group
     * of 50 small files wrote 11 pages each there. A
     * record fails rarely (a full disk, a damaged page): then again, one
     * savepoint each, so that it goes back alone and the others stand. */
    int rc = n > 1 ? record_all(db, recs, n, now) : -1;
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            rcs[i] = 0;
        return 0;
    }
    rc = db_tx_begin(h);
    for (size_t i = 0; i < n; i++)
        rcs[i] = rc;
    if (rc)
        return rc;
    for (size_t i = 0; i < n && !rc; i++) {
        if (n == 1) {
            rc = rcs[0] = record_one(db, &recs[0], now);
            break;
        }
        /* A record that fails goes back alone, the others stand.
         * The totals' triggers added its change to the pending sums: they
         * go back with it (the rollback hook sees only whole ones). */
        if ((rc = db_exec(h, "SAVEPOINT rec", "")) != 0)
            break;
        int64_t bytes = db->pending_bytes, blobs = db->pending_blobs;
        rcs[i] = record_one(db, &recs[i], now);
        if (rcs[i]) {
            db->pending_bytes = bytes;
            db->pending_blobs = blobs;
            if (db_exec(h, "ROLLBACK TO rec", ""))
                rc = rcs[i]; /* SQLite undid more (a full disk): the transaction goes */
        }
        if (!rc)
            rc = db_exec(h, "RELEASE rec", "");
    }
    rc = db_tx_end(h, rc);
    for (size_t i = 0; i < n && rc; i++)
        if (!rcs[i])
            rcs[i] = rc; /* not committed: none of them stands */
    return rc;
}

int db_record_download(db_t *db, const db_record_t *rec)
{
    int rc1;
    int rc = db_record_downloads(db, rec, 1, &rc1);
    return rc ? rc : rc1;
}

/* Gives each row (sha256, size) of a prepared statement on the writer to
 * fn, then finalizes it. Stopping early is an error, never a short list
 * (-EUCLEAN for a corrupt page): reconcile would take the rows it never
 * saw for missing. */
static int blob_rows(sqlite3 *h, sqlite3_stmt *st,
                     void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg,
                     const char *what)
{
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *sha = (const char *)sqlite3_column_text(st, 0);
        if (sha)
            fn(arg, sha, (uint64_t)sqlite3_column_int64(st, 1));
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : db_sq_err_or_corrupt(h, what);
}

int db_each_blob(db_t *db, void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->wr, "SELECT sha256, size FROM blobs", -1, &st, NULL) != SQLITE_OK)
        return db_sq_err_or_corrupt(db->wr, "listing blobs");
    return blob_rows(db->wr, st, fn, arg, "listing blobs");
}

int db_each_blob_in(db_t *db, const char *aa,
                    void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg)
{
    sqlite3_stmt *st;
    /* A range of the primary key: blobs/<aa>/ is the rows from "aa" to
     * the next two letters. */
    if (sqlite3_prepare_v2(
            db->wr, "SELECT sha256, size FROM blobs WHERE sha256 >= ?1 AND sha256 < ?1 || 'g'", -1,
            &st, NULL) != SQLITE_OK)
        return db_sq_err(db->wr, "listing a folder's blobs");
    sqlite3_bind_text(st, 1, aa, 2, SQLITE_TRANSIENT);
    return blob_rows(db->wr, st, fn, arg, "listing a folder's blobs");
}

int db_check_pages(db_t *db)
{
    sqlite3 *h = NULL;
    /* A connection of its own: the check reads every page, and must hold
     * up neither the writer nor the hits' reader meanwhile. */
    int rc = sqlite3_open_v2(
        db->path, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, NULL);
    rc = rc == SQLITE_OK ? quick_check(h, db->path) : db_sq_err_or_corrupt(h, db->path);
    sqlite3_close(h);
    if (rc == -EUCLEAN)
        atomic_store(&db->damaged, 1);
    if (rc == 0 || rc == -EUCLEAN)
        atomic_store(&db->pages_checked, 1);
    return rc;
}

int db_pages_checked(db_t *db)
{
    return atomic_load(&db->pages_checked);
}

int db_damaged(db_t *db)
{
    return atomic_load(&db->damaged);
}

void db_lock(db_t *db)
{
    sqlite3_mutex_enter(sqlite3_db_mutex(db->wr));
}

void db_unlock(db_t *db)
{
    sqlite3_mutex_leave(sqlite3_db_mutex(db->wr));
}

int db_entry_validated(db_t *db, const char *url, const char *cred_tag, int64_t now)
{
    sqlite3 *h = db->wr;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = db_exec(h, "UPDATE entries SET validated = ?3 WHERE url = ?1 AND cred_tag = ?2", "tti",
                     url, cred_tag, now);
    if (!rc && sqlite3_changes(h) == 0)
        rc = -ENOENT;
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

typedef struct one_blob {
    char *sha;
    uint64_t *size;
    int found;
} one_blob_t;

static void take_one(void *arg, const char *sha256, uint64_t size)
{
    one_blob_t *o = arg;
    if (strlen(sha256) == 64) {
        memcpy(o->sha, sha256, 65);
        *o->size = size;
        o->found = 1;
    }
}

int db_next_to_verify(db_t *db, int64_t before, char sha_out[65], uint64_t *size_out)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    one_blob_t o = {sha_out, size_out, 0};
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc;
    if (sqlite3_prepare_v2(h,
                           "SELECT sha256, size FROM blobs WHERE verified < ?1"
                           " ORDER BY verified LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_sq_err(h, "next to verify");
    } else {
        sqlite3_bind_int64(st, 1, before);
        rc = blob_rows(h, st, take_one, &o, "next to verify");
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc ? rc : o.found ? 0 : -ENOENT;
}

int db_set_verified(db_t *db, const char *sha256, int64_t when, const db_blob_stat_t *bs)
{
    sqlite3 *h = db->wr;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = db_exec(h,
                     "UPDATE blobs SET verified = ?2, ino = ?3, mtime_ns = ?4, ctime_ns = ?5"
                     " WHERE sha256 = ?1",
                     "tiiii", sha256, when, (int64_t)bs->ino, bs->mtime_ns, bs->ctime_ns);
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_add_blobs(db_t *db, const db_found_blob_t *v, size_t n)
{
    sqlite3 *h = db->wr;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    for (size_t i = 0; !rc && i < n; i++) {
        /* created and accessed: the file's mtime (its commit); verified 0:
         * not re-hashed since, so background verification takes these
         * first. */
        rc = db_exec(h,
                     "INSERT INTO blobs(sha256, size, created, accessed, seq, recorded,"
                     " verified, public) VALUES (?1, ?2, ?3, ?3, ?4, ?4, 0, 1)"
                     " ON CONFLICT(sha256) DO NOTHING",
                     "tiii", v[i].sha256, (int64_t)v[i].size, v[i].mtime, next_seq(db));
    }
    return db_tx_end(h, rc);
}

/* One row of integers from a statement on h. */
static int query_u64s(sqlite3 *h, const char *sql, const char *arg, uint64_t *a, uint64_t *b)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK)
        return db_sq_err(h, sql);
    if (arg)
        sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *a = (uint64_t)sqlite3_column_int64(st, 0);
        if (b)
            *b = (uint64_t)sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : db_sq_err(h, sql);
}

int db_resolve(db_t *db, const char *url_or_sha, char sha_out[65])
{
    uint64_t size;
    if (hex_is(url_or_sha, 64, 1)) {
        int rc = db_find_blob(db, url_or_sha, &size);
        if (!rc)
            memcpy(sha_out, url_or_sha, 65);
        return rc;
    }
    return db_find_entry(db, url_or_sha, "", sha_out, &size);
}

uint64_t db_use_seq(db_t *db)
{
    return atomic_load(&db->seq);
}

static int64_t fence_of(uint64_t fence)
{
    return fence > INT64_MAX ? INT64_MAX : (int64_t)fence;
}

int db_total_size(db_t *db, uint64_t fence, uint64_t *bytes)
{
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc;
    if (sqlite3_prepare_v2(h, "SELECT coalesce(sum(size), 0) FROM blobs WHERE recorded <= ?1", -1,
                           &st, NULL) != SQLITE_OK) {
        rc = db_sq_err(h, "total size");
    } else {
        sqlite3_bind_int64(st, 1, fence_of(fence));
        rc = sqlite3_step(st) == SQLITE_ROW ? 0 : db_sq_err(h, "total size");
        if (!rc)
            *bytes = (uint64_t)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_lru(db_t *db, unsigned max, const char *keep, uint64_t fence,
           void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg)
{
    db_uses_flush(db); /* the order of use, as the hits made it */
    sqlite3 *h = db->wr;
    sqlite3_stmt *st;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc;
    if (sqlite3_prepare_v2(h,
                           "SELECT sha256, size FROM blobs WHERE pinned = 0 AND sha256 <> ?1"
                           " AND recorded <= ?3 AND NOT EXISTS (SELECT 1 FROM holds h"
                           " WHERE h.sha256 = blobs.sha256) ORDER BY seq, rowid LIMIT ?2",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_sq_err(h, "lru");
    } else {
        sqlite3_bind_text(st, 1, keep ? keep : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, (int)max);
        sqlite3_bind_int64(st, 3, fence_of(fence));
        rc = blob_rows(h, st, fn, arg, "lru");
    }
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_set_pinned(db_t *db, const char *sha256, int pinned)
{
    sqlite3 *h = db->wr;
    sqlite3_mutex_enter(sqlite3_db_mutex(h));
    int rc = db_exec(h, "UPDATE blobs SET pinned = ?2 WHERE sha256 = ?1", "ti", sha256,
                     (int64_t)(pinned != 0));
    if (!rc && sqlite3_changes(h) == 0)
        rc = -ENOENT;
    sqlite3_mutex_leave(sqlite3_db_mutex(h));
    return rc;
}

int db_remove_entry(db_t *db, const char *url, const char *cred_tag, const char *only_sha,
                    char sha_out[65], int *blob_gone)
{
    sqlite3 *h = db->wr;
    *blob_gone = 0;
    int rc = db_tx_begin(h);
    if (rc)
        return rc;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, "SELECT sha256 FROM entries WHERE url = ?1 AND cred_tag = ?2", -1,
                           &st, NULL) != SQLITE_OK)
        return db_tx_end(h, db_sq_err(h, "remove"));
    sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, cred_tag, -1, SQLITE_STATIC);
    const unsigned char *sha = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
    rc = sha && strlen((const char *)sha) == 64 ? 0 : -ENOENT;
    if (!rc && only_sha && strcmp((const char *)sha, only_sha) != 0)
        rc = -ENOENT; /* the entry names other bytes now: not the ones refused */
    if (!rc)
        memcpy(sha_out, sha, 65);
    sqlite3_finalize(st);
    if (!rc)
        rc =
            db_exec(h, "DELETE FROM entries WHERE url = ?1 AND cred_tag = ?2", "tt", url, cred_tag);
    uint64_t left = 0;
    if (!rc)
        rc = query_u64s(h, "SELECT count(*) FROM entries WHERE sha256 = ?1", sha_out, &left, NULL);
    int held = 0;
    if (!rc && left == 0 && !(rc = db_exec(h, "DELETE FROM holds WHERE sha256 = ?1", "t", sha_out)))
        held = sqlite3_changes(h) > 0;
    if (!rc && left == 0) {
        rc = db_exec(h, "DELETE FROM blobs WHERE sha256 = ?1", "t", sha_out);
        *blob_gone = !rc;
    }
    rc = db_tx_end(h, rc);
    if (rc)
        *blob_gone = 0;
    else if (held)
        atomic_store(&db->holds_dirty, 1);
    return rc;
}
