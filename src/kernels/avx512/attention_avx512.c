/* attention_avx512.c: fused ("flash") scaled dot-product attention for the avx512 level, forward and
 * backward, behind the kernel table's attention slots. The (Tq, Tk) score matrix never exists: the
 * forward walks 64-key chunks with an online softmax, the backward rebuilds the probabilities from q, k
 * and the forward's stats, which mean what the ref kernel's do (stats[2r] = m, the row max of the scaled
 * scores; stats[2r+1] = 1 / sum_j exp(s_j - m); P = exp(s - m) 1/sum), so the two kernels' stats are
 * interchangeable. Results do not depend on the thread count. Two entries: ampc_k_attention__avx512 reads
 * BF16 widened to F32, ampc_k_attention__avx512bf16 as BF16 pairs through vdpbf16ps (F32 and F16 take the
 * same path in both); likewise for the backward. */
#include "../driver_util.h"
#include "attention_vec.h"
#include "kernels_avx512.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define BQ ATT_BQ             /* queries per block: the lanes of every tile (4 vectors) */
#define BK 64                 /* keys per forward chunk, and the granule of the subnormal decision */
#define MR 6                  /* micro-tile rows */
#define NV 4                  /* micro-tile vectors of 16 lanes */
#define SERIAL_WORK (1 << 22) /* multiply-adds below which a call stays on the calling thread */
#define NONE INT64_MIN

#define AI __attribute__((always_inline)) static inline
#define BF16_TARGET __attribute__((target("avx512bf16")))

typedef enum kind { K_F32 = 0, K_F16, K_BF16W, K_BF16DP } kind; /* how q, k, v, go are read */
typedef enum mkind { MK_F32 = 0, MK_DP, MK_DPX } mkind;         /* F32 FMA, vdpbf16ps, its emulation */
enum { MODE_SET = 0, MODE_ADD, MODE_SCALE };

static size_t fl16(int64_t n) { return (size_t)ceil_div(n, 16) * 16; } /* floats, rounded to a line */

/* y (n) = exp(x (n)), the vf_exp of attention_vec.h both kernels run: the accuracy test's hook
 * (tests/test_attention_fast.c). */
void ampci_attn_exp_avx512(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16)
        _mm512_mask_storeu_ps(y + i, m16(n - i), vf_exp(_mm512_maskz_loadu_ps(m16(n - i), x + i)));
}

/* ------------------------------------------------------------------------------------------------
 * Layout. A task holds a block of BQ = 64 queries, and the queries are the lanes of every tile: scores
 * are computed transposed, S^T (keys x queries) = K Q^T, so the softmax over keys is a vertical (per
 * lane) max and sum, the online rescaling is one vector multiply per output row, and k and v are read in
 * their natural row-major layout as broadcast operands. Only Q^T and dO^T (per query block) and the
 * outputs O^T and dQ^T are transposed, 16 x 16 at a time. All five matrix products run one register-
 * blocked micro-kernel (mk_run lists them).
 *
 * The micro-kernel: C (mr x nv vectors) op= sum_k A(r, k) B(k, :). A(r, k) = a[r ars + k acs] is an F32
 * value or (MK_DP/MK_DPX) a BF16 pair in a 32-bit word, broadcast; B row k is b + k ldb, 16 lanes per
 * vector; the last vector's lanes beyond mlast are neither read nor written. The sum runs in k order in
 * one accumulator per element, then: SET c = acc, ADD c = c + acc, SCALE c = c cs[v] + acc (one FMA).
 * ---------------------------------------------------------------------------------------------- */
typedef struct mk {
    int64_t K;
    const float *a;
    int64_t ars, acs;
    const float *b;
    int64_t ldb;
    float *c;
    int64_t ldc;
    __mmask16 mlast;
    int mode;
    const __m512 *cs;
} mk;

AI void mk_store(const int mr, const int nv, __m512 acc[MR][NV], const mk *g) {
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __mmask16 m = v + 1 < nv ? (__mmask16)0xffff : g->mlast;
            float *c = g->c + r * g->ldc + 16 * v;
            __m512 x = acc[r][v];
            if (g->mode == MODE_ADD) x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), x);
            else if (g->mode == MODE_SCALE) x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, c), g->cs[v], x);
            _mm512_mask_storeu_ps(c, m, x);
        }
}

AI __m512 load_b(const float *b, int v, int nv, __mmask16 mlast) {
    return v + 1 < nv ? _mm512_loadu_ps(b + 16 * v) : _mm512_maskz_loadu_ps(mlast, b + 16 * v);
}

AI void mk_f32_body(const int mr, const int nv, const mk *g) {
    __m512 acc[MR][NV], bv[NV];
    const float *ap[MR], *b = g->b;
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        ap[r] = g->a + r * g->ars;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = 0, kk = 0; k < g->K; k++, kk += g->acs, b += g->ldb) {
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = load_b(b, v, nv, g->mlast);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m512 av = _mm512_set1_ps(ap[r][kk]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
    mk_store(mr, nv, acc, g);
}

BF16_TARGET AI void mk_dp_body(const int mr, const int nv, const mk *g) {
    __m512 acc[MR][NV];
    __m512bh bv[NV];
    const int32_t *ap[MR];
    const float *b = g->b;
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        ap[r] = (const int32_t *)(g->a + r * g->ars);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = 0, kk = 0; k < g->K; k++, kk += g->acs, b += g->ldb) {
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = (__m512bh)_mm512_castps_si512(load_b(b, v, nv, g->mlast));
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32(ap[r][kk]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
        }
    }
    mk_store(mr, nv, acc, g);
}

/* vdpbf16ps with IEEE FMAs: the pair's odd element (high half, already an F32 pattern) first, then the
 * even one (low half shifted up), as the instruction orders them. */
AI void mk_dpx_body(const int mr, const int nv, const mk *g) {
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512 acc[MR][NV], bo[NV], be[NV];
    const int32_t *ap[MR];
    const float *b = g->b;
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        ap[r] = (const int32_t *)(g->a + r * g->ars);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = 0, kk = 0; k < g->K; k++, kk += g->acs, b += g->ldb) {
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            __m512i w = _mm512_castps_si512(load_b(b, v, nv, g->mlast));
            bo[v] = _mm512_castsi512_ps(_mm512_and_si512(w, hi));
            be[v] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
        }
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m512i w = _mm512_set1_epi32(ap[r][kk]);
            __m512 ao = _mm512_castsi512_ps(_mm512_and_si512(w, hi));
            __m512 ae = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(ae, be[v], _mm512_fmadd_ps(ao, bo[v], acc[r][v]));
        }
    }
    mk_store(mr, nv, acc, g);
}

typedef void (*mk_fn)(const mk *g);
#define MK_DEF(r, v)                                                                                                   \
    static void mk_f32_##r##_##v(const mk *g) { mk_f32_body(r, v, g); }                                                \
    BF16_TARGET static void mk_dp_##r##_##v(const mk *g) { mk_dp_body(r, v, g); }                                      \
    static void mk_dpx_##r##_##v(const mk *g) { mk_dpx_body(r, v, g); }
#define MK_ROW(X, r) X(r, 1) X(r, 2) X(r, 3) X(r, 4)
#define MK_ALL(X) MK_ROW(X, 1) MK_ROW(X, 2) MK_ROW(X, 3) MK_ROW(X, 4) MK_ROW(X, 5) MK_ROW(X, 6)
MK_ALL(MK_DEF)
#define MK_REF_F32(r, v) mk_f32_##r##_##v,
#define MK_REF_DP(r, v) mk_dp_##r##_##v,
#define MK_REF_DPX(r, v) mk_dpx_##r##_##v,
static const mk_fn g_mk[3][MR * NV] = {{MK_ALL(MK_REF_F32)}, {MK_ALL(MK_REF_DP)}, {MK_ALL(MK_REF_DPX)}};

/* C rows [0, M) x nvec vectors through micro-tiles. The five uses (rows x lanes, reduction):
 *   S^T  = K Q^T      keys x queries, D      A = k rows (or BF16 pairs)   B = Q^T    (forward, backward)
 *   dP^T = V dO^T     keys x queries, Dv     A = v rows (or BF16 pairs)   B = dO^T   (backward)
 *   O^T  = V^T P^T    Dv x queries,  keys    A(t, j) = v[j, t]             B = P^T    (forward, SCALE)
 *   dQ^T = K^T dS^T   D x queries,   keys    A(d, j) = k[j, d]             B = dS^T   (backward)
 *   dK += dS^T Q, dV += P^T dO: keys x D (Dv), queries; A(j, i) = dS^T / P^T, B = q / dO rows (ADD)
 * Causal skips: vdiag = (key of C row 0) - (query of lane 0) skips each tile's leading 16-lane vectors
 * that lie wholly above the diagonal (their C entries are left unwritten: the callers mask them);
 * kdiag = (key of C row 0) - (query of reduction step 0) starts each tile's reduction at its first
 * visible query (the skipped terms are exact zeros). NONE: no skipping. */
static void mk_run(mkind kd, const mk *g, int64_t M, int64_t nvec, int64_t vdiag, int64_t kdiag) {
    for (int64_t r0 = 0; r0 < M; r0 += MR) {
        int mr = (int)min64(MR, M - r0);
        int64_t vs = vdiag != NONE && r0 + vdiag > 0 ? (r0 + vdiag) / 16 : 0;
        int64_t ks = kdiag != NONE && r0 + kdiag > 0 ? r0 + kdiag : 0;
        if (ks >= g->K && g->mode != MODE_SET) continue;
        for (int64_t v0 = vs; v0 < nvec; v0 += NV) {
            int nv = (int)min64(NV, nvec - v0);
            mk t = *g;
            t.K = g->K - ks;
            t.a = g->a + r0 * g->ars + ks * g->acs;
            t.b = g->b + ks * g->ldb + 16 * v0;
            t.c = g->c + r0 * g->ldc + 16 * v0;
            t.mlast = v0 + nv == nvec ? g->mlast : (__mmask16)0xffff;
            t.cs = g->cs ? g->cs + v0 : NULL;
            g_mk[kd][(mr - 1) * NV + nv - 1](&t);
        }
    }
}

/* ------------------------------------------------------------------------------------------------
 * Operand preparation. F32 inputs are read in place; F16 and BF16 are widened exactly to F32 (per key
 * chunk in the forward, per head in the backward). With AVX512-BF16 the two products of BF16 inputs,
 * Q K^T and dO V^T, run vdpbf16ps on BF16 pairs (exact products, two sequentially rounded F32 FMAs per
 * pair, odd element first); P V, dS K, dS^T Q and P^T dO have F32 probabilities as one operand and stay
 * F32. vdpbf16ps reads BF16 subnormal inputs (and F32 subnormal accumulators) as zero, so the packers
 * flag blocks holding a subnormal BF16 (per query block and per 64-key chunk, the same chunks in forward
 * and backward, so both compute the same scores) and their tiles run the IEEE emulation (MK_DPX): the
 * subnormals count at their value. What remains is the flush of partial sums below 2^-126 (an absolute
 * error under 2^-126 per pair step, invisible at the tolerance of any non-underflowing score).
 * ---------------------------------------------------------------------------------------------- */

static size_t esize(kind kd) { return kd == K_F32 ? 4 : 2; }

/* Up to 16 elements at p (n valid, the rest 0) as F32 (exact). */
AI __m512 load16(kind kd, const void *p, int64_t n) {
    if (kd == K_F32) return _mm512_maskz_loadu_ps(m16(n), p);
    __m256i h = _mm256_maskz_loadu_epi16(m16(n), p);
    if (kd == K_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Up to 16 BF16 pairs (n elements valid; an odd tail is padded with +0) and whether one is subnormal. */
AI __m512 load_pairs(const void *p, int64_t n, __mmask32 *sub) {
    __m512i w = _mm512_maskz_loadu_epi16(m32(n), p);
    *sub |= bf16_subnormal(w);
    return _mm512_castsi512_ps(w);
}

/* dst (n) F32 = src (n) widened. */
static void widen(kind kd, float *dst, const void *src, int64_t n) {
    size_t es = esize(kd);
    for (int64_t i = 0; i < n; i += 16)
        _mm512_mask_storeu_ps(dst + i, m16(n - i), load16(kd, (const unsigned char *)src + (size_t)i * es, n - i));
}

/* dst (rows, ceil(nel / 2)) words = BF16 pairs of src (rows, nel); true when a value is subnormal. */
static bool pack_rows_dp(float *dst, const uint16_t *src, int64_t rows, int64_t nel) {
    int64_t nw = ceil_div(nel, 2);
    __mmask32 sub = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t w = 0; w < nw; w += 16)
            _mm512_mask_storeu_ps(dst + r * nw + w, m16(nw - w), load_pairs(src + r * nel + 2 * w, nel - 2 * w, &sub));
    return sub != 0;
}

/* dst (words x lanes, rows BQ floats apart) = src (nrow rows ld elements apart, nel elements each)
 * transposed: F32 widened from kd, or BF16 pairs (K_BF16DP, ceil(nel / 2) words). Lanes nrow .. up to the
 * next multiple of 16 are 0. Returns whether a BF16 pair holds a subnormal. */
static bool pack_t(kind kd, const void *src, int64_t ld, int64_t nrow, int64_t nel, float *dst) {
    size_t es = esize(kd);
    int epw = kd == K_BF16DP ? 2 : 1;
    int64_t nw = ceil_div(nel, epw);
    __mmask32 sub = 0;
    /* the block comes from memory (read once per pass): ask for all its lines before the transposes */
    for (int64_t i = 0; i < nrow; i++)
        for (int64_t e = 0; e < nel * (int64_t)es; e += 64)
            _mm_prefetch((const char *)src + (size_t)(i * ld) * es + (size_t)e, _MM_HINT_T0);
    for (int64_t i0 = 0; i0 < nrow; i0 += 16)
        for (int64_t w0 = 0; w0 < nw; w0 += 16) {
            __m512 r[16];
            for (int l = 0; l < 16; l++) {
                if (i0 + l >= nrow) {
                    r[l] = _mm512_setzero_ps();
                    continue;
                }
                const unsigned char *p = (const unsigned char *)src + (size_t)((i0 + l) * ld + w0 * epw) * es;
                r[l] = kd == K_BF16DP ? load_pairs(p, nel - w0 * epw, &sub) : load16(kd, p, nel - w0 * epw);
            }
            transpose16(r);
            for (int64_t t = 0; t < min64(16, nw - w0); t++) _mm512_storeu_ps(dst + (w0 + t) * BQ + i0, r[t]);
        }
    return sub != 0;
}

/* ------------------------------------------------------------------------------------------------
 * Jobs and scratch slots
 * ---------------------------------------------------------------------------------------------- */

typedef struct job {
    const ampci_attn *a;
    kind kd;
    const unsigned char *q, *k, *v, *go; /* the inputs, as bytes */
    float *o, *stats;                    /* forward */
    const float *stats_in;               /* backward */
    float *gq, *gk, *gv;
    int64_t nqb; /* query blocks per head */
    float *mem;  /* nslots slots of slot_floats */
    size_t slot_floats;
    atomic_int *busy;
    int nslots;
} job;

/* A free scratch slot (its index in *slot, released with atomic_store(&busy[slot], 0)). */
static float *slot_buffer(job *j, int *slot) {
    *slot = take_slot(j->busy, j->nslots);
    return j->mem + (size_t)*slot * j->slot_floats;
}

/* ------------------------------------------------------------------------------------------------
 * Forward: one (head, query block) task walks the key chunks up to the block's last visible key (causal:
 * chunks wholly above the diagonal are never visited, nor, in the diagonal chunk, micro-tile vectors
 * wholly above it); masked scores are -inf and get probability exactly 0. O^T accumulates exp(s - m) v
 * and is divided by the sum at the end (as FlashAttention does), so it needs Tk max|v| < FLT_MAX where
 * the ref kernel, normalising first, needs only max|v| < FLT_MAX. In the diagonal chunk a key beyond a
 * query contributes 0 * v: finite unless that v is inf or NaN (which the ref kernel would not read).
 * ---------------------------------------------------------------------------------------------- */

/* Scores of keys [j0, j0 + jn) (st rows) for the block's lanes: scale, causal mask (-inf), column max;
 * then the online softmax: m' = max(m, chunk max), alpha = exp(m - m'), P = exp(s - m') in place,
 * l = l alpha + sum_j P (keys in order). */
static void fw_softmax(float *st, int64_t jn, int64_t nvq, int64_t diag, bool causal, float scale, __m512 *m, __m512 *l,
                       __m512 *alpha) {
    __m512 mx[NV], sum[NV], vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int64_t v = 0; v < nvq; v++) mx[v] = ninf, sum[v] = _mm512_setzero_ps();
    for (int64_t r = 0; r < jn; r++)
        for (int64_t v = 0; v < nvq; v++) {
            float *p = st + r * BQ + 16 * v;
            __m512 s = _mm512_mul_ps(_mm512_loadu_ps(p), vs);
            if (causal) s = _mm512_mask_blend_ps(att_causal_lanes(r + diag - 16 * v), ninf, s);
            _mm512_storeu_ps(p, s);
            mx[v] = _mm512_max_ps(mx[v], s);
        }
    for (int64_t v = 0; v < nvq; v++) {
        __m512 mn = _mm512_max_ps(m[v], mx[v]);
        alpha[v] = vf_exp(_mm512_sub_ps(m[v], mn));
        m[v] = mn;
    }
    for (int64_t r = 0; r < jn; r++)
        for (int64_t v = 0; v < nvq; v++) {
            float *p = st + r * BQ + 16 * v;
            __m512 e = vf_exp(_mm512_sub_ps(_mm512_loadu_ps(p), m[v]));
            _mm512_storeu_ps(p, e);
            sum[v] = _mm512_add_ps(sum[v], e);
        }
    for (int64_t v = 0; v < nvq; v++) l[v] = _mm512_fmadd_ps(l[v], alpha[v], sum[v]);
}

/* The forward's per-block state: the slot's buffers and the online softmax's lanes. */
typedef struct fw_state {
    float *qt;                      /* (D or pairs, BQ): Q^T of the block */
    float *ka, *va;                 /* (BK, D), (BK, Dv): a key chunk's k rows (widened or BF16 pairs) and v rows */
    float *st;                      /* (BK, BQ): S^T, then P^T, of the chunk */
    float *ot;                      /* (Dv, BQ): O^T, unnormalised */
    bool qsub;                      /* Q^T holds a subnormal BF16 */
    __m512 m[NV], l[NV], alpha[NV]; /* running max, running sum, this chunk's rescaling */
} fw_state;

/* Keys [j0, j0 + jn) of head h: S^T = K Q^T, the online softmax, O^T = O^T alpha + V^T P^T. */
static void fw_chunk(const job *j, fw_state *f, int64_t h, int64_t i0, int64_t nvq, int64_t j0, int64_t jn) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, Tk = a->Tk, Dw = j->kd == K_BF16DP ? ceil_div(D, 2) : D;
    size_t es = esize(j->kd);
    const unsigned char *kp = j->k + (size_t)((h * Tk + j0) * D) * es, *vp = j->v + (size_t)((h * Tk + j0) * Dv) * es;
    const float *kr = f->ka, *vr = f->va;
    mkind mkk = MK_F32;
    if (j->kd == K_F32) kr = (const float *)kp, vr = (const float *)vp;
    else if (j->kd != K_BF16DP) widen(j->kd, f->ka, kp, jn * D);
    else /* the whole BK chunk is checked for subnormals, as the backward does, so both take one path */
        mkk = pack_rows_dp(f->ka, (const uint16_t *)kp, min64(BK, Tk - j0), D) || f->qsub ? MK_DPX : MK_DP;
    mk g = {.K = Dw, .a = kr, .ars = Dw, .acs = 1, .b = f->qt, .ldb = BQ, .c = f->st, .ldc = BQ, .mlast = 0xffff};
    mk_run(mkk, &g, jn, nvq, a->causal ? j0 - i0 : NONE, NONE);
    fw_softmax(f->st, jn, nvq, j0 - i0, a->causal, (float)a->scale, f->m, f->l, f->alpha);
    if (j->kd != K_F32) widen(j->kd == K_BF16DP ? K_BF16W : j->kd, f->va, vp, jn * Dv);
    mk o = {.K = jn,
            .a = vr,
            .ars = 1,
            .acs = Dv,
            .b = f->st,
            .ldb = BQ,
            .c = f->ot,
            .ldc = BQ,
            .mlast = 0xffff,
            .mode = j0 == 0 ? MODE_SET : MODE_SCALE,
            .cs = f->alpha};
    mk_run(MK_F32, &o, Dv, nvq, NONE, NONE);
}

static void fw_block(const job *j, float *buf, int64_t h, int64_t i0) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, Tq = a->Tq, nq = min64(BQ, Tq - i0), nvq = ceil_div(nq, 16);
    int64_t Dw = j->kd == K_BF16DP ? ceil_div(D, 2) : D;
    fw_state f = {.qt = buf};
    f.ka = f.qt + fl16(Dw * BQ), f.va = f.ka + fl16(BK * D), f.st = f.va + fl16(BK * Dv), f.ot = f.st + BK * BQ;
    f.qsub = pack_t(j->kd, j->q + (size_t)((h * Tq + i0) * D) * esize(j->kd), D, nq, D, f.qt);
    for (int v = 0; v < NV; v++) f.m[v] = _mm512_set1_ps(-INFINITY), f.l[v] = _mm512_setzero_ps();
    int64_t kend = a->causal ? min64(i0 + nq, a->Tk) : a->Tk;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) fw_chunk(j, &f, h, i0, nvq, j0, min64(BK, kend - j0));
    int64_t r0 = h * Tq + i0; /* o rows of the block = O^T / l transposed; stats (m, 1 / l) per row */
    att_fw_finish(f.ot, f.m, f.l, Dv, nq, j->o + r0 * Dv, j->stats ? j->stats + 2 * r0 : NULL);
}

static void fw_range(void *arg, int64_t t0, int64_t t1, int64_t chunk) {
    (void)chunk;
    job *j = arg;
    int slot;
    float *buf = slot_buffer(j, &slot);
    for (int64_t t = t0; t < t1; t++) fw_block(j, buf, t / j->nqb, t % j->nqb * BQ);
    atomic_store(&j->busy[slot], 0);
}

/* ------------------------------------------------------------------------------------------------
 * Backward: one head per task, FlashAttention-2's equations with the query block outermost. Per block,
 * P^T (rebuilt from the stats) and dP^T = V dO^T of every visible key go to a (Tk x BQ) panel; then
 * D_i = sum_j P_ij dP_ij is a vertical sum over the panel (no recomputation: the backward is not given
 * o, and D_i = dO_i . o_i would need it rebuilt, i.e. the forward's two products again), dS = P (dP - D)
 * scale, dQ^T = K^T dS^T for the block, dK += dS^T Q and dV += P^T dO for the visible keys (each tile's
 * reduction starting at its first visible query). dK and dV sum over the query blocks in block order
 * inside the task. Scratch is O(Tk (BQ + D + Dv)) per task: linear in T like the ref kernel's.
 * ---------------------------------------------------------------------------------------------- */

typedef struct bw_bufs { /* a slot's scratch, per head */
    float *kf;           /* (Tk, D) F32 k rows, widened (F16, BF16; F32 inputs are read in place) */
    float *vf;           /* (Tk, Dv) F32 v rows, widened (F16, BF16 without vdpbf16ps) */
    float *kp, *vp;      /* (Tk, ceil(D/2)), (Tk, ceil(Dv/2)) BF16 pair words (vdpbf16ps) */
    bool *ksub, *vsub;   /* per BK chunk: holds a subnormal BF16 */
    float *pt, *dst;     /* (Tk, BQ) panels: P^T and dP^T, then dS^T */
    float *qt, *dot;     /* (D or pairs, BQ), (Dv or pairs, BQ): Q^T and dO^T of the block */
    float *qr, *dor;     /* (BQ, D), (BQ, Dv): F32 q and dO rows of the block (widened) */
    float *dqt;          /* (D, BQ) */
} bw_bufs;

/* Lays out a slot (base NULL: only sizes it); returns its size in floats. */
static size_t bw_carve(const job *j, float *base, bw_bufs *b) {
    const ampci_attn *a = j->a;
    int64_t Tk = a->Tk, D = a->D, Dv = a->Dv, nkc = ceil_div(Tk, BK);
    bool dp = j->kd == K_BF16DP, wide = j->kd == K_F16 || j->kd == K_BF16W, want_dp = j->gq || j->gk;
    size_t off = 0;
#define TAKE(field, n) (b->field = base ? base + off : NULL, off += fl16(n))
    TAKE(kf, wide || (dp && j->gq) ? Tk * D : 0), TAKE(vf, wide ? Tk * Dv : 0);
    TAKE(kp, dp ? Tk * ceil_div(D, 2) : 0), TAKE(vp, dp ? Tk * ceil_div(Dv, 2) : 0);
    TAKE(pt, Tk * BQ), TAKE(dst, want_dp ? Tk * BQ : 0), TAKE(qt, D * BQ), TAKE(dot, want_dp ? Dv * BQ : 0);
    TAKE(qr, BQ * D), TAKE(dor, BQ * Dv), TAKE(dqt, j->gq ? D * BQ : 0);
#undef TAKE
    b->ksub = base ? (bool *)(base + off) : NULL;
    b->vsub = base ? b->ksub + nkc : NULL;
    return off + fl16(ceil_div(2 * nkc, 4));
}

/* The head's key side, once: F32 rows (F16/BF16 widened; F32 read in place) and BF16 pairs. */
static void bw_keys(const job *j, const bw_bufs *b, int64_t h) {
    const ampci_attn *a = j->a;
    int64_t Tk = a->Tk, D = a->D, Dv = a->Dv;
    size_t es = esize(j->kd);
    const unsigned char *k = j->k + (size_t)(h * Tk * D) * es, *v = j->v + (size_t)(h * Tk * Dv) * es;
    if (j->kd == K_F16 || j->kd == K_BF16W) widen(j->kd, b->kf, k, Tk * D), widen(j->kd, b->vf, v, Tk * Dv);
    if (j->kd != K_BF16DP) return;
    if (j->gq) widen(K_BF16W, b->kf, k, Tk * D);
    for (int64_t c = 0; c * BK < Tk; c++) {
        int64_t jn = min64(BK, Tk - c * BK);
        b->ksub[c] = pack_rows_dp(b->kp + c * BK * ceil_div(D, 2), (const uint16_t *)k + c * BK * D, jn, D);
        b->vsub[c] = pack_rows_dp(b->vp + c * BK * ceil_div(Dv, 2), (const uint16_t *)v + c * BK * Dv, jn, Dv);
    }
}

/* Panel rows [j0, j0 + jn): S^T into pt, turned into P^T = exp(s scale - m) inv (0 where masked); and
 * dP^T into dst when wanted. */
static void bw_chunk(const job *j, const bw_bufs *b, int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t jn,
                     const __m512 *m, const __m512 *inv, bool qsub, bool osub, bool want_dp) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, Tk = a->Tk, nvq = ceil_div(nq, 16), c = j0 / BK;
    int64_t vdiag = a->causal ? j0 - i0 : NONE;
    bool dp = j->kd == K_BF16DP, f32 = j->kd == K_F32;
    int64_t Dw = dp ? ceil_div(D, 2) : D, Dvw = dp ? ceil_div(Dv, 2) : Dv;
    const float *kr = dp ? b->kp + j0 * Dw : f32 ? (const float *)j->k + (h * Tk + j0) * D : b->kf + j0 * D;
    mk g = {
        .K = Dw, .a = kr, .ars = Dw, .acs = 1, .b = b->qt, .ldb = BQ, .c = b->pt + j0 * BQ, .ldc = BQ, .mlast = 0xffff};
    mk_run(!dp ? MK_F32 : qsub || b->ksub[c] ? MK_DPX : MK_DP, &g, jn, nvq, vdiag, NONE);
    __m512 vs = _mm512_set1_ps((float)a->scale);
    for (int64_t r = 0; r < jn; r++)
        for (int64_t v = 0; v < nvq; v++) {
            float *p = b->pt + (j0 + r) * BQ + 16 * v;
            __m512 e = vf_exp(_mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(p), vs), m[v]));
            _mm512_storeu_ps(p, _mm512_maskz_mul_ps(att_lanes(a->causal, j0 + r, i0, nq, v), e, inv[v]));
        }
    if (!want_dp) return;
    const float *vr = dp ? b->vp + j0 * Dvw : f32 ? (const float *)j->v + (h * Tk + j0) * Dv : b->vf + j0 * Dv;
    mk d = {.K = Dvw,
            .a = vr,
            .ars = Dvw,
            .acs = 1,
            .b = b->dot,
            .ldb = BQ,
            .c = b->dst + j0 * BQ,
            .ldc = BQ,
            .mlast = 0xffff};
    mk_run(!dp ? MK_F32 : osub || b->vsub[c] ? MK_DPX : MK_DP, &d, jn, nvq, vdiag, NONE);
}

/* dS^T = P^T (dP^T - D) scale over panel rows [0, kend), D_i = sum_j P_ij dP_ij (keys in order); masked
 * and skipped entries are read as 0. */
static void bw_ds(const job *j, const bw_bufs *b, int64_t i0, int64_t nq, int64_t kend) {
    const ampci_attn *a = j->a;
    int64_t nvq = ceil_div(nq, 16);
    __m512 di[NV], vs = _mm512_set1_ps((float)a->scale);
    for (int64_t v = 0; v < nvq; v++) di[v] = _mm512_setzero_ps();
    for (int64_t r = 0; r < kend; r++)
        for (int64_t v = 0; v < nvq; v++) {
            __mmask16 mk = att_lanes(a->causal, r, i0, nq, v);
            __m512 p = _mm512_maskz_loadu_ps(mk, b->pt + r * BQ + 16 * v);
            di[v] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(mk, b->dst + r * BQ + 16 * v), di[v]);
        }
    for (int64_t r = 0; r < kend; r++)
        for (int64_t v = 0; v < nvq; v++) {
            __mmask16 mk = att_lanes(a->causal, r, i0, nq, v);
            float *d = b->dst + r * BQ + 16 * v;
            __m512 p = _mm512_maskz_loadu_ps(mk, b->pt + r * BQ + 16 * v);
            __m512 x = _mm512_mul_ps(p, _mm512_sub_ps(_mm512_maskz_loadu_ps(mk, d), di[v]));
            _mm512_storeu_ps(d, _mm512_maskz_mul_ps(mk, x, vs));
        }
}

/* dK (or dV) rows [0, kend) of a head (gx) += panel^T (kend x nq) times the block's rows of q (or dO),
 * src (nq, n) of the inputs' dtype (widened into buf unless F32). */
static void bw_accumulate(const job *j, float *gx, const float *panel, const unsigned char *src, float *buf, int64_t n,
                          int64_t i0, int64_t nq, int64_t kend) {
    const float *rows = (const float *)src;
    if (j->kd != K_F32) widen(j->kd == K_BF16DP ? K_BF16W : j->kd, buf, src, nq * n), rows = buf;
    mk g = {.K = nq,
            .a = panel,
            .ars = BQ,
            .acs = 1,
            .b = rows,
            .ldb = n,
            .c = gx,
            .ldc = n,
            .mlast = m16(n - 16 * (ceil_div(n, 16) - 1)),
            .mode = MODE_ADD};
    mk_run(MK_F32, &g, kend, ceil_div(n, 16), NONE, j->a->causal ? -i0 : NONE);
}

/* gq rows [r0, r0 + nq) = (K^T dS^T)^T over keys [0, kend) of head h (dS holds the scale). */
static void bw_dq(const job *j, const bw_bufs *b, int64_t h, int64_t r0, int64_t nq, int64_t kend) {
    int64_t D = j->a->D;
    const float *kf = j->kd == K_F32 ? (const float *)j->k + h * j->a->Tk * D : b->kf;
    mk g = {.K = kend, .a = kf, .ars = 1, .acs = D, .b = b->dst, .ldb = BQ, .c = b->dqt, .ldc = BQ, .mlast = 0xffff};
    mk_run(MK_F32, &g, D, ceil_div(nq, 16), NONE, NONE);
    att_unpack_t(b->dqt, D, nq, NULL, j->gq + r0 * D, D);
}

/* One query block [i0, i0 + nq) of head h: the panel, dS, then dQ of the block and its dK, dV terms. */
static void bw_block(const job *j, const bw_bufs *b, int64_t h, int64_t i0) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, r0 = h * a->Tq + i0, nq = min64(BQ, a->Tq - i0), Tk = a->Tk;
    size_t es = esize(j->kd);
    const unsigned char *q = j->q + (size_t)(r0 * D) * es, *go = j->go + (size_t)(r0 * Dv) * es;
    bool qsub = pack_t(j->kd, q, D, nq, D, b->qt), osub = pack_t(j->kd, go, Dv, nq, Dv, b->dot);
    __m512 m[NV], inv[NV];
    att_stats_lanes(j->stats_in + 2 * r0, nq, m, inv);
    int64_t kend = a->causal ? min64(i0 + nq, Tk) : Tk;
    bool want_dp = j->gq || j->gk;
    for (int64_t j0 = 0; j0 < kend; j0 += BK)
        bw_chunk(j, b, h, i0, nq, j0, min64(BK, kend - j0), m, inv, qsub, osub, want_dp);
    if (want_dp) bw_ds(j, b, i0, nq, kend);
    if (j->gq) bw_dq(j, b, h, r0, nq, kend);
    if (j->gk) bw_accumulate(j, j->gk + h * Tk * D, b->dst, q, b->qr, D, i0, nq, kend);
    if (j->gv) bw_accumulate(j, j->gv + h * Tk * Dv, b->pt, go, b->dor, Dv, i0, nq, kend);
}

static void bw_range(void *arg, int64_t h0, int64_t h1, int64_t chunk) {
    (void)chunk;
    job *j = arg;
    const ampci_attn *a = j->a;
    int slot;
    bw_bufs b;
    bw_carve(j, slot_buffer(j, &slot), &b);
    for (int64_t h = h0; h < h1; h++) {
        if (j->gk) memset(j->gk + h * a->Tk * a->D, 0, (size_t)(a->Tk * a->D) * sizeof(float));
        if (j->gv) memset(j->gv + h * a->Tk * a->Dv, 0, (size_t)(a->Tk * a->Dv) * sizeof(float));
        bw_keys(j, &b, h);
        for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) bw_block(j, &b, h, i0);
    }
    atomic_store(&j->busy[slot], 0);
}

/* ------------------------------------------------------------------------------------------------
 * Entry points. Tasks go through ampc_parallel_for (forward: (head, query block), backward: heads); a
 * task takes one of min(threads, tasks) scratch slots, and which one never changes the arithmetic: every
 * output element is computed by one task in a fixed order, whatever the thread count.
 * ---------------------------------------------------------------------------------------------- */

/* Allocates min(threads, n) slots of slot_floats and runs fn over [0, n) (on the calling thread when the
 * call does less than SERIAL_WORK multiply-adds). */
static ampc_status run(ampc_ctx *ctx, job *j, int64_t n, size_t slot_floats, ampc_parallel_fn fn, const char *what) {
    const ampci_attn *a = j->a;
    double work = (double)a->BH * (double)a->Tq * (double)a->Tk * (double)(a->D + a->Dv);
    int threads = work < SERIAL_WORK ? 1 : ampc_ctx_threads(ctx);
    j->nslots = (int)min64(threads, n);
    j->slot_floats = fl16((int64_t)slot_floats);
    size_t bytes = (size_t)j->nslots * (j->slot_floats * sizeof(float) + 64);
    unsigned char *mem = ampci_alloc(ctx, bytes, what);
    if (!mem) return AMPC_STATUS_OOM;
    j->mem = (float *)mem;
    j->busy = (atomic_int *)(j->mem + (size_t)j->nslots * j->slot_floats);
    for (int i = 0; i < j->nslots; i++) atomic_init(&j->busy[i], 0);
    if (threads == 1) fn(j, 0, n, 0);
    else ampc_parallel_for(ctx, n, 1, fn, j);
    ampci_free(ctx, mem, bytes);
    return AMPC_OK;
}

static job make_job(const ampci_attn *a, bool bf16dp) {
    AMPCI_ASSERT(a->dt == AMPC_DTYPE_F32 || a->dt == AMPC_DTYPE_F16 || a->dt == AMPC_DTYPE_BF16); /* the op's */
    kind kd = a->dt == AMPC_DTYPE_F32 ? K_F32 : a->dt == AMPC_DTYPE_F16 ? K_F16 : bf16dp ? K_BF16DP : K_BF16W;
    return (job){.a = a, .kd = kd, .q = a->q, .k = a->k, .v = a->v, .nqb = ceil_div(a->Tq, BQ)};
}

/* o: (BH, Tq, Dv) F32; stats: (BH, Tq, 2) F32 or NULL; q (BH, Tq, D), k (BH, Tk, D), v (BH, Tk, Dv) of dt */
static ampc_status attention_fw(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats, bool bf16dp) {
    if (a->BH == 0 || a->Tq == 0) return AMPC_OK;
    if (a->Tk == 0) { /* no key: o = 0, as the ref kernel (m = -inf, 1 / sum = 0) */
        memset(o, 0, (size_t)(a->BH * a->Tq * a->Dv) * sizeof(float));
        for (int64_t r = 0; stats && r < a->BH * a->Tq; r++) stats[2 * r] = -INFINITY, stats[2 * r + 1] = 0.0f;
        return AMPC_OK;
    }
    job j = make_job(a, bf16dp);
    j.o = o, j.stats = stats;
    int64_t Dw = j.kd == K_BF16DP ? ceil_div(a->D, 2) : a->D;
    size_t slot = fl16(Dw * BQ) + fl16(BK * a->D) + fl16(BK * a->Dv) + BK * BQ + fl16(a->Dv * BQ);
    return run(ctx, &j, a->BH * j.nqb, slot, fw_range, "attention (avx512) scratch");
}

/* gq, gk, gv: F32, the shapes of q, k, v, each NULL = not wanted; go (BH, Tq, Dv) of dt; stats from the
 * forward */
static ampc_status attention_bw(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go, float *gq,
                                float *gk, float *gv, bool bf16dp) {
    if (a->BH == 0 || (!gq && !gk && !gv)) return AMPC_OK;
    if (a->Tk == 0) {
        if (gq) memset(gq, 0, (size_t)(a->BH * a->Tq * a->D) * sizeof(float));
        return AMPC_OK;
    }
    job j = make_job(a, bf16dp);
    j.stats_in = stats, j.go = go, j.gq = gq, j.gk = gk, j.gv = gv;
    bw_bufs b;
    return run(ctx, &j, a->BH, bw_carve(&j, NULL, &b), bw_range, "attention backward (avx512) scratch");
}

ampc_status ampc_k_attention__avx512(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats) {
    return attention_fw(ctx, a, o, stats, false);
}
ampc_status ampc_k_attention_bw__avx512(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go,
                                        float *gq, float *gk, float *gv) {
    return attention_bw(ctx, a, stats, go, gq, gk, gv, false);
}
ampc_status ampc_k_attention__avx512bf16(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats) {
    return attention_fw(ctx, a, o, stats, true);
}
ampc_status ampc_k_attention_bw__avx512bf16(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go,
                                            float *gq, float *gk, float *gv) {
    return attention_bw(ctx, a, stats, go, gq, gk, gv, true);
}
