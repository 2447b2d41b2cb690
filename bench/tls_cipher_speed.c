/* Throughput of the TLS 1.2 AEAD record ciphers that hubd could offer with
 * mbedTLS 2.28, measured on this machine, to decide the order in which hubd
 * offers its cipher suites: the fastest cipher here should come first.
 *
 * For AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305 it decrypts and verifies
 * 256 MiB as 16 KiB records (TLS's largest record), each with its own nonce
 * and TLS 1.2 additional data, just as a receiving peer would. The records are
 * encrypted beforehand, outside the timing, so every tag must verify; a record
 * that does not, or a tampered record that does, means the numbers are
 * meaningless: exit 1. The ciphers take turns, run after run, and the best of
 * three runs is reported (decimal MB/s, 1e6 bytes), so that one scheduler
 * hiccup or a change in clock speed does not favour one cipher. The last line
 * lists the ciphers fastest first. It also reports whether mbedTLS uses AES-NI
 * (AES rounds) and PCLMULQDQ (GHASH) here, which decides how GCM fares.
 *
 * usage: tls_cipher_speed */
#include <mbedtls/aesni.h>
#include <mbedtls/chachapoly.h>
#include <mbedtls/gcm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOTAL_LEN ((size_t)256 << 20)
#define RECORD_LEN ((size_t)16 << 10)
#define NRECORDS (TOTAL_LEN / RECORD_LEN)
#define TAG_LEN 16
#define NONCE_LEN 12
#define AAD_LEN 13 /* TLS 1.2: seq_num(8) type(1) version(2) length(2) */
#define RUNS 3

enum kind { KIND_GCM, KIND_CHACHAPOLY };

struct aead {
    const char *name;
    enum kind kind;
    unsigned keybits;
    mbedtls_gcm_context gcm;
    mbedtls_chachapoly_context chachapoly;
    double best; /* seconds, best run */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Plaintext of record `seq`: splitmix64 output, so it can be regenerated to
 * check a decrypted record without keeping 256 MiB of plaintext around. */
static void fill_record(uint64_t seq, uint8_t *p)
{
    uint64_t s = 0x243f6a8885a308d3ULL ^ (seq * 0xd1b54a32d192ed03ULL);

    for (size_t i = 0; i < RECORD_LEN; i += 8) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ULL);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        memcpy(p + i, &z, 8);
    }
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Nonce and additional data of record `seq`, built as TLS 1.2 builds them:
 * GCM (RFC 5288) uses a 4-byte implicit salt followed by an 8-byte explicit
 * part, here the sequence number; ChaCha20-Poly1305 (RFC 7905) XORs the
 * sequence number into the last 8 bytes of a 12-byte IV. */
static void record_params(const struct aead *a, uint64_t seq, uint8_t nonce[NONCE_LEN],
                          uint8_t aad[AAD_LEN])
{
    static const uint8_t iv[NONCE_LEN] = {0x5a, 0x17, 0xc3, 0x08, 0x9e, 0x41,
                                          0xd2, 0x66, 0x0b, 0xf4, 0x23, 0x8d};
    uint8_t seq_be[8];

    put_be64(seq_be, seq);
    memcpy(nonce, iv, NONCE_LEN);
    if (a->kind == KIND_GCM) {
        memcpy(nonce + 4, seq_be, 8);
    } else {
        for (int i = 0; i < 8; i++)
            nonce[4 + i] ^= seq_be[i];
    }
    memcpy(aad, seq_be, 8);
    aad[8] = 23; /* application_data */
    aad[9] = 3;  /* TLS 1.2 */
    aad[10] = 3;
    aad[11] = (uint8_t)(RECORD_LEN >> 8);
    aad[12] = (uint8_t)RECORD_LEN;
}

static int aead_setup(struct aead *a)
{
    uint8_t key[32];

    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(0xa5 ^ (i * 29));
    if (a->kind == KIND_GCM) {
        mbedtls_gcm_init(&a->gcm);
        return mbedtls_gcm_setkey(&a->gcm, MBEDTLS_CIPHER_ID_AES, key, a->keybits);
    }
    mbedtls_chachapoly_init(&a->chachapoly);
    return mbedtls_chachapoly_setkey(&a->chachapoly, key);
}

static void aead_free(struct aead *a)
{
    if (a->kind == KIND_GCM)
        mbedtls_gcm_free(&a->gcm);
    else
        mbedtls_chachapoly_free(&a->chachapoly);
}

static int aead_seal(struct aead *a, uint64_t seq, const uint8_t *in, uint8_t *out, uint8_t *tag)
{
    uint8_t nonce[NONCE_LEN], aad[AAD_LEN];

    record_params(a, seq, nonce, aad);
    if (a->kind == KIND_GCM)
        return mbedtls_gcm_crypt_and_tag(&a->gcm, MBEDTLS_GCM_ENCRYPT, RECORD_LEN, nonce, NONCE_LEN,
                                         aad, AAD_LEN, in, out, TAG_LEN, tag);
    return mbedtls_chachapoly_encrypt_and_tag(&a->chachapoly, RECORD_LEN, nonce, aad, AAD_LEN, in,
                                              out, tag);
}

/* 0 only when the record is authentic. */
static int aead_open(struct aead *a, uint64_t seq, const uint8_t *in, const uint8_t *tag,
                     uint8_t *out)
{
    uint8_t nonce[NONCE_LEN], aad[AAD_LEN];

    record_params(a, seq, nonce, aad);
    if (a->kind == KIND_GCM)
        return mbedtls_gcm_auth_decrypt(&a->gcm, RECORD_LEN, nonce, NONCE_LEN, aad, AAD_LEN, tag,
                                        TAG_LEN, in, out);
    return mbedtls_chachapoly_auth_decrypt(&a->chachapoly, RECORD_LEN, nonce, aad, AAD_LEN, tag, in,
                                           out);
}

/* Encrypts all records into ct/tags. Untimed. */
static int seal_all(struct aead *a, uint8_t *ct, uint8_t *tags, uint8_t *pt)
{
    for (size_t i = 0; i < NRECORDS; i++) {
        fill_record(i, pt);
        if (aead_seal(a, i, pt, ct + i * RECORD_LEN, tags + i * TAG_LEN) != 0)
            return -1;
    }
    return 0;
}

/* Decrypts and verifies all records into one record-sized buffer, as a TLS
 * stack would hand each record to the application. Returns the seconds taken,
 * or a negative value if a record failed to verify. */
static double open_all(struct aead *a, const uint8_t *ct, const uint8_t *tags, uint8_t *out)
{
    double t0 = now_s();

    for (size_t i = 0; i < NRECORDS; i++)
        if (aead_open(a, i, ct + i * RECORD_LEN, tags + i * TAG_LEN, out) != 0)
            return -1.0;
    return now_s() - t0;
}

/* The decryption must really check the tag and really produce the plaintext:
 * the last record decrypted must match, and a tampered copy of record 0 (one
 * flipped ciphertext bit) must be rejected. */
static int sanity_check(struct aead *a, const uint8_t *ct, const uint8_t *tags, uint8_t *out,
                        uint8_t *scratch)
{
    fill_record(NRECORDS - 1, scratch);
    if (memcmp(out, scratch, RECORD_LEN) != 0) {
        fprintf(stderr, "tls_cipher_speed: %s: decrypted record differs from plaintext\n", a->name);
        return -1;
    }
    memcpy(scratch, ct, RECORD_LEN);
    scratch[RECORD_LEN / 2] ^= 0x01;
    if (aead_open(a, 0, scratch, tags, out) == 0) {
        fprintf(stderr, "tls_cipher_speed: %s: a tampered record verified\n", a->name);
        return -1;
    }
    return 0;
}

static void report_aesni(void)
{
    /* aesni.h declares mbedtls_aesni_has_support() only when the library has
     * AES-NI code for this target (2.28.0-2.28.2: MBEDTLS_HAVE_X86_64; from
     * 2.28.3: MBEDTLS_AESNI_HAVE_CODE). mbedTLS marks it internal; it is the
     * very probe the library's AES and GCM code use to pick the AES-NI path,
     * so asking it tells which path the timings above took. */
#if defined(MBEDTLS_AESNI_C) && (defined(MBEDTLS_AESNI_HAVE_CODE) || defined(MBEDTLS_HAVE_X86_64))
    printf("aes-ni: aes %s, clmul %s\n",
           mbedtls_aesni_has_support(MBEDTLS_AESNI_AES) ? "yes" : "no",
           mbedtls_aesni_has_support(MBEDTLS_AESNI_CLMUL) ? "yes" : "no");
#else
    printf("aes-ni: not compiled into this mbedTLS build (portable AES and GHASH)\n");
#endif
}

int main(void)
{
    struct aead aeads[] = {
        {.name = "aes-128-gcm", .kind = KIND_GCM, .keybits = 128},
        {.name = "aes-256-gcm", .kind = KIND_GCM, .keybits = 256},
        {.name = "chacha20-poly1305", .kind = KIND_CHACHAPOLY, .keybits = 256},
    };
    enum { NAEAD = sizeof aeads / sizeof aeads[0] };
    size_t order[NAEAD];
    uint8_t *ct, *tags, *out, *scratch;
    int status = 1;
    size_t ready = 0;

    ct = malloc(TOTAL_LEN);
    tags = malloc(NRECORDS * TAG_LEN);
    out = malloc(RECORD_LEN);
    scratch = malloc(RECORD_LEN);
    if (ct == NULL || tags == NULL || out == NULL || scratch == NULL) {
        fprintf(stderr, "tls_cipher_speed: cannot allocate %zu bytes\n", TOTAL_LEN);
        goto out;
    }
    for (; ready < NAEAD; ready++) {
        if (aead_setup(&aeads[ready]) != 0) {
            fprintf(stderr, "tls_cipher_speed: %s: cannot set the key\n", aeads[ready].name);
            ready++; /* its context was initialised: free it too */
            goto out;
        }
    }

    /* The ciphers take turns within each run; one ciphertext buffer is reused,
     * re-encrypted (untimed) before each decryption pass. */
    for (int r = 0; r < RUNS; r++) {
        for (size_t k = 0; k < NAEAD; k++) {
            struct aead *a = &aeads[k];
            double t;

            if (seal_all(a, ct, tags, scratch) != 0) {
                fprintf(stderr, "tls_cipher_speed: %s: encryption failed\n", a->name);
                goto out;
            }
            t = open_all(a, ct, tags, out);
            if (t < 0) {
                fprintf(stderr, "tls_cipher_speed: %s: a record failed to verify\n", a->name);
                goto out;
            }
            if (sanity_check(a, ct, tags, out, scratch) != 0)
                goto out;
            if (r == 0 || t < a->best)
                a->best = t;
        }
    }

    report_aesni();
    for (size_t k = 0; k < NAEAD; k++) {
        printf("aead %-17s %5.0f MB/s\n", aeads[k].name, (double)TOTAL_LEN / aeads[k].best / 1e6);
        order[k] = k;
    }
    /* Insertion sort, fastest (shortest best time) first; ties keep the order
     * of the table. */
    for (size_t i = 1; i < NAEAD; i++) {
        size_t v = order[i], j = i;

        for (; j > 0 && aeads[order[j - 1]].best > aeads[v].best; j--)
            order[j] = order[j - 1];
        order[j] = v;
    }
    printf("order: ");
    for (size_t i = 0; i < NAEAD; i++)
        printf("%s%s", i ? "," : "", aeads[order[i]].name);
    printf("\n");
    status = 0;

out:
    for (size_t k = 0; k < ready; k++)
        aead_free(&aeads[k]);
    free(scratch);
    free(out);
    free(tags);
    free(ct);
    return status;
}
