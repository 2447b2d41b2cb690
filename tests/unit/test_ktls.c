/* Unit tests for ktls and tls_conn_ktls_keys: what hubd would hand the
 * kernel is right. A handshake between tls.h's client and an mbedTLS
 * server runs in memory; then the server's records must open, and records
 * made for it must be taken, with exactly the bytes of the kernel's
 * structs (key, salt, explicit nonce, sequence number), AES-GCM as RFC
 * 5288 and RFC 5246 6.2.3.3 say it: nonce = salt || explicit nonce,
 * additional data = seq || type || version || length. The kernel's own
 * side is tested in a VM (tests/vm/ktls_vm_test.sh). */
#include "config.h"
#include "ktls.h"
#include "tls.h"

#include <check.h>
#include <errno.h>
#include <linux/tls.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/certs.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/gcm.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>

/* ---- slicing the key block, the kernel's struct ----------------------- */

START_TEST(ktls_keys_from_block_slices_the_clients_side)
{
    unsigned char kb[256];
    for (int i = 0; i < 256; i++)
        kb[i] = (unsigned char)i;
    for (size_t keylen = 16; keylen <= 32; keylen += 16) {
        ktls_keys_t k;
        ck_assert_int_eq(ktls_keys_from_block(&k, kb, 0, keylen, 4), 0);
        ck_assert_int_eq(k.cipher, keylen == 16 ? KTLS_AES_128_GCM : KTLS_AES_256_GCM);
        ck_assert_uint_eq(k.keylen, keylen);
        /* client_write_key, server_write_key, client_write_IV, server_write_IV */
        ck_assert_mem_eq(k.tx.key, kb, keylen);
        ck_assert_mem_eq(k.rx.key, kb + keylen, keylen);
        ck_assert_mem_eq(k.tx.salt, kb + 2 * keylen, 4);
        ck_assert_mem_eq(k.rx.salt, kb + 2 * keylen + 4, 4);
        static const unsigned char zero[8];
        ck_assert_mem_eq(k.tx.seq, zero, 8);
        ktls_keys_wipe(&k);
        ck_assert_int_eq(k.cipher, 0);
    }
}
END_TEST

START_TEST(ktls_keys_from_block_refuses_other_suites)
{
    unsigned char kb[256] = {0};
    ktls_keys_t k;
    ck_assert_int_eq(ktls_keys_from_block(&k, kb, 32, 32, 16), -EOPNOTSUPP); /* CBC + HMAC */
    ck_assert_int_eq(ktls_keys_from_block(&k, kb, 0, 32, 12), -EOPNOTSUPP);  /* ChaCha20 */
    ck_assert_int_eq(ktls_keys_from_block(&k, kb, 0, 24, 4), -EOPNOTSUPP);
}
END_TEST

START_TEST(ktls_crypto_info_is_the_kernels_struct)
{
    ktls_keys_t k;
    unsigned char kb[256];
    for (int i = 0; i < 256; i++)
        kb[i] = (unsigned char)(0xa0 + i);
    ck_assert_int_eq(ktls_keys_from_block(&k, kb, 0, 16, 4), 0);
    memcpy(k.tx.seq, "\0\0\0\0\0\0\0\1", 8);
    memcpy(k.rx.seq, "\0\0\0\0\0\0\0\2", 8);
    unsigned char buf[KTLS_INFO_MAX];
    struct tls12_crypto_info_aes_gcm_128 c128;
    ck_assert_uint_eq(ktls_crypto_info(&k, 1, buf, sizeof buf), sizeof c128);
    memcpy(&c128, buf, sizeof c128);
    ck_assert_uint_eq(c128.info.version, TLS_1_2_VERSION);
    ck_assert_uint_eq(c128.info.cipher_type, TLS_CIPHER_AES_GCM_128);
    ck_assert_mem_eq(c128.key, kb, 16);
    ck_assert_mem_eq(c128.salt, kb + 32, 4);
    ck_assert_mem_eq(c128.rec_seq, "\0\0\0\0\0\0\0\1", 8);
    ck_assert_mem_eq(c128.iv, "\0\0\0\0\0\0\0\1", 8); /* the first explicit nonce */
    ck_assert_uint_eq(ktls_crypto_info(&k, 1, buf, sizeof c128 - 1), 0);

    ck_assert_int_eq(ktls_keys_from_block(&k, kb, 0, 32, 4), 0);
    memcpy(k.rx.seq, "\0\0\0\0\0\0\0\2", 8);
    struct tls12_crypto_info_aes_gcm_256 c256;
    ck_assert_uint_eq(ktls_crypto_info(&k, 0, buf, sizeof buf), sizeof c256);
    memcpy(&c256, buf, sizeof c256);
    ck_assert_uint_eq(c256.info.cipher_type, TLS_CIPHER_AES_GCM_256);
    ck_assert_mem_eq(c256.key, kb + 32, 32);
    ck_assert_mem_eq(c256.salt, kb + 64 + 4, 4);
    ck_assert_mem_eq(c256.rec_seq, "\0\0\0\0\0\0\0\2", 8);
}
END_TEST

START_TEST(ktls_alerts_have_names)
{
    ck_assert_str_eq(ktls_alert_name(0), "close_notify");
    ck_assert_str_eq(ktls_alert_name(20), "bad_record_mac");
    ck_assert_str_eq(ktls_alert_name(40), "handshake_failure");
    ck_assert_str_eq(ktls_alert_name(255), "unknown");
}
END_TEST

/* ---- a handshake in memory ---------------------------------------------- */

typedef struct membuf {
    unsigned char data[1 << 16];
    size_t len;
} membuf_t;

/* The server end: mbedTLS over two memory buffers. */
typedef struct server {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
    mbedtls_ssl_ticket_context tickets;
    mbedtls_ssl_config conf;
    mbedtls_ssl_context ssl;
    membuf_t in, out; /* from the client, to the client */
} server_t;

static server_t srv;
static hubd_config_t cfg;
static tls_ctx_t *ctx;

static int srv_send(void *arg, const unsigned char *buf, size_t len)
{
    membuf_t *b = &((server_t *)arg)->out;
    ck_assert_uint_le(b->len + len, sizeof b->data);
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    return (int)len;
}

static int srv_recv(void *arg, unsigned char *buf, size_t len)
{
    membuf_t *b = &((server_t *)arg)->in;
    if (b->len == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    if (len > b->len)
        len = b->len;
    memcpy(buf, b->data, len);
    memmove(b->data, b->data + len, b->len - len);
    b->len -= len;
    return (int)len;
}

static void server_setup(void)
{
    memset(&srv, 0, sizeof srv);
    mbedtls_entropy_init(&srv.entropy);
    mbedtls_ctr_drbg_init(&srv.drbg);
    mbedtls_x509_crt_init(&srv.crt);
    mbedtls_pk_init(&srv.key);
    mbedtls_ssl_ticket_init(&srv.tickets);
    mbedtls_ssl_config_init(&srv.conf);
    ck_assert_int_eq(mbedtls_ctr_drbg_seed(&srv.drbg, mbedtls_entropy_func, &srv.entropy, NULL, 0),
                     0);
    ck_assert_int_eq(mbedtls_x509_crt_parse(&srv.crt,
                                            (const unsigned char *)mbedtls_test_srv_crt_ec,
                                            mbedtls_test_srv_crt_ec_len),
                     0);
    ck_assert_int_eq(mbedtls_pk_parse_key(&srv.key, (const unsigned char *)mbedtls_test_srv_key_ec,
                                          mbedtls_test_srv_key_ec_len, NULL, 0),
                     0);
    ck_assert_int_eq(mbedtls_ssl_config_defaults(&srv.conf, MBEDTLS_SSL_IS_SERVER,
                                                 MBEDTLS_SSL_TRANSPORT_STREAM,
                                                 MBEDTLS_SSL_PRESET_DEFAULT),
                     0);
    mbedtls_ssl_conf_rng(&srv.conf, mbedtls_ctr_drbg_random, &srv.drbg);
    ck_assert_int_eq(mbedtls_ssl_conf_own_cert(&srv.conf, &srv.crt, &srv.key), 0);
    /* Tickets, so that a second connection resumes. */
    ck_assert_int_eq(mbedtls_ssl_ticket_setup(&srv.tickets, mbedtls_ctr_drbg_random, &srv.drbg,
                                              MBEDTLS_CIPHER_AES_256_GCM, 3600),
                     0);
    mbedtls_ssl_conf_session_tickets_cb(&srv.conf, mbedtls_ssl_ticket_write,
                                        mbedtls_ssl_ticket_parse, &srv.tickets);
}

static void server_teardown(void)
{
    mbedtls_ssl_config_free(&srv.conf);
    mbedtls_ssl_ticket_free(&srv.tickets);
    mbedtls_pk_free(&srv.key);
    mbedtls_x509_crt_free(&srv.crt);
    mbedtls_ctr_drbg_free(&srv.drbg);
    mbedtls_entropy_free(&srv.entropy);
}

static void setup(void)
{
    ck_assert_int_eq(config_defaults(&cfg), 0);
    /* The server's certificate is mbedTLS's test one: not verified. */
    ck_assert_int_eq(config_set(&cfg, "tls_insecure_hosts", "localhost"), 0);
    server_setup();
}

static void teardown(void)
{
    tls_ctx_free(ctx);
    ctx = NULL;
    server_teardown();
    config_free(&cfg);
}

static void make_ctx(const char *ciphers)
{
    char err[600] = "";
    ck_assert_int_eq(config_set(&cfg, "tls_ciphers", ciphers), 0);
    ck_assert_msg(tls_ctx_new(&cfg, &ctx, err, sizeof err) == 0, "%s", err);
}

/* Client and server exchange flights until both are done. */
static tls_conn_t *handshake(void)
{
    tls_conn_t *c = NULL;
    ck_assert_int_eq(tls_conn_new(ctx, "localhost", "https://localhost:443", &c), 0);
    mbedtls_ssl_init(&srv.ssl);
    ck_assert_int_eq(mbedtls_ssl_setup(&srv.ssl, &srv.conf), 0);
    mbedtls_ssl_set_bio(&srv.ssl, &srv, srv_send, srv_recv, NULL);
    srv.in.len = srv.out.len = 0;
    int cdone = 0, sdone = 0;
    for (int round = 0; round < 50 && !(cdone && sdone); round++) {
        const char *code = NULL;
        char msg[300];
        if (!cdone) {
            int rc = tls_conn_handshake(c, &code, msg, sizeof msg);
            ck_assert_msg(rc >= 0, "client: %s", msg);
            cdone = rc == 0;
        }
        size_t n;
        char *out = tls_conn_take_output(c, &n);
        if (out) {
            memcpy(srv.in.data + srv.in.len, out, n);
            srv.in.len += n;
            free(out);
        }
        if (!sdone) {
            int rc = mbedtls_ssl_handshake(&srv.ssl);
            ck_assert_msg(rc == 0 || rc == MBEDTLS_ERR_SSL_WANT_READ, "server: -0x%04x",
                          (unsigned)-rc);
            sdone = rc == 0;
        }
        if (srv.out.len) {
            ck_assert_int_eq(tls_conn_input_append(c, (char *)srv.out.data, srv.out.len), 0);
            srv.out.len = 0;
        }
    }
    ck_assert(cdone && sdone);
    return c;
}

static void seq_next(unsigned char seq[8])
{
    for (int i = 7; i >= 0 && ++seq[i] == 0; i--)
        ;
}

/* The additional data of a record (RFC 5246 6.2.3.3). */
static void record_aad(unsigned char aad[13], const unsigned char seq[8], unsigned char type,
                       size_t len)
{
    memcpy(aad, seq, 8);
    aad[8] = type;
    aad[9] = 3;
    aad[10] = 3;
    aad[11] = (unsigned char)(len >> 8);
    aad[12] = (unsigned char)len;
}

/* Opens the application-data record at rec (as the server sent it) with
 * the reading side's struct, as the kernel would; the plaintext's length,
 * or -1 if it does not open. */
static int open_record(const unsigned char *info, size_t keylen, const unsigned char *rec,
                       size_t reclen, unsigned char seq[8], unsigned char *plain)
{
    /* struct tls12_crypto_info_aes_gcm_*: info, iv[8], key[keylen], salt[4], rec_seq[8] */
    const unsigned char *key = info + 4 + 8, *salt = key + keylen;
    ck_assert_uint_ge(reclen, 5 + 8 + 16);
    ck_assert_int_eq(rec[0], 23);
    size_t len = ((size_t)rec[3] << 8 | rec[4]) - 8 - 16;
    ck_assert_uint_eq(5 + 8 + len + 16, reclen);
    unsigned char nonce[12], aad[13];
    memcpy(nonce, salt, 4);
    memcpy(nonce + 4, rec + 5, 8); /* the explicit nonce */
    record_aad(aad, seq, 23, len);
    mbedtls_gcm_context g;
    mbedtls_gcm_init(&g);
    ck_assert_int_eq(mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, (unsigned)keylen * 8), 0);
    int rc =
        mbedtls_gcm_auth_decrypt(&g, len, nonce, 12, aad, 13, rec + 13 + len, 16, rec + 13, plain);
    mbedtls_gcm_free(&g);
    seq_next(seq);
    return rc ? -1 : (int)len;
}

/* Makes a record of data with the writing side's struct, as the kernel
 * would: explicit nonce, then the first one counted up per record. */
static size_t make_record(const unsigned char *info, size_t keylen, const char *data,
                          unsigned char seq[8], unsigned char iv[8], unsigned char *rec)
{
    const unsigned char *key = info + 4 + 8, *salt = key + keylen;
    size_t len = strlen(data);
    rec[0] = 23;
    rec[1] = rec[2] = 3;
    rec[3] = (unsigned char)((8 + len + 16) >> 8);
    rec[4] = (unsigned char)(8 + len + 16);
    memcpy(rec + 5, iv, 8);
    unsigned char nonce[12], aad[13];
    memcpy(nonce, salt, 4);
    memcpy(nonce + 4, iv, 8);
    record_aad(aad, seq, 23, len);
    mbedtls_gcm_context g;
    mbedtls_gcm_init(&g);
    ck_assert_int_eq(mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, (unsigned)keylen * 8), 0);
    ck_assert_int_eq(mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, len, nonce, 12, aad, 13,
                                               (const unsigned char *)data, rec + 13, 16,
                                               rec + 13 + len),
                     0);
    mbedtls_gcm_free(&g);
    seq_next(seq);
    seq_next(iv);
    return 5 + 8 + len + 16;
}

/* Both ways, over two records each, with the structs the kernel gets. */
static void check_records(const ktls_keys_t *k)
{
    unsigned char rx[KTLS_INFO_MAX], tx[KTLS_INFO_MAX], plain[256], rec[512];
    ck_assert_uint_gt(ktls_crypto_info(k, 0, rx, sizeof rx), 0);
    ck_assert_uint_gt(ktls_crypto_info(k, 1, tx, sizeof tx), 0);
    unsigned char rseq[8], tseq[8], iv[8];
    memcpy(rseq, rx + 4 + 8 + k->keylen + 4, 8);
    memcpy(tseq, tx + 4 + 8 + k->keylen + 4, 8);
    memcpy(iv, tx + 4, 8);
    static const char *const from_server[] = {"HTTP/1.1 200 OK\r\n", "a second record"};
    for (int i = 0; i < 2; i++) {
        srv.out.len = 0;
        size_t n = strlen(from_server[i]);
        ck_assert_int_eq(mbedtls_ssl_write(&srv.ssl, (const unsigned char *)from_server[i], n),
                         (int)n);
        ck_assert_int_eq(open_record(rx, k->keylen, srv.out.data, srv.out.len, rseq, plain),
                         (int)n);
        ck_assert_mem_eq(plain, from_server[i], n);
    }
    /* One changed byte: the record does not open (the kernel's EBADMSG). */
    srv.out.len = 0;
    ck_assert_int_eq(mbedtls_ssl_write(&srv.ssl, (const unsigned char *)"x", 1), 1);
    srv.out.data[14] ^= 1;
    ck_assert_int_eq(open_record(rx, k->keylen, srv.out.data, srv.out.len, rseq, plain), -1);

    static const char *const to_server[] = {"GET / HTTP/1.1\r\n\r\n", "and more"};
    for (int i = 0; i < 2; i++) {
        size_t n = make_record(tx, k->keylen, to_server[i], tseq, iv, rec);
        memcpy(srv.in.data, rec, n);
        srv.in.len = n;
        int got = mbedtls_ssl_read(&srv.ssl, plain, sizeof plain);
        ck_assert_msg(got == (int)strlen(to_server[i]), "server read: %d", got);
        ck_assert_mem_eq(plain, to_server[i], (size_t)got);
    }
}

static const char *const gcm_suites[] = {"aes-128-gcm", "aes-256-gcm"};

/* The keys and sequence numbers tls_conn_ktls_keys gives open the
 * server's records and make records the server takes, after a full
 * handshake and after a resumed one. */
START_TEST(ktls_keys_carry_on_the_connection)
{
    make_ctx(gcm_suites[_i]);
    for (int round = 0; round < 2; round++) {
        tls_conn_t *c = handshake();
        ck_assert_int_eq(tls_conn_resumed(c), round == 1);
        ktls_keys_t k;
        const char *why = NULL;
        ck_assert_msg(tls_conn_ktls_keys(c, &k, &why) == 0, "%s", why ? why : "");
        ck_assert_int_eq(k.cipher, _i == 0 ? KTLS_AES_128_GCM : KTLS_AES_256_GCM);
        /* The Finished records were number 0 of their epoch. */
        ck_assert_mem_eq(k.rx.seq, "\0\0\0\0\0\0\0\1", 8);
        ck_assert_mem_eq(k.tx.seq, "\0\0\0\0\0\0\0\1", 8);
        check_records(&k);
        ktls_keys_wipe(&k);
        /* Once: the connection kept no copy. */
        ck_assert_int_eq(tls_conn_ktls_keys(c, &k, &why), -EOPNOTSUPP);
        mbedtls_ssl_free(&srv.ssl);
        tls_conn_free(c);
    }
}
END_TEST

START_TEST(ktls_keys_not_for_chacha20)
{
    make_ctx("chacha20-poly1305");
    tls_conn_t *c = handshake();
    ktls_keys_t k;
    const char *why = NULL;
    ck_assert_int_eq(tls_conn_ktls_keys(c, &k, &why), -EOPNOTSUPP);
    ck_assert_ptr_nonnull(why);
    ck_assert_ptr_nonnull(strstr(why, "AES-GCM"));
    mbedtls_ssl_free(&srv.ssl);
    tls_conn_free(c);
}
END_TEST

START_TEST(ktls_off_keeps_no_keys)
{
    ck_assert_int_eq(config_set(&cfg, "ktls", "off"), 0);
    make_ctx("aes-128-gcm");
    tls_conn_t *c = handshake();
    ktls_keys_t k;
    const char *why = NULL;
    ck_assert_int_eq(tls_conn_ktls_keys(c, &k, &why), -ENOSYS);
    mbedtls_ssl_free(&srv.ssl);
    tls_conn_free(c);
}
END_TEST

/* Records still unread when the handshake ends would be read with the
 * wrong keys by whoever reads next: the keys are not given. */
START_TEST(ktls_keys_not_with_records_pending)
{
    make_ctx("aes-128-gcm");
    tls_conn_t *c = handshake();
    ck_assert_int_eq(mbedtls_ssl_write(&srv.ssl, (const unsigned char *)"early", 5), 5);
    ck_assert_int_eq(tls_conn_input_append(c, (char *)srv.out.data, srv.out.len), 0);
    ktls_keys_t k;
    const char *why = NULL;
    ck_assert_int_eq(tls_conn_ktls_keys(c, &k, &why), -EOPNOTSUPP);
    ck_assert_str_eq(why, "records already read");
    mbedtls_ssl_free(&srv.ssl);
    tls_conn_free(c);
}
END_TEST

START_TEST(ktls_config_is_off_or_auto)
{
    hubd_config_t c;
    ck_assert_int_eq(config_defaults(&c), 0);
    ck_assert_int_eq(c.ktls, CONFIG_KTLS_AUTO);
    ck_assert_int_eq(config_set(&c, "ktls", "off"), 0);
    ck_assert_int_eq(c.ktls, CONFIG_KTLS_OFF);
    ck_assert_int_eq(config_set(&c, "ktls", "auto"), 0);
    ck_assert_int_eq(c.ktls, CONFIG_KTLS_AUTO);
    ck_assert_int_eq(config_set(&c, "ktls", "on"), -EINVAL);
    ck_assert_int_eq(config_set(&c, "ktls", "or"), -EINVAL);
    config_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ktls");
    TCase *t = tcase_create("keys");
    tcase_add_test(t, ktls_keys_from_block_slices_the_clients_side);
    tcase_add_test(t, ktls_keys_from_block_refuses_other_suites);
    tcase_add_test(t, ktls_crypto_info_is_the_kernels_struct);
    tcase_add_test(t, ktls_alerts_have_names);
    tcase_add_test(t, ktls_config_is_off_or_auto);
    suite_add_tcase(s, t);
    TCase *h = tcase_create("handshake");
    tcase_add_checked_fixture(h, setup, teardown);
    tcase_set_timeout(h, 60);
    tcase_add_loop_test(h, ktls_keys_carry_on_the_connection, 0, 2);
    tcase_add_test(h, ktls_keys_not_for_chacha20);
    tcase_add_test(h, ktls_off_keeps_no_keys);
    tcase_add_test(h, ktls_keys_not_with_records_pending);
    suite_add_tcase(s, h);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
