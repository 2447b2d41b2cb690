/* hf_holds: `hubctl hf ls` and `hubctl hf rm`. */
#include "hf_holds.h"

#include "conn.h"
#include "json.h"
#include "out.h"
#include "textnum.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- hf ls ---------------------------------------------------------------- */

typedef struct ls {
    int json;
    unsigned n; /* HOLDREC lines */
    int rc;
} ls_t;

/* A label "{type}s/{repo}@{revision}" shown as its parts. */
static void ls_line(ls_t *l, const proto_msg_t *m)
{
    const char *label = out_get_or(m, "label", "?");
    char buf[32];
    if (l->json) {
        fputs(l->n ? "," : "[", stdout);
        fprintf(stdout, "{\"uid\":%s,\"label\":", out_get_or(m, "uid", "0"));
        json_str(stdout, label);
        fprintf(stdout, ",\"files\":%s,\"size\":%s}", out_get_or(m, "files", "0"),
                out_get_or(m, "size", "0"));
    } else {
        if (l->n == 0)
            printf("%-8s %-60s %7s %10s\n", "UID", "REPO@REVISION", "FILES", "SIZE");
        printf("%-8s ", out_get_or(m, "uid", "?"));
        out_clean(stdout, label);
        printf(" %7s %10s\n", out_get_or(m, "files", "?"),
               out_field_bytes(m, "size", buf, sizeof buf));
    }
    l->n++;
}

static int ls_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    ls_t *l = arg;
    close_fd(fd);
    if (str_eq(m->verb, "HOLDREC")) {
        ls_line(l, m);
        return 0;
    }
    if (str_eq(m->verb, "ERR")) {
        fprintf(stderr, "hubctl: hf ls: ");
        out_reason(stderr, out_get_or(m, "code", "error"), out_get_or(m, "msg", ""));
        l->rc = EXIT_FAILED;
        return 1;
    }
    if (!str_eq(m->verb, "END"))
        return 0;
    if (l->json)
        fputs(l->n ? "]\n" : "[]\n", stdout);
    else if (!l->n)
        fputs("no holds\n", stderr);
    return 1;
}

/* Options shared by ls and rm: --socket PATH. 1 when argv[*i] was one. */
static int socket_opt(int argc, char **argv, int *i, const char **sock)
{
    if (!str_eq(argv[*i], "--socket"))
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *sock = argv[++*i];
    return 1;
}

static int usage(const char *msg, const char *arg)
{
    fprintf(stderr, "hubctl: hf: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return EXIT_USAGE;
}

int hf_ls_main(int argc, char **argv)
{
    const char *sock = NULL, *uid = NULL;
    int all = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        int s = socket_opt(argc, argv, &i, &sock);
        if (s < 0)
            return usage("--socket needs a path", NULL);
        if (s)
            continue;
        if (str_eq(argv[i], "--all"))
            all = 1;
        else if (str_eq(argv[i], "--json"))
            json = 1;
        else if (str_eq(argv[i], "--uid") && i + 1 < argc)
            uid = argv[++i];
        else
            return usage("hf ls takes [--all | --uid N] [--json]", argv[i]);
    }
    uint64_t n;
    if (uid && parse_u64(uid, &n))
        return usage("--uid takes a number", uid);
    if (uid && all)
        return usage("--all and --uid go alone", NULL);
    char mine[24];
    snprintf(mine, sizeof mine, "%u", (unsigned)getuid());
    ls_t l = {.json = json};
    conn_t *conn = conn_new(sock, 1, 0, ls_on_msg, &l);
    char line[PROTO_MAX_LINE];
    proto_writer_t w;
    proto_begin(&w, line, sizeof line, "HOLDS");
    proto_add(&w, "id", "1");
    if (!all) /* an admin's HOLDS without uid= lists everyone's */
        proto_add(&w, "uid", uid ? uid : mine);
    int rc = conn_queue_line(conn, &w) ? EXIT_USAGE : conn_open(conn);
    int err = rc == 0 ? conn_run(conn) : 0;
    if (err < 0)
        rc = conn_report(conn, err);
    else if (rc == 0)
        rc = l.rc;
    conn_free(conn);
    return rc;
}

/* ---- hf rm ---------------------------------------------------------------- */

/* The HF cache folder, as huggingface_hub finds it (hf-spec.md). */
static int cache_dir(const char *given, char *out, size_t cap)
{
    const char *v;
    int n;
    if (given)
        n = snprintf(out, cap, "%s", given);
    else if ((v = getenv("HF_HUB_CACHE")) && *v)
        n = snprintf(out, cap, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v)
        n = snprintf(out, cap, "%s/hub", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v)
        n = snprintf(out, cap, "%s/huggingface/hub", v);
    else if ((v = getenv("HOME")) && *v)
        n = snprintf(out, cap, "%s/.cache/huggingface/hub", v);
    else
        return -ENOENT;
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

typedef struct rm_stats {
    uint64_t files;      /* snapshot links removed */
    uint64_t blobs;      /* blobs/ names removed */
    uint64_t own_bytes;  /* their blocks in the user's cache (copies) */
    uint64_t held_bytes; /* bytes of hubd's store that links named */
} rm_stats_t;

/* Removes a snapshot folder's tree (links and folders), counting links. */
static void rm_tree(int at, const char *name, rm_stats_t *st)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        if (unlinkat(at, name, 0) == 0)
            st->files++;
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (!str_eq(e->d_name, ".") && !str_eq(e->d_name, ".."))
            rm_tree(dirfd(d), e->d_name, st);
    closedir(d);
    unlinkat(at, name, AT_REMOVEDIR);
}

/* Marks in `used` (names of blobs/) each blob a remaining snapshot links to. */
static void mark_used(int at, const char *name, char ***used, size_t *n)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        char to[PATH_MAX];
        if (fd >= 0)
            close(fd);
        ssize_t k = readlinkat(at, name, to, sizeof to - 1);
        if (k > 0) {
            to[k] = '\0';
            const char *base = strrchr(to, '/');
            *used = xrealloc(*used, (*n + 1) * sizeof **used);
            (*used)[(*n)++] = xstrdup(base ? base + 1 : to);
        }
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (!str_eq(e->d_name, ".") && !str_eq(e->d_name, ".."))
            mark_used(dirfd(d), e->d_name, used, n);
    closedir(d);
}

static int is_used(char **used, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (str_eq(used[i], name))
            return 1;
    return 0;
}

/* Reads refs/NAME (a commit, no newline) into out. */
static int read_ref(int repofd, const char *name, char out[64])
{
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "refs/%s", name);
    int fd = openat(repofd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t k = read(fd, out, 63);
    close(fd);
    if (k <= 0)
        return -EINVAL;
    out[k] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    return 0;
}

/* Every ref name under refs/ (refs/pr/1 is "refs/pr/1": nested), into names. */
static void list_refs(int at, const char *rel, const char *prefix, char ***names, size_t *n)
{
    int fd = openat(at, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (str_eq(e->d_name, ".") || str_eq(e->d_name, ".."))
            continue;
        char name[PATH_MAX];
        snprintf(name, sizeof name, "%s%s", prefix, e->d_name);
        if (e->d_type == DT_DIR) {
            char sub[PATH_MAX + 2];
            snprintf(sub, sizeof sub, "%s/", name);
            list_refs(dirfd(d), e->d_name, sub, names, n);
        } else {
            *names = xrealloc(*names, (*n + 1) * sizeof **names);
            (*names)[(*n)++] = xstrdup(name);
        }
    }
    closedir(d);
}

static int unhold_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    unsigned *pending = arg;
    close_fd(fd);
    if (str_eq(m->verb, "ERR"))
        fprintf(stderr, "hubctl: hf rm: UNHOLD: %s\n", out_get_or(m, "msg", "?"));
    return (str_eq(m->verb, "OK") || str_eq(m->verb, "ERR")) && --*pending == 0;
}

/* UNHOLD each label; a daemon that cannot be reached is said, not fatal:
 * the holds go anyway once hubd finds the links gone. */
static void unhold(const char *sock, char **labels, size_t n)
{
    if (!n)
        return;
    unsigned pending = (unsigned)n;
    conn_t *conn = conn_new(sock, 0, 1, unhold_on_msg, &pending);
    char line[PROTO_MAX_LINE];
    for (size_t i = 0; i < n; i++) {
        proto_writer_t w;
        char id[24];
        snprintf(id, sizeof id, "%zu", i + 1);
        proto_begin(&w, line, sizeof line, "UNHOLD");
        proto_add(&w, "id", id);
        proto_add(&w, "label", labels[i]);
        conn_queue_line(conn, &w);
    }
    if (conn_open(conn) == 0 && conn_run(conn) < 0)
        fputs("hubctl: hf rm: hubd did not answer UNHOLD: its holds go when it finds the links "
              "gone\n",
              stderr);
    conn_free(conn);
}

int hf_rm_main(int argc, char **argv)
{
    const char *sock = NULL, *repo = NULL, *type = "model", *rev = NULL, *given = NULL;
    for (int i = 1; i < argc; i++) {
        int s = socket_opt(argc, argv, &i, &sock);
        if (s < 0)
            return usage("--socket needs a path", NULL);
        if (s)
            continue;
        if (str_eq(argv[i], "--repo-type") && i + 1 < argc)
            type = argv[++i];
        else if (str_eq(argv[i], "--revision") && i + 1 < argc)
            rev = argv[++i];
        else if (str_eq(argv[i], "--cache-dir") && i + 1 < argc)
            given = argv[++i];
        else if (argv[i][0] != '-' && !repo)
            repo = argv[i];
        else
            return usage("hf rm takes REPO [--repo-type T] [--revision R] [--cache-dir DIR]",
                         argv[i]);
    }
    if (!repo || !*repo || strstr(repo, "..") || repo[0] == '/')
        return usage("hf rm needs a repo id (org/name)", repo);
    if (!str_eq(type, "model") && !str_eq(type, "dataset") && !str_eq(type, "space"))
        return usage("--repo-type is model, dataset or space", type);
    char root[PATH_MAX], folder[PATH_MAX];
    if (cache_dir(given, root, sizeof root))
        return usage("cannot tell the HF cache folder (no HOME)", NULL);
    size_t k = (size_t)snprintf(folder, sizeof folder, "%s/%ss--", root, type);
    for (const char *p = repo; *p && k + 3 < sizeof folder; p++)
        k += (size_t)snprintf(folder + k, sizeof folder - k, *p == '/' ? "--" : "%c", *p);
    int repofd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (repofd < 0) {
        fprintf(stderr, "hubctl: hf rm: %s: %s\n", folder, strerror(errno));
        return EXIT_FAILED;
    }
    /* Which commits go, and the refs naming them. */
    char **refs = NULL, **labels = NULL, **gone = NULL, **used = NULL;
    size_t nrefs = 0, nlabels = 0, ngone = 0, nused = 0;
    list_refs(repofd, "refs", "", &refs, &nrefs);
    char commit[64] = "";
    if (rev && read_ref(repofd, rev, commit) != 0)
        snprintf(commit, sizeof commit, "%s", rev); /* a commit itself */
    for (size_t i = 0; i < nrefs; i++) {
        char c[64];
        if (read_ref(repofd, refs[i], c) || (rev && !str_eq(c, commit)))
            continue;
        char rel[PATH_MAX];
        snprintf(rel, sizeof rel, "refs/%s", refs[i]);
        unlinkat(repofd, rel, 0);
        labels = xrealloc(labels, (nlabels + 1) * sizeof *labels);
        labels[nlabels] = xcalloc(1, strlen(type) + strlen(repo) + strlen(refs[i]) + 4);
        sprintf(labels[nlabels++], "%ss/%s@%s", type, repo, refs[i]);
    }
    rm_stats_t st = {0};
    int snapfd = openat(repofd, "snapshots", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = snapfd >= 0 ? fdopendir(snapfd) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (str_eq(e->d_name, ".") || str_eq(e->d_name, ".."))
            continue;
        if (rev && !str_eq(e->d_name, commit)) {
            mark_used(dirfd(d), e->d_name, &used, &nused); /* stays */
            continue;
        }
        rm_tree(dirfd(d), e->d_name, &st);
        gone = xrealloc(gone, (ngone + 1) * sizeof *gone);
        gone[ngone++] = xstrdup(e->d_name);
        labels = xrealloc(labels, (nlabels + 1) * sizeof *labels);
        labels[nlabels] = xcalloc(1, strlen(type) + strlen(repo) + strlen(e->d_name) + 4);
        sprintf(labels[nlabels++], "%ss/%s@%s", type, repo, e->d_name);
    }
    if (d)
        closedir(d);
    else if (snapfd >= 0)
        close(snapfd);
    /* Blobs no remaining snapshot links to. */
    int blobfd = openat(repofd, "blobs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = blobfd >= 0 ? fdopendir(blobfd) : NULL;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || is_used(used, nused, e->d_name))
            continue;
        struct stat ls, fs;
        if (fstatat(dirfd(d), e->d_name, &ls, AT_SYMLINK_NOFOLLOW))
            continue;
        if (S_ISLNK(ls.st_mode)) { /* into hubd's store: its bytes are hubd's */
            if (fstatat(dirfd(d), e->d_name, &fs, 0) == 0)
                st.held_bytes += (uint64_t)fs.st_size;
        } else {
            st.own_bytes += (uint64_t)ls.st_blocks * 512;
        }
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            st.blobs++;
    }
    if (d)
        closedir(d);
    else if (blobfd >= 0)
        close(blobfd);
    if (ngone &&
        (!rev || nused == 0)) { /* nothing left: the repo's folder goes, as hf cache rm does */
        close(repofd);
        repofd = -1;
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            rm_stats_t none = {0};
            rm_tree(fd, strrchr(folder, '/') + 1, &none);
            close(fd);
        }
    }
    if (repofd >= 0)
        close(repofd);
    unhold(sock, labels, nlabels);
    char b1[32], b2[32];
    printf("removed %zu snapshot(s) of %s (%llu file(s), %llu blob(s)): %s freed in your cache, "
           "%s of hubd's store released\n",
           ngone, repo, (unsigned long long)st.files, (unsigned long long)st.blobs,
           out_bytes(st.own_bytes, b1, sizeof b1), out_bytes(st.held_bytes, b2, sizeof b2));
    for (size_t i = 0; i < nrefs; i++)
        free(refs[i]);
    for (size_t i = 0; i < nlabels; i++)
        free(labels[i]);
    for (size_t i = 0; i < ngone; i++)
        free(gone[i]);
    for (size_t i = 0; i < nused; i++)
        free(used[i]);
    free(refs);
    free(labels);
    free(gone);
    free(used);
    return ngone || nlabels ? EXIT_OK : EXIT_FAILED;
}
