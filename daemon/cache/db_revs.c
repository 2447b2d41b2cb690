/* db_revs: the commit the Hub last named for a repo's revision (schema v8),
 * by credential tag, so that the HTTP front can still answer a resolve URL
 * that names a branch or tag from the cache when the Hub cannot be reached,
 * as huggingface_hub reads refs/{revision} in its own cache then. The note
 * runs in the pool (writer), the look-up on the loop (reader). */
#include "db_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

int db_rev_note(db_t *db, const char *repo, const char *rev, const char *cred_tag,
                const char *commit, uid_t uid, unsigned per_uid)
{
    int rc = db_tx_begin(db->wr);
    if (rc) /* no transaction, and the writer's lock was let go */
        return rc;
    rc = db_exec(db->wr,
                 "INSERT INTO hf_revs (repo, rev, cred_tag, commit_id, uid, seen)"
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (repo, rev, cred_tag) DO UPDATE"
                 " SET commit_id = excluded.commit_id, uid = excluded.uid, seen = excluded.seen",
                 "ttttii", repo, rev, cred_tag, commit, (int64_t)uid, (int64_t)time(NULL));
    /* A uid's notes beyond its share go, its oldest first: one user asking
     * many revisions cannot push out what the others' outages would need. */
    if (!rc)
        rc = db_exec(db->wr,
                     "DELETE FROM hf_revs WHERE uid = ?1 AND (seen, repo, rev, cred_tag) <="
                     " (SELECT seen, repo, rev, cred_tag FROM hf_revs WHERE uid = ?1"
                     " ORDER BY seen DESC, repo DESC, rev DESC, cred_tag DESC LIMIT 1 OFFSET ?2)",
                     "ii", (int64_t)uid, (int64_t)per_uid);
    return db_tx_end(db->wr, rc);
}

int db_rev_find(db_t *db, const char *repo, const char *rev, const char *cred_tag,
                char commit_out[41])
{
    sqlite3_stmt *st = db->find_rev;
    sqlite3_bind_text(st, 1, repo, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, rev, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, cred_tag, -1, SQLITE_STATIC);
    int rc = -ENOENT;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (t && strlen((const char *)t) == 40) {
            memcpy(commit_out, t, 41);
            rc = 0;
        }
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}
