/* gemm_amx.c: AMX tile GEMMs, c (M, N) F32 = beta c + op(a) op(b), every multiply-add done by tdpbf16ps,
 * and the amx folder's registry table (at the end):
 *   gemm, BF16       ampc_k_gemm_bf16f32__amx          BF16 operands, one tile pass
 *   gemm, F16        ampc_k_gemm_f16f32__amx_bf16x3    each FP16 value split exactly into BF16 hi + lo
 *   gemm_f32_bf16x1  ampc_k_gemm_f32_bf16x1__amx       F32 operands rounded to BF16 (hi only)
 *   gemm_f32_bf16x3  ampc_k_gemm_f32_bf16x3__amx       F32 operands as hi + lo (16 of their 24 bits)
 * The split is split_bf16 of gemm_ref.c: hi = x rounded to BF16 (RNE), lo = (x - hi) rounded to BF16,
 * lo = 0 where hi is inf or NaN. Three-pass kernels compute a b as ahi bhi + ahi blo + alo bhi. The
 * fourth product alo blo is dropped: it is below 2^-16 |a b| (|lo| <= 2^-8 |x|), under the F32
 * accumulation error once K reaches a few hundred, and a fourth pass would cost a third more time.
 *
 * Structure (Goto/BLIS with tiles). Tiles are 16 x 16 F32 for C, 16 rows x 32 BF16 for A and 16 pair-rows
 * x 16 columns for B (amx_pack.h). The micro-tile is 32 x 32 of C in 4 tile registers (tmm0-3), with
 * two A tiles (tmm4-5: rows 0-15, 16-31) and two B tiles (tmm6-7: columns 0-15, 16-31): per k-step of 32
 * K elements, 4 tile loads feed 4 tdpbf16ps (three-pass: 10 loads, 12 tdpbf16ps), each load placed just
 * before the first product that needs it. Edge micro-tiles use one A or one B tile (16 rows or columns)
 * out of the same fixed configuration; every pack is zero-padded to whole tiles. op(b) is packed once per
 * call (column chunks of at most 8 MiB packed, in parallel). A task takes up to 256 rows (fewer for large
 * K: its A panel, the rows over all of K, is at most 1 MiB, half the L2) and, on one thread, every column
 * of the chunk, so each row of op(a) is packed once per chunk. It packs its A panel, then for each
 * 32-column B sliver, for each K-block of KC elements (512 for one part, 256 for hi + lo: the sliver's
 * block is 32 KiB and stays in the 48 KiB L1), for each 32-row A sliver, runs the micro-kernel; the A
 * tiles stream from the L2-resident panel with tileloaddt1 (the no-reuse hint keeps them from evicting
 * the B block). Between K-blocks a micro-tile's accumulators wait in the task's buffer (32 x 32 F32 per A
 * sliver: stored and reloaded exactly), so every c element is ONE chain of tdpbf16ps over all of K in k
 * order, whatever KC, the task cut or the thread count. After the last K-block a whole micro-tile with
 * beta 0 goes from the tiles straight to c; edges, beta != 0, a bias and a 16-bit result (kernels.h)
 * go through a buffer and a vector write-out (masked stores at the edges, beta and bias tested once per
 * block): c = acc (beta 0: old c, NaN included, never read) or c = beta * c + acc (multiply, then add),
 * then + bias, stored as F32 or rounded once to c16's dtype.
 *
 * Blocking, measured on an Emerald Rapids core (48 KiB L1D, 2 MiB L2; CPU time of one thread): the
 * micro-kernel reaches ~95% of the tile peak with its B block in L1 and A streamed with tileloaddt1
 * (~80% with plain loads); what the GEMM loses besides packing is L2/L3 traffic: the accumulator spill
 * between K-blocks (~25% in the loop above), B blocks arriving from L3 (~15%) and c written to memory
 * (~15%). Tried and slower or no better: 128 or 512 rows per task, B prefetched into L2 or L1 ahead of
 * its block, prefetchw or cldemote of c, non-temporal c stores, B packed per task next to its use (each
 * row block then repacks all of op(b)), three-pass steps reordered to 9 tile loads. oneDNN (PyTorch's
 * bf16 matmul) runs at the same speed on this machine.
 *
 * Arithmetic of tdpbf16ps (Intel SDM): for each c element, the 16 even and the 16 odd products of a
 * k-step each go through a chain of FP32 FMAs from +0 (one rounding per FMA, RNE), then
 * c = c + (even + odd). Inputs are DAZ (BF16 and F32 subnormals read as 0), results FTZ (below 2^-126
 * they become 0), MXCSR is ignored. Products of BF16 values are exact in F32.
 *
 * Special values. The tile path never sees a BF16 subnormal: packing flags every 16-row (A) or 16-column
 * (B) panel of a K-block that holds one (or, for three-pass kernels, an inf/NaN hi), and a micro-tile
 * that meets a flagged panel computes that K-block with plain IEEE FMAs instead (ukr_exact: same values,
 * no DAZ/FTZ, lo cross products skipped where a hi is inf/NaN, so inf * 1 = inf). Why: DAZ would make a
 * subnormal count as 0 and inf * subnormal a NaN, unlike the ref and avx512 kernels; such inputs are rare
 * (BF16 values below 2^-126; F32 inputs below ~2^-103, whose lo part is a BF16 subnormal), so the slow
 * path costs nothing in practice. FP16 inputs never produce one (every FP16 value and part is a multiple
 * of 2^-24). What remains is FTZ of tiny sums on the tile path: every value there is a multiple of 2^-48
 * for F16 inputs, so it never happens for them; for BF16/F32 inputs each flush changes a result by less
 * than 2^-126 (at most 34 flushes per tile instruction).
 *
 * Error bounds (for one c element; u = 2^-24, gamma_n = n u / (1 - n u); S = sum_k |a_k| |b_k| of the
 * exact inputs; D = |beta c| + 1.02 S; I = P ceil(K / 32) tile instructions with P = 1 or 3 passes;
 * finite inputs, no overflow, no flushed sums (add (34 I + 1) 2^-126 for those); for F32 inputs, nonzero
 * values of magnitude >= 2^-118):
 *   every kernel, vs the exact sum of the terms it multiplies:  <= gamma_{18+I} D
 *     (a product passes through <= 16 FMA roundings, the even + odd add, the add into c, I - 1 later adds
 *     into c, and the final beta step)
 *   BF16 (P = 1), vs exact products:                   gamma_{18+I} D
 *   F16 bf16x3 (P = 3), vs exact FP16 products (a GPU tensor core's products):
 *                                                      2^-16 S + gamma_{18+I} D
 *   F32 bf16x1 (P = 1), vs the exact F32 product:      2^-7 (1 + 2^-9) S + gamma_{18+I} D   (TF32-like)
 *   F32 bf16x3 (P = 3), vs the exact F32 product:      3.02 * 2^-16 S + gamma_{18+I} D      (about FP32)
 * E.g. K = 4096: F16 2^-16 S + 2.4e-5 D; an FP32 GEMM with any summation order has gamma_K = 2.4e-4.
 *
 * Threads: B packing and the tasks go through ampc_parallel_for; a task takes one of `threads` scratch
 * slots (claimed with an atomic flag). Tile state is per thread: each chunk function loads the tile
 * configuration on the thread that runs it and releases it at the end. Scratch: one ampci_alloc per call.
 *
 * The tile instructions go through amx_tile.h: tests/test_amx.c includes this file with
 * AMPCI_AMX_EMULATE defined and runs the same code on an emulation of the instructions, through the
 * emulated build's own table (ampci_kernels_amx_emu: the same entries, named ..._emu). */
#include "../driver_util.h"
#include "amx_pack.h"
#include "amx_tile.h"
#include "gemm_amx.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define KC_ONE 512 /* K elements per block, one-part kinds (fixed: see "Special values") */
#define KC_TWO 256 /* two-part kinds (hi + lo tiles) */
#define MS_MAX 16  /* row groups (16 rows) per task: 256 rows */
#define BGROUP 4   /* column groups per B packing item */

/* Knobs that never change the arithmetic; the emulated build lets tests lower them to reach the column
 * chunk, row block and thread paths with small problems. */
#ifdef AMPCI_AMX_EMULATE
#define AMX_KNOB static
/* which packing and write-out the emulated kernels run: 0 the scalar definitions, 1 AVX-512, 2 AVX-512 with
 * AVX512-BF16 (amx_pack.h). The test sets what the CPU has and compares them all. */
static int g_vector;
#define AMX_VECTOR (g_vector > 0)
#define AMX_PACKERS (g_vector == 2 ? g_pack_vectorbf : g_vector == 1 ? g_pack_vector : g_pack_scalar)
#else
#define AMX_KNOB static const
#define AMX_VECTOR true
#define AMX_PACKERS (ampc_cpu_has(AMPC_CPU_AVX512_BF16) ? g_pack_vectorbf : g_pack_vector)
#endif
/* packed op(b) per column chunk, bytes */
AMX_KNOB size_t g_bpack_max_bytes = (size_t)8 << 20;
/* a task's packed A panel (its rows over all of K), bytes: it is streamed from L2 once per B sliver, so
 * it must stay well inside this core's 2 MiB L2 next to the B chunk's traffic; larger K takes fewer rows */
AMX_KNOB size_t g_apanel_max_bytes = (size_t)1 << 20;
/* multiply-adds (times passes) below which one thread does everything: one ampc_parallel_for costs
 * ~45 us, the time of 2^25 multiply-adds at half the AMX peak */
AMX_KNOB double g_serial_work = 33554432.0;

/* ------------------------------------------------------------------------------------------------
 * Micro-kernels: a 32 x 32 (or 16-row / 16-column edge) block of C over kt k-steps of packed tiles.
 * a0, a1: the A tiles of the two row groups; b0, b1: the B tiles of the two column groups (tile (t, part)
 * at (t * parts + part) * TWORDS). The accumulators come from cin (32 x 32 floats, rows 128 bytes apart)
 * or start at zero (cin NULL), and go to cout, rows ldo floats apart: C tile (gg, hh) at
 * cout + 16 gg ldo + 16 hh (the spill buffer with ldo = 32, or c itself).
 * ---------------------------------------------------------------------------------------------- */

#define CT 256 /* floats per C tile */
#define CB 32  /* floats per row of a 32 x 32 accumulator block */

/* The four tdpbf16ps of a k-step, C(gg, hh) += A(gg) B(hh), with A from a0/a1 at `at` (streamed: tile
 * loads with the no-reuse hint) and B from b0/b1 at `bt`. The loads are interleaved so that each product
 * can start as soon as its operands are in. */
#define STEP(ng, nh, at, bt)                                                                                           \
    do {                                                                                                               \
        AMX_LOAD_T1(4, a0 + (at), 64);                                                                                 \
        AMX_LOAD(6, b0 + (bt), 64);                                                                                    \
        AMX_DPBF16(0, 4, 6);                                                                                           \
        if (nh == 2) {                                                                                                 \
            AMX_LOAD(7, b1 + (bt), 64);                                                                                \
            AMX_DPBF16(1, 4, 7);                                                                                       \
        }                                                                                                              \
        if (ng == 2) {                                                                                                 \
            AMX_LOAD_T1(5, a1 + (at), 64);                                                                             \
            AMX_DPBF16(2, 5, 6);                                                                                       \
            if (nh == 2) AMX_DPBF16(3, 5, 7);                                                                          \
        }                                                                                                              \
    } while (0)
/* The hi * lo pass: A (hi) stays in tmm4/5, only B's lo tiles are loaded. */
#define STEP_BLO(ng, nh, bt)                                                                                           \
    do {                                                                                                               \
        AMX_LOAD(6, b0 + (bt), 64);                                                                                    \
        AMX_DPBF16(0, 4, 6);                                                                                           \
        if (ng == 2) AMX_DPBF16(2, 5, 6);                                                                              \
        if (nh == 2) {                                                                                                 \
            AMX_LOAD(7, b1 + (bt), 64);                                                                                \
            AMX_DPBF16(1, 4, 7);                                                                                       \
            if (ng == 2) AMX_DPBF16(3, 5, 7);                                                                          \
        }                                                                                                              \
    } while (0)

AI void ukr_body(const int ng, const int nh, const int passes, int64_t kt, const uint16_t *a0, const uint16_t *a1,
                 const uint16_t *b0, const uint16_t *b1, const float *cin, float *cout, int64_t ldo) {
    const int parts = passes == 3 ? 2 : 1;
    if (cin) {
        AMX_LOAD(0, cin, CB * 4);
        if (nh == 2) AMX_LOAD(1, cin + 16, CB * 4);
        if (ng == 2) AMX_LOAD(2, cin + 16 * CB, CB * 4);
        if (ng == 2 && nh == 2) AMX_LOAD(3, cin + 16 * CB + 16, CB * 4);
    } else {
        AMX_ZERO(0);
        if (nh == 2) AMX_ZERO(1);
        if (ng == 2) AMX_ZERO(2);
        if (ng == 2 && nh == 2) AMX_ZERO(3);
    }
    for (int64_t t = 0; t < kt; t++) {
        size_t hi = (size_t)(t * parts) * TWORDS, lo = hi + TWORDS;
        STEP(ng, nh, hi, hi); /* hi * hi */
        if (passes == 3) {
            STEP_BLO(ng, nh, lo); /* hi * lo */
            STEP(ng, nh, lo, hi); /* lo * hi */
        }
    }
    size_t st = (size_t)ldo * 4;
    AMX_STORE(0, cout, st);
    if (nh == 2) AMX_STORE(1, cout + 16, st);
    if (ng == 2) AMX_STORE(2, cout + 16 * ldo, st);
    if (ng == 2 && nh == 2) AMX_STORE(3, cout + 16 * ldo + 16, st);
}

typedef void (*ukr_fn)(int64_t kt, const uint16_t *a0, const uint16_t *a1, const uint16_t *b0, const uint16_t *b1,
                       const float *cin, float *cout, int64_t ldo);
#define DEF_UKR(NG, NH, P)                                                                                             \
    static void ukr_##NG##NH##_##P(int64_t kt, const uint16_t *a0, const uint16_t *a1, const uint16_t *b0,             \
                                   const uint16_t *b1, const float *cin, float *cout, int64_t ldo) {                   \
        ukr_body(NG, NH, P, kt, a0, a1, b0, b1, cin, cout, ldo);                                                       \
    }
DEF_UKR(1, 1, 1)
DEF_UKR(1, 2, 1)
DEF_UKR(2, 1, 1)
DEF_UKR(2, 2, 1)
DEF_UKR(1, 1, 3)
DEF_UKR(1, 2, 3)
DEF_UKR(2, 1, 3)
DEF_UKR(2, 2, 3)
/* [passes == 3][ng - 1][nh - 1] */
static const ukr_fn g_ukr[2][2][2] = {{{ukr_11_1, ukr_12_1}, {ukr_21_1, ukr_22_1}},
                                      {{ukr_11_3, ukr_12_3}, {ukr_21_3, ukr_22_3}}};

AI float bf16_value(uint16_t h) { return ampci_f32_from_bits((uint32_t)h << 16); }

/* The same block with IEEE FMAs in k order, for K-blocks whose panels hold special values (see the
 * header): no DAZ, no FTZ, and where a hi is inf or NaN its lo cross products are skipped. cin and cout
 * are 32 x 32 blocks (rows CB floats apart). */
static void ukr_exact(int ng, int nh, int passes, int64_t kt, const uint16_t *const a[2], const uint16_t *const b[2],
                      const float *cin, float *cout) {
    const size_t parts = passes == 3 ? 2 : 1;
    for (int r = 0; r < ng * TROWS; r++)
        for (int n = 0; n < nh * TROWS; n++) {
            size_t at = (size_t)(r * CB + n);
            float acc = cin ? cin[at] : 0.0f;
            for (int64_t t = 0; t < kt; t++) {
                const uint16_t *ar = a[r / TROWS] + (size_t)t * parts * TWORDS + r % TROWS * TK;
                const uint16_t *bc = b[n / TROWS] + (size_t)t * parts * TWORDS + 2 * (n % TROWS);
                for (int e = 0; e < TK; e++) {
                    size_t be = (size_t)(e / 2 * TK + (e & 1));
                    float x = bf16_value(ar[e]), y = bf16_value(bc[be]);
                    acc = fmaf(x, y, acc);
                    if (passes == 3 && isfinite(x) && isfinite(y)) {
                        acc = fmaf(x, bf16_value(bc[be + TWORDS]), acc);
                        acc = fmaf(bf16_value(ar[e + TWORDS]), y, acc);
                    }
                }
            }
            cout[at] = acc;
        }
}

/* c rows r0.. (nr of them), columns c0.. (nc <= 32) from a finished 32 x 32 block: c = acc (beta 0: old
 * c never read) or c = beta c + acc (multiply, then add), then + bias, into c or rounded into c16
 * (kernels.h). The scalar definition and the vector one. */
static void write_out_scalar(const ampci_gemm *g, const float *acc, int64_t r0, int64_t c0, int nr, int nc) {
    for (int r = 0; r < nr; r++)
        for (int x = 0; x < nc; x++) gemm_put(g, r0 + r, c0 + x, acc[r * CB + x]);
}

AMX_VECTOR_BEGIN
/* One row's 32 results (x0: columns 0..15, x1: 16..31, masks m0, m1) stored at element `at` of c or c16. */
AI void store_row(const ampci_gemm *g, size_t at, __m512 x0, __m512 x1, __mmask16 m0, __mmask16 m1) {
    if (!g->c16) {
        _mm512_mask_storeu_ps(g->c + at, m0, x0);
        _mm512_mask_storeu_ps(g->c + at + 16, m1, x1);
        return;
    }
    bool f16 = g->c16_dt == AMPC_DTYPE_F16;
    _mm256_mask_storeu_epi16(g->c16 + at, m0, f32_round16(x0, f16));
    _mm256_mask_storeu_epi16(g->c16 + at + 16, m1, f32_round16(x1, f16));
}

/* write_out_scalar in 16 lanes: masked loads and stores at the right edge, beta and bias tested once per
 * block */
static void write_out_vector(const ampci_gemm *g, const float *acc, int64_t r0, int64_t c0, int nr, int nc) {
    const __mmask16 m0 = m16(nc), m1 = m16(nc - 16);
    const __m512 vb = _mm512_set1_ps(g->beta);
    const bool beta0 = g->beta == 0.0f;
    __m512 b0 = _mm512_setzero_ps(), b1 = b0;
    if (g->bias) b0 = _mm512_maskz_loadu_ps(m0, g->bias + c0), b1 = _mm512_maskz_loadu_ps(m1, g->bias + c0 + 16);
    size_t at = (size_t)(r0 * g->ldc + c0);
    for (int r = 0; r < nr; r++, at += (size_t)g->ldc, acc += CB) {
        __m512 x0 = _mm512_load_ps(acc), x1 = _mm512_load_ps(acc + 16);
        if (!beta0) {
            x0 = _mm512_add_ps(_mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m0, g->c + at)), x0);
            x1 = _mm512_add_ps(_mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m1, g->c + at + 16)), x1);
        }
        if (g->bias) x0 = _mm512_add_ps(x0, b0), x1 = _mm512_add_ps(x1, b1);
        store_row(g, at, x0, x1, m0, m1);
    }
}
AMX_VECTOR_END

/* ------------------------------------------------------------------------------------------------
 * The driver
 * ---------------------------------------------------------------------------------------------- */

typedef struct ajob {
    const ampci_gemm *g;
    akind kd;
    int parts, passes;
    int64_t KC, nkb, ktf; /* K elements per block, blocks, k-steps per full block */
    int64_t kt_total;     /* k-steps over all of K */
    const pack_fn (*pack)[2];
    /* the current chunk of columns, from jc0: ngc column groups of packed op(b) */
    int64_t jc0, ngc;
    uint16_t *bp; /* [pc][group][kt(pc)][parts][TWORDS] */
    bool *bflag;  /* [pc][group]: the panel holds a special value */
    /* tasks: mb x nb blocks of gs row groups by hs column groups */
    int64_t ngr, gs, mb, hs, nb;
    unsigned char *slots; /* nslots scratch slots of slot_bytes: A panel, A flags, C buffer */
    size_t slot_bytes, a_bytes, f_bytes;
    atomic_int *busy;
    int nslots;
} ajob;

AI int64_t block_kc(const ajob *j, int64_t pc) { return pc + 1 < j->nkb ? j->KC : j->g->K - pc * j->KC; }
AI size_t group_words(const ajob *j, int64_t kt) { return (size_t)(kt * j->parts) * TWORDS; }

/* Where the K-block pc of op(a) rows from row (or of op(b) columns from col) starts, as a pack source
 * (nx: the rows or columns from there). */
static pack_src src_a(const ajob *j, int64_t row, int64_t pc) {
    const ampci_gemm *g = j->g;
    int64_t k0 = pc * j->KC;
    size_t es = kind_size(j->kd);
    pack_src s = {(const unsigned char *)g->a, g->ta ? 1 : g->lda, g->ta ? g->lda : 1, g->M - row, block_kc(j, pc)};
    s.base += (size_t)(row * s.sx + k0 * s.sk) * es;
    return s;
}
static pack_src src_b(const ajob *j, int64_t col, int64_t pc) {
    const ampci_gemm *g = j->g;
    int64_t k0 = pc * j->KC;
    size_t es = kind_size(j->kd);
    pack_src s = {(const unsigned char *)g->b, g->tb ? g->ldb : 1, g->tb ? 1 : g->ldb, g->N - col, block_kc(j, pc)};
    s.base += (size_t)(col * s.sx + k0 * s.sk) * es;
    return s;
}

/* Packs items [i0, i1) of op(b): item = (K-block pc, BGROUP column groups of the chunk). */
static void pack_b_range(void *arg, int64_t i0, int64_t i1, int64_t chunk) {
    (void)chunk;
    ajob *j = arg;
    int64_t nitems = ceil_div(j->ngc, BGROUP);
    for (int64_t it = i0; it < i1; it++) {
        int64_t pc = it / nitems, h0 = it % nitems * BGROUP, h1 = min64(h0 + BGROUP, j->ngc);
        int64_t kt = ceil_div(block_kc(j, pc), TK);
        uint16_t *blk = j->bp + group_words(j, j->ktf) * (size_t)(pc * j->ngc);
        pack_src s = src_b(j, j->jc0 + h0 * TROWS, pc);
        j->pack[j->kd][1](&s, h1 - h0, kt, blk + group_words(j, kt) * (size_t)h0, group_words(j, kt),
                          j->bflag + pc * j->ngc + h0, 1);
    }
}

/* A task's A panel: row groups [g0, g1) over all K-blocks, group by group (group gi's block pc at
 * (gi - g0) * group_words(kt_total) + pc * group_words(ktf)), with a flag per group and block. */
static void pack_a_panel(const ajob *j, int64_t g0, int64_t g1, uint16_t *ab, bool *aflag) {
    for (int64_t pc = 0; pc < j->nkb; pc++) {
        pack_src s = src_a(j, g0 * TROWS, pc);
        j->pack[j->kd][0](&s, g1 - g0, ceil_div(s.kc, TK), ab + group_words(j, j->ktf) * (size_t)pc,
                          group_words(j, j->kt_total), aflag + pc, (size_t)j->nkb);
    }
}

/* One micro-tile, rows from row and columns from col (ng, nh groups), over K-block pc of kt k-steps: the
 * tile path, or the exact one when a panel is special. cb (32 x 32) holds its accumulators between
 * K-blocks; after the last one the block goes to c: straight from the tiles when it is whole and beta is
 * 0 and no bias or rounding is asked for, else through a buffer and the write-out. */
static void micro_tile(const ajob *j, int64_t pc, int64_t kt, const uint16_t *const a[2], int ng,
                       const uint16_t *const b[2], int nh, bool special, float *cb, int64_t row, int64_t col) {
    const ampci_gemm *g = j->g;
    _Alignas(64) float last[32 * CB];
    bool final = pc + 1 == j->nkb;
    const float *cin = pc > 0 ? cb : NULL;
    int nr = (int)min64(32, g->M - row), nc = (int)min64(32, g->N - col);
    if (final && !special && g->beta == 0.0f && !g->bias && !g->c16 && nr == 32 && nc == 32) {
        g_ukr[j->passes == 3][1][1](kt, a[0], a[1], b[0], b[1], cin, g->c + row * g->ldc + col, g->ldc);
        return;
    }
    float *cout = final ? last : cb;
    if (special) ukr_exact(ng, nh, j->passes, kt, a, b, cin, cout);
    else g_ukr[j->passes == 3][ng - 1][nh - 1](kt, a[0], a[1], b[0], b[1], cin, cout, CB);
    if (!final) return;
    if (AMX_VECTOR) write_out_vector(g, last, row, col, nr, nc);
    else write_out_scalar(g, last, row, col, nr, nc);
}

/* Task t: row groups [g0, g1) by column groups [h0, h1) of the chunk, all of K. Packs the A panel, then
 * for each 32-column B sliver, for each K-block (the sliver's block stays in L1), for each 32-row A
 * sliver (streamed from L2), one micro-tile; a sliver's accumulators wait in cbuf between K-blocks. */
static void run_task(const ajob *j, int64_t t, uint16_t *ab, bool *aflag, float *cbuf) {
    int64_t g0 = t / j->nb * j->gs, g1 = min64(g0 + j->gs, j->ngr);
    int64_t h0 = t % j->nb * j->hs, h1 = min64(h0 + j->hs, j->ngc);
    size_t gwt = group_words(j, j->kt_total), gwf = group_words(j, j->ktf);
    pack_a_panel(j, g0, g1, ab, aflag);
    for (int64_t h = h0; h < h1; h += 2) {
        int nh = h + 1 < h1 ? 2 : 1;
        for (int64_t pc = 0; pc < j->nkb; pc++) {
            int64_t kt = ceil_div(block_kc(j, pc), TK);
            size_t gw = group_words(j, kt);
            const uint16_t *bblk = j->bp + gwf * (size_t)(pc * j->ngc);
            const bool *bfl = j->bflag + pc * j->ngc;
            const uint16_t *b[2] = {bblk + gw * (size_t)h, bblk + gw * (size_t)(h + nh - 1)};
            for (int64_t gi = g0; gi < g1; gi += 2) {
                int ng = gi + 1 < g1 ? 2 : 1;
                int64_t i0 = gi - g0, i1 = i0 + ng - 1;
                const uint16_t *a[2] = {ab + gwt * (size_t)i0 + gwf * (size_t)pc,
                                        ab + gwt * (size_t)i1 + gwf * (size_t)pc};
                bool special = bfl[h] || bfl[h + nh - 1] || aflag[i0 * j->nkb + pc] || aflag[i1 * j->nkb + pc];
                float *cb = cbuf + (size_t)(i0 / 2) * 32 * CB;
                micro_tile(j, pc, kt, a, ng, b, nh, special, cb, gi * TROWS, j->jc0 + h * TROWS);
            }
        }
    }
}

static void compute_range(void *arg, int64_t t0, int64_t t1, int64_t chunk) {
    (void)chunk;
    ajob *j = arg;
    int slot = take_slot(j->busy, j->nslots);
    unsigned char *mem = j->slots + (size_t)slot * j->slot_bytes;
    AMX_CONFIG(); /* tile state is per thread: configure it on the thread that runs these tasks */
    for (int64_t t = t0; t < t1; t++)
        run_task(j, t, (uint16_t *)mem, (bool *)(mem + j->a_bytes), (float *)(mem + j->a_bytes + j->f_bytes));
    AMX_RELEASE(); /* back to the INIT state: context switches need not save 8 KiB of tiles */
    atomic_store(&j->busy[slot], 0);
}

static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

/* Column chunks and the task cut. A task takes gs row groups (as many as its A panel budget allows, at
 * most MS_MAX) and, serially, all columns of the chunk; with threads the count is raised to a multiple
 * of the thread count by cutting M (each column cut packs an A panel once more), or N where M has too
 * few row groups. Micro-tiles pair groups from a task's first one, so block sizes are kept even. None
 * of this changes the arithmetic. Returns the column groups per chunk. */
static int64_t plan(ajob *j, int threads, bool serial) {
    const ampci_gemm *g = j->g;
    int64_t ngc_all = ceil_div(g->N, TROWS);
    size_t group_bytes = group_words(j, j->kt_total) * sizeof(uint16_t);
    int64_t per_chunk = (int64_t)(g_bpack_max_bytes / group_bytes);
    per_chunk = per_chunk < 2 ? 2 : per_chunk / 2 * 2;
    int64_t nchunks = ceil_div(ngc_all, per_chunk);
    int64_t ngc_chunk = ceil_div(ceil_div(ngc_all, nchunks), 2) * 2;
    int64_t gs_max = (int64_t)(g_apanel_max_bytes / group_bytes) / 2 * 2;
    gs_max = gs_max < 2 ? 2 : gs_max > MS_MAX ? MS_MAX : gs_max;
    j->ngr = ceil_div(g->M, TROWS);
    j->mb = ceil_div(j->ngr, gs_max);
    int64_t nb = 1;
    if (!serial) {
        if (j->ngr >= 2 * threads) j->mb = ceil_div(j->mb, threads) * threads;
        else nb = threads;
    }
    j->gs = ceil_div(ceil_div(j->ngr, j->mb), 2) * 2;
    j->mb = ceil_div(j->ngr, j->gs);
    j->hs = ceil_div(ceil_div(ngc_chunk, nb), 2) * 2;
    return ngc_chunk;
}

/* One allocation for the call's scratch: the packed op(b) chunk and its flags, then per slot an A panel,
 * its flags and (more than one K-block) the accumulators of one B sliver's micro-tiles, then the slot
 * flags. */
static unsigned char *alloc_scratch(ampc_ctx *ctx, ajob *j, int64_t ngc_chunk, const char *what, size_t *bytes) {
    size_t bwords = group_words(j, j->kt_total) * (size_t)ngc_chunk;
    size_t bflags = round64((size_t)(j->nkb * ngc_chunk));
    j->a_bytes = round64(group_words(j, j->kt_total) * (size_t)j->gs * sizeof(uint16_t));
    j->f_bytes = round64((size_t)(j->gs * j->nkb));
    size_t c_bytes = j->nkb > 1 ? (size_t)(j->gs / 2) * 32 * CB * sizeof(float) : 0;
    j->slot_bytes = j->a_bytes + j->f_bytes + c_bytes;
    *bytes = bwords * sizeof(uint16_t) + bflags + j->slot_bytes * (size_t)j->nslots +
             (size_t)j->nslots * sizeof(atomic_int);
    unsigned char *mem = ampci_alloc(ctx, *bytes, what);
    if (!mem) return NULL;
    j->bp = (uint16_t *)mem;
    j->bflag = (bool *)(mem + bwords * sizeof(uint16_t));
    j->slots = (unsigned char *)j->bflag + bflags;
    j->busy = (atomic_int *)(j->slots + j->slot_bytes * (size_t)j->nslots);
    for (int i = 0; i < j->nslots; i++) atomic_init(&j->busy[i], 0);
    return mem;
}

static ampc_status gemm_amx(ampc_ctx *ctx, const ampci_gemm *g, akind kd, const char *what) {
    if (g->M <= 0 || g->N <= 0) return AMPC_OK;
    if (g->K <= 0) {
        gemm_scale_c(g);
        return AMPC_OK;
    }
    ajob j = {.g = g, .kd = kd, .parts = kind_parts(kd), .pack = AMX_PACKERS};
    j.passes = j.parts == 2 ? 3 : 1;
    j.KC = j.parts == 2 ? KC_TWO : KC_ONE;
    j.nkb = ceil_div(g->K, j.KC);
    j.ktf = ceil_div(min64(g->K, j.KC), TK);
    j.kt_total = (j.nkb - 1) * j.ktf + ceil_div(block_kc(&j, j.nkb - 1), TK);

    int threads = ampc_ctx_threads(ctx);
    double work = (double)g->M * (double)g->N * (double)g->K * j.passes;
    bool serial = threads <= 1 || work < g_serial_work;
    int64_t ngc_chunk = plan(&j, threads, serial);
    int64_t ngc_all = ceil_div(g->N, TROWS);
    int64_t ntasks_max = j.mb * ceil_div(ngc_chunk, j.hs);
    j.nslots = serial ? 1 : (int)(threads < ntasks_max ? threads : ntasks_max);

    size_t bytes;
    unsigned char *mem = alloc_scratch(ctx, &j, ngc_chunk, what, &bytes);
    if (!mem) return AMPC_STATUS_OOM;

    for (int64_t g_begin = 0; g_begin < ngc_all; g_begin += ngc_chunk) {
        j.jc0 = g_begin * TROWS;
        j.ngc = min64(ngc_chunk, ngc_all - g_begin);
        j.nb = ceil_div(j.ngc, j.hs);
        int64_t npack = j.nkb * ceil_div(j.ngc, BGROUP), ntasks = j.mb * j.nb;
        if (serial) {
            pack_b_range(&j, 0, npack, 0);
            compute_range(&j, 0, ntasks, 0);
        } else {
            ampc_parallel_for(ctx, npack, 1, pack_b_range, &j);
            ampc_parallel_for(ctx, ntasks, 1, compute_range, &j);
        }
    }
    ampci_free(ctx, mem, bytes);
    return AMPC_OK;
}

#ifndef AMPCI_AMX_EMULATE
/* ------------------------------------------------------------------------------------------------
 * The packing alone, for `ampc bench gemm`: all of op(a) or op(b), every K-block, into the B chunk's
 * layout ([pc][group][kt][parts][TWORDS]), then the flags.
 * ---------------------------------------------------------------------------------------------- */

static ajob pack_job(const ampci_gemm *g, akind kd) {
    ajob j = {.g = g, .kd = kd, .parts = kind_parts(kd), .pack = AMX_PACKERS};
    j.KC = j.parts == 2 ? KC_TWO : KC_ONE;
    j.nkb = ceil_div(g->K, j.KC);
    j.ktf = ceil_div(min64(g->K, j.KC), TK);
    j.kt_total = (j.nkb - 1) * j.ktf + ceil_div(block_kc(&j, j.nkb - 1), TK);
    return j;
}
static size_t packed_whole(const ampci_gemm *g, bool is_b, akind kd) {
    ajob j = pack_job(g, kd);
    return group_words(&j, j.kt_total) * (size_t)ceil_div(is_b ? g->N : g->M, TROWS) * sizeof(uint16_t);
}
static size_t bytes_whole(const ampci_gemm *g, bool is_b, akind kd) {
    ajob j = pack_job(g, kd);
    return packed_whole(g, is_b, kd) + (size_t)(j.nkb * ceil_div(is_b ? g->N : g->M, TROWS));
}
static void pack_whole(const ampci_gemm *g, bool is_b, akind kd, void *scratch) {
    ajob j = pack_job(g, kd);
    int64_t ng = ceil_div(is_b ? g->N : g->M, TROWS);
    uint16_t *dst = scratch;
    bool *flag = (bool *)((unsigned char *)scratch + packed_whole(g, is_b, kd));
    for (int64_t pc = 0; pc < j.nkb; pc++) {
        int64_t kt = ceil_div(block_kc(&j, pc), TK);
        pack_src s = is_b ? src_b(&j, 0, pc) : src_a(&j, 0, pc);
        j.pack[kd][is_b](&s, ng, kt, dst + group_words(&j, j.ktf) * (size_t)(pc * ng), group_words(&j, kt),
                         flag + pc * ng, 1);
    }
}
AMPCI_DEF_PACKER(AK_BF16, bf16)
AMPCI_DEF_PACKER(AK_F16X3, f16x3)
AMPCI_DEF_PACKER(AK_F32X1, f32x1)
AMPCI_DEF_PACKER(AK_F32X3, f32x3)
#define PACKER(name, dt, tag)                                                                                          \
    { name, dt, AMPC_CPU_FEATURE_COUNT, bytes_##tag, packed_##tag, pack_##tag }
const ampci_gemm_packer ampci_gemm_packers_amx[] = {
    PACKER("amx bf16", AMPC_DTYPE_BF16, bf16),
    PACKER("amx f16 as bf16 hi + lo", AMPC_DTYPE_F16, f16x3),
    PACKER("amx f32 as bf16 hi", AMPC_DTYPE_F32, f32x1),
    PACKER("amx f32 as bf16 hi + lo", AMPC_DTYPE_F32, f32x3),
};
const size_t ampci_gemm_packers_amx_count = sizeof ampci_gemm_packers_amx / sizeof ampci_gemm_packers_amx[0];
#endif

/* The kernels' names; the emulated build (tests/test_amx.c) appends _emu, so it links next to the
 * library's, and registers its entries as emulations, runnable anywhere and never dispatched. */
#ifdef AMPCI_AMX_EMULATE
#define AMX_K(name) name##_emu
#define AMX_TABLE ampci_kernels_amx_emu
#define AMX_TABLE_STORAGE static
#define AMX_LEVEL AMPC_ISA_REF
#define AMX_ROLE AMPCI_ROLE_EMULATION
#else
#define AMX_K(name) name
#define AMX_TABLE ampci_kernels_amx
#define AMX_TABLE_STORAGE
#define AMX_LEVEL AMPC_ISA_AMX
#define AMX_ROLE AMPCI_ROLE_KERNEL
#endif

ampc_status AMX_K(ampc_k_gemm_bf16f32__amx)(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_amx(ctx, g, AK_BF16, "gemm (amx bf16) packed operands");
}
ampc_status AMX_K(ampc_k_gemm_f16f32__amx_bf16x3)(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_amx(ctx, g, AK_F16X3, "gemm (amx f16 as bf16x3) packed operands");
}
ampc_status AMX_K(ampc_k_gemm_f32_bf16x1__amx)(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_amx(ctx, g, AK_F32X1, "gemm (amx f32 as bf16x1) packed operands");
}
ampc_status AMX_K(ampc_k_gemm_f32_bf16x3__amx)(ampc_ctx *ctx, const ampci_gemm *g) {
    return gemm_amx(ctx, g, AK_F32X3, "gemm (amx f32 as bf16x3) packed operands");
}

/* attention_amx.c's kernels (the emulated build includes that file next to this one) */
AMPCI_HIDDEN ampci_attention_kernel AMX_K(ampc_k_attention__amx);
AMPCI_HIDDEN ampci_attention_bw_kernel AMX_K(ampc_k_attention_bw__amx);

/* The amx folder's registry table (AMX-TILE and AMX-BF16 usable, permission granted: the level itself).
 * No F32 entry: F32 GEMMs reach tiles only through the split slots, when the op layer allows it
 * (ampc_ctx_set_fp32_matmul_precision); the F32 slot stays with the level below. The attention entries
 * run BF16 on the tiles and the other dtypes as the avx512 kernel (attention_amx.c). */
#define AMX_ENTRY(SLOT, DT, FN) AMPCI_ENTRY(SLOT, DT, DT, 0, AMX_K(FN), AMX_LEVEL, 0, 0, AMX_ROLE)
AMX_TABLE_STORAGE const ampci_kernel AMX_TABLE[] = {
    AMX_ENTRY(GEMM, AMPC_DTYPE_BF16, ampc_k_gemm_bf16f32__amx),
    AMX_ENTRY(GEMM, AMPC_DTYPE_F16, ampc_k_gemm_f16f32__amx_bf16x3),
    AMX_ENTRY(GEMM_F32_BF16X1, AMPC_DTYPE_F32, ampc_k_gemm_f32_bf16x1__amx),
    AMX_ENTRY(GEMM_F32_BF16X3, AMPC_DTYPE_F32, ampc_k_gemm_f32_bf16x3__amx),
    AMX_ENTRY(ATTENTION, AMPC_DTYPE_F32, ampc_k_attention__amx),
    AMX_ENTRY(ATTENTION_BW, AMPC_DTYPE_F32, ampc_k_attention_bw__amx),
};
#ifdef AMPCI_AMX_EMULATE
static const size_t ampci_kernels_amx_emu_count = sizeof AMX_TABLE / sizeof AMX_TABLE[0];
#else
const size_t ampci_kernels_amx_count = sizeof AMX_TABLE / sizeof AMX_TABLE[0];
#endif
