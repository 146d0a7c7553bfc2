/* convert_avx2.c: FP32/FP16/BF16 row conversions for the avx2 level (compiled with -mavx2 -mfma -mf16c
 * only here). FP16 uses F16C's vcvtps2ph/vcvtph2ps, whose rounding and NaN rules are exactly those of the
 * scalar reference; BF16 has no instruction at this level, so it is the reference's integer RNE in
 * 8 lanes. Tails of fewer than 8 elements use the scalar reference, which gives the same bits. */
#include "../../numerics/half.h"
#include "../kernels.h"

#include <immintrin.h>

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* 8 f32 bit patterns -> 8 bf16 patterns in the low 16 bits of each 32-bit lane. */
static inline __m256i bf16_round8(__m256i x) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, qnan, nan);
}

/* Two vectors of 32-bit lanes holding 16-bit values -> 16 packed values in order. */
static inline __m256i pack16(__m256i a, __m256i b) { return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8); }

/* 8 bf16 patterns -> 8 f32 patterns (NaN made quiet). */
static inline __m256i bf16_widen8(__m128i h) {
    __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    return _mm256_or_si256(x, _mm256_and_si256(nan, _mm256_set1_epi32(0x400000)));
}

void ampc_k_cvt_f16f32__avx2(void *restrict dst, const void *restrict src, size_t n) {
    /* dst: (n) f16, src: (n) f32 */
    uint16_t *d = dst;
    const float *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), RNE);
        __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(s + i + 8), RNE);
        _mm_storeu_si128((__m128i *)(d + i), a);
        _mm_storeu_si128((__m128i *)(d + i + 8), b);
    }
    for (; i < n; i++) d[i] = ampci_f16_from_f32_bits(ampci_f32_bits(s[i]));
}

void ampc_k_cvt_f32f16__avx2(void *restrict dst, const void *restrict src, size_t n) {
    float *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        _mm256_storeu_ps(d + i + 8, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i + 8))));
    }
    for (; i < n; i++) d[i] = ampci_f32_from_bits(ampci_f16_to_f32_bits(s[i]));
}

void ampc_k_cvt_bf16f32__avx2(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint32_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_round8(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m256i b = bf16_round8(_mm256_loadu_si256((const __m256i *)(s + i + 8)));
        _mm256_storeu_si256((__m256i *)(d + i), pack16(a, b));
    }
    for (; i < n; i++) d[i] = ampci_bf16_from_f32_bits(s[i]);
}

void ampc_k_cvt_f32bf16__avx2(void *restrict dst, const void *restrict src, size_t n) {
    uint32_t *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256((__m256i *)(d + i), bf16_widen8(_mm_loadu_si128((const __m128i *)(s + i))));
        _mm256_storeu_si256((__m256i *)(d + i + 8), bf16_widen8(_mm_loadu_si128((const __m128i *)(s + i + 8))));
    }
    for (; i < n; i++) d[i] = ampci_bf16_to_f32_bits(s[i]);
}

void ampc_k_cvt_bf16f16__avx2(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
        __m256i b = _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i + 8))));
        _mm256_storeu_si256((__m256i *)(d + i), pack16(bf16_round8(a), bf16_round8(b)));
    }
    for (; i < n; i++) d[i] = ampci_bf16_from_f32_bits(ampci_f16_to_f32_bits(s[i]));
}

void ampc_k_cvt_f16bf16__avx2(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_castsi256_ps(bf16_widen8(_mm_loadu_si128((const __m128i *)(s + i))));
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(x, RNE));
    }
    for (; i < n; i++) d[i] = ampci_f16_from_f32_bits(ampci_bf16_to_f32_bits(s[i]));
}

/* The avx2 folder's registry table: conversions only (its compute slots stay with ref). */
#define AMPCI_FOLDER_LEVEL AMPC_ISA_AVX2
const ampci_kernel ampci_kernels_avx2[] = {
    AMPCI_K_CVT(F16, F32, ampc_k_cvt_f16f32__avx2, 0),   AMPCI_K_CVT(F32, F16, ampc_k_cvt_f32f16__avx2, 0),
    AMPCI_K_CVT(BF16, F32, ampc_k_cvt_bf16f32__avx2, 0), AMPCI_K_CVT(F32, BF16, ampc_k_cvt_f32bf16__avx2, 0),
    AMPCI_K_CVT(BF16, F16, ampc_k_cvt_bf16f16__avx2, 0), AMPCI_K_CVT(F16, BF16, ampc_k_cvt_f16bf16__avx2, 0),
};
const size_t ampci_kernels_avx2_count = sizeof ampci_kernels_avx2 / sizeof ampci_kernels_avx2[0];
