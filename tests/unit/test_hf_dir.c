/* Unit tests for hubctl's hf_dir.c: folders below a named root, opened
 * without following a link and only when the running user owns them. The
 * .c file is included to test it without the rest of hubctl. */
#include "../../client/hubctl/hf_dir.c"

#include <check.h>
#include <stdlib.h>

static char tmpdir[] = "/tmp/hf_dir_XXXXXX";

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

/* tmpdir/rel as a path, in one of four static buffers (a call may take
 * two). */
static const char *at(const char *rel)
{
    static char buf[4][PATH_MAX];
    static unsigned next;
    char *b = buf[next++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", tmpdir, rel);
    return b;
}

/* Made folders are real ones, opened again; a missing one without
 * HF_DIR_CREATE is -ENOENT; the root itself is made as a path. */
START_TEST(hf_dir_creates_and_opens)
{
    hf_dir_refusal_t why;
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s/new/root", tmpdir);
    ck_assert_int_eq(hf_dir_open(root, "a/b", 0, &why), -ENOENT);
    ck_assert_int_eq(why.err, 0);
    int fd = hf_dir_open(root, "a/b/c", HF_DIR_CREATE, &why);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(mkdirat(fd, "d", 0755), 0); /* the descriptor is c's */
    close(fd);
    struct stat st;
    ck_assert_int_eq(lstat(at("new/root/a/b/c/d"), &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    fd = hf_dir_open(root, "", 0, &why); /* the root itself */
    ck_assert_int_ge(fd, 0);
    close(fd);
    const char *base;
    fd = hf_dir_open_parent(root, "a/b/c/file.txt", 0, &why, &base);
    ck_assert_int_ge(fd, 0);
    ck_assert_str_eq(base, "file.txt");
    ck_assert_int_eq(fstatat(fd, "d", &st, 0), 0); /* the descriptor is c's */
    close(fd);
}
END_TEST

/* A link below the root is refused and named, dangling or not, and
 * nothing is made through it; a link in the root's own path is the user's. */
START_TEST(hf_dir_refuses_links_below_the_root)
{
    hf_dir_refusal_t why;
    char buf[PATH_MAX + 200], want[PATH_MAX];
    ck_assert_int_eq(mkdir(at("root"), 0755), 0);
    ck_assert_int_eq(mkdir(at("elsewhere"), 0755), 0);
    ck_assert_int_eq(symlink(at("elsewhere"), at("root/sub")), 0);
    ck_assert_int_eq(hf_dir_open(at("root"), "sub/x", HF_DIR_CREATE, &why), -ELOOP);
    ck_assert_int_eq(why.err, -ELOOP);
    snprintf(want, sizeof want, "%s/root/sub", tmpdir);
    ck_assert_str_eq(why.path, want);
    ck_assert_ptr_nonnull(strstr(hf_dir_explain(&why, buf, sizeof buf), "symbolic link"));
    ck_assert_int_ne(access(at("elsewhere/x"), F_OK), 0); /* nothing made there */
    ck_assert_int_eq(symlink(at("nowhere"), at("root/dangling")), 0);
    ck_assert_int_eq(hf_dir_open(at("root"), "dangling", HF_DIR_CREATE, &why), -ELOOP);
    ck_assert_int_ne(access(at("nowhere"), F_OK), 0);
    /* a file where a folder should be */
    int fd = open(at("root/file"), O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(hf_dir_open(at("root"), "file/x", HF_DIR_CREATE, &why), -ENOTDIR);
    ck_assert_int_eq(why.err, -ENOTDIR);
    /* the root named may be a link, or go through one */
    ck_assert_int_eq(symlink(at("elsewhere"), at("named")), 0);
    fd = hf_dir_open(at("named"), "y", HF_DIR_CREATE, &why);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(access(at("elsewhere/y"), F_OK), 0);
}
END_TEST

/* Names that are not one plain folder name each are -EINVAL. */
START_TEST(hf_dir_bad_names)
{
    static const char *const bad[] = {"..", "a/..", ".", "a//b", "/a", "a/"};
    hf_dir_refusal_t why;
    const char *base;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(hf_dir_open(tmpdir, bad[i], HF_DIR_CREATE, &why) == -EINVAL, "'%s'", bad[i]);
    ck_assert_int_eq(hf_dir_open_parent(tmpdir, "a/..", 0, &why, &base), -EINVAL);
    ck_assert_int_eq(hf_dir_open_parent(tmpdir, "a/", 0, &why, &base), -EINVAL);
}
END_TEST

/* A folder below the root that another user owns is refused, with its
 * owner; the root itself may be anyone's. Needs root to chown. */
START_TEST(hf_dir_refuses_another_users_folder)
{
    if (geteuid() != 0)
        return; /* only root can hand a folder to another user */
    hf_dir_refusal_t why;
    char buf[PATH_MAX + 200];
    ck_assert_int_eq(mkdir(at("theirs"), 0777), 0);
    ck_assert_int_eq(chown(at("theirs"), 65534, 65534), 0);
    ck_assert_int_eq(mkdir(at("theirs/sub"), 0777), 0);
    ck_assert_int_eq(chown(at("theirs/sub"), 65534, 65534), 0);
    int fd = hf_dir_open(at("theirs"), "", 0, &why); /* the root named */
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(hf_dir_open(at("theirs"), "sub/x", HF_DIR_CREATE, &why), -EPERM);
    ck_assert_uint_eq(why.owner, 65534);
    ck_assert_ptr_nonnull(strstr(hf_dir_explain(&why, buf, sizeof buf), "owned by uid 65534"));
    ck_assert_int_ne(access(at("theirs/sub/x"), F_OK), 0);
    fd = hf_dir_open(at("theirs"), "mine", HF_DIR_CREATE, &why); /* made by us: ours */
    ck_assert_int_ge(fd, 0);
    close(fd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hf_dir");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, hf_dir_creates_and_opens);
    tcase_add_test(tc, hf_dir_refuses_links_below_the_root);
    tcase_add_test(tc, hf_dir_bad_names);
    tcase_add_test(tc, hf_dir_refuses_another_users_folder);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
