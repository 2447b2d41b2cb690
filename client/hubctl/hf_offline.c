/* hf_offline: hf download from the HF cache alone (HF_HUB_OFFLINE, or the
 * Hub out of reach). */
#include "hf_offline.h"
#include "outage.h"

#include "hf_format.h"
#include "hf_layout.h"
#include "hf_list.h"
#include "json.h"
#include "out.h"
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define COMMIT_MAX 255    /* a ref longer than a file name names no snapshot */
#define WALK_FDS 16       /* nftw's descriptors */
#define META_TOP ".cache" /* --local-dir's metadata folder: not a repo file */
#define WHY_MAX 640       /* "cannot reach the Hub (...)": hubd's message, cut */

int hf_offline(void)
{
    static const char *const yes[] = {"1", "on", "yes", "true"};
    const char *v = getenv("HF_HUB_OFFLINE");
    if (!v || !*v)
        v = getenv("TRANSFORMERS_OFFLINE");
    for (size_t i = 0; v && i < ARRAY_LEN(yes); i++)
        if (strcasecmp(v, yes[i]) == 0)
            return 1;
    return 0;
}

/* "hubctl: WHY and model org/name [FILE] at revision R is not in the
 * cache DIR" on stderr; WHY says why the cache alone answers. */
static void not_cached(const hf_opts_t *o, const char *why, const char *file)
{
    fprintf(stderr, "hubctl: %s and %s %s%s%s at revision %s is not in the %s %s\n", why, o->type,
            o->repo, file ? " " : "", file ? file : "", o->revision,
            o->local_dir ? "local dir" : "cache", o->local_dir ? o->local_dir : o->cache_dir);
}

static int is_commit(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == 40 && s[n] == '\0';
}

/* The commit that revision names in the cache, into buf: revision itself
 * when it is one, else the text of refs/{revision}. 0, or -1 when none. */
static int find_commit(const hf_layout_t *l, const char *revision, char *buf, size_t cap)
{
    if (is_commit(revision)) {
        snprintf(buf, cap, "%s", revision);
        return 0;
    }
    if (!hf_path_safe(revision))
        return -1;
    char ref[PATH_MAX];
    if (snprintf(ref, sizeof ref, "%s/refs/%s", l->root, revision) >= (int)sizeof ref)
        return -1;
    int fd = open(ref, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : -1;
    close_fd(fd);
    if (n <= 0 || (size_t)n >= cap - 1)
        return -1;
    buf[n] = '\0';
    /* huggingface_hub reads it whole, no strip: the snapshot folder's name */
    return hf_path_safe(buf) && !strchr(buf, '/') ? 0 : -1;
}

/* One --json object for the file at path (a repo path) found at file. */
static void json_found(const char *path, const char *file)
{
    struct stat st;
    char target[PATH_MAX];
    fputs("{\"path\":", stdout);
    json_str(stdout, path);
    fputs(",\"ok\":true,\"file\":", stdout);
    json_str(stdout, file);
    if (stat(file, &st) == 0)
        printf(",\"size\":%lld", (long long)st.st_size);
    ssize_t n = readlink(file, target, sizeof target - 1);
    const char *etag = NULL;
    if (n > 0) {
        target[n] = '\0';
        etag = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
    }
    if (etag) { /* the cache's blobs/{etag}: the local dir's files are plain */
        fputs(",\"etag\":", stdout);
        json_str(stdout, etag);
    }
    fputs(",\"source\":\"present\"}\n", stdout);
}

/* A file of the answer, path (a repo path) found at file: its --json-files
 * object, or with --dry-run its row (in place: nothing would be fetched). */
static void found_file(const char *path, const char *file, hf_dry_t *dry)
{
    struct stat st;
    if (dry)
        hf_dry_add(dry, path, stat(file, &st) == 0 ? (uint64_t)st.st_size : 0, 1, 0, file);
    else
        json_found(path, file);
}

/* The walk of a folder for --json-files or --dry-run: nftw takes no
 * context. */
static struct {
    const hf_opts_t *o;
    size_t skip;   /* the folder's length and its '/' */
    hf_dry_t *dry; /* --dry-run's rows, or NULL */
} walk;

static int walk_one(const char *fpath, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    if (ftw->level == 0)
        return FTW_CONTINUE;
    const char *path = fpath + walk.skip;
    if (flag == FTW_D)
        return walk.o->local_dir && ftw->level == 1 && strcmp(path, META_TOP) == 0
                   ? FTW_SKIP_SUBTREE
                   : FTW_CONTINUE;
    const cli_t *c = walk.o->cli;
    if (flag == FTW_F && hf_list_wanted(path, c->include, c->ninclude, c->exclude, c->nexclude))
        found_file(path, fpath, walk.dry);
    return FTW_CONTINUE; /* a dangling link (FTW_SLN) is not a file */
}

/* Every file under folder, one object (or row) each. */
static void walk_folder(const hf_opts_t *o, const char *folder, hf_dry_t *dry)
{
    walk.o = o;
    walk.skip = strlen(folder) + 1;
    walk.dry = dry;
    nftw(folder, walk_one, WALK_FDS, FTW_ACTIONRETVAL);
}

/* Is there a regular file (or a link that resolves to one) at path? */
static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Does folder exist, and (local) hold anything? */
static int folder_ok(const char *folder, int local)
{
    struct stat st;
    if (stat(folder, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    if (!local)
        return 1;
    DIR *d = opendir(folder);
    struct dirent *e;
    int any = 0;
    while (d && !any && (e = readdir(d)) != NULL)
        any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return any;
}

/* The cache's answer to o: printed (as the online run prints it), or each
 * thing not cached said after why. why NULL: nothing is printed, only
 * whether the cache holds the answer. Returns the exit code. */
static int answer(const hf_opts_t *o, const char *why)
{
    for (size_t k = 0; k < o->nfiles; k++)
        if (!hf_path_safe(o->files[k])) {
            if (why)
                fprintf(stderr, "hubctl: '%s' is not a plain relative path in the repo\n",
                        o->files[k]);
            return EXIT_USAGE;
        }
    hf_layout_t l;
    hf_layout_init(&l, o->cache_dir, o->local_dir, o->type, o->repo);
    char commit[COMMIT_MAX + 1] = "";
    int found = l.local || find_commit(&l, o->revision, commit, sizeof commit) == 0;
    int rc = found ? EXIT_OK : EXIT_FAILED;
    if (!found && why)
        not_cached(o, why, o->nfiles == 1 ? o->files[0] : NULL);
    for (size_t k = 0; found && k < o->nfiles; k++) { /* each missing one is said */
        if (!hf_offline_has_file(&l, commit, o->files[k])) {
            if (why)
                not_cached(o, why, o->files[k]);
            rc = EXIT_FAILED;
        }
    }
    char *folder = hf_layout_folder(&l, commit);
    if (rc == EXIT_OK && o->nfiles == 0 && !folder_ok(folder, l.local)) {
        if (why)
            not_cached(o, why, NULL);
        rc = EXIT_FAILED;
    }
    if (rc == EXIT_OK && why && (o->cli->json_files || o->cli->dry_run)) {
        hf_dry_t dry = {.commit = l.local ? NULL : xstrdup(commit)};
        hf_dry_t *rows = o->cli->dry_run ? &dry : NULL;
        for (size_t k = 0; k < o->nfiles; k++) {
            char *file = hf_layout_file(&l, commit, o->files[k]);
            found_file(o->files[k], file, rows);
            free(file);
        }
        if (o->nfiles == 0)
            walk_folder(o, folder, rows);
        if (rows)
            hf_dry_print(rows, o->format, o->cli->json_files);
        hf_dry_free(&dry);
    } else if (rc == EXIT_OK && why) {
        char *out = o->nfiles == 1 ? hf_layout_file(&l, commit, o->files[0]) : xstrdup(folder);
        hf_format_result(o->format, out);
        free(out);
    }
    free(folder);
    hf_layout_free(&l);
    return rc;
}

/* Does the cache hold o's answer? Nothing is said. */
static int cached(const hf_opts_t *o)
{
    return answer(o, NULL) == EXIT_OK;
}

int hf_offline_run(const hf_opts_t *o)
{
    if (o->cli->warm) {
        fputs("hubctl: --warm fills hubd's cache from the Hub, and HF_HUB_OFFLINE is set\n",
              stderr);
        return EXIT_FAILED;
    }
    return answer(o, "HF_HUB_OFFLINE is set");
}

int hf_offline_has_file(const hf_layout_t *l, const char *commit, const char *path)
{
    char *file = hf_layout_file(l, commit, path);
    int there = is_file(file);
    free(file);
    return there;
}

int hf_offline_outage(const char *code)
{
    return outage_code(code);
}

/* "cannot reach the Hub (MSG; CODE)" into buf, both cleaned. */
static const char *outage_why(const char *code, const char *msg, char *buf, size_t cap)
{
    char *clean = out_clean_copy(msg && *msg ? msg : "hubd gave no reason");
    char *ccode = out_clean_copy(code ? code : "error");
    snprintf(buf, cap, "cannot reach the Hub (%s; %s)", clean, ccode);
    free(clean);
    free(ccode);
    return buf;
}

void hf_offline_note(const hf_opts_t *o, const char *code, const char *msg)
{
    char why[WHY_MAX];
    fprintf(stderr, "hubctl: note: %s: answered from the %s %s\n",
            outage_why(code, msg, why, sizeof why), o->local_dir ? "local dir" : "cache",
            o->local_dir ? o->local_dir : o->cache_dir);
}

/* The note comes only with an answer: a run that fails says the reason
 * once, in its error. Hence the lookup runs twice (quietly first). */
int hf_offline_fallback(const hf_opts_t *o, const char *code, const char *msg)
{
    char why[WHY_MAX];
    outage_why(code, msg, why, sizeof why);
    if (cached(o))
        hf_offline_note(o, code, msg);
    return answer(o, why);
}

int hf_offline_commit_cached(const hf_opts_t *o)
{
    return o->nfiles == 1 && !o->cli->warm && !o->local_dir && is_commit(o->revision) && cached(o);
}
