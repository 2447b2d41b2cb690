/* Unit tests for daemon/db.c: the cache's metadata in SQLite: its schema,
 * entries and blobs, listings, use order, requesters, the migration from
 * the first schema, and concurrent writers. The partials table is
 * test_db_partial.c's, the database's files and damage test_db_files.c's;
 * the fixture is db_fixture.h's. */
#include "db_fixture.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define N_THREADS 4
#define N_PER_THREAD 100

/* What db_list reported, copied out of the callback. */
typedef struct listed {
    int n;
    struct {
        char url[128];
        char sha[65];
        uint64_t size;
        int64_t created, accessed;
    } e[16];
} listed_t;

/* Sizes past 32 bits, different for each k. */
static uint64_t size_of(int k)
{
    return (uint64_t)k << 32 | (uint64_t)k * 100;
}

static void on_entry(void *arg, const db_entry_t *e)
{
    listed_t *l = arg;

    ck_assert_int_lt(l->n, 16);
    snprintf(l->e[l->n].url, sizeof l->e[l->n].url, "%s", e->url);
    snprintf(l->e[l->n].sha, sizeof l->e[l->n].sha, "%s", e->sha256);
    l->e[l->n].size = e->size;
    l->e[l->n].created = e->created;
    l->e[l->n].accessed = e->accessed;
    l->n++;
}

/* The whole listing the way LIST streams it: a page at a time, pages of 3
 * so that paging is exercised (the cursor is the last entry's use
 * sequence). */
typedef struct pager {
    void (*fn)(void *arg, const db_entry_t *e);
    void *arg;
    uint64_t last;
} pager_t;

static void page_entry(void *arg, const db_entry_t *e)
{
    pager_t *p = arg;
    ck_assert(p->last == 0 || e->seq < p->last); /* strictly most recent first */
    p->last = e->seq;
    p->fn(p->arg, e);
}

static int db_list(db_t *d, void (*fn)(void *arg, const db_entry_t *e), void *arg)
{
    pager_t p = {fn, arg, 0};
    for (;;) {
        uint64_t before = p.last;
        int n = db_list_page(d, before, 3, 0, page_entry, &p);
        if (n < 0)
            return n;
        if (n < 3)
            return 0;
    }
}

static void page_mine(void *arg, const db_entry_t *e)
{
    *(int *)arg = e->mine;
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(db_open_creates_schema)
{
    struct stat st;

    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(raw_int("PRAGMA user_version"), 8);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                             " AND name IN ('blobs', 'entries')"),
                     2);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE type = 'index'"
                             " AND name IN ('entries_sha256', 'blobs_seq', 'entries_seq',"
                             " 'blobs_verified')"),
                     4);
    char *mode = raw_text("PRAGMA journal_mode");
    ck_assert_str_eq(mode, "wal");
    free(mode);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), 0);

    /* An empty cache lists nothing. */
    listed_t l = {0};
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 0);
}
END_TEST

START_TEST(db_record_then_find)
{
    char sha[65];
    uint64_t size = 0;
    const uint64_t big = 5ULL << 30; /* 5 GiB: past 32 bits */

    make_sha(sha, 0xabc);
    record("http://h/a.iso", "", sha, big, "\"v1\"", "Tue, 15 Nov 1994 08:12:31 GMT");
    find_entry_is("http://h/a.iso", "", sha, big);
    ck_assert_int_eq(db_find_blob(db, sha, &size), 0);
    ck_assert_uint_eq(size, big);

    /* The validators are stored for revalidation. */
    char *etag = raw_text("SELECT etag FROM entries WHERE url = 'http://h/a.iso'");
    char *lm = raw_text("SELECT last_modified FROM entries WHERE url = 'http://h/a.iso'");
    ck_assert_str_eq(etag, "\"v1\"");
    ck_assert_str_eq(lm, "Tue, 15 Nov 1994 08:12:31 GMT");
    free(etag);
    free(lm);

    /* Both may be absent, and a zero-byte blob is a blob. */
    make_sha(sha, 0xe);
    record("http://h/empty", "", sha, 0, NULL, NULL);
    find_entry_is("http://h/empty", "", sha, 0);
    size = 77;
    ck_assert_int_eq(db_find_blob(db, sha, &size), 0);
    ck_assert_uint_eq(size, 0);
    ck_assert_ptr_null(raw_text("SELECT etag FROM entries WHERE url = 'http://h/empty'"));
}
END_TEST

START_TEST(db_find_not_found)
{
    char sha[65], other[65], got[65];
    uint64_t size = 123;

    make_sha(sha, 1);
    make_sha(other, 2);
    record("http://h/x", "", sha, 10, NULL, NULL);
    record("http://h/private", "tag1", other, 20, NULL, NULL);

    ck_assert_int_eq(db_find_entry(db, "http://h/y", "", got, &size), -ENOENT);
    ck_assert_int_eq(db_find_entry(db, "http://h/x/", "", got, &size), -ENOENT);
    /* Entries fetched with credentials serve only the same credentials, and
     * ones fetched without serve no credentialed request. */
    ck_assert_int_eq(db_find_entry(db, "http://h/x", "tag1", got, &size), -ENOENT);
    ck_assert_int_eq(db_find_entry(db, "http://h/private", "", got, &size), -ENOENT);
    ck_assert_int_eq(db_find_entry(db, "http://h/private", "tag2", got, &size), -ENOENT);
    find_entry_is("http://h/private", "tag1", other, 20);
    ck_assert_uint_eq(size, 123); /* untouched by the misses */

    make_sha(got, 3);
    ck_assert_int_eq(db_find_blob(db, got, &size), -ENOENT);
    ck_assert_int_eq(db_find_blob(db, "", &size), -ENOENT);
    ck_assert_uint_eq(size, 123);

    /* A miss leaves the prepared statements usable for the next hit. */
    find_entry_is("http://h/x", "", sha, 10);
    ck_assert_int_eq(db_find_blob(db, sha, &size), 0);
    ck_assert_uint_eq(size, 10);
}
END_TEST

START_TEST(db_rerecord_replaces_entry)
{
    char a[65], b[65];
    uint64_t size = 0;

    make_sha(a, 0xa);
    make_sha(b, 0xb);
    record("http://h/latest.tar", "", a, 10, "\"a\"", "Mon, 01 Jan 2024 00:00:00 GMT");
    raw_exec("UPDATE entries SET accessed = 1000; UPDATE blobs SET accessed = 1000");
    int64_t t0 = (int64_t)time(NULL);
    record("http://h/latest.tar", "", b, 20, NULL, NULL);
    /* A new download is an access: it goes to the front of LIST. */
    ck_assert_int_ge(raw_int("SELECT accessed FROM entries"), t0);

    find_entry_is("http://h/latest.tar", "", b, 20);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), 1);
    /* The new response's validators replace the old ones, absent or not:
     * keeping "a" would revalidate b's entry with a's tag. */
    ck_assert_ptr_null(raw_text("SELECT etag FROM entries"));
    ck_assert_ptr_null(raw_text("SELECT last_modified FROM entries"));
    /* The old blob stays (another URL may share it; eviction is not db's). */
    ck_assert_int_eq(db_find_blob(db, a, &size), 0);
    ck_assert_uint_eq(size, 10);

    listed_t l = {0};
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 1);
    ck_assert_str_eq(l.e[0].sha, b);
    ck_assert_uint_eq(l.e[0].size, 20);

    /* The same URL under other credentials is its own entry. */
    raw_exec("UPDATE blobs SET created = 500 WHERE sha256 = %Q", a);
    record("http://h/latest.tar", "tag", a, 10, NULL, NULL);
    find_entry_is("http://h/latest.tar", "tag", a, 10);
    /* Recording a known blob again marks it used; it is not a new blob. */
    ck_assert_int_ge(raw_int("SELECT accessed FROM blobs WHERE sha256 = %Q", a), t0);
    ck_assert_int_eq(raw_int("SELECT created FROM blobs WHERE sha256 = %Q", a), 500);
    find_entry_is("http://h/latest.tar", "", b, 20);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), 2);
}
END_TEST

START_TEST(db_two_urls_share_blob)
{
    char s[65];
    uint64_t size = 0;

    make_sha(s, 0x5);
    record("http://mirror1/pkg.deb", "", s, 4096, NULL, NULL);
    record("http://mirror2/pool/pkg.deb", "", s, 4096, "\"m2\"", NULL);

    find_entry_is("http://mirror1/pkg.deb", "", s, 4096);
    find_entry_is("http://mirror2/pool/pkg.deb", "", s, 4096);
    ck_assert_int_eq(db_find_blob(db, s, &size), 0);
    ck_assert_uint_eq(size, 4096);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM blobs"), 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries WHERE sha256 = %Q", s), 2);

    listed_t l = {0};
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.e[0].sha, s);
    ck_assert_str_eq(l.e[1].sha, s);
}
END_TEST

START_TEST(db_list_order_and_fields)
{
    char s1[65], s2[65], s3[65];
    int64_t t0 = (int64_t)time(NULL);

    make_sha(s1, 1);
    make_sha(s2, 2);
    make_sha(s3, 3);
    record("http://h/1", "", s1, size_of(1), NULL, NULL);
    record("http://h/2", "", s2, size_of(2), NULL, NULL);
    record("http://h/3", "", s3, size_of(3), NULL, NULL);
    int64_t t1 = (int64_t)time(NULL);

    listed_t l = {0};
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 3);
    for (int i = 0; i < 3; i++) {
        /* Fields belong together: URL k has digest k and size_of(k). */
        int k = l.e[i].url[strlen(l.e[i].url) - 1] - '0';
        char want[65];
        make_sha(want, (unsigned)k);
        ck_assert_str_eq(l.e[i].sha, want);
        ck_assert_uint_eq(l.e[i].size, size_of(k));
        ck_assert_int_ge(l.e[i].created, t0);
        ck_assert_int_le(l.e[i].created, t1);
        ck_assert_int_ge(l.e[i].accessed, t0);
        ck_assert_int_le(l.e[i].accessed, t1);
    }

    /* Order by use (the sequence, not the clock), newest first, regardless
     * of insertion order or URL order. The three records took sequence
     * numbers 1 to 6 (a blob and an entry each); reorder them below. */
    raw_exec("UPDATE entries SET accessed = 3000, seq = 6 WHERE url = 'http://h/1';"
             "UPDATE entries SET accessed = 1000, seq = 2 WHERE url = 'http://h/2';"
             "UPDATE entries SET accessed = 2000, seq = 4 WHERE url = 'http://h/3';"
             "UPDATE entries SET created = 500");
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 3);
    ck_assert_str_eq(l.e[0].url, "http://h/1");
    ck_assert_str_eq(l.e[1].url, "http://h/3");
    ck_assert_str_eq(l.e[2].url, "http://h/2");
    ck_assert_int_eq(l.e[0].accessed, 3000);
    ck_assert_int_eq(l.e[1].accessed, 2000);
    ck_assert_int_eq(l.e[2].accessed, 1000);
    ck_assert_int_eq(l.e[2].created, 500);
    ck_assert_str_eq(l.e[2].sha, s2);

    /* Touching the oldest moves it to the front. */
    ck_assert_int_eq(db_touch(db, s2, "http://h/2", "", 0), 0);
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_str_eq(l.e[0].url, "http://h/2");
    ck_assert_int_ge(l.e[0].accessed, t1);
    ck_assert_str_eq(l.e[1].url, "http://h/1");
    ck_assert_str_eq(l.e[2].url, "http://h/3");
}
END_TEST

START_TEST(db_touch_updates_accessed)
{
    char s[65], t[65];

    make_sha(s, 0x51);
    make_sha(t, 0x52);
    record("http://h/a", "", s, 1, NULL, NULL);
    record("http://h/b", "", s, 1, NULL, NULL);
    record("http://h/a", "cred", t, 2, NULL, NULL);
    raw_exec("UPDATE blobs SET accessed = 1000, created = 500;"
             "UPDATE entries SET accessed = 1000, created = 500");
    int64_t t0 = (int64_t)time(NULL);

    /* Blob and the named entry; not the other entry of the same blob, not
     * the same URL under other credentials. */
    ck_assert_int_eq(db_touch(db, s, "http://h/a", "", 0), 0);
    /* Queued: a hit writes nothing until the uses are flushed. */
    ck_assert_int_eq(raw_int("SELECT accessed FROM blobs WHERE sha256 = %Q", s), 1000);
    ck_assert_uint_eq(db_uses_pending(db), 1);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_uint_eq(db_uses_pending(db), 0);
    ck_assert_int_ge(raw_int("SELECT accessed FROM blobs WHERE sha256 = %Q", s), t0);
    ck_assert_int_ge(raw_int("SELECT accessed FROM entries WHERE url = 'http://h/a'"
                             " AND cred_tag = ''"),
                     t0);
    ck_assert_int_eq(raw_int("SELECT accessed FROM entries WHERE url = 'http://h/b'"), 1000);
    ck_assert_int_eq(raw_int("SELECT accessed FROM entries WHERE cred_tag = 'cred'"), 1000);
    ck_assert_int_eq(raw_int("SELECT accessed FROM blobs WHERE sha256 = %Q", t), 1000);
    /* created is history, not touched. */
    ck_assert_int_eq(raw_int("SELECT max(created) FROM blobs"), 500);
    ck_assert_int_eq(raw_int("SELECT max(created) FROM entries"), 500);

    /* Without a URL (a hit by digest): the blob only. */
    ck_assert_int_eq(db_touch(db, t, NULL, NULL, 0), 0);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_ge(raw_int("SELECT accessed FROM blobs WHERE sha256 = %Q", t), t0);
    ck_assert_int_eq(raw_int("SELECT accessed FROM entries WHERE cred_tag = 'cred'"), 1000);

    /* The credentialed entry by its own tag. */
    ck_assert_int_eq(db_touch(db, t, "http://h/a", "cred", 0), 0);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_ge(raw_int("SELECT accessed FROM entries WHERE cred_tag = 'cred'"), t0);
    ck_assert_int_eq(raw_int("SELECT accessed FROM entries WHERE url = 'http://h/b'"), 1000);

    /* An unknown digest or URL is not an error: there is nothing to mark. */
    char u[65];
    make_sha(u, 0x99);
    ck_assert_int_eq(db_touch(db, u, "http://h/none", "", 0), 0);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM blobs"), 2);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), 3);
}
END_TEST

START_TEST(db_reopen_keeps_rows)
{
    char a[65], b[65];
    uint64_t size = 0;

    make_sha(a, 0x1);
    make_sha(b, 0x2);
    record("http://h/a", "", a, 11, "\"e\"", NULL);
    record("http://h/b", "t", b, 22, NULL, NULL);
    db_close(db);
    db = NULL;

    ck_assert_int_eq(db_open(path, &db), 0);
    find_entry_is("http://h/a", "", a, 11);
    find_entry_is("http://h/b", "t", b, 22);
    ck_assert_int_eq(db_find_blob(db, b, &size), 0);
    ck_assert_uint_eq(size, 22);
    ck_assert_int_eq(raw_int("PRAGMA user_version"), 8);
    char *etag = raw_text("SELECT etag FROM entries WHERE url = 'http://h/a'");
    ck_assert_str_eq(etag, "\"e\"");
    free(etag);

    /* And the reopened handle writes too, which a third open sees. */
    record("http://h/c", "", a, 11, NULL, NULL);
    db_close(db);
    db = NULL;
    ck_assert_int_eq(db_open(path, &db), 0);
    listed_t l = {0};
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 3);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM blobs"), 2);
}
END_TEST

START_TEST(db_open_refuses_newer_schema)
{
    db_t *other = NULL;

    /* A database written by a newer hubd is left alone, not "migrated". */
    raw_exec("PRAGMA user_version = 9");
    db_close(db);
    db = NULL;
    ck_assert_int_eq(db_open(path, &other), -EPROTO);
    ck_assert_int_eq(raw_int("PRAGMA user_version"), 9);

    /* A directory that does not exist: an error, not a crash. */
    char bad[400];
    snprintf(bad, sizeof bad, "%s/missing/dir/hubd.db", dir);
    int rc = db_open(bad, &other);
    ck_assert_int_lt(rc, 0);
}
END_TEST

/* ---- migration ---------------------------------------------------------- */

static void count_partial(void *arg, uint64_t id, uint64_t durable)
{
    (void)id;
    *(uint64_t *)arg += durable;
}

/* A cache made by the first schema gains the later tables and columns,
 * rows intact; the use sequence follows the old access times. */
START_TEST(db_migrates_version_1)
{
    char a[65], b[65];
    uint64_t sum = 0;

    make_sha(a, 0x6);
    make_sha(b, 0x7);
    db_close(db);
    db = NULL;
    raw_exec("DROP TABLE holds; DROP TABLE requesters; DROP TABLE partials; DROP TABLE entries; "
             "DROP TABLE blobs; DROP TABLE totals; DROP TABLE hf_revs");
    raw_exec("CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL,"
             " created INTEGER NOT NULL, accessed INTEGER NOT NULL,"
             " pinned INTEGER NOT NULL DEFAULT 0);"
             "CREATE TABLE entries (url TEXT NOT NULL, cred_tag TEXT NOT NULL DEFAULT '',"
             " sha256 TEXT NOT NULL REFERENCES blobs(sha256), etag TEXT, last_modified TEXT,"
             " created INTEGER NOT NULL, accessed INTEGER NOT NULL, PRIMARY KEY (url, cred_tag));"
             "CREATE INDEX entries_sha256 ON entries(sha256);"
             "CREATE INDEX blobs_accessed ON blobs(accessed);"
             "INSERT INTO blobs VALUES ('%s', 5, 100, 900, 0), ('%s', 6, 100, 200, 0);"
             "INSERT INTO entries VALUES ('http://h/m', '', '%s', NULL, NULL, 100, 900),"
             " ('http://h/o', '', '%s', NULL, NULL, 100, 200);"
             "PRAGMA user_version = 1",
             a, b, a, b);
    ck_assert_int_eq(db_open(path, &db), 0);
    ck_assert_int_eq(raw_int("PRAGMA user_version"), 8);
    find_entry_is("http://h/m", "", a, 5);
    /* An entry from before version 5 was last validated when created. */
    char sha[65];
    uint64_t size;
    db_entry_meta_t meta;
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/m", "", sha, &size, &meta), 0);
    ck_assert_int_eq(meta.validated, 100);
    ck_assert_str_eq(meta.etag, "");
    ck_assert_int_eq(db_entry_validated(db, "http://h/m", "", 5000), 0);
    ck_assert_int_eq(db_find_entry_meta(db, "http://h/m", "", sha, &size, &meta), 0);
    ck_assert_int_eq(meta.validated, 5000);
    ck_assert_int_eq(db_entry_validated(db, "http://h/none", "", 5000), -ENOENT);
    save_partial(1, "http://h/n", "\"z\"", 42);
    ck_assert_int_eq(db_each_partial(db, count_partial, &sum), 0);
    ck_assert_uint_eq(sum, 42);
    /* b was used before a: it is the first to go, and listed last. */
    ck_assert_int_lt(raw_int("SELECT seq FROM blobs WHERE size = 6"),
                     raw_int("SELECT seq FROM blobs WHERE size = 5"));
    listed_t l = {0};
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.e[0].url, "http://h/m");
    /* New uses number above the migrated ones. */
    ck_assert_int_eq(db_touch(db, b, "http://h/o", "", 0), 0);
    memset(&l, 0, sizeof l);
    ck_assert_int_eq(db_list(db, on_entry, &l), 0);
    ck_assert_str_eq(l.e[0].url, "http://h/o");
}
END_TEST

static void add_lru(void *arg, const char *sha, uint64_t size)
{
    (void)size;
    listed_t *l = arg;
    snprintf(l->e[l->n++].sha, 65, "%s", sha);
}

/* The wall clock set back a day must not invert eviction. b was
 * recorded after a, then a was used again with the clock a day behind:
 * a's `accessed` is now the oldest, but it was used last, so b goes
 * first. (Ordered by `accessed`, as before, a went first.) */
START_TEST(db_lru_follows_use_not_the_clock)
{
    char a[65], b[65];
    make_sha(a, 0xa1);
    make_sha(b, 0xb2);
    record("http://h/a", "", a, 10, NULL, NULL);
    record("http://h/b", "", b, 10, NULL, NULL);
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 0), 0);
    raw_exec("UPDATE blobs SET accessed = accessed - 86400 WHERE sha256 = '%s';"
             "UPDATE entries SET accessed = accessed - 86400 WHERE url = 'http://h/a'",
             a);
    listed_t l = {0};
    ck_assert_int_eq(db_lru(db, 2, NULL, UINT64_MAX, add_lru, &l), 0);
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.e[0].sha, b);
    ck_assert_str_eq(l.e[1].sha, a);
}
END_TEST

/* Queued uses keep the order of the hits, never take a row's use back
 * past a later commit, are written by themselves once DB_USES_MAX wait,
 * and are seen by the readers of the order without a flush of their own. */
START_TEST(db_uses_keep_the_hits_order_and_never_go_back)
{
    char a[65], b[65];
    make_sha(a, 0x61);
    make_sha(b, 0x62);
    record("http://h/a", "", a, 1, NULL, NULL);
    record("http://h/b", "", b, 1, NULL, NULL);
    /* a is hit; then b is recorded again (a commit: a newer number). */
    int64_t before = raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a);
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 7), 0); /* takes before + 1 */
    record("http://h/a", "", a, 1, NULL, NULL);                /* a committed again after the hit */
    int64_t commit_seq = raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a);
    ck_assert_int_gt(commit_seq, before + 1);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_eq(raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a), commit_seq);
    /* The requester of the hit is recorded with the batch. */
    ck_assert_int_eq(raw_int("SELECT count(*) FROM requesters WHERE uid = 7"), 1);

    /* Hits on b then a: the least recently used is b, seen by db_lru
     * with the uses still queued. */
    ck_assert_int_eq(db_touch(db, b, "http://h/b", "", 0), 0);
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 0), 0);
    ck_assert_uint_eq(db_uses_pending(db), 2);
    listed_t l = {0};
    ck_assert_int_eq(db_lru(db, 10, NULL, UINT64_MAX, add_lru, &l), 0);
    ck_assert_uint_eq(db_uses_pending(db), 0);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_str_eq(l.e[0].sha, b);

    /* Repeated uses of one key (blob, entry, tag, uid) are one in the
     * queue, with the last one's numbers: a, b, a again puts a after b. */
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 0), 0);
    ck_assert_int_eq(db_touch(db, b, "http://h/b", "", 0), 0);
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 0), 0);
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 0), 0);
    ck_assert_uint_eq(db_uses_pending(db), 2);
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 9), 0); /* another uid: its own */
    ck_assert_int_eq(db_touch(db, a, NULL, NULL, 0), 0);       /* by digest: its own */
    ck_assert_uint_eq(db_uses_pending(db), 4);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_gt(raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a),
                     raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", b));
    ck_assert_int_gt(raw_int("SELECT seq FROM entries WHERE url = 'http://h/a'"),
                     raw_int("SELECT seq FROM entries WHERE url = 'http://h/b'"));
    ck_assert_int_eq(raw_int("SELECT count(*) FROM requesters WHERE uid = 9"), 1);
    /* After a flush the same key queues anew. */
    ck_assert_int_eq(db_touch(db, b, "http://h/b", "", 0), 0);
    ck_assert_uint_eq(db_uses_pending(db), 1);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_int_gt(raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", b),
                     raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a));

    /* A full queue is written by the hit that fills it (each use its own
     * key: another uid). */
    for (unsigned i = 0; i < DB_USES_MAX - 1; i++)
        ck_assert_int_eq(db_touch(db, a, NULL, NULL, 100 + i), 0);
    ck_assert_uint_eq(db_uses_pending(db), DB_USES_MAX - 1);
    ck_assert_int_eq(db_touch(db, b, NULL, NULL, 0), 0);
    ck_assert_uint_eq(db_uses_pending(db), 0);
    ck_assert_int_gt(raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", b),
                     raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a));

    /* The loop's queueing never writes: it says "write me" from
     * DB_USES_MAX on, and keeps every use up to DB_USES_BOUND (while the
     * pool's write is out), then refuses. Before, every use past the one
     * that filled the queue was refused, and lost when that one signal
     * met a write already out. */
    for (unsigned i = 0; i < DB_USES_MAX - 1; i++)
        ck_assert_int_eq(db_touch_queue(db, a, NULL, NULL, 100 + i), 0);
    for (unsigned i = DB_USES_MAX - 1; i < DB_USES_BOUND; i++)
        ck_assert_int_eq(db_touch_queue(db, a, NULL, NULL, 100 + i), 1);
    ck_assert_uint_eq(db_uses_pending(db), DB_USES_BOUND);
    ck_assert_int_eq(db_touch_queue(db, b, NULL, NULL, 0), -ENOMEM);
    ck_assert_int_eq(db_uses_flush(db), 0);
    ck_assert_uint_eq(db_uses_pending(db), 0);
    ck_assert_int_gt(raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", a),
                     raw_int("SELECT seq FROM blobs WHERE sha256 = %Q", b));
}
END_TEST

/* An eviction run's fence: blobs first recorded after it neither count
 * nor go (a download counted as in progress may record its blob during the
 * run); a blob merely used after it still does. */
START_TEST(db_eviction_fence_is_on_recording_not_use)
{
    char a[65], b[65], c[65];
    make_sha(a, 0xd1);
    make_sha(b, 0xd2);
    make_sha(c, 0xd3);
    record("http://h/a", "", a, 10, NULL, NULL);
    record("http://h/b", "", b, 20, NULL, NULL);
    uint64_t fence = db_use_seq(db), total = 0;
    ck_assert_int_eq(db_touch(db, a, "http://h/a", "", 0), 0);
    record("http://h/c", "", c, 40, NULL, NULL);
    ck_assert_int_eq(db_total_size(db, fence, &total), 0);
    ck_assert_uint_eq(total, 30);
    listed_t l = {0};
    ck_assert_int_eq(db_lru(db, 10, NULL, fence, add_lru, &l), 0);
    ck_assert_int_eq(l.n, 2);
    ck_assert_str_eq(l.e[0].sha, b); /* a was used since */
    ck_assert_str_eq(l.e[1].sha, a);
    ck_assert_int_eq(db_total_size(db, UINT64_MAX, &total), 0);
    ck_assert_uint_eq(total, 70);
}
END_TEST

/* Requesters: who asked for an entry (at its download or a hit) is told
 * so in a listing (LIST shows them the whole URL). */
START_TEST(db_requesters_are_recorded)
{
    char a[65];
    make_sha(a, 0xc3);
    uid_t uids[2] = {1000, 1001};
    db_record_t r = {.url = "http://h/q?sig=1",
                     .cred_tag = "",
                     .sha256 = a,
                     .size = 3,
                     .uids = uids,
                     .nuids = 2};
    ck_assert_int_eq(db_record_download(db, &r), 0);
    int mine[3];
    uid_t who[3] = {1000, 1002, 1001};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(db_list_page(db, 0, 10, who[i], page_mine, &mine[i]), 1);
    ck_assert_int_eq(mine[0], 1);
    ck_assert_int_eq(mine[1], 0);
    ck_assert_int_eq(mine[2], 1);
    ck_assert_int_eq(db_touch(db, a, "http://h/q?sig=1", "", 1002), 0);
    ck_assert_int_eq(db_list_page(db, 0, 10, 1002, page_mine, &mine[1]), 1);
    ck_assert_int_eq(mine[1], 1);
    /* They go with the entry. */
    ck_assert_int_eq(db_forget_blob(db, a, 0), 0);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM requesters"), 0);
}
END_TEST

/* ---- concurrency -------------------------------------------------------- */

typedef struct worker {
    pthread_t tid;
    int index;    /* 0..N_THREADS-1 */
    int failures; /* db_record_download calls that did not return 0 */
} worker_t;

static void worker_url(char *buf, size_t cap, int t, int i)
{
    snprintf(buf, cap, "http://h/t%d/%d", t, i);
}

/* Every tenth record of every thread shares one blob, so the blob upsert
 * conflicts across threads too. */
static unsigned worker_sha_n(int t, int i)
{
    return i % 10 == 0 ? 0xfffff : (unsigned)(t * 1000 + i + 1);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    char url[64], sha[65];

    for (int i = 0; i < N_PER_THREAD; i++) {
        worker_url(url, sizeof url, w->index, i);
        make_sha(sha, worker_sha_n(w->index, i));
        db_record_t r = {.url = url, .cred_tag = "", .sha256 = sha, .size = 1000};
        if (db_record_download(db, &r) != 0)
            w->failures++;
    }
    return NULL;
}

static void count_entry(void *arg, const db_entry_t *e)
{
    (void)e;
    (*(int *)arg)++;
}

/* The daemon shares the writer connection between libuv pool threads while
 * the loop thread reads: do the same, then check every row landed. */
START_TEST(db_concurrent_record_download)
{
    worker_t w[N_THREADS];
    char url[64], sha[65], got[65];
    uint64_t size;

    for (int t = 0; t < N_THREADS; t++) {
        w[t].index = t;
        w[t].failures = 0;
        ck_assert_int_eq(pthread_create(&w[t].tid, NULL, worker_main, &w[t]), 0);
    }
    /* Meanwhile, reads on the reader connection, as the loop thread does.
     * They may miss rows not yet committed; they must not fail otherwise. */
    for (int i = 0; i < 200; i++) {
        worker_url(url, sizeof url, i % N_THREADS, i % N_PER_THREAD);
        int rc = db_find_entry(db, url, "", got, &size);
        ck_assert(rc == 0 || rc == -ENOENT);
        if (rc == 0)
            ck_assert_uint_eq(size, 1000);
    }
    for (int t = 0; t < N_THREADS; t++) {
        ck_assert_int_eq(pthread_join(w[t].tid, NULL), 0);
        ck_assert_msg(w[t].failures == 0, "thread %d: %d failed records", t, w[t].failures);
    }

    for (int t = 0; t < N_THREADS; t++) {
        for (int i = 0; i < N_PER_THREAD; i++) {
            worker_url(url, sizeof url, t, i);
            make_sha(sha, worker_sha_n(t, i));
            find_entry_is(url, "", sha, 1000);
        }
    }
    int listed = 0;
    ck_assert_int_eq(db_list(db, count_entry, &listed), 0);
    ck_assert_int_eq(listed, N_THREADS * N_PER_THREAD);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), N_THREADS * N_PER_THREAD);
    /* 90 own blobs per thread, plus the shared one. */
    ck_assert_int_eq(raw_int("SELECT count(*) FROM blobs"), N_THREADS * 90 + 1);
}
END_TEST

/* A group commit's records: all in one transaction; one that fails goes
 * back alone (its blob row and its share of the totals too), the others
 * stand. The group is tried first without a savepoint each (they had
 * SQLite write a sub-journal to a temporary file), then, after a failure,
 * again with them. */
START_TEST(db_record_downloads_one_failing_goes_back_alone)
{
    char a[65], c[65];
    make_sha(a, 0x5a);
    make_sha(c, 0x5c);
    db_record_t recs[3] = {
        {.url = "http://h/ga", .cred_tag = "", .sha256 = a, .size = 100},
        {.url = "http://h/gb", .cred_tag = "", .sha256 = NULL, .size = 7}, /* NOT NULL fails */
        {.url = "http://h/gc", .cred_tag = "", .sha256 = c, .size = 300},
    };
    int rcs[3] = {9, 9, 9};
    uint64_t bytes = 0, blobs = 0;
    ck_assert_int_eq(db_record_downloads(db, recs, 3, rcs), 0); /* the transaction stands */
    ck_assert_int_eq(rcs[0], 0);
    ck_assert_int_ne(rcs[1], 0);
    ck_assert_int_eq(rcs[2], 0);
    find_entry_is("http://h/ga", "", a, 100);
    find_entry_is("http://h/gc", "", c, 300);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM blobs"), 2);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries WHERE url = 'http://h/gb'"), 0);
    ck_assert_int_eq(db_cache_size(db, &bytes, &blobs), 0);
    ck_assert_uint_eq(bytes, 400);
    ck_assert_uint_eq(blobs, 2);

    /* A group that all stands: one transaction, every row and the totals. */
    char d[65], e[65];
    make_sha(d, 0x5d);
    make_sha(e, 0x5e);
    db_record_t good[2] = {
        {.url = "http://h/gd", .cred_tag = "", .sha256 = d, .size = 40},
        {.url = "http://h/ge", .cred_tag = "t", .sha256 = e, .size = 50},
    };
    ck_assert_int_eq(db_record_downloads(db, good, 2, rcs), 0);
    ck_assert_int_eq(rcs[0] | rcs[1], 0);
    find_entry_is("http://h/gd", "", d, 40);
    find_entry_is("http://h/ge", "t", e, 50);
    ck_assert_int_eq(db_cache_size(db, &bytes, &blobs), 0);
    ck_assert_uint_eq(bytes, 490);
    ck_assert_uint_eq(blobs, 4);
}
END_TEST

static Suite *db_suite(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("db");
    TCase *conc = tcase_create("concurrency");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, db_open_creates_schema);
    tcase_add_test(tc, db_record_then_find);
    tcase_add_test(tc, db_find_not_found);
    tcase_add_test(tc, db_rerecord_replaces_entry);
    tcase_add_test(tc, db_two_urls_share_blob);
    tcase_add_test(tc, db_list_order_and_fields);
    tcase_add_test(tc, db_touch_updates_accessed);
    tcase_add_test(tc, db_uses_keep_the_hits_order_and_never_go_back);
    tcase_add_test(tc, db_reopen_keeps_rows);
    tcase_add_test(tc, db_open_refuses_newer_schema);
    tcase_add_test(tc, db_migrates_version_1);
    tcase_add_test(tc, db_lru_follows_use_not_the_clock);
    tcase_add_test(tc, db_requesters_are_recorded);
    tcase_add_test(tc, db_eviction_fence_is_on_recording_not_use);
    tcase_add_test(tc, db_record_downloads_one_failing_goes_back_alone);
    /* Each commit fsyncs (synchronous=FULL). */
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(conc, setup, teardown);
    tcase_add_test(conc, db_concurrent_record_download);
    /* 400 fsync'd commits, slower still under the sanitizers. */
    tcase_set_timeout(conc, 90);
    suite_add_tcase(s, conc);
    return s;
}

int main(void)
{
    return db_fixture_run(db_suite());
}
