/* gemm_avx512.c: AVX-512 GEMMs, c (M, N) F32 = beta c + op(a) op(b), for F32, F16 and BF16 operands.
 *
 * Structure (Goto/BLIS). op(b) is packed once per call (in column chunks of at most 8 MiB packed) into
 * K-blocks of KC x NR slivers, in parallel. The C chunk is then cut into tasks of whole tiles (at most
 * MS_MAX x ns_max() slivers, i.e. 168 rows x 512 columns per MiB of the core's L2); a task packs its MC x
 * KC block of op(a) into
 * MR-row slivers (L2) and, for each K-block, for each NR-column sliver of B (L1), for each MR-row sliver
 * of A, runs the register-blocked micro-kernel. Packing handles all four ta/tb layouts (k-major sources
 * are copied a whole row segment at a time, k-contiguous ones through 16 x 16 register transposes),
 * converts dtypes and zero-pads every edge, so the micro-kernel sees only packed data. Masked loads never
 * touch an element outside the operands (tests/test_gemm.c checks this against guard pages).
 *
 *   F32:  MR x NR = 14 x 32: 28 zmm accumulators, per k 2 vector loads of B and 14 broadcasts of A. The
 *         full-height K loop is inline assembly (it needs all 32 zmm registers; compiled from intrinsics
 *         its register allocation was fragile and spilled); the c update, partial tiles (mr < 14, from
 *         intrinsics, one specialisation per mr) and column masks are C.
 *   F16:  widened to F32 while packing (vcvtph2ps, exact), then the F32 micro-kernel.
 *   BF16 with AVX512_BF16 (ampc_k_gemm_bf16f32__avx512bf16): K is taken in pairs; a packed "word" is
 *         the pair (x[k], x[k+1]) of one row/column (odd K: the last pair is padded with +0 on both
 *         sides), and vdpbf16ps does two k-steps per instruction, 14 x 32 tile as for F32.
 *   BF16 without it (ampc_k_gemm_bf16f32__avx512): widened to F32 while packing, F32 micro-kernel.
 *   F32 as one BF16 pass (ampc_k_gemm_f32_bf16x1__avx512bf16, gemm_f32_bf16x1, with AVX512_BF16): F32
 *         operands rounded to BF16 (RNE, ampci_bf16_from_f32_bits: subnormals kept, so they reach the
 *         subnormal fallback below) while packing into the vdpbf16ps layout, then the vdpbf16ps kernel;
 *         about twice the F32 kernel's rate where vdpbf16ps runs at the FMA rate (chosen only on CPUs
 *         without AMX: see its entry in kernels_avx512.c).
 *
 * Arithmetic. Each c element is one F32 accumulator updated in k order inside a K-block (one FMA per
 * k, or per pair for vdpbf16ps: a product of F32 values is rounded once, products of F16/BF16 values are
 * exact), and the K-blocks are added to c in order: block 0 gives c = acc (beta 0: old c, NaN included,
 * is never read) or c = beta * c + acc (multiply, then add, as the ref kernel), later blocks c = c + acc;
 * the last block adds the bias (kernels.h) after that. A result stored rounded (c16) keeps its partial
 * sums in an F32 buffer per task (the task's tile, MC x NT) until the last block rounds them (RNE, half.h's
 * bits) on their way out, so the F32 values make no trip to memory.
 * KC depends only on the dtype and every per-element choice only on the element's sliver (fixed by M,
 * N), so the task cut and the thread count change who computes an element, never how: results do not
 * depend on the thread count. NaN and inf propagate as IEEE says (F32/F16: no flush under the default
 * MXCSR; the MXCSR is never changed).
 *
 * vdpbf16ps (Intel SDM pseudo-code, and measured the same on AMD Zen 5): per lane
 *     acc = acc + x[2j+1] y[2j+1];  acc = acc + x[2j] y[2j]
 * i.e. two sequentially rounded (RNE) FMAs, the odd element of the pair first, with DAZ on every input
 * (BF16 operands and the F32 accumulator) and FTZ on the output, MXCSR neither read nor written. So:
 *   - subnormal BF16 inputs (|x| < 2^-126): the packing routines detect them (exponent 0, mantissa != 0)
 *     per sliver and K-block; a micro-tile whose A sliver or B sliver holds one is computed by an
 *     emulation of the instruction with ordinary IEEE FMAs (same order, odd then even), so subnormal
 *     inputs count at their value (never as 0, and inf * subnormal is inf, not NaN). Without subnormals
 *     the emulation and the instruction agree bit for bit.
 *   - tiny sums: elsewhere on the vdpbf16ps path an accumulator whose value falls below 2^-126 in
 *     magnitude (F32 subnormal) is flushed to +-0 (FTZ) and counts as 0 in the next step (DAZ). The
 *     error this adds is below 2^-126 per k-step in absolute terms: invisible against the normwise error
 *     bound unless every product is itself near the F32 underflow threshold. The F32, F16 and widening
 *     BF16 kernels keep subnormal results.
 *
 * Error bounds (one c element; u = 2^-24, gamma_n = n u / (1 - n u), S = sum_k |a_k| |b_k| of the exact
 * inputs, D = |beta c| + S, L = min(K, KC) with KC = 384 (768 for vdpbf16ps, one FMA per element),
 * B = ceil(K / KC) K-blocks; finite inputs, no overflow, no flushed sums): a product passes through at
 * most L roundings in its block's chain, B adds into c and the beta step, so against the exact products
 * of the operands (F16 and BF16 products are exact in F32; F32 ones are rounded once more, inside L):
 *   F16 (widened; the F16 slot's avx512 candidate), BF16, F32:   gamma_{L+B+1} D
 * E.g. K = 4096 (L = 384, B = 11): 2.4e-5 D. The AMX F16 candidate (gemm_amx.c) adds its dropped lo * lo
 * term, 2^-16 S, to a bound of the same size; the ref one (gemm_ref.c) is gamma_{K+2} D.
 *
 * Threads: B packing and the tasks go through ampc_parallel_for; each task takes one of `threads`
 * packing buffers for A (claimed with an atomic flag; which one never changes the arithmetic). Problems
 * below SERIAL_WORK multiply-adds run on the calling thread. Scratch: one ampci_alloc per call. */
#include "../driver_util.h"
#include "kernels_avx512.h"
#include "simd_avx512.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#define MR 14
#define NR 32
#define KC_F32 384  /* K elements per block, F32 words (F32, F16, widened BF16) */
#define KC_BF16 768 /* K elements per block for the vdpbf16ps path: 384 pair words, even */
#define MS_MAX 12   /* MR slivers per task (MC = 168 rows) */
#define NS_MAX 16   /* NR slivers per task per MiB of L2 (NT = 512 columns on Zen 5's 1 MiB, 1024 on 2 MiB) */
#define BGROUP 8    /* NR slivers of op(b) packed together (rows read 256 elements at a time) */
#define BPACK_MAX_WORDS (2u << 20) /* packed op(b) per chunk: 8 MiB */
/* ampc_parallel_for costs ~45 us per call on the 2-core KVM machine (a sleeping worker has to be woken),
 * as much as ~11M F32 multiply-adds: smaller problems (twice as large for vdpbf16ps, which runs at twice
 * the rate) run on the calling thread, and mid-size ones let each task pack the B slivers it needs
 * (redundant work below PRIVATE_B_ELEMS element copies per thread) instead of paying a second call for a
 * shared packing pass. */
#define SERIAL_WORK (256.0 * 256.0 * 256.0)
#define PRIVATE_B_ELEMS (256.0 * 1024.0)

#define AI __attribute__((always_inline)) static inline
#define BF16_TARGET __attribute__((target("avx512bf16")))

typedef enum kind { K_F32 = 0, K_F16, K_BF16W, K_BF16DP, K_F32BF16DP, K_COUNT } kind;

/* ------------------------------------------------------------------------------------------------
 * Small helpers (the lane helpers shared with the other avx512 kernels are in simd_avx512.h)
 * ---------------------------------------------------------------------------------------------- */

/* Kinds packed as BF16 pairs for vdpbf16ps (BF16 sources, or F32 sources rounded to BF16). */
AI bool pair_kind(kind kd) { return kd == K_BF16DP || kd == K_F32BF16DP; }

/* ------------------------------------------------------------------------------------------------
 * Packing. A packed operand is a sequence of 32-bit words: an F32 value (F32, F16 and widened BF16), or
 * a BF16 pair (x[k] in the low half, x[k+1] in the high half) for the vdpbf16ps path. A sliver of width
 * W (MR for A, NR for B) over kp word-steps is stored step-major: dst[t * W + x], zero for x >= nx.
 *
 * The source is a matrix of the slot's dtype: element (k, x) at src[k * ld + x] (k-rows, x contiguous)
 * or src[x * ld + k] (x-rows, k contiguous); k counts K elements from the block start, kc of them.
 * ---------------------------------------------------------------------------------------------- */

/* Up to 16 consecutive elements from p (n valid), as 16 F32 words. */
AI __m512 load_elems_f32(kind kd, const void *p, int64_t n) {
    switch (kd) {
    case K_F32: return _mm512_maskz_loadu_ps(m16(n), p);
    case K_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m16(n), p));
    default: /* K_BF16W */
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m16(n), p)), 16));
    }
}

/* Up to 16 consecutive elements from p (mask m) of a pair kind, as BF16 patterns in the low halves of 16
 * words. */
AI __m512i load_bf16_words(kind kd, const void *p, __mmask16 m) {
    if (kd == K_F32BF16DP) return bf16_rne(_mm512_maskz_loadu_epi32(m, p));
    return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
}

/* Up to 32 consecutive F32 values from p (n valid) rounded to BF16, as 32 16-bit lanes in order. */
AI __m512i load_f32_as_bf16x32(const unsigned char *p, int64_t n) {
    __m512i a = bf16_rne(_mm512_maskz_loadu_epi32(m16(n), p));
    __m512i b = bf16_rne(_mm512_maskz_loadu_epi32(m16(n - 16), p + 64));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(a)), _mm512_cvtepi32_epi16(b), 1);
}

/* k-rows: element (k, x) at src[k * ld + x]; nsl slivers of width W side by side (sliver q holds columns
 * q W .. q W + W - 1, stored at dst + q * dstride), so each source row is read in one sweep. */
AI void pack_krows(kind kd, const unsigned char *src, int64_t ld, size_t es, int64_t kc, int64_t nx, int W, int64_t nsl,
                   int64_t dstride, uint32_t *dst, bool *sub) {
    if (!pair_kind(kd)) {
        for (int64_t k = 0; k < kc; k++) {
            const unsigned char *row = src + (size_t)(k * ld) * es;
            for (int64_t q = 0; q < nsl; q++) {
#pragma GCC unroll 2
                for (int x = 0; x < W; x += 16) {
                    __m512 v = load_elems_f32(kd, row + (size_t)(q * W + x) * es, nx - q * W - x);
                    _mm512_mask_storeu_ps(dst + q * dstride + k * W + x, m16(W - x), v);
                }
            }
        }
        return;
    }
    for (int64_t p = 0; 2 * p < kc; p++) {
        bool has1 = 2 * p + 1 < kc;
        const unsigned char *r0 = src + (size_t)(2 * p * ld) * es;
        const unsigned char *r1 = has1 ? src + (size_t)((2 * p + 1) * ld) * es : r0;
        for (int64_t q = 0; q < nsl; q++) {
            __mmask32 s = 0;
#pragma GCC unroll 2
            for (int x = 0; x < W; x += 16) {
                int64_t c = q * W + x;
                __mmask16 m = m16(nx - c);
                __m512i lo = load_bf16_words(kd, r0 + (size_t)c * es, m);
                __m512i hi = has1 ? load_bf16_words(kd, r1 + (size_t)c * es, m) : _mm512_setzero_si512();
                __m512i w = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
                s |= bf16_subnormal(w);
                _mm512_mask_storeu_epi32(dst + q * dstride + p * W + x, m16(W - x), w);
            }
            if (s) sub[q] = true;
        }
    }
}

/* x-rows: element (k, x) at src[x * ld + k]; 16 x-rows by 16 word-steps at a time, transposed. */
AI void pack_xrows1(kind kd, const unsigned char *src, int64_t ld, size_t es, int64_t kc, int64_t nx, int W,
                    uint32_t *dst, bool *sub) {
    int64_t kp = pair_kind(kd) ? (kc + 1) / 2 : kc;
    int epw = pair_kind(kd) ? 2 : 1; /* elements per word */
    __mmask32 s = 0;
    for (int x0 = 0; x0 < W; x0 += 16) {
        for (int64_t t0 = 0; t0 < kp; t0 += 16) {
            __m512 r[16];
            int64_t ne = kc - t0 * epw; /* elements left in each row */
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                if (x0 + i >= nx) {
                    r[i] = _mm512_setzero_ps();
                    continue;
                }
                const unsigned char *p = src + (size_t)((x0 + i) * ld + t0 * epw) * es;
                if (pair_kind(kd)) {
                    __m512i w = kd == K_F32BF16DP ? load_f32_as_bf16x32(p, ne) : _mm512_maskz_loadu_epi16(m32(ne), p);
                    s |= bf16_subnormal(w);
                    r[i] = _mm512_castsi512_ps(w);
                } else {
                    r[i] = load_elems_f32(kd, p, ne);
                }
            }
            transpose16(r);
            int64_t nt = kp - t0 < 16 ? kp - t0 : 16;
            __mmask16 wm = m16(W - x0);
            if (nt == 16) {
#pragma GCC unroll 16
                for (int t = 0; t < 16; t++) _mm512_mask_storeu_ps(dst + (t0 + t) * W + x0, wm, r[t]);
                continue;
            }
            for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(dst + (t0 + t) * W + x0, wm, r[t]);
        }
    }
    if (s) *sub = true;
}

AI void pack_xrows(kind kd, const unsigned char *src, int64_t ld, size_t es, int64_t kc, int64_t nx, int W, int64_t nsl,
                   int64_t dstride, uint32_t *dst, bool *sub) {
    for (int64_t q = 0; q < nsl; q++)
        pack_xrows1(kd, src + (size_t)(q * W * ld) * es, ld, es, kc, nx - q * W, W, dst + q * dstride, &sub[q]);
}

/* The packers specialised by kind and width: [kind][0 = A (W = MR), 1 = B (W = NR)]. */
typedef void (*pack_fn)(const unsigned char *src, int64_t ld, size_t es, int64_t kc, int64_t nx, int64_t nsl,
                        int64_t dstride, uint32_t *dst, bool *sub);
#define PACK_ARGS                                                                                                      \
    const unsigned char *src, int64_t ld, size_t es, int64_t kc, int64_t nx, int64_t nsl, int64_t dstride,             \
        uint32_t *dst, bool *sub
#define DEF_PACK(KD, W, tag)                                                                                           \
    static void pack_k_##tag(PACK_ARGS) { pack_krows(KD, src, ld, es, kc, nx, W, nsl, dstride, dst, sub); }            \
    static void pack_x_##tag(PACK_ARGS) { pack_xrows(KD, src, ld, es, kc, nx, W, nsl, dstride, dst, sub); }
DEF_PACK(K_F32, MR, f32_a)
DEF_PACK(K_F32, NR, f32_b)
DEF_PACK(K_F16, MR, f16_a)
DEF_PACK(K_F16, NR, f16_b)
DEF_PACK(K_BF16W, MR, bf16w_a)
DEF_PACK(K_BF16W, NR, bf16w_b)
DEF_PACK(K_BF16DP, MR, bf16dp_a)
DEF_PACK(K_BF16DP, NR, bf16dp_b)
DEF_PACK(K_F32BF16DP, MR, f32bf16dp_a)
DEF_PACK(K_F32BF16DP, NR, f32bf16dp_b)
static const pack_fn g_pack_k[K_COUNT][2] = {{pack_k_f32_a, pack_k_f32_b},
                                             {pack_k_f16_a, pack_k_f16_b},
                                             {pack_k_bf16w_a, pack_k_bf16w_b},
                                             {pack_k_bf16dp_a, pack_k_bf16dp_b},
                                             {pack_k_f32bf16dp_a, pack_k_f32bf16dp_b}};
static const pack_fn g_pack_x[K_COUNT][2] = {{pack_x_f32_a, pack_x_f32_b},
                                             {pack_x_f16_a, pack_x_f16_b},
                                             {pack_x_bf16w_a, pack_x_bf16w_b},
                                             {pack_x_bf16dp_a, pack_x_bf16dp_b},
                                             {pack_x_f32bf16dp_a, pack_x_f32bf16dp_b}};

/* ------------------------------------------------------------------------------------------------
 * Micro-kernels: a tile (mr x nr) = a sliver (kp x MR words) times b sliver (kp x NR words), written out
 * as a tile_out says. Columns beyond nr are masked (m0, m1).
 * ---------------------------------------------------------------------------------------------- */

enum { MODE_SET = 0, MODE_ADD = 1, MODE_BETA = 2 };

/* Where a tile's accumulators go: out = acc (MODE_SET), prev + acc (MODE_ADD) or beta prev + acc
 * (MODE_BETA, multiply then add), then + bias (the last K-block only), stored as F32 (out) or rounded to
 * F16 or BF16 (out16). prev is c itself, or the task's F32 partial sums when c16 takes the result. */
typedef struct tile_out {
    int mode;
    float beta;
    const float *prev; /* rows ldp floats apart */
    int64_t ldp;
    float *out; /* NULL: out16 */
    uint16_t *out16;
    int64_t ldo; /* elements between rows of out or out16 */
    bool f16;
    const float *bias; /* the tile's NR bias values, or NULL */
} tile_out;

typedef void (*ukr_fn)(int64_t kp, const uint32_t *a, const uint32_t *b, const tile_out *o, __mmask16 m0, __mmask16 m1);

/* Brings the lines of the tile's write-out (what it reads, else what it writes) in while the K loop runs:
 * the first and last element of each row (NR floats span at most 3 lines, usually 2). */
AI void prefetch_tile(const int mr, const tile_out *o) {
    bool rd = o->mode != MODE_SET;
    const char *p = rd ? (const char *)o->prev : o->out ? (const char *)o->out : (const char *)o->out16;
    size_t es = rd || o->out ? 4 : 2, ld = (size_t)(rd ? o->ldp : o->ldo) * es;
#pragma GCC unroll 14
    for (int i = 0; i < mr; i++) {
        _mm_prefetch(p + i * ld, _MM_HINT_T0);
        _mm_prefetch(p + i * ld + (NR - 1) * es, _MM_HINT_T0);
    }
}

AI void store_tile(const int mr, const __m512 *acc0, const __m512 *acc1, const tile_out *o, __mmask16 m0,
                   __mmask16 m1) {
    __m512 vb = _mm512_set1_ps(o->beta), b0 = _mm512_setzero_ps(), b1 = b0;
    if (o->bias) b0 = _mm512_maskz_loadu_ps(m0, o->bias), b1 = _mm512_maskz_loadu_ps(m1, o->bias + 16);
#pragma GCC unroll 14
    for (int i = 0; i < mr; i++) {
        __m512 r0 = acc0[i], r1 = acc1[i];
        if (o->mode != MODE_SET) {
            const float *pi = o->prev + i * o->ldp;
            __m512 c0 = _mm512_maskz_loadu_ps(m0, pi), c1 = _mm512_maskz_loadu_ps(m1, pi + 16);
            if (o->mode == MODE_BETA) {
                c0 = _mm512_mul_ps(vb, c0);
                c1 = _mm512_mul_ps(vb, c1);
            }
            r0 = _mm512_add_ps(c0, r0);
            r1 = _mm512_add_ps(c1, r1);
        }
        if (o->bias) r0 = _mm512_add_ps(r0, b0), r1 = _mm512_add_ps(r1, b1);
        if (o->out) {
            float *ci = o->out + i * o->ldo;
            _mm512_mask_storeu_ps(ci, m0, r0);
            _mm512_mask_storeu_ps(ci + 16, m1, r1);
        } else {
            uint16_t *ci = o->out16 + i * o->ldo;
            _mm256_mask_storeu_epi16(ci, m0, f32_round16(r0, o->f16));
            _mm256_mask_storeu_epi16(ci + 16, m1, f32_round16(r1, o->f16));
        }
    }
}

AI void ukr_f32_body(const int mr, int64_t kp, const uint32_t *aw, const uint32_t *bw, const tile_out *o, __mmask16 m0,
                     __mmask16 m1) {
    const float *a = (const float *)aw, *b = (const float *)bw;
    __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < mr; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; k++) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
        for (int i = 0; i < mr; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
            acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
        }
        a += MR;
        b += NR;
    }
    store_tile(mr, acc0, acc1, o, m0, m1);
}

BF16_TARGET AI void ukr_bf16dp_body(const int mr, int64_t kp, const uint32_t *a, const uint32_t *b, const tile_out *o,
                                    __mmask16 m0, __mmask16 m1) {
    __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < mr; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; k++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);
#pragma GCC unroll 14
        for (int i = 0; i < mr; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            acc0[i] = _mm512_dpbf16_ps(acc0[i], ai, b0);
            acc1[i] = _mm512_dpbf16_ps(acc1[i], ai, b1);
        }
        a += MR;
        b += NR;
    }
    store_tile(mr, acc0, acc1, o, m0, m1);
}

/* vdpbf16ps emulated with IEEE FMAs (odd element of the pair first), for tiles with subnormal inputs. */
AI void ukr_bf16x_body(const int mr, int64_t kp, const uint32_t *a, const uint32_t *b, const tile_out *o, __mmask16 m0,
                       __mmask16 m1) {
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < mr; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
    prefetch_tile(mr, o);
    for (int64_t k = 0; k < kp; k++) {
        __m512i w0 = _mm512_load_si512(b), w1 = _mm512_load_si512(b + 16);
        /* odd elements are the high halves (already F32 patterns), even ones the low halves shifted up */
        __m512 bo0 = _mm512_castsi512_ps(_mm512_and_si512(w0, hi));
        __m512 be0 = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16));
        __m512 bo1 = _mm512_castsi512_ps(_mm512_and_si512(w1, hi));
        __m512 be1 = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16));
        for (int i = 0; i < mr; i++) {
            __m512i wa = _mm512_set1_epi32((int)a[i]);
            __m512 ao = _mm512_castsi512_ps(_mm512_and_si512(wa, hi));
            __m512 ae = _mm512_castsi512_ps(_mm512_slli_epi32(wa, 16));
            acc0[i] = _mm512_fmadd_ps(ae, be0, _mm512_fmadd_ps(ao, bo0, acc0[i]));
            acc1[i] = _mm512_fmadd_ps(ae, be1, _mm512_fmadd_ps(ao, bo1, acc1[i]));
        }
        a += MR;
        b += NR;
    }
    store_tile(mr, acc0, acc1, o, m0, m1);
}

/* The full-height (MR = 14) K loops in assembly: 28 accumulators, 2 B vectors and the broadcasts need all
 * 32 zmm registers, which leaves a compiler no room and its allocation fragile (spills inside the loop
 * cost 20-30%). zmm0..27 accumulate rows 0..13 (two vectors each), zmm28/29 hold the B step, zmm30/31 the
 * broadcasts; the tile goes to out (14 x 32 floats, 64-byte aligned). kp >= 1. */
/* clang-format off */
#define ASM_ZERO(r) "vpxord %%zmm" #r ", %%zmm" #r ", %%zmm" #r "\n\t"
#define ASM_ZERO28                                                                                             \
    ASM_ZERO(0) ASM_ZERO(1) ASM_ZERO(2) ASM_ZERO(3) ASM_ZERO(4) ASM_ZERO(5) ASM_ZERO(6) ASM_ZERO(7) ASM_ZERO(8) \
    ASM_ZERO(9) ASM_ZERO(10) ASM_ZERO(11) ASM_ZERO(12) ASM_ZERO(13) ASM_ZERO(14) ASM_ZERO(15) ASM_ZERO(16)      \
    ASM_ZERO(17) ASM_ZERO(18) ASM_ZERO(19) ASM_ZERO(20) ASM_ZERO(21) ASM_ZERO(22) ASM_ZERO(23) ASM_ZERO(24)    \
    ASM_ZERO(25) ASM_ZERO(26) ASM_ZERO(27)
/* row i: broadcast word i of the A step into zmm30/31, then two multiply-adds into zmm(2i), zmm(2i+1) */
#define ASM_ROW(OP, BC, i, r0, r1, t)                                                                          \
    BC " " #i "*4(%[a]), %%zmm" #t "\n\t" OP " %%zmm28, %%zmm" #t ", %%zmm" #r0 "\n\t" OP " %%zmm29, %%zmm" #t \
       ", %%zmm" #r1 "\n\t"
#define ASM_ROWS(OP, BC)                                                                                       \
    ASM_ROW(OP, BC, 0, 0, 1, 30) ASM_ROW(OP, BC, 1, 2, 3, 31) ASM_ROW(OP, BC, 2, 4, 5, 30)                     \
    ASM_ROW(OP, BC, 3, 6, 7, 31) ASM_ROW(OP, BC, 4, 8, 9, 30) ASM_ROW(OP, BC, 5, 10, 11, 31)                   \
    ASM_ROW(OP, BC, 6, 12, 13, 30) ASM_ROW(OP, BC, 7, 14, 15, 31) ASM_ROW(OP, BC, 8, 16, 17, 30)               \
    ASM_ROW(OP, BC, 9, 18, 19, 31) ASM_ROW(OP, BC, 10, 20, 21, 30) ASM_ROW(OP, BC, 11, 22, 23, 31)             \
    ASM_ROW(OP, BC, 12, 24, 25, 30) ASM_ROW(OP, BC, 13, 26, 27, 31)
#define ASM_ST(r) "vmovaps %%zmm" #r ", " #r "*64(%[o])\n\t"
#define ASM_STORE28                                                                                            \
    ASM_ST(0) ASM_ST(1) ASM_ST(2) ASM_ST(3) ASM_ST(4) ASM_ST(5) ASM_ST(6) ASM_ST(7) ASM_ST(8) ASM_ST(9)        \
    ASM_ST(10) ASM_ST(11) ASM_ST(12) ASM_ST(13) ASM_ST(14) ASM_ST(15) ASM_ST(16) ASM_ST(17) ASM_ST(18)         \
    ASM_ST(19) ASM_ST(20) ASM_ST(21) ASM_ST(22) ASM_ST(23) ASM_ST(24) ASM_ST(25) ASM_ST(26) ASM_ST(27)
#define ASM_KLOOP(OP, BC)                                                                                      \
    __asm__ volatile(ASM_ZERO28 "1:\n\t"                                                                       \
                     "vmovaps (%[b]), %%zmm28\n\t"                                                             \
                     "vmovaps 64(%[b]), %%zmm29\n\t" ASM_ROWS(OP, BC) "add $56, %[a]\n\t"                      \
                     "add $128, %[b]\n\t"                                                                      \
                     "dec %[k]\n\t"                                                                            \
                     "jnz 1b\n\t" ASM_STORE28                                                                  \
                     : [a] "+r"(a), [b] "+r"(b), [k] "+r"(kp)                                                  \
                     : [o] "r"(out)                                                                            \
                     : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",         \
                       "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26",        \
                       "xmm27", "xmm28", "xmm29", "xmm30", "xmm31")
/* clang-format on */

static void kloop_f32_14(int64_t kp, const uint32_t *a, const uint32_t *b, float *out) {
    ASM_KLOOP("vfmadd231ps", "vbroadcastss");
}
/* vdpbf16ps is assembled whatever the compiler flags; this runs only where the CPU has AVX512_BF16 */
static void kloop_bf16dp_14(int64_t kp, const uint32_t *a, const uint32_t *b, float *out) {
    ASM_KLOOP("vdpbf16ps", "vpbroadcastd");
}

/* The full-height tile: K loop in assembly, then the c update from the (L1-resident) tile buffer. */
AI void ukr_asm14(void (*kloop)(int64_t, const uint32_t *, const uint32_t *, float *), int64_t kp, const uint32_t *a,
                  const uint32_t *b, const tile_out *o, __mmask16 m0, __mmask16 m1) {
    _Alignas(64) float out[MR * NR];
    __m512 acc0[MR], acc1[MR];
    prefetch_tile(MR, o);
    if (kp > 0) {
        kloop(kp, a, b, out);
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            acc0[i] = _mm512_load_ps(out + i * NR);
            acc1[i] = _mm512_load_ps(out + i * NR + 16);
        }
    } else {
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
    }
    store_tile(MR, acc0, acc1, o, m0, m1);
}

#define UKR_ARGS int64_t kp, const uint32_t *a, const uint32_t *b, const tile_out *o, __mmask16 m0, __mmask16 m1
#define UKR_PASS kp, a, b, o, m0, m1
#define FOR_MR(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)
#define DEF_F32(n)                                                                                                     \
    static void ukr_f32_##n(UKR_ARGS) { ukr_f32_body(n, UKR_PASS); }
#define DEF_DP(n)                                                                                                      \
    BF16_TARGET static void ukr_bf16dp_##n(UKR_ARGS) { ukr_bf16dp_body(n, UKR_PASS); }
#define DEF_X(n)                                                                                                       \
    static void ukr_bf16x_##n(UKR_ARGS) { ukr_bf16x_body(n, UKR_PASS); }
#define FOR_MR13(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
FOR_MR13(DEF_F32)
FOR_MR13(DEF_DP)
FOR_MR(DEF_X)
static void ukr_f32_14(UKR_ARGS) { ukr_asm14(kloop_f32_14, UKR_PASS); }
static void ukr_bf16dp_14(UKR_ARGS) { ukr_asm14(kloop_bf16dp_14, UKR_PASS); }
#define REF_F32(n) ukr_f32_##n,
#define REF_DP(n) ukr_bf16dp_##n,
#define REF_X(n) ukr_bf16x_##n,
static const ukr_fn g_ukr_f32[MR + 1] = {NULL, FOR_MR(REF_F32)};
static const ukr_fn g_ukr_bf16dp[MR + 1] = {NULL, FOR_MR(REF_DP)};
static const ukr_fn g_ukr_bf16x[MR + 1] = {NULL, FOR_MR(REF_X)};

/* ------------------------------------------------------------------------------------------------
 * The driver
 * ---------------------------------------------------------------------------------------------- */

typedef struct job {
    const ampci_gemm *g;
    kind kd;
    size_t es;
    int64_t KC, nkb, kpf; /* K elements per block, blocks, words per full block */
    /* the current chunk of columns, from jc0: nsl slivers of packed op(b) */
    int64_t jc0, nsl;
    uint32_t *bp; /* [pc][sliver][kp(pc)][NR] */
    bool *bsub;   /* [pc][sliver]: the sliver holds a subnormal BF16 */
    /* tasks: mb x nb tiles of ms MR-slivers by ns NR-slivers */
    int64_t msl, ms, mb, ns, nb;
    bool bpriv;     /* each task packs its own B slivers (no shared bp) */
    uint32_t *abuf; /* nslots buffers of slot_words: A block, then (bpriv) one B sliver, then (part_words) */
    int64_t slot_words;
    int64_t part_words; /* c16 over several K-blocks: the task's F32 partial sums, ms MR x ns NR */
    atomic_int *busy;
    int nslots;
} job;

AI int64_t block_kc(const job *j, int64_t pc) { return pc + 1 < j->nkb ? j->KC : j->g->K - pc * j->KC; }
AI int64_t block_kp(const job *j, int64_t kc) { return pair_kind(j->kd) ? (kc + 1) / 2 : kc; }

/* Packs items [i0, i1) of op(b): item = (K-block pc, group of BGROUP slivers of the chunk). */
static void pack_b_range(void *arg, int64_t i0, int64_t i1, int64_t chunk) {
    (void)chunk;
    job *j = arg;
    const ampci_gemm *g = j->g;
    int64_t ngroups = ceil_div(j->nsl, BGROUP);
    for (int64_t it = i0; it < i1; it++) {
        int64_t pc = it / ngroups, s0 = it % ngroups * BGROUP;
        int64_t n = j->nsl - s0 < BGROUP ? j->nsl - s0 : BGROUP;
        int64_t kc = block_kc(j, pc), kp = block_kp(j, kc), k0 = pc * j->KC;
        int64_t col = j->jc0 + s0 * NR;
        uint32_t *dst = j->bp + (pc * j->kpf * j->nsl + s0 * kp) * NR;
        bool *sub = j->bsub + pc * j->nsl + s0;
        memset(sub, 0, (size_t)n);
        const unsigned char *b = g->b;
        if (g->tb) /* b (N, K): column col + x of op(b) is row col + x of b */
            g_pack_x[j->kd][1](b + (size_t)(col * g->ldb + k0) * j->es, g->ldb, j->es, kc, g->N - col, n, kp * NR, dst,
                               sub);
        else
            g_pack_k[j->kd][1](b + (size_t)(k0 * g->ldb + col) * j->es, g->ldb, j->es, kc, g->N - col, n, kp * NR, dst,
                               sub);
    }
}

/* The write-out of the micro-tile at row r, column col of c ((rt, ct) within its task) after K-block pc:
 * an F32 result accumulates in c block by block; a 16-bit one (kernels.h) keeps its partial sums in the
 * task's F32 buffer `part` until the last block rounds them into c16. The bias comes with the last. */
static tile_out tile_target(const job *j, float *part, int64_t pc, int64_t r, int64_t col, int64_t rt, int64_t ct) {
    const ampci_gemm *g = j->g;
    bool last = pc + 1 == j->nkb;
    tile_out o = {.mode = pc > 0            ? MODE_ADD
                          : g->beta == 0.0f ? MODE_SET
                                            : MODE_BETA,
                  .beta = g->beta,
                  .f16 = g->c16_dt == AMPC_DTYPE_F16,
                  .bias = last && g->bias ? g->bias + col : NULL};
    if (!g->c16) {
        o.prev = o.out = g->c + r * g->ldc + col;
        o.ldp = o.ldo = g->ldc;
        return o;
    }
    if (j->nkb > 1) {
        o.prev = part + rt * j->ns * NR + ct;
        o.ldp = j->ns * NR;
    }
    if (last) {
        o.out16 = g->c16 + r * g->ldc + col;
        o.ldo = g->ldc;
    } else {
        o.out = part + rt * j->ns * NR + ct;
        o.ldo = j->ns * NR;
    }
    return o;
}

static void compute_range(void *arg, int64_t t0, int64_t t1, int64_t chunk) {
    (void)chunk;
    job *j = arg;
    const ampci_gemm *g = j->g;
    int slot = take_slot(j->busy, j->nslots);
    uint32_t *abuf = j->abuf + (size_t)slot * (size_t)j->slot_words;
    uint32_t *bbuf = abuf + ceil_div(j->ms * MR * j->kpf, 16) * 16; /* bpriv: one sliver, 64-byte aligned */
    float *part = j->part_words ? (float *)(abuf + j->slot_words - j->part_words) : NULL;
    const unsigned char *a = g->a, *b = g->b;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ti = t / j->nb, tj = t % j->nb;
        int64_t sl0 = ti * j->ms, sl1 = sl0 + j->ms < j->msl ? sl0 + j->ms : j->msl;
        int64_t s0 = tj * j->ns, s1 = s0 + j->ns < j->nsl ? s0 + j->ns : j->nsl;
        for (int64_t pc = 0; pc < j->nkb; pc++) {
            int64_t kc = block_kc(j, pc), kp = block_kp(j, kc), k0 = pc * j->KC;
            bool asub[MS_MAX] = {false}; /* per A sliver: holds a subnormal BF16 */
            int64_t r0 = sl0 * MR;
            if (g->ta) /* a (K, M): row r0 + x of op(a) is column r0 + x of a */
                g_pack_k[j->kd][0](a + (size_t)(k0 * g->lda + r0) * j->es, g->lda, j->es, kc, g->M - r0, sl1 - sl0,
                                   kp * MR, abuf, asub);
            else
                g_pack_x[j->kd][0](a + (size_t)(r0 * g->lda + k0) * j->es, g->lda, j->es, kc, g->M - r0, sl1 - sl0,
                                   kp * MR, abuf, asub);
            for (int64_t s = s0; s < s1; s++) {
                int64_t col = j->jc0 + s * NR, nr = g->N - col < NR ? g->N - col : NR;
                __mmask16 mk0 = m16(nr), mk1 = m16(nr - 16);
                const uint32_t *bs;
                bool bsub = false;
                if (j->bpriv) { /* same packing as pack_b_range, one sliver */
                    if (g->tb)
                        g_pack_x[j->kd][1](b + (size_t)(col * g->ldb + k0) * j->es, g->ldb, j->es, kc, g->N - col, 1,
                                           kp * NR, bbuf, &bsub);
                    else
                        g_pack_k[j->kd][1](b + (size_t)(k0 * g->ldb + col) * j->es, g->ldb, j->es, kc, g->N - col, 1,
                                           kp * NR, bbuf, &bsub);
                    bs = bbuf;
                } else {
                    bs = j->bp + (pc * j->kpf * j->nsl + s * kp) * NR;
                    bsub = j->bsub[pc * j->nsl + s];
                }
                bsub = bsub && pair_kind(j->kd);
                for (int64_t sl = sl0; sl < sl1; sl++) {
                    int64_t r = sl * MR, mr = g->M - r < MR ? g->M - r : MR;
                    const ukr_fn *tab = !pair_kind(j->kd)          ? g_ukr_f32
                                        : (bsub || asub[sl - sl0]) ? g_ukr_bf16x
                                                                   : g_ukr_bf16dp;
                    tile_out o = tile_target(j, part, pc, r, col, r - r0, (s - s0) * NR);
                    tab[mr](kp, abuf + (sl - sl0) * kp * MR, bs, &o, mk0, mk1);
                }
            }
        }
    }
    atomic_store(&j->busy[slot], 0);
}

/* NR slivers per task: a task's c block (MC x NT F32) stays in L2 across the K-blocks, and each column
 * cut packs the task's A block once more, so NT grows with this core's L2 (none of it changes results). */
static int64_t ns_max(void) {
    int64_t mib = l2_kib() / 1024;
    return NS_MAX * (mib < 1 ? 1 : mib > 4 ? 4 : mib);
}

static ampc_status gemm_avx512(ampc_ctx *ctx, const ampci_gemm *g, kind kd, const char *name) {
    if (g->M <= 0 || g->N <= 0) return AMPC_OK;
    if (g->K <= 0) {
        gemm_scale_c(g);
        return AMPC_OK;
    }
    job j = {.g = g, .kd = kd, .es = kd == K_F32 || kd == K_F32BF16DP ? 4 : 2};
    j.KC = pair_kind(kd) ? KC_BF16 : KC_F32;
    j.nkb = ceil_div(g->K, j.KC);
    j.kpf = block_kp(&j, g->K < j.KC ? g->K : j.KC);
    int64_t kp_total = (j.nkb - 1) * j.kpf + block_kp(&j, block_kc(&j, j.nkb - 1)); /* words over all of K */

    /* columns per chunk: packed op(b) of at most BPACK_MAX_WORDS words */
    int64_t nsl_all = ceil_div(g->N, NR);
    int64_t nsl_chunk = (int64_t)BPACK_MAX_WORDS / (kp_total * NR);
    if (nsl_chunk < 1) nsl_chunk = 1;
    if (nsl_chunk > nsl_all) nsl_chunk = nsl_all;
    int64_t nchunks = ceil_div(nsl_all, nsl_chunk);
    nsl_chunk = ceil_div(nsl_all, nchunks); /* even chunks */

    /* tasks per chunk: tiles of at most MS_MAX x ns_max() slivers; with threads, the count is raised to a
     * multiple of the thread count, preferably by cutting M (each column cut packs A once more). The cut
     * never changes the arithmetic. */
    double work = (double)g->M * (double)g->N * (double)g->K;
    int threads = ampc_ctx_threads(ctx);
    bool serial = threads <= 1 || work < SERIAL_WORK * (pair_kind(kd) ? 2 : 1); /* vdpbf16ps: twice the rate */
    j.msl = ceil_div(g->M, MR);
    j.mb = ceil_div(j.msl, MS_MAX);
    int64_t nb = ceil_div(nsl_chunk, ns_max());
    if (!serial) {
        if (j.msl >= 2 * threads) j.mb = ceil_div(j.mb, threads) * threads;
        else nb = ceil_div(nb, threads) * threads;
    }
    j.ms = ceil_div(j.msl, j.mb < j.msl ? j.mb : j.msl);
    j.mb = ceil_div(j.msl, j.ms);
    int64_t ns_chunk = ceil_div(nsl_chunk, nb < nsl_chunk ? nb : nsl_chunk);
    int64_t ntasks_max = j.mb * ceil_div(nsl_chunk, ns_chunk);
    j.nslots = serial ? 1 : (int)(threads < ntasks_max ? threads : ntasks_max);

    j.bpriv = !serial && nchunks == 1 && (double)(j.mb - 1) * (double)g->K * (double)g->N < PRIVATE_B_ELEMS * threads;
    j.ns = ns_chunk;
    j.part_words = g->c16 && j.nkb > 1 ? j.ms * MR * j.ns * NR : 0;
    j.slot_words = ceil_div(j.ms * MR * j.kpf, 16) * 16 + (j.bpriv ? j.kpf * NR : 0) + j.part_words;
    size_t bwords = j.bpriv ? 0 : (size_t)(kp_total * NR * nsl_chunk);
    size_t awords = (size_t)j.slot_words * (size_t)j.nslots;
    size_t nflags = (size_t)(j.nkb * nsl_chunk);
    size_t bytes = (bwords + awords) * 4 + nflags + (size_t)j.nslots * sizeof(atomic_int) + 64;
    unsigned char *mem = ampci_alloc(ctx, bytes, name);
    if (!mem) return AMPC_STATUS_OOM;
    j.bp = (uint32_t *)mem;
    j.abuf = j.bp + bwords;
    j.busy = (atomic_int *)(mem + (bwords + awords) * 4);
    j.bsub = (bool *)(j.busy + j.nslots);
    for (int i = 0; i < j.nslots; i++) atomic_init(&j.busy[i], 0);

    for (int64_t ch = 0; ch < nchunks; ch++) {
        int64_t s_begin = ch * nsl_chunk;
        j.jc0 = s_begin * NR;
        j.nsl = nsl_all - s_begin < nsl_chunk ? nsl_all - s_begin : nsl_chunk;
        j.ns = ns_chunk;
        j.nb = ceil_div(j.nsl, j.ns);
        int64_t npack = j.nkb * ceil_div(j.nsl, BGROUP), ntasks = j.mb * j.nb;
        if (serial) {
            pack_b_range(&j, 0, npack, 0);
            compute_range(&j, 0, ntasks, 0);
        } else {
            if (!j.bpriv) ampc_parallel_for(ctx, npack, 1, pack_b_range, &j);
            ampc_parallel_for(ctx, ntasks, 1, compute_range, &j);
        }
    }
    ampci_free(ctx, mem, bytes);
    return AMPC_OK;
}

ampc_status ampc_k_gemm_f32f32__avx512(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_avx512(ctx, g, K_F32, "gemm (avx512 f32) packed operands");
}
ampc_status ampc_k_gemm_f16f32__avx512(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_avx512(ctx, g, K_F16, "gemm (avx512 f16) packed operands");
}
ampc_status ampc_k_gemm_bf16f32__avx512(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_avx512(ctx, g, K_BF16W, "gemm (avx512 bf16) packed operands");
}
ampc_status ampc_k_gemm_bf16f32__avx512bf16(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_avx512(ctx, g, K_BF16DP, "gemm (avx512bf16) packed operands");
}
ampc_status ampc_k_gemm_f32_bf16x1__avx512bf16(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_avx512(ctx, g, K_F32BF16DP, "gemm (avx512bf16 f32 as bf16x1) packed operands");
}

/* ------------------------------------------------------------------------------------------------
 * The packing alone, for `ampc bench gemm`: all of op(a) or op(b), every K-block, in the kernel's pieces
 * (A: MS_MAX slivers at a time as a task packs them, B: BGROUP slivers as pack_b_range does), laid out
 * [pc][sliver][kp][W], then the subnormal flags.
 * ---------------------------------------------------------------------------------------------- */

static job pack_job(const ampci_gemm *g, kind kd) {
    job j = {.g = g, .kd = kd, .es = kd == K_F32 || kd == K_F32BF16DP ? 4 : 2};
    j.KC = pair_kind(kd) ? KC_BF16 : KC_F32;
    j.nkb = ceil_div(g->K, j.KC);
    j.kpf = block_kp(&j, g->K < j.KC ? g->K : j.KC);
    return j;
}
static size_t packed_whole(const ampci_gemm *g, bool is_b, kind kd) {
    job j = pack_job(g, kd);
    int64_t W = is_b ? NR : MR, nsl = ceil_div(is_b ? g->N : g->M, W);
    int64_t kp_total = (j.nkb - 1) * j.kpf + block_kp(&j, block_kc(&j, j.nkb - 1));
    return (size_t)(kp_total * W * nsl) * 4;
}
static size_t bytes_whole(const ampci_gemm *g, bool is_b, kind kd) {
    job j = pack_job(g, kd);
    return packed_whole(g, is_b, kd) + (size_t)(j.nkb * ceil_div(is_b ? g->N : g->M, is_b ? NR : MR));
}
static void pack_whole(const ampci_gemm *g, bool is_b, kind kd, void *scratch) {
    job j = pack_job(g, kd);
    int64_t W = is_b ? NR : MR, nx = is_b ? g->N : g->M, nsl = ceil_div(nx, W), step = is_b ? BGROUP : MS_MAX;
    bool kfirst = is_b ? !g->tb : g->ta; /* the source's rows run along x: k-rows */
    int64_t ld = is_b ? g->ldb : g->lda;
    const unsigned char *src = is_b ? g->b : g->a;
    bool *sub = (bool *)((unsigned char *)scratch + packed_whole(g, is_b, kd));
    for (int64_t pc = 0; pc < j.nkb; pc++) {
        int64_t kc = block_kc(&j, pc), kp = block_kp(&j, kc), k0 = pc * j.KC;
        uint32_t *dst = (uint32_t *)scratch + pc * j.kpf * nsl * W;
        for (int64_t s0 = 0; s0 < nsl; s0 += step) {
            int64_t n = nsl - s0 < step ? nsl - s0 : step, x0 = s0 * W;
            bool *f = sub + pc * nsl + s0;
            memset(f, 0, (size_t)n);
            if (kfirst)
                g_pack_k[kd][is_b](src + (size_t)(k0 * ld + x0) * j.es, ld, j.es, kc, nx - x0, n, kp * W,
                                   dst + s0 * kp * W, f);
            else
                g_pack_x[kd][is_b](src + (size_t)(x0 * ld + k0) * j.es, ld, j.es, kc, nx - x0, n, kp * W,
                                   dst + s0 * kp * W, f);
        }
    }
}
AMPCI_DEF_PACKER(K_F32, f32)
AMPCI_DEF_PACKER(K_F16, f16)
AMPCI_DEF_PACKER(K_BF16W, bf16w)
AMPCI_DEF_PACKER(K_BF16DP, bf16dp)
AMPCI_DEF_PACKER(K_F32BF16DP, f32bf16dp)
#define PACKER(name, dt, need, tag)                                                                                    \
    { name, dt, need, bytes_##tag, packed_##tag, pack_##tag }
const ampci_gemm_packer ampci_gemm_packers_avx512[] = {
    PACKER("avx512 f32", AMPC_DTYPE_F32, AMPC_CPU_FEATURE_COUNT, f32),
    PACKER("avx512 f16 (widened)", AMPC_DTYPE_F16, AMPC_CPU_FEATURE_COUNT, f16),
    PACKER("avx512 bf16 (widened)", AMPC_DTYPE_BF16, AMPC_CPU_FEATURE_COUNT, bf16w),
    PACKER("avx512bf16 bf16 pairs", AMPC_DTYPE_BF16, AMPC_CPU_AVX512_BF16, bf16dp),
    PACKER("avx512bf16 f32 as bf16 pairs", AMPC_DTYPE_F32, AMPC_CPU_AVX512_BF16, f32bf16dp),
};
const size_t ampci_gemm_packers_avx512_count = sizeof ampci_gemm_packers_avx512 / sizeof ampci_gemm_packers_avx512[0];
