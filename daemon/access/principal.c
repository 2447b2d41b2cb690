/* principal: identities, sets of them, and the access decisions. */
#include "principal.h"
#include "log.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void principal_from_peercred(principal_t *p, uid_t uid, gid_t gid, pid_t pid, const gid_t *groups,
                             unsigned n)
{
    memset(p, 0, sizeof *p);
    p->uid = p->charged = uid;
    p->gids[0] = gid;
    p->ngids = 1;
    p->pid = pid;
    p->source = PRINCIPAL_PEERCRED;
    if (!groups || n >= PRINCIPAL_MAX_GIDS)
        return; /* unknown, or more than fit: the listed members count too */
    for (unsigned i = 0; i < n; i++)
        if (groups[i] != gid)
            p->gids[p->ngids++] = groups[i];
    p->groups_exact = 1;
}

void principal_from_tcp(principal_t *p, uid_t uid, const gid_t *gids, unsigned n)
{
    memset(p, 0, sizeof *p);
    p->uid = p->charged = uid;
    p->ngids = n < PRINCIPAL_MAX_GIDS ? n : PRINCIPAL_MAX_GIDS;
    if (p->ngids) /* gids may be NULL with n 0: memcpy's arguments may not */
        memcpy(p->gids, gids, p->ngids * sizeof *gids);
    p->pid = 0;
    p->source = PRINCIPAL_TCP_DIAG;
}

gid_t principal_gid(const principal_t *p)
{
    return p->ngids ? p->gids[0] : (gid_t)-1;
}

/* ---- sets ------------------------------------------------------------------ */

int principal_set_has(const principal_set_t *set, const principal_t *p)
{
    for (size_t i = 0; i < set->ngids; i++)
        for (unsigned j = 0; j < p->ngids; j++)
            if (set->gids[i] == p->gids[j])
                return 1;
    for (size_t i = 0; i < set->nuids; i++)
        if (set->uids[i] == p->uid)
            return 1;
    for (size_t i = 0; !p->groups_exact && i < set->nmembers; i++)
        if (set->members[i] == p->uid)
            return 1;
    return 0;
}

static void set_free(principal_set_t *set)
{
    free(set->gids);
    free(set->uids);
    free(set->members);
    memset(set, 0, sizeof *set);
}

static void add_uid(uid_t **v, size_t *n, uid_t uid)
{
    uid_t *w = realloc(*v, (*n + 1) * sizeof *w);
    if (w) {
        *v = w;
        w[(*n)++] = uid;
    }
}

static void set_add_uid(principal_set_t *set, uid_t uid)
{
    add_uid(&set->uids, &set->nuids, uid);
}

/* A group: its gid (a peer's primary group) and its listed members. */
static int set_add_group(principal_set_t *set, const char *name)
{
    struct group *g = getgrnam(name);
    if (!g)
        return -ENOENT;
    gid_t *v = realloc(set->gids, (set->ngids + 1) * sizeof *v);
    if (v) {
        set->gids = v;
        set->gids[set->ngids++] = g->gr_gid;
    }
    size_t n = 0;
    while (g->gr_mem[n])
        n++;
    char **names = calloc(n + 1, sizeof *names); /* getpwnam may reuse getgrnam's buffer */
    for (size_t i = 0; names && i < n; i++)
        names[i] = strdup(g->gr_mem[i]);
    for (size_t i = 0; names && i < n; i++) {
        struct passwd *pw = names[i] ? getpwnam(names[i]) : NULL;
        if (pw)
            add_uid(&set->members, &set->nmembers, pw->pw_uid);
        free(names[i]);
    }
    free(names);
    return 0;
}

/* A user: a name, or a numeric uid. */
static int set_add_user(principal_set_t *set, const char *name)
{
    char *end;
    unsigned long v = strtoul(name, &end, 10);
    if (*name && !*end) {
        set_add_uid(set, (uid_t)v);
        return 0;
    }
    struct passwd *pw = getpwnam(name);
    if (!pw)
        return -ENOENT;
    set_add_uid(set, pw->pw_uid);
    return 0;
}

/* Each name of a comma-separated list into the set; unknown ones logged. */
static void set_add_list(principal_set_t *set, const char *list, int groups, const char *key)
{
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ,");
        size_t n = strcspn(p, " ,");
        if (n) {
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)n, p);
            if ((groups ? set_add_group(set, name) : set_add_user(set, name)) != 0)
                log_warn("%s: no such %s '%s'", key, groups ? "group" : "user", name);
        }
        p += n;
    }
}

/* ---- access control ---------------------------------------------------------- */

void principal_acl_free(principal_acl_t *acl)
{
    set_free(&acl->admins);
    set_free(&acl->allowed);
    acl->restricted = 0;
    free(acl->subuids);
    acl->subuids = NULL;
    acl->nsubuids = 0;
}

/* One "owner:start:count" line of subuid_file (owner a name or a uid)
 * into *r: 0, or -1 for another line (a comment, a name NSS does not
 * know). */
static int subuid_line(char *line, principal_subuids_t *r)
{
    char *start = strchr(line, ':'), *count = start ? strchr(start + 1, ':') : NULL, *end;
    if (!start || !count || line[0] == '#')
        return -1;
    *start++ = '\0';
    *count++ = '\0';
    errno = 0;
    unsigned long long s = strtoull(start, &end, 10), n;
    if (errno || end == start || *end || s > UINT32_MAX)
        return -1;
    n = strtoull(count, &end, 10);
    if (errno || end == count || (*end && *end != '\n') || n == 0)
        return -1;
    unsigned long long id = strtoull(line, &end, 10);
    if (!*end && end != line && id <= UINT32_MAX) {
        r->owner = (uid_t)id;
    } else {
        struct passwd *pw = getpwnam(line);
        if (!pw)
            return -1;
        r->owner = pw->pw_uid;
    }
    r->start = (uid_t)s;
    r->count = n;
    return 0;
}

/* subuid_file's ranges; a file that cannot be read gives none. */
static void load_subuids(principal_acl_t *acl, const char *path)
{
    FILE *f = path && *path ? fopen(path, "re") : NULL;
    if (!f)
        return;
    char line[512];
    principal_subuids_t r;
    while (fgets(line, sizeof line, f) && acl->nsubuids < PRINCIPAL_MAX_SUBUID_RANGES) {
        if (subuid_line(line, &r))
            continue;
        principal_subuids_t *v = realloc(acl->subuids, (acl->nsubuids + 1) * sizeof *v);
        if (!v)
            break;
        acl->subuids = v;
        acl->subuids[acl->nsubuids++] = r;
    }
    fclose(f);
}

void principal_charge(const principal_acl_t *acl, principal_t *p)
{
    p->charged = p->uid;
    for (size_t i = 0; i < acl->nsubuids; i++) {
        const principal_subuids_t *r = &acl->subuids[i];
        if (p->uid >= r->start && (uint64_t)(p->uid - r->start) < r->count) {
            p->charged = r->owner;
            return;
        }
    }
}

void principal_acl_load(principal_acl_t *acl, const hubd_config_t *cfg)
{
    principal_acl_free(acl);
    if (cfg->admin_group && set_add_group(&acl->admins, cfg->admin_group) != 0)
        log_warn("admin group %s does not exist: only root (and hubd's own user) may "
                 "administer the cache",
                 cfg->admin_group);
    set_add_list(&acl->allowed, cfg->allow_users, 0, "allow_users");
    set_add_list(&acl->allowed, cfg->allow_groups, 1, "allow_groups");
    acl->restricted =
        (cfg->allow_users && *cfg->allow_users) || (cfg->allow_groups && *cfg->allow_groups);
    load_subuids(acl, cfg->subuid_file);
}

/* Root and hubd's own uid are never refused and always administer. */
static int is_superuser(const principal_t *p)
{
    return p->uid == 0 || p->uid == geteuid();
}

int principal_may_connect(const principal_acl_t *acl, const principal_t *p)
{
    return !acl->restricted || is_superuser(p) || principal_set_has(&acl->allowed, p);
}

/* Whether p's known groups include gid (a group's listed members are not
 * looked up here: the node's group is judged by the peer's own groups). */
static int has_gid(const principal_t *p, gid_t gid)
{
    for (unsigned i = 0; i < p->ngids; i++)
        if (p->gids[i] == gid)
            return 1;
    return 0;
}

/* Whether the socket file's mode lets p connect (connect(2) needs write). */
static int node_admits(const principal_node_t *n, const principal_t *p)
{
    if (!n->known)
        return 0;
    if (p->uid == n->uid)
        return (n->mode & S_IWUSR) != 0;
    if (has_gid(p, n->gid))
        return (n->mode & S_IWGRP) != 0;
    return (n->mode & S_IWOTH) != 0;
}

int principal_may_use_front(const principal_acl_t *acl, const principal_t *p)
{
    if (acl->restricted)
        return principal_may_connect(acl, p);
    return is_superuser(p) || principal_set_has(&acl->admins, p) || node_admits(&acl->node, p);
}

int principal_is_admin(const principal_acl_t *acl, const principal_t *p)
{
    return is_superuser(p) || principal_set_has(&acl->admins, p);
}
