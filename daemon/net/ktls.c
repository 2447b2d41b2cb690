/* ktls: handing a TLS 1.2 AES-GCM connection's records to the kernel. */
#include "ktls.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

#define TLS_RECORD_DATA 23

int ktls_keys_from_block(ktls_keys_t *k, const unsigned char *kb, size_t maclen, size_t keylen,
                         size_t ivlen)
{
    memset(k, 0, sizeof *k);
    /* An AEAD's block has no MAC keys; GCM's IVs are the 4-byte salts. */
    if (maclen != 0 || ivlen != sizeof k->tx.salt || (keylen != 16 && keylen != 32))
        return -EOPNOTSUPP;
    k->cipher = keylen == 16 ? KTLS_AES_128_GCM : KTLS_AES_256_GCM;
    k->keylen = keylen;
    memcpy(k->tx.key, kb, keylen); /* client_write_key */
    memcpy(k->rx.key, kb + keylen, keylen);
    memcpy(k->tx.salt, kb + 2 * keylen, ivlen); /* client_write_IV */
    memcpy(k->rx.salt, kb + 2 * keylen + ivlen, ivlen);
    return 0;
}

/* The kernel's structs differ by the key's size only. The first record's
 * explicit nonce is the sequence number, as mbedTLS chooses it; the kernel
 * counts both up per record. (Reading takes each record's nonce from the
 * record.) */
#define FILL_INFO(ci, ctype, d)                                                                    \
    do {                                                                                           \
        (ci).info.version = TLS_1_2_VERSION;                                                       \
        (ci).info.cipher_type = (ctype);                                                           \
        memcpy((ci).key, (d)->key, sizeof(ci).key);                                                \
        memcpy((ci).salt, (d)->salt, sizeof(ci).salt);                                             \
        memcpy((ci).rec_seq, (d)->seq, sizeof(ci).rec_seq);                                        \
        memcpy((ci).iv, (d)->seq, sizeof(ci).iv);                                                  \
    } while (0)

size_t ktls_crypto_info(const ktls_keys_t *k, int tx, void *buf, size_t cap)
{
    const ktls_dir_t *d = tx ? &k->tx : &k->rx;
    size_t n = 0;
    if (k->cipher == KTLS_AES_128_GCM) {
        struct tls12_crypto_info_aes_gcm_128 ci;
        memset(&ci, 0, sizeof ci);
        FILL_INFO(ci, TLS_CIPHER_AES_GCM_128, d);
        if (cap >= sizeof ci)
            memcpy(buf, &ci, n = sizeof ci);
        explicit_bzero(&ci, sizeof ci);
    } else if (k->cipher == KTLS_AES_256_GCM) {
        struct tls12_crypto_info_aes_gcm_256 ci;
        memset(&ci, 0, sizeof ci);
        FILL_INFO(ci, TLS_CIPHER_AES_GCM_256, d);
        if (cap >= sizeof ci)
            memcpy(buf, &ci, n = sizeof ci);
        explicit_bzero(&ci, sizeof ci);
    }
    return n;
}

int ktls_kernel_has_tls(void)
{
    char buf[256];
    int fd = open("/proc/sys/net/ipv4/tcp_available_ulp", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (char *save = NULL, *w = strtok_r(buf, " \t\n", &save); w;
         w = strtok_r(NULL, " \t\n", &save))
        if (strcmp(w, "tls") == 0)
            return 1;
    return 0;
}

int ktls_start(int fd, const ktls_keys_t *k, int *tx, const char **step)
{
    unsigned char info[KTLS_INFO_MAX];
    *tx = 0;
    *step = "TLS_RX";
    size_t n = ktls_crypto_info(k, 0, info, sizeof info);
    if (!n)
        return -EOPNOTSUPP;
    int rc = 0;
    if (setsockopt(fd, SOL_TCP, TCP_ULP, "tls", sizeof "tls") != 0) {
        *step = "TCP_ULP";
        rc = -errno;
    } else if (setsockopt(fd, SOL_TLS, TLS_RX, info, (socklen_t)n) != 0) {
        /* With the module attached and no keys yet, the socket still
         * passes bytes through as they are: nothing changed. */
        rc = -errno;
    }
    explicit_bzero(info, sizeof info);
    if (rc)
        return rc;
    n = ktls_crypto_info(k, 1, info, sizeof info);
    *tx = setsockopt(fd, SOL_TLS, TLS_TX, info, (socklen_t)n) == 0;
    explicit_bzero(info, sizeof info);
    return 0;
}

/* Control-message room for one byte, aligned as a cmsghdr. */
typedef union {
    char buf[CMSG_SPACE(sizeof(unsigned char))];
    struct cmsghdr align;
} ktls_cmsg_t;

ssize_t ktls_recv_record(int fd, unsigned char *type, unsigned char *buf, size_t cap)
{
    ktls_cmsg_t c;
    struct iovec iov = {.iov_base = buf, .iov_len = cap};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    memset(&c, 0, sizeof c);
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n < 0)
        return -errno;
    *type = TLS_RECORD_DATA; /* the kernel names every record's type; this is a fallback */
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h))
        if (h->cmsg_level == SOL_TLS && h->cmsg_type == TLS_GET_RECORD_TYPE)
            *type = *CMSG_DATA(h);
    return n;
}

int ktls_send_alert(int fd, unsigned char level, unsigned char desc)
{
    unsigned char alert[2] = {level, desc};
    ktls_cmsg_t c;
    struct iovec iov = {.iov_base = alert, .iov_len = sizeof alert};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    memset(&c, 0, sizeof c);
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_TLS;
    h->cmsg_type = TLS_SET_RECORD_TYPE;
    h->cmsg_len = CMSG_LEN(sizeof(unsigned char));
    *CMSG_DATA(h) = KTLS_RECORD_ALERT;
    return sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

const char *ktls_alert_name(unsigned char desc)
{
    static const struct {
        unsigned char desc;
        const char *name;
    } names[] = {
        {0, "close_notify"},
        {10, "unexpected_message"},
        {20, "bad_record_mac"},
        {22, "record_overflow"},
        {40, "handshake_failure"},
        {42, "bad_certificate"},
        {43, "unsupported_certificate"},
        {44, "certificate_revoked"},
        {45, "certificate_expired"},
        {46, "certificate_unknown"},
        {47, "illegal_parameter"},
        {48, "unknown_ca"},
        {49, "access_denied"},
        {50, "decode_error"},
        {51, "decrypt_error"},
        {70, "protocol_version"},
        {71, "insufficient_security"},
        {80, "internal_error"},
        {86, "inappropriate_fallback"},
        {90, "user_canceled"},
        {100, "no_renegotiation"},
        {110, "unsupported_extension"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].desc == desc)
            return names[i].name;
    return "unknown";
}

void ktls_keys_wipe(ktls_keys_t *k)
{
    explicit_bzero(k, sizeof *k);
}
