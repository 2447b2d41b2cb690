/* fleet_meta: the identity (PEM files into the two mbedTLS configurations)
 * and the link, one TLS connection over one uv_tcp_t through memory buffers,
 * which a server's connection (fleet_meta_serve.c) and an ask
 * (fleet_meta_ask.c) each embed. mbedTLS's BIO callbacks read ciphertext from
 * the link's input buffer, filled by uv_read, and append to its output
 * buffer, emptied by uv_write: a handshake or a record never waits on the
 * network, as in daemon/net/tls.c. */
#include "fleet_meta.h"
#include "fleet_meta_internal.h"
#include "list.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/error.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl_ciphersuites.h>

enum {
    FM_PEM_MAX = 1024 * 1024, /* a longer "PEM file" is no certificate or key */
    FM_READ_ROOM = 32 * 1024, /* offered to each read: two whole TLS records */
    FM_IN_CAP = 256 * 1024,   /* ciphertext held: mbedTLS takes each record once whole */
    FM_OUT_CAP = 1024 * 1024, /* ciphertext made, not yet written: one slice and its framing */
    FM_SESSIONS = 1024,       /* nodes whose sessions an identity keeps for its asks */
    /* A ticket, and a session kept, serve this long after their full
     * handshake: a certificate that expires, or a CA that changes at a
     * reload, is checked again within it. */
    FM_TICKET_S = 300,
};

/* ---- The identity ---------------------------------------------------------- */

/* ECDHE with an AEAD only, for EC and RSA certificates: two hubd nodes have
 * no reason to agree on anything older. */
static const int fm_ciphers[] = {
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    0,
};

/* The key exchange's groups, fastest first; mbedTLS also takes this list as
 * the curves an EC certificate may use, hence P-384 and P-521. */
static const mbedtls_ecp_group_id fm_curves[] = {
    MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1,
    MBEDTLS_ECP_DP_SECP521R1,  MBEDTLS_ECP_DP_NONE,
};

void fm_mbed_words(int rc, char *buf, size_t len)
{
    mbedtls_strerror(rc, buf, len);
}

/* The whole of a PEM file, NUL-terminated (mbedTLS counts the NUL of PEM
 * input in its length): 0, or a negative errno with err naming the file. */
static int pem_read(const char *what, const char *path, unsigned char **out, size_t *len, char *err,
                    size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
        return -e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = -errno;
    else if (!S_ISREG(st.st_mode))
        rc = -EINVAL;
    else if (st.st_size > FM_PEM_MAX)
        rc = -EFBIG;
    unsigned char *buf = rc ? NULL : malloc((size_t)st.st_size + 1);
    size_t n = 0;
    if (!rc && !buf)
        rc = -ENOMEM;
    while (!rc && n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r < 0 && errno != EINTR)
            rc = -errno;
        else if (r == 0)
            break; /* shorter than fstat said: what there is */
        else if (r > 0)
            n += (size_t)r;
    }
    close(fd);
    if (!rc) {
        buf[n] = '\0';
        if (!strstr((char *)buf, "-----BEGIN "))
            rc = -EINVAL;
    }
    if (rc) {
        snprintf(err, errlen, "%s %s: %s", what, path,
                 rc == -EINVAL && buf ? "not PEM (no -----BEGIN line)"
                 : rc == -EINVAL      ? "not a regular file"
                 : rc == -EFBIG       ? "larger than 1 MiB: not a certificate or key"
                                      : strerror(-rc));
        free(buf);
        return rc == -EFBIG ? -EINVAL : rc;
    }
    *out = buf;
    *len = n + 1;
    return 0;
}

static int crt_load(mbedtls_x509_crt *crt, const char *what, const char *path, char *err,
                    size_t errlen)
{
    unsigned char *pem;
    size_t len;
    int rc = pem_read(what, path, &pem, &len, err, errlen);
    if (rc)
        return rc;
    rc = mbedtls_x509_crt_parse(crt, pem, len);
    free(pem);
    if (rc == 0)
        return 0;
    char words[160] = "";
    if (rc < 0)
        fm_mbed_words(rc, words, sizeof words);
    else
        snprintf(words, sizeof words, "%d of its certificates do not parse", rc);
    snprintf(err, errlen, "%s %s: %s", what, path, words);
    return rc == MBEDTLS_ERR_X509_ALLOC_FAILED ? -ENOMEM : -EINVAL;
}

static int key_load(mbedtls_pk_context *key, const char *path, char *err, size_t errlen)
{
    unsigned char *pem;
    size_t len;
    int rc = pem_read("this node's key", path, &pem, &len, err, errlen);
    if (rc)
        return rc;
    rc = mbedtls_pk_parse_key(key, pem, len, NULL, 0);
    mbedtls_platform_zeroize(pem, len);
    free(pem);
    if (rc == 0)
        return 0;
    char words[160];
    fm_mbed_words(rc, words, sizeof words);
    snprintf(err, errlen, "this node's key %s: %s", path,
             rc == MBEDTLS_ERR_PK_PASSWORD_REQUIRED
                 ? "encrypted: hubd needs it unencrypted (readable by hubd alone)"
                 : words);
    return -EINVAL;
}

/* What the verification flags say, the most telling first. */
static const char *verify_words(uint32_t flags)
{
    if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED)
        return "not signed by the cluster CA";
    if (flags & MBEDTLS_X509_BADCERT_EXPIRED)
        return "expired";
    if (flags & MBEDTLS_X509_BADCERT_FUTURE)
        return "not valid yet";
    if (flags & MBEDTLS_X509_BADCERT_BAD_KEY)
        return "its key is too weak";
    if (flags & MBEDTLS_X509_BADCERT_BAD_MD)
        return "signed with a weak hash";
    return NULL;
}

/* The node's certificate must be one its peers take: signed by the CA and
 * in its dates, so a mistake shows at start-up, not as refused peers. */
static int crt_check(fmeta_identity_t *id, const char *ca_path, const char *cert_path, char *err,
                     size_t errlen)
{
    uint32_t flags = 0;
    if (mbedtls_x509_crt_verify(&id->cert, &id->ca, NULL, NULL, &flags, NULL, NULL) == 0)
        return 0;
    const mbedtls_x509_time *t = &id->cert.valid_to;
    const char *whose = "this node's certificate", *path = cert_path;
    if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) {
        snprintf(err, errlen, "this node's certificate %s is not signed by the cluster CA in %s",
                 cert_path, ca_path);
        return -EINVAL;
    }
    if (flags & (MBEDTLS_X509_BADCERT_EXPIRED | MBEDTLS_X509_BADCERT_FUTURE)) {
        int future = !(flags & MBEDTLS_X509_BADCERT_EXPIRED);
        if (future ? !mbedtls_x509_time_is_future(&id->cert.valid_from)
                   : !mbedtls_x509_time_is_past(&id->cert.valid_to)) {
            whose = "the cluster CA certificate"; /* the node's is in its dates: the CA is not */
            path = ca_path;
            t = future ? &id->ca.valid_from : &id->ca.valid_to;
        } else if (future) {
            t = &id->cert.valid_from;
        }
        snprintf(err, errlen, "%s %s %s %04d-%02d-%02d %02d:%02d:%02d UTC", whose, path,
                 future ? "is not valid before" : "expired on", t->year, t->mon, t->day, t->hour,
                 t->min, t->sec);
        return -EKEYEXPIRED;
    }
    char info[200] = "";
    const char *w = verify_words(flags);
    if (!w) {
        mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
        info[strcspn(info, "\n")] = '\0';
        w = info;
    }
    snprintf(err, errlen, "this node's certificate %s does not verify against %s: %s", cert_path,
             ca_path, w);
    return -EINVAL;
}

static int ticket_write(void *p, const mbedtls_ssl_session *session, unsigned char *start,
                        const unsigned char *end, size_t *tlen, uint32_t *lifetime);
static int ticket_parse(void *p, mbedtls_ssl_session *session, unsigned char *buf, size_t len);

static int conf_setup(fmeta_identity_t *id, mbedtls_ssl_config *conf, int endpoint)
{
    int rc = mbedtls_ssl_config_defaults(conf, endpoint, MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc)
        return rc;
    /* Both ends: the peer's certificate is required and checked against
     * the CA. No name is set, so none is checked: membership is the CA's
     * signature. */
    mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    mbedtls_ssl_conf_ca_chain(conf, &id->ca, NULL);
    mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &id->drbg);
    mbedtls_ssl_conf_min_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_max_version(conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_ciphersuites(conf, fm_ciphers);
    mbedtls_ssl_conf_curves(conf, fm_curves);
    mbedtls_ssl_conf_renegotiation(conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
    /* One request per connection, but every node that wants a file asks
     * its seed every few seconds: a seed of 63 askers spent its loop on
     * full handshakes and answered too late. A ticket (RFC 5077) makes
     * the next handshake of the same two nodes an abbreviated one. */
    if (endpoint == MBEDTLS_SSL_IS_SERVER)
        mbedtls_ssl_conf_session_tickets_cb(conf, ticket_write, ticket_parse, id);
    return mbedtls_ssl_conf_own_cert(conf, &id->cert, &id->key);
}

/* The callbacks' argument is the identity: its ticket context inside. */
static int ticket_write(void *p, const mbedtls_ssl_session *session, unsigned char *start,
                        const unsigned char *end, size_t *tlen, uint32_t *lifetime)
{
    fmeta_identity_t *id = p;
    return mbedtls_ssl_ticket_write(&id->tickets, session, start, end, tlen, lifetime);
}

/* mbedTLS's ticket parser (which checks the ticket's age against
 * FM_TICKET_S), counting the handshakes it lets resume. */
static int ticket_parse(void *p, mbedtls_ssl_session *session, unsigned char *buf, size_t len)
{
    fmeta_identity_t *id = p;
    int rc = mbedtls_ssl_ticket_parse(&id->tickets, session, buf, len);
    if (rc == 0)
        id->resumed++;
    return rc;
}

static fm_session_t *session_find(fmeta_identity_t *id, const char *peer)
{
    for (size_t i = 0; i < id->nsessions; i++)
        if (strcmp(id->sessions[i].peer, peer) == 0)
            return &id->sessions[i];
    return NULL;
}

void fm_session_offer(fmeta_identity_t *id, fm_link_t *l)
{
    fm_session_t *k = session_find(id, l->peer);
    if (!k)
        return;
    if (time(NULL) - k->kept_at >= FM_TICKET_S) {
        fm_session_forget(id, l);
        return;
    }
    k->used = ++id->uses;
    if (mbedtls_ssl_set_session(&l->ssl, &k->session) != 0)
        fm_session_forget(id, l); /* a full handshake then, as without one */
}

void fm_session_keep(fmeta_identity_t *id, fm_link_t *l)
{
    fm_session_t *k = session_find(id, l->peer);
    time_t kept_at = time(NULL);
    if (k && l->ssl.session && l->ssl.session->start == k->session.start)
        kept_at = k->kept_at; /* resumed: the age runs from the full handshake */
    if (!k && id->nsessions < FM_SESSIONS) {
        if (!id->sessions && !(id->sessions = calloc(FM_SESSIONS, sizeof *id->sessions)))
            return;
        k = &id->sessions[id->nsessions++];
        mbedtls_ssl_session_init(&k->session);
    } else if (!k) {
        k = &id->sessions[0];
        for (size_t i = 1; i < id->nsessions; i++)
            if (id->sessions[i].used < k->used)
                k = &id->sessions[i];
    }
    mbedtls_ssl_session_free(&k->session);
    mbedtls_ssl_session_init(&k->session);
    snprintf(k->peer, sizeof k->peer, "%s", l->peer);
    k->kept_at = kept_at;
    k->used = ++id->uses;
    if (mbedtls_ssl_get_session(&l->ssl, &k->session) != 0)
        k->kept_at = 0; /* too old to offer: replaced by the next keep */
}

void fm_session_forget(fmeta_identity_t *id, fm_link_t *l)
{
    fm_session_t *k = session_find(id, l->peer);
    if (!k)
        return;
    mbedtls_ssl_session_free(&k->session);
    *k = id->sessions[--id->nsessions]; /* the last one moves into its place */
}

int fmeta_identity_new(const char *ca_path, const char *cert_path, const char *key_path,
                       fmeta_identity_t **out, char *err, size_t errlen)
{
    fmeta_identity_t *id = calloc(1, sizeof *id);
    if (!id) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    mbedtls_entropy_init(&id->entropy);
    mbedtls_ctr_drbg_init(&id->drbg);
    mbedtls_x509_crt_init(&id->ca);
    mbedtls_x509_crt_init(&id->cert);
    mbedtls_pk_init(&id->key);
    mbedtls_ssl_config_init(&id->server);
    mbedtls_ssl_config_init(&id->client);
    mbedtls_ssl_ticket_init(&id->tickets);
    int rc;
    if ((rc = crt_load(&id->ca, "the cluster CA certificate", ca_path, err, errlen)) ||
        (rc = crt_load(&id->cert, "this node's certificate", cert_path, err, errlen)) ||
        (rc = key_load(&id->key, key_path, err, errlen)))
        goto fail;
    if (mbedtls_pk_check_pair(&id->cert.pk, &id->key) != 0) {
        snprintf(err, errlen, "this node's key %s does not match its certificate %s", key_path,
                 cert_path);
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = crt_check(id, ca_path, cert_path, err, errlen)))
        goto fail;
    static const char pers[] = "hubd fleet_meta";
    char words[160];
    if ((rc = mbedtls_ctr_drbg_seed(&id->drbg, mbedtls_entropy_func, &id->entropy,
                                    (const unsigned char *)pers, sizeof pers - 1)) ||
        (rc = mbedtls_ssl_ticket_setup(&id->tickets, mbedtls_ctr_drbg_random, &id->drbg,
                                       MBEDTLS_CIPHER_AES_256_GCM, FM_TICKET_S)) ||
        (rc = conf_setup(id, &id->server, MBEDTLS_SSL_IS_SERVER)) ||
        (rc = conf_setup(id, &id->client, MBEDTLS_SSL_IS_CLIENT))) {
        fm_mbed_words(rc, words, sizeof words);
        snprintf(err, errlen, "the fleet's TLS configuration: %s", words);
        rc = -ENOMEM;
        goto fail;
    }
    *out = id;
    return 0;
fail:
    fmeta_identity_free(id);
    return rc;
}

void fmeta_identity_free(fmeta_identity_t *id)
{
    if (!id)
        return;
    mbedtls_ssl_config_free(&id->server);
    mbedtls_ssl_config_free(&id->client);
    mbedtls_ssl_ticket_free(&id->tickets);
    for (size_t i = 0; i < id->nsessions; i++)
        mbedtls_ssl_session_free(&id->sessions[i].session);
    free(id->sessions);
    mbedtls_pk_free(&id->key);
    mbedtls_x509_crt_free(&id->cert);
    mbedtls_x509_crt_free(&id->ca);
    mbedtls_ctr_drbg_free(&id->drbg);
    mbedtls_entropy_free(&id->entropy);
    free(id);
}

/* ---- A link: TLS over one TCP socket, through memory --------------------------- */

typedef struct fm_write {
    uv_write_t req;
    fm_link_t *link;
    char data[]; /* the ciphertext, copied out of link->out */
} fm_write_t;

static int bio_send(void *arg, const unsigned char *buf, size_t len)
{
    fm_link_t *l = arg;
    return bytebuf_append(&l->out, buf, len) ? MBEDTLS_ERR_SSL_ALLOC_FAILED : (int)len;
}

static int bio_recv(void *arg, unsigned char *buf, size_t len)
{
    fm_link_t *l = arg;
    size_t have = bytebuf_len(&l->in);
    if (have == 0)
        return MBEDTLS_ERR_SSL_WANT_READ; /* the next read will call again */
    if (len > have)
        len = have;
    memcpy(buf, bytebuf_data(&l->in), len);
    bytebuf_consume(&l->in, len);
    return (int)len;
}

static void link_on_close(uv_handle_t *h)
{
    fm_link_t *l = h->data;
    if (--l->handles > 0)
        return;
    mbedtls_ssl_free(&l->ssl);
    bytebuf_free(&l->in);
    bytebuf_free(&l->out);
    l->ops->closed(l);
}

/* The link's one close path: both handles; a write or connect in flight
 * comes back UV_ECANCELED before the close callbacks. */
void fm_link_close(fm_link_t *l)
{
    if (l->closing)
        return;
    l->closing = 1;
    uv_close((uv_handle_t *)&l->timer, link_on_close);
    uv_close((uv_handle_t *)&l->tcp, link_on_close);
}

/* The handles, on loop. On failure the link is closing already, and its
 * owner goes in ops->closed like any other. */
int fm_link_init(fm_link_t *l, uv_loop_t *loop, const fm_link_ops_t *ops)
{
    l->ops = ops;
    bytebuf_init(&l->in, FM_IN_CAP);
    bytebuf_init(&l->out, FM_OUT_CAP);
    mbedtls_ssl_init(&l->ssl);
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    l->handles = 1;
    int rc = uv_tcp_init(loop, &l->tcp);
    if (rc) {
        l->closing = 1;
        uv_close((uv_handle_t *)&l->timer, link_on_close);
        return rc;
    }
    l->tcp.data = l;
    l->handles = 2;
    return 0;
}

/* The TLS context, once the link is worth one (not for a connection closed
 * at accept). */
int fm_link_tls(fm_link_t *l, const mbedtls_ssl_config *conf)
{
    if (mbedtls_ssl_setup(&l->ssl, conf) != 0)
        return -ENOMEM;
    mbedtls_ssl_set_bio(&l->ssl, l, bio_send, bio_recv, NULL);
    return 0;
}

void fm_link_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    fm_link_t *l = h->data;
    (void)hint;
    if (bytebuf_reserve(&l->in, FM_READ_ROOM) != 0) {
        *buf = uv_buf_init(NULL, 0); /* the read fails with UV_ENOBUFS */
        return;
    }
    *buf = uv_buf_init(bytebuf_tail(&l->in), FM_READ_ROOM);
}

static void link_on_written(uv_write_t *req, int status)
{
    fm_write_t *w = container_of(req, fm_write_t, req);
    fm_link_t *l = w->link;
    free(w);
    l->writes--;
    if (status == UV_ECANCELED || l->closing)
        return;
    if (status < 0 || l->writes == 0)
        l->ops->written(l, status);
}

/* Hands the ciphertext made so far to the socket: 0 or a negative errno. */
int fm_link_flush(fm_link_t *l)
{
    size_t n = bytebuf_len(&l->out);
    if (n == 0 || l->closing)
        return 0;
    fm_write_t *w = malloc(sizeof *w + n);
    if (!w)
        return -ENOMEM;
    memcpy(w->data, bytebuf_data(&l->out), n);
    bytebuf_clear(&l->out);
    w->link = l;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    int rc = uv_write(&w->req, (uv_stream_t *)&l->tcp, &b, 1, link_on_written);
    if (rc) {
        free(w);
        return rc;
    }
    l->writes++;
    return 0;
}

/* Before a close that follows a failed handshake: the alert mbedTLS made,
 * if the socket takes it at once, so the peer learns why. Best effort. */
void fm_link_flush_now(fm_link_t *l)
{
    if (bytebuf_len(&l->out) && l->writes == 0 && !l->closing) {
        uv_buf_t b = uv_buf_init(bytebuf_data(&l->out), (unsigned)bytebuf_len(&l->out));
        (void)uv_try_write((uv_stream_t *)&l->tcp, &b, 1);
    }
    bytebuf_clear(&l->out);
}

/* Encrypts all of data into l->out: 0 or an mbedTLS error. */
int fm_link_encrypt(fm_link_t *l, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n > 0) {
        int rc = mbedtls_ssl_write(&l->ssl, p, n);
        if (rc < 0)
            return rc;
        p += rc;
        n -= (size_t)rc;
    }
    return 0;
}

/* The alerts a refused handshake comes back with, by name (RFC 5246). */
static const struct {
    unsigned char code;
    const char *name;
} alert_names[] = {
    {MBEDTLS_SSL_ALERT_MSG_HANDSHAKE_FAILURE, "handshake_failure"},
    {MBEDTLS_SSL_ALERT_MSG_NO_CERT, "no_certificate"},
    {MBEDTLS_SSL_ALERT_MSG_BAD_CERT, "bad_certificate"},
    {MBEDTLS_SSL_ALERT_MSG_UNSUPPORTED_CERT, "unsupported_certificate"},
    {MBEDTLS_SSL_ALERT_MSG_CERT_REVOKED, "certificate_revoked"},
    {MBEDTLS_SSL_ALERT_MSG_CERT_EXPIRED, "certificate_expired"},
    {MBEDTLS_SSL_ALERT_MSG_CERT_UNKNOWN, "certificate_unknown"},
    {MBEDTLS_SSL_ALERT_MSG_UNKNOWN_CA, "unknown_ca"},
    {MBEDTLS_SSL_ALERT_MSG_ACCESS_DENIED, "access_denied"},
    {MBEDTLS_SSL_ALERT_MSG_PROTOCOL_VERSION, "protocol_version"},
    {MBEDTLS_SSL_ALERT_MSG_INSUFFICIENT_SECURITY, "insufficient_security"},
};

static const char *alert_name(unsigned char code)
{
    for (size_t i = 0; i < sizeof alert_names / sizeof alert_names[0]; i++)
        if (alert_names[i].code == code)
            return alert_names[i].name;
    return "other";
}

/* Why a handshake failed, for the log and the asker: the peer's certificate
 * as this end judged it, or the alert the peer sent when it refused ours. */
void fm_handshake_why(fm_link_t *l, int rc, char *why, size_t len)
{
    if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        uint32_t flags = mbedtls_ssl_get_verify_result(&l->ssl);
        char info[200];
        const char *w = verify_words(flags);
        if (!w) {
            mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
            info[strcspn(info, "\n")] = '\0';
            w = info;
        }
        snprintf(why, len, "%s: its certificate is not the cluster's: %s", l->peer, w);
    } else if (rc == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE) {
        /* mbedTLS 2.28 leaves the alert in in_msg (public there). */
        snprintf(why, len,
                 "%s refused the TLS handshake (alert %s): most likely it does not take "
                 "this node's certificate as the cluster's",
                 l->peer, alert_name(l->ssl.in_msg ? l->ssl.in_msg[1] : 0));
    } else if (rc == MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE) {
        snprintf(why, len, "%s sent no certificate", l->peer);
    } else {
        char words[160];
        fm_mbed_words(rc, words, sizeof words);
        snprintf(why, len, "%s: TLS handshake failed: %s", l->peer, words);
    }
}

int fm_addr_parse(const char *ip, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (!ip || port < 0 || port > 65535)
        return -EINVAL;
    if (uv_ip4_addr(ip, port, (struct sockaddr_in *)ss) == 0 ||
        uv_ip6_addr(ip, port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return -EINVAL;
}
