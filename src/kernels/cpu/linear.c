/* linear.c: the CPU device's GEMM-like operations (dev_linear.h): batched GEMMs through the GEMM that
 * ampci_gemm_fn names for the operands' dtype and the context's FP32 matmul precision (one call per batch,
 * in batch order, so a block shared by several batches sums them in that order), the bias gradient's
 * column sums in double, and attention through the kernel table's attention slots. */
#include "../device.h"

ampc_status ampci_cpu_gemm(ampc_ctx *ctx, const ampci_gemm_args *a) {
    ampc_k_gemm_fn fn = ampci_gemm_fn(ctx, a->dt);
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
 * Rows are widened to F32 a piece at a time (in cache, by the kernel table's conversion) and added into
 * the double sums 8 columns at a time, which the compiler turns into vector code; blocks of columns go to
 * the threads (a column's order never changes, so neither do its bits). */
#define COLSUM_BLOCK 256

typedef struct colsum_job {
    const struct ampc_kernels *k;
    const unsigned char *g;
    ampc_dtype dt;
    int64_t rows, cols;
    float *out;
} colsum_job;

static void add_row(double *restrict acc, const float *restrict f, int64_t w) {
    int64_t c = 0;
    for (; c + 8 <= w; c += 8)
        for (int i = 0; i < 8; i++) acc[c + i] += (double)f[c + i];
    for (; c < w; c++) acc[c] += (double)f[c];
}

/* column blocks [b0, b1) */
AMPCI_ROW_BODY(colsum_run, colsum_job, j, b0, b1, chunk) {
    size_t es = ampc_dtype_size(j->dt);
    for (int64_t c0 = b0 * COLSUM_BLOCK; c0 < b1 * COLSUM_BLOCK && c0 < j->cols; c0 += COLSUM_BLOCK) {
        int64_t w = j->cols - c0 < COLSUM_BLOCK ? j->cols - c0 : COLSUM_BLOCK;
        double acc[COLSUM_BLOCK] = {0};
        float row[COLSUM_BLOCK];
        for (int64_t r = 0; r < j->rows; r++) {
            const unsigned char *src = j->g + (size_t)(r * j->cols + c0) * es;
            if (j->dt != AMPC_DTYPE_F32) ampci_convert_with(j->k, row, AMPC_DTYPE_F32, src, j->dt, (size_t)w);
            add_row(acc, j->dt == AMPC_DTYPE_F32 ? (const float *)src : row, w);
        }
        for (int64_t c = 0; c < w; c++) j->out[c0 + c] = (float)acc[c];
    }
}

ampc_status ampci_cpu_col_sum(ampc_ctx *ctx, const ampci_col_sum_args *a) {
    colsum_job j = {ctx->kernels, a->g, a->dt, a->rows, a->cols, a->out};
    int64_t blocks = (a->cols + COLSUM_BLOCK - 1) / COLSUM_BLOCK;
    ampci_parallel_rows(ctx, blocks, a->rows * COLSUM_BLOCK, colsum_run, &j); /* a block per chunk */
    return AMPC_OK;
}

/* ---- attention ---- */

ampc_status ampci_cpu_attention(ampc_ctx *ctx, const ampci_attention_args *a) {
    return ctx->kernels->attention(ctx, &a->a, a->o, a->stats);
}

ampc_status ampci_cpu_attention_bw(ampc_ctx *ctx, const ampci_attention_bw_args *a) {
    return ctx->kernels->attention_bw(ctx, &a->a, a->stats, a->go, a->gq, a->gk, a->gv);
}
