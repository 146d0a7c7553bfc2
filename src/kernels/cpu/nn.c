/* nn.c: the CPU device's embedding, positional encoding and dropout (dev_nn.h). The lookup copies weight
 * rows in their own dtype over row ranges; its backward scatter-adds gradient rows through the kernel
 * table by column blocks, each block walking every id in order, so repeated ids sum the same way on any
 * split. The positional table is built in step memory for the call and added in F32; dropout draws
 * element i's uniform from counter-based RNG position i. Every cut depends only on the sizes, so the bits
 * do not depend on the thread count. */
#include "../device.h"

#include <math.h>
#include <string.h>

#define COL_BLOCK 64 /* columns per parallel block of the gradient scatter */
#define PIECE 256    /* uniforms drawn per step of a dropout range */

/* ---- embedding ---- */

/* Rows [r0, r1) of out = the weight rows the ids pick (row_bytes each, any dtype). */
typedef struct gather_rows {
    unsigned char *out;
    const unsigned char *w;
    const int64_t *ids;
    size_t row_bytes;
} gather_rows;

AMPCI_ROW_BODY(gather_run, gather_rows, j, r0, r1, chunk) {
    for (int64_t i = r0; i < r1; i++)
        memcpy(j->out + (size_t)i * j->row_bytes, j->w + (size_t)j->ids[i] * j->row_bytes, j->row_bytes);
}

ampc_status ampci_cpu_embedding(ampc_ctx *ctx, const ampci_embedding_args *a) {
    ampci_parallel_rows(ctx, a->n, a->cols, gather_run,
                        &(gather_rows){a->out, a->w, a->ids, (size_t)a->cols * ampc_dtype_size(a->dt)});
    return AMPC_OK;
}

/* Column blocks [c0, c1) of the scatter-add gw (V, cols) += gy rows at the ids. */
typedef struct scatter_cols {
    ampc_k_embedding_bw_fn fn;
    const ampci_embedding_bw_args *a;
} scatter_cols;

AMPCI_ROW_BODY(scatter_run, scatter_cols, j, c0, c1, chunk) {
    const ampci_embedding_bw_args *a = j->a;
    j->fn(a->gw + c0, a->gy + c0, a->ids, a->n, c1 - c0, a->cols);
}

ampc_status ampci_cpu_embedding_bw(ampc_ctx *ctx, const ampci_embedding_bw_args *a) {
    memset(a->gw, 0, (size_t)(a->rows * a->cols) * sizeof *a->gw);
    ampc_parallel_for(ctx, a->cols, COL_BLOCK, scatter_run, &(scatter_cols){ctx->kernels->embedding_bw, a});
    return AMPC_OK;
}

/* ---- positional encoding ---- */

/* PE (T, D) into pe, evaluated in double and rounded to F32 (the op adds in F32). */
static void pe_table(float *pe, int64_t T, int64_t D) {
    for (int64_t j = 0; j < D; j++) {
        double inv_freq = pow(10000.0, -(double)(j - j % 2) / (double)D);
        for (int64_t t = 0; t < T; t++) {
            double a = (double)t * inv_freq;
            pe[t * D + j] = (float)(j % 2 ? cos(a) : sin(a));
        }
    }
}

/* Elements [b, e) of y = x + PE, PE repeating every td = T * D elements of the flat index. */
typedef struct pe_map {
    float *y;
    const float *x, *pe;
    int64_t td;
} pe_map;

AMPCI_ROW_BODY(pe_run, pe_map, j, b, e, chunk) {
    for (int64_t i = b; i < e; i++) j->y[i] = j->x[i] + j->pe[i % j->td];
}

ampc_status ampci_cpu_positional_encoding(ampc_ctx *ctx, const ampci_positional_encoding_args *a) {
    int64_t td = a->T * a->D;
    float *pe = ampci_step_alloc(ctx, (size_t)(td > 0 ? td : 1) * sizeof *pe, "positional encoding table");
    if (!pe) return ampc_last_status();
    pe_table(pe, a->T, a->D);
    if (a->n) ampci_parallel_rows(ctx, a->n, 1, pe_run, &(pe_map){a->y, a->x, pe, td});
    ampci_step_free(ctx, pe);
    return AMPC_OK;
}

/* ---- dropout ---- */

/* Elements [b, e) of y = x masked and scaled. */
AMPCI_ROW_BODY(dropout_run, ampci_dropout_args, j, b, e, chunk) {
    float u[PIECE];
    for (int64_t i = b; i < e; i += PIECE) {
        int64_t m = e - i < PIECE ? e - i : PIECE;
        ampci_rng_uniform_range(&j->rng, u, i, i + m, 0.0f, 1.0f);
        for (int64_t k = 0; k < m; k++) j->y[i + k] = (double)u[k] >= j->p ? j->x[i + k] * j->scale : 0.0f;
    }
}

ampc_status ampci_cpu_dropout(ampc_ctx *ctx, const ampci_dropout_args *a) {
    ampci_parallel_rows(ctx, a->n, 1, dropout_run, a);
    return AMPC_OK;
}
