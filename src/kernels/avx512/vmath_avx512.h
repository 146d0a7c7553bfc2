/* vmath_avx512.h: what the avx512 eltwise, norm, nn and optim kernels share: tail masks and masked
 * loads/stores, float -> double accumulation in a fixed lane order, half.h's FP16/BF16 widen/narrow in 16
 * lanes, the vector transcendental functions (exp, log, tanh, sigmoid, erf and the normal cdf) and the
 * row reductions of softmax and cross-entropy.
 *
 * Accuracy, measured over all 2^32 float patterns ("vs libm": glibc's float function, the ref kernels'
 * oracle; "vs exact": the correctly rounded value, from double); tests/test_kernels_avx512.c re-measures
 * every 37th pattern and the special values against the bounds:
 *   vm_exp      vs libm <= 1 ulp, vs exact <= 1 ulp (subnormal results rounded once, by vscalefps)
 *   vm_log      vs libm <= 1 ulp, vs exact <= 1 ulp
 *   vm_tanh     vs libm <= 2 ulp (glibc's tanhf is itself up to 2 ulp from exact), vs exact <= 1 ulp
 *   vm_sigmoid  vs ref's 1 / (1 + expf(-x)) <= 4 ulp (exp 1 ulp apart; 1 + e and 1 / . may round apart)
 *   vm_erf      vs libm <= 1 ulp, vs exact <= 1 ulp
 * Coefficients: weighted minimax polynomials (Remez exchange in 40-digit arithmetic) for the forms named
 * at each function, rounded to float; the figures above include that rounding. Special values are exact:
 * exp(-inf) = 0, exp(+inf) = inf, overflow -> inf, underflow -> subnormal or 0, log(+-0) = -inf,
 * log(x < 0) = NaN, log(inf) = inf, tanh(+-inf) = +-1, tanh(-0) = -0, erf(+-inf) = +-1, NaN -> NaN. The
 * MXCSR is never touched: subnormal inputs and results count at their value. */
#ifndef AMPC_VMATH_AVX512_H
#define AMPC_VMATH_AVX512_H

#include "../kernels.h"
#include "simd_avx512.h"

#include <immintrin.h>
#include <math.h>

#define VM_INLINE __attribute__((always_inline)) static inline
#define VM_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define VM_SET1 _mm512_set1_ps

/* ---- masks, loads, stores ---- */

/* The first min(n, 16) lanes (n <= 0: none). */
VM_INLINE __mmask16 vm_mask16(int64_t n) { return m16(n); }

/* The first n of x[0..15], the rest 0 (and never touched in memory). */
VM_INLINE __m512 vm_load(const float *x, int64_t n) {
    return n >= 16 ? _mm512_loadu_ps(x) : _mm512_maskz_loadu_ps(vm_mask16(n), x);
}

/* The first n lanes of v to y. Masked only for a tail: full-width masked stores are slow on some cores
 * (an AMD EPYC ran the BF16 unscale kernel 3.8x slower with them). */
VM_INLINE void vm_store(float *y, __m512 v, int64_t n) {
    if (n >= 16) _mm512_storeu_ps(y, v);
    else _mm512_mask_storeu_ps(y, vm_mask16(n), v);
}

/* ---- accumulation in double: lanes 0..7 into lo, 8..15 into hi, lane j always with lane j ---- */

VM_INLINE __m512d vm_lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
VM_INLINE __m512d vm_hi_pd(__m512 v) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

VM_INLINE void vm_acc_pd(__m512d *lo, __m512d *hi, __m512 v) {
    *lo = _mm512_add_pd(*lo, vm_lo_pd(v));
    *hi = _mm512_add_pd(*hi, vm_hi_pd(v));
}

/* += a * b per lane; products of floats are exact in double, so this is also ref's mul-then-add. */
VM_INLINE void vm_acc_prod_pd(__m512d *lo, __m512d *hi, __m512 a, __m512 b) {
    *lo = _mm512_add_pd(*lo, _mm512_mul_pd(vm_lo_pd(a), vm_lo_pd(b)));
    *hi = _mm512_add_pd(*hi, _mm512_mul_pd(vm_hi_pd(a), vm_hi_pd(b)));
}

/* The 16 lanes summed in a fixed order: lo + hi, then the intrinsic's halving tree. */
VM_INLINE double vm_sum_pd(__m512d lo, __m512d hi) { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }

/* The 16 lanes rounded to float, in lane order. */
VM_INLINE __m512 vm_cvt_pd_ps(__m512d lo, __m512d hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}

/* ---- FP16/BF16 <-> F32 in 16 lanes, bit for bit as half.h (the BF16 bit work is simd_avx512.h's, which
 * convert_avx512.c's row kernels use too) ---- */

/* BF16 -> F32, NaN quieted. */
VM_INLINE __m512 vm_bf16_widen(__m256i h) { return _mm512_castsi512_ps(bf16_widen(h)); }

/* F32 -> BF16: integer RNE, NaN quieted (upper half | 0x40). */
VM_INLINE __m256i vm_bf16_narrow(__m512 f) { return _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(f))); }

/* FP16: vcvtph2ps / vcvtps2ph with RNE give half.h's bits, NaN rule included. */
VM_INLINE __m512 vm_f16_widen(__m256i h) { return _mm512_cvtph_ps(h); }
VM_INLINE __m256i vm_f16_narrow(__m512 f) { return _mm512_cvtps_ph(f, VM_RNE); }

/* ---- small helpers ---- */

/* c[0] + c[1] t + ... + c[n-1] t^(n-1), Horner with FMA. */
VM_INLINE __m512 vm_poly(__m512 t, const float *c, int n) {
    __m512 p = VM_SET1(c[n - 1]);
#pragma GCC unroll 16
    for (int i = n - 2; i >= 0; i--) p = _mm512_fmadd_ps(p, t, VM_SET1(c[i]));
    return p;
}

VM_INLINE __m512 vm_abs(__m512 x) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

VM_INLINE __m512 vm_neg(__m512 x) { return _mm512_xor_ps(x, VM_SET1(-0.0f)); }

/* a (non-negative) with the sign bit of s: ternary logic "mask ? s : a" with the sign-bit mask. */
VM_INLINE __m512 vm_copysign(__m512 a, __m512 s) {
    return _mm512_castsi512_ps(
        _mm512_ternarylogic_epi32(_mm512_castps_si512(a), _mm512_castps_si512(s), _mm512_set1_epi32(INT32_MIN), 0xd8));
}

/* ---- exp ---- */

/* exp(r) = 1 + r + r^2 g(r) on |r| <= ln2/2: g minimax for relative error 0.05 u (u = 2^-24). */
static const float vm_exp_g[5] = {0x1.fffffcp-2f, 0x1.55548cp-3f, 0x1.555858p-5f, 0x1.123de0p-7f, 0x1.6ac74ep-10f};

/* x = n ln2 + r (Cody-Waite with FMA: x - n ln2_hi is exact for |n| <= 150), exp(r) = 1 + r (1 + r g)
 * (<= 0.7 ulp), then vscalefps multiplies by 2^n with a single rounding, into the subnormals and to inf
 * or 0 beyond the range. x is clamped to [-104, 89] first (exp(-104) rounds to 0, exp(89) overflows) so
 * that n stays finite; vminps/vmaxps return their second operand for NaN, which keeps NaN. */
VM_INLINE __m512 vm_exp(__m512 x) {
    x = _mm512_max_ps(VM_SET1(-104.0f), _mm512_min_ps(VM_SET1(89.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, VM_SET1(0x1.715476p+0f)), VM_RNE);
    __m512 r = _mm512_fnmadd_ps(n, VM_SET1(0x1.62e430p-1f), x); /* ln2 rounded to float */
    r = _mm512_fnmadd_ps(n, VM_SET1(-0x1.05c610p-29f), r);      /* ln2 minus that */
    __m512 s = _mm512_fmadd_ps(vm_poly(r, vm_exp_g, 5), r, VM_SET1(1.0f));
    return _mm512_scalef_ps(_mm512_fmadd_ps(s, r, VM_SET1(1.0f)), n);
}

/* ---- log ---- */

/* log1p(f) = f - f^2/2 + f^3 h(f) on [sqrt(1/2) - 1, sqrt(2) - 1]: h minimax for relative error 0.11 u. */
static const float vm_log_h[8] = {0x1.555554p-2f, -0x1.000226p-2f, 0x1.99a008p-3f, -0x1.547244p-3f,
                                  0x1.22da1ep-3f, -0x1.0d8542p-3f, 0x1.055b68p-3f, -0x1.38b578p-4f};

/* log(x) = e ln2 + log1p(f), x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) (vgetexp/vgetmant, which
 * see subnormals at their value); f = m - 1 is exact. Negative x gives NaN (vgetmant's sign control),
 * zeros -inf and +inf itself by blends (e = inf would meet the negative ln2 tail as inf - inf). */
VM_INLINE __m512 vm_log(__m512 x) {
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_nan), e = _mm512_getexp_ps(x);
    __mmask16 big = _mm512_cmp_ps_mask(m, VM_SET1(0x1.6a09e6p+0f), _CMP_GT_OQ);
    m = _mm512_mask_mul_ps(m, big, m, VM_SET1(0.5f));
    e = _mm512_mask_add_ps(e, big, e, VM_SET1(1.0f));
    __m512 f = _mm512_sub_ps(m, VM_SET1(1.0f));
    __m512 q = _mm512_fmadd_ps(vm_poly(f, vm_log_h, 8), f, VM_SET1(-0.5f)); /* -1/2 + f h */
    __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(f, q), f, f);                  /* log1p(f) = f + f^2 q */
    y = _mm512_fmadd_ps(e, VM_SET1(-0x1.05c610p-29f), y);
    y = _mm512_fmadd_ps(e, VM_SET1(0x1.62e430p-1f), y);
    y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), VM_SET1(-INFINITY));
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, VM_SET1(INFINITY), _CMP_EQ_OQ), x);
}

/* ---- tanh, sigmoid ---- */

/* tanh(x) = x + x^3 k(x^2) on |x| <= 0.75: k minimax for relative error 0.03 u. */
static const float vm_tanh_k[6] = {-0x1.55554ap-2f, 0x1.110ddap-3f,  -0x1.b98108p-5f,
                                   0x1.5f8f24p-6f,  -0x1.f64af6p-8f, 0x1.c82f7ap-10f};

/* tanh(|x|) above 0.75 as 1 - 2e / (1 + e), e = exp(-2|x|) < 0.23: the quotient is below 0.37, so its
 * few ulp reach the result as at most half an ulp (the form (1 - e) / (1 + e) measured 2 ulp from exact);
 * below, the odd polynomial. Worked on |x|, the sign put back last (so tanh(-0) = -0). */
VM_INLINE __m512 vm_tanh(__m512 x) {
    __m512 ax = vm_abs(x), s = _mm512_mul_ps(x, x), one = VM_SET1(1.0f);
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(ax, s), vm_poly(s, vm_tanh_k, 6), ax);
    __m512 e = vm_exp(_mm512_mul_ps(ax, VM_SET1(-2.0f)));
    __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_add_ps(e, e), _mm512_add_ps(one, e)));
    __mmask16 use_small = _mm512_cmp_ps_mask(ax, VM_SET1(0.75f), _CMP_LE_OQ);
    return vm_copysign(_mm512_mask_mov_ps(big, use_small, small), x);
}

/* ref's formula 1 / (1 + exp(-x)) (exp overflow gives 0, as there). */
VM_INLINE __m512 vm_sigmoid(__m512 x) {
    return _mm512_div_ps(VM_SET1(1.0f), _mm512_add_ps(VM_SET1(1.0f), vm_exp(vm_neg(x))));
}

/* sigmoid(2u), split for GELU-tanh (whose 0.5 (1 + tanh(u)) it equals): e = exp(-2|u|), q = 1 / (1 + e);
 * the result is q for u >= 0 and e q below, and *eq2 = e q^2 = s (1 - s) either way. No overflow: e <= 1. */
VM_INLINE __m512 vm_sigmoid2(__m512 u, __m512 *eq2) {
    __m512 e = vm_exp(_mm512_mul_ps(vm_abs(u), VM_SET1(-2.0f)));
    __m512 q = _mm512_div_ps(VM_SET1(1.0f), _mm512_add_ps(VM_SET1(1.0f), e)), eq = _mm512_mul_ps(e, q);
    *eq2 = _mm512_mul_ps(eq, q);
    return _mm512_mask_mov_ps(q, _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ), eq);
}

/* ---- erf, and the normal cdf for GELU-erf ---- */

/* erf(z) = z + z P(z^2) on |z| < 1: P minimax for relative error 0.03 u (its leading 2/sqrt(pi) - 1 keeps
 * the coefficient rounding small next to the exact z). */
static const float vm_erf_p[7] = {0x1.06eba8p-3f, -0x1.81273ep-2f,  0x1.ce2ce6p-4f, -0x1.b7f71ap-6f,
                                  0x1.53f224p-8f, -0x1.a3515ep-11f, 0x1.4771fep-14f};
/* erfc(w) = exp(-w^2) Q(w) on [1, 4]: Q minimax for the absolute error of erfc, 0.05 u. */
static const float vm_erfc_q[9] = {0x1.fc095ap-1f,  -0x1.1470b4p+0f, 0x1.b9b694p-1f,   -0x1.09a822p-1f, 0x1.d835c6p-3f,
                                   -0x1.2a05dcp-4f, 0x1.f56db4p-7f,  -0x1.f52c48p-10f, 0x1.c0246cp-14f};

/* erf(z) for |z| < 1. */
VM_INLINE __m512 vm_erf_small(__m512 z) { return _mm512_fmadd_ps(z, vm_poly(_mm512_mul_ps(z, z), vm_erf_p, 7), z); }

/* erfc(|z|) for |z| >= 1. Q's argument stops at 4, where erf already rounds to +-1: beyond, exp(-z^2)
 * still carries the decay and Q(4) overstates Q by a factor below |z| / 4 (only vm_phi's far left tail
 * sees this, where ref's 1 + erf is 0). */
VM_INLINE __m512 vm_erfc_big(__m512 az) {
    __m512 e = vm_exp(vm_neg(_mm512_mul_ps(az, az)));
    return _mm512_mul_ps(e, vm_poly(_mm512_min_ps(VM_SET1(4.0f), az), vm_erfc_q, 9));
}

VM_INLINE __mmask16 vm_erf_use_small(__m512 z) { return _mm512_cmp_ps_mask(vm_abs(z), VM_SET1(1.0f), _CMP_LT_OQ); }

VM_INLINE __m512 vm_erf(__m512 z) {
    __m512 big = vm_copysign(_mm512_sub_ps(VM_SET1(1.0f), vm_erfc_big(vm_abs(z))), z);
    return _mm512_mask_mov_ps(big, vm_erf_use_small(z), vm_erf_small(z));
}

/* Phi = (1 + erf(z)) / 2, z = x / sqrt 2 as ref rounds it: 0.5 + 0.5 erf(z) for |z| < 1, else
 * 1 - erfc(z) / 2 (z > 0) or erfc(|z|) / 2 (z < 0: no cancellation in the left tail). */
VM_INLINE __m512 vm_phi(__m512 z) {
    __m512 h = _mm512_mul_ps(vm_erfc_big(vm_abs(z)), VM_SET1(0.5f));
    __m512 big = _mm512_mask_sub_ps(h, _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GT_OQ), VM_SET1(1.0f), h);
    __m512 small = _mm512_fmadd_ps(vm_erf_small(z), VM_SET1(0.5f), VM_SET1(0.5f));
    return _mm512_mask_mov_ps(big, vm_erf_use_small(z), small);
}

/* ---- row reductions of softmax and cross-entropy ---- */

/* max of x[0..n) as ref takes it (x > mx ? x : mx from -inf): NaN never wins (vmaxps returns its second
 * operand when either is NaN); -inf for n = 0 or a row of -inf and NaN. */
static inline float vm_row_max(const float *x, int64_t n) {
    __m512 mx = VM_SET1(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) mx = _mm512_mask_max_ps(mx, vm_mask16(n - i), vm_load(x + i, n - i), mx);
    return _mm512_reduce_max_ps(mx);
}

/* sum over c < n of exp(x[c] - sub) in double, 16 lanes in a fixed order; the exp values also go to
 * e[0..n) when e is non-NULL (e may be x). */
static inline double vm_row_sumexp(float *e, const float *x, int64_t n, float sub) {
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 p = vm_exp(_mm512_sub_ps(vm_load(x + i, n - i), VM_SET1(sub)));
        p = _mm512_maskz_mov_ps(vm_mask16(n - i), p);
        if (e) vm_store(e + i, p, n - i);
        vm_acc_pd(&lo, &hi, p);
    }
    return vm_sum_pd(lo, hi);
}

#endif
