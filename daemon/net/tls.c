/* tls: mbedTLS client contexts over memory buffers, sessions per origin. */
#include "tls.h"
#include "log.h"
#include "url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/asn1.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ciphersuites.h>
#include <mbedtls/x509_crt.h>

#define TLS_SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define TLS_IN_MIN_ROOM (17 * 1024) /* one whole record and then some */
#define TLS_SESSION_SLOTS 64        /* origins whose session we remember */
#define TLS_IN_KEEP (256 * 1024)    /* a drained input buffer larger than this is freed */
#define TLS_CIPHERS_KTLS "aes-128-gcm,aes-256-gcm,chacha20-poly1305" /* ktls_ciphers */

typedef struct session_slot {
    char *origin; /* NULL: free */
    mbedtls_ssl_session session;
    unsigned long used; /* ctx->tick when last stored or used, for LRU */
} session_slot_t;

struct tls_ctx {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt ca;         /* parsed once, shared by every connection */
    mbedtls_ssl_config verify;   /* verification required */
    mbedtls_ssl_config insecure; /* tls_insecure_hosts only */
    int ciphers[16];             /* 0-terminated, fastest first */
    char **insecure_hosts;       /* NULL-terminated */
    int have_ca;                 /* at least one CA certificate loaded */
    char bundle[300];            /* what was loaded, for messages: "FILE", "PATH" or both */
    session_slot_t slots[TLS_SESSION_SLOTS];
    unsigned long tick;
    unsigned generation;   /* CA reloads so far (tls_ctx_generation) */
    int ktls;              /* ktls = auto: keep AES-GCM keys for the kernel (ktls.h) */
    int ktls_kernel;       /* and the kernel had the tls module at start */
    tls_conn_t *exporting; /* whose mbedtls_ssl_handshake runs now (export_keys) */
};

struct tls_conn {
    tls_ctx_t *ctx;
    mbedtls_ssl_context ssl;
    char *origin;   /* session cache slot */
    char *host;     /* as connected to */
    int host_is_ip; /* host is an IP literal: names checked against IP SANs */
    unsigned char ip[16];
    size_t ip_len; /* 4 or 16 */
    char *in;      /* ciphertext not yet consumed by mbedTLS */
    size_t in_start, in_end, in_cap;
    char *out; /* ciphertext produced, not yet taken */
    size_t out_len, out_cap;
    int self_signed; /* verify_cb: 1 the leaf, 2 a certificate above it, is its own issuer */
    int offered;     /* a cached session was offered */
    long long offered_start; /* its creation time: kept by a resumption */
    int resumed;
    unsigned generation; /* ctx's when made: an older one's session is not kept */
    char first[48];      /* the server's first bytes, to say what answered if not TLS */
    size_t first_len;
    ktls_keys_t keys; /* the handshake's AES-GCM keys, until tls_conn_ktls_keys (a secret) */
    int have_keys;
};

/* ---- errors --------------------------------------------------------- */

static void mbed_msg(int rc, const char *what, char *msg, size_t msglen)
{
    char buf[160];
    mbedtls_strerror(rc, buf, sizeof buf);
    snprintf(msg, msglen, "%s: %s (-0x%04x)", what, buf, (unsigned)-rc);
}

/* The first reason a person can act on, from the verification flags, in
 * curl's words where it has them (self_signed: as verify_cb saw it). */
static const char *verify_reason(uint32_t flags, int self_signed)
{
    if ((flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) && self_signed == 1)
        return "self-signed certificate (not issued by any CA: trust it as its own CA)";
    if ((flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) && self_signed == 2)
        return "self-signed certificate in certificate chain (a root CA that is not trusted)";
    if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED)
        return "unable to get local issuer certificate (unknown CA: the chain does not lead to a "
               "trusted CA)";
    if (flags & MBEDTLS_X509_BADCERT_EXPIRED)
        return "certificate expired";
    if (flags & MBEDTLS_X509_BADCERT_FUTURE)
        return "certificate not yet valid";
    if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
        return "name mismatch (the certificate is not for this host)";
    if (flags & MBEDTLS_X509_BADCERT_REVOKED)
        return "certificate revoked";
    return NULL;
}

/* ---- BIO over memory --------------------------------------------------- */

static int bio_send(void *arg, const unsigned char *buf, size_t len)
{
    tls_conn_t *c = arg;
    if (c->out_len + len > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + len)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p)
            return MBEDTLS_ERR_SSL_ALLOC_FAILED;
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, buf, len);
    c->out_len += len;
    return (int)len;
}

static int bio_recv(void *arg, unsigned char *buf, size_t len)
{
    tls_conn_t *c = arg;
    size_t avail = c->in_end - c->in_start;
    if (avail == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    if (len > avail)
        len = avail;
    memcpy(buf, c->in + c->in_start, len);
    c->in_start += len;
    if (c->in_start == c->in_end)
        c->in_start = c->in_end = 0;
    return (int)len;
}

int tls_conn_input_space(tls_conn_t *c, char **p, size_t *room)
{
    if (c->in_start > 0 && c->in_cap - c->in_end < TLS_IN_MIN_ROOM) {
        memmove(c->in, c->in + c->in_start, c->in_end - c->in_start);
        c->in_end -= c->in_start;
        c->in_start = 0;
    }
    if (c->in_cap - c->in_end < TLS_IN_MIN_ROOM) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 64 * 1024;
        char *n = realloc(c->in, cap);
        if (!n)
            return -ENOMEM;
        c->in = n;
        c->in_cap = cap;
    }
    *p = c->in + c->in_end;
    *room = c->in_cap - c->in_end;
    return 0;
}

void tls_conn_input_commit(tls_conn_t *c, size_t n)
{
    size_t k = sizeof c->first - c->first_len;
    if (k > n)
        k = n;
    memcpy(c->first + c->first_len, c->in + c->in_end, k);
    c->first_len += k;
    c->in_end += n;
}

size_t tls_conn_input_pending(const tls_conn_t *c)
{
    return c->in_end - c->in_start;
}

int tls_conn_has_pending(const tls_conn_t *c)
{
    return c->in_end > c->in_start || mbedtls_ssl_get_bytes_avail(&c->ssl) > 0 ||
           mbedtls_ssl_check_pending(&c->ssl);
}

int tls_conn_input_append(tls_conn_t *c, const char *data, size_t n)
{
    while (n > 0) {
        char *p;
        size_t room;
        if (tls_conn_input_space(c, &p, &room))
            return -ENOMEM;
        size_t k = n < room ? n : room;
        memcpy(p, data, k);
        c->in_end += k;
        data += k;
        n -= k;
    }
    return 0;
}

char *tls_conn_take_output(tls_conn_t *c, size_t *len)
{
    if (c->out_len == 0)
        return NULL;
    char *p = c->out;
    *len = c->out_len;
    c->out = NULL;
    c->out_len = c->out_cap = 0;
    return p;
}

/* ---- IP address names ----------------------------------------------------- */

/* mbedTLS 2.28 checks DNS names (CN, dNSName SANs) but not iPAddress SANs,
 * so for an IP literal we walk the subjectAltName extension ourselves.
 * Returns 1 when the certificate names the address. */
static int cert_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t ip_len)
{
    unsigned char *p = crt->v3_ext.p, *end = p + crt->v3_ext.len;
    size_t len;
    if (!p || crt->v3_ext.len == 0)
        return 0;
    if (*p == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 3) &&
        mbedtls_asn1_get_tag(&p, end, &len,
                             MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 3) != 0)
        return 0;
    if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
        return 0;
    end = p + len;
    while (p < end) { /* Extension ::= SEQUENCE { extnID, critical?, extnValue } */
        if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
            return 0;
        unsigned char *ext_end = p + len;
        mbedtls_asn1_buf oid;
        if (mbedtls_asn1_get_tag(&p, ext_end, &oid.len, MBEDTLS_ASN1_OID))
            return 0;
        oid.p = p;
        p += oid.len;
        if (MBEDTLS_OID_CMP(MBEDTLS_OID_SUBJECT_ALT_NAME, &oid) != 0) {
            p = ext_end;
            continue;
        }
        int critical;
        if (*p == MBEDTLS_ASN1_BOOLEAN && mbedtls_asn1_get_bool(&p, ext_end, &critical))
            return 0;
        if (mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OCTET_STRING) ||
            mbedtls_asn1_get_tag(&p, ext_end, &len,
                                 MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
            return 0;
        unsigned char *names_end = p + len;
        while (p < names_end) { /* GeneralName, iPAddress is [7] */
            unsigned char tag = *p++;
            if (mbedtls_asn1_get_len(&p, names_end, &len))
                return 0;
            if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && len == ip_len &&
                memcmp(p, ip, ip_len) == 0)
                return 1;
            p += len;
        }
        return 0;
    }
    return 0;
}

static int verify_cb(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    tls_conn_t *c = arg;
    if (depth == 0 && c->host_is_ip && !cert_has_ip(crt, c->ip, c->ip_len))
        *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    /* Its own issuer: a self-signed leaf, or an untrusted root above it. */
    if (crt->issuer_raw.len == crt->subject_raw.len &&
        memcmp(crt->issuer_raw.p, crt->subject_raw.p, crt->subject_raw.len) == 0)
        c->self_signed = depth == 0 ? 1 : c->self_signed ? c->self_signed : 2;
    return 0;
}

/* ---- sessions ---------------------------------------------------------- */

static session_slot_t *slot_find(tls_ctx_t *ctx, const char *origin)
{
    for (int i = 0; i < TLS_SESSION_SLOTS; i++)
        if (ctx->slots[i].origin && strcmp(ctx->slots[i].origin, origin) == 0)
            return &ctx->slots[i];
    return NULL;
}

/* Every remembered session goes (a CA reload, the end). */
static void sessions_forget(tls_ctx_t *ctx)
{
    for (int i = 0; i < TLS_SESSION_SLOTS; i++) {
        if (ctx->slots[i].origin) {
            free(ctx->slots[i].origin);
            ctx->slots[i].origin = NULL;
            mbedtls_ssl_session_free(&ctx->slots[i].session);
        }
    }
}

/* Keeps the session of a completed handshake for the next connection to the
 * same origin (session ticket or session id, whichever the server gave). */
static void session_store(tls_conn_t *c)
{
    tls_ctx_t *ctx = c->ctx;
    if (c->generation != ctx->generation) /* verified (or resumed) under the old bundle */
        return;
    session_slot_t *s = slot_find(ctx, c->origin);
    if (!s) {
        s = &ctx->slots[0];
        for (int i = 0; i < TLS_SESSION_SLOTS; i++) {
            if (!ctx->slots[i].origin) {
                s = &ctx->slots[i];
                break;
            }
            if (ctx->slots[i].used < s->used)
                s = &ctx->slots[i];
        }
        if (s->origin) {
            free(s->origin);
            mbedtls_ssl_session_free(&s->session);
        }
        s->origin = strdup(c->origin);
        if (!s->origin)
            return;
    } else {
        mbedtls_ssl_session_free(&s->session);
    }
    mbedtls_ssl_session_init(&s->session);
    if (mbedtls_ssl_get_session(&c->ssl, &s->session) != 0) {
        free(s->origin);
        s->origin = NULL;
        mbedtls_ssl_session_free(&s->session);
        return;
    }
    s->used = ++ctx->tick;
}

/* ---- connections ------------------------------------------------------- */

/* A host of tls_insecure_hosts: names as names, addresses as addresses in
 * any spelling (the URL's host is canonical: "127.1" is 127.0.0.1). */
static int host_is_insecure(const tls_ctx_t *ctx, const char *host)
{
    uint8_t a[16], b[16];
    int is_addr = url_host_addr(host, strlen(host), a) == 1;
    for (char **h = ctx->insecure_hosts; h && *h; h++) {
        if (is_addr ? url_host_addr(*h, strlen(*h), b) == 1 && memcmp(a, b, 16) == 0
                    : strcasecmp(*h, host) == 0)
            return 1;
    }
    return 0;
}

int tls_conn_new(tls_ctx_t *ctx, const char *host, const char *origin, tls_conn_t **out)
{
    tls_conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->ctx = ctx;
    c->generation = ctx->generation;
    mbedtls_ssl_init(&c->ssl);
    c->origin = strdup(origin);
    c->host = strdup(host);
    if (!c->origin || !c->host)
        goto fail;
    if (inet_pton(AF_INET, host, c->ip) == 1) {
        c->host_is_ip = 1;
        c->ip_len = 4;
    } else if (inet_pton(AF_INET6, host, c->ip) == 1) {
        c->host_is_ip = 1;
        c->ip_len = 16;
    }
    const mbedtls_ssl_config *conf = host_is_insecure(ctx, host) ? &ctx->insecure : &ctx->verify;
    if (mbedtls_ssl_setup(&c->ssl, conf) != 0)
        goto fail;
    /* SNI and the name check, for names; an IP literal gets neither (RFC
     * 6066 forbids IP SNI) and verify_cb checks its iPAddress SANs. */
    if (!c->host_is_ip && mbedtls_ssl_set_hostname(&c->ssl, host) != 0)
        goto fail;
    mbedtls_ssl_set_verify(&c->ssl, verify_cb, c);
    mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
    session_slot_t *s = slot_find(ctx, origin);
    if (s && mbedtls_ssl_set_session(&c->ssl, &s->session) == 0) {
        s->used = ++ctx->tick;
        c->offered = 1;
        c->offered_start = (long long)s->session.start;
    }
    *out = c;
    return 0;
fail:
    tls_conn_free(c);
    return -ENOMEM;
}

void tls_conn_free(tls_conn_t *c)
{
    if (!c)
        return;
    ktls_keys_wipe(&c->keys);
    mbedtls_ssl_free(&c->ssl);
    free(c->origin);
    free(c->host);
    free(c->in);
    free(c->out);
    free(c);
}

/* A handshake that failed on bytes that are no TLS record at all (its
 * first byte is no record type, 20 to 23): say what answered, in its own
 * words ("HTTP/1.1 200 OK"), rather than mbedTLS's "invalid SSL record".
 * A plain http server on the port, or a proxy that answered in its place
 * instead of passing the tunnel through. */
static int not_tls(const tls_conn_t *c, char *msg, size_t msglen)
{
    if (!c->first_len || (c->first[0] >= 20 && c->first[0] <= 23))
        return 0;
    char begins[sizeof c->first + 1];
    size_t n = 0;
    for (; n < c->first_len && c->first[n] != '\r' && c->first[n] != '\n'; n++)
        begins[n] = c->first[n] >= 0x20 && c->first[n] < 0x7f ? c->first[n] : '?';
    begins[n] = '\0';
    snprintf(msg, msglen,
             "TLS handshake with %s: the answer is not TLS but begins \"%s\" (plain HTTP on a "
             "TLS port, or a proxy answering itself instead of passing the tunnel through)",
             c->host, begins);
    return 1;
}

int tls_conn_handshake(tls_conn_t *c, const char **code, char *msg, size_t msglen)
{
    c->ctx->exporting = c;
    int rc = mbedtls_ssl_handshake(&c->ssl);
    c->ctx->exporting = NULL;
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return TLS_WANT_INPUT;
    if (rc == 0) {
        /* A resumed session keeps the creation time of the one offered; a
         * full handshake makes a new one. */
        c->resumed =
            c->offered && c->ssl.session && (long long)c->ssl.session->start == c->offered_start;
        session_store(c);
        return 0;
    }
    uint32_t flags = mbedtls_ssl_get_verify_result(&c->ssl);
    const char *reason =
        rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED ? verify_reason(flags, c->self_signed) : NULL;
    if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        char info[256] = "";
        if (!reason) {
            mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
            info[strcspn(info, "\n")] = '\0';
            reason = info;
        }
        *code = "tls_verify";
        /* What was checked against, and what to do when the server is
         * right and the bundle is not. */
        int untrusted = (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) != 0;
        snprintf(msg, msglen, "%s: %s; CA bundle %s%s%s", c->host, reason, c->ctx->bundle,
                 c->ctx->have_ca ? "" : " (no CA certificates in it)",
                 untrusted ? "; to trust its CA, name it in ca_file (hubd.conf or hubd "
                             "--ca-file) or add it to the system's (update-ca-certificates), "
                             "then reload hubd (SIGHUP)"
                           : "");
        return -1;
    }
    *code = "tls";
    if (not_tls(c, msg, msglen))
        return -1;
    char what[300];
    snprintf(what, sizeof what, "TLS handshake with %s", c->host);
    mbed_msg(rc, what, msg, msglen);
    return -1;
}

int tls_conn_resumed(const tls_conn_t *c)
{
    return c->resumed;
}

const char *tls_conn_cipher(const tls_conn_t *c)
{
    const char *name = mbedtls_ssl_get_ciphersuite(&c->ssl);
    return name ? name : "?";
}

/* ---- keys for kernel TLS ------------------------------------------------ */

/* mbedTLS hands over the key block as a handshake derives it, full or
 * resumed; it is kept when it has AES-GCM's shape. Called from inside
 * mbedtls_ssl_handshake, on the loop: the configuration is shared, so
 * ctx->exporting says whose handshake it is. */
static int export_keys(void *arg, const unsigned char *ms, const unsigned char *kb, size_t maclen,
                       size_t keylen, size_t ivlen)
{
    (void)ms;
    tls_ctx_t *ctx = arg;
    tls_conn_t *c = ctx->exporting;
    if (c)
        c->have_keys = ktls_keys_from_block(&c->keys, kb, maclen, keylen, ivlen) == 0;
    return 0;
}

int tls_conn_ktls_keys(tls_conn_t *c, ktls_keys_t *out, const char **why)
{
    int have = c->have_keys;
    *out = c->keys; /* the connection's copy goes, whatever comes of it */
    ktls_keys_wipe(&c->keys);
    c->have_keys = 0;
    *why = NULL;
    if (!c->ctx->ktls) {
        ktls_keys_wipe(out);
        return -ENOSYS;
    }
    const mbedtls_ssl_ciphersuite_t *cs =
        c->ssl.session ? mbedtls_ssl_ciphersuite_from_id(c->ssl.session->ciphersuite) : NULL;
    ktls_cipher_t want = !cs                                        ? 0
                         : cs->cipher == MBEDTLS_CIPHER_AES_128_GCM ? KTLS_AES_128_GCM
                         : cs->cipher == MBEDTLS_CIPHER_AES_256_GCM ? KTLS_AES_256_GCM
                                                                    : 0;
    if (c->ssl.minor_ver != MBEDTLS_SSL_MINOR_VERSION_3)
        *why = "not TLS 1.2";
    else if (!want)
        *why = "the cipher suite is not AES-GCM";
    else if (!have || out->cipher != want)
        *why = "no keys from the handshake";
    else if (tls_conn_has_pending(c)) /* they would be read with mbedTLS's keys */
        *why = "records already read";
    if (*why) {
        ktls_keys_wipe(out);
        return -EOPNOTSUPP;
    }
    /* The next records' numbers: 1 each way after a handshake (Finished
     * was 0), read from mbedTLS rather than assumed. */
    memcpy(out->rx.seq, c->ssl.in_ctr, sizeof out->rx.seq);
    memcpy(out->tx.seq, c->ssl.cur_out_ctr, sizeof out->tx.seq);
    return 0;
}

ssize_t tls_conn_read(tls_conn_t *c, char *buf, size_t cap, char *msg, size_t msglen)
{
    int rc;
    /* 0 is not the end: mbedTLS 2.28 also returns it for an empty
     * application-data record (legal in TLS 1.2). Only the close_notify
     * alert ends the stream. Each call consumes a record, so this ends. */
    do
        rc = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf, cap);
    while (rc == 0);
    if (rc > 0)
        return rc;
    if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return -TLS_WANT_INPUT;
    if (rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
        return 0;
    if (c->in_start == c->in_end && c->in_cap > TLS_IN_KEEP) {
        /* Drained: give back what a burst grew (an idle pooled connection
         * keeps nothing large). */
        free(c->in);
        c->in = NULL;
        c->in_cap = c->in_start = c->in_end = 0;
    }
    mbed_msg(rc, "TLS read", msg, msglen);
    return rc < 0 ? rc : -1;
}

int tls_conn_write(tls_conn_t *c, const char *data, size_t n, char *msg, size_t msglen)
{
    while (n > 0) {
        int rc = mbedtls_ssl_write(&c->ssl, (const unsigned char *)data, n);
        if (rc < 0) {
            mbed_msg(rc, "TLS write", msg, msglen);
            return rc;
        }
        data += rc;
        n -= (size_t)rc;
    }
    return 0;
}

void tls_conn_close_notify(tls_conn_t *c)
{
    mbedtls_ssl_close_notify(&c->ssl);
}

/* ---- the shared context -------------------------------------------------- */

/* Cipher suites by name: ECDHE (forward secrecy) with an AEAD only. */
static const struct {
    const char *name;
    int ids[2]; /* ECDSA and RSA certificates */
} cipher_names[] = {
    {"chacha20-poly1305",
     {MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
      MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}},
    {"aes-128-gcm",
     {MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
      MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}},
    {"aes-256-gcm",
     {MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
      MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}},
};

/* "name,name,..." into a 0-terminated id list. -EINVAL names the bad one. */
static int parse_ciphers(const char *list, int *ids, size_t max, char *err, size_t errlen)
{
    size_t n = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ", ");
        int found = 0;
        for (size_t i = 0; len && i < sizeof cipher_names / sizeof cipher_names[0]; i++) {
            if (strlen(cipher_names[i].name) == len && strncmp(cipher_names[i].name, p, len) == 0) {
                if (n + 3 > max)
                    return -E2BIG;
                ids[n++] = cipher_names[i].ids[0];
                ids[n++] = cipher_names[i].ids[1];
                found = 1;
            }
        }
        if (len && !found) {
            snprintf(err, errlen,
                     "tls_ciphers: unknown cipher '%.*s' (known: chacha20-poly1305, "
                     "aes-128-gcm, aes-256-gcm)",
                     (int)len, p);
            return -EINVAL;
        }
        p += len;
        p += strspn(p, ", ");
    }
    ids[n] = 0;
    if (n == 0) {
        snprintf(err, errlen, "tls_ciphers: no cipher given");
        return -EINVAL;
    }
    return 0;
}

static int setup_conf(tls_ctx_t *ctx, mbedtls_ssl_config *conf, int authmode)
{
    int rc = mbedtls_ssl_config_defaults(conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc)
        return rc;
    mbedtls_ssl_conf_authmode(conf, authmode);
    mbedtls_ssl_conf_ca_chain(conf, &ctx->ca, NULL);
    mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &ctx->drbg);
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_ciphersuites(conf, ctx->ciphers);
    mbedtls_ssl_conf_session_tickets(conf, MBEDTLS_SSL_SESSION_TICKETS_ENABLED);
    mbedtls_ssl_conf_renegotiation(conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
    if (ctx->ktls)
        mbedtls_ssl_conf_export_keys_cb(conf, export_keys, ctx);
    return 0;
}

/* The ciphers to offer. mbedTLS decrypts ChaCha20-Poly1305 fastest, the
 * kernel AES-GCM (with the CPU's AES instructions, and off the pool):
 * where the kernel has TLS and tls_ciphers is left at its default, AES-GCM
 * goes first, so that servers that take the client's order pick it. */
static const char *ktls_ciphers(tls_ctx_t *ctx, const char *configured)
{
    ctx->ktls_kernel = ctx->ktls && ktls_kernel_has_tls();
    if (!ctx->ktls_kernel)
        return configured;
    const config_key_t *row = config_key_find("tls_ciphers");
    return row && row->def && strcmp(configured, row->def) == 0 ? TLS_CIPHERS_KTLS : configured;
}

static char **split_hosts(const char *list)
{
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return NULL;
    size_t i = 0;
    for (const char *p = list; *p;) {
        p += strspn(p, ", ");
        size_t len = strcspn(p, ", ");
        if (len && !(v[i++] = strndup(p, len)))
            break;
        p += len;
    }
    return v;
}

/* Parses the configured bundle (ca_file and ca_path as configured, NULL:
 * not set) into ca (initialised, empty): 0 or -EINVAL with err set. *have
 * says whether it holds a certificate. Any thread. */
static int load_ca(mbedtls_x509_crt *ca, const char *ca_file, const char *ca_path, int *have,
                   char *bundle, size_t bundlelen, char *err, size_t errlen)
{
    const char *file = ca_file, *path = ca_path;
    if (!file && !path)
        file = TLS_SYSTEM_BUNDLE;
    snprintf(bundle, bundlelen, "%s%s%s", file ? file : "", file && path ? " and " : "",
             path ? path : "");
    int rc = 0;
    /* Named, a bundle that cannot be read is said plainly (mbedTLS would
     * say "PK - Read/write of file failed"). */
    const char *unreadable = ca_file && access(ca_file, R_OK)    ? ca_file
                             : path && access(path, R_OK | X_OK) ? path
                                                                 : NULL;
    if (unreadable) {
        snprintf(err, errlen, "cannot read %s %s: %s", unreadable == path ? "ca_path" : "ca_file",
                 unreadable, strerror(errno));
        return -EINVAL;
    }
    if (file) {
        rc = mbedtls_x509_crt_parse_file(ca, file);
        if (rc < 0 && (ca_file || access(file, R_OK) == 0)) {
            mbed_msg(rc, file, err, errlen);
            return -EINVAL;
        }
    }
    if (path) {
        rc = mbedtls_x509_crt_parse_path(ca, path);
        if (rc < 0) {
            mbed_msg(rc, path, err, errlen);
            return -EINVAL;
        }
    }
    *have = ca->version != 0;
    if (!*have)
        log_warn("no CA certificates loaded (%s): every https:// fetch will fail verification",
                 file ? file : path);
    else if (rc > 0)
        log_warn("%d certificate(s) in the CA bundle could not be parsed and were skipped", rc);
    return 0;
}

int tls_ctx_new(const hubd_config_t *cfg, tls_ctx_t **out, char *err, size_t errlen)
{
    tls_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    mbedtls_entropy_init(&ctx->entropy);
    mbedtls_ctr_drbg_init(&ctx->drbg);
    mbedtls_x509_crt_init(&ctx->ca);
    mbedtls_ssl_config_init(&ctx->verify);
    mbedtls_ssl_config_init(&ctx->insecure);
    ctx->ktls = cfg->ktls == CONFIG_KTLS_AUTO;
    int rc = parse_ciphers(ktls_ciphers(ctx, cfg->tls_ciphers), ctx->ciphers,
                           sizeof ctx->ciphers / sizeof ctx->ciphers[0], err, errlen);
    if (rc)
        goto fail;
    static const char pers[] = "hubd";
    if ((rc = mbedtls_ctr_drbg_seed(&ctx->drbg, mbedtls_entropy_func, &ctx->entropy,
                                    (const unsigned char *)pers, sizeof pers - 1))) {
        mbed_msg(rc, "seeding the random generator", err, errlen);
        goto fail;
    }
    if ((rc = load_ca(&ctx->ca, cfg->ca_file, cfg->ca_path, &ctx->have_ca, ctx->bundle,
                      sizeof ctx->bundle, err, errlen)))
        goto fail;
    if ((rc = setup_conf(ctx, &ctx->verify, MBEDTLS_SSL_VERIFY_REQUIRED)) ||
        (rc = setup_conf(ctx, &ctx->insecure, MBEDTLS_SSL_VERIFY_NONE))) {
        mbed_msg(rc, "TLS configuration", err, errlen);
        goto fail;
    }
    if (cfg->tls_insecure_hosts && *cfg->tls_insecure_hosts) {
        ctx->insecure_hosts = split_hosts(cfg->tls_insecure_hosts);
        for (char **h = ctx->insecure_hosts; h && *h; h++)
            log_warn("TLS CERTIFICATE VERIFICATION IS OFF for host %s (tls_insecure_hosts): "
                     "anyone on the network path can impersonate it",
                     *h);
    }
    *out = ctx;
    return 0;
fail:
    tls_ctx_free(ctx);
    return rc < 0 ? rc : -EINVAL;
}

/* Whether two CA lists hold the same certificates, in the same order. */
static int same_chain(const mbedtls_x509_crt *a, const mbedtls_x509_crt *b)
{
    for (; a && b; a = a->next, b = b->next)
        if (a->raw.len != b->raw.len || (a->raw.len && memcmp(a->raw.p, b->raw.p, a->raw.len)))
            return 0;
    return !a && !b;
}

/* A bundle read again for a reload: what to read (copied from the
 * configuration on the loop), then what was read (in the pool). */
struct tls_ca {
    char *file, *path; /* ca_file, ca_path as configured (NULL: not set) */
    mbedtls_x509_crt crt;
    int rc, have;
    char bundle[sizeof((tls_ctx_t *)0)->bundle];
    char err[600];
};

tls_ca_t *tls_ca_new(const hubd_config_t *cfg)
{
    tls_ca_t *ca = calloc(1, sizeof *ca);
    if (!ca)
        return NULL;
    mbedtls_x509_crt_init(&ca->crt);
    ca->file = cfg->ca_file ? strdup(cfg->ca_file) : NULL;
    ca->path = cfg->ca_path ? strdup(cfg->ca_path) : NULL;
    if ((cfg->ca_file && !ca->file) || (cfg->ca_path && !ca->path)) {
        tls_ca_free(ca);
        return NULL;
    }
    return ca;
}

void tls_ca_load(tls_ca_t *ca)
{
    ca->rc = load_ca(&ca->crt, ca->file, ca->path, &ca->have, ca->bundle, sizeof ca->bundle,
                     ca->err, sizeof ca->err);
}

void tls_ca_free(tls_ca_t *ca)
{
    if (!ca)
        return;
    mbedtls_x509_crt_free(&ca->crt);
    free(ca->file);
    free(ca->path);
    free(ca);
}

int tls_ctx_take_ca(tls_ctx_t *ctx, tls_ca_t *ca, char *err, size_t errlen)
{
    if (ca->rc) {
        snprintf(err, errlen, "%s", ca->err);
        return -EINVAL;
    }
    /* The configuration points at ctx->ca, the head of the list: the new
     * list moves into it (and the old one into ca, freed with it).
     * Handshakes verify on the loop thread, so none is in the middle of
     * reading it now. */
    int changed = !same_chain(&ctx->ca, &ca->crt);
    mbedtls_x509_crt old = ctx->ca;
    ctx->ca = ca->crt;
    ca->crt = old;
    ctx->have_ca = ca->have;
    memcpy(ctx->bundle, ca->bundle, sizeof ca->bundle);
    /* A resumed session skips verification: one made under the old bundle
     * would go on trusting a CA just taken out of it. They go, and the
     * pools stop reusing the connections made before (tls_ctx_generation).
     * Only when the bundle changed: a reload for another key (log_level)
     * must not cost every origin a full handshake and a new connection. */
    if (changed) {
        sessions_forget(ctx);
        ctx->generation++;
    }
    return 0;
}

int tls_ctx_ktls(const tls_ctx_t *ctx)
{
    return ctx->ktls_kernel;
}

unsigned tls_ctx_generation(const tls_ctx_t *ctx)
{
    return ctx->generation;
}

void tls_ctx_free(tls_ctx_t *ctx)
{
    if (!ctx)
        return;
    sessions_forget(ctx);
    for (char **h = ctx->insecure_hosts; h && *h; h++)
        free(*h);
    free(ctx->insecure_hosts);
    mbedtls_ssl_config_free(&ctx->verify);
    mbedtls_ssl_config_free(&ctx->insecure);
    mbedtls_x509_crt_free(&ctx->ca);
    mbedtls_ctr_drbg_free(&ctx->drbg);
    mbedtls_entropy_free(&ctx->entropy);
    free(ctx);
}
