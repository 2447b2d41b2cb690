/* hf_holds: `hubctl hf ls` and `hubctl hf rm`. */
#include "hf_holds.h"

#include "conn.h"
#include "help.h"
#include "hf_cli.h"
#include "hf_env.h"
#include "hf_dir.h"
#include "hf_layout.h"
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

/* One HOLDREC, kept until END: the table's columns fit its widest cells. */
typedef struct ls_row {
    char uid[24];
    char user[64]; /* the uid's name, or the number */
    char *label;   /* cleaned: no control bytes */
    char files[24];
    char size[32]; /* human-readable */
} ls_row_t;

typedef struct ls {
    int json;
    unsigned n; /* HOLDREC lines */
    ls_row_t *rows;
    int rc;
} ls_t;

static size_t width(size_t w, const char *s)
{
    size_t n = strlen(s);
    return n > w ? n : w;
}

/* The text table, once every row is in: each column as wide as its widest
 * cell (a long repo name or size moves the columns after it, all rows
 * alike). */
static void ls_table(const ls_t *l)
{
    size_t wu = strlen("USER"), wl = strlen("REPO@REVISION"), wf = strlen("FILES"),
           ws = strlen("SIZE");
    for (unsigned i = 0; i < l->n; i++) {
        wu = width(wu, l->rows[i].user);
        wl = width(wl, l->rows[i].label);
        wf = width(wf, l->rows[i].files);
        ws = width(ws, l->rows[i].size);
    }
    printf("%-*s  %-*s  %*s  %*s\n", (int)wu, "USER", (int)wl, "REPO@REVISION", (int)wf, "FILES",
           (int)ws, "SIZE");
    for (unsigned i = 0; i < l->n; i++)
        printf("%-*s  %-*s  %*s  %*s\n", (int)wu, l->rows[i].user, (int)wl, l->rows[i].label,
               (int)wf, l->rows[i].files, (int)ws, l->rows[i].size);
}

/* A label "{type}s/{repo}@{revision}", its user named as status does. */
static void ls_line(ls_t *l, const proto_msg_t *m)
{
    const char *uid = out_get_or(m, "uid", "?");
    char user[64];
    out_user_names(uid, user, sizeof user);
    if (l->json) {
        fputs(l->n ? "," : "[", stdout);
        fprintf(stdout, "{\"uid\":%s,\"user\":", parse_u64(uid, &(uint64_t){0}) ? "null" : uid);
        json_str(stdout, user);
        fputs(",\"label\":", stdout);
        json_str(stdout, out_get_or(m, "label", "?"));
        fprintf(stdout, ",\"files\":%s,\"size\":%s}", out_get_or(m, "files", "0"),
                out_get_or(m, "size", "0"));
        l->n++;
        return;
    }
    l->rows = xrealloc(l->rows, (l->n + 1) * sizeof *l->rows);
    ls_row_t *r = &l->rows[l->n++];
    snprintf(r->uid, sizeof r->uid, "%s", uid);
    char *clean = out_clean_copy(user);
    snprintf(r->user, sizeof r->user, "%s", clean);
    free(clean);
    r->label = out_clean_copy(out_get_or(m, "label", "?"));
    clean = out_clean_copy(out_get_or(m, "files", "?"));
    snprintf(r->files, sizeof r->files, "%s", clean);
    free(clean);
    out_field_bytes(m, "size", r->size, sizeof r->size);
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
    else
        ls_table(l);
    if (str_eq(out_get_or(m, "truncated", "0"), "1"))
        fputs("hubctl: hf ls: more holds than one listing shows: ask per user (--uid N)\n", stderr);
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
        if (str_eq(argv[i], "-h") || str_eq(argv[i], "--help"))
            return help_print("hf ls") ? EXIT_USAGE : EXIT_OK;
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
    if (all) /* everyone's: hubd refuses it to a non-admin (an older one ignores all=) */
        proto_add(&w, "all", "1");
    else
        proto_add(&w, "uid", uid ? uid : mine);
    int rc = conn_queue_line(conn, &w) ? EXIT_USAGE : conn_open(conn);
    int err = rc == 0 ? conn_run(conn) : 0;
    if (err < 0)
        rc = conn_report(conn, err);
    else if (rc == 0)
        rc = l.rc;
    conn_free(conn);
    for (unsigned i = 0; i < l.n && l.rows; i++)
        free(l.rows[i].label);
    free(l.rows);
    return rc;
}

/* ---- hf rm ---------------------------------------------------------------- */

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

/* The folder of l's repo folder holding rel's last name (refs/pr/1: the
 * folder refs/pr), walked by hf_dir from the cache folder named: a link or
 * another user's folder on the way is refused, so nothing outside the
 * cache is read as a ref or removed. *base: that name. */
static int repo_parent(const hf_layout_t *l, const char *rel, char path[PATH_MAX],
                       const char **base)
{
    hf_dir_refusal_t why;
    if (snprintf(path, PATH_MAX, "%s%s", l->below, rel) >= PATH_MAX)
        return -ENAMETOOLONG;
    return hf_dir_open_parent(l->top, path, 0, &why, base);
}

/* repo_parent of refs/NAME: the folder holding the ref, *base its name in
 * path (the caller's buffer, which base points into). */
static int ref_parent(const hf_layout_t *l, const char *name, char path[PATH_MAX],
                      const char **base)
{
    char rel[PATH_MAX];
    if (snprintf(rel, sizeof rel, "refs/%s", name) >= (int)sizeof rel)
        return -ENAMETOOLONG;
    return repo_parent(l, rel, path, base);
}

/* Reads refs/NAME (a commit, no newline) into out. */
static int read_ref(const hf_layout_t *l, const char *name, char out[64])
{
    char path[PATH_MAX];
    const char *base;
    int dirfd = ref_parent(l, name, path, &base);
    if (dirfd < 0)
        return dirfd;
    int fd = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    close(dirfd);
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

/* Removes refs/NAME; 0 or -errno. */
static int unlink_ref(const hf_layout_t *l, const char *name)
{
    char path[PATH_MAX];
    const char *base;
    int dirfd = ref_parent(l, name, path, &base);
    if (dirfd < 0)
        return dirfd;
    int rc = unlinkat(dirfd, base, 0) < 0 ? -errno : 0;
    close(dirfd);
    return rc;
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

/* Adds a copy of s to a list unless it is in it. */
static void add_once(char ***list, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (str_eq((*list)[i], s))
            return;
    *list = xrealloc(*list, (*n + 1) * sizeof **list);
    (*list)[(*n)++] = xstrdup(s);
}

static void free_list(char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/* The UNHOLDs of the blob links removed: each (label, link) pair, at most
 * UNHOLD_WINDOW out at once (hubd's pool takes 64 a session). */
#define UNHOLD_WINDOW 32

typedef struct unhold {
    conn_t *conn;
    char **labels, **links;
    size_t nlabels, nlinks;
    size_t next, answered, total; /* pairs sent, answered, in all */
    uint64_t released;            /* OK's released= summed */
    int told;                     /* an ERR was said */
} unhold_t;

static void unhold_send(unhold_t *u)
{
    char line[PROTO_MAX_LINE], id[24];
    for (; u->next < u->total && u->next - u->answered < UNHOLD_WINDOW; u->next++) {
        proto_writer_t w;
        snprintf(id, sizeof id, "%zu", u->next);
        proto_begin(&w, line, sizeof line, "UNHOLD");
        proto_add(&w, "id", id);
        proto_add(&w, "label", u->labels[u->next / u->nlinks]);
        proto_add(&w, "link", u->links[u->next % u->nlinks]);
        if (conn_queue_line(u->conn, &w) < 0)
            u->answered++; /* too long for a line: no hold can name it */
    }
}

static int unhold_on_msg(void *arg, const proto_msg_t *m, int fd)
{
    unhold_t *u = arg;
    uint64_t n;
    close_fd(fd);
    if (!str_eq(m->verb, "OK") && !str_eq(m->verb, "ERR"))
        return 0;
    if (str_eq(m->verb, "OK") && parse_u64(proto_get(m, "released"), &n) == 0)
        u->released += n;
    if (str_eq(m->verb, "ERR") && !u->told++) {
        fputs("hubctl: hf rm: UNHOLD: ", stderr);
        out_reason(stderr, out_get_or(m, "code", "error"), out_get_or(m, "msg", ""));
    }
    u->answered++;
    unhold_send(u);
    return u->answered >= u->total;
}

/* Releases the holds of the blob links removed, whatever label of the repo
 * they were made for: `UNHOLD label= link=` touches no other link's hold
 * (another HF cache's, or a blob link that stays). A daemon that cannot be
 * reached is said, not fatal: the holds go once hubd finds the links gone. */
static void unhold(const char *sock, char **labels, size_t nlabels, char **links, size_t nlinks)
{
    unhold_t u = {.labels = labels, .links = links, .nlabels = nlabels, .nlinks = nlinks};
    u.total = nlabels * nlinks;
    if (!u.total)
        return;
    u.conn = conn_new(sock, 0, 1, unhold_on_msg, &u);
    unhold_send(&u);
    if (u.answered < u.total && conn_open(u.conn) == 0 && conn_run(u.conn) < 0)
        fputs("hubctl: hf rm: hubd did not answer UNHOLD: its holds go when it finds the links "
              "gone\n",
              stderr);
    conn_free(u.conn);
}

/* The label HOLD gave a revision: {type}s/{repo}@{rev}. Malloc'd. */
static char *label_of(const char *type, const char *repo, const char *rev)
{
    char *l = xcalloc(1, strlen(type) + strlen(repo) + strlen(rev) + 4);
    sprintf(l, "%ss/%s@%s", type, repo, rev);
    return l;
}

/* The folders hf rm removes in: the repo folder, its refs/, snapshots/
 * and blobs/ (-1 when missing), each walked by hf_dir from the cache
 * folder named. 0, or says which was refused (or why the repo folder
 * cannot be opened) and returns EXIT_FAILED with nothing removed. */
enum { RM_REPO, RM_REFS, RM_SNAPSHOTS, RM_BLOBS, RM_FOLDERS };

static int rm_open(const hf_layout_t *l, int fds[RM_FOLDERS])
{
    static const char *const sub[RM_FOLDERS] = {"", "refs", "snapshots", "blobs"};
    char rel[PATH_MAX], why[PATH_MAX + 200];
    hf_dir_refusal_t refused;
    for (int i = 0; i < RM_FOLDERS; i++)
        fds[i] = -1;
    for (int i = 0; i < RM_FOLDERS; i++) {
        snprintf(rel, sizeof rel, "%s%s", l->below, sub[i]);
        if (i == RM_REPO)
            rel[strlen(rel) - 1] = '\0'; /* "{type}s--{org}--{name}" */
        int fd = hf_dir_open(l->top, rel, 0, &refused);
        if (fd >= 0 || (i != RM_REPO && fd == -ENOENT)) {
            fds[i] = fd >= 0 ? fd : -1;
            continue;
        }
        if (refused.err)
            fprintf(stderr, "hubctl: hf rm: %s\n", hf_dir_explain(&refused, why, sizeof why));
        else
            fprintf(stderr, "hubctl: hf rm: %s%s%s: %s\n", l->root, *sub[i] ? "/" : "", sub[i],
                    strerror(-fd));
        for (int k = 0; k < i; k++)
            close_fd(fds[k]);
        return EXIT_FAILED;
    }
    return 0;
}

/* Removes from l's repo folder (in the HF cache folder) the snapshots of
 * rev (NULL: all), the refs naming them and the blobs no snapshot left
 * links to; then UNHOLDs the blob links removed. Returns the exit code. */
static int rm_repo(const char *sock, const hf_layout_t *l, const char *type, const char *repo,
                   const char *rev)
{
    const char *folder = l->root;
    int fds[RM_FOLDERS];
    if (rm_open(l, fds) != 0)
        return EXIT_FAILED;
    int repofd = fds[RM_REPO];
    close_fd(fds[RM_REFS]); /* checked; each ref is walked to again */
    /* Which commits go, and the refs naming them. Every ref and snapshot
     * names a label a blob link may be held for. */
    char **refs = NULL, **labels = NULL, **links = NULL, **used = NULL;
    size_t nrefs = 0, nlabels = 0, nlinks = 0, nused = 0, ngone = 0, nrefs_gone = 0;
    list_refs(repofd, "refs", "", &refs, &nrefs);
    char commit[64] = "";
    if (rev && read_ref(l, rev, commit) != 0)
        snprintf(commit, sizeof commit, "%s", rev); /* a commit itself */
    for (size_t i = 0; i < nrefs; i++) {
        char c[64], *label = label_of(type, repo, refs[i]);
        add_once(&labels, &nlabels, label);
        free(label);
        if (read_ref(l, refs[i], c) || (rev && !str_eq(c, commit)))
            continue;
        if (unlink_ref(l, refs[i]) == 0)
            nrefs_gone++;
    }
    rm_stats_t st = {0};
    int snapfd = fds[RM_SNAPSHOTS];
    DIR *d = snapfd >= 0 ? fdopendir(snapfd) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (str_eq(e->d_name, ".") || str_eq(e->d_name, ".."))
            continue;
        char *label = label_of(type, repo, e->d_name);
        add_once(&labels, &nlabels, label);
        free(label);
        if (rev && !str_eq(e->d_name, commit)) {
            mark_used(dirfd(d), e->d_name, &used, &nused); /* stays */
            continue;
        }
        rm_tree(dirfd(d), e->d_name, &st);
        ngone++;
    }
    if (d)
        closedir(d);
    else if (snapfd >= 0)
        close(snapfd);
    /* Blobs no remaining snapshot links to. */
    int blobfd = fds[RM_BLOBS];
    d = blobfd >= 0 ? fdopendir(blobfd) : NULL;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || is_used(used, nused, e->d_name))
            continue;
        struct stat ls, fs;
        if (fstatat(dirfd(d), e->d_name, &ls, AT_SYMLINK_NOFOLLOW))
            continue;
        int link = S_ISLNK(ls.st_mode);
        if (link) { /* into hubd's store: its bytes are hubd's */
            if (fstatat(dirfd(d), e->d_name, &fs, 0) == 0)
                st.held_bytes += (uint64_t)fs.st_size;
        } else {
            st.own_bytes += (uint64_t)ls.st_blocks * 512;
        }
        if (unlinkat(dirfd(d), e->d_name, 0) < 0)
            continue;
        st.blobs++;
        if (link) { /* the link a hold names */
            links = xrealloc(links, (nlinks + 1) * sizeof *links);
            links[nlinks] = xcalloc(1, strlen(folder) + strlen(e->d_name) + 8);
            sprintf(links[nlinks++], "%s/blobs/%s", folder, e->d_name);
        }
    }
    if (d)
        closedir(d);
    else if (blobfd >= 0)
        close(blobfd);
    if (ngone &&
        (!rev || nused == 0)) { /* nothing left: the repo's folder goes, as hf cache rm does */
        close(repofd);
        repofd = -1;
        hf_dir_refusal_t refused;
        int fd = hf_dir_open(l->top, "", 0, &refused);
        if (fd >= 0) { /* the repo folder is a name in it: rm_tree follows no link */
            rm_stats_t none = {0};
            rm_tree(fd, strrchr(folder, '/') + 1, &none);
            close(fd);
        }
    }
    if (repofd >= 0)
        close(repofd);
    unhold(sock, labels, nlabels, links, nlinks);
    char b1[32], b2[32];
    printf("removed %zu snapshot(s) of %s (%llu file(s), %llu blob(s)): %s freed in your cache, "
           "%s of hubd's store released\n",
           ngone, repo, (unsigned long long)st.files, (unsigned long long)st.blobs,
           out_bytes(st.own_bytes, b1, sizeof b1), out_bytes(st.held_bytes, b2, sizeof b2));
    free_list(refs, nrefs);
    free_list(labels, nlabels);
    free_list(links, nlinks);
    free_list(used, nused);
    return ngone || nrefs_gone ? EXIT_OK : EXIT_FAILED;
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
        if (str_eq(argv[i], "-h") || str_eq(argv[i], "--help"))
            return help_print("hf rm") ? EXIT_USAGE : EXIT_OK;
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
    if (!repo || !hf_repo_id_ok(repo))
        return usage("hf rm needs a Hub repo id (org/name or name)", repo);
    if (!str_eq(type, "model") && !str_eq(type, "dataset") && !str_eq(type, "space"))
        return usage("--repo-type is model, dataset or space", type);
    if (rev && !hf_path_safe(rev))
        return usage("--revision is a plain relative name (a branch, tag or commit)", rev);
    char *root = hf_find_cache_dir(given);
    hf_layout_t layout;
    hf_layout_init(&layout, root, NULL, type, repo);
    int rc = rm_repo(sock, &layout, type, repo, rev);
    hf_layout_free(&layout);
    free(root);
    return rc;
}
