/* attention_vec.h: the 16-lane vector layer of the two fused attention kernels, attention_avx512.c and
 * amx/attention_amx.c, and the helpers they share on it (the exp, the transposed write-out of a block,
 * the causal lane masks, the stats of a block). Normally the operations are AVX-512 intrinsics (vf is
 * __m512, so the avx512 kernel mixes them with its own intrinsics). With AMPCI_AMX_EMULATE defined (the
 * emulated build of the AMX kernel in tests/test_amx.c and tests/test_attention_fast.c, compiled without
 * ISA flags) they are portable C, lane by lane, with the same results bit for bit: every operation is an
 * IEEE operation rounded once (add, sub, mul, div, fma, round to nearest even, scale by a power of two) or
 * a bit manipulation, and the two sides define it identically (max/min as x86 does them: a > b ? a : b,
 * so the second operand wins on NaN and on equal zeros). So the whole AMX kernel, not only its tile
 * instructions, is checked on any x86-64 against ref, and against the native kernel where AMX exists;
 * and what the two kernels share is one piece of code, so they round alike. */
#ifndef AMPC_ATTENTION_VEC_H
#define AMPC_ATTENTION_VEC_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define VI __attribute__((always_inline)) static inline

#ifndef AMPCI_AMX_EMULATE
/* ------------------------------------------------------------------------------------------------
 * AVX-512
 * ---------------------------------------------------------------------------------------------- */
#include "simd_avx512.h"

typedef __m512 vf;    /* 16 F32 */
typedef __m512i vi;   /* 16 32-bit words */
typedef __mmask16 vm; /* a bit per lane */

VI vm vm_first(int64_t n) { return m16(n); }
VI vf vf_zero(void) { return _mm512_setzero_ps(); }
VI vf vf_set1(float x) { return _mm512_set1_ps(x); }
VI vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
VI vf vf_loadz(vm m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
VI void vf_store(float *p, vf x) { _mm512_storeu_ps(p, x); }
VI void vf_storem(float *p, vm m, vf x) { _mm512_mask_storeu_ps(p, m, x); }
VI vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
VI vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
VI vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
VI vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
VI vf vf_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a b + c */
VI vf vf_fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a b */
VI vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
VI vf vf_min(vf a, vf b) { return _mm512_min_ps(a, b); }
VI vf vf_blend(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, a, b); } /* lanes of m from b */
VI vf vf_maskz(vm m, vf a) { return _mm512_maskz_mov_ps(m, a); }
VI vf vf_round(vf x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
VI vf vf_scalef(vf x, vf n) { return _mm512_scalef_ps(x, n); } /* x 2^n, n an integer value */
VI vm vf_neq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }

VI vi vi_of(vf x) { return _mm512_castps_si512(x); }
VI vf vf_of(vi x) { return _mm512_castsi512_ps(x); }
VI vi vi_zero(void) { return _mm512_setzero_si512(); }
VI vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
VI vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
VI vi vi_hi16(vi a) { return _mm512_and_si512(a, _mm512_set1_epi32((int)0xffff0000u)); } /* low halves cleared */
VI vi vi_srl16(vi a) { return _mm512_srli_epi32(a, 16); }
VI vi vi_sll16(vi a) { return _mm512_slli_epi32(a, 16); }
/* lanes whose F32 pattern is finite (exponent not all ones) */
VI vm vi_finite(vi a) {
    const vi e = _mm512_set1_epi32(0x7f800000);
    return _mm512_cmpneq_epi32_mask(_mm512_and_si512(a, e), e);
}
/* the 32 BF16 at p (n valid, zero beyond) as 16 words, element 2w in the low half of word w */
VI vi vi_load_pairs(const uint16_t *p, int64_t n) { return _mm512_maskz_loadu_epi16(m32(n), p); }
/* 16 BF16 at p (n valid), each zero-extended into the low half of a word */
VI vi vi_load_h16(const uint16_t *p, int64_t n) { return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m16(n), p)); }
VI void vi_store(uint16_t *p, vi x) { _mm512_storeu_si512(p, x); }
/* the high halves of the 16 words, as 16 BF16 */
VI void vi_store_high(uint16_t *p, vi x) {
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
}
/* whether a BF16 half of a word is subnormal (the tiles would read it as 0) */
VI bool vi_bf16_subnormal(vi w) { return bf16_subnormal(w) != 0; }
VI void vf_transpose(vf r[16]) { transpose16(r); }
VI void vi_transpose(vi w[16]) { transpose16_epi32(w); }

#else /* AMPCI_AMX_EMULATE */
/* ------------------------------------------------------------------------------------------------
 * Portable C, lane by lane
 * ---------------------------------------------------------------------------------------------- */
typedef struct vf {
    float f[16];
} vf;
typedef struct vi {
    uint32_t u[16];
} vi;
typedef uint16_t vm;

#define VF_MAP(expr)                                                                                                   \
    vf r_;                                                                                                             \
    for (int l = 0; l < 16; l++) r_.f[l] = (expr);                                                                     \
    return r_
#define VI_MAP(expr)                                                                                                   \
    vi r_;                                                                                                             \
    for (int l = 0; l < 16; l++) r_.u[l] = (expr);                                                                     \
    return r_
#define LANE(m) (((m) >> l) & 1u)

VI vm vm_first(int64_t n) { return n >= 16 ? (vm)0xffff : n <= 0 ? 0 : (vm)((1u << n) - 1); }
VI vf vf_zero(void) { VF_MAP(0.0f); }
VI vf vf_set1(float x) { VF_MAP(x); }
VI vf vf_load(const float *p) { VF_MAP(p[l]); }
VI vf vf_loadz(vm m, const float *p) { VF_MAP(LANE(m) ? p[l] : 0.0f); }
VI void vf_store(float *p, vf x) { memcpy(p, x.f, sizeof x.f); }
VI void vf_storem(float *p, vm m, vf x) {
    for (int l = 0; l < 16; l++)
        if (LANE(m)) p[l] = x.f[l];
}
VI vf vf_add(vf a, vf b) { VF_MAP(a.f[l] + b.f[l]); }
VI vf vf_sub(vf a, vf b) { VF_MAP(a.f[l] - b.f[l]); }
VI vf vf_mul(vf a, vf b) { VF_MAP(a.f[l] * b.f[l]); }
VI vf vf_div(vf a, vf b) { VF_MAP(a.f[l] / b.f[l]); }
VI vf vf_fmadd(vf a, vf b, vf c) { VF_MAP(fmaf(a.f[l], b.f[l], c.f[l])); }
VI vf vf_fnmadd(vf a, vf b, vf c) { VF_MAP(fmaf(-a.f[l], b.f[l], c.f[l])); }
VI vf vf_max(vf a, vf b) { VF_MAP(a.f[l] > b.f[l] ? a.f[l] : b.f[l]); }
VI vf vf_min(vf a, vf b) { VF_MAP(a.f[l] < b.f[l] ? a.f[l] : b.f[l]); }
VI vf vf_blend(vm m, vf a, vf b) { VF_MAP(LANE(m) ? b.f[l] : a.f[l]); }
VI vf vf_maskz(vm m, vf a) { VF_MAP(LANE(m) ? a.f[l] : 0.0f); }
VI vf vf_round(vf x) { VF_MAP(rintf(x.f[l])); } /* the default rounding mode: to nearest even */
/* vscalefps for the integer-valued n the exp gives (one rounding, as ldexpf); NaN stays NaN */
VI vf vf_scalef(vf x, vf n) { VF_MAP(isnan(x.f[l]) || isnan(n.f[l]) ? x.f[l] + n.f[l] : ldexpf(x.f[l], (int)n.f[l])); }
VI vm vf_neq(vf a, vf b) {
    vm m = 0;
    for (int l = 0; l < 16; l++) m |= (vm)((!(a.f[l] == b.f[l])) << l);
    return m;
}

VI vi vi_of(vf x) {
    vi r;
    memcpy(r.u, x.f, sizeof r.u);
    return r;
}
VI vf vf_of(vi x) {
    vf r;
    memcpy(r.f, x.u, sizeof r.f);
    return r;
}
VI vi vi_zero(void) { VI_MAP(0u); }
VI vi vi_and(vi a, vi b) { VI_MAP(a.u[l] & b.u[l]); }
VI vi vi_or(vi a, vi b) { VI_MAP(a.u[l] | b.u[l]); }
VI vi vi_hi16(vi a) { VI_MAP(a.u[l] & 0xffff0000u); }
VI vi vi_srl16(vi a) { VI_MAP(a.u[l] >> 16); }
VI vi vi_sll16(vi a) { VI_MAP(a.u[l] << 16); }
VI vm vi_finite(vi a) {
    vm m = 0;
    for (int l = 0; l < 16; l++) m |= (vm)(((a.u[l] & 0x7f800000u) != 0x7f800000u) << l);
    return m;
}
VI vi vi_load_pairs(const uint16_t *p, int64_t n) {
    uint16_t h[32] = {0};
    memcpy(h, p, (size_t)(n >= 32 ? 32 : n > 0 ? n : 0) * sizeof *h);
    VI_MAP((uint32_t)h[2 * l] | (uint32_t)h[2 * l + 1] << 16);
}
VI vi vi_load_h16(const uint16_t *p, int64_t n) { VI_MAP(l < n ? (uint32_t)p[l] : 0u); }
VI void vi_store(uint16_t *p, vi x) {
    for (int l = 0; l < 16; l++) p[2 * l] = (uint16_t)x.u[l], p[2 * l + 1] = (uint16_t)(x.u[l] >> 16);
}
VI void vi_store_high(uint16_t *p, vi x) {
    for (int l = 0; l < 16; l++) p[l] = (uint16_t)(x.u[l] >> 16);
}
VI bool vi_bf16_subnormal(vi w) {
    for (int l = 0; l < 16; l++)
        for (int s = 0; s < 32; s += 16) {
            uint32_t h = w.u[l] >> s;
            if ((h & 0x7f80u) == 0 && (h & 0x7fu) != 0) return true;
        }
    return false;
}
VI void vf_transpose(vf r[16]) {
    for (int i = 0; i < 16; i++)
        for (int j = i + 1; j < 16; j++) {
            float t = r[i].f[j];
            r[i].f[j] = r[j].f[i], r[j].f[i] = t;
        }
}
VI void vi_transpose(vi w[16]) {
    for (int i = 0; i < 16; i++)
        for (int j = i + 1; j < 16; j++) {
            uint32_t t = w[i].u[j];
            w[i].u[j] = w[j].u[i], w[j].u[i] = t;
        }
}
#undef LANE

#endif /* AMPCI_AMX_EMULATE */

/* ------------------------------------------------------------------------------------------------
 * What the two kernels share. A block of ATT_BQ queries is the lanes of 4 vectors: scores are computed
 * transposed (keys x queries), so the softmax over keys is per lane.
 * ---------------------------------------------------------------------------------------------- */

#define ATT_BQ 64 /* queries per block: the lanes of 4 vectors */

/* exp in 16 lanes. x = n ln2 + r with n = rint(x / ln2) and r = x - n ln2 (ln2 in two parts, |r| <=
 * ln2 / 2); e^r = 1 + (r + r^2 p(r)) with Cephes' degree-5 minimax p for expf; e^x = scalef(e^r, n),
 * which rounds once and gives subnormals, 0 and inf correctly. Inputs are clamped to [-110, 89] first
 * (e^-110 is below half the smallest subnormal, e^89 above FLT_MAX), so -inf -> +0 exactly, +inf -> inf,
 * and NaN stays NaN (vmaxps/vminps return their second operand, x, on NaN). Measured max error over every
 * 64th float of [-104, 89] (34M inputs; tests/test_attention_fast.c, against double exp, through
 * ampci_attn_exp_avx512): 0.99 ulp for normal results (the test asserts <= 2 ulp), and within 2^-149 (one
 * subnormal unit) for subnormal ones. */
VI vf vf_exp(vf x) {
    x = vf_min(vf_set1(89.0f), vf_max(vf_set1(-110.0f), x));
    vf n = vf_round(vf_mul(x, vf_set1(0x1.715476p+0f)));
    vf r = vf_fnmadd(n, vf_set1(0x1.62e43p-1f), x);
    r = vf_fnmadd(n, vf_set1(-0x1.05c61p-29f), r);
    vf p = vf_set1(1.9875691500E-4f);
    p = vf_fmadd(p, r, vf_set1(1.3981999507E-3f));
    p = vf_fmadd(p, r, vf_set1(8.3334519073E-3f));
    p = vf_fmadd(p, r, vf_set1(4.1665795894E-2f));
    p = vf_fmadd(p, r, vf_set1(1.6666665459E-1f));
    p = vf_fmadd(p, r, vf_set1(5.0000001201E-1f));
    vf em1 = vf_fmadd(p, vf_mul(r, r), r); /* e^r - 1, accurate relative to itself */
    return vf_scalef(vf_add(em1, vf_set1(1.0f)), n);
}

/* dst (nrow rows ld floats apart, ncol columns) = src (ncol rows x lanes, ATT_BQ floats apart) transposed,
 * 16 x 16 at a time, lane vector v first multiplied by sc[v] when sc is given: a block's O^T or dQ^T
 * written out as rows. */
static inline void att_unpack_t(const float *src, int64_t ncol, int64_t nrow, const vf *sc, float *dst, int64_t ld) {
    for (int64_t i0 = 0; i0 < nrow; i0 += 16)
        for (int64_t t0 = 0; t0 < ncol; t0 += 16) {
            vf r[16];
            for (int l = 0; l < 16; l++) {
                r[l] = t0 + l < ncol ? vf_load(src + (t0 + l) * ATT_BQ + i0) : vf_zero();
                if (sc) r[l] = vf_mul(r[l], sc[i0 / 16]);
            }
            vf_transpose(r);
            for (int64_t l = 0; l < 16 && l < nrow - i0; l++)
                vf_storem(dst + (i0 + l) * ld + t0, vm_first(ncol - t0), r[l]);
        }
}

/* Lanes of the vector whose lane 0 is query i that key j may see, for c = j - i: lanes l >= c. */
VI vm att_causal_lanes(int64_t c) { return c <= 0 ? (vm)0xffff : c >= 16 ? 0 : (vm)(0xffffu << c); }

/* Lanes of panel row `key` (vector v of the block at i0, nq queries) that are visible. */
VI vm att_lanes(bool causal, int64_t key, int64_t i0, int64_t nq, int64_t v) {
    vm m = vm_first(nq - 16 * v);
    return causal ? m & att_causal_lanes(key - i0 - 16 * v) : m;
}

/* The end of a forward block of nq queries: o (nq rows, Dv floats apart) = O^T (Dv x lanes) / l,
 * transposed; stats (nq pairs, or NULL) = m, 1 / l per query. */
static inline void att_fw_finish(const float *ot, const vf m[4], const vf l[4], int64_t Dv, int64_t nq, float *o,
                                 float *stats) {
    vf inv[4];
    _Alignas(64) float ms[ATT_BQ], is[ATT_BQ];
    for (int v = 0; v < 4; v++) { /* vectors beyond the block's lanes are never stored */
        inv[v] = vf_div(vf_set1(1.0f), l[v]);
        vf_store(ms + 16 * v, m[v]), vf_store(is + 16 * v, inv[v]);
    }
    att_unpack_t(ot, Dv, nq, inv, o, Dv);
    for (int64_t i = 0; stats && i < nq; i++) stats[2 * i] = ms[i], stats[2 * i + 1] = is[i];
}

/* The forward's stats of a block of nq queries (nq pairs) as lanes: m and 1 / sum; lanes beyond nq get
 * m = 0 and 1 / sum = 0. */
VI void att_stats_lanes(const float *stats, int64_t nq, vf m[4], vf inv[4]) {
    _Alignas(64) float ms[ATT_BQ] = {0}, is[ATT_BQ] = {0};
    for (int64_t i = 0; i < nq; i++) ms[i] = stats[2 * i], is[i] = stats[2 * i + 1];
    for (int v = 0; v < 4; v++) m[v] = vf_load(ms + 16 * v), inv[v] = vf_load(is + 16 * v);
}

#endif
