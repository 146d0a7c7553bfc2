/* eltwise_avx512.c: AVX-512 elementwise kernels (unary forward and backward, binary). Full vectors, then
 * one masked step for the tail. Two classes, with kernels/ref/eltwise_ref.c's definitions:
 *   - plain IEEE operations, bit-identical to ref (ref's operations in ref's order, no contraction):
 *     neg, sqrt, relu forward; every backward but the GELUs (exp, tanh, sigmoid use the saved y exactly
 *     as ref does); add, sub, mul, div.
 *   - transcendental ones through vmath_avx512.h (bounds there): exp, log, tanh, sigmoid forward, both
 *     GELUs forward and backward. GELU-tanh uses 0.5 (1 + tanh(u)) = sigmoid(2u) and 1 - tanh(u)^2 =
 *     4 s (1 - s), which avoids the cancellation of 1 + tanh(u) near -1; GELU-erf takes Phi from erfc in
 *     the left tail. u (resp. z = x / sqrt 2) is rounded exactly as ref rounds it. The difference to ref
 *     is an absolute error in units of u |x| (forward) and u (1 + |x u'|) (backward), where ref's own
 *     1 + tanh and 1 + erf lose their accuracy; tests/test_kernels_avx512.c measures it. */
#include "kernels_avx512.h"
#include "vmath_avx512.h"

/* ref's constants, rounded to float as there */
#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f
#define GELU_C 0.044715f

/* ---- forward, one vector: y = f(x) ---- */

VM_INLINE __m512 sqrt_v(__m512 x) { return _mm512_sqrt_ps(x); }

/* x > 0 ? x : (NaN ? x : +0), as ref */
VM_INLINE __m512 relu_v(__m512 x) {
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_maskz_mov_ps(keep, x);
}

/* x sigmoid(2u), u = sqrt(2/pi) (x + c x^3) rounded as ref's forward rounds it: ((c x) x) x */
VM_INLINE __m512 gelu_tanh_v(__m512 x) {
    __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(VM_SET1(GELU_C), x), x), x);
    __m512 u = _mm512_mul_ps(VM_SET1(SQRT_2_OVER_PI), _mm512_add_ps(x, cube)), eq2;
    return _mm512_mul_ps(x, vm_sigmoid2(u, &eq2));
}

VM_INLINE __m512 gelu_erf_v(__m512 x) { return _mm512_mul_ps(x, vm_phi(_mm512_mul_ps(x, VM_SET1(INV_SQRT_2)))); }

/* y: (n), x: (n); y may be x */
#define UNARY_FWD(name, f)                                                                                             \
    void name(float *y, const float *x, int64_t n) {                                                                   \
        for (int64_t i = 0; i < n; i += 16) vm_store(y + i, f(vm_load(x + i, n - i)), n - i);                          \
    }
UNARY_FWD(ampc_k_neg_f32__avx512, vm_neg)
UNARY_FWD(ampc_k_exp_f32__avx512, vm_exp)
UNARY_FWD(ampc_k_log_f32__avx512, vm_log)
UNARY_FWD(ampc_k_sqrt_f32__avx512, sqrt_v)
UNARY_FWD(ampc_k_tanh_f32__avx512, vm_tanh)
UNARY_FWD(ampc_k_sigmoid_f32__avx512, vm_sigmoid)
UNARY_FWD(ampc_k_relu_f32__avx512, relu_v)
UNARY_FWD(ampc_k_gelu_erf_f32__avx512, gelu_erf_v)
UNARY_FWD(ampc_k_gelu_tanh_f32__avx512, gelu_tanh_v)

/* ---- backward, one vector of gx = gy f'(x) from gy, x, y at one offset with m valid lanes ---- */

/* Each reads only the arrays its formula uses (ref's choice of x or y). */
#define LD(p) vm_load(p, m)
VM_INLINE __m512 neg_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)x, (void)y;
    return vm_neg(LD(gy));
}
VM_INLINE __m512 exp_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)x;
    return _mm512_mul_ps(LD(gy), LD(y));
}
VM_INLINE __m512 log_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)y;
    return _mm512_div_ps(LD(gy), LD(x));
}
VM_INLINE __m512 sqrt_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)x;
    return _mm512_div_ps(LD(gy), _mm512_mul_ps(VM_SET1(2.0f), LD(y)));
}
VM_INLINE __m512 tanh_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)x;
    __m512 yv = LD(y);
    return _mm512_mul_ps(LD(gy), _mm512_sub_ps(VM_SET1(1.0f), _mm512_mul_ps(yv, yv)));
}
VM_INLINE __m512 sigmoid_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)x;
    __m512 yv = LD(y);
    return _mm512_mul_ps(_mm512_mul_ps(LD(gy), yv), _mm512_sub_ps(VM_SET1(1.0f), yv));
}
VM_INLINE __m512 relu_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)y;
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(LD(x), _mm512_setzero_ps(), _CMP_GT_OQ), LD(gy));
}
/* Phi(x) + x phi(x); phi's exponent rounded as ref's ((-0.5 x) x) */
VM_INLINE __m512 gelu_erf_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)y;
    __m512 xv = LD(x), cdf = vm_phi(_mm512_mul_ps(xv, VM_SET1(INV_SQRT_2)));
    __m512 pdf = _mm512_mul_ps(VM_SET1(INV_SQRT_2PI), vm_exp(_mm512_mul_ps(_mm512_mul_ps(VM_SET1(-0.5f), xv), xv)));
    return _mm512_mul_ps(LD(gy), _mm512_add_ps(cdf, _mm512_mul_ps(xv, pdf)));
}
/* s + 2 x u' s (1 - s), s = sigmoid(2u), u and u' rounded as ref's backward rounds them. The product
 * starts from s (1 - s) <= 1/4, so it is 0 (not inf * 0) wherever ref's 1 - t^2 is 0 and x u' finite. */
VM_INLINE __m512 gelu_tanh_b1(const float *gy, const float *x, const float *y, int64_t m) {
    (void)y;
    __m512 xv = LD(x), x2 = _mm512_mul_ps(xv, xv);
    __m512 u = _mm512_mul_ps(_mm512_mul_ps(VM_SET1(GELU_C), x2), xv);
    u = _mm512_mul_ps(VM_SET1(SQRT_2_OVER_PI), _mm512_add_ps(xv, u));
    __m512 du = _mm512_add_ps(VM_SET1(1.0f), _mm512_mul_ps(VM_SET1(3.0f * GELU_C), x2));
    du = _mm512_mul_ps(VM_SET1(SQRT_2_OVER_PI), du);
    __m512 eq2, s = vm_sigmoid2(u, &eq2);
    __m512 slope = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(eq2, xv), du), VM_SET1(2.0f));
    return _mm512_mul_ps(LD(gy), _mm512_add_ps(s, slope));
}
#undef LD

/* gx, gy, x, y: (n); gx may be gy */
#define UNARY_BWD(name, f)                                                                                             \
    void name(float *gx, const float *gy, const float *x, const float *y, int64_t n) {                                 \
        for (int64_t i = 0; i < n; i += 16)                                                                            \
            vm_store(gx + i, f(gy + i, x ? x + i : NULL, y ? y + i : NULL, n - i), n - i);                             \
    }
UNARY_BWD(ampc_k_neg_bw_f32__avx512, neg_b1)
UNARY_BWD(ampc_k_exp_bw_f32__avx512, exp_b1)
UNARY_BWD(ampc_k_log_bw_f32__avx512, log_b1)
UNARY_BWD(ampc_k_sqrt_bw_f32__avx512, sqrt_b1)
UNARY_BWD(ampc_k_tanh_bw_f32__avx512, tanh_b1)
UNARY_BWD(ampc_k_sigmoid_bw_f32__avx512, sigmoid_b1)
UNARY_BWD(ampc_k_relu_bw_f32__avx512, relu_b1)
UNARY_BWD(ampc_k_gelu_erf_bw_f32__avx512, gelu_erf_b1)
UNARY_BWD(ampc_k_gelu_tanh_bw_f32__avx512, gelu_tanh_b1)

/* ---- binary: z = x op y, all (n); z may be x or y ---- */

#define BINARY(name, op)                                                                                               \
    void name(float *z, const float *x, const float *y, int64_t n) {                                                   \
        for (int64_t i = 0; i < n; i += 16) vm_store(z + i, op(vm_load(x + i, n - i), vm_load(y + i, n - i)), n - i);  \
    }
BINARY(ampc_k_add_f32__avx512, _mm512_add_ps)
BINARY(ampc_k_sub_f32__avx512, _mm512_sub_ps)
BINARY(ampc_k_mul_f32__avx512, _mm512_mul_ps)
BINARY(ampc_k_div_f32__avx512, _mm512_div_ps)
