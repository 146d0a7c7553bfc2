/* attention_amx.c: fused ("flash") scaled dot-product attention on the AMX tiles, forward and backward,
 * behind the kernel table's attention slots (entries in gemm_amx.c's table). BF16 inputs only take the
 * tiles; F32 and F16 inputs run attention_avx512.c's kernel (its F32 FMA path: the cell is one for every
 * dtype). The structure is attention_avx512.c's: 64-query blocks whose queries are the columns of every
 * product, so the softmax is per lane; the forward walks 64-key chunks with an online softmax and skips
 * causal chunks, micro-tiles and k-steps that hold no visible score; the backward is FlashAttention-2's,
 * one head per task with the query blocks outermost, so dK and dV sum in a fixed order; stats mean what the
 * ref kernel's do (m, the row max of the scaled scores; 1 / sum exp(s - m)). Results never depend on the
 * thread count: each output element is computed by one task in a fixed order.
 *
 * The six products and their operands, packed per call into 16 x 16 tiles (amx_tile.h's configuration: A
 * 16 rows x 32 BF16, B 16 pair-rows x 16 columns in VNNI order, C 16 x 16 F32), every edge zero-padded:
 *   S^T  = K Q^T     C keys x queries    A: k rows               B: Q^T (words of q rows, transposed)
 *   O^T  = V^T P^T   C Dv x queries      A: V^T (pairs of v rows, transposed)   B: P^T (pairs of key rows)
 *   dP^T = V dO^T    C keys x queries    A: v rows               B: dO^T
 *   dQ^T = K^T dS^T  C D x queries       A: K^T                  B: dS^T (pairs of key rows)
 *   dK  += dS^T Q    C keys x D          A: dS^T rows            B: Q (pairs of query rows)
 *   dV  += P^T dO    C keys x Dv         A: P^T rows             B: dO (pairs of query rows)
 * A micro-tile is 2 x 2 C tiles (tmm0-3) fed by two A (tmm4-5) and two B tiles (tmm6-7); between calls C
 * waits in F32 buffers (loaded and stored exactly), so each element is one chain of tile instructions.
 *
 * Probabilities. The contract keeps scores and probabilities F32, so the F32 operands P and dS (never
 * rounded to BF16) go to the tiles as three BF16 parts, x = h1 + h2 + h3 (h1 = x with its low 16 bits
 * cleared, h2 likewise of x - h1, h3 of the rest: exact, since each remainder is exact and the last has at
 * most 8 significant bits), and each product with them is three tile passes. Only parts below 2^-126 are
 * lost (the tiles read BF16 subnormals as 0): under 2^-125 per value.
 *
 * Arithmetic and exact path. tdpbf16ps multiplies BF16 pairs exactly, sums the 16 even and the 16 odd
 * products of a k-step in two F32 FMA chains from +0 and adds (even + odd) into C, with DAZ and FTZ (see
 * gemm_amx.c). A BF16 subnormal input would count as 0 (and inf * subnormal as NaN), unlike the ref and
 * avx512 kernels, so the packers flag the 64-key chunks of k and v and the query blocks of q and dO that
 * hold one, and every product reading a flagged operand computes that call with tdp_exact: the same
 * chains in IEEE FMAs, no DAZ, no FTZ. The flags and chunks are the same in forward and backward, so both
 * compute the same scores. What remains is FTZ of partial sums below 2^-126 on the tile path (at most 34
 * per tile instruction, each under 2^-126).
 *
 * Error against exact arithmetic (for the test's derivation, tests/test_attention_fast.c), u = 2^-24:
 * a dot product of n BF16 pairs passes through at most 17 + ceil(n / 32) roundings (16 FMAs, even + odd,
 * the add into C per k-step) instead of the avx512 kernel's n; a sum of n terms p x with p split in three
 * parts through at most 17 + 3 ceil(n / 32), plus 2^-125 sum |x| for lost parts; FTZ adds 34 2^-126 per
 * tile instruction. The softmax (exp, online rescaling, sums) is the avx512 kernel's, step by step.
 *
 * Everything but the tile instructions goes through ../avx512/attention_vec.h (the vector layer and the
 * helpers this kernel shares with attention_avx512.c), so the emulated build (tests/test_amx.c,
 * tests/test_attention_fast.c: AMPCI_AMX_EMULATE, entries named ..._emu, F32 and F16 sent to the ref
 * kernel) runs this very code on any x86-64, and where AMX exists must give the native bits. */
#include "../driver_util.h"
#include "amx_tile.h"
#include "../avx512/attention_vec.h"

#include <stdatomic.h>

#ifndef AMPCI_AMX_EMULATE
#include "../avx512/kernels_avx512.h"
#define ATT_NAME(name) name
#define OTHER_FW ampc_k_attention__avx512
#define OTHER_BW ampc_k_attention_bw__avx512
/* gcc 12's tilestored has no memory operand: make its stores visible to the vector code that reads C */
#define STORE_FENCE() AMX_BARRIER()
#else
#include "../ref/kernels_ref.h"
#define ATT_NAME(name) name##_emu
#define OTHER_FW ampc_k_attention__ref
#define OTHER_BW ampc_k_attention_bw__ref
#define STORE_FENCE() ((void)0)
#endif

#define BQ ATT_BQ /* queries per block: the columns of every product, 4 groups of 16 */
#define BK 64     /* keys per forward chunk, and the granule of the subnormal flags */
#define TW 512    /* BF16 per tile: 16 rows of 32 (64 bytes, the tile-load stride) */
#define NONE INT64_MIN
#define SERIAL_WORK (1 << 22) /* multiply-adds below which a call stays on the calling thread */

#define AI __attribute__((always_inline)) static inline

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* ------------------------------------------------------------------------------------------------
 * Products. A packed operand: tile (group g, k-step t, part p) at p + ((g kt + t) parts + p) TW. C tile
 * (g, h) of a product is at c + 16 g ldc + 16 h. Causal skips (NONE: none), for micro-tiles of rows
 * [16 g, 16 (g + ng)) and columns [16 h, 16 (h + nh)):
 *   cdiag = (key of C row 0) - (query of C column 0): skip a micro-tile whose every key lies beyond every
 *           query (its C stays unwritten: the caller masks it);
 *   kq    = (key of reduction step 0) - (query of C column 0): stop before the k-steps whose keys lie
 *           beyond every query of the micro-tile (their P or dS are exact zeros);
 *   qk    = (query of reduction step 0) - (key of C row 0): start at the first k-step with a query at or
 *           beyond a key of the micro-tile.
 * ---------------------------------------------------------------------------------------------- */
typedef struct tiles {
    const uint16_t *p;
    int64_t kt; /* k-steps per group */
    int parts;
} tiles;

typedef struct mm {
    tiles a, b;
    float *c;
    int64_t ldc, mg, ng, kt; /* C row stride (floats), row and column groups, k-steps */
    bool acc;                /* C += A B (else C = A B) */
    bool exact;              /* an operand holds a BF16 subnormal: tdp_exact */
    int64_t cdiag, kq, qk;
} mm;

AI const uint16_t *tile_at(tiles x, int64_t g, int64_t t, int part) {
    return x.p + (size_t)((g * x.kt + t) * x.parts + part) * TW;
}

#define LD_A(pa)                                                                                                       \
    do {                                                                                                               \
        AMX_LOAD(4, tile_at(m->a, g, t, pa), 64);                                                                      \
        if (ng == 2) AMX_LOAD(5, tile_at(m->a, g + 1, t, pa), 64);                                                     \
    } while (0)
#define LD_B(pb)                                                                                                       \
    do {                                                                                                               \
        AMX_LOAD(6, tile_at(m->b, h, t, pb), 64);                                                                      \
        if (nh == 2) AMX_LOAD(7, tile_at(m->b, h + 1, t, pb), 64);                                                     \
    } while (0)
#define DP4()                                                                                                          \
    do {                                                                                                               \
        AMX_DPBF16(0, 4, 6);                                                                                           \
        if (nh == 2) AMX_DPBF16(1, 4, 7);                                                                              \
        if (ng == 2) AMX_DPBF16(2, 5, 6);                                                                              \
        if (ng == 2 && nh == 2) AMX_DPBF16(3, 5, 7);                                                                   \
    } while (0)

/* One micro-tile over k-steps [t0, t1): the operand with more parts is reloaded per part, the other once
 * per k-step (the order of the passes is the exact path's). */
AI void ukr_body(const int ng, const int nh, const mm *m, int64_t g, int64_t h, int64_t t0, int64_t t1) {
    float *c = m->c + 16 * g * m->ldc + 16 * h;
    const int64_t st = m->ldc * 4, down = 16 * m->ldc;
    if (m->acc) {
        AMX_LOAD(0, c, st);
        if (nh == 2) AMX_LOAD(1, c + 16, st);
        if (ng == 2) AMX_LOAD(2, c + down, st);
        if (ng == 2 && nh == 2) AMX_LOAD(3, c + down + 16, st);
    } else {
        AMX_ZERO(0);
        if (nh == 2) AMX_ZERO(1);
        if (ng == 2) AMX_ZERO(2);
        if (ng == 2 && nh == 2) AMX_ZERO(3);
    }
    for (int64_t t = t0; t < t1; t++) {
        if (m->a.parts >= m->b.parts) {
            for (int pb = 0; pb < m->b.parts; pb++) {
                LD_B(pb);
                for (int pa = 0; pa < m->a.parts; pa++) {
                    LD_A(pa);
                    DP4();
                }
            }
        } else {
            for (int pa = 0; pa < m->a.parts; pa++) {
                LD_A(pa);
                for (int pb = 0; pb < m->b.parts; pb++) {
                    LD_B(pb);
                    DP4();
                }
            }
        }
    }
    AMX_STORE(0, c, st);
    if (nh == 2) AMX_STORE(1, c + 16, st);
    if (ng == 2) AMX_STORE(2, c + down, st);
    if (ng == 2 && nh == 2) AMX_STORE(3, c + down + 16, st);
    STORE_FENCE();
}

typedef void (*ukr_fn)(const mm *m, int64_t g, int64_t h, int64_t t0, int64_t t1);
#define DEF_UKR(NG, NH)                                                                                                \
    static void ukr_##NG##NH(const mm *m, int64_t g, int64_t h, int64_t t0, int64_t t1) {                              \
        ukr_body(NG, NH, m, g, h, t0, t1);                                                                             \
    }
DEF_UKR(1, 1)
DEF_UKR(1, 2)
DEF_UKR(2, 1)
DEF_UKR(2, 2)
static const ukr_fn g_ukr[2][2] = {{ukr_11, ukr_12}, {ukr_21, ukr_22}};

AI float bf16v(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* tdpbf16ps in IEEE arithmetic (no DAZ, no FTZ): c (16 x 16, rows ldc apart) += a b, each element as the
 * instruction orders it: the even and the odd products of the 16 pairs in two FMA chains from +0, then
 * c + (even + odd). */
static void tdp_exact(float *c, int64_t ldc, const uint16_t *a, const uint16_t *b) {
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float ev = 0.0f, od = 0.0f;
            for (int k = 0; k < 16; k++) {
                ev = fmaf(bf16v(a[r * 32 + 2 * k]), bf16v(b[k * 32 + 2 * n]), ev);
                od = fmaf(bf16v(a[r * 32 + 2 * k + 1]), bf16v(b[k * 32 + 2 * n + 1]), od);
            }
            c[r * ldc + n] = c[r * ldc + n] + (ev + od);
        }
}

static void ukr_exact(const mm *m, int64_t g, int ng, int64_t h, int nh, int64_t t0, int64_t t1) {
    bool a_inner = m->a.parts >= m->b.parts;
    int outer = a_inner ? m->b.parts : m->a.parts, inner = a_inner ? m->a.parts : m->b.parts;
    for (int gg = 0; gg < ng; gg++)
        for (int hh = 0; hh < nh; hh++) {
            float *c = m->c + 16 * (g + gg) * m->ldc + 16 * (h + hh);
            for (int r = 0; !m->acc && r < 16; r++) memset(c + r * m->ldc, 0, 16 * sizeof(float));
            for (int64_t t = t0; t < t1; t++)
                for (int o = 0; o < outer; o++)
                    for (int i = 0; i < inner; i++)
                        tdp_exact(c, m->ldc, tile_at(m->a, g + gg, t, a_inner ? i : o),
                                  tile_at(m->b, h + hh, t, a_inner ? o : i));
        }
}

/* C = (or +=) A B over the micro-tiles, with the causal skips. */
static void mm_run(const mm *m) {
    for (int64_t g = 0; g < m->mg; g += 2) {
        int ng = (int)min64(2, m->mg - g);
        for (int64_t h = 0; h < m->ng; h += 2) {
            int nh = (int)min64(2, m->ng - h);
            if (m->cdiag != NONE && 16 * g + m->cdiag > 16 * (h + nh) - 1) continue;
            int64_t t0 = 0, t1 = m->kt;
            if (m->kq != NONE) t1 = clamp64(floor_div(16 * (h + nh) - 1 - m->kq, 32) + 1, 0, m->kt);
            if (m->qk != NONE) t0 = clamp64(-floor_div(-(16 * g - 31 - m->qk), 32), 0, m->kt);
            if (t0 >= t1 && m->acc) continue;
            if (m->exact) ukr_exact(m, g, ng, h, nh, t0, t1);
            else g_ukr[ng - 1][nh - 1](m, g, h, t0, t1);
        }
    }
}

/* ------------------------------------------------------------------------------------------------
 * Packing. Sources are BF16 rows `ld` elements apart; each packer writes whole zero-padded tiles and
 * returns whether a value it read is a BF16 subnormal. F32 probabilities go to tiles as three parts.
 * ---------------------------------------------------------------------------------------------- */

/* A tiles of rows [0, nrow) (group g: rows 16 g.., k-step t: elements 32 t..; nel elements). */
static bool pack_a_rows(uint16_t *dst, int64_t kt, const uint16_t *src, int64_t ld, int64_t nrow, int64_t nel) {
    bool sub = false;
    for (int64_t r = 0; r < 16 * ceil_div(nrow, 16); r++)
        for (int64_t t = 0; t < kt; t++) {
            vi w = r < nrow ? vi_load_pairs(src + r * ld + 32 * t, nel - 32 * t) : vi_zero();
            sub |= vi_bf16_subnormal(w);
            vi_store(dst + (size_t)((r / 16 * kt + t) * TW + r % 16 * 32), w);
        }
    return sub;
}

/* B tiles of the transpose of rows [0, nrow) (column group h: rows 16 h..; k-step t: elements 32 t..):
 * row p of a tile holds word p (elements 32 t + 2p, + 1) of 16 rows. */
static bool pack_b_t(uint16_t *dst, int64_t kt, const uint16_t *src, int64_t ld, int64_t nrow, int64_t nel) {
    bool sub = false;
    for (int64_t h = 0; h < ceil_div(nrow, 16); h++)
        for (int64_t t = 0; t < kt; t++) {
            vi w[16];
            for (int l = 0; l < 16; l++) {
                int64_t r = 16 * h + l;
                w[l] = r < nrow ? vi_load_pairs(src + r * ld + 32 * t, nel - 32 * t) : vi_zero();
                sub |= vi_bf16_subnormal(w[l]);
            }
            vi_transpose(w);
            for (int p = 0; p < 16; p++) vi_store(dst + (size_t)((h * kt + t) * TW + p * 32), w[p]);
        }
    return sub;
}

/* The words (src[r][e], src[r + 1][e]) of 16 elements e from e0 (rows from nrow on and elements from nel
 * on are zero). */
AI vi pair_words(const uint16_t *src, int64_t ld, int64_t r, int64_t nrow, int64_t e0, int64_t nel) {
    vi x = r < nrow ? vi_load_h16(src + r * ld + e0, nel - e0) : vi_zero();
    vi y = r + 1 < nrow ? vi_load_h16(src + (r + 1) * ld + e0, nel - e0) : vi_zero();
    return vi_or(x, vi_sll16(y));
}

/* B tiles with the rows as the reduction (column group h: elements 16 h..; k-step t: rows 32 t..): row p
 * of a tile holds the words (src[32 t + 2p][e], src[32 t + 2p + 1][e]). */
static void pack_b_rows(uint16_t *dst, int64_t kt, const uint16_t *src, int64_t ld, int64_t nrow, int64_t nel) {
    for (int64_t h = 0; h < ceil_div(nel, 16); h++)
        for (int64_t t = 0; t < kt; t++)
            for (int p = 0; p < 16; p++)
                vi_store(dst + (size_t)((h * kt + t) * TW + p * 32),
                         pair_words(src, ld, 32 * t + 2 * p, nrow, 16 * h, nel));
}

/* A tiles of the transpose (row group g: elements 16 g..; k-step t: rows 32 t..): pack_b_rows' words,
 * transposed so that a tile row holds the 16 words of one element. */
static bool pack_a_t(uint16_t *dst, int64_t kt, const uint16_t *src, int64_t ld, int64_t nrow, int64_t nel) {
    bool sub = false;
    for (int64_t g = 0; g < ceil_div(nel, 16); g++)
        for (int64_t t = 0; t < kt; t++) {
            vi w[16];
            for (int p = 0; p < 16; p++) {
                w[p] = pair_words(src, ld, 32 * t + 2 * p, nrow, 16 * g, nel);
                sub |= vi_bf16_subnormal(w[p]);
            }
            vi_transpose(w);
            for (int r = 0; r < 16; r++) vi_store(dst + (size_t)((g * kt + t) * TW + r * 32), w[r]);
        }
    return sub;
}

/* x = h[0] + h[1] + h[2]: F32 patterns with their low halves cleared (see the top); h[1] = h[2] = 0 where
 * x is not finite, so inf stays inf. */
AI void split3(vf x, vi h[3]) {
    vi a = vi_hi16(vi_of(x));
    vf r = vf_maskz(vi_finite(vi_of(x)), vf_sub(x, vf_of(a)));
    vi b = vi_hi16(vi_of(r));
    h[0] = a, h[1] = b, h[2] = vi_hi16(vi_of(vf_sub(r, vf_of(b))));
}

/* Keys r and r + 1 (x, y: 16 queries each) into the three B tiles of their k-step (pb: part 0's tile of the
 * query group and k-step) as row (r % 32) / 2. */
AI void put_pair(uint16_t *pb, int64_t r, vf x, vf y) {
    vi hx[3], hy[3];
    split3(x, hx), split3(y, hy);
    for (int part = 0; part < 3; part++)
        vi_store(pb + part * TW + r % 32 / 2 * 32, vi_or(vi_srl16(hx[part]), hy[part]));
}

/* Key r (x: queries 16 v..) into the three A tiles of its k-step (pa: part 0's tile of the key group and
 * k-step v / 2) as half v % 2 of row r % 16. */
AI void put_row(uint16_t *pa, int64_t r, int64_t v, vf x) {
    vi hx[3];
    split3(x, hx);
    for (int part = 0; part < 3; part++) vi_store_high(pa + part * TW + r % 16 * 32 + v % 2 * 16, hx[part]);
}

/* ------------------------------------------------------------------------------------------------
 * Jobs and scratch slots
 * ---------------------------------------------------------------------------------------------- */

typedef struct job {
    const ampci_attn *a;
    const uint16_t *q, *k, *v, *go;
    float *o, *stats;
    const float *stats_in;
    float *gq, *gk, *gv;
    int64_t nqb;      /* query blocks per head */
    int64_t ktd, ktv; /* k-steps of 32 over D and Dv */
    int64_t dg, dvg;  /* groups of 16 of D and Dv */
    unsigned char *mem;
    size_t slot_bytes;
    atomic_int *busy;
    int nslots;
} job;

/* Carving a slot: n elements of the pointer's type, each piece 64-byte aligned (base NULL: sizes only). */
#define TAKE(ptr, n)                                                                                                   \
    do {                                                                                                               \
        (ptr) = base ? (void *)(base + off) : NULL;                                                                    \
        off += ((size_t)(n) * sizeof *(ptr) + 63) / 64 * 64;                                                           \
    } while (0)

/* ------------------------------------------------------------------------------------------------
 * Forward: one (head, query block) task walks the key chunks up to the block's last visible key. Per
 * chunk: S^T = K Q^T; the online softmax (attention_avx512.c's, per lane), whose P^T = exp(s - m') goes
 * straight into B tiles as three parts; O^T = O^T alpha + V^T P^T (O^T rescaled in place where the max
 * rose, then accumulated by the tiles). At the end o = O^T / l, transposed.
 * ---------------------------------------------------------------------------------------------- */

typedef struct fw_state {
    uint16_t *qt, *kk, *vt, *pb; /* B Q^T (4 x ktd tiles), A K chunk (4 x ktd), A V^T (dvg x 2), B P^T (4 x 2 x 3) */
    float *st, *ot;              /* (BK, BQ) scores; (16 dvg, BQ) O^T, unnormalised */
    bool qsub;
    vf m[4], l[4], alpha[4]; /* running max, running sum, this chunk's rescaling */
} fw_state;

static size_t fw_carve(const job *j, unsigned char *base, fw_state *f) {
    size_t off = 0;
    TAKE(f->qt, 4 * j->ktd * TW);
    TAKE(f->kk, 4 * j->ktd * TW);
    TAKE(f->vt, j->dvg * 2 * TW);
    TAKE(f->pb, 4 * 2 * 3 * TW);
    TAKE(f->st, BK * BQ);
    TAKE(f->ot, 16 * j->dvg * BQ);
    return off;
}

/* Scores of keys [j0, j0 + jn) (st rows; lanes: queries from i0): scale, causal mask (-inf), the chunk
 * max; m' = max(m, chunk max), alpha = exp(m - m'); P^T = exp(s - m') into the B tiles (keys beyond jn up
 * to the k-step's end are 0), l = l alpha + sum_j P (keys in order). */
static void fw_softmax(const job *j, fw_state *f, int64_t i0, int64_t nqg, int64_t j0, int64_t jn) {
    const vf vs = vf_set1((float)j->a->scale), ninf = vf_set1(-INFINITY);
    vf mx[4], sum[4];
    for (int64_t v = 0; v < nqg; v++) mx[v] = ninf, sum[v] = vf_zero();
    for (int64_t r = 0; r < jn; r++)
        for (int64_t v = 0; v < nqg; v++) {
            float *p = f->st + r * BQ + 16 * v;
            vf s = vf_mul(vf_load(p), vs);
            if (j->a->causal) s = vf_blend(att_causal_lanes(j0 + r - i0 - 16 * v), ninf, s);
            vf_store(p, s);
            mx[v] = vf_max(mx[v], s);
        }
    for (int64_t v = 0; v < nqg; v++) {
        vf mn = vf_max(f->m[v], mx[v]);
        f->alpha[v] = vf_exp(vf_sub(f->m[v], mn));
        f->m[v] = mn;
    }
    for (int64_t r = 0; r < 32 * ceil_div(jn, 32); r += 2)
        for (int64_t v = 0; v < nqg; v++) {
            const float *p = f->st + r * BQ + 16 * v;
            vf e0 = r < jn ? vf_exp(vf_sub(vf_load(p), f->m[v])) : vf_zero();
            vf e1 = r + 1 < jn ? vf_exp(vf_sub(vf_load(p + BQ), f->m[v])) : vf_zero();
            sum[v] = vf_add(vf_add(sum[v], e0), e1);
            put_pair(f->pb + (size_t)((v * 2 + r / 32) * 3) * TW, r, e0, e1);
        }
    for (int64_t v = 0; v < nqg; v++) f->l[v] = vf_fmadd(f->l[v], f->alpha[v], sum[v]);
}

/* Keys [j0, j0 + jn) of head h for the block at i0 (nq queries). */
static void fw_chunk(const job *j, fw_state *f, int64_t h, int64_t i0, int64_t nq, int64_t j0, int64_t jn) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, nqg = ceil_div(nq, 16);
    /* the whole BK chunk is packed and checked, as the backward does, so both take the same path */
    bool ksub = pack_a_rows(f->kk, j->ktd, j->k + (h * a->Tk + j0) * D, D, min64(BK, a->Tk - j0), D);
    mm s = {.a = {f->kk, j->ktd, 1},
            .b = {f->qt, j->ktd, 1},
            .c = f->st,
            .ldc = BQ,
            .mg = ceil_div(jn, 16),
            .ng = nqg,
            .kt = j->ktd,
            .exact = ksub || f->qsub,
            .cdiag = a->causal ? j0 - i0 : NONE,
            .kq = NONE,
            .qk = NONE};
    mm_run(&s);
    fw_softmax(j, f, i0, nqg, j0, jn);
    bool vsub = pack_a_t(f->vt, 2, j->v + (h * a->Tk + j0) * Dv, Dv, jn, Dv);
    if (j0 > 0)
        for (int64_t v = 0; v < nqg; v++) {
            if (!vf_neq(f->alpha[v], vf_set1(1.0f))) continue; /* the max did not rise: alpha = 1 */
            for (int64_t r = 0; r < 16 * j->dvg; r++) {
                float *p = f->ot + r * BQ + 16 * v;
                vf_store(p, vf_mul(vf_load(p), f->alpha[v]));
            }
        }
    mm o = {.a = {f->vt, 2, 1},
            .b = {f->pb, 2, 3},
            .c = f->ot,
            .ldc = BQ,
            .mg = j->dvg,
            .ng = nqg,
            .kt = ceil_div(jn, 32),
            .acc = j0 > 0,
            .exact = vsub,
            .cdiag = NONE,
            .kq = a->causal ? j0 - i0 : NONE,
            .qk = NONE};
    mm_run(&o);
}

static void fw_block(const job *j, unsigned char *buf, int64_t h, int64_t i0) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, nq = min64(BQ, a->Tq - i0), r0 = h * a->Tq + i0;
    fw_state f;
    fw_carve(j, buf, &f);
    f.qsub = pack_b_t(f.qt, j->ktd, j->q + r0 * D, D, nq, D);
    for (int v = 0; v < 4; v++) f.m[v] = vf_set1(-INFINITY), f.l[v] = vf_zero();
    int64_t kend = a->causal ? min64(i0 + nq, a->Tk) : a->Tk;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) fw_chunk(j, &f, h, i0, nq, j0, min64(BK, kend - j0));
    att_fw_finish(f.ot, f.m, f.l, Dv, nq, j->o + r0 * Dv, j->stats ? j->stats + 2 * r0 : NULL);
}

static void fw_range(void *arg, int64_t t0, int64_t t1, int64_t chunk) {
    (void)chunk;
    job *j = arg;
    int slot = take_slot(j->busy, j->nslots);
    AMX_CONFIG(); /* tile state is per thread */
    for (int64_t t = t0; t < t1; t++) fw_block(j, j->mem + (size_t)slot * j->slot_bytes, t / j->nqb, t % j->nqb * BQ);
    AMX_RELEASE();
    atomic_store(&j->busy[slot], 0);
}

/* ------------------------------------------------------------------------------------------------
 * Backward: one head per task, FlashAttention-2's equations with the query block outermost, as
 * attention_avx512.c: per block, S^T and dP^T of every visible key go to (keys x BQ) panels, P^T is
 * rebuilt from the stats, D_i = sum_j P_ij dP_ij runs down the panel, dS = P (dP - D) scale; then dQ^T =
 * K^T dS^T for the block and dK += dS^T Q, dV += P^T dO into the head's F32 buffers (each tile's reduction
 * starting at its first visible query). The head's k, v and K^T tiles are packed once.
 * ---------------------------------------------------------------------------------------------- */

typedef struct bw_bufs {
    uint16_t *ka, *va, *kta;  /* A: k rows (tkg x ktd), v rows (tkg x ktv), K^T (dg x ktt) */
    bool *ksub, *vsub;        /* per BK chunk */
    float *gkb, *gvb;         /* (16 tkg, 16 dg), (16 tkg, 16 dvg): dK, dV */
    uint16_t *qt, *dot;       /* B: Q^T (4 x ktd), dO^T (4 x ktv) */
    uint16_t *qb, *dob;       /* B: q rows (dg x 2), dO rows (dvg x 2) */
    float *pt, *dst;          /* (32 ktt, BQ) panels: P^T; dP^T */
    uint16_t *dsb, *dsa, *pa; /* B dS^T (4 x ktt x 3); A dS^T, A P^T (tkg x 2 x 3) */
    float *dqt;               /* (16 dg, BQ) */
} bw_bufs;

static size_t bw_carve(const job *j, unsigned char *base, bw_bufs *b) {
    int64_t Tk = j->a->Tk, tkg = ceil_div(Tk, 16), ktt = ceil_div(Tk, 32), nkc = ceil_div(Tk, BK);
    size_t off = 0;
    TAKE(b->ka, tkg * j->ktd * TW);
    TAKE(b->va, tkg * j->ktv * TW);
    TAKE(b->kta, j->dg * ktt * TW);
    TAKE(b->ksub, nkc);
    TAKE(b->vsub, nkc);
    TAKE(b->gkb, 16 * tkg * 16 * j->dg);
    TAKE(b->gvb, 16 * tkg * 16 * j->dvg);
    TAKE(b->qt, 4 * j->ktd * TW);
    TAKE(b->dot, 4 * j->ktv * TW);
    TAKE(b->qb, j->dg * 2 * TW);
    TAKE(b->dob, j->dvg * 2 * TW);
    TAKE(b->pt, 32 * ktt * BQ);
    TAKE(b->dst, 32 * ktt * BQ);
    TAKE(b->dsb, 4 * ktt * 3 * TW);
    TAKE(b->dsa, tkg * 2 * 3 * TW);
    TAKE(b->pa, tkg * 2 * 3 * TW);
    TAKE(b->dqt, 16 * j->dg * BQ);
    return off;
}

/* The head's key side, once: k and v rows as A tiles (flags per BK chunk), K^T, and zeroed dK, dV. */
static void bw_keys(const job *j, const bw_bufs *b, int64_t h) {
    const ampci_attn *a = j->a;
    int64_t Tk = a->Tk, D = a->D, Dv = a->Dv;
    const uint16_t *k = j->k + h * Tk * D, *v = j->v + h * Tk * Dv;
    for (int64_t c = 0; c * BK < Tk; c++) {
        int64_t n = min64(BK, Tk - c * BK);
        b->ksub[c] = pack_a_rows(b->ka + (size_t)(4 * c * j->ktd * TW), j->ktd, k + c * BK * D, D, n, D);
        b->vsub[c] = pack_a_rows(b->va + (size_t)(4 * c * j->ktv * TW), j->ktv, v + c * BK * Dv, Dv, n, Dv);
    }
    if (j->gq) pack_a_t(b->kta, ceil_div(Tk, 32), k, D, Tk, D);
    int64_t rows = 16 * ceil_div(Tk, 16);
    memset(b->gkb, 0, (size_t)(rows * 16 * j->dg) * sizeof(float));
    memset(b->gvb, 0, (size_t)(rows * 16 * j->dvg) * sizeof(float));
}

/* Panel rows [0, kend): P^T = exp(s scale - m) inv where visible, else 0 (and rows up to the k-step's end
 * 0); into pa as A tiles when dV is wanted (query vectors up to the k-step's end: 0). */
static void bw_probs(const job *j, const bw_bufs *b, int64_t i0, int64_t nq, int64_t kend, const vf *m, const vf *inv) {
    const vf vs = vf_set1((float)j->a->scale);
    int64_t nqg = ceil_div(nq, 16), nv2 = 2 * ceil_div(nqg, 2);
    for (int64_t r = 0; r < 32 * ceil_div(kend, 32); r++)
        for (int64_t v = 0; v < nv2; v++) {
            float *p = b->pt + r * BQ + 16 * v;
            vf x = vf_zero();
            if (r < kend && v < nqg) {
                vf e = vf_exp(vf_sub(vf_mul(vf_load(p), vs), m[v]));
                x = vf_maskz(att_lanes(j->a->causal, r, i0, nq, v), vf_mul(e, inv[v]));
            }
            if (v < nqg) vf_store(p, x);
            if (j->gv && r < 16 * ceil_div(kend, 16)) put_row(b->pa + (size_t)((r / 16 * 2 + v / 2) * 3 * TW), r, v, x);
        }
}

/* D_i = sum_j P_ij dP_ij (keys in order), then dS^T = P^T (dP^T - D) scale over the panel (masked and
 * skipped entries read as 0), into dsb (B tiles, for dQ) and dsa (A tiles, for dK) as wanted. */
static void bw_ds(const job *j, const bw_bufs *b, int64_t i0, int64_t nq, int64_t kend) {
    const ampci_attn *a = j->a;
    int64_t nqg = ceil_div(nq, 16), nv2 = 2 * ceil_div(nqg, 2), ktt = ceil_div(a->Tk, 32);
    vf di[4], vs = vf_set1((float)a->scale);
    for (int64_t v = 0; v < nqg; v++) di[v] = vf_zero();
    for (int64_t r = 0; r < kend; r++)
        for (int64_t v = 0; v < nqg; v++) {
            vm mk = att_lanes(a->causal, r, i0, nq, v);
            di[v] = vf_fmadd(vf_loadz(mk, b->pt + r * BQ + 16 * v), vf_loadz(mk, b->dst + r * BQ + 16 * v), di[v]);
        }
    for (int64_t r = 0; r < 32 * ceil_div(kend, 32); r += 2)
        for (int64_t v = 0; v < nv2; v++) {
            vf x[2];
            for (int s = 0; s < 2; s++) {
                x[s] = vf_zero();
                if (r + s >= kend || v >= nqg) continue;
                vm mk = att_lanes(a->causal, r + s, i0, nq, v);
                vf p = vf_loadz(mk, b->pt + (r + s) * BQ + 16 * v);
                vf d = vf_loadz(mk, b->dst + (r + s) * BQ + 16 * v);
                x[s] = vf_maskz(mk, vf_mul(vf_mul(p, vf_sub(d, di[v])), vs));
            }
            if (j->gq && v < nqg) put_pair(b->dsb + (size_t)((v * ktt + r / 32) * 3 * TW), r, x[0], x[1]);
            for (int s = 0; j->gk && s < 2; s++)
                if (r + s < 16 * ceil_div(kend, 16))
                    put_row(b->dsa + (size_t)(((r + s) / 16 * 2 + v / 2) * 3 * TW), r + s, v, x[s]);
        }
}

/* Whether a BK chunk of k below key kend holds a subnormal. */
static bool any_ksub(const bw_bufs *b, int64_t kend) {
    for (int64_t c = 0; c * BK < kend; c++)
        if (b->ksub[c]) return true;
    return false;
}

/* One query block [i0, i0 + nq) of head h. */
static void bw_block(const job *j, const bw_bufs *b, int64_t h, int64_t i0) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, r0 = h * a->Tq + i0, nq = min64(BQ, a->Tq - i0), nqg = ceil_div(nq, 16);
    int64_t kend = a->causal ? min64(i0 + nq, a->Tk) : a->Tk, tkg = ceil_div(kend, 16), ktq = ceil_div(nq, 32);
    bool want_dp = j->gq || j->gk;
    bool qsub = pack_b_t(b->qt, j->ktd, j->q + r0 * D, D, nq, D);
    bool osub = pack_b_t(b->dot, j->ktv, j->go + r0 * Dv, Dv, nq, Dv);
    if (j->gk) pack_b_rows(b->qb, 2, j->q + r0 * D, D, nq, D);
    if (j->gv) pack_b_rows(b->dob, 2, j->go + r0 * Dv, Dv, nq, Dv);
    vf m[4], inv[4];
    att_stats_lanes(j->stats_in + 2 * r0, nq, m, inv);
    for (int64_t c = 0; c * BK < kend; c++) {
        int64_t j0 = c * BK, cdiag = a->causal ? j0 - i0 : NONE, mg = ceil_div(min64(BK, kend - j0), 16);
        mm s = {.a = {b->ka + (size_t)(4 * c * j->ktd * TW), j->ktd, 1},
                .b = {b->qt, j->ktd, 1},
                .c = b->pt + j0 * BQ,
                .ldc = BQ,
                .mg = mg,
                .ng = nqg,
                .kt = j->ktd,
                .exact = b->ksub[c] || qsub,
                .cdiag = cdiag,
                .kq = NONE,
                .qk = NONE};
        mm_run(&s);
        if (!want_dp) continue;
        mm d = {.a = {b->va + (size_t)(4 * c * j->ktv * TW), j->ktv, 1},
                .b = {b->dot, j->ktv, 1},
                .c = b->dst + j0 * BQ,
                .ldc = BQ,
                .mg = mg,
                .ng = nqg,
                .kt = j->ktv,
                .exact = b->vsub[c] || osub,
                .cdiag = cdiag,
                .kq = NONE,
                .qk = NONE};
        mm_run(&d);
    }
    bw_probs(j, b, i0, nq, kend, m, inv);
    if (want_dp) bw_ds(j, b, i0, nq, kend);
    if (j->gq) {
        int64_t ktt = ceil_div(a->Tk, 32);
        mm q = {.a = {b->kta, ktt, 1},
                .b = {b->dsb, ktt, 3},
                .c = b->dqt,
                .ldc = BQ,
                .mg = j->dg,
                .ng = nqg,
                .kt = ceil_div(kend, 32),
                .exact = any_ksub(b, kend),
                .cdiag = NONE,
                .kq = a->causal ? -i0 : NONE,
                .qk = NONE};
        mm_run(&q);
        att_unpack_t(b->dqt, D, nq, NULL, j->gq + r0 * D, D);
    }
    int64_t qk = a->causal ? i0 : NONE;
    if (j->gk) {
        mm k = {.a = {b->dsa, 2, 3},
                .b = {b->qb, 2, 1},
                .c = b->gkb,
                .ldc = 16 * j->dg,
                .mg = tkg,
                .ng = j->dg,
                .kt = ktq,
                .acc = true,
                .exact = qsub,
                .cdiag = NONE,
                .kq = NONE,
                .qk = qk};
        mm_run(&k);
    }
    if (j->gv) {
        mm v = {.a = {b->pa, 2, 3},
                .b = {b->dob, 2, 1},
                .c = b->gvb,
                .ldc = 16 * j->dvg,
                .mg = tkg,
                .ng = j->dvg,
                .kt = ktq,
                .acc = true,
                .exact = osub,
                .cdiag = NONE,
                .kq = NONE,
                .qk = qk};
        mm_run(&v);
    }
}

/* dst (rows, n) = src (rows, ld) */
static void copy_rows(float *dst, const float *src, int64_t rows, int64_t n, int64_t ld) {
    for (int64_t r = 0; r < rows; r++) memcpy(dst + r * n, src + r * ld, (size_t)n * sizeof(float));
}

static void bw_range(void *arg, int64_t h0, int64_t h1, int64_t chunk) {
    (void)chunk;
    job *j = arg;
    const ampci_attn *a = j->a;
    int slot = take_slot(j->busy, j->nslots);
    bw_bufs b;
    bw_carve(j, j->mem + (size_t)slot * j->slot_bytes, &b);
    AMX_CONFIG();
    for (int64_t h = h0; h < h1; h++) {
        bw_keys(j, &b, h);
        for (int64_t i0 = 0; i0 < a->Tq; i0 += BQ) bw_block(j, &b, h, i0);
        if (j->gk) copy_rows(j->gk + h * a->Tk * a->D, b.gkb, a->Tk, a->D, 16 * j->dg);
        if (j->gv) copy_rows(j->gv + h * a->Tk * a->Dv, b.gvb, a->Tk, a->Dv, 16 * j->dvg);
    }
    AMX_RELEASE();
    atomic_store(&j->busy[slot], 0);
}

/* ------------------------------------------------------------------------------------------------
 * Entry points. Tasks go through ampc_parallel_for (forward: (head, query block), backward: heads); a
 * task takes one of min(threads, tasks) scratch slots, and which one never changes the arithmetic.
 * ---------------------------------------------------------------------------------------------- */

static ampc_status run(ampc_ctx *ctx, job *j, int64_t n, size_t slot_bytes, ampc_parallel_fn fn, const char *what) {
    const ampci_attn *a = j->a;
    double work = (double)a->BH * (double)a->Tq * (double)a->Tk * (double)(a->D + a->Dv);
    int threads = work < SERIAL_WORK ? 1 : ampc_ctx_threads(ctx);
    j->nslots = (int)min64(threads, n);
    j->slot_bytes = (slot_bytes + 63) / 64 * 64;
    size_t bytes = (size_t)j->nslots * j->slot_bytes + (size_t)j->nslots * sizeof(atomic_int) + 64;
    unsigned char *mem = ampci_alloc(ctx, bytes, what);
    if (!mem) return AMPC_STATUS_OOM;
    j->mem = mem;
    j->busy = (atomic_int *)(mem + (size_t)j->nslots * j->slot_bytes);
    for (int i = 0; i < j->nslots; i++) atomic_init(&j->busy[i], 0);
    if (threads == 1) fn(j, 0, n, 0);
    else ampc_parallel_for(ctx, n, 1, fn, j);
    ampci_free(ctx, mem, bytes);
    return AMPC_OK;
}

static job make_job(const ampci_attn *a) {
    return (job){.a = a,
                 .q = a->q,
                 .k = a->k,
                 .v = a->v,
                 .nqb = ceil_div(a->Tq, BQ),
                 .ktd = ceil_div(a->D, 32),
                 .ktv = ceil_div(a->Dv, 32),
                 .dg = ceil_div(a->D, 16),
                 .dvg = ceil_div(a->Dv, 16)};
}

/* o: (BH, Tq, Dv) F32; stats: (BH, Tq, 2) F32 or NULL; q (BH, Tq, D), k (BH, Tk, D), v (BH, Tk, Dv) of dt */
ampc_status ATT_NAME(ampc_k_attention__amx)(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats) {
    if (a->dt != AMPC_DTYPE_BF16 || a->Tk == 0) return OTHER_FW(ctx, a, o, stats); /* Tk = 0: o = 0, as ref */
    if (a->BH == 0 || a->Tq == 0) return AMPC_OK;
    job j = make_job(a);
    j.o = o, j.stats = stats;
    fw_state f;
    return run(ctx, &j, a->BH * j.nqb, fw_carve(&j, NULL, &f), fw_range, "attention (amx) scratch");
}

/* gq, gk, gv: F32, the shapes of q, k, v, each NULL = not wanted; go (BH, Tq, Dv) of dt; stats from the
 * forward */
ampc_status ATT_NAME(ampc_k_attention_bw__amx)(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go,
                                               float *gq, float *gk, float *gv) {
    if (a->dt != AMPC_DTYPE_BF16 || a->Tk == 0) return OTHER_BW(ctx, a, stats, go, gq, gk, gv);
    if (a->BH == 0 || (!gq && !gk && !gv)) return AMPC_OK;
    job j = make_job(a);
    j.stats_in = stats, j.go = go, j.gq = gq, j.gk = gk, j.gv = gv;
    bw_bufs b;
    return run(ctx, &j, a->BH, bw_carve(&j, NULL, &b), bw_range, "attention backward (amx) scratch");
}
