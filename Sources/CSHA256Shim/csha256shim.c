#include "csha256shim.h"
#include <stdlib.h>
#include <string.h>

/* FIPS 180-4 §5.3.3: the initial hash value. */
static const uint32_t initial_h[8] = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

/* FIPS 180-4 §4.2.2: the round constants. */
static const uint32_t round_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* CPUID directly rather than __builtin_cpu_supports("sha"): no preprocessor test tells whether a compiler knows
 * the "sha" name, and the builtin needs __cpu_model from libgcc or compiler-rt at link time. */
int csha256_accelerated(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    const int ssse3 = (ecx >> 9) & 1, sse41 = (ecx >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;  /* leaf 7 absent */
    const int sha = (ebx >> 29) & 1;
    return ssse3 && sse41 && sha;
}

#define SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

/* Rounds 4i .. 4i+3 (FIPS 180-4 §6.2.2 step 3) with the message words w = W[4i .. 4i+3]. The instructions keep the
 * eight working variables in two registers, ABEF and CDGH (A in the top lane); sha256rnds2 does two rounds from
 * CDGH, ABEF and W+K in the low two lanes and returns the new ABEF, while the new CDGH is the old ABEF. */
SHA_TARGET static inline __attribute__((always_inline))
void four_rounds(__m128i *abef, __m128i *cdgh, __m128i w, int i) {
    __m128i wk = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&round_k[4 * i]));
    /* Rounds 4i and 4i+1: the new ABEF lands in *cdgh, and the old ABEF left in *abef is the new CDGH. */
    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, wk);
    /* Rounds 4i+2 and 4i+3 on W+K's high lanes with the roles swapped back, so each register again holds what its
     * name says. */
    wk = _mm_shuffle_epi32(wk, 0x0E);
    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, wk);
}

/* FIPS 180-4 §6.2.2 step 1, four words at a time: W[t .. t+3] from W[t-16 ..], W[t-12 ..], W[t-8 ..], W[t-4 ..],
 * where W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16]. msg1 adds the σ0 terms, W[t-7 .. t-4] (straddling the
 * last two vectors) is added by hand, and msg2 adds the σ1 terms, the last two from the words it just made. */
SHA_TARGET static inline __attribute__((always_inline))
__m128i schedule(__m128i w16, __m128i w12, __m128i w8, __m128i w4) {
    const __m128i w7 = _mm_alignr_epi8(w4, w8, 4);
    return _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w16, w12), w7), w4);
}

/* Compresses `blocks` 64-byte blocks into h (FIPS 180-4 §6.2.2). Only this code is compiled for the SHA extensions,
 * so the rest of the target builds for the baseline CPU. */
SHA_TARGET
static void compress(uint32_t h[8], const uint8_t *data, size_t blocks) {
    /* Reverses the bytes of each 32-bit lane: message words are big-endian. */
    const __m128i big_endian = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);

    /* h as [A B C D] [E F G H] (lane 0 first) → ABEF = [F E B A], CDGH = [H G D C]. */
    const __m128i abcd = _mm_loadu_si128((const __m128i *)&h[0]);
    const __m128i efgh = _mm_loadu_si128((const __m128i *)&h[4]);
    const __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);
    const __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);
    __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);
    __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);

    for (; blocks > 0; blocks--, data += 64) {
        const __m128i abef_in = abef, cdgh_in = cdgh;
        __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 0)), big_endian);
        __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16)), big_endian);
        __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 32)), big_endian);
        __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 48)), big_endian);
        four_rounds(&abef, &cdgh, w0, 0);
        four_rounds(&abef, &cdgh, w1, 1);
        four_rounds(&abef, &cdgh, w2, 2);
        four_rounds(&abef, &cdgh, w3, 3);
        for (int i = 4; i < 16; i += 4) {  /* w0 .. w3 roll forward: each takes the place of the oldest */
            w0 = schedule(w0, w1, w2, w3);
            four_rounds(&abef, &cdgh, w0, i);
            w1 = schedule(w1, w2, w3, w0);
            four_rounds(&abef, &cdgh, w1, i + 1);
            w2 = schedule(w2, w3, w0, w1);
            four_rounds(&abef, &cdgh, w2, i + 2);
            w3 = schedule(w3, w0, w1, w2);
            four_rounds(&abef, &cdgh, w3, i + 3);
        }
        abef = _mm_add_epi32(abef, abef_in);
        cdgh = _mm_add_epi32(cdgh, cdgh_in);
    }

    /* Back to [A B C D] [E F G H]. */
    const __m128i abef_rev = _mm_shuffle_epi32(abef, 0x1B);  /* [A B E F] */
    const __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xB1);      /* [G H C D] */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(abef_rev, ghcd, 0xF0));
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(ghcd, abef_rev, 8));
}
#else
int csha256_accelerated(void) { return 0; }
static void compress(uint32_t h[8], const uint8_t *data, size_t blocks) {
    (void)h, (void)data, (void)blocks;
    abort();
}
#endif

void csha256_init(csha256_ctx *ctx) {
    memcpy(ctx->h, initial_h, sizeof ctx->h);
    ctx->length = 0;
    ctx->buffered = 0;
}

void csha256_update(csha256_ctx *ctx, const uint8_t *data, size_t count) {
    ctx->length += count;
    if (ctx->buffered > 0) {  /* top up the partial block first */
        const size_t take = count < 64 - ctx->buffered ? count : 64 - ctx->buffered;
        memcpy(ctx->buffer + ctx->buffered, data, take);
        ctx->buffered += take, data += take, count -= take;
        if (ctx->buffered < 64) return;
        compress(ctx->h, ctx->buffer, 1);
        ctx->buffered = 0;
    }
    compress(ctx->h, data, count / 64);  /* whole blocks straight from the caller's bytes */
    memcpy(ctx->buffer, data + count / 64 * 64, count % 64);
    ctx->buffered = count % 64;
}

/* FIPS 180-4 §5.1.1: a 1 bit, zeros up to 56 bytes mod 64, then the message length in bits, big-endian. */
void csha256_final(csha256_ctx *ctx, uint8_t digest[32]) {
    const uint64_t bits = ctx->length * 8;
    uint8_t pad[72] = {0x80};
    const size_t zeros_end = ctx->buffered < 56 ? 56 - ctx->buffered : 120 - ctx->buffered;
    for (int i = 0; i < 8; i++) pad[zeros_end + i] = (uint8_t)(bits >> (56 - 8 * i));
    csha256_update(ctx, pad, zeros_end + 8);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(ctx->h[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(ctx->h[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(ctx->h[i] >> 8);
        digest[4 * i + 3] = (uint8_t)ctx->h[i];
    }
}
