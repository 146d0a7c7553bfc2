/* convert_avx512.c: FP32/FP16/BF16 row conversions for the avx512 level (AVX-512 F/BW/VL/DQ flags, plus
 * BF16 for the functions marked so; only this folder is compiled with them). Tails use masked loads and
 * stores, so there is no scalar remainder.
 *
 * FP16: vcvtps2ph/vcvtph2ps (AVX-512F) round and treat NaN exactly as the scalar reference.
 * BF16: two paths, both bit-identical to the reference:
 *   - __avx512: the reference's integer RNE in 16 lanes (bf16_rne of simd_avx512.h, which the GEMM and
 *     vmath kernels share), narrowed with vpmovdw;
 *   - __avx512bf16: vcvtneps2bf16, which is RNE with the reference's NaN rule but treats subnormal
 *     inputs as zero (DAZ regardless of MXCSR). Lanes with a subnormal input are recomputed with the
 *     integer RNE and blended in, so -0x1p-127 still gives 0x8040 as it must. */
#include "../kernels.h"
#include "simd_avx512.h"

#include <immintrin.h>

#define RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

static inline __mmask16 tail_mask(size_t left) { return (__mmask16)((1u << left) - 1); }

__attribute__((target("avx512bf16"))) static inline __m256i bf16_round16_hw(__m512i x) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(x));
    /* subnormal inputs (exponent field 0, mantissa non-zero) were flushed: redo those lanes */
    __mmask16 sub = _mm512_testn_epi32_mask(x, _mm512_set1_epi32(0x7f800000)) &
                    _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x7fffff));
    return sub ? _mm256_mask_blend_epi16(sub, h, _mm512_cvtepi32_epi16(bf16_rne(x))) : h;
}

/* Each kernel: a main loop over full vectors, then one masked step for the n % 16 tail. */

void ampc_k_cvt_f16f32__avx512(void *restrict dst, const void *restrict src, size_t n) {
    /* dst: (n) f16, src: (n) f32 */
    uint16_t *d = dst;
    const float *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(_mm512_loadu_ps(s + i), RNE));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(d + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + i), RNE));
    }
}

void ampc_k_cvt_f32f16__avx512(void *restrict dst, const void *restrict src, size_t n) {
    float *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(d + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
    }
}

void ampc_k_cvt_bf16f32__avx512(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint32_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(bf16_rne(_mm512_loadu_si512(s + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(d + i, m, _mm512_cvtepi32_epi16(bf16_rne(_mm512_maskz_loadu_epi32(m, s + i))));
    }
}

__attribute__((target("avx512bf16"))) void ampc_k_cvt_bf16f32__avx512bf16(void *restrict dst, const void *restrict src,
                                                                          size_t n) {
    uint16_t *d = dst;
    const uint32_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(d + i), bf16_round16_hw(_mm512_loadu_si512(s + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(d + i, m, bf16_round16_hw(_mm512_maskz_loadu_epi32(m, s + i)));
    }
}

void ampc_k_cvt_f32bf16__avx512(void *restrict dst, const void *restrict src, size_t n) {
    uint32_t *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_si512(d + i, bf16_widen(_mm256_loadu_si256((const __m256i *)(s + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_epi32(d + i, m, bf16_widen(_mm256_maskz_loadu_epi16(m, s + i)));
    }
}

static inline __m256i bf16_from_f16_16(__m256i h) {
    return _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(_mm512_cvtph_ps(h))));
}

void ampc_k_cvt_bf16f16__avx512(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i), bf16_from_f16_16(_mm256_loadu_si256((const __m256i *)(s + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(d + i, m, bf16_from_f16_16(_mm256_maskz_loadu_epi16(m, s + i)));
    }
}

static inline __m256i f16_from_bf16_16(__m256i h) { return _mm512_cvtps_ph(_mm512_castsi512_ps(bf16_widen(h)), RNE); }

void ampc_k_cvt_f16bf16__avx512(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint16_t *s = src;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i), f16_from_bf16_16(_mm256_loadu_si256((const __m256i *)(s + i))));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(d + i, m, f16_from_bf16_16(_mm256_maskz_loadu_epi16(m, s + i)));
    }
}
