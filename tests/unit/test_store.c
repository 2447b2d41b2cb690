/* Unit tests of daemon/cache/store.c's names: a partial's file is always
 * new (a stale file or a planted link under its name is replaced, never
 * followed), a blob's two-letter folder is made when its commit finds none
 * (and said, so that blobs/ is fsync'ed too), a blob is opened on the loop
 * only where its path is cached, the writeback check after a syncfs, and
 * blobs unlinked several at once. */
#include "store.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

static char dir[200];
static store_t *st;

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hubd-store.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(store_open(dir, &st), 0);
}

static void teardown(void)
{
    store_close(st);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", dir, rel);
}

/* The running kernel is major.minor or later. */
static int kernel_at_least(unsigned major, unsigned minor)
{
    struct utsname u;
    unsigned a = 0, b = 0;
    ck_assert_int_eq(uname(&u), 0);
    ck_assert_int_eq(sscanf(u.release, "%u.%u", &a, &b), 2);
    return a > major || (a == major && b >= minor);
}

static const char *hex = "ab12000000000000000000000000000000000000000000000000000000000000";

/* A file whose bytes are "hello" under tmp/<id>.part, committed. */
static void commit_one(uint64_t id, const char *h, int *created, int *new_dir)
{
    int fd = -1, ro = -1;
    ck_assert_int_eq(store_tmp_create(st, id, &fd), 0);
    ck_assert_int_eq(pwrite(fd, "hello", 5, 0), 5);
    ck_assert_int_eq(store_commit(st, fd, id, h, 0, &ro, created, new_dir), 0);
    ck_assert_int_ge(ro, 0);
    close(ro);
    store_discard(st, -1, id);
}

START_TEST(store_a_partial_is_always_a_new_file)
{
    char part[300], outside[300];
    path_of(part, sizeof part, "tmp/5.part");
    path_of(outside, sizeof outside, "outside");
    int o = open(outside, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(o, 0);
    ck_assert_int_eq(write(o, "keep", 4), 4);
    close(o);
    /* A planted link under the name: replaced, its target untouched. */
    ck_assert_int_eq(symlink(outside, part), 0);
    int fd = -1;
    ck_assert_int_eq(store_tmp_create(st, 5, &fd), 0);
    ck_assert_int_eq(write(fd, "x", 1), 1);
    close(fd);
    struct stat s;
    ck_assert_int_eq(lstat(part, &s), 0);
    ck_assert(S_ISREG(s.st_mode));
    ck_assert_int_eq(s.st_size, 1);
    ck_assert_int_eq(stat(outside, &s), 0);
    ck_assert_int_eq(s.st_size, 4);
    /* A stale file under the name: a new, empty one instead. */
    ck_assert_int_eq(store_tmp_create(st, 5, &fd), 0);
    ck_assert_int_eq(fstat(fd, &s), 0);
    ck_assert_int_eq(s.st_size, 0);
    close(fd);
}
END_TEST

START_TEST(store_a_commit_makes_the_folder_it_finds_missing)
{
    int created = 0, new_dir = 0;
    commit_one(1, hex, &created, &new_dir);
    ck_assert_int_eq(created, 1);
    ck_assert_int_eq(new_dir, 1); /* blobs/ab was made: blobs/ is to be fsync'ed */
    char blob[400];
    path_of(blob, sizeof blob,
            "blobs/ab/ab12000000000000000000000000000000000000000000000000000000000000");
    struct stat s;
    ck_assert_int_eq(stat(blob, &s), 0);
    ck_assert_int_eq(s.st_size, 5);
    ck_assert_uint_eq(s.st_mode & 0777, 0444);
    /* Another blob in the same folder: no new folder. */
    char hex2[65];
    memcpy(hex2, hex, sizeof hex2);
    hex2[63] = '1';
    commit_one(2, hex2, &created, &new_dir);
    ck_assert_int_eq(created, 1);
    ck_assert_int_eq(new_dir, 0);
    /* The same digest again: the name is not new. */
    commit_one(3, hex, &created, &new_dir);
    ck_assert_int_eq(created, 0);
    ck_assert_int_eq(new_dir, 0);
    /* The folder removed behind hubd's back: made again. */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/blobs/ab'", dir);
    ck_assert_int_eq(system(cmd), 0);
    commit_one(4, hex, &created, &new_dir);
    ck_assert_int_eq(created, 1);
    ck_assert_int_eq(new_dir, 1);
}
END_TEST

START_TEST(store_a_blob_opens_on_the_loop_only_when_its_path_is_cached)
{
    int created = 0, new_dir = 0;
    commit_one(1, hex, &created, &new_dir);
    int fd = -1;
    struct stat s;
    /* Just committed: every name on the way is in the lookup cache. A
     * kernel before 5.12 has no RESOLVE_CACHED: every answer is EAGAIN. */
    int cached = kernel_at_least(5, 12);
    ck_assert_int_eq(store_open_blob_cached(st, hex, 5, &fd, &s), cached ? 0 : -EAGAIN);
    if (cached) {
        ck_assert_int_eq(s.st_size, 5);
        close(fd);
    }
    /* The wrong size, or no such blob: never a descriptor. */
    ck_assert_int_eq(store_open_blob_cached(st, hex, 6, &fd, NULL), cached ? -EIO : -EAGAIN);
    char other[65];
    memcpy(other, hex, sizeof other);
    other[10] = 'f';
    int rc = store_open_blob_cached(st, other, 5, &fd, NULL);
    /* ENOENT, or EAGAIN: a name never looked up is not in the cache. */
    ck_assert_msg(rc == -ENOENT || rc == -EAGAIN, "rc %d", rc);
    /* A link planted under a blob's name is not followed. */
    char blob[400], target[400];
    path_of(blob, sizeof blob,
            "blobs/ab/ab12000000000000000000000000000000000000000000000000000000000000");
    path_of(target, sizeof target, "elsewhere");
    ck_assert_int_eq(rename(blob, target), 0);
    ck_assert_int_eq(symlink(target, blob), 0);
    ck_assert_int_eq(store_open_blob_cached(st, hex, 5, &fd, NULL), cached ? -EIO : -EAGAIN);
}
END_TEST

START_TEST(store_a_synced_file_is_checked_without_a_flush)
{
    int fd = -1;
    ck_assert_int_eq(store_tmp_create(st, 9, &fd), 0);
    ck_assert_int_eq(pwrite(fd, "data", 4, 0), 4);
    ck_assert_int_eq(store_sync_all(st), 0);
    /* Where a syncfs stands for the file's fsync (Linux 5.17 and ext4,
     * XFS, btrfs or tmpfs) the check says 0; elsewhere the caller must
     * fsync the file itself. */
    struct statfs f;
    ck_assert_int_eq(statfs(dir, &f), 0);
    unsigned long t = (unsigned long)f.f_type;
    int stands = kernel_at_least(5, 17) &&
                 (t == 0xEF53 || t == 0x58465342 || t == 0x9123683E || t == 0x01021994);
    ck_assert_int_eq(store_check_synced(st, fd), stands ? 0 : -ENOTSUP);
    /* The same for a group's new names: one syncfs, or each folder's fsync. */
    ck_assert_int_eq(store_sync_names(st), stands ? 0 : -ENOTSUP);
    close(fd);
}
END_TEST

START_TEST(store_blobs_are_unlinked_several_at_once_all_of_them)
{
    /* 300 blobs (helpers start), a name already gone among them, and a
     * blob not named stays. */
    enum { N = 300 };
    static char names[N + 1][65];
    const char *hexes[N];
    for (unsigned i = 0; i <= N; i++) {
        snprintf(names[i], sizeof names[i], "%02x%062u", i % 256, i);
        char rel[100], path[400];
        snprintf(rel, sizeof rel, "blobs/%.2s", names[i]);
        path_of(path, sizeof path, rel);
        mkdir(path, 0755);
        snprintf(rel, sizeof rel, "blobs/%.2s/%.64s", names[i], names[i]);
        path_of(path, sizeof path, rel);
        if (i == 7)
            continue; /* gone already */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0444);
        ck_assert_int_ge(fd, 0);
        close(fd);
        if (i < N)
            hexes[i] = names[i];
    }
    hexes[7] = names[7];
    store_unlink_blobs(st, hexes, N);
    for (unsigned i = 0; i <= N; i++) {
        char rel[100], path[400];
        snprintf(rel, sizeof rel, "blobs/%.2s/%.64s", names[i], names[i]);
        path_of(path, sizeof path, rel);
        ck_assert_int_eq(access(path, F_OK) == 0, i == N);
    }
    store_unlink_blobs(st, hexes, 0); /* nothing to do */
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *names = tcase_create("names");
    tcase_add_checked_fixture(names, setup, teardown);
    tcase_add_test(names, store_a_partial_is_always_a_new_file);
    tcase_add_test(names, store_a_commit_makes_the_folder_it_finds_missing);
    tcase_add_test(names, store_a_blob_opens_on_the_loop_only_when_its_path_is_cached);
    tcase_add_test(names, store_a_synced_file_is_checked_without_a_flush);
    tcase_add_test(names, store_blobs_are_unlinked_several_at_once_all_of_them);
    suite_add_tcase(s, names);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(store_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
