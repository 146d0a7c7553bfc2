/* gemm_ref.c: the reference GEMM for F32, F16 and BF16 operands. op(a) and op(b) are first unpacked to
 * F32 rows (op(a) row-major (M, K), op(b) column-major, i.e. (N, K)); every product of two F16 or BF16
 * values is exact in F32, so the only roundings are the F32 additions. Each dot product sums in a fixed
 * order (8 interleaved partial sums, then a fixed tree), so a result never depends on the thread count:
 * threads split the rows of c. The write-out (kernels.h) adds the bias after the whole sum and rounds
 * to c16's dtype with the scalar conversions of half.h. Also the oracles of the split F32 slots (one or
 * three BF16 passes). */
#include "../../numerics/half.h"
#include "../driver_util.h" /* gemm_put: the write-out every GEMM shares */
#include "kernels_ref.h"

#include <math.h>
#include <string.h>

#define ROWS_PER_TASK 16

/* Element i of a row of dtype dt, as F32. */
static float load_f32(ampc_dtype dt, const void *p, int64_t i) {
    if (dt == AMPC_DTYPE_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return ampci_f32_from_bits(dt == AMPC_DTYPE_F16 ? ampci_f16_to_f32_bits(h) : ampci_bf16_to_f32_bits(h));
}

/* out (rows, len) F32 = rows of a matrix whose element (r, j) is at p[r * rs + j * cs]. */
static void unpack(ampc_dtype dt, const void *p, int64_t rs, int64_t cs, int64_t rows, int64_t len, float *out) {
    size_t es = ampc_dtype_size(dt);
    for (int64_t r = 0; r < rows; r++) {
        const unsigned char *row = (const unsigned char *)p + (size_t)(r * rs) * es;
        if (cs == 1 && dt != AMPC_DTYPE_F32) { /* the ref conversions: never another level's code */
            (dt == AMPC_DTYPE_F16 ? ampc_k_cvt_f32f16__ref : ampc_k_cvt_f32bf16__ref)(out + r * len, row, (size_t)len);
        } else if (cs == 1) {
            memcpy(out + r * len, row, (size_t)len * sizeof *out);
        } else {
            for (int64_t j = 0; j < len; j++) out[r * len + j] = load_f32(dt, row, j * cs);
        }
    }
}

static float dot(const float *x, const float *y, int64_t K) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int j = 0; j < 8; j++) acc[j] += x[k + j] * y[k + j];
    for (int j = 0; k < K; k++, j++) acc[j] += x[k] * y[k];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

typedef struct gemm_task {
    const ampci_gemm *g;
    ampc_dtype dt;
    const float *bt; /* (N, K) */
    float *scratch;  /* ROWS_PER_TASK * K per chunk */
} gemm_task;

static void rows_task(void *arg, int64_t m0, int64_t m1, int64_t chunk) {
    (void)chunk;
    const gemm_task *t = arg;
    const ampci_gemm *g = t->g;
    float *ap = t->scratch + chunk * ROWS_PER_TASK * g->K;
    size_t es = ampc_dtype_size(t->dt);
    const unsigned char *a0 = (const unsigned char *)g->a + (size_t)(g->ta ? m0 : m0 * g->lda) * es;
    unpack(t->dt, a0, g->ta ? 1 : g->lda, g->ta ? g->lda : 1, m1 - m0, g->K, ap);
    for (int64_t m = m0; m < m1; m++) {
        const float *arow = ap + (m - m0) * g->K;
        for (int64_t n = 0; n < g->N; n++) gemm_put(g, m, n, dot(arow, t->bt + n * g->K, g->K));
    }
}

static ampc_status gemm_ref(ampc_ctx *ctx, const ampci_gemm *g, ampc_dtype dt) {
    if (g->M == 0 || g->N == 0) return AMPC_OK;
    /* packed op(b) (N, K), then per-chunk rows of op(a): one allocation for both */
    int64_t chunks = ampc_parallel_chunks(g->M, ROWS_PER_TASK);
    size_t bfloats = (size_t)(g->N * g->K), afloats = (size_t)(chunks * ROWS_PER_TASK * g->K);
    size_t bytes = (bfloats + afloats) * sizeof(float);
    float *bt = ampci_alloc(ctx, bytes, "gemm (ref) packed operands");
    if (!bt) return AMPC_STATUS_OOM;
    unpack(dt, g->b, g->tb ? g->ldb : 1, g->tb ? 1 : g->ldb, g->N, g->K, bt);
    gemm_task t = {g, dt, bt, bt + bfloats};
    ampc_parallel_for(ctx, g->M, ROWS_PER_TASK, rows_task, &t);
    ampci_free(ctx, bt, bytes);
    return AMPC_OK;
}

ampc_status ampc_k_gemm_f32f32__ref(ampc_ctx *ctx, const ampci_gemm *g) { return gemm_ref(ctx, g, AMPC_DTYPE_F32); }
ampc_status ampc_k_gemm_f16f32__ref(ampc_ctx *ctx, const ampci_gemm *g) { return gemm_ref(ctx, g, AMPC_DTYPE_F16); }
ampc_status ampc_k_gemm_bf16f32__ref(ampc_ctx *ctx, const ampci_gemm *g) { return gemm_ref(ctx, g, AMPC_DTYPE_BF16); }

/* ---- the split F32 GEMM references: the oracles of the gemm_f32_bf16x1/x3 slots, never run by ops (at
 * the ref level F32 GEMMs stay F32 whatever the precision setting) ---- */

/* x = hi + lo exactly when |x| is within BF16's range: hi = x rounded to BF16, lo = the rest rounded to
 * BF16 (so hi + lo keeps 16 of F32's 24 significand bits). Infinite or NaN hi: lo = 0, so inf and NaN
 * pass through hi alone. */
static void split_bf16(float x, float *hi, float *lo) {
    *hi = ampci_f32_from_bits(ampci_bf16_to_f32_bits(ampc_bf16_from_f32(x)));
    float r = x - *hi;
    *lo = isfinite(*hi) ? ampci_f32_from_bits(ampci_bf16_to_f32_bits(ampc_bf16_from_f32(r))) : 0.0f;
}

static ampc_status split_ref(ampc_ctx *ctx, const ampci_gemm *g, int passes) {
    size_t bytes = (size_t)((g->M + g->N) * g->K) * sizeof(float);
    float *at = ampci_alloc(ctx, bytes ? bytes : 1, "gemm (split ref) operands");
    if (!at) return AMPC_STATUS_OOM;
    float *bt = at + g->M * g->K;
    unpack(AMPC_DTYPE_F32, g->a, g->ta ? 1 : g->lda, g->ta ? g->lda : 1, g->M, g->K, at);
    unpack(AMPC_DTYPE_F32, g->b, g->tb ? g->ldb : 1, g->tb ? 1 : g->ldb, g->N, g->K, bt);
    for (int64_t m = 0; m < g->M; m++)
        for (int64_t n = 0; n < g->N; n++) {
            double s = 0; /* every partial product is exact in F32; only this sum rounds, once */
            for (int64_t k = 0; k < g->K; k++) {
                float ah, al, bh, bl;
                split_bf16(at[m * g->K + k], &ah, &al);
                split_bf16(bt[n * g->K + k], &bh, &bl);
                s += (double)(ah * bh);
                /* with an infinite or NaN hi the cross terms would add inf * 0 = NaN to an inf product */
                if (passes == 3 && isfinite(ah) && isfinite(bh)) s += (double)(ah * bl) + (double)(al * bh);
            }
            gemm_put(g, m, n, (float)s);
        }
    ampci_free(ctx, at, bytes ? bytes : 1);
    return AMPC_OK;
}

ampc_status ampc_k_gemm_f32_bf16x1__ref(ampc_ctx *ctx, const ampci_gemm *g) { return split_ref(ctx, g, 1); }
ampc_status ampc_k_gemm_f32_bf16x3__ref(ampc_ctx *ctx, const ampci_gemm *g) { return split_ref(ctx, g, 3); }
