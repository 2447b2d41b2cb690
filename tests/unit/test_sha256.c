/* Unit tests for daemon/sha256.c.
 *
 * Every hashing test runs twice (Check loop index 0 and 1): once with the
 * fastest implementation the CPU offers (SHA-NI where present) and once with
 * the portable C path forced, so both block functions are checked on every
 * machine that can run them. Random inputs are compared against mbedTLS.
 *
 * SHA256_TEST_SEED=<n> in the environment replays a failing random run. */
#include "sha256.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANDOM_MAX_LEN (300 * 1024)
#define RANDOM_ROUNDS 200

static uint64_t seed; /* set in main(), printed for replay */

/* Loop index 0: best available implementation; 1: portable forced. */
static void select_impl(int i)
{
    sha256_force_portable(i == 1);
}

/* splitmix64: tiny, fast, and the same sequence everywhere, so a printed seed
 * reproduces a failure on any machine. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static size_t rng_below(uint64_t *s, size_t n)
{
    return n == 0 ? 0 : (size_t)(rng_next(s) % n);
}

static void rng_fill(uint64_t *s, uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)rng_next(s);
}

static void hash_hex(const void *data, size_t len, char hex[65])
{
    sha256_ctx_t c;
    uint8_t d[32];

    sha256_init(&c);
    sha256_update(&c, data, len);
    sha256_final(&c, d);
    sha256_hex(d, hex);
}

/* Both implementations reach the vectors; say which one so a failure in the
 * log points at the right block function. */
static void check_vector(const void *data, size_t len, const char *want)
{
    char got[65];

    hash_hex(data, len, got);
    ck_assert_msg(strcmp(got, want) == 0, "impl %s, len %zu: got %s, want %s", sha256_impl_name(),
                  len, got, want);
}

START_TEST(sha256_fips_vectors)
{
    /* FIPS 180-2 appendix B examples. */
    static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    static const char m896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                               "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

    select_impl(_i);
    check_vector("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_vector("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_vector(m448, strlen(m448),
                 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_vector(m896, strlen(m896),
                 "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}
END_TEST

START_TEST(sha256_million_a)
{
    static const char want[] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    const size_t len = 1000000;
    uint8_t *buf = malloc(len);
    sha256_ctx_t c;
    uint8_t d[32];
    char got[65];

    ck_assert_ptr_nonnull(buf);
    memset(buf, 'a', len);
    select_impl(_i);

    /* In one call: the bulk path straight from the caller's buffer. */
    check_vector(buf, len, want);

    /* In 1000-byte updates, not a multiple of 64: every call goes through the
     * partial-block buffer. */
    sha256_init(&c);
    for (size_t off = 0; off < len; off += 1000)
        sha256_update(&c, buf + off, 1000);
    sha256_final(&c, d);
    sha256_hex(d, got);
    ck_assert_str_eq(got, want);
    free(buf);
}
END_TEST

/* Every length around the padding edges (55/56/63/64 bytes mod 64), where an
 * extra length block is or is not needed. */
START_TEST(sha256_padding_boundaries)
{
    uint8_t msg[300], want[32], got[32];
    uint64_t s = seed;

    select_impl(_i);
    rng_fill(&s, msg, sizeof(msg));
    for (size_t len = 0; len <= sizeof(msg); len++) {
        sha256_ctx_t c;

        ck_assert_int_eq(mbedtls_sha256_ret(msg, len, want, 0), 0);
        sha256_init(&c);
        sha256_update(&c, msg, len);
        sha256_final(&c, got);
        ck_assert_msg(memcmp(got, want, 32) == 0, "impl %s, len %zu differs from mbedTLS",
                      sha256_impl_name(), len);
    }
}
END_TEST

/* Random data, random lengths, fed in random pieces (including empty ones and
 * pieces that straddle block boundaries) against mbedTLS's one-shot hash. */
START_TEST(sha256_random_splits_match_mbedtls)
{
    uint8_t *buf = malloc(RANDOM_MAX_LEN);
    uint64_t s = seed + (uint64_t)_i;

    ck_assert_ptr_nonnull(buf);
    select_impl(_i);
    for (int round = 0; round < RANDOM_ROUNDS; round++) {
        /* A quarter of the rounds are short messages, where the padding and
         * buffer logic matter most; the rest span up to ~300 KiB. */
        size_t len = rng_below(&s, 4) == 0 ? rng_below(&s, 300) : rng_below(&s, RANDOM_MAX_LEN + 1);
        uint8_t want[32], got[32];
        sha256_ctx_t c;
        size_t off = 0;

        rng_fill(&s, buf, len);
        ck_assert_int_eq(mbedtls_sha256_ret(buf, len, want, 0), 0);

        sha256_init(&c);
        while (off < len) {
            size_t left = len - off, piece;

            switch (rng_below(&s, 4)) {
            case 0:
                piece = 0;
                break;
            case 1:
                piece = 1 + rng_below(&s, 130);
                break;
            case 2:
                piece = 64 * (1 + rng_below(&s, 8));
                break;
            default:
                piece = 1 + rng_below(&s, left);
                break;
            }
            if (piece > left)
                piece = left;
            sha256_update(&c, buf + off, piece);
            off += piece;
        }
        sha256_final(&c, got);
        ck_assert_msg(memcmp(got, want, 32) == 0,
                      "impl %s, seed %" PRIu64 ", round %d, len %zu differs from mbedTLS",
                      sha256_impl_name(), seed, round, len);
    }
    free(buf);
}
END_TEST

/* A finished context is reusable after init, and final() does not depend on
 * leftovers from the previous message. */
START_TEST(sha256_context_reuse)
{
    sha256_ctx_t c;
    uint8_t d[32];
    char got[65];

    select_impl(_i);
    sha256_init(&c);
    sha256_update(&c, "some earlier message that leaves a partial block", 48);
    sha256_final(&c, d);
    sha256_init(&c);
    sha256_update(&c, "abc", 3);
    sha256_final(&c, d);
    sha256_hex(d, got);
    ck_assert_str_eq(got, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
END_TEST

/* Both paths keep the state in the same layout, so switching between them in
 * the middle of a message (as a benchmark may) still gives the right digest. */
START_TEST(sha256_switch_impl_midstream)
{
    static const char m896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                               "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    sha256_ctx_t c;
    uint8_t d[32];
    char got[65];

    sha256_force_portable(0);
    sha256_init(&c);
    sha256_update(&c, m896, 64);
    sha256_force_portable(1);
    sha256_update(&c, m896 + 64, 30);
    sha256_force_portable(0);
    sha256_update(&c, m896 + 94, strlen(m896) - 94);
    sha256_final(&c, d);
    sha256_hex(d, got);
    ck_assert_str_eq(got, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}
END_TEST

/* Is the SHA-NI flag in /proc/cpuinfo? Independent of the library's CPUID
 * probe, so a broken probe cannot silently fall back to the slow path. */
static int cpuinfo_has_sha_ni(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    int found = 0;

    if (f == NULL)
        return -1;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "flags", 5) == 0 && strstr(line, " sha_ni") != NULL)
            found = 1;
    }
    fclose(f);
    return found;
}

START_TEST(sha256_impl_selection)
{
    int has = cpuinfo_has_sha_ni();

    sha256_force_portable(1);
    ck_assert_str_eq(sha256_impl_name(), "portable");
    sha256_force_portable(0);
#if defined(__x86_64__) || defined(__i386__)
    if (has == 1)
        ck_assert_str_eq(sha256_impl_name(), "sha-ni");
    else if (has == 0)
        ck_assert_str_eq(sha256_impl_name(), "portable");
#else
    (void)has;
    ck_assert_str_eq(sha256_impl_name(), "portable");
#endif
}
END_TEST

START_TEST(sha256_hex_round_trip)
{
    uint8_t d[32], back[32];
    char hex[65], upper[65];
    uint64_t s = seed;

    rng_fill(&s, d, sizeof(d));
    sha256_hex(d, hex);
    ck_assert_uint_eq(strlen(hex), 64);
    ck_assert_msg(strspn(hex, "0123456789abcdef") == 64, "not lowercase hex: %s", hex);
    ck_assert_int_eq(sha256_parse_hex(hex, back), 0);
    ck_assert_mem_eq(back, d, 32);

    /* Upper case is accepted too: digests pasted by people often are. */
    for (int i = 0; i < 65; i++)
        upper[i] = (hex[i] >= 'a' && hex[i] <= 'f') ? (char)(hex[i] - 'a' + 'A') : hex[i];
    memset(back, 0, sizeof(back));
    ck_assert_int_eq(sha256_parse_hex(upper, back), 0);
    ck_assert_mem_eq(back, d, 32);

    static const uint8_t all_ff[32] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    sha256_hex(all_ff, hex);
    ck_assert_str_eq(hex, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff");
}
END_TEST

START_TEST(sha256_parse_hex_rejects_bad_input)
{
    static const char good[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    char s[80];
    uint8_t out[32], sentinel[32];

    memset(sentinel, 0xa5, sizeof(sentinel));

    /* 63 digits. */
    memcpy(s, good, 63);
    s[63] = '\0';
    memcpy(out, sentinel, 32);
    ck_assert_int_eq(sha256_parse_hex(s, out), -EINVAL);
    ck_assert_mem_eq(out, sentinel, 32); /* untouched on error */

    /* 65 digits. */
    memcpy(s, good, 64);
    s[64] = '0';
    s[65] = '\0';
    ck_assert_int_eq(sha256_parse_hex(s, out), -EINVAL);

    /* Trailing whitespace, as from a file read with fgets(). */
    memcpy(s, good, 64);
    s[64] = '\n';
    s[65] = '\0';
    ck_assert_int_eq(sha256_parse_hex(s, out), -EINVAL);

    /* A non-hex character at the first, a middle and the last position. */
    static const char bad_chars[] = "gG xz-+:\xff";
    const size_t positions[] = {0, 1, 31, 62, 63};
    for (size_t b = 0; b < sizeof(bad_chars) - 1; b++) {
        for (size_t p = 0; p < sizeof(positions) / sizeof(positions[0]); p++) {
            memcpy(s, good, 65);
            s[positions[p]] = bad_chars[b];
            ck_assert_msg(sha256_parse_hex(s, out) == -EINVAL, "accepted byte 0x%02x at %zu",
                          (unsigned char)bad_chars[b], positions[p]);
        }
    }

    /* Empty string, "0x" prefix, NULL. */
    ck_assert_int_eq(sha256_parse_hex("", out), -EINVAL);
    snprintf(s, sizeof(s), "0x%.62s", good);
    ck_assert_int_eq(sha256_parse_hex(s, out), -EINVAL);
    ck_assert_int_eq(sha256_parse_hex(NULL, out), -EINVAL);
    ck_assert_mem_eq(out, sentinel, 32);

    /* And the untouched original still parses. */
    ck_assert_int_eq(sha256_parse_hex(good, out), 0);
    ck_assert_uint_eq(out[0], 0xba);
    ck_assert_uint_eq(out[31], 0xad);
}
END_TEST

static Suite *sha256_suite(void)
{
    Suite *s = suite_create("sha256");
    TCase *hashing = tcase_create("hashing");
    TCase *hex = tcase_create("hex");

    /* Loop 0: best implementation; loop 1: portable forced. */
    tcase_add_loop_test(hashing, sha256_fips_vectors, 0, 2);
    tcase_add_loop_test(hashing, sha256_million_a, 0, 2);
    tcase_add_loop_test(hashing, sha256_padding_boundaries, 0, 2);
    tcase_add_loop_test(hashing, sha256_random_splits_match_mbedtls, 0, 2);
    tcase_add_loop_test(hashing, sha256_context_reuse, 0, 2);
    tcase_add_test(hashing, sha256_switch_impl_midstream);
    tcase_add_test(hashing, sha256_impl_selection);
    /* Sanitizer builds are several times slower than the ~1 s this takes. */
    tcase_set_timeout(hashing, 60);
    suite_add_tcase(s, hashing);

    tcase_add_test(hex, sha256_hex_round_trip);
    tcase_add_test(hex, sha256_parse_hex_rejects_bad_input);
    suite_add_tcase(s, hex);
    return s;
}

int main(void)
{
    const char *env = getenv("SHA256_TEST_SEED");
    SRunner *sr;
    int failed;

    seed = env != NULL ? strtoull(env, NULL, 0) : 20240601u;
    sha256_force_portable(0);
    printf("test_sha256: seed %" PRIu64 " (SHA256_TEST_SEED=%" PRIu64 " to replay), best impl %s\n",
           seed, seed, sha256_impl_name());
    fflush(stdout); /* before Check forks, so the line is not printed twice */

    sr = srunner_create(sha256_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
