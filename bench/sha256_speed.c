/* Throughput of hubd's SHA-256 (SHA-NI and portable paths) against mbedTLS.
 *
 * Hashes a 256 MiB buffer of random bytes in 256 KiB updates, the size of a
 * typical read from the network/disk, and prints decimal MB/s (1e6 bytes) for
 * each implementation and its speed relative to mbedTLS. The best of a few
 * runs is reported so one scheduler hiccup does not skew the number. The
 * three digests must agree, otherwise the numbers mean nothing: exit 1.
 *
 * usage: sha256_speed [runs]   (default 3) */
#include "sha256.h"

#include <mbedtls/sha256.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_LEN ((size_t)256 << 20)
#define CHUNK ((size_t)256 << 10)

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* splitmix64: fast enough that filling 256 MiB costs well under a second,
 * unlike reading that much from the kernel's random device. */
static void fill_random(uint8_t *p, size_t len)
{
    uint64_t s = 0x243f6a8885a308d3ULL;

    for (size_t i = 0; i < len; i += 8) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ULL);

        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        memcpy(p + i, &z, len - i < 8 ? len - i : 8);
    }
}

static double run_hubd(const uint8_t *buf, uint8_t out[32])
{
    sha256_ctx_t c;
    double t0 = now_s();

    sha256_init(&c);
    for (size_t off = 0; off < BUF_LEN; off += CHUNK)
        sha256_update(&c, buf + off, CHUNK);
    sha256_final(&c, out);
    return now_s() - t0;
}

static double run_mbedtls(const uint8_t *buf, uint8_t out[32])
{
    mbedtls_sha256_context c;
    double t0 = now_s();

    mbedtls_sha256_init(&c);
    mbedtls_sha256_starts_ret(&c, 0);
    for (size_t off = 0; off < BUF_LEN; off += CHUNK)
        mbedtls_sha256_update_ret(&c, buf + off, CHUNK);
    mbedtls_sha256_finish_ret(&c, out);
    mbedtls_sha256_free(&c);
    return now_s() - t0;
}

enum { IMPL_SHANI, IMPL_PORTABLE, IMPL_MBEDTLS, NIMPL };

int main(int argc, char **argv)
{
    static const char *const names[NIMPL] = {"sha-ni", "portable", "mbedtls"};
    int runs = argc > 1 ? atoi(argv[1]) : 3;
    double best[NIMPL] = {0};
    uint8_t digest[NIMPL][32];
    int have_shani, ok = 1;
    uint8_t *buf;

    if (runs < 1)
        runs = 1;
    buf = malloc(BUF_LEN);
    if (buf == NULL) {
        fprintf(stderr, "sha256_speed: cannot allocate %zu bytes\n", BUF_LEN);
        return 1;
    }
    fill_random(buf, BUF_LEN); /* also faults every page in before timing */

    sha256_force_portable(0);
    have_shani = strcmp(sha256_impl_name(), "sha-ni") == 0;

    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < NIMPL; i++) {
            double t;

            if (i == IMPL_SHANI && !have_shani)
                continue;
            if (i == IMPL_MBEDTLS) {
                t = run_mbedtls(buf, digest[i]);
            } else {
                sha256_force_portable(i == IMPL_PORTABLE);
                t = run_hubd(buf, digest[i]);
            }
            if (r == 0 || t < best[i])
                best[i] = t;
        }
    }
    sha256_force_portable(0);

    double mbed_mbs = (double)BUF_LEN / best[IMPL_MBEDTLS] / 1e6;
    for (int i = 0; i < NIMPL; i++) {
        if (i == IMPL_SHANI && !have_shani) {
            printf("sha256 %-9s  n/a (CPU lacks the SHA extensions)\n", names[i]);
            continue;
        }
        double mbs = (double)BUF_LEN / best[i] / 1e6;
        printf("sha256 %-9s %4.0f MB/s  (%.1fx mbedtls)\n", names[i], mbs, mbs / mbed_mbs);
        if (memcmp(digest[i], digest[IMPL_MBEDTLS], 32) != 0) {
            fprintf(stderr, "sha256_speed: %s digest differs from mbedtls\n", names[i]);
            ok = 0;
        }
    }
    free(buf);
    return ok ? 0 : 1;
}
