/* Unit tests of daemon/hub/git_check.c: the ETag parser, and the pool
 * item that checks a stored file's git blob SHA-1 and forgets its entry
 * (url and credential tag, while it names these bytes) on a mismatch. */
#include "db_fixture.h"
#include "git_check.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>

#define URL "https://127.0.0.1:9/org/m/resolve/main/README.md"
#define TAG "aa" /* a credential tag (any text to the db) */
#define HELLO_SHA1 "ce013625030ba8dba906f756967f9e9ca394464a" /* git hash-object of "hello\n" */

static uv_loop_t loop;
static store_t *store;
static worktrack_t work;
static job_fd_t *file; /* "hello\n" */
static char sha[65];   /* the blob its entries name */

static unsigned ndone;
static git_check_result_t last;
static char last_got[41];
static uint64_t last_size;

static void on_done(void *arg, const git_check_result_t *r)
{
    ck_assert_ptr_eq(arg, &ndone);
    ndone++;
    last = *r;
    snprintf(last_got, sizeof last_got, "%s", r->got);
    last_size = r->file->size;
}

static void setup_check(void)
{
    setup();
    char cdir[400], fpath[400];
    snprintf(cdir, sizeof cdir, "%s/cache", dir);
    ck_assert_int_eq(store_open(cdir, &store), 0);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    worktrack_init(&work);
    snprintf(fpath, sizeof fpath, "%s/file", dir);
    int fd = open(fpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "hello\n", 6), 6);
    ck_assert_ptr_nonnull(file = job_fd_new(fd));
    make_sha(sha, 7);
    record(URL, TAG, sha, 6, NULL, NULL);
    record(URL, "", sha, 6, NULL, NULL); /* the same URL without credentials */
    ndone = 0;
}

static void teardown_check(void)
{
    job_fd_unref(file);
    ck_assert_int_eq(uv_loop_close(&loop), 0); /* no handle, no request left */
    store_close(store);
    teardown();
}

static int start(const char *want, const char *url, git_check_t **g)
{
    git_check_env_t env = {&loop, &work, store, db};
    job_result_t res = {.path = "/p", .sha256 = sha, .size = 6, .fd = file, .kind = FETCH_QUEUED};
    return git_check_start(&env, &res, url, TAG, want, on_done, &ndone, g);
}

static int64_t entries(const char *tag)
{
    return raw_int("SELECT count(*) FROM entries WHERE url = %Q AND cred_tag = %Q", URL, tag);
}

START_TEST(git_check_etag_reads_a_git_blob_sha1_only)
{
    char out[41] = "";
    ck_assert_int_eq(git_check_etag("\"" HELLO_SHA1 "\"", out), 1);
    ck_assert_str_eq(out, HELLO_SHA1);
    ck_assert_int_eq(git_check_etag("W/\"" HELLO_SHA1 "\"", out), 1);
    out[0] = '\0';
    ck_assert_int_eq(git_check_etag(HELLO_SHA1, out), 0); /* unquoted */
    ck_assert_int_eq(git_check_etag("\"CE013625030BA8DBA906F756967F9E9CA394464A\"", out), 0);
    ck_assert_int_eq(git_check_etag("\"" HELLO_SHA1 "00\"", out), 0); /* longer */
    ck_assert_int_eq(git_check_etag("\"0000000000000000000000000000000000000000000000000000000000"
                                    "000000\"",
                                    out),
                     0); /* an LFS file's sha256 */
    ck_assert_int_eq(git_check_etag("", out), 0);
    ck_assert_int_eq(git_check_etag(NULL, out), 0);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(git_check_match_keeps_the_entry)
{
    git_check_t *g;
    ck_assert_int_eq(start(HELLO_SHA1, URL, &g), 0);
    ck_assert_uint_eq(work.live, 1); /* a shutdown waits for it */
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_uint_eq(ndone, 1);
    ck_assert_int_eq(last.status, 0);
    ck_assert_int_eq(last.match, 1);
    ck_assert_int_eq(last.forgotten, 0);
    ck_assert_str_eq(last_got, HELLO_SHA1);
    ck_assert_uint_eq(last_size, 6);
    ck_assert_uint_eq(work.live, 0);
    ck_assert_int_eq(entries(TAG), 1);
}
END_TEST

START_TEST(git_check_mismatch_forgets_the_entry_of_its_credentials)
{
    git_check_t *g;
    const char *want = "0123456789012345678901234567890123456789";
    ck_assert_int_eq(start(want, URL, &g), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_uint_eq(ndone, 1);
    ck_assert_int_eq(last.match, 0);
    ck_assert_int_eq(last.forgotten, 1);
    ck_assert_str_eq(last_got, HELLO_SHA1);
    ck_assert_int_eq(entries(TAG), 0);
    ck_assert_int_eq(entries(""), 1); /* another credential's entry stays */
}
END_TEST

START_TEST(git_check_mismatch_leaves_an_entry_that_names_other_bytes)
{
    char other[65];
    make_sha(other, 8);
    record(URL, TAG, other, 6, NULL, NULL); /* downloaded again meanwhile */
    git_check_t *g;
    ck_assert_int_eq(start("0123456789012345678901234567890123456789", URL, &g), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_uint_eq(ndone, 1);
    ck_assert_int_eq(last.match, 0);
    ck_assert_int_eq(last.forgotten, 0);
    ck_assert_int_eq(entries(TAG), 1);
}
END_TEST

START_TEST(git_check_cancelled_answers_nobody_and_frees_itself)
{
    git_check_t *g;
    ck_assert_int_eq(start("0123456789012345678901234567890123456789", URL, &g), 0);
    git_check_cancel(g);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_uint_eq(ndone, 0);
    ck_assert_uint_eq(work.live, 0);
    ck_assert_int_eq(entries(TAG), 0); /* it ran to its end */
}
END_TEST

START_TEST(git_check_too_large_is_not_checked)
{
    git_check_env_t env = {&loop, &work, store, db};
    job_result_t res = {.path = "/p", .sha256 = sha, .size = GIT_CHECK_MAX_SIZE + 1, .fd = file};
    git_check_t *g = NULL;
    ck_assert_int_eq(git_check_start(&env, &res, URL, TAG, HELLO_SHA1, on_done, &ndone, &g),
                     -EFBIG);
    ck_assert_ptr_null(g);
    ck_assert_uint_eq(work.live, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_uint_eq(ndone, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("git_check");
    TCase *tc = tcase_create("git_check");
    tcase_add_checked_fixture(tc, setup_check, teardown_check);
    tcase_add_test(tc, git_check_etag_reads_a_git_blob_sha1_only);
    tcase_add_test(tc, git_check_match_keeps_the_entry);
    tcase_add_test(tc, git_check_mismatch_forgets_the_entry_of_its_credentials);
    tcase_add_test(tc, git_check_mismatch_leaves_an_entry_that_names_other_bytes);
    tcase_add_test(tc, git_check_cancelled_answers_nobody_and_frees_itself);
    tcase_add_test(tc, git_check_too_large_is_not_checked);
    suite_add_tcase(s, tc);
    return db_fixture_run(s);
}
