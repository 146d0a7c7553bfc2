/* optim_avx512.c: AVX-512 optimizer and loss-scaler kernels. SGD, AdamW and unscale are bit-identical to
 * kernels/ref/optim_ref.c (the project promises that AMPC_ISA never changes a run's optimizer arithmetic):
 * each is ref's sequence of IEEE float operations (separate multiplies and adds, sqrt then divide,
 * torch.lerp's two branches chosen on the same scalar weight), and unscale reads finiteness from the bit
 * patterns and widens/narrows FP16/BF16 exactly as half.h. Sums of squares accumulate in double like ref
 * (products of F32/F16/BF16 values are exact in double) but over 32 lanes in a fixed order, so they may
 * differ from ref's sequential sum in a double's last bits (never with the thread count). The doctor's
 * range statistics are integer counts, max and min of bit patterns, equal to ref's in every field. */
#include "kernels_avx512.h"
#include "vmath_avx512.h"

#include <string.h>

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

/* ---- column sums: 16 columns a vector, each column's rows added in row order in double ---- */

/* Columns [c, c + m) (m <= 16) of every row into acc, two 8-lane double halves. */
VM_INLINE void colsum16(double *acc, const void *g, int64_t ld, int64_t rows, int64_t c, int64_t m, ampc_dtype dt) {
    __mmask8 lo = (__mmask8)(m >= 8 ? 0xff : (1u << m) - 1), hi = (__mmask8)(m <= 8 ? 0 : (1u << (m - 8)) - 1);
    __m512d a0 = _mm512_maskz_loadu_pd(lo, acc + c), a1 = _mm512_maskz_loadu_pd(hi, acc + c + 8);
    for (int64_t r = 0; r < rows; r++) {
        __m512 x = load16_as_f32(g, r * ld + c, m, dt);
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(x)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))));
    }
    _mm512_mask_storeu_pd(acc + c, lo, a0);
    _mm512_mask_storeu_pd(acc + c + 8, hi, a1);
}

/* 64 columns at a time (8 independent accumulators hide the add latency), then 16, then the rest. */
VM_INLINE void colsum(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w, ampc_dtype dt) {
    int64_t c = 0;
    for (; c + 64 <= w; c += 64) {
        __m512d a[8];
        for (int k = 0; k < 8; k++) a[k] = _mm512_loadu_pd(acc + c + 8 * k);
        for (int64_t r = 0; r < rows; r++)
            for (int k = 0; k < 4; k++) {
                __m512 x = load16_as_f32(g, r * ld + c + 16 * k, 16, dt);
                a[2 * k] = _mm512_add_pd(a[2 * k], _mm512_cvtps_pd(_mm512_castps512_ps256(x)));
                a[2 * k + 1] = _mm512_add_pd(
                    a[2 * k + 1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1))));
            }
        for (int k = 0; k < 8; k++) _mm512_storeu_pd(acc + c + 8 * k, a[k]);
    }
    for (; c < w; c += 16) colsum16(acc, g, ld, rows, c, w - c < 16 ? w - c : 16, dt);
}

void ampc_k_colsum_f32__avx512(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w) {
    colsum(acc, g, ld, rows, w, AMPC_DTYPE_F32);
}
void ampc_k_colsum_f16__avx512(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w) {
    colsum(acc, g, ld, rows, w, AMPC_DTYPE_F16);
}
void ampc_k_colsum_bf16__avx512(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w) {
    colsum(acc, g, ld, rows, w, AMPC_DTYPE_BF16);
}

/* ---- range statistics: x (n) F32; thr (nthr <= 16) |x| bit patterns, in any order; added into acc ---- */

/* Per 16 values, the vector part compares |x| with the thresholds into 32-bit lane counters (the lane
 * counters take one count a vector at most, so a block of RANGE_BLOCK values cannot wrap them) and keeps
 * max and min, and stores the 16 exponents to a ring of RANGE_LAG slots; the scalar part counts the
 * exponents stored RANGE_LAG - 1 steps before into the histogram. The lag lets the two parts overlap on
 * different ports without the loads waiting on the store just made. (Read in the same step, GCC moved
 * the exponents to scalar registers lane by lane, on the shuffle port the compares need.) */
#define RANGE_BLOCK ((int64_t)1 << 24)
#define RANGE_LAG 16
/* Bytes read ahead by software prefetch: the hardware's streamer runs too few lines ahead of a loop this
 * slow per line, and from memory (64 MiB of values) it ran at twice the in-cache time (1.2 vs 0.6 ns a
 * value). A prefetch never faults, so it may run past x's end (its address made as an integer). */
#define RANGE_PREFETCH 4096
/* Value j of each 8 counts into sub-histogram j: most values of a tensor share a few binades, and with one
 * histogram each increment would wait on the store of the one before to the same bin. Their 32-bit bins
 * go into acc's after each block. Up to RANGE_SMALL values count into acc's bins directly: clearing and
 * adding up the sub-histograms would cost more than those chains. */
#define RANGE_SUBS 8
#define RANGE_SMALL 512

typedef uint32_t range_hist[RANGE_SUBS][256];

/* Lanes of the vector part after its thresholds' counters (ge[j] counts |x| >= t[j]): zeros counts
 * |x| == 0, as the sign of |x| - 1; amax is the signed max of |x| + 2^23, where finite |x| (<= 0x7F7FFFFF)
 * stays positive and inf and NaN turn negative, so they never win and no finiteness test is needed;
 * mmin is the unsigned min of |x| - 1, where 0 wraps to the top and inf and NaN (>= 0x7F7FFFFF) sit
 * above every non-zero finite |x| - 1 (<= 0x7F7FFFFE). */
enum { RANGE_ZEROS = AMPCI_RANGE_MAX_THR, RANGE_AMAX, RANGE_MMIN, RANGE_NLANES };

/* The counters of t[0..3]: a merge-masked add each. Named variables, not an array: GCC 12 keeps an
 * array of 16 vectors in memory, loading and storing each counter every step. */
VM_INLINE void range_ge4(__m512i a, const uint32_t *t, __m512i *c0, __m512i *c1, __m512i *c2, __m512i *c3) {
    __m512i one = _mm512_set1_epi32(1);
    *c0 = _mm512_mask_add_epi32(*c0, _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)t[0])), *c0, one);
    *c1 = _mm512_mask_add_epi32(*c1, _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)t[1])), *c1, one);
    *c2 = _mm512_mask_add_epi32(*c2, _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)t[2])), *c2, one);
    *c3 = _mm512_mask_add_epi32(*c3, _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32((int)t[3])), *c3, one);
}

/* The first k exponents of e into the sub-histograms h, or into acc's bins where `direct` (a constant
 * where it is inlined). */
VM_INLINE void range_hist16(range_hist h, bool direct, ampci_range_acc *acc, const uint32_t *e, int k) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++)
        if (j < k) {
            if (direct) acc->hist[e[j]]++;
            else h[j % RANGE_SUBS][e[j]]++;
        }
}

/* The lanes v (RANGE_NLANES) into acc. The last vector's pad lanes past n loaded as 0: they are taken
 * out of the counts 0 enters (zeros, and ge[j] where t[j] is 0); 0 moves neither max nor min. */
static void range_fold(const __m512i *v, const uint32_t *t, int nthr, int pad, ampci_range_acc *acc) {
    for (int j = 0; j < nthr; j++) acc->ge[j] += (uint32_t)_mm512_reduce_add_epi32(v[j]) - (t[j] == 0 ? pad : 0);
    acc->zeros += (uint32_t)_mm512_reduce_add_epi32(v[RANGE_ZEROS]) - (uint32_t)pad;
    uint32_t amax = (uint32_t)_mm512_reduce_max_epi32(v[RANGE_AMAX]) - (1u << 23);
    uint32_t mmin = _mm512_reduce_min_epu32(v[RANGE_MMIN]);
    if (amax > acc->amax_bits) acc->amax_bits = amax;
    if (mmin < 0x7f7fffffu && mmin + 1 < acc->min_bits) acc->min_bits = mmin + 1; /* a non-zero finite seen */
}

/* x (n <= RANGE_BLOCK) with nt thresholds t (a multiple of 4; pads never count), the exponents into h or,
 * `direct`, acc's bins. Always inlined into the functions below, where nt and direct are constants. */
VM_INLINE void range_block(const float *x, int64_t n, const uint32_t *t, int nt, int nthr, range_hist h, bool direct,
                           ampci_range_acc *acc) {
    __m512i z = _mm512_setzero_si512(), g0 = z, g1 = z, g2 = z, g3 = z, g4 = z, g5 = z, g6 = z, g7 = z, g8 = z;
    __m512i g9 = z, g10 = z, g11 = z, g12 = z, g13 = z, g14 = z, g15 = z, zeros = z, one = _mm512_set1_epi32(1);
    __m512i amax = _mm512_set1_epi32(1 << 23), mmin = _mm512_set1_epi32(-1);
    uint32_t ring[RANGE_LAG][16] __attribute__((aligned(64)));
    int64_t nb = (n + 15) / 16;
    for (int64_t b = 0; b < nb; b++) {
        _mm_prefetch((const char *)((uintptr_t)(x + 16 * b) + RANGE_PREFETCH), _MM_HINT_T0);
        __m512i a = _mm512_and_si512(_mm512_castps_si512(vm_load(x + 16 * b, n - 16 * b)),
                                     _mm512_set1_epi32(INT32_MAX));
        if (nt > 0) range_ge4(a, t, &g0, &g1, &g2, &g3);
        if (nt > 4) range_ge4(a, t + 4, &g4, &g5, &g6, &g7);
        if (nt > 8) range_ge4(a, t + 8, &g8, &g9, &g10, &g11);
        if (nt > 12) range_ge4(a, t + 12, &g12, &g13, &g14, &g15);
        __m512i am1 = _mm512_sub_epi32(a, one);
        zeros = _mm512_add_epi32(zeros, _mm512_srli_epi32(am1, 31));
        amax = _mm512_max_epi32(amax, _mm512_add_epi32(a, _mm512_set1_epi32(1 << 23)));
        mmin = _mm512_min_epu32(mmin, am1);
        _mm512_store_si512(ring[b % RANGE_LAG], _mm512_srli_epi32(a, 23));
        if (b + 1 >= RANGE_LAG) range_hist16(h, direct, acc, ring[(b + 1) % RANGE_LAG], 16); /* step b + 1 - LAG's */
    }
    for (int64_t b = nb >= RANGE_LAG ? nb - RANGE_LAG + 1 : 0; b < nb; b++)
        range_hist16(h, direct, acc, ring[b % RANGE_LAG], (int)(n - 16 * b));
    __m512i v[RANGE_NLANES] = {g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, g13, g14, g15, zeros, amax, mmin};
    range_fold(v, t, nthr, (int)(16 * nb - n), acc);
}

/* One function for each nt, and one for small n (all 16, into acc's bins): inlined into one function,
 * the five loops' counters were copied between registers every step (GCC 12), 20% slower at nthr 16. */
typedef void range_block_fn(const float *x, int64_t n, const uint32_t *t, int nthr, range_hist h, ampci_range_acc *acc);
#define RANGE_BLOCK_NT(NT)                                                                                             \
    static __attribute__((noinline)) void range_block##NT(const float *x, int64_t n, const uint32_t *t, int nthr,      \
                                                          range_hist h, ampci_range_acc *acc) {                        \
        range_block(x, n, t, NT, nthr, h, false, acc);                                                                 \
    }
RANGE_BLOCK_NT(0)
RANGE_BLOCK_NT(4)
RANGE_BLOCK_NT(8)
RANGE_BLOCK_NT(12)
RANGE_BLOCK_NT(16)
static range_block_fn *const range_blocks[] = {range_block0, range_block4, range_block8, range_block12, range_block16};

static __attribute__((noinline)) void range_small(const float *x, int64_t n, const uint32_t *t, int nthr,
                                                  ampci_range_acc *acc) {
    range_block(x, n, t, AMPCI_RANGE_MAX_THR, nthr, NULL, true, acc);
}

/* The sub-histograms into acc's bins, and cleared for the next block. */
static void range_flush(range_hist h, ampci_range_acc *acc) {
    for (int b = 0; b < 256; b += 16) {
        __m512i s = _mm512_setzero_si512();
        for (int k = 0; k < RANGE_SUBS; k++) {
            s = _mm512_add_epi32(s, _mm512_load_si512(&h[k][b]));
            _mm512_store_si512(&h[k][b], _mm512_setzero_si512());
        }
        __m512i lo = _mm512_cvtepu32_epi64(_mm512_castsi512_si256(s));
        __m512i hi = _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(s, 1));
        _mm512_storeu_si512(&acc->hist[b], _mm512_add_epi64(_mm512_loadu_si512(&acc->hist[b]), lo));
        _mm512_storeu_si512(&acc->hist[b + 8], _mm512_add_epi64(_mm512_loadu_si512(&acc->hist[b + 8]), hi));
    }
}

void ampc_k_range_f32__avx512(const float *x /* (n) */, int64_t n, const uint32_t *thr /* (nthr) */, int nthr,
                              ampci_range_acc *acc) {
    AMPCI_ASSERT(nthr >= 0 && nthr <= AMPCI_RANGE_MAX_THR);
    /* thresholds padded with a pattern no |x| reaches (|x| <= 0x7FFFFFFF): the loops run 4 at a time */
    uint32_t t[AMPCI_RANGE_MAX_THR];
    for (int j = 0; j < AMPCI_RANGE_MAX_THR; j++) t[j] = j < nthr ? thr[j] : UINT32_MAX;
    if (n <= RANGE_SMALL) {
        range_small(x, n, t, nthr, acc);
        return;
    }
    range_hist h __attribute__((aligned(64)));
    memset(h, 0, sizeof h);
    for (int64_t i = 0; i < n; i += RANGE_BLOCK) {
        range_blocks[(nthr + 3) / 4](x + i, n - i < RANGE_BLOCK ? n - i : RANGE_BLOCK, t, nthr, h, acc);
        range_flush(h, acc);
    }
}
