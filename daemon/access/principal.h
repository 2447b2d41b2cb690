/* principal: who a client is, and what that lets it do.
 *
 * A principal is a uid, the gids it is known by, and how hubd learned them
 * (the way in fills it once, when the client arrives; nothing here reads a
 * socket). Access control takes a principal: who may connect at all
 * (allow_users, allow_groups) and who may administer the cache (root, hubd's
 * own uid, admin_group). The lists are looked up by name when loaded (start,
 * SIGHUP), never per request: NSS may block. A Unix socket peer's groups
 * are its process's own, as the kernel gives them at connect
 * (SO_PEERGROUPS): a user added to a group and logged in again is in it at
 * once, one removed is out at once, without a SIGHUP.
 *
 * Loop thread only. A principal_acl_t starts zeroed (empty) and is freed
 * with principal_acl_free. */
#ifndef HUBD_PRINCIPAL_H
#define HUBD_PRINCIPAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

#define PRINCIPAL_MAX_GIDS 64

/* How a principal was learned. */
typedef enum {
    PRINCIPAL_PEERCRED, /* the kernel's SO_PEERCRED of a Unix socket: uid, primary gid, pid */
    PRINCIPAL_TCP_DIAG, /* a loopback TCP peer's socket owner (peeruid), its groups by NSS */
} principal_source_t;

typedef struct principal {
    uid_t uid;
    uid_t charged; /* whose per-user bounds it counts against: uid, or the user whose
                      subordinate uids (subuid_file) hold it (principal_charge) */
    gid_t gids[PRINCIPAL_MAX_GIDS]; /* the groups known for it; SO_PEERCRED gives the primary */
    unsigned ngids;                 /* how many of gids are set (0: none known) */
    int groups_exact; /* gids are all the peer's groups: a group's listed members do not count */
    pid_t pid;        /* the peer process, for logs; 0 when unknown */
    principal_source_t source;
} principal_t;

/* Fills p from SO_PEERCRED's answer, and the n supplementary groups of
 * SO_PEERGROUPS (groups NULL: unknown, then a group's listed members
 * count as in it). */
void principal_from_peercred(principal_t *p, uid_t uid, gid_t gid, pid_t pid, const gid_t *groups,
                             unsigned n);

/* Fills p for a loopback TCP peer: the uid owning its socket and the n gids
 * peeruid_groups found (primary first; beyond PRINCIPAL_MAX_GIDS left out,
 * which can only refuse). No pid: a socket's owner is a uid, not a process. */
void principal_from_tcp(principal_t *p, uid_t uid, const gid_t *gids, unsigned n);

/* Its first known gid (the primary one from SO_PEERCRED), or (gid_t)-1. */
gid_t principal_gid(const principal_t *p);

/* A set of principals: groups (by gid, and their listed members by uid)
 * and users by uid. */
typedef struct principal_set {
    gid_t *gids;
    size_t ngids;
    uid_t *uids; /* users named */
    size_t nuids;
    uid_t *members; /* the groups' listed members, when loaded */
    size_t nmembers;
} principal_set_t;

/* 1 when p's uid, or one of its gids, is in the set; a group's listed
 * members count only when p's groups are not known exactly. */
int principal_set_has(const principal_set_t *set, const principal_t *p);

/* Who the Unix socket's file lets connect: its owner, group and mode. */
typedef struct principal_node {
    int known; /* 0: the file could not be read: only root, hubd and admins */
    uid_t uid;
    gid_t gid;
    mode_t mode;
    char group[64]; /* its group's name, for messages ("" when unknown) */
} principal_node_t;

/* A range of subordinate uids and the user they were given to. */
typedef struct principal_subuids {
    uid_t owner;
    uid_t start;
    uint64_t count;
} principal_subuids_t;
#define PRINCIPAL_MAX_SUBUID_RANGES 4096 /* read from subuid_file; the rest are ignored */

/* Access control, from the configuration. */
typedef struct principal_acl {
    principal_set_t admins;       /* admin_group: its gid and its listed members */
    principal_set_t allowed;      /* allow_users and allow_groups */
    int restricted;               /* allow_users or allow_groups is set */
    principal_node_t node;        /* the Unix socket's file, for the HTTP front */
    principal_subuids_t *subuids; /* subuid_file's ranges */
    size_t nsubuids;
} principal_acl_t;

/* (Re)loads the lists from cfg (replacing what was loaded); unknown names
 * are logged and left out. */
void principal_acl_load(principal_acl_t *acl, const hubd_config_t *cfg);
void principal_acl_free(principal_acl_t *acl);

/* Sets p->charged: the user a subordinate range (subuid_file, as
 * newuidmap grants them) gives p's uid to, else p's uid. A user with
 * 65,536 subordinate uids can connect as each of them (a user namespace
 * keeps its groups); each is that user for every per-user bound, so the
 * bounds are per person, not per uid. */
void principal_charge(const principal_acl_t *acl, principal_t *p);

/* Whether p may connect: anyone when unrestricted; else root, hubd's own
 * uid, and the allowed users and groups. */
int principal_may_connect(const principal_acl_t *acl, const principal_t *p);

/* Whether p may use the HTTP front. With allow_users or allow_groups set,
 * they decide (as for the socket). Without, the front admits the users the
 * Unix socket's file admits (its owner, its group's members, anyone when
 * it is world-writable), the admins, root and hubd's own uid: a port on
 * 127.0.0.1 must not open the cache to every local user when the socket
 * (0660 hubd:hubd in the package) does not. */
int principal_may_use_front(const principal_acl_t *acl, const principal_t *p);

/* Whether p may use the admin verbs: root, hubd's own uid (a per-user
 * daemon's owner) or the admin group. */
int principal_is_admin(const principal_acl_t *acl, const principal_t *p);

#endif
