/* quant_avx512.c: AVX-512 FP8 quantisation (kernels.h: ampci_quant8_kernel), 16 values a step, equal to
 * kernels/ref/quant_ref.c in every bit, in the saturation count and in amax: the same F32 product, the
 * same RNE on |p|'s pattern above the min normal and the same magic-number addition (an F32 add in the
 * default rounding, MXCSR untouched) below it, the same clamp of a rounded pattern above max's and the
 * same quiet NaN. amax is the integer max of the finite |x| patterns (their order is float order), the
 * count a popcount of the saturated lanes. The format's constants are compile-time in each loop. */
#include "kernels_avx512.h"
#include "vmath_avx512.h"

#include <string.h>

/* A format's constants (quant_ref.c's q8_fmt): F32 mantissa bits dropped, min normal, max, magic. */
#define Q8_PREFETCH 1024 /* values ahead (4 KiB), as quant_ref.c */
#define E4M3_DROP 20
#define E4M3_MIN_NORMAL 0x3c800000
#define E4M3_MAX 0x43e00000
#define E4M3_MAGIC 24576.0f
#define E5M2_DROP 21
#define E5M2_MIN_NORMAL 0x38800000
#define E5M2_MAX 0x47600000
#define E5M2_MAGIC 192.0f

typedef struct q8_state {
    __m512i amax; /* the largest finite |x| pattern per lane */
    uint64_t sat;
} q8_state;

/* 16 products p: the F32 patterns of q(p) with their signs (NaN quiet), saturated lanes (of `live`) counted. */
VM_INLINE __m512i q8_vec(__m512 p, int drop, int min_normal, int max, float magic, __mmask16 live, q8_state *st) {
    __m512i u = _mm512_castps_si512(p), a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, (unsigned)drop), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32((1 << (drop - 1)) - 1)), lsb);
    r = _mm512_and_si512(r, _mm512_set1_epi32(-(1 << drop)));
    __m512 sub = _mm512_sub_ps(_mm512_add_ps(_mm512_castsi512_ps(a), VM_SET1(magic)), VM_SET1(magic));
    __mmask16 small = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(min_normal));
    r = _mm512_mask_mov_epi32(r, small, _mm512_castps_si512(sub));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
    __mmask16 over = _mm512_mask_cmpgt_epu32_mask((__mmask16)(live & ~nan), r, _mm512_set1_epi32(max));
    st->sat += (uint64_t)__builtin_popcount(over);
    r = _mm512_mask_mov_epi32(r, over, _mm512_set1_epi32(max));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc00000));
    return _mm512_or_si512(r, _mm512_and_si512(u, _mm512_set1_epi32((int)0x80000000u)));
}

/* The first k (<= 16) values of x at dst: their BF16 patterns, amax updated. */
VM_INLINE void q8_step(uint16_t *dst, const float *x, int64_t k, __m512 scale, int drop, int min_normal, int max,
                       float magic, q8_state *st) {
    __mmask16 live = vm_mask16(k);
    __m512 v = vm_load(x, k);
    __m512i ax = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    __mmask16 finite = _mm512_cmplt_epu32_mask(ax, _mm512_set1_epi32(0x7f800000)); /* pad lanes: 0 */
    st->amax = _mm512_mask_max_epu32(st->amax, finite, st->amax, ax);
    __m512i q = q8_vec(_mm512_mul_ps(v, scale), drop, min_normal, max, magic, live, st);
    __m512i b = _mm512_srli_epi32(q, 16); /* the BF16 pattern in each lane's low half */
    if (k >= 16) _mm256_storeu_si256((__m256i *)dst, _mm512_cvtepi32_epi16(b));
    else _mm512_mask_cvtepi32_storeu_epi16(dst, live, b);
}

#define Q8_LOOP(FMT)                                                                                                   \
    static void q8_##FMT(uint16_t *dst, const float *x, int64_t n, float scale, q8_state *st) {                        \
        __m512 s = VM_SET1(scale);                                                                                     \
        for (int64_t i = 0; i < n; i += 16) {                                                                          \
            _mm_prefetch((const char *)((uintptr_t)(x + i) + 4 * Q8_PREFETCH), _MM_HINT_T0);                           \
            q8_step(dst + i, x + i, n - i, s, FMT##_DROP, FMT##_MIN_NORMAL, FMT##_MAX, FMT##_MAGIC, st);               \
        }                                                                                                              \
    }
Q8_LOOP(E4M3)
Q8_LOOP(E5M2)

uint64_t ampc_k_quant8_f32__avx512(uint16_t *dst /* (n) BF16 bits */, const float *x /* (n) */, int64_t n, float scale,
                                   int fmt, float *amax) {
    AMPCI_ASSERT(fmt == AMPCI_QUANT8_E4M3 || fmt == AMPCI_QUANT8_E5M2);
    q8_state st = {_mm512_setzero_si512(), 0};
    if (fmt == AMPCI_QUANT8_E4M3) q8_E4M3(dst, x, n, scale, &st);
    else q8_E5M2(dst, x, n, scale, &st);
    uint32_t m = _mm512_reduce_max_epu32(st.amax);
    float mf;
    memcpy(&mf, &m, sizeof mf);
    if (mf > *amax) *amax = mf;
    return st.sat;
}
