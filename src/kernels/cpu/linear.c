/* linear.c: the CPU device's GEMM-like operations (dev_linear.h): batched GEMMs through the GEMM that
 * ampci_gemm_fn names for the operands' dtype and the context's FP32 matmul precision (one call per batch,
 * in batch order, so a block shared by several batches sums them in that order; batches against one
 * shared b that lie row after row are one call), the bias gradient's
 * column sums in double (by row blocks), and attention through the kernel table's attention slots. */
#include "../device.h"

#include <string.h>

/* The batches as one GEMM of nb0 * nb1 * M rows, when b is shared and a's and c's batches are row blocks
 * one after the other (a batched matmul against one matrix, e.g. a language model's head): the threads
 * then split the whole product, where small batches one by one would each run on one. Every c row is the
 * same dot products either way. */
static bool fold_batches(const ampci_gemm_args *a, ampci_gemm *g) {
    const ampci_gemm *b = &a->g;
    int64_t nb = a->nb[0] * a->nb[1];
    if (nb <= 1 || a->bs[0] || a->bs[1] || b->ta) return false;
    bool a_rows = (a->nb[1] == 1 || a->as[1] == b->M * b->lda) &&
                  (a->nb[0] == 1 || a->as[0] == a->nb[1] * b->M * b->lda);
    bool c_rows = (a->nb[1] == 1 || a->cs[1] == b->M * b->ldc) &&
                  (a->nb[0] == 1 || a->cs[0] == a->nb[1] * b->M * b->ldc);
    if (!a_rows || !c_rows) return false;
    *g = *b;
    g->M = b->M * nb;
    return true;
}

ampc_status ampci_cpu_gemm(ampc_ctx *ctx, const ampci_gemm_args *a) {
    ampc_k_gemm_fn fn = ampci_gemm_fn(ctx, a->dt);
    ampci_gemm whole;
    if (fold_batches(a, &whole)) return fn(ctx, &whole);
    size_t es = ampc_dtype_size(a->dt);
    bool f32 = a->g.c16 == NULL;
    for (int64_t i = 0; i < a->nb[0]; i++)
        for (int64_t j = 0; j < a->nb[1]; j++) {
            ampci_gemm g = a->g;
            /* accumulate (beta 1) into a c block that an earlier batch already wrote */
            bool again = (a->cs[0] == 0 && i > 0) || (a->cs[1] == 0 && j > 0);
            int64_t at = i * a->cs[0] + j * a->cs[1];
            g.a = (const unsigned char *)g.a + (size_t)(i * a->as[0] + j * a->as[1]) * es;
            g.b = (const unsigned char *)g.b + (size_t)(i * a->bs[0] + j * a->bs[1]) * es;
            if (again) g.beta = 1.0f;
            if (f32) g.c += at;
            else g.c16 += at;
            ampc_status s = fn(ctx, &g);
            if (s != AMPC_OK) return s;
        }
    return AMPC_OK;
}

/* ---- column sums ----
 * The matrix is cut into tiles of COLSUM_ROWS rows x COLSUM_COLS columns. The kernel table's colsum adds
 * a tile's rows into double partial sums, in row order; the tiles go to the threads, and each column's
 * partials are then added in row-block order. Tiles in both directions give the threads work at every
 * shape (the GPT's 384-column gradients are 3 column blocks, but 24 tiles at 2048 rows); the cut depends
 * only on the shape, so a column's order, and its bits, never depend on the thread count. */
#define COLSUM_COLS 128
#define COLSUM_ROWS 256

typedef struct colsum_job {
    const struct ampc_kernels *k;
    const unsigned char *g;
    ampc_dtype dt;
    int64_t rows, cols, cblocks;
    double *part; /* (row blocks, cols): each tile's column sums */
} colsum_job;

/* tiles [t0, t1), row block major */
AMPCI_ROW_BODY(colsum_run, colsum_job, j, t0, t1, chunk) {
    size_t es = ampc_dtype_size(j->dt);
    for (int64_t t = t0; t < t1; t++) {
        int64_t rb = t / j->cblocks, c0 = t % j->cblocks * COLSUM_COLS, r0 = rb * COLSUM_ROWS;
        int64_t w = j->cols - c0 < COLSUM_COLS ? j->cols - c0 : COLSUM_COLS;
        int64_t r1 = j->rows - r0 < COLSUM_ROWS ? j->rows : r0 + COLSUM_ROWS;
        double *acc = j->part + rb * j->cols + c0;
        memset(acc, 0, (size_t)w * sizeof *acc);
        j->k->colsum[j->dt](acc, j->g + (size_t)(r0 * j->cols + c0) * es, j->cols, r1 - r0, w);
    }
}

ampc_status ampci_cpu_col_sum(ampc_ctx *ctx, const ampci_col_sum_args *a) {
    int64_t rblocks = ampc_parallel_chunks(a->rows, COLSUM_ROWS), cblocks = ampc_parallel_chunks(a->cols, COLSUM_COLS);
    colsum_job j = {ctx->kernels, a->g, a->dt, a->rows, a->cols, cblocks, NULL};
    size_t bytes = (size_t)(rblocks * a->cols) * sizeof *j.part;
    if (!bytes) {
        for (int64_t c = 0; c < a->cols; c++) a->out[c] = 0;
        return AMPC_OK;
    }
    if (!(j.part = ampci_alloc(ctx, bytes, "bias gradient partial sums"))) return AMPC_STATUS_OOM;
    ampci_parallel_rows(ctx, rblocks * cblocks, COLSUM_ROWS * COLSUM_COLS, colsum_run, &j); /* a tile per chunk */
    for (int64_t c = 0; c < a->cols; c++) {
        double s = j.part[c];
        for (int64_t rb = 1; rb < rblocks; rb++) s += j.part[rb * a->cols + c];
        a->out[c] = (float)s;
    }
    ampci_free(ctx, j.part, bytes);
    return AMPC_OK;
}

/* ---- attention ---- */

ampc_status ampci_cpu_attention(ampc_ctx *ctx, const ampci_attention_args *a) {
    return ctx->kernels->attention(ctx, &a->a, a->o, a->stats);
}

ampc_status ampci_cpu_attention_bw(ampc_ctx *ctx, const ampci_attention_bw_args *a) {
    return ctx->kernels->attention_bw(ctx, &a->a, a->stats, a->go, a->gq, a->gk, a->gv);
}
