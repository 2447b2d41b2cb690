/* db_memo: the loop's look-ups of a hit (db_find_blob_stat and
 * db_find_entry_meta), remembered until a commit changes a row they read.
 *
 * Each look-up on the loop's reader is a read transaction of its own, and
 * SQLite takes and drops its WAL read locks with fcntl calls: 2-3 system
 * calls and a page read or two a hit, where the kernel charges this
 * machine's virtualisation 2-3 us each: a hit is answered from memory
 * where that is safe.
 *
 * Safe means never older than the database. Every change that a look-up
 * could see goes through the writer connection (db.c opens the others
 * read-only in all but name: no statement on them writes), and TEMP
 * triggers on it call hubd_lookups_changed() for each row inserted,
 * deleted or updated to another value in a column that the look-ups read
 * (an update to the same value leaves every answer as it was: the
 * background verifier records a blob's unchanged identity every few ms,
 * and undid the whole memo each time). The uses of a hit (accessed, seq)
 * touch none of them, so hits do not undo their own memo. As with the
 * totals (db_totals.c), the WAL hook, called once a commit has taken
 * place, bumps the generation; a rollback drops the mark. A remembered
 * answer holds the generation read before its statement ran: any commit
 * that its statement did not see bumps the generation after it is
 * visible, so such an answer is never used again.
 *
 * A hit so answered is still checked against its file by the caller
 * (the fstat of the file it opened against the identity remembered here),
 * as one answered by SQLite is. Loop thread only, except the triggers and
 * hooks (the writer's threads, under its mutex). Bounded: DB_MEMO_SLOTS
 * answers, direct-mapped, each allocated when first filled. */
#include "db_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define DB_MEMO_SLOTS 1024   /* a power of two */
#define DB_MEMO_KEY_MAX 1024 /* longer URLs are not remembered */

struct db_memo_slot {
    uint64_t gen; /* lookup_gen when its statement ran */
    uint32_t hash;
    db_memo_kind_t kind;
    char sha[65];
    uint64_t size;
    db_blob_stat_t stat;
    db_entry_meta_t meta; /* MEMO_ENTRY */
    char cred_tag[65];
    char key[]; /* the digest or the URL */
};

static const char triggers[] =
    "CREATE TEMP TRIGGER IF NOT EXISTS memo_blob_add AFTER INSERT ON blobs BEGIN"
    " SELECT hubd_lookups_changed(); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS memo_blob_del AFTER DELETE ON blobs BEGIN"
    " SELECT hubd_lookups_changed(); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS memo_blob_set AFTER UPDATE OF sha256, size, public, ino,"
    " mtime_ns, ctime_ns ON blobs WHEN NEW.sha256 IS NOT OLD.sha256 OR NEW.size IS NOT OLD.size"
    " OR NEW.public IS NOT OLD.public OR NEW.ino IS NOT OLD.ino OR NEW.mtime_ns IS NOT"
    " OLD.mtime_ns OR NEW.ctime_ns IS NOT OLD.ctime_ns BEGIN SELECT hubd_lookups_changed(); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS memo_entry_add AFTER INSERT ON entries BEGIN"
    " SELECT hubd_lookups_changed(); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS memo_entry_del AFTER DELETE ON entries BEGIN"
    " SELECT hubd_lookups_changed(); END;"
    "CREATE TEMP TRIGGER IF NOT EXISTS memo_entry_set AFTER UPDATE OF url, cred_tag, sha256, etag,"
    " last_modified, created, validated ON entries WHEN NEW.url IS NOT OLD.url OR NEW.cred_tag IS"
    " NOT OLD.cred_tag OR NEW.sha256 IS NOT OLD.sha256 OR NEW.etag IS NOT OLD.etag OR"
    " NEW.last_modified IS NOT OLD.last_modified OR NEW.created IS NOT OLD.created OR"
    " NEW.validated IS NOT OLD.validated BEGIN SELECT hubd_lookups_changed(); END;";

/* Called by SQLite inside a statement on the writer (its mutex held). */
static void lookups_changed(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    db_t *db = sqlite3_user_data(ctx);
    (void)argc, (void)argv;
    db->pending_lookups = 1;
    sqlite3_result_null(ctx);
}

int db_memo_init(db_t *db)
{
    atomic_store(&db->lookup_gen, 1); /* a slot of generation 0 is empty */
    return db_temp_triggers(db->wr, "hubd_lookups_changed", 0, lookups_changed, db, triggers);
}

void db_memo_free(db_t *db)
{
    if (!db->memo)
        return;
    for (size_t i = 0; i < DB_MEMO_SLOTS; i++)
        free(db->memo[i]);
    free(db->memo);
    db->memo = NULL;
}

/* FNV-1a over the kind, the key and the tag. */
static uint32_t memo_hash(db_memo_kind_t kind, const char *key, const char *tag)
{
    return db_fnv(db_fnv(DB_FNV_BASIS ^ (uint32_t)kind, key), tag);
}

const db_memo_slot_t *db_memo_get(db_t *db, db_memo_kind_t kind, const char *key, const char *tag,
                                  uint64_t *gen)
{
    *gen = atomic_load(&db->lookup_gen); /* before the statement a miss runs */
    if (!db->memo)
        return NULL;
    uint32_t h = memo_hash(kind, key, tag);
    db_memo_slot_t *m = db->memo[h & (DB_MEMO_SLOTS - 1)];
    if (!m || m->gen != *gen || m->hash != h || m->kind != kind || strcmp(m->key, key) != 0 ||
        strcmp(m->cred_tag, tag) != 0)
        return NULL;
    db->memo_answers++;
    return m;
}

void db_memo_put(db_t *db, db_memo_kind_t kind, const char *key, const char *tag, uint64_t gen,
                 const char sha[65], uint64_t size, const db_blob_stat_t *stat,
                 const db_entry_meta_t *meta)
{
    size_t klen = strlen(key);
    if (klen > DB_MEMO_KEY_MAX || strlen(tag) >= sizeof((db_memo_slot_t *)0)->cred_tag)
        return;
    if (!db->memo && !(db->memo = calloc(DB_MEMO_SLOTS, sizeof *db->memo)))
        return; /* it only saves work */
    uint32_t h = memo_hash(kind, key, tag);
    db_memo_slot_t **at = &db->memo[h & (DB_MEMO_SLOTS - 1)];
    db_memo_slot_t *m = *at;
    if (!m || strlen(m->key) < klen) {
        free(m);
        *at = m = malloc(sizeof *m + klen + 1);
        if (!m)
            return;
    }
    m->gen = gen;
    m->hash = h;
    m->kind = kind;
    memcpy(m->sha, sha, 65);
    m->size = size;
    m->stat = *stat;
    if (meta)
        m->meta = *meta;
    else
        memset(&m->meta, 0, sizeof m->meta);
    memcpy(m->cred_tag, tag, strlen(tag) + 1);
    memcpy(m->key, key, klen + 1);
}

void db_memo_answer(const db_memo_slot_t *m, char sha_out[65], uint64_t *size_out,
                    db_blob_stat_t *stat_out, db_entry_meta_t *meta_out)
{
    if (sha_out)
        memcpy(sha_out, m->sha, 65);
    *size_out = m->size;
    if (stat_out)
        *stat_out = m->stat;
    if (meta_out)
        *meta_out = m->meta;
}

uint64_t db_memo_answers(const db_t *db)
{
    return db->memo_answers;
}
