/* ktls: kernel TLS (Linux's tls module) for a TLS 1.2 connection whose
 * handshake mbedTLS did (tls.h).
 *
 * Once the handshake is done, the record keys, the implicit parts of the
 * nonces (GCM's 4-byte salts) and the next sequence number of each
 * direction go to the kernel (TCP_ULP "tls", then SOL_TLS TLS_RX and
 * TLS_TX), and from then on the socket carries plaintext: the kernel
 * decrypts each record as it is read and makes records of what is
 * written. Only AES-128-GCM and AES-256-GCM in TLS 1.2; any other suite
 * stays with mbedTLS.
 *
 * What reading such a socket gives: application data, as plaintext. A
 * record of another type (an alert; a handshake message, which a kernel
 * TLS socket cannot answer) fails a plain read with EIO and stays queued:
 * ktls_recv_record takes it, with its type. A record that fails its
 * integrity check fails the read with EBADMSG, and the socket with it:
 * none of its bytes are given.
 *
 * The keys are secrets: a ktls_keys_t lives on the stack for as long as
 * the hand-over takes and is wiped (ktls_keys_wipe) after it. Pure
 * functions and single non-blocking system calls on a socket the caller
 * owns; any thread (hubd calls them on the loop). */
#ifndef HUBD_KTLS_H
#define HUBD_KTLS_H

#include <stddef.h>
#include <sys/types.h>

typedef enum { KTLS_AES_128_GCM = 1, KTLS_AES_256_GCM = 2 } ktls_cipher_t;

/* One direction's record state. */
typedef struct ktls_dir {
    unsigned char key[32]; /* the write key: keylen bytes of it */
    unsigned char salt[4]; /* the write IV: the nonce's implicit part (RFC 5288) */
    unsigned char seq[8];  /* the next record's sequence number, big-endian */
} ktls_dir_t;

typedef struct ktls_keys {
    ktls_cipher_t cipher;
    size_t keylen; /* 16 or 32 */
    ktls_dir_t tx; /* the client's: what hubd sends */
    ktls_dir_t rx; /* the server's: what hubd reads */
} ktls_keys_t;

/* The TLS alert a socket gets or sends to end cleanly (RFC 5246 7.2.1). */
#define KTLS_ALERT_CLOSE_NOTIFY 0
#define KTLS_RECORD_ALERT 21

/* Fills k from a TLS 1.2 key block (RFC 5246 6.3: the MAC keys, the
 * client's and the server's write keys, then their write IVs) as mbedTLS
 * hands it over, for the client's side. The sequence numbers stay zero:
 * the caller knows them. 0, or -EOPNOTSUPP for a block of another shape
 * (MAC keys, an IV that is not GCM's 4 bytes, another key length). */
int ktls_keys_from_block(ktls_keys_t *k, const unsigned char *kb, size_t maclen, size_t keylen,
                         size_t ivlen);

/* What the kernel takes for one direction (struct tls12_crypto_info_aes_gcm_128
 * or _256 of <linux/tls.h>), into buf: its size, or 0 when cap is too
 * small (KTLS_INFO_MAX is enough). The explicit nonce of the first record
 * sent is the sequence number, as mbedTLS makes it. */
#define KTLS_INFO_MAX 64
size_t ktls_crypto_info(const ktls_keys_t *k, int tx, void *buf, size_t cap);

/* Whether the running kernel has the tls module loaded (it is in
 * /proc/sys/net/ipv4/tcp_available_ulp). A process without CAP_NET_ADMIN
 * cannot make the kernel load it. Reads a file: start-up only. */
int ktls_kernel_has_tls(void);

/* Hands k to the kernel for the connected TCP socket fd: reading first,
 * then writing. 0 when the kernel reads from now on, *tx saying whether it
 * writes too (else the caller's TLS keeps writing, its sequence number
 * unchanged). A negative errno when nothing changed, *step naming the
 * call that refused ("TCP_ULP": -ENOENT is no tls module; "TLS_RX": a
 * kernel without this cipher, or gcm(aes) missing). */
int ktls_start(int fd, const ktls_keys_t *k, int *tx, const char **step);

/* Takes the record at the head of fd after a read failed with EIO: its
 * type into *type and its content (at most cap bytes) into buf. The
 * content's length, or a negative errno. */
ssize_t ktls_recv_record(int fd, unsigned char *type, unsigned char *buf, size_t cap);

/* Sends an alert as a record of its own through the kernel's writing side
 * (close_notify: level 1, description 0). Never blocks or raises SIGPIPE:
 * 0, or a negative errno (-EAGAIN: no room in the socket now). */
int ktls_send_alert(int fd, unsigned char level, unsigned char desc);

/* The name of an alert's description (RFC 5246 7.2; "bad_record_mac"),
 * or "unknown". */
const char *ktls_alert_name(unsigned char desc);

/* Forgets the secrets in k. */
void ktls_keys_wipe(ktls_keys_t *k);

#endif
