/* simd_avx512.h: the 16-lane helpers that more than one avx512 kernel file needs, kept in one place so
 * that the GEMM, attention, conversion and vmath kernels round and mask the same way: tail masks of 16
 * and 32 lanes, BF16 <-> F32 in 16 lanes bit for bit as half.h (integer RNE with subnormals kept, NaN
 * quieted), the BF16 subnormal test, and the 16 x 16 transpose of 32-bit words. Everything is
 * always_inline, so each caller compiles to the instructions it had when it carried its own copy. */
#ifndef AMPC_SIMD_AVX512_H
#define AMPC_SIMD_AVX512_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#define SIMD_INLINE __attribute__((always_inline)) static inline

/* The first min(n, 16) (32) lanes; none for n <= 0. */
SIMD_INLINE __mmask16 m16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }
SIMD_INLINE __mmask32 m32(int64_t n) {
    return n >= 32 ? (__mmask32)0xffffffffu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1);
}

/* F32 patterns (32-bit lanes of x) that are NaN. */
SIMD_INLINE __mmask16 f32_isnan_bits(__m512i x) {
    return _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
}

/* F32 lanes rounded to BF16, in the low 16 bits of each 32-bit lane, bit for bit ampci_bf16_from_f32_bits:
 * RNE on the low 16 bits (subnormals kept, unlike vcvtneps2bf16, which reads them as 0), NaN quieted
 * (upper half | 0x40). */
SIMD_INLINE __m512i bf16_rne(__m512i x) {
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    return _mm512_mask_or_epi32(r, f32_isnan_bits(x), _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
}

/* 16 F32 lanes rounded once to F16 (vcvtps2ph, RNE: half.h's bits, NaN rule included) or to BF16
 * (bf16_rne), as 16 halves: the GEMMs' write-out of a result stored in a 16-bit dtype. */
SIMD_INLINE __m256i f32_round16(__m512 x, bool f16) {
    if (f16) return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(x)));
}

/* 16 BF16 patterns -> 16 F32 patterns, NaN quieted (as half.h widens). */
SIMD_INLINE __m512i bf16_widen(__m256i h) {
    __m512i x = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    return _mm512_mask_or_epi32(x, f32_isnan_bits(x), x, _mm512_set1_epi32(0x400000));
}

/* BF16 patterns (16-bit lanes of w) that are subnormal: exponent 0, mantissa non-zero (vdpbf16ps reads
 * them as 0, so the kernels that use it must find them first). */
SIMD_INLINE __mmask32 bf16_subnormal(__m512i w) {
    return _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x7f80)) & _mm512_test_epi16_mask(w, _mm512_set1_epi16(0x007f));
}

/* In place transpose of 16 vectors of 16 32-bit words: r[i] lane j <-> r[j] lane i. */
SIMD_INLINE void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* group g = rows 4g..4g+3; u[4g + c] holds, in 128-bit lane L, the rows of the group at column 4L + c */
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
        __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xee);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xee);
        r[0 + c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
        r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
    }
}

/* transpose16 of 16 integer vectors (32-bit words moved as they are). */
SIMD_INLINE void transpose16_epi32(__m512i w[16]) {
    __m512 f[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) f[i] = _mm512_castsi512_ps(w[i]);
    transpose16(f);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) w[i] = _mm512_castps_si512(f[i]);
}

#endif
