/* db: the cache's metadata in SQLite (WAL).
 *
 * Two connections on one file. The reader is used only on the loop thread for
 * short indexed look-ups (WAL readers never wait for the writer). The writer
 * is used only from libuv pool threads, inside a job's work items, because a
 * commit writes and may fsync; it is opened in serialized mode so two pool
 * threads committing at once simply take turns. */
#ifndef HUBD_DB_H
#define HUBD_DB_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct db db_t;

/* What a committed download records: the blob and the URL's entry. */
typedef struct db_record {
    const char *url;           /* canonical URL */
    const char *cred_tag;      /* "" when fetched without credentials */
    const char *sha256;        /* 64 lowercase hex digits */
    uint64_t size;             /* bytes */
    const char *etag;          /* may be NULL */
    const char *last_modified; /* may be NULL */
    uint64_t partial_id;       /* the partial row that became this blob, 0 if none */
    const uid_t *uids;         /* who asked for it: the entry's requesters (may be NULL) */
    size_t nuids;
} db_record_t;

/* The identity of a blob's file as committed: a hit checks it (cheaply)
 * before handing the file out. ino 0: not recorded (then recorded at the
 * next hit). */
typedef struct db_blob_stat {
    uint64_t ino;
    int64_t mtime_ns;
    int64_t ctime_ns;
} db_blob_stat_t;

/* A file's identity, as recorded, from its stat. */
static inline db_blob_stat_t db_blob_stat_of(const struct stat *st)
{
    db_blob_stat_t bs = {(uint64_t)st->st_ino,
                         (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
                         (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec};
    return bs;
}

/* A resumable partial download (tmp/<id>.part). */
typedef struct db_partial {
    uint64_t id;
    char *etag;          /* may be NULL; owned (db_partial_free) when found */
    char *last_modified; /* may be NULL; same */
    int64_t total;       /* the whole file's length, -1 unknown */
    uint64_t durable;    /* bytes fdatasync'ed before the row said so */
    char *ranges;        /* finished ranges past durable, "a-b,c-d" (end exclusive), or NULL */
} db_partial_t;

typedef struct db_entry {
    const char *url;
    const char *sha256;
    uint64_t size;
    int pinned;
    int64_t created;      /* unix seconds */
    int64_t accessed;     /* unix seconds */
    uint64_t seq;         /* use sequence: the next page starts below it */
    int mine;             /* the uid asking is among the entry's requesters */
    const char *cred_tag; /* "" for a public entry, else its credential tag */
} db_entry_t;

/* Opens (creating and migrating) <path>. Start-up only. The file (and
 * its -wal and -shm) must be a regular file of hubd's, never a link; it is
 * created 0600 and a looser one is made 0600. -EUCLEAN when SQLite finds
 * it corrupt or not a database (PRAGMA quick_check, or an error while
 * opening or migrating): the caller sets it aside and rebuilds
 * (reconcile_set_aside, reconcile_rebuild). */
int db_open(const char *path, db_t **out);
/* The same, with PRAGMA quick_check (it reads every page: 0.4 s at a
 * million entries) only when quick_check_it: the daemon skips it after a
 * clean stop, when nothing can have torn a page. */
int db_open_ex(const char *path, int quick_check_it, db_t **out);
/* Pool thread, while hubd serves: the quick_check db_open_ex skipped, on a
 * read-only connection of its own. -EUCLEAN (logged) when a page is bad:
 * then db_damaged says so, and the daemon leaves no clean-stop marker, so
 * that the next start checks, sets the file aside and rebuilds. */
int db_check_pages(db_t *db);
int db_damaged(db_t *db);
/* Whether this run checked every page: at open, or by db_check_pages. A
 * clean-stop marker may be left only then (else the next start would skip
 * a check no run has done since a crash). */
int db_pages_checked(db_t *db);
void db_close(db_t *db);

/* A blob file found under blobs/ when a database is rebuilt. */
typedef struct db_found_blob {
    char sha256[65]; /* its name */
    uint64_t size;   /* the file's */
    int64_t mtime;   /* the file's (unix seconds): about when it was committed */
} db_found_blob_t;

/* Start-up only, into a rebuilt database. Records the blobs, without
 * entries, in one transaction and in the order given (the first is the
 * least recently used), as not verified since and with no file identity
 * (recorded by its first background verification: start-up may yet unlink
 * a tmp name of the same file, which changes its ctime).
 * They are recorded public (a hit by digest for everyone), so only public
 * blobs (0444 files) may be given. */
int db_add_blobs(db_t *db, const db_found_blob_t *v, size_t n);

/* Loop thread. 0 and the blob's digest and size, or -ENOENT. */
int db_find_entry(db_t *db, const char *url, const char *cred_tag, char sha_out[65],
                  uint64_t *size_out);

/* What revalidating an entry needs: its validators ("" when none, or too
 * long) and when it was last known current (unix seconds). */
typedef struct db_entry_meta {
    char etag[256];
    char last_modified[64];
    int64_t validated;
    db_blob_stat_t stat; /* its blob's recorded identity (db_blobstat) */
} db_entry_meta_t;
/* db_find_entry, and the entry's meta (NULL: not wanted). */
int db_find_entry_meta(db_t *db, const char *url, const char *cred_tag, char sha_out[65],
                       uint64_t *size_out, db_entry_meta_t *meta);
/* Pool threads. The origin said the entry is still current (304): it was
 * validated `now`. 0, or -ENOENT when the entry is gone meanwhile. */
int db_entry_validated(db_t *db, const char *url, const char *cred_tag, int64_t now);
/* Loop thread. 0 and the blob's size, or -ENOENT. */
int db_find_blob(db_t *db, const char *sha256, uint64_t *size_out);
/* Loop thread. Like db_find_blob, but only a public blob (its bytes were
 * once fetched without credentials; or recovered by a rebuild from a 0444
 * file) or one that an entry with these credentials (cred_tag) names: a
 * digest alone must not open a gated file to whoever knows it, even after
 * its entry moved to other bytes. */
int db_find_blob_for(db_t *db, const char *sha256, const char *cred_tag, uint64_t *size_out);
/* Loop thread. db_find_blob_for (db_find_blob when cred_tag is NULL), and
 * the blob's recorded identity (db_blobstat) from the same statement: a
 * hit on the loop needs both, and each statement on the loop's reader
 * takes and drops its WAL read locks (fcntl calls). */
int db_find_blob_stat(db_t *db, const char *sha256, const char *cred_tag, uint64_t *size_out,
                      db_blob_stat_t *stat_out);
/* Loop thread. How many of the look-ups above (db_find_entry*,
 * db_find_blob*) were answered from memory: each is remembered until a
 * commit changes a row it read (db_memo.c). */
uint64_t db_memo_answers(const db_t *db);
/* Pool threads. One page of the entries, most recently used first: up to
 * max entries with a use sequence below `before` (0: from the newest);
 * `mine` says whether uid asked for each. Returns the number of rows read
 * (fewer than max: the last page), or a negative errno. An entry used while
 * a listing goes on moves to the front, so it may not be listed. */
int db_list_page(db_t *db, uint64_t before, unsigned max, uid_t uid,
                 void (*fn)(void *arg, const db_entry_t *e), void *arg);

/* Pool threads. One transaction: upsert the blob, upsert the entry. */
int db_record_download(db_t *db, const db_record_t *rec);
/* Pool threads. n of them in one transaction, one fsync for all (a group
 * commit): rcs[i] is each one's outcome. A record that fails is rolled
 * back alone (a savepoint) and the others stand; a COMMIT that fails (a
 * full disk) fails them all. Returns the transaction's outcome. */
int db_record_downloads(db_t *db, const db_record_t *recs, size_t n, int *rcs);
/* Start-up only. Calls fn for every blob row. A negative errno when the
 * listing stopped before the last row (-EUCLEAN: a corrupt page). */
int db_each_blob(db_t *db, void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg);
/* Pool threads. The same for the blobs whose digest begins with the two
 * hex digits aa (one folder of blobs/: the background check's step). */
int db_each_blob_in(db_t *db, const char *aa,
                    void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg);
/* Start-up (or pool threads). Deletes a blob row and every entry naming it;
 * with unless_pinned, only an unpinned blob (-EBUSY if pinned). -ENOENT
 * when there is no such blob. */
int db_forget_blob(db_t *db, const char *sha256, int unless_pinned);
/* Pool threads (db_forget.c). n of them in one transaction (eviction's
 * batches): rcs[i] is 0 (forgotten), -EBUSY (pinned or held, with
 * unless_pinned: kept) or -ENOENT (gone meanwhile); any other failure
 * fails the transaction, and nothing is forgotten (its rcs are moot). */
int db_forget_blobs(db_t *db, const char *const *sha256, size_t n, int unless_pinned, int *rcs);

/* Pool threads. Holds the writer connection (recursive) across a file
 * operation and the rows that describe it, so that a commit (rename, then
 * row) and a removal (row, then unlink) of the same blob never interleave. */
void db_lock(db_t *db);
void db_unlock(db_t *db);

/* Loop thread. 0 and the URL's partial (free it with db_partial_free), or
 * -ENOENT (or -ENOMEM). */
int db_find_partial(db_t *db, const char *url, const char *cred_tag, db_partial_t *out);
void db_partial_free(db_partial_t *p);
/* Pool threads. Records (or moves forward) partial `id` of url, replacing
 * any other partial row of the same URL; p->id is not used. */
int db_save_partial(db_t *db, uint64_t id, const char *url, const char *cred_tag,
                    const db_partial_t *p);
/* Pool threads (or start-up). */
int db_forget_partial(db_t *db, uint64_t id);
/* Start-up only. Partial `id` with its URL and credential tag (owned:
 * free the three with db_partial_free and free); -ENOENT when no such row. */
int db_get_partial(db_t *db, uint64_t id, char **url, char **cred_tag, db_partial_t *out);
/* Start-up only. Calls fn for every partial row with the bytes its file
 * must hold (durable, or the end of its last range); errors as
 * db_each_blob. */
int db_each_partial(db_t *db, void (*fn)(void *arg, uint64_t id, uint64_t keep), void *arg);
/* The end of the last of a partial's ranges past durable ("a-b,..."), or
 * durable: the bytes its file must hold. -1 for ranges that do not parse
 * (ascending, not overlapping, past durable). */
int64_t db_partial_keep(uint64_t durable, const char *ranges);
/* Reads the next range [*a, *b) of a ranges text at *r and moves *r past
 * it: 1, or 0 at the end, -1 when it does not parse. */
int db_ranges_next(const char **r, uint64_t *a, uint64_t *b);

/* Any thread. The blobs' total size and count as committed: counters
 * kept as rows come and go (db_totals.c), no SQLite. Returns 0. */
int db_cache_size(db_t *db, uint64_t *bytes, uint64_t *count);
/* Pool thread. The counters against a scan of the table: 0 when they
 * agree, 1 when they did not (they are the scan's now; *was_bytes and
 * *was_blobs what they said), or -errno. */
int db_totals_check(db_t *db, uint64_t *was_bytes, uint64_t *was_blobs);
/* Loop thread. A URL (its entry without credentials) or a 64-hex digest
 * (a blob) to the blob's digest; -ENOENT when nothing matches. */
int db_resolve(db_t *db, const char *url_or_sha, char sha_out[65]);

/* Pool threads (db_revs.c). The Hub named commit (40 hex) for revision rev
 * of repo ("prefix org/name") to credential tag cred_tag ("": none), asked
 * by uid: recorded, replacing what it named before; uid's oldest notes
 * beyond per_uid go. */
int db_rev_note(db_t *db, const char *repo, const char *rev, const char *cred_tag,
                const char *commit, uid_t uid, unsigned per_uid);
/* Loop thread. The commit last noted for rev of repo to cred_tag, else to
 * no credentials; -ENOENT when neither was noted. */
int db_rev_find(db_t *db, const char *repo, const char *rev, const char *cred_tag,
                char commit_out[41]);

/* Any thread. The last use sequence number given out: an eviction run's
 * fence (blobs first recorded after it are not its business). */
uint64_t db_use_seq(db_t *db);
/* Pool threads. Total size of the blobs first recorded at a use sequence
 * at most fence (UINT64_MAX: all). */
int db_total_size(db_t *db, uint64_t fence, uint64_t *bytes);
/* Pool threads. Up to max unpinned blobs first recorded at most at fence,
 * least recently used first (by the use sequence, never the wall clock),
 * other than `keep` (may be NULL); fn gets each. */
int db_lru(db_t *db, unsigned max, const char *keep, uint64_t fence,
           void (*fn)(void *arg, const char *sha256, uint64_t size), void *arg);
/* Pool threads. -ENOENT when no such blob. */
int db_set_pinned(db_t *db, const char *sha256, int pinned);
/* Pool threads. Deletes url's entry of these credentials (cred_tag, ""
 * for none), only while it names only_sha when that is not NULL; when it
 * was the blob's last entry, the blob row too, and *blob_gone says so.
 * sha_out gets the blob's digest. -ENOENT when there is no such entry. */
int db_remove_entry(db_t *db, const char *url, const char *cred_tag, const char *only_sha,
                    char sha_out[65], int *blob_gone);

/* Any thread (db_uses.c). Marks a blob (and the entry, when url is given,
 * with uid among its requesters) used now: the next use sequence number,
 * taken now, and written later with other uses in one transaction. A
 * full queue (DB_USES_MAX) is written at once, by the caller: call it from
 * a pool thread. 0, or an error of that write. */
int db_touch(db_t *db, const char *sha256, const char *url, const char *cred_tag, uid_t uid);
/* Any thread, the loop too: the same, written never here. 1 when the
 * queue holds DB_USES_MAX or more (the caller has db_uses_flush run in the
 * pool now), -ENOMEM when it had no room (DB_USES_BOUND uses wait: the
 * pool's writes fell that far behind; this use, a hint, is lost), else 0. */
int db_touch_queue(db_t *db, const char *sha256, const char *url, const char *cred_tag, uid_t uid);
#define DB_USES_MAX 4096
#define DB_USES_BOUND (4 * DB_USES_MAX) /* db_touch_queue's: its caller cannot write */
/* Pool threads. Writes the queued uses in one transaction: seq and
 * accessed only move forward (a commit's newer number is kept). What reads
 * the use order or the requesters calls it first (db_list_page, db_lru,
 * db_holds_each), so they read as if each use were written at once. A
 * failed write drops the uses it had (hints), logged. */
int db_uses_flush(db_t *db);
/* Any thread. Uses queued and not yet written. */
size_t db_uses_pending(db_t *db);

/* Pool threads. The identity recorded for a blob's file (-ENOENT: no such
 * blob), and recording it. */
int db_get_blob_stat(db_t *db, const char *sha256, db_blob_stat_t *out);
int db_set_blob_stat(db_t *db, const char *sha256, const db_blob_stat_t *bs);
/* Pool threads. The identities of n blobs, in one transaction. */
int db_set_blob_stats(db_t *db, const char *const *sha256, const db_blob_stat_t *bs, size_t n);
/* Pool threads. The same read, for a hit: on a connection of its own, so
 * it never waits for the writer (a commit's fsync, an eviction's batch);
 * it sees the rows as the last commit left them. */
int db_read_blob_stat(db_t *db, const char *sha256, db_blob_stat_t *out);

/* Pool threads. The blob least recently verified, if that was before
 * `before` (unix seconds; -ENOENT when none is due), and recording a
 * verification with the identity of the file verified, in one statement
 * (one commit). */
int db_next_to_verify(db_t *db, int64_t before, char sha_out[65], uint64_t *size_out);
int db_set_verified(db_t *db, const char *sha256, int64_t when, const db_blob_stat_t *bs);

/* ---- holds (db_holds.c) --------------------------------------------------
 * A hold keeps a blob from eviction while a user's HF cache links to it:
 * uid holds blob sha256 for label ("models/org/name@main") through the
 * symlink `link`. Primary key (uid, label, link). Pool threads only (the
 * writer), except db_holds_stats. */
typedef struct db_hold {
    uid_t uid;
    const char *label;  /* at most DB_HOLD_LABEL_MAX bytes */
    const char *sha256; /* 64 lowercase hex digits */
    const char *link;   /* absolute path, at most DB_HOLD_LINK_MAX bytes */
    int64_t created;    /* unix seconds */
} db_hold_t;
#define DB_HOLD_LABEL_MAX 512
#define DB_HOLD_LINK_MAX 4096

/* Records h (the same uid, label and link again: moved to h's blob, created
 * renewed). -ENOENT when there is no such blob. moved_from: the blob the
 * row held before when it moved and uid holds that blob no more (its
 * grant is to go), else "". */
int db_hold_add(db_t *db, const db_hold_t *h, char moved_from[65]);
/* A uid's bounds on its holds; 0: none. */
typedef struct db_hold_bounds {
    uint64_t max_holds;    /* rows */
    uint64_t max_bytes;    /* bytes of the blobs held, each once */
    uint64_t max_text;     /* bytes the rows store (db_hold_row_bytes, summed) */
    uint64_t max_per_blob; /* rows on one blob */
} db_hold_bounds_t;
/* The bytes h's row stores, as the bounds count them: its label, its link
 * and DB_HOLD_ROW_BYTES for the rest (the key's index stores label and
 * link again, so the file grows by about twice the sum). Pure. */
uint64_t db_hold_row_bytes(const db_hold_t *h);
#define DB_HOLD_ROW_BYTES 100
/* Whether h fits in uid's bounds b: 0 yes; DB_HOLD_OVER_COUNT when it
 * would be a row past max_holds; DB_HOLD_OVER_TEXT when its row would take
 * what uid's rows store past max_text; DB_HOLD_OVER_LINKS when uid has
 * max_per_blob other rows on the blob; DB_HOLD_OVER_BYTES when its blob
 * would take the bytes uid holds past max_bytes; or a negative errno. A
 * renewal adds no row, a blob uid holds already no bytes. Call it under
 * db_lock, which db_hold_add's transaction takes too, so that the answer
 * still holds when the row is written. */
int db_hold_fits(db_t *db, const db_hold_t *h, const db_hold_bounds_t *b);
#define DB_HOLD_OVER_COUNT 1
#define DB_HOLD_OVER_BYTES 2
#define DB_HOLD_OVER_TEXT 3
#define DB_HOLD_OVER_LINKS 4
/* uid's hold rows, the bytes of the blobs it holds (each once), and what
 * its rows store (text, db_hold_row_bytes summed; NULL: not asked). */
int db_holds_of(db_t *db, uid_t uid, uint64_t *holds, uint64_t *bytes, uint64_t *text);
/* Deletes uid's holds of label, or only its hold through link (link not
 * NULL); *released gets how many. fn (may be NULL) gets each blob that uid
 * no longer holds at all, after the transaction. */
int db_hold_release(db_t *db, uid_t uid, const char *label, const char *link, unsigned *released,
                    void (*fn)(void *arg, const char *sha256), void *arg);
/* Deletes one hold, if it is still the one seen (same created: a HOLD
 * renewed meanwhile stays). *still_held: uid holds the blob otherwise.
 * -ENOENT when the row was gone or renewed. */
int db_hold_drop(db_t *db, const db_hold_t *h, int *still_held);
/* Up to max holds created at most at created_before (unix seconds), those
 * of the least recently used blobs first (eviction's candidates, whose links
 * are checked before it picks), resuming after the last hold the previous
 * call gave and going round: successive calls see every hold in turn. */
int db_holds_each(db_t *db, unsigned max, int64_t created_before,
                  void (*fn)(void *arg, const db_hold_t *h), void *arg);
/* One line of HOLDS: a uid's holds of one label. */
typedef struct db_hold_sum {
    uid_t uid;
    const char *label;
    uint64_t files; /* holds (links) */
    uint64_t size;  /* their blobs' bytes, each blob once */
} db_hold_sum_t;
/* The first max sums per (uid, label), by uid then label; uid < 0: every
 * uid. */
int db_holds_list(db_t *db, int64_t uid, unsigned max,
                  void (*fn)(void *arg, const db_hold_sum_t *s), void *arg);
/* The uids (the first cap, by uid; *n: how many in all) holding the blob an
 * RM of url_or_sha would remove: the digest's (by_sha), or the blob of the
 * URL's public entry when no other entry names it (else none: only the
 * entry goes). Call it under db_lock to remove on its answer. */
int db_rm_holders(db_t *db, const char *url_or_sha, int by_sha, uid_t *uids, unsigned cap,
                  unsigned *n);
/* What eviction passes over, by reason: pinned blobs, and unpinned blobs
 * that holds keep (users' HF caches link to them) with those holds and
 * their uids. Nothing else keeps a blob: one a client has open goes all
 * the same (its descriptor keeps the bytes, outside the cache's count). */
typedef struct db_kept {
    uint64_t pinned_blobs, pinned_bytes; /* pinned (held or not) */
    uint64_t held_blobs, held_bytes;     /* unpinned, with a hold */
    uint64_t holds, holders;             /* the holds on those, and their distinct uids */
} db_kept_t;
/* Pool threads: scans of the blobs and the holds. */
int db_kept(db_t *db, db_kept_t *out);
/* The first max uids that hold something, by uid: each one's hold rows
 * and the bytes of the blobs it holds (each once), read from the counts
 * the triggers keep (no scan of holds): the metrics' per-user series. */
int db_holds_by_uid(db_t *db, unsigned max,
                    void (*fn)(void *arg, uid_t uid, uint64_t holds, uint64_t bytes), void *arg);
/* Pool threads (or start-up): after blobs went with their holds (removal,
 * quarantine, start-up's checks), counts again what db_holds_stats and
 * db_holds_of say; a no-op when none did. */
int db_holds_refresh(db_t *db);
/* Any thread: the hold rows and the bytes of the blobs they hold, as of the
 * last change (kept in memory: STATS reads them on the loop). */
void db_holds_stats(db_t *db, uint64_t *holds, uint64_t *held_bytes);

#endif
