/* Unit tests for hubctl's hf_layout.c and hf_list.c (hf download): the HF
 * cache's names and links as huggingface_hub makes them, --local-dir's
 * metadata, the git blob check, the REPO file list and the include /
 * exclude rules of filter_repo_objects. The .c files are included to test
 * them without the rest of hubctl. */
#include "../../client/hubctl/hf_dir.c"
#include "../../client/hubctl/hf_layout.c"
#include "../../client/hubctl/hf_list.c"
#include "../../client/hubctl/materialize.c"
#include "../../client/hubctl/util.c"

#include <check.h>
#include <stdlib.h>
#include <sys/mman.h>

static char tmpdir[] = "/tmp/hf_layout_XXXXXX";

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    memcpy(tmpdir + strlen(tmpdir) - 6, "XXXXXX", 6);
}

/* A memfd holding data, as hubd's descriptors hold a blob or a list. */
static int memfd_of(const char *data, size_t n)
{
    int fd = memfd_create("t", 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
    return fd;
}

START_TEST(hf_layout_repo_folder_names)
{
    hf_layout_t l;
    hf_layout_init(&l, "/c", NULL, "model", "org/name");
    ck_assert_str_eq(l.root, "/c/models--org--name");
    hf_layout_free(&l);
    hf_layout_init(&l, "/c", NULL, "dataset", "solo");
    ck_assert_str_eq(l.root, "/c/datasets--solo");
    char *p = hf_layout_file(&l, "abc", "a/b.txt");
    ck_assert_str_eq(p, "/c/datasets--solo/snapshots/abc/a/b.txt");
    free(p);
    p = hf_layout_blob(&l, "e1");
    ck_assert_str_eq(p, "/c/datasets--solo/blobs/e1");
    free(p);
    hf_layout_free(&l);
    hf_layout_init(&l, "/c", "/here", "model", "org/name");
    p = hf_layout_file(&l, "abc", "x/y");
    ck_assert_str_eq(p, "/here/x/y");
    free(p);
    hf_layout_free(&l);
}
END_TEST

START_TEST(hf_layout_unsafe_paths)
{
    static const char *const bad[] = {"",
                                      "/etc/passwd",
                                      "../x",
                                      "a/../../x",
                                      "a//b",
                                      "a/./b",
                                      "a/",
                                      "..",
                                      ".",
                                      "a\\b",
                                      "a\nb",
                                      "a\rb",
                                      "a\x01"
                                      "b",
                                      "a\x7f"
                                      "b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!hf_path_safe(bad[i]), "'%s' taken", bad[i]);
    ck_assert(hf_path_safe("config.json"));
    ck_assert(hf_path_safe("a/b/.hidden"));
    ck_assert(hf_path_safe("a/..b/c.."));
    /* --local-dir's metadata folder: a Hub file there is refused */
    ck_assert(hf_path_is_meta(".cache/huggingface"));
    ck_assert(hf_path_is_meta(".cache/huggingface/download/a.metadata"));
    ck_assert(hf_path_is_meta(".cache/huggingface/.gitignore"));
    ck_assert(!hf_path_is_meta(".cache/huggingfaces/x"));
    ck_assert(!hf_path_is_meta("a/.cache/huggingface/x"));
    ck_assert(!hf_path_is_meta(".cache/x"));
}
END_TEST

/* snapshots/{commit}/{path} -> ../../blobs/{etag}, one ../ more per folder;
 * refs/{rev} only when rev is not the commit, refs/pr/1 in refs/refs/pr/1. */
START_TEST(hf_layout_links_and_refs)
{
    hf_layout_t l;
    char buf[256];
    hf_layout_init(&l, tmpdir, NULL, "model", "org/m");
    ck_assert_int_eq(hf_layout_snapshot_link(&l, "c1", "a/b/w.bin", "e1"), 0);
    char *p = hf_layout_file(&l, "c1", "a/b/w.bin");
    ssize_t n = readlink(p, buf, sizeof buf - 1);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "../../../../blobs/e1");
    ck_assert_int_eq(hf_layout_snapshot_link(&l, "c1", "a/b/w.bin", "e1"), 0); /* kept */
    free(p);
    ck_assert_int_eq(hf_layout_write_ref(&l, "refs/pr/1", "c1"), 0);
    ck_assert_int_eq(hf_layout_write_ref(&l, "c1", "c1"), 0);
    snprintf(buf, sizeof buf, "%s/models--org--m/refs/refs/pr/1", tmpdir);
    FILE *f = fopen(buf, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    ck_assert_str_eq(buf, "c1"); /* no newline */
    snprintf(buf, sizeof buf, "%s/models--org--m/refs/c1", tmpdir);
    ck_assert_int_ne(access(buf, F_OK), 0);
    ck_assert_int_eq(hf_layout_write_ref(&l, "../x", "c1"), -EINVAL);
    /* not present until the blob resolves */
    ck_assert(!hf_layout_present(&l, "c1", "a/b/w.bin", "e1", 3));
    int fd = memfd_of("abc", 3), clone_err = -1;
    ck_assert_int_eq(hf_layout_place_copy(&l, "c1", "a/b/w.bin", "e1", fd, 3, &clone_err), 0);
    ck_assert(hf_layout_present(&l, "c1", "a/b/w.bin", "e1", 3));
    ck_assert(!hf_layout_present(&l, "c1", "a/b/w.bin", "e1", 4)); /* wrong size */
    /* a symlink that dangles is not there */
    ck_assert_int_eq(hf_layout_blob_symlink(&l, "e2", "/nonexistent/blob"), 0);
    ck_assert(!hf_layout_present(&l, "c1", "x", "e2", 3));
    close(fd);
    hf_layout_free(&l);
}
END_TEST

/* --local-dir: the file, its three-line metadata, and a change to the file
 * makes it absent. */
START_TEST(hf_layout_local_metadata)
{
    hf_layout_t l;
    char buf[512];
    hf_layout_init(&l, NULL, tmpdir, "model", "org/m");
    int fd = memfd_of("hello", 5), clone_err;
    ck_assert(!hf_layout_present(&l, "c1", "d/f.txt", "e1", 5));
    ck_assert_int_eq(hf_layout_place_copy(&l, "c1", "d/f.txt", "e1", fd, 5, &clone_err), 0);
    ck_assert(hf_layout_present(&l, "c1", "d/f.txt", "e1", 5));
    ck_assert(hf_layout_present(&l, "c2", "d/f.txt", "e1", 5)); /* same etag */
    ck_assert(hf_layout_present(&l, "c1", "d/f.txt", "e9", 5)); /* same commit */
    ck_assert(!hf_layout_present(&l, "c2", "d/f.txt", "e9", 5));
    snprintf(buf, sizeof buf, "%s/.cache/huggingface/download/d/f.txt.metadata", tmpdir);
    FILE *f = fopen(buf, "r");
    ck_assert_ptr_nonnull(f);
    char c[64], e[64];
    double t;
    ck_assert_int_eq(fscanf(f, "%63s\n%63s\n%lf\n", c, e, &t), 3);
    fclose(f);
    ck_assert_str_eq(c, "c1");
    ck_assert_str_eq(e, "e1");
    snprintf(buf, sizeof buf, "%s/.cache/huggingface/.gitignore", tmpdir);
    ck_assert_int_eq(access(buf, F_OK), 0);
    /* the user edits the file later: not present */
    snprintf(buf, sizeof buf, "%s/d/f.txt", tmpdir);
    struct timespec times[2] = {{.tv_sec = (time_t)t + 5}, {.tv_sec = (time_t)t + 5}};
    ck_assert_int_eq(utimensat(AT_FDCWD, buf, times, 0), 0);
    ck_assert(!hf_layout_present(&l, "c1", "d/f.txt", "e1", 5));
    close(fd);
    hf_layout_free(&l);
}
END_TEST

START_TEST(hf_layout_git_blob_id)
{
    /* git hash-object of "hello\n" */
    int fd = memfd_of("hello\n", 6);
    ck_assert_int_eq(hf_git_blob_check(fd, 6, "ce013625030ba8dba906f756967f9e9ca394464a"), 0);
    ck_assert_int_eq(hf_git_blob_check(fd, 6, "CE013625030BA8DBA906F756967F9E9CA394464A"), 0);
    ck_assert_int_eq(hf_git_blob_check(fd, 6, "ce013625030ba8dba906f756967f9e9ca394464b"),
                     -EBADMSG);
    ck_assert_int_eq(hf_git_blob_check(fd, 7, "ce013625030ba8dba906f756967f9e9ca394464a"),
                     -EBADMSG); /* shorter than said */
    close(fd);
}
END_TEST

START_TEST(hf_list_reads_the_lines)
{
    static const char text[] =
        "path=config.json size=10 blob=ce013625030ba8dba906f756967f9e9ca394464a\n"
        "path=a%20b/w.bin size=99 blob=CE013625030BA8DBA906F756967F9E9CA394464A "
        "sha256="
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n";
    char err[256];
    hf_list_t l;
    int fd = memfd_of(text, sizeof text - 1);
    ck_assert_int_eq(hf_list_read(fd, &l, err, sizeof err), 0);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_str_eq(l.files[1].path, "a b/w.bin");
    ck_assert_uint_eq(l.files[1].size, 99);
    ck_assert_str_eq(l.files[1].blob, "ce013625030ba8dba906f756967f9e9ca394464a");
    ck_assert_str_eq(hf_file_etag(&l.files[1]), l.files[1].sha256);
    ck_assert_str_eq(hf_file_etag(&l.files[0]), l.files[0].blob);
    hf_list_free(&l);
    close(fd);
    fd = memfd_of("path=x size=1 blob=zz\n", 22);
    ck_assert_int_eq(hf_list_read(fd, &l, err, sizeof err), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "line 1"));
    close(fd);
}
END_TEST

/* huggingface_hub's filter_repo_objects: "dir/" is "dir/" and "*", and "*" spans "/". */
START_TEST(hf_list_include_exclude)
{
    const char *inc[] = {"*.json", "sub/"}, *exc[] = {"sub/skip*"};
    ck_assert(hf_list_wanted("x.bin", NULL, 0, NULL, 0));
    ck_assert(hf_list_wanted("config.json", inc, 2, exc, 1));
    ck_assert(hf_list_wanted("a/b/config.json", inc, 2, exc, 1));
    ck_assert(hf_list_wanted("sub/w.bin", inc, 2, exc, 1));
    ck_assert(!hf_list_wanted("sub/skip.bin", inc, 2, exc, 1));
    ck_assert(!hf_list_wanted("w.bin", inc, 2, exc, 1));
    ck_assert(!hf_list_wanted("w.bin", NULL, 0, (const char *[]){"*.bin"}, 1));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_layout");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, hf_layout_repo_folder_names);
    tcase_add_test(tc, hf_layout_unsafe_paths);
    tcase_add_test(tc, hf_layout_links_and_refs);
    tcase_add_test(tc, hf_layout_local_metadata);
    tcase_add_test(tc, hf_layout_git_blob_id);
    tcase_add_test(tc, hf_list_reads_the_lines);
    tcase_add_test(tc, hf_list_include_exclude);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
