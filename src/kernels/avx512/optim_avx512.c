/* optim_avx512.c: AVX-512 optimizer and loss-scaler kernels. SGD, AdamW and unscale are bit-identical to
 * kernels/ref/optim_ref.c (the project promises that AMPC_ISA never changes a run's optimizer arithmetic):
 * each is ref's sequence of IEEE float operations (separate multiplies and adds, sqrt then divide,
 * torch.lerp's two branches chosen on the same scalar weight), and unscale reads finiteness from the bit
 * patterns and widens/narrows FP16/BF16 exactly as half.h. Sums of squares accumulate in double like ref
 * (products of F32/F16/BF16 values are exact in double) but over 32 lanes in a fixed order, so they may
 * differ from ref's sequential sum in a double's last bits (never with the thread count). */
#include "kernels_avx512.h"
#include "vmath_avx512.h"

/* ---- SGD, AdamW: w, g, buf, m, v: (n) F32 ---- */

void ampc_k_sgd_f32__avx512(float *w, const float *g, float *buf, int64_t n, const ampci_sgd_args *a) {
    __m512 wd = VM_SET1(a->weight_decay), mom = VM_SET1(a->momentum), nlr = VM_SET1(-a->lr);
    __m512 damp1 = VM_SET1(1.0f - a->dampening);
    for (int64_t i = 0; i < n; i += 16) {
        int64_t k = n - i;
        __m512 wi = vm_load(w + i, k), d = vm_load(g + i, k);
        if (a->weight_decay != 0.0f) d = _mm512_add_ps(d, _mm512_mul_ps(wd, wi));
        if (a->momentum != 0.0f) {
            __m512 b = d;
            if (!a->first) b = _mm512_add_ps(_mm512_mul_ps(vm_load(buf + i, k), mom), _mm512_mul_ps(damp1, d));
            vm_store(buf + i, b, k);
            d = a->nesterov ? _mm512_add_ps(d, _mm512_mul_ps(mom, b)) : b;
        }
        vm_store(w + i, _mm512_add_ps(wi, _mm512_mul_ps(nlr, d)), k);
    }
}

/* torch.lerp(m, g, wt): m + wt (g - m) below wt = 0.5, g - (g - m) (1 - wt) from there */
VM_INLINE __m512 lerp_v(__m512 m, __m512 g, float wt) {
    __m512 d = _mm512_sub_ps(g, m);
    if (wt < 0.5f) return _mm512_add_ps(m, _mm512_mul_ps(VM_SET1(wt), d));
    return _mm512_sub_ps(g, _mm512_mul_ps(d, VM_SET1(1.0f - wt)));
}

void ampc_k_adamw_f32__avx512(float *w, const float *g, float *m, float *v, int64_t n, const ampci_adamw_args *a) {
    float one_minus_b1 = 1.0f - a->beta1, one_minus_b2 = 1.0f - a->beta2;
    __m512 decay = VM_SET1(a->decay), b2 = VM_SET1(a->beta2), omb2 = VM_SET1(one_minus_b2);
    __m512 bc2 = VM_SET1(a->bias2_sqrt), eps = VM_SET1(a->eps), nstep = VM_SET1(-a->step_size);
    for (int64_t i = 0; i < n; i += 16) {
        int64_t k = n - i;
        __m512 gi = vm_load(g + i, k), wi = _mm512_mul_ps(vm_load(w + i, k), decay);
        __m512 mi = lerp_v(vm_load(m + i, k), gi, one_minus_b1);
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(vm_load(v + i, k), b2), _mm512_mul_ps(omb2, _mm512_mul_ps(gi, gi)));
        __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), eps);
        vm_store(m + i, mi, k);
        vm_store(v + i, vi, k);
        vm_store(w + i, _mm512_add_ps(wi, _mm512_mul_ps(nstep, _mm512_div_ps(mi, denom))), k);
    }
}

/* ---- unscale: g (n) of the slot's dtype, in place; returns whether any value was inf/NaN before ---- */

bool ampc_k_unscale_f32__avx512(void *gp, int64_t n, float inv) {
    float *g = gp;
    __m512i expo = _mm512_set1_epi32(0x7f800000);
    __mmask16 bad = 0;
    __m512 s = VM_SET1(inv);
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = vm_load(g + i, n - i); /* masked lanes read 0: finite */
        bad |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(v), expo), expo);
        if (inv != 1.0f) vm_store(g + i, _mm512_mul_ps(v, s), n - i);
    }
    return bad != 0;
}

/* 16 FP16 (f16) or BF16 values times s, through F32. */
VM_INLINE __m256i scale16(__m256i h, __m512 s, bool f16) {
    return f16 ? vm_f16_narrow(_mm512_mul_ps(vm_f16_widen(h), s)) : vm_bf16_narrow(_mm512_mul_ps(vm_bf16_widen(h), s));
}

/* 32 16-bit values per step: the exponent test on the patterns, then two halves widened, multiplied and
 * narrowed. f16 selects the format (they differ only in the exponent mask and the conversions). */
VM_INLINE bool unscale16(uint16_t *g, int64_t n, float inv, bool f16) {
    __m512i expo = _mm512_set1_epi16((short)(f16 ? 0x7c00 : 0x7f80));
    __mmask32 bad = 0;
    __m512 s = VM_SET1(inv);
    for (int64_t i = 0; i < n; i += 32) {
        int64_t k = n - i;
        __mmask32 m = k >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << k) - 1);
        __m512i h = k >= 32 ? _mm512_loadu_si512(g + i) : _mm512_maskz_loadu_epi16(m, g + i);
        bad |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, expo), expo);
        if (inv == 1.0f) continue;
        __m256i h0 = _mm512_castsi512_si256(h), h1 = _mm512_extracti64x4_epi64(h, 1);
        __m512i out = _mm512_inserti64x4(_mm512_castsi256_si512(scale16(h0, s, f16)), scale16(h1, s, f16), 1);
        if (k >= 32) _mm512_storeu_si512(g + i, out); /* masked stores are slow on some cores: tail only */
        else _mm512_mask_storeu_epi16(g + i, m, out);
    }
    return bad != 0;
}

bool ampc_k_unscale_f16__avx512(void *g, int64_t n, float inv) { return unscale16(g, n, inv, true); }
bool ampc_k_unscale_bf16__avx512(void *g, int64_t n, float inv) { return unscale16(g, n, inv, false); }

/* ---- sums of squares in double: g (n) of the slot's dtype ---- */

/* 16 values as F32 (exact for all three dtypes); masked lanes read 0. */
VM_INLINE __m512 load16_as_f32(const void *g, int64_t i, int64_t k, ampc_dtype dt) {
    if (dt == AMPC_DTYPE_F32) return vm_load((const float *)g + i, k);
    const uint16_t *p = (const uint16_t *)g + i;
    __m256i h = k >= 16 ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(vm_mask16(k), p);
    return dt == AMPC_DTYPE_F16 ? vm_f16_widen(h) : vm_bf16_widen(h);
}

/* Two independent 16-lane accumulator pairs (32 values per step) hide the add latency; they are added
 * in a fixed order at the end. */
VM_INLINE double sumsq(const void *g, int64_t n, ampc_dtype dt) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), b0 = _mm512_setzero_pd(), b1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 x = load16_as_f32(g, i, 16, dt), y = load16_as_f32(g, i + 16, 16, dt);
        vm_acc_prod_pd(&a0, &a1, x, x);
        vm_acc_prod_pd(&b0, &b1, y, y);
    }
    for (; i < n; i += 16) {
        __m512 x = load16_as_f32(g, i, n - i, dt);
        vm_acc_prod_pd(&a0, &a1, x, x);
    }
    return vm_sum_pd(_mm512_add_pd(a0, b0), _mm512_add_pd(a1, b1));
}

double ampc_k_sumsq_f32__avx512(const void *g, int64_t n) { return sumsq(g, n, AMPC_DTYPE_F32); }
double ampc_k_sumsq_f16__avx512(const void *g, int64_t n) { return sumsq(g, n, AMPC_DTYPE_F16); }
double ampc_k_sumsq_bf16__avx512(const void *g, int64_t n) { return sumsq(g, n, AMPC_DTYPE_BF16); }
