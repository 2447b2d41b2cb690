/* Unit tests of daemon/cache/db_holds.c: the holds table (schema v6), and
 * how eviction and removal treat a held blob (db.c's side of it). */
#include "db_fixture.h"

#include <errno.h>

static void hold(uid_t uid, const char *label, const char *sha, const char *link, int64_t created)
{
    db_hold_t h = {uid, label, sha, link, created};
    char moved[65];
    ck_assert_int_eq(db_hold_add(db, &h, moved), 0);
}

static unsigned nlru;
static void count_lru(void *arg, const char *sha, uint64_t size)
{
    (void)arg, (void)sha, (void)size;
    nlru++;
}

static char gone_sha[4][65];
static unsigned ngone;
static void on_gone(void *arg, const char *sha)
{
    (void)arg;
    if (ngone < 4)
        memcpy(gone_sha[ngone], sha, 65);
    ngone++;
}

START_TEST(db_holds_add_needs_a_blob_and_counts)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    db_hold_t h = {1000, "models/o/m@main", a, "/home/u/x", 5};
    char moved[65];
    ck_assert_int_eq(db_hold_add(db, &h, moved), -ENOENT); /* no such blob */
    ck_assert_str_eq(moved, "");
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "models/o/m@main", a, "/home/u/x", 5);
    hold(1000, "models/o/m@main", a, "/home/u/x", 6); /* the same: renewed */
    hold(1000, "models/o/m@main", b, "/home/u/y", 6);
    hold(1001, "models/o/m@main", a, "/home/v/x", 6);
    uint64_t n, bytes;
    db_holds_stats(db, &n, &bytes);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(bytes, 150); /* a once, though twice held */
    ck_assert_int_eq(raw_int("SELECT created FROM holds WHERE link = '/home/u/x'"), 6);
}
END_TEST

/* A HOLD of the same uid, label and link to another blob moves the row:
 * the blob it held is named when uid holds it no more, so that its grant
 * goes; not while another link of uid still holds it. */
START_TEST(db_holds_a_moved_row_names_the_blob_left)
{
    char a[65], b[65], c[65], moved[65];
    make_sha(a, 1);
    make_sha(b, 2);
    make_sha(c, 3);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    record("http://h/c", "", c, 10, NULL, NULL);
    hold(1000, "L", a, "/u/x", 1);
    hold(1000, "L", a, "/u/y", 1);
    db_hold_t h = {1000, "L", b, "/u/x", 2};
    ck_assert_int_eq(db_hold_add(db, &h, moved), 0);
    ck_assert_str_eq(moved, ""); /* /u/y still holds a */
    db_hold_t h2 = {1000, "L", b, "/u/y", 2};
    ck_assert_int_eq(db_hold_add(db, &h2, moved), 0);
    ck_assert_str_eq(moved, a);                       /* a held by uid no more */
    ck_assert_int_eq(db_hold_add(db, &h2, moved), 0); /* a renewal moves nothing */
    ck_assert_str_eq(moved, "");
    hold(1001, "L", c, "/v/x", 1); /* another uid's rows are not uid 1000's */
    db_hold_t h3 = {1000, "L", c, "/u/x", 3};
    ck_assert_int_eq(db_hold_add(db, &h3, moved), 0);
    ck_assert_str_eq(moved, ""); /* /u/y holds b still */
    uint64_t n, bytes;
    ck_assert_int_eq(db_holds_of(db, 1000, &n, &bytes, NULL), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(bytes, 60);
}
END_TEST

static uint64_t sums[4][3];
static unsigned nsums;
static void on_sum(void *arg, const db_hold_sum_t *s)
{
    (void)arg;
    if (nsums < 4) {
        sums[nsums][0] = s->uid;
        sums[nsums][1] = s->files;
        sums[nsums][2] = s->size;
    }
    nsums++;
}

START_TEST(db_holds_list_sums_per_uid_and_label)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "L", a, "/u/1", 1);
    hold(1000, "L", a, "/u/2", 1); /* two links to one blob: its bytes once */
    hold(1000, "L", b, "/u/3", 1);
    hold(1001, "L", b, "/v/3", 1);
    nsums = 0;
    ck_assert_int_eq(db_holds_list(db, -1, 10, on_sum, NULL), 0);
    ck_assert_uint_eq(nsums, 2);
    ck_assert_uint_eq(sums[0][0], 1000);
    ck_assert_uint_eq(sums[0][1], 3);
    ck_assert_uint_eq(sums[0][2], 150);
    ck_assert_uint_eq(sums[1][0], 1001);
    nsums = 0;
    ck_assert_int_eq(db_holds_list(db, 1001, 10, on_sum, NULL), 0);
    ck_assert_uint_eq(nsums, 1);
    ck_assert_uint_eq(sums[0][2], 50);
    nsums = 0; /* bounded: HOLDS asks for one more line than it sends */
    ck_assert_int_eq(db_holds_list(db, -1, 1, on_sum, NULL), 0);
    ck_assert_uint_eq(nsums, 1);
}
END_TEST

static void ck_of(uid_t uid, uint64_t holds, uint64_t bytes)
{
    uint64_t n = 99, b = 99;
    ck_assert_int_eq(db_holds_of(db, uid, &n, &b, NULL), 0);
    ck_assert_uint_eq(n, holds);
    ck_assert_uint_eq(b, bytes);
}

/* The counts by uid follow every change without a recount: an add, a
 * renewal, a move to another blob, UNHOLD of one link, the prune's drop,
 * an admin's RM; and are rebuilt the same at open. */
START_TEST(db_holds_counts_by_uid_follow_every_change)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "L", a, "/u/1", 1);
    hold(1000, "L", a, "/u/2", 1); /* a second link: its bytes once */
    hold(1000, "L", a, "/u/2", 2); /* renewed */
    hold(1001, "L", a, "/v/1", 1);
    ck_of(1000, 2, 100);
    ck_of(1001, 1, 100);
    uint64_t n, bytes;
    db_holds_stats(db, &n, &bytes);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(bytes, 100);
    hold(1000, "L", b, "/u/2", 3); /* moved to b: a still held by /u/1 */
    ck_of(1000, 2, 150);
    hold(1000, "L", b, "/u/1", 3); /* a no more */
    ck_of(1000, 2, 50);
    db_holds_stats(db, &n, &bytes);
    ck_assert_uint_eq(bytes, 150);
    unsigned released = 0;
    ck_assert_int_eq(db_hold_release(db, 1000, "L", "/u/1", &released, NULL, NULL), 0);
    ck_assert_uint_eq(released, 1);
    ck_of(1000, 1, 50);
    db_hold_t seen = {1000, "L", b, "/u/2", 3};
    int still = 1;
    ck_assert_int_eq(db_hold_drop(db, &seen, &still), 0);
    ck_of(1000, 0, 0);
    hold(1000, "L", a, "/u/1", 4);
    ck_assert_int_eq(db_forget_blob(db, a, 0), 0); /* an admin's RM */
    ck_of(1000, 0, 0);
    ck_of(1001, 0, 0);
    ck_assert_int_eq(db_holds_refresh(db), 0); /* as cache.c does after a removal */
    db_holds_stats(db, &n, &bytes);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(bytes, 0);
    hold(1001, "L", b, "/v/2", 5);
    db_close(db); /* rebuilt at open */
    ck_assert_int_eq(db_open(path, &db), 0);
    ck_of(1001, 1, 50);
}
END_TEST

/* db_hold_fits with the row and byte bounds only. */
static int fits(const db_hold_t *h, uint64_t max_holds, uint64_t max_bytes)
{
    db_hold_bounds_t b = {max_holds, max_bytes, 0, 0};
    return db_hold_fits(db, h, &b);
}

START_TEST(db_hold_fits_the_bounds_of_its_uid)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "L", a, "/u/1", 1);
    db_hold_t same = {1000, "L", a, "/u/1", 2}, another = {1000, "L", a, "/u/2", 2},
              other = {1000, "L", b, "/u/3", 2}, them = {1001, "L", a, "/v/1", 2};
    ck_assert_int_eq(fits(&same, 1, 100), 0); /* a renewal adds nothing */
    ck_assert_int_eq(fits(&another, 1, 0), DB_HOLD_OVER_COUNT);
    ck_assert_int_eq(fits(&another, 2, 100), 0); /* a's bytes counted already */
    ck_assert_int_eq(fits(&other, 0, 149), DB_HOLD_OVER_BYTES);
    ck_assert_int_eq(fits(&other, 0, 150), 0);
    ck_assert_int_eq(fits(&other, 0, 0), 0);  /* 0: no bound */
    ck_assert_int_eq(fits(&them, 1, 100), 0); /* another uid's own count */
    ck_assert_int_eq(fits(&them, 1, 99), DB_HOLD_OVER_BYTES);
}
END_TEST

/* What a uid's rows store (labels, links and DB_HOLD_ROW_BYTES each) is
 * counted as rows come and go, and bounds its further rows; and a uid has
 * at most max_per_blob rows on one blob (the row being moved onto it is
 * not one of them). */
START_TEST(db_hold_fits_the_text_and_links_of_its_uid)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "LL", a, "/u/1", 1);  /* 2 + 4 + 100 */
    hold(1000, "LL", a, "/u/22", 1); /* 2 + 5 + 100 */
    hold(1001, "LL", a, "/v/1", 1);
    uint64_t n, bytes, text;
    ck_assert_int_eq(db_holds_of(db, 1000, &n, &bytes, &text), 0);
    ck_assert_uint_eq(text, 213);
    db_hold_t next = {1000, "LL", b, "/u/3", 2}; /* 106 more: 319 */
    ck_assert_uint_eq(db_hold_row_bytes(&next), 106);
    db_hold_bounds_t bd = {0, 0, 318, 0};
    ck_assert_int_eq(db_hold_fits(db, &next, &bd), DB_HOLD_OVER_TEXT);
    bd.max_text = 319;
    ck_assert_int_eq(db_hold_fits(db, &next, &bd), 0);
    db_hold_t renew = {1000, "LL", a, "/u/1", 2}; /* no new row: no text */
    bd.max_text = 1;
    ck_assert_int_eq(db_hold_fits(db, &renew, &bd), 0);
    /* Two rows of uid 1000 on a: a third is past max_per_blob 2. */
    db_hold_t third = {1000, "LL", a, "/u/4", 2};
    db_hold_bounds_t links = {0, 0, 0, 2};
    ck_assert_int_eq(db_hold_fits(db, &third, &links), DB_HOLD_OVER_LINKS);
    ck_assert_int_eq(db_hold_fits(db, &renew, &links), 0); /* itself is not another */
    links.max_per_blob = 3;
    ck_assert_int_eq(db_hold_fits(db, &third, &links), 0);
    db_hold_t theirs = {1001, "LL", a, "/v/2", 2}; /* uid 1001 has one */
    links.max_per_blob = 2;
    ck_assert_int_eq(db_hold_fits(db, &theirs, &links), 0);
    /* A release gives its text back; a reopen counts the same. */
    unsigned released;
    ck_assert_int_eq(db_hold_release(db, 1000, "LL", "/u/22", &released, NULL, NULL), 0);
    ck_assert_int_eq(db_holds_of(db, 1000, &n, &bytes, &text), 0);
    ck_assert_uint_eq(text, 106);
    ck_assert_int_eq(db_holds_of(db, 1001, &n, &bytes, &text), 0);
    ck_assert_uint_eq(text, 106);
}
END_TEST

/* UNHOLD link=: one link goes; the blob is named (its grant goes) only when
 * no other hold of the uid keeps it, in this label or another. */
START_TEST(db_holds_release_of_one_link)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "L", a, "/c1/a", 1);
    hold(1000, "L", a, "/c2/a", 1); /* a second cache, same label */
    hold(1000, "L", b, "/c1/b", 1);
    unsigned released = 0;
    ngone = 0;
    ck_assert_int_eq(db_hold_release(db, 1000, "L", "/c2/a", &released, on_gone, NULL), 0);
    ck_assert_uint_eq(released, 1);
    ck_assert_uint_eq(ngone, 0); /* /c1/a keeps a */
    ck_assert_int_eq(db_hold_release(db, 1000, "L", "/c1/a", &released, on_gone, NULL), 0);
    ck_assert_uint_eq(released, 1);
    ck_assert_uint_eq(ngone, 1);
    ck_assert_str_eq(gone_sha[0], a);
    ck_assert_int_eq(db_hold_release(db, 1000, "L", "/nope", &released, on_gone, NULL), 0);
    ck_assert_uint_eq(released, 0);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM holds"), 1);
}
END_TEST

START_TEST(db_holds_release_names_blobs_no_longer_held)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "L1", a, "/u/1", 1);
    hold(1000, "L1", b, "/u/2", 1);
    hold(1000, "L2", b, "/u/3", 1); /* b stays held by L2 */
    unsigned released = 0;
    ngone = 0;
    ck_assert_int_eq(db_hold_release(db, 1000, "L1", NULL, &released, on_gone, NULL), 0);
    ck_assert_uint_eq(released, 2);
    ck_assert_uint_eq(ngone, 1);
    ck_assert_str_eq(gone_sha[0], a);
    ck_assert_int_eq(db_hold_release(db, 1000, "L1", NULL, &released, on_gone, NULL), 0);
    ck_assert_uint_eq(released, 0);
    uint64_t n, bytes;
    db_holds_stats(db, &n, &bytes);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(bytes, 50);
}
END_TEST

START_TEST(db_holds_drop_only_the_row_seen)
{
    char a[65];
    make_sha(a, 1);
    record("http://h/a", "", a, 100, NULL, NULL);
    hold(1000, "L", a, "/u/1", 10);
    hold(1000, "L2", a, "/u/2", 10);
    db_hold_t seen = {1000, "L", a, "/u/1", 9}; /* renewed since it was seen */
    int still = -1;
    ck_assert_int_eq(db_hold_drop(db, &seen, &still), -ENOENT);
    seen.created = 10;
    ck_assert_int_eq(db_hold_drop(db, &seen, &still), 0);
    ck_assert_int_eq(still, 1); /* L2 holds it still */
    db_hold_t other = {1000, "L2", a, "/u/2", 10};
    ck_assert_int_eq(db_hold_drop(db, &other, &still), 0);
    ck_assert_int_eq(still, 0);
}
END_TEST

static char each_links[4][16];
static unsigned neach;
static void on_each(void *arg, const db_hold_t *h)
{
    (void)arg;
    if (neach < 4)
        snprintf(each_links[neach], sizeof each_links[neach], "%s", h->link);
    neach++;
}

START_TEST(db_holds_each_least_recently_used_first_and_not_young)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    ck_assert_int_eq(db_touch(db, a, NULL, "", 0), 0); /* a used last */
    hold(1000, "L", a, "/u/a", 10);
    hold(1000, "L", b, "/u/b", 10);
    hold(1000, "L", b, "/u/young", 100); /* within the grace: not checked */
    neach = 0;
    ck_assert_int_eq(db_holds_each(db, 10, 50, on_each, NULL), 0);
    ck_assert_uint_eq(neach, 2);
    ck_assert_str_eq(each_links[0], "/u/b");
    ck_assert_str_eq(each_links[1], "/u/a");
}
END_TEST

/* A run checks at most max holds; the next goes on after them and round,
 * so that max links that stand cannot hide the rest from every run. */
START_TEST(db_holds_each_goes_on_where_the_last_call_stopped)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    ck_assert_int_eq(db_touch(db, a, NULL, "", 0), 0); /* a used last */
    hold(1000, "L", a, "/u/a", 10);
    hold(1000, "L", b, "/u/b1", 10);
    hold(1000, "L", b, "/u/b2", 10);
    const char *want[] = {"/u/b1", "/u/b2", "/u/a", "/u/b1"};
    for (unsigned i = 0; i < 4; i++) {
        neach = 0;
        ck_assert_int_eq(db_holds_each(db, 1, 50, on_each, NULL), 0);
        ck_assert_uint_eq(neach, 1);
        ck_assert_str_eq(each_links[0], want[i]);
    }
    neach = 0; /* two after /u/b1: round to the start, none twice */
    ck_assert_int_eq(db_holds_each(db, 5, 50, on_each, NULL), 0);
    ck_assert_uint_eq(neach, 3);
    ck_assert_str_eq(each_links[0], "/u/b2");
    ck_assert_str_eq(each_links[1], "/u/a");
    ck_assert_str_eq(each_links[2], "/u/b1");
}
END_TEST

/* Eviction's batches: one transaction for many blobs, each
 * with its own outcome: a held one kept (-EBUSY), one gone meanwhile
 * (-ENOENT), the others forgotten with their entries. */
START_TEST(db_forget_blobs_in_one_batch_keeps_the_held)
{
    char a[65], b[65], c[65], gone[65];
    make_sha(a, 0x31);
    make_sha(b, 0x32);
    make_sha(c, 0x33);
    make_sha(gone, 0x34);
    record("http://h/a", "", a, 10, NULL, NULL);
    record("http://h/b", "", b, 20, NULL, NULL);
    record("http://h/c", "", c, 30, NULL, NULL);
    hold(1000, "L", b, "/u/b", 10);
    const char *v[] = {a, b, gone, c};
    int rcs[4];
    ck_assert_int_eq(db_forget_blobs(db, v, 4, 1, rcs), 0);
    ck_assert_int_eq(rcs[0], 0);
    ck_assert_int_eq(rcs[1], -EBUSY);
    ck_assert_int_eq(rcs[2], -ENOENT);
    ck_assert_int_eq(rcs[3], 0);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM blobs"), 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM entries"), 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM holds"), 1);
    uint64_t bytes = 0, blobs = 0;
    db_cache_size(db, &bytes, &blobs);
    ck_assert_uint_eq(blobs, 1);
    ck_assert_uint_eq(bytes, 20);
}
END_TEST

START_TEST(db_holds_keep_a_blob_from_eviction_not_from_removal)
{
    char a[65], b[65];
    make_sha(a, 1);
    make_sha(b, 2);
    record("http://h/a", "", a, 100, NULL, NULL);
    record("http://h/b", "", b, 50, NULL, NULL);
    hold(1000, "L", a, "/u/a", 10);
    nlru = 0;
    ck_assert_int_eq(db_lru(db, 10, NULL, UINT64_MAX, count_lru, NULL), 0);
    ck_assert_uint_eq(nlru, 1);                         /* b alone is a candidate */
    ck_assert_int_eq(db_forget_blob(db, a, 1), -EBUSY); /* eviction: as pinned */
    ck_assert_int_eq(db_forget_blob(db, a, 0), 0);      /* an admin's RM */
    ck_assert_int_eq(raw_int("SELECT count(*) FROM holds"), 0);
    ck_assert_int_eq(db_holds_refresh(db), 0);
    uint64_t n, bytes;
    db_holds_stats(db, &n, &bytes);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(bytes, 0);
    /* RM by URL, when it takes the blob, takes its holds too. */
    hold(1000, "L", b, "/u/b", 10);
    char sha[65];
    int blob_gone = 0;
    ck_assert_int_eq(db_remove_entry(db, "http://h/b", "", NULL, sha, &blob_gone), 0);
    ck_assert_int_eq(blob_gone, 1);
    ck_assert_int_eq(raw_int("SELECT count(*) FROM holds"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db_holds");
    TCase *tc = tcase_create("holds");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, db_holds_add_needs_a_blob_and_counts);
    tcase_add_test(tc, db_holds_a_moved_row_names_the_blob_left);
    tcase_add_test(tc, db_holds_list_sums_per_uid_and_label);
    tcase_add_test(tc, db_holds_release_names_blobs_no_longer_held);
    tcase_add_test(tc, db_holds_drop_only_the_row_seen);
    tcase_add_test(tc, db_holds_each_least_recently_used_first_and_not_young);
    tcase_add_test(tc, db_holds_each_goes_on_where_the_last_call_stopped);
    tcase_add_test(tc, db_holds_counts_by_uid_follow_every_change);
    tcase_add_test(tc, db_hold_fits_the_bounds_of_its_uid);
    tcase_add_test(tc, db_hold_fits_the_text_and_links_of_its_uid);
    tcase_add_test(tc, db_holds_release_of_one_link);
    tcase_add_test(tc, db_holds_keep_a_blob_from_eviction_not_from_removal);
    tcase_add_test(tc, db_forget_blobs_in_one_batch_keeps_the_held);
    suite_add_tcase(s, tc);
    return db_fixture_run(s);
}
