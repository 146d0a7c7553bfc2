/* amx_pack.h: packing for the AMX GEMMs, part of gemm_amx.c's translation unit. Packing turns op(a) and
 * op(b) of any layout and dtype into BF16 tiles, splitting each value into BF16 parts, zero-padding every
 * edge, and flags the panels that hold values the tile path must not see (see "Special values" in
 * gemm_amx.c). Two implementations give the same bytes and flags: the AVX-512 one the kernels run (whole
 * rows of a tile per instruction, special values found by mask compares on whole vectors, no branch per
 * element; FP16 split with AVX512-BF16's vcvtne2ps2bf16 where the CPU has it) and the scalar one, the
 * readable definition, which the emulated build of tests/test_amx.c runs on CPUs without AVX-512 and
 * compares with the vector ones where they exist. Packing reads a source whose rows or columns are
 * contiguous (not k) a k-step at a time across all the groups of a call, so every k-row is read in whole
 * cache lines.
 *
 * A tile is 16 rows x 32 BF16 (1 KiB, rows 64 bytes apart: the tile-load stride).
 *   A tile (row group G, k-step t): row r, element e = op(a)[16 G + r][k0 + 32 t + e].
 *   B tile (column group H, k-step t): row p, element 2 n + s = op(b)[k0 + 32 t + 2 p + s][16 H + n]
 *   (VNNI order: the pair (k, k + 1) of one column is one 32-bit word, which tdpbf16ps multiplies with
 *   the pair (k, k + 1) of one row of A).
 * A group's tiles for one K-block are stored k-step by k-step, each k-step as `parts` tiles (hi, then lo
 * for two-part kinds): tile (t, part) at (t * parts + part) * TWORDS.
 *
 * In vector code both tiles are 16 vectors of 16 "pair words" (a word: elements k and k + 1 of one row
 * of op(a) or column of op(b), k in the low half): an A tile row holds the 16 words of one row, a B tile
 * row one word of each of 16 columns. A source whose k is contiguous yields the words of one row or
 * column per load; a source whose rows or columns are contiguous yields one word per row or column from
 * two k-rows; where that is the other tile's orientation, a 16 x 16 transpose of words turns it. */
#ifndef AMPC_AMX_PACK_H
#define AMPC_AMX_PACK_H

#include "../../numerics/half.h"
#include "../kernels.h"

#include <string.h>

#define TWORDS 512 /* BF16 per tile */
#define TROWS 16   /* rows of a tile; rows and columns of a C tile */
#define TK 32      /* BF16 elements along K in one k-step (16 pairs) */

#define AI __attribute__((always_inline)) static inline

/* Operand kinds: the source dtype and how many BF16 parts each value becomes. */
typedef enum akind {
    AK_BF16 = 0, /* BF16: one part, as is */
    AK_F16X3,    /* F16: hi + lo, exact */
    AK_F32X1,    /* F32: hi only */
    AK_F32X3,    /* F32: hi + lo */
    AK_COUNT
} akind;

AI int kind_parts(akind kd) { return kd == AK_F16X3 || kd == AK_F32X3 ? 2 : 1; }
AI size_t kind_size(akind kd) { return kd == AK_F32X1 || kd == AK_F32X3 ? 4 : 2; }

AI bool bf16_is_subnormal(uint16_t h) { return (h & 0x7f80u) == 0 && (h & 0x7fu) != 0; }
AI bool bf16_nonfinite(uint16_t h) { return (h & 0x7f80u) == 0x7f80u; }

/* x = hi + lo (split_bf16 of gemm_ref.c): hi = x rounded to BF16, lo = (x - hi) rounded to BF16, lo = 0
 * when hi is inf or NaN. x - hi is exact in F32 (it is the rounding remainder). */
AI void split_f32(uint32_t x, uint16_t *hi, uint16_t *lo) {
    *hi = ampci_bf16_from_f32_bits(x);
    if (bf16_nonfinite(*hi)) {
        *lo = 0;
        return;
    }
    float r = ampci_f32_from_bits(x) - ampci_f32_from_bits(ampci_bf16_to_f32_bits(*hi));
    *lo = ampci_bf16_from_f32_bits(ampci_f32_bits(r));
}

/* The BF16 part(s) of the source element at p; returns whether the tile path must not see them: a BF16
 * subnormal part (tdpbf16ps reads it as 0), or, for three-pass kinds, an inf/NaN hi (its cross products
 * inf * lo would turn inf * 1 into inf * 0 = NaN). */
AI bool load_parts(const akind kd, const unsigned char *p, uint16_t *hi, uint16_t *lo) {
    uint16_t h;
    uint32_t x;
    switch (kd) {
    case AK_BF16: memcpy(hi, p, 2); return bf16_is_subnormal(*hi);
    case AK_F16X3: /* F16 values and their parts are multiples of 2^-24: never BF16 subnormals */
        memcpy(&h, p, 2);
        split_f32(ampci_f16_to_f32_bits(h), hi, lo);
        return bf16_nonfinite(*hi);
    case AK_F32X1:
        memcpy(&x, p, 4);
        *hi = ampci_bf16_from_f32_bits(x);
        return bf16_is_subnormal(*hi);
    default: /* AK_F32X3 */
        memcpy(&x, p, 4);
        split_f32(x, hi, lo);
        return bf16_is_subnormal(*hi) || bf16_is_subnormal(*lo) || bf16_nonfinite(*hi);
    }
}

/* One operand of a K-block: element (x, k) of op(a) (x = row) or op(b) (x = column) is at
 * base + (x * sx + k * sk) * es; nx x's (of a group: at most 16) and kc k's exist (the rest is zero padding). */
typedef struct pack_src {
    const unsigned char *base;
    int64_t sx, sk;
    int64_t nx, kc;
} pack_src;

/* Position of element (x, k) in a group's tiles (without the part offset). */
AI size_t pos_a(int parts, int64_t x, int64_t k) { return (size_t)((k / TK * parts) * TWORDS + x * TK + k % TK); }
AI size_t pos_b(int parts, int64_t x, int64_t k) {
    return (size_t)((k / TK * parts) * TWORDS + (k % TK) / 2 * TK + 2 * x + (k & 1));
}

/* Stores the part(s) of the element at src as element (x, k) of a group; returns whether it is special. */
AI bool put(const akind kd, const bool is_b, const unsigned char *src, int64_t x, int64_t k, uint16_t *dst) {
    const int parts = kind_parts(kd);
    uint16_t hi, lo = 0;
    bool special = load_parts(kd, src, &hi, &lo);
    size_t at = is_b ? pos_b(parts, x, k) : pos_a(parts, x, k);
    dst[at] = hi;
    if (parts == 2) dst[at + TWORDS] = lo;
    return special;
}

/* Packs one group (16 rows of op(a) when is_b is false, 16 columns of op(b) when true) over kt k-steps
 * into dst; returns whether it holds a special value. The inner loop runs along whichever of x and k is
 * contiguous in the source. The scalar definition (see the top). */
AI bool pack_group_scalar(const akind kd, const bool is_b, const pack_src *s, int64_t kt, uint16_t *dst) {
    const size_t es = kind_size(kd);
    bool special = false;
    if (s->nx < TROWS || s->kc < kt * TK) memset(dst, 0, (size_t)(kt * kind_parts(kd) * TWORDS) * sizeof(uint16_t));
    if (s->sk == 1) { /* k contiguous */
        for (int64_t x = 0; x < s->nx; x++) {
            const unsigned char *row = s->base + (size_t)(x * s->sx) * es;
            for (int64_t k = 0; k < s->kc; k++) special |= put(kd, is_b, row + (size_t)k * es, x, k, dst);
        }
    } else { /* x contiguous */
        for (int64_t k = 0; k < s->kc; k++) {
            const unsigned char *row = s->base + (size_t)(k * s->sk) * es;
            for (int64_t x = 0; x < s->nx; x++) special |= put(kd, is_b, row + (size_t)(x * s->sx) * es, x, k, dst);
        }
    }
    return special;
}

/* Group i (x from 16 i) of a source whose first group s describes (s->nx counts from there). */
AI pack_src group_src(const akind kd, const pack_src *s, int64_t i) {
    pack_src g = *s;
    g.base += (size_t)(16 * i * s->sx) * kind_size(kd);
    g.nx = s->nx - 16 * i < TROWS ? s->nx - 16 * i : TROWS;
    return g;
}

/* Packs ng consecutive groups over kt k-steps: group i to dst + i * gstride, its flag (it holds a special
 * value) to flag[i * fstride]. */
typedef void (*pack_fn)(const pack_src *s, int64_t ng, int64_t kt, uint16_t *dst, size_t gstride, bool *flag,
                        size_t fstride);

AI void pack_groups_scalar(const akind kd, const bool is_b, const pack_src *s, int64_t ng, int64_t kt, uint16_t *dst,
                           size_t gstride, bool *flag, size_t fstride) {
    for (int64_t i = 0; i < ng; i++) {
        pack_src gs = group_src(kd, s, i);
        flag[(size_t)i * fstride] = pack_group_scalar(kd, is_b, &gs, kt, dst + (size_t)i * gstride);
    }
}

#define PACK_ARGS const pack_src *s, int64_t ng, int64_t kt, uint16_t *dst, size_t gstride, bool *flag, size_t fstride
#define DEF_PACK_GROUPS(KD, tag, how)                                                                                  \
    static void pack_a_##tag##_##how(PACK_ARGS) {                                                                      \
        pack_groups_##how(KD, false, s, ng, kt, dst, gstride, flag, fstride);                                          \
    }                                                                                                                  \
    static void pack_b_##tag##_##how(PACK_ARGS) { pack_groups_##how(KD, true, s, ng, kt, dst, gstride, flag, fstride); }
#define DEF_PACK_KINDS(how)                                                                                            \
    DEF_PACK_GROUPS(AK_BF16, bf16, how)                                                                                \
    DEF_PACK_GROUPS(AK_F16X3, f16x3, how)                                                                              \
    DEF_PACK_GROUPS(AK_F32X1, f32x1, how)                                                                              \
    DEF_PACK_GROUPS(AK_F32X3, f32x3, how)                                                                              \
    /* [kind][0 = A, 1 = B] */                                                                                         \
    static const pack_fn g_pack_##how[AK_COUNT][2] = {                                                                 \
        {pack_a_bf16_##how, pack_b_bf16_##how},                                                                        \
        {pack_a_f16x3_##how, pack_b_f16x3_##how},                                                                      \
        {pack_a_f32x1_##how, pack_b_f32x1_##how},                                                                      \
        {pack_a_f32x3_##how, pack_b_f32x3_##how},                                                                      \
    };
DEF_PACK_KINDS(scalar)

/* ------------------------------------------------------------------------------------------------
 * The AVX-512 packing. The emulated build compiles this file without ISA flags: there the vector code
 * gets them from a target pragma and runs only where the CPU has AVX-512 (AMX_VECTOR in gemm_amx.c).
 * ---------------------------------------------------------------------------------------------- */
#ifdef AMPCI_AMX_EMULATE
#define AMX_VECTOR_BEGIN                                                                                               \
    _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c\")")
#define AMX_VECTOR_END _Pragma("GCC pop_options")
#else
#define AMX_VECTOR_BEGIN
#define AMX_VECTOR_END
#endif
AMX_VECTOR_BEGIN
#include "../avx512/simd_avx512.h"

/* x (16 F32 patterns) = hi + lo, split_f32 in 16 lanes: BF16 parts in the low halves of the words. Where
 * hi is finite so is the remainder, whose rounding then needs no NaN rule. */
AI void split16(__m512i x, __m512i *hi, __m512i *lo) {
    const __m512i e = _mm512_set1_epi32(0x7f80), one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff);
    __m512i h = bf16_rne(x);
    __mmask16 finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(h, e), e);
    __m512i r = _mm512_castps_si512(
        _mm512_sub_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(_mm512_slli_epi32(h, 16))));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(r, 16), one);
    *hi = h;
    *lo = _mm512_maskz_srli_epi32(finite, _mm512_add_epi32(r, _mm512_add_epi32(lsb, half)), 16);
}

/* The low halves of the words of a (elements 0..15) and b (16..31), in order: 32 BF16 = 16 pair words. */
AI __m512i low_halves(__m512i a, __m512i b) {
    const __m512i idx = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24,
                                         22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_permutex2var_epi16(a, idx, b);
}

/* 32 F32 values (f0: elements 0..15, f1: 16..31; FP16 values, or F32 values none of which is nonzero
 * below 2^-102: f32_tiny_any) split into BF16 hi and lo with vcvtne2ps2bf16, 32 BF16 each in element
 * order; lo = 0 where hi is inf or NaN. */
AI void split32_bf(__m512 f0, __m512 f1, __m512i *hi, __m512i *lo) {
    const __m512i e = _mm512_set1_epi16(0x7f80);
    __m512i h = (__m512i)_mm512_cvtne2ps_pbh(f1, f0);
    __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
    __m512 h1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
    __m512i l = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(f1, h1), _mm512_sub_ps(f0, h0));
    *hi = h;
    *lo = _mm512_maskz_mov_epi16(_mm512_cmpneq_epi16_mask(_mm512_and_si512(h, e), e), l);
}

/* Whether a lane of x or y (F32 patterns) is nonzero and below 2^-102 in magnitude: there
 * vcvtne2ps2bf16's DAZ and FTZ could meet the value itself or its remainder x - hi (a multiple of
 * x's ulp, 2^-126 or more when |x| >= 2^-103), so the F32 split takes the integer path (split16). */
AI bool f32_tiny_any(__m512i x, __m512i y) {
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1), lim = _mm512_set1_epi32(0x0c7fffff);
    __m512i ax = _mm512_sub_epi32(_mm512_and_si512(x, abs), one), ay = _mm512_sub_epi32(_mm512_and_si512(y, abs), one);
    return (_mm512_cmplt_epu32_mask(ax, lim) | _mm512_cmplt_epu32_mask(ay, lim)) != 0;
}

/* 16 consecutive elements at p (n valid, zero beyond) as F32 patterns (F16 widened exactly, as half.h). */
AI __m512i load16_f32(const akind kd, const unsigned char *p, int64_t n) {
    if (kd == AK_F16X3) return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m16(n), p)));
    return _mm512_maskz_loadu_epi32(m16(n), p);
}

/* The parts of 16 elements at p (n valid) in the low halves of 16 words (lo: zero for one-part kinds). */
AI void parts16(const akind kd, const unsigned char *p, int64_t n, __m512i *hi, __m512i *lo) {
    if (kd == AK_BF16) {
        *hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m16(n), p));
        *lo = _mm512_setzero_si512();
    } else if (kd == AK_F32X1) {
        *hi = bf16_rne(load16_f32(kd, p, n));
        *lo = _mm512_setzero_si512();
    } else {
        split16(load16_f32(kd, p, n), hi, lo);
    }
}

/* The pair words of one k-contiguous row or column: elements p[0..n) (n <= 32, zero beyond). */
AI void words_kline(const akind kd, const bool bf, const unsigned char *p, int64_t n, __m512i *hi, __m512i *lo) {
    if (kd == AK_F16X3 && bf) {
        __m512i v = _mm512_maskz_loadu_epi16(m32(n), p);
        split32_bf(_mm512_cvtph_ps(_mm512_castsi512_si256(v)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1)), hi,
                   lo);
        return;
    }
    if (kd == AK_BF16) {
        *hi = _mm512_maskz_loadu_epi16(m32(n), p);
        *lo = _mm512_setzero_si512();
        return;
    }
    size_t half = 16 * kind_size(kd);
    if (kd == AK_F32X3 && bf) {
        __m512i x0 = load16_f32(kd, p, n), x1 = load16_f32(kd, p + half, n - 16);
        if (!f32_tiny_any(x0, x1)) {
            split32_bf(_mm512_castsi512_ps(x0), _mm512_castsi512_ps(x1), hi, lo);
            return;
        }
    }
    __m512i h0, l0, h1, l1;
    parts16(kd, p, n, &h0, &l0);
    parts16(kd, p + half, n - 16, &h1, &l1);
    *hi = low_halves(h0, h1);
    *lo = low_halves(l0, l1);
}

/* The pair words (r0[x], r1[x]) of 16 contiguous rows or columns x < n from two k-rows; r1 NULL: zeros. */
AI void words_krows(const akind kd, const bool bf, const unsigned char *r0, const unsigned char *r1, int64_t n,
                    __m512i *hi, __m512i *lo) {
    if ((kd == AK_F16X3 || kd == AK_F32X3) && bf) { /* elements 0..15: row k, 16..31: row k + 1, then pairs */
        const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                             21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        __m512i x0 = load16_f32(kd, r0, n), x1 = r1 ? load16_f32(kd, r1, n) : _mm512_setzero_si512();
        if (kd == AK_F16X3 || !f32_tiny_any(x0, x1)) {
            split32_bf(_mm512_castsi512_ps(x0), _mm512_castsi512_ps(x1), hi, lo);
            *hi = _mm512_permutexvar_epi16(idx, *hi);
            *lo = _mm512_permutexvar_epi16(idx, *lo);
            return;
        }
    }
    __m512i h0, l0, h1 = _mm512_setzero_si512(), l1 = h1;
    parts16(kd, r0, n, &h0, &l0);
    if (r1) parts16(kd, r1, n, &h1, &l1);
    *hi = _mm512_or_si512(h0, _mm512_slli_epi32(h1, 16));
    *lo = _mm512_or_si512(l0, _mm512_slli_epi32(l1, 16));
}

/* The BF16 lanes of the parts that the tile path must not see (load_parts). */
AI __mmask32 special32(const akind kd, __m512i hi, __m512i lo) {
    const __m512i e = _mm512_set1_epi16(0x7f80);
    __mmask32 nonfinite = _mm512_cmpeq_epi16_mask(_mm512_and_si512(hi, e), e);
    switch (kd) {
    case AK_BF16:
    case AK_F32X1: return bf16_subnormal(hi);
    case AK_F16X3: return nonfinite;
    default: return bf16_subnormal(hi) | bf16_subnormal(lo) | nonfinite;
    }
}

/* Word vector i of a k-step from k0: the words of row or column i (kline: the source's k is contiguous),
 * else word i of each of the 16 rows or columns (from the k-rows k0 + 2 i and k0 + 2 i + 1). Returns the
 * lanes the tile path must not see. */
AI __mmask32 load_vec(const akind kd, const bool bf, const pack_src *s, bool kline, int64_t k0, int i, __m512i *hi,
                      __m512i *lo) {
    const size_t es = kind_size(kd);
    *hi = *lo = _mm512_setzero_si512();
    if (kline && i < s->nx) {
        words_kline(kd, bf, s->base + (size_t)(i * s->sx + k0 * s->sk) * es, s->kc - k0, hi, lo);
    } else if (!kline && k0 + 2 * i < s->kc) {
        const unsigned char *r0 = s->base + (size_t)((k0 + 2 * i) * s->sk) * es;
        words_krows(kd, bf, r0, k0 + 2 * i + 1 < s->kc ? r0 + (size_t)s->sk * es : NULL, s->nx, hi, lo);
    }
    return special32(kd, *hi, *lo);
}

/* One k-step (from k0) of one group to d: a tile row per vector store, through a 16 x 16 transpose of
 * words where the source's orientation is the other tile's (A tiles want the words of a row per
 * vector, B tiles a word per column). Returns the special lanes. */
AI __mmask32 pack_step(const akind kd, const bool bf, const bool is_b, const pack_src *s, bool kline, int64_t k0,
                       uint16_t *d) {
    const int parts = kind_parts(kd);
    __mmask32 sp = 0;
    if (is_b != kline) {
#pragma GCC unroll 4
        for (int i = 0; i < 16; i++) {
            __m512i hi, lo;
            sp |= load_vec(kd, bf, s, kline, k0, i, &hi, &lo);
            _mm512_store_si512(d + i * TK, hi);
            if (parts == 2) _mm512_store_si512(d + TWORDS + i * TK, lo);
        }
        return sp;
    }
    __m512i hi[16], lo[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) sp |= load_vec(kd, bf, s, kline, k0, i, &hi[i], &lo[i]);
    transpose16_epi32(hi);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) _mm512_store_si512(d + i * TK, hi[i]);
    if (parts == 2) {
        transpose16_epi32(lo);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) _mm512_store_si512(d + TWORDS + i * TK, lo[i]);
    }
    return sp;
}

/* pack_groups_scalar's bytes and flags. A k-contiguous source is read group by group (each row or column
 * streams along k); one whose rows or columns are contiguous k-step by k-step across the groups, so each
 * k-row is read in whole cache lines while they are in L1. */
AI void pack_groups_vec(const akind kd, const bool bf, const bool is_b, const pack_src *s, int64_t ng, int64_t kt,
                        uint16_t *dst, size_t gstride, bool *flag, size_t fstride) {
    const size_t step = (size_t)kind_parts(kd) * TWORDS;
    const bool kline = s->sk == 1; /* the scalar code's choice, so a source with both strides 1 reads alike */
    if (kline) {
        for (int64_t i = 0; i < ng; i++) {
            pack_src gs = group_src(kd, s, i);
            __mmask32 sp = 0;
            for (int64_t t = 0; t < kt; t++)
                sp |= pack_step(kd, bf, is_b, &gs, true, t * TK, dst + i * gstride + t * step);
            flag[(size_t)i * fstride] = sp != 0;
        }
        return;
    }
    for (int64_t i = 0; i < ng; i++) flag[(size_t)i * fstride] = false;
    for (int64_t t = 0; t < kt; t++)
        for (int64_t i = 0; i < ng; i++) {
            pack_src gs = group_src(kd, s, i);
            if (pack_step(kd, bf, is_b, &gs, false, t * TK, dst + i * gstride + t * step))
                flag[(size_t)i * fstride] = true;
        }
}
AI void pack_groups_vector(const akind kd, const bool is_b, PACK_ARGS) {
    pack_groups_vec(kd, false, is_b, s, ng, kt, dst, gstride, flag, fstride);
}
DEF_PACK_KINDS(vector)
/* The same with AVX512-BF16's vcvtne2ps2bf16 for the F16 and F32 splits: 32 lanes in one instruction
 * where the integer rounding takes ten, for CPUs that have it (every AMX CPU to date). Its RNE and NaN
 * rule are bf16_rne's; its DAZ and FTZ change nothing for FP16 values and their parts (F32 normals or 0),
 * nor for F32 values of 2^-102 or more and their parts; 32 F32 values with a smaller nonzero one among
 * them take the integer split (f32_tiny_any). */
static void pack_a_f16x3_vectorbf(PACK_ARGS) {
    pack_groups_vec(AK_F16X3, true, false, s, ng, kt, dst, gstride, flag, fstride);
}
static void pack_b_f16x3_vectorbf(PACK_ARGS) {
    pack_groups_vec(AK_F16X3, true, true, s, ng, kt, dst, gstride, flag, fstride);
}
static void pack_a_f32x3_vectorbf(PACK_ARGS) {
    pack_groups_vec(AK_F32X3, true, false, s, ng, kt, dst, gstride, flag, fstride);
}
static void pack_b_f32x3_vectorbf(PACK_ARGS) {
    pack_groups_vec(AK_F32X3, true, true, s, ng, kt, dst, gstride, flag, fstride);
}
static const pack_fn g_pack_vectorbf[AK_COUNT][2] = {
    {pack_a_bf16_vector, pack_b_bf16_vector},
    {pack_a_f16x3_vectorbf, pack_b_f16x3_vectorbf},
    {pack_a_f32x1_vector, pack_b_f32x1_vector},
    {pack_a_f32x3_vectorbf, pack_b_f32x3_vectorbf},
};

AMX_VECTOR_END

#endif
