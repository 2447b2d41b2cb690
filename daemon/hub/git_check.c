/* git_check: a stored Hub file checked against the git blob SHA-1 of the
 * Hub's ETag, in one pool item that also forgets the entry on a mismatch
 * (git_check.h). */
#include "git_check.h"
#include "cache.h"
#include "url.h"

#include <errno.h>
#include <mbedtls/sha1.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct git_check {
    uv_work_t work;
    git_check_env_t env;
    git_check_done_cb done; /* NULL once cancelled: nobody is answered */
    void *arg;
    job_result_t res;  /* the stored file: res.fd referenced, strings below */
    char *path;        /* res.path's copy */
    char sha256[65];   /* res.sha256's copy */
    char *url;         /* the entry's URL */
    char cred_tag[65]; /* and credential tag, "" for none */
    char want[41];     /* the Hub's ETag: the SHA-1 the file must have */
    char got[41];      /* the file's SHA-1 ("" on a read error); pool thread writes */
    int forgotten;     /* the entry was removed; pool thread writes */
    int forget_rc;     /* 0, or why it was not (-ENOENT: gone, or other bytes now) */
};

int git_check_etag(const char *etag, char sha1[41])
{
    if (!etag)
        return 0;
    const char *e = strncmp(etag, "W/", 2) == 0 ? etag + 2 : etag;
    if (strlen(e) != 42 || e[0] != '"' || e[41] != '"' || strspn(e + 1, "0123456789abcdef") != 40)
        return 0;
    memcpy(sha1, e + 1, 40);
    sha1[40] = '\0';
    return 1;
}

static void check_free(git_check_t *g)
{
    job_fd_unref(g->res.fd);
    free(g->path);
    free(g->url);
    free(g);
}

/* Pool thread: sha1("blob <size>\0" + the file's bytes), by pread (the
 * descriptor is shared with the download's other answers: its offset is
 * not ours), then the entry forgotten when it differs. */
static void check_work(uv_work_t *w)
{
    git_check_t *g = w->data;
    mbedtls_sha1_context ctx;
    mbedtls_sha1_init(&ctx);
    char head[48];
    int hl = snprintf(head, sizeof head, "blob %llu", (unsigned long long)g->res.size);
    unsigned char buf[64 * 1024], out[20];
    int ok = mbedtls_sha1_starts_ret(&ctx) == 0 &&
             mbedtls_sha1_update_ret(&ctx, (const unsigned char *)head, (size_t)hl + 1) == 0;
    for (uint64_t off = 0; ok && off < g->res.size;) {
        ssize_t n = pread(g->res.fd->fd, buf, sizeof buf, (off_t)off);
        if (n <= 0) {
            ok = 0;
            break;
        }
        ok = mbedtls_sha1_update_ret(&ctx, buf, (size_t)n) == 0;
        off += (uint64_t)n;
    }
    g->got[0] = '\0';
    if (ok && mbedtls_sha1_finish_ret(&ctx, out) == 0)
        for (int i = 0; i < 20; i++)
            snprintf(g->got + 2 * i, 3, "%02x", out[i]);
    mbedtls_sha1_free(&ctx);
    if (strcmp(g->got, g->want) == 0)
        return;
    /* Only the entry that still names these bytes: a newer download of the
     * URL is not the one refused. */
    int removed_blob = 0;
    g->forget_rc = g->url ? cache_forget(g->env.store, g->env.db, g->url, g->cred_tag, g->sha256,
                                         &removed_blob)
                          : -EINVAL;
    g->forgotten = g->forget_rc == 0;
    if (g->forgotten)
        cache_reserve_make(g->env.store); /* a full disk may have taken it (as RM) */
}

static void check_after(uv_work_t *w, int status)
{
    git_check_t *g = w->data;
    if (g->done) {
        git_check_result_t r = {
            .status = status,
            .match = status == 0 && strcmp(g->got, g->want) == 0,
            .want = g->want,
            .got = g->got,
            .forgotten = g->forgotten,
            .file = &g->res,
        };
        g->done(g->arg, &r);
    }
    worktrack_release(g->env.work);
    check_free(g);
}

int git_check_start(const git_check_env_t *env, const job_result_t *res, const char *url,
                    const char *cred_tag, const char *want, git_check_done_cb done, void *arg,
                    git_check_t **out)
{
    if (res->size > GIT_CHECK_MAX_SIZE)
        return -EFBIG;
    git_check_t *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    url_t u = {0};
    if (url && url_parse(url, &u, NULL) == 0) /* the cache key, as jobs_fetch makes it */
        url = u.canonical;
    int oom = !(g->path = strdup(res->path ? res->path : "")) || (url && !(g->url = strdup(url)));
    url_free(&u);
    if (oom) {
        check_free(g);
        return -ENOMEM;
    }
    g->env = *env;
    g->done = done;
    g->arg = arg;
    g->res = *res;
    g->res.fd = job_fd_ref(res->fd);
    g->res.path = g->path;
    snprintf(g->sha256, sizeof g->sha256, "%s", res->sha256 ? res->sha256 : "");
    g->res.sha256 = g->sha256;
    snprintf(g->cred_tag, sizeof g->cred_tag, "%s", cred_tag ? cred_tag : "");
    snprintf(g->want, sizeof g->want, "%s", want);
    g->work.data = g;
    int rc = uv_queue_work(env->loop, &g->work, check_work, check_after);
    if (rc) {
        check_free(g);
        return rc;
    }
    worktrack_hold(env->work); /* a shutdown waits for it: it may write the db */
    *out = g;
    return 0;
}

void git_check_cancel(git_check_t *g)
{
    g->done = NULL;
    g->arg = NULL;
}
