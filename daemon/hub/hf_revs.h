/* hf_revs: which commit the Hub last named for a repo's revision, kept in
 * hubd.db (db_rev_note, db_rev_find), so that the HTTP front can answer a
 * resolve URL that names a branch or a tag from the cache when the Hub
 * cannot be reached, after a restart too: huggingface_hub reads
 * refs/{revision} in its own cache then, and a client of the front (curl,
 * @huggingface/hub's downloadFile) has no cache of its own.
 *
 * Noted per credential tag and uid: a look-up by a client with a token
 * reads what the Hub told that token, else what it told a client without
 * one; never another token's answer. Each uid keeps at most
 * HF_REVS_PER_UID rows (its oldest go). A note is written only when the
 * commit differs from the one last noted for the same (repo, revision,
 * tag, uid), or that was an hour ago, so a busy front writes nothing most
 * of the time; at most HF_REVS_INFLIGHT notes are in the pool at once
 * (more are dropped: a note is only what a later outage may use).
 *
 * Loop thread only. Each pool item is the shutdown's business
 * (worktrack): hf_revs_free may come first, the items still finish. */
#ifndef HUBD_HF_REVS_H
#define HUBD_HF_REVS_H

#include "db.h"
#include "worktrack.h"

#include <sys/types.h>
#include <uv.h>

#define HF_REVS_PER_UID 4096
#define HF_REVS_INFLIGHT 16

typedef struct hf_revs hf_revs_t;

int hf_revs_new(uv_loop_t *loop, worktrack_t *work, db_t *db, hf_revs_t **out);
void hf_revs_free(hf_revs_t *r);

/* The Hub named commit (40 hex) for revision rev of repo ("prefix
 * org/name", hf_where_t's parts) to credential tag ("": none), asked by
 * uid. A revision that is itself a commit is not noted. */
void hf_revs_note(hf_revs_t *r, const char *repo, const char *rev, const char *tag, uid_t uid,
                  const char *commit);

/* The commit to serve rev of repo from when the Hub cannot be asked: rev
 * itself when it is a commit (40 lower-case hex), else the one last noted
 * for tag, else for no credentials. 0, or -ENOENT. */
int hf_revs_find(hf_revs_t *r, const char *repo, const char *rev, const char *tag, char commit[41]);

#endif
