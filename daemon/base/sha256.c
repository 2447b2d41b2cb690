/* SHA-256 (FIPS 180-4): a portable C block function, an x86 SHA-NI one, and
 * run-time selection between them. See sha256.h for the why. */
#include "sha256.h"
#include "textnum.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define SHA256_HAVE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

/* A block function hashes nblocks consecutive 64-byte blocks from p into h.
 * Taking many blocks per call lets update() hash the caller's buffer in place
 * and keeps the SHA-NI state in registers across blocks. */
typedef void (*sha256_blocks_fn)(uint32_t h[8], const uint8_t *p, size_t nblocks);

/* Round constants: first 32 bits of the fractional parts of the cube roots of
 * the first 64 primes. Aligned so the SHA-NI path can load four at a time. */
static const uint32_t K256[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* ---- portable C ---------------------------------------------------------- */

static inline uint32_t rotr32(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

#define BSIG0(x) (rotr32((x), 2) ^ rotr32((x), 13) ^ rotr32((x), 22))
#define BSIG1(x) (rotr32((x), 6) ^ rotr32((x), 11) ^ rotr32((x), 25))
#define SSIG0(x) (rotr32((x), 7) ^ rotr32((x), 18) ^ ((x) >> 3))
#define SSIG1(x) (rotr32((x), 17) ^ rotr32((x), 19) ^ ((x) >> 10))
/* Same truth tables as FIPS 180-4's Ch and Maj, one operation shorter. */
#define CH(e, f, g) ((g) ^ ((e) & ((f) ^ (g))))
#define MAJ(a, b, c) (((a) & (b)) | ((c) & ((a) | (b))))

/* One round. Instead of shifting a..h down every round, the callers rotate
 * the argument names, so the only writes are to d and h. */
#define RND(a, b, c, d, e, f, g, h, t)                                                             \
    do {                                                                                           \
        uint32_t t1_ = (h) + BSIG1(e) + CH(e, f, g) + K256[t] + w[(t)&15];                         \
        (d) += t1_;                                                                                \
        (h) = t1_ + BSIG0(a) + MAJ(a, b, c);                                                       \
    } while (0)

/* Message schedule kept in a 16-word ring: w[t & 15] holds W[t-16] until
 * it is replaced by W[t]. */
#define SCHED(t) (w[(t)&15] += SSIG1(w[((t)-2) & 15]) + w[((t)-7) & 15] + SSIG0(w[((t)-15) & 15]))

#define RND8(t)                                                                                    \
    do {                                                                                           \
        RND(a, b, c, d, e, f, g, h, (t) + 0);                                                      \
        RND(h, a, b, c, d, e, f, g, (t) + 1);                                                      \
        RND(g, h, a, b, c, d, e, f, (t) + 2);                                                      \
        RND(f, g, h, a, b, c, d, e, (t) + 3);                                                      \
        RND(e, f, g, h, a, b, c, d, (t) + 4);                                                      \
        RND(d, e, f, g, h, a, b, c, (t) + 5);                                                      \
        RND(c, d, e, f, g, h, a, b, (t) + 6);                                                      \
        RND(b, c, d, e, f, g, h, a, (t) + 7);                                                      \
    } while (0)

static void sha256_blocks_portable(uint32_t st[8], const uint8_t *p, size_t nblocks)
{
    uint32_t w[16];

    for (; nblocks > 0; nblocks--, p += 64) {
        uint32_t a = st[0], b = st[1], c = st[2], d = st[3];
        uint32_t e = st[4], f = st[5], g = st[6], h = st[7];

        for (unsigned i = 0; i < 16; i++)
            w[i] = load_be32(p + 4 * i);
        RND8(0);
        RND8(8);
        for (unsigned t = 16; t < 64; t += 8) {
            for (unsigned i = t; i < t + 8; i++)
                SCHED(i);
            RND8(t);
        }

        st[0] += a;
        st[1] += b;
        st[2] += c;
        st[3] += d;
        st[4] += e;
        st[5] += f;
        st[6] += g;
        st[7] += h;
    }
}

/* ---- x86 SHA extensions -------------------------------------------------- */

#ifdef SHA256_HAVE_X86

/* Four rounds on message words m (already byte-swapped) with constants group
 * k. sha256rnds2 does two rounds taking (CDGH, ABEF); after two rounds the old
 * ABEF is the new CDGH, so the two state registers just alternate roles. */
#define SHANI_QROUND(m, k)                                                                         \
    do {                                                                                           \
        __m128i wk_ = _mm_add_epi32((m), _mm_load_si128((const __m128i *)&K256[4 * (k)]));         \
        st1 = _mm_sha256rnds2_epu32(st1, st0, wk_);                                                \
        wk_ = _mm_shuffle_epi32(wk_, 0x0E);                                                        \
        st0 = _mm_sha256rnds2_epu32(st0, st1, wk_);                                                \
    } while (0)

/* Next four schedule words into m4 (which holds W[t-16..t-13]) from
 * m3 = W[t-12..], m2 = W[t-8..], m1 = W[t-4..]: msg1 adds sigma0 terms,
 * alignr supplies W[t-7..t-4], msg2 adds the sigma1 terms. */
#define SHANI_SCHED(m4, m3, m2, m1)                                                                \
    ((m4) = _mm_sha256msg2_epu32(                                                                  \
         _mm_add_epi32(_mm_sha256msg1_epu32((m4), (m3)), _mm_alignr_epi8((m1), (m2), 4)), (m1)))

/* Target attribute on this function only, so the rest of the file (and the
 * project) keeps building for the baseline ISA; it is only called after CPUID
 * said the instructions exist. */
__attribute__((target("sha,sse4.1"))) static void
sha256_blocks_shani(uint32_t st[8], const uint8_t *p, size_t nblocks)
{
    /* Byte-swaps each 32-bit lane: SHA-256 words are big-endian. */
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i st0, st1, tmp;

    /* The instructions want the state as ABEF and CDGH (A in the top lane). */
    tmp = _mm_loadu_si128((const __m128i *)&st[0]); /* D C B A (lane 3..0) */
    st1 = _mm_loadu_si128((const __m128i *)&st[4]); /* H G F E */
    tmp = _mm_shuffle_epi32(tmp, 0xB1);             /* C D A B */
    st1 = _mm_shuffle_epi32(st1, 0x1B);             /* E F G H */
    st0 = _mm_alignr_epi8(tmp, st1, 8);             /* A B E F */
    st1 = _mm_blend_epi16(st1, tmp, 0xF0);          /* C D G H */

    for (; nblocks > 0; nblocks--, p += 64) {
        const __m128i save0 = st0, save1 = st1;
        __m128i m0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 0)), bswap);
        __m128i m1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), bswap);
        __m128i m2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 32)), bswap);
        __m128i m3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 48)), bswap);

        SHANI_QROUND(m0, 0);
        SHANI_QROUND(m1, 1);
        SHANI_QROUND(m2, 2);
        SHANI_QROUND(m3, 3);
        for (int k = 4; k < 16; k += 4) {
            SHANI_SCHED(m0, m1, m2, m3);
            SHANI_QROUND(m0, k + 0);
            SHANI_SCHED(m1, m2, m3, m0);
            SHANI_QROUND(m1, k + 1);
            SHANI_SCHED(m2, m3, m0, m1);
            SHANI_QROUND(m2, k + 2);
            SHANI_SCHED(m3, m0, m1, m2);
            SHANI_QROUND(m3, k + 3);
        }

        st0 = _mm_add_epi32(st0, save0);
        st1 = _mm_add_epi32(st1, save1);
    }

    /* Back from ABEF/CDGH to A..H in memory order. */
    tmp = _mm_shuffle_epi32(st0, 0x1B);    /* F E B A */
    st1 = _mm_shuffle_epi32(st1, 0xB1);    /* D C H G */
    st0 = _mm_blend_epi16(tmp, st1, 0xF0); /* D C B A */
    st1 = _mm_alignr_epi8(st1, tmp, 8);    /* H G F E */
    _mm_storeu_si128((__m128i *)&st[0], st0);
    _mm_storeu_si128((__m128i *)&st[4], st1);
}

/* gcc 12's __builtin_cpu_supports() has no "sha", so ask CPUID directly: the
 * SHA extensions (leaf 7 EBX bit 29), plus SSSE3 and SSE4.1 (leaf 1 ECX bits
 * 9 and 19) for the shuffles and blends around them, and SSE2 for i386. */
static int cpu_has_shani(void)
{
    unsigned eax, ebx, ecx, edx;

    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    if (!(edx & (1u << 26)) || !(ecx & (1u << 9)) || !(ecx & (1u << 19)))
        return 0;
    /* __get_cpuid_count checks the maximum leaf itself, so old CPUs that lack
     * leaf 7 report failure rather than garbage. */
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
        return 0;
    return (ebx & (1u << 29)) != 0;
}

#endif /* SHA256_HAVE_X86 */

/* ---- run-time selection -------------------------------------------------- */

/* Set by sha256_force_portable(); read on every update so tests and
 * benchmarks can flip it between calls. */
static atomic_int force_portable;

#ifdef SHA256_HAVE_X86
/* CPUID is probed once and cached. update() runs on several libuv pool threads:
 * racing first callers all compute and store the same value, and the atomics
 * keep that race free of undefined behaviour; relaxed order suffices since
 * nothing else is published through it. 0 = not probed yet, 1 = absent,
 * 2 = present. */
static atomic_int shani_state;
#endif

static sha256_blocks_fn sha256_blocks(void)
{
#ifdef SHA256_HAVE_X86
    if (!atomic_load_explicit(&force_portable, memory_order_relaxed)) {
        int s = atomic_load_explicit(&shani_state, memory_order_relaxed);

        if (s == 0) {
            s = cpu_has_shani() ? 2 : 1;
            atomic_store_explicit(&shani_state, s, memory_order_relaxed);
        }
        if (s == 2)
            return sha256_blocks_shani;
    }
#endif
    return sha256_blocks_portable;
}

const char *sha256_impl_name(void)
{
    return sha256_blocks() == sha256_blocks_portable ? "portable" : "sha-ni";
}

void sha256_force_portable(int on)
{
    atomic_store_explicit(&force_portable, on != 0, memory_order_relaxed);
}

/* ---- streaming API ------------------------------------------------------- */

void sha256_init(sha256_ctx_t *c)
{
    /* First 32 bits of the fractional parts of the square roots of the first
     * eight primes. */
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

    memcpy(c->h, iv, sizeof(iv));
    c->nbytes = 0;
    c->buflen = 0;
}

void sha256_update(sha256_ctx_t *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    sha256_blocks_fn blocks;
    size_t n;

    /* Also keeps memcpy() away from a NULL pointer when len is 0. */
    if (len == 0)
        return;
    blocks = sha256_blocks();
    c->nbytes += len;

    /* Top up a partial block left by an earlier call. */
    if (c->buflen > 0) {
        n = 64 - c->buflen;
        if (n > len)
            n = len;
        memcpy(c->buf + c->buflen, p, n);
        c->buflen += n;
        p += n;
        len -= n;
        if (c->buflen < 64)
            return;
        blocks(c->h, c->buf, 1);
        c->buflen = 0;
    }

    /* The bulk goes straight from the caller's buffer. */
    n = len / 64;
    if (n > 0) {
        blocks(c->h, p, n);
        p += n * 64;
        len -= n * 64;
    }

    if (len > 0) {
        memcpy(c->buf, p, len);
        c->buflen = len;
    }
}

void sha256_final(sha256_ctx_t *c, uint8_t out[32])
{
    sha256_blocks_fn blocks = sha256_blocks();
    uint64_t nbits = c->nbytes * 8; /* FIPS 180-4: length in bits, mod 2^64 */
    size_t n = c->buflen;

    /* Padding: a 1 bit, zeros up to 56 mod 64, then the 64-bit big-endian
     * length; that takes a second block when fewer than 9 bytes are left. */
    c->buf[n++] = 0x80;
    if (n > 56) {
        memset(c->buf + n, 0, 64 - n);
        blocks(c->h, c->buf, 1);
        n = 0;
    }
    memset(c->buf + n, 0, 56 - n);
    store_be32(c->buf + 56, (uint32_t)(nbits >> 32));
    store_be32(c->buf + 60, (uint32_t)nbits);
    blocks(c->h, c->buf, 1);

    for (unsigned i = 0; i < 8; i++)
        store_be32(out + 4 * i, c->h[i]);
    c->buflen = 0;
}

/* ---- hex ----------------------------------------------------------------- */

void sha256_hex(const uint8_t digest[32], char out[65])
{
    static const char digits[] = "0123456789abcdef";

    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = digits[digest[i] >> 4];
        out[2 * i + 1] = digits[digest[i] & 0x0f];
    }
    out[64] = '\0';
}

int sha256_parse_hex(const char *hex, uint8_t out[32])
{
    uint8_t tmp[32];

    if (hex == NULL)
        return -EINVAL;
    /* Reading pairwise stops at the first bad or NUL character, so a short
     * string never reads past its terminator. */
    for (unsigned i = 0; i < 32; i++) {
        int hi = hex_value(hex[2 * i]);
        int lo = hi < 0 ? -1 : hex_value(hex[2 * i + 1]);

        if (lo < 0)
            return -EINVAL;
        tmp[i] = (uint8_t)(hi << 4 | lo);
    }
    if (hex[64] != '\0')
        return -EINVAL;
    memcpy(out, tmp, sizeof(tmp));
    return 0;
}
