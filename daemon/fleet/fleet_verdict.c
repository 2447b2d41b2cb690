/* fleet_verdict: what the Hub said of one file to one credential, shared
 * by the nodes of the swarm (fleet.h, "Verdicts").
 *
 * Each record lives on one node, the first of its key's rendezvous order
 * (fleet_peers.h), which every node works out alike: a record told to it
 * answers the others' asks for VERDICT_TTL_MS, so the cluster asks the Hub
 * about once a minute per credential and file, however many nodes want
 * it. When no record is there, the first asker gets NONE and a lease: it
 * asks the Hub, and the others, meanwhile, hear FETCHING and ask again
 * shortly, up to VERDICT_WAIT_MS (a lease holder that died costs them that
 * wait, then each asks the Hub itself).
 *
 * The key is HMAC-SHA256 over the credential header lines and the file,
 * keyed by the digest of the cluster CA's certificate: it names the token
 * to no one, and only a node that has the token itself can make it. A
 * holder keeps VERDICT_SLOTS records, direct-mapped by key: a collision
 * costs one more question to the Hub, never a wrong answer (the slot
 * holds the whole key). */
#include "fleet_internal.h"
#include "log.h"

#include <errno.h>
#include <mbedtls/md.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERDICT_SLOTS 4096
#define VERDICT_TTL_MS 60000   /* a record answers this long: the Hub's own minute */
#define VERDICT_LEASE_MS 10000 /* the asker that got NONE asks the Hub within this */
#define VERDICT_WAIT_MS 10000  /* an asker hearing FETCHING waits at most this long */
#define VERDICT_AGAIN_MS 200   /* and asks again after this */
#define VERDICT_ASK_MS 3000    /* one exchange: a holder slower than this is down */

struct fleet_verdicts {
    struct {
        char key[65];
        char *value; /* hex, or NULL (a lease only) */
        uint64_t at, lease_until;
    } slot[VERDICT_SLOTS];
    uint64_t served, leased, told;
};

struct fleet_vask {
    fleet_t *f;
    char key[65];
    char *value; /* telling: the record; asking: NULL */
    fleet_verdict_cb cb;
    void *arg;
    size_t cand;
    uint64_t t0;
    fmeta_ask_t *ask;
    uv_timer_t timer;
    int done; /* answered or cancelled: the timer closes and frees it */
};

static unsigned slot_of(const char *key)
{
    unsigned v = 0;
    for (int i = 0; i < 6; i++)
        v = v << 4 | (unsigned)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
    return v % VERDICT_SLOTS;
}

/* The holder's side, for this node's own records and the others' asks:
 * HAVE (*value), FETCHING (a lease runs), or NONE (told: stored; asked:
 * the asker holds the lease now). */
static fmeta_status_t hold(fleet_t *f, const char *key, const char *told, const char **value)
{
    if (!f->verdicts)
        return FMETA_NONE;
    uint64_t now = uv_now(f->loop);
    unsigned i = slot_of(key);
    fleet_verdicts_t *v = f->verdicts;
    int same = strcmp(v->slot[i].key, key) == 0;
    if (told) {
        char *copy = strdup(told);
        if (!copy)
            return FMETA_NONE;
        free(v->slot[i].value);
        snprintf(v->slot[i].key, sizeof v->slot[i].key, "%s", key);
        v->slot[i].value = copy;
        v->slot[i].at = now;
        v->slot[i].lease_until = 0;
        v->told++;
        return FMETA_NONE;
    }
    if (same && v->slot[i].value && now - v->slot[i].at < VERDICT_TTL_MS) {
        *value = v->slot[i].value;
        v->served++;
        return FMETA_HAVE;
    }
    if (same && v->slot[i].lease_until > now)
        return FMETA_FETCHING;
    free(v->slot[i].value);
    snprintf(v->slot[i].key, sizeof v->slot[i].key, "%s", key);
    v->slot[i].value = NULL;
    v->slot[i].lease_until = now + VERDICT_LEASE_MS;
    v->leased++;
    return FMETA_NONE;
}

fmeta_status_t fleet_verdict_lookup(void *arg, const char *key, const char *value, const char *peer,
                                    const unsigned char **bytes, size_t *len)
{
    fleet_t *f = arg;
    (void)peer;
    const char *have = NULL;
    fmeta_status_t st = hold(f, key, value, &have);
    if (st == FMETA_HAVE) {
        *bytes = (const unsigned char *)have;
        *len = strlen(have);
    }
    return st;
}

int fleet_verdicts_new(fleet_t *f)
{
    f->verdicts = calloc(1, sizeof *f->verdicts);
    return f->verdicts ? 0 : -ENOMEM;
}

void fleet_verdicts_free(fleet_t *f)
{
    if (!f->verdicts)
        return;
    for (size_t i = 0; i < VERDICT_SLOTS; i++)
        free(f->verdicts->slot[i].value);
    free(f->verdicts);
    f->verdicts = NULL;
}

int fleet_verdict_key(fleet_t *f, const char *const *cred, size_t ncred, const char *file_key,
                      char out[65])
{
    const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
    mbedtls_md_context_t c;
    unsigned char d[32];
    mbedtls_md_init(&c);
    int rc = mbedtls_md_setup(&c, md, 1) ||
             mbedtls_md_hmac_starts(&c, f->verdict_secret, sizeof f->verdict_secret);
    for (size_t i = 0; !rc && i < ncred; i++)
        rc = mbedtls_md_hmac_update(&c, (const unsigned char *)cred[i], strlen(cred[i])) ||
             mbedtls_md_hmac_update(&c, (const unsigned char *)"\n", 1);
    rc = rc || mbedtls_md_hmac_update(&c, (const unsigned char *)file_key, strlen(file_key)) ||
         mbedtls_md_hmac_finish(&c, d);
    mbedtls_md_free(&c);
    if (rc)
        return -ENOMEM;
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    return 0;
}

/* ---- asking and telling the holder --------------------------------------- */

static void vask_closed(uv_handle_t *h)
{
    struct fleet_vask *a = h->data;
    fleet_t *f = a->f;
    free(a->value);
    free(a);
    f->item_back(f); /* a stopping node waits for its asks */
}

/* The one end: the asker told once (NULL: ask the Hub), then it goes. */
static void vask_end(struct fleet_vask *a, const char *value)
{
    if (a->done)
        return;
    a->done = 1;
    if (a->ask) {
        fmeta_ask_cancel(a->ask);
        a->ask = NULL;
    }
    if (a->cb)
        a->cb(a->arg, value);
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, vask_closed);
}

static void vask_step(struct fleet_vask *a);
static void on_vask_timer(uv_timer_t *t);

static void vask_reply(void *arg, int rc, fmeta_status_t st, const unsigned char *bytes, size_t len,
                       const char *why)
{
    struct fleet_vask *a = arg;
    a->ask = NULL;
    if (rc < 0) {
        log_debug("fleet: verdict %.12s: holder %zu did not answer (%s): the next", a->key, a->cand,
                  why ? why : strerror(-rc));
        a->cand++;
        vask_step(a);
        return;
    }
    if (a->value || st == FMETA_NONE) { /* told; or no record: this node asks the Hub */
        vask_end(a, NULL);
        return;
    }
    if (st == FMETA_FETCHING) {
        if (uv_now(a->f->loop) - a->t0 >= VERDICT_WAIT_MS) {
            vask_end(a, NULL);
            return;
        }
        uv_timer_start(&a->timer, on_vask_timer, VERDICT_AGAIN_MS, 0);
        return;
    }
    char *v = malloc(len + 1);
    if (v) {
        memcpy(v, bytes, len);
        v[len] = '\0';
    }
    vask_end(a, v);
    free(v);
}

static void on_vask_timer(uv_timer_t *t)
{
    vask_step(t->data);
}

/* Asks (or tells) the key's next holder; this node's own records are read
 * a turn later (never from inside fleet_verdict_ask). */
static void vask_step(struct fleet_vask *a)
{
    fleet_t *f = a->f;
    if (a->done)
        return;
    if (f->stopping || !f->peers.n) {
        vask_end(a, NULL);
        return;
    }
    size_t *order = malloc(f->peers.n * sizeof *order);
    if (!order) {
        vask_end(a, NULL);
        return;
    }
    fleet_peers_order(&f->peers, a->key, order);
    size_t c = a->cand < f->peers.n ? order[a->cand] : f->peers.self;
    free(order);
    if (c == f->peers.self) {
        const char *have = NULL;
        fmeta_status_t st = hold(f, a->key, a->value, &have);
        if (!a->value && st == FMETA_FETCHING && uv_now(f->loop) - a->t0 < VERDICT_WAIT_MS) {
            uv_timer_start(&a->timer, on_vask_timer, VERDICT_AGAIN_MS, 0);
            return;
        }
        vask_end(a, st == FMETA_HAVE ? have : NULL);
        return;
    }
    const fleet_peer_t *p = &f->peers.v[c];
    a->ask = fmeta_ask_verdict(f->loop, f->id, p->ip, p->port + 1, a->key, a->value, VERDICT_ASK_MS,
                               vask_reply, a);
    if (!a->ask)
        vask_end(a, NULL);
}

static struct fleet_vask *vask_new(fleet_t *f, const char *key, const char *value,
                                   fleet_verdict_cb cb, void *arg)
{
    struct fleet_vask *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    if (value && !(a->value = strdup(value))) {
        free(a);
        return NULL;
    }
    a->f = f;
    snprintf(a->key, sizeof a->key, "%s", key);
    a->cb = cb;
    a->arg = arg;
    a->t0 = uv_now(f->loop);
    f->items++;
    uv_timer_init(f->loop, &a->timer);
    a->timer.data = a;
    /* Started by the timer: a record of this node's own is never answered
     * from inside the call. */
    uv_timer_start(&a->timer, on_vask_timer, 0, 0);
    return a;
}

fleet_vask_t *fleet_verdict_ask(fleet_t *f, const char *key, fleet_verdict_cb cb, void *arg)
{
    return f->stopping ? NULL : vask_new(f, key, NULL, cb, arg);
}

void fleet_verdict_cancel(fleet_vask_t *a)
{
    a->cb = NULL;
    vask_end(a, NULL);
}

void fleet_verdict_tell(fleet_t *f, const char *key, const char *value)
{
    if (!f->stopping)
        vask_new(f, key, value, NULL, NULL);
}

void fleet_verdicts_counts(const fleet_t *f, uint64_t *served, uint64_t *leased, uint64_t *told)
{
    *served = f->verdicts ? f->verdicts->served : 0;
    *leased = f->verdicts ? f->verdicts->leased : 0;
    *told = f->verdicts ? f->verdicts->told : 0;
}
