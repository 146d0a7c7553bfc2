/* norm.c: the CPU device's row normalisations (dev_nn.h): softmax, log_softmax and layer norm with their
 * gradients. The row kernels of the context's table run over row ranges on the context's threads, cut
 * by ampci_parallel_rows (a cut that depends only on the sizes), and every row is computed on its own, so
 * results do not depend on the thread count. Layer norm's weight and bias gradients are summed per
 * fixed chunk of rows into partials (step memory held while the operation runs), then the partials are
 * added in chunk order in double. */
#include "../device.h"

#define MAX_PARTIALS 64 /* chunks of layer norm's weight/bias gradient sums */

/* ---- softmax / log_softmax ---- */

/* Rows [r0, r1) of softmax, or of its backward when g (the output gradient) is set: x is then the saved
 * output. */
typedef struct softmax_rows {
    const struct ampc_kernels *k;
    float *out;
    const float *x, *g;
    int64_t cols;
    bool log;
} softmax_rows;

AMPCI_ROW_BODY(softmax_run, softmax_rows, j, r0, r1, chunk) {
    int64_t o = r0 * j->cols;
    if (j->g) j->k->softmax_bw(j->out + o, j->g + o, j->x + o, r1 - r0, j->cols, j->log);
    else j->k->softmax(j->out + o, j->x + o, r1 - r0, j->cols, j->log);
}

ampc_status ampci_cpu_softmax(ampc_ctx *ctx, const ampci_softmax_args *a) {
    ampci_parallel_rows(ctx, a->rows, a->cols, softmax_run,
                        &(softmax_rows){ctx->kernels, a->y, a->x, NULL, a->cols, a->log});
    return AMPC_OK;
}

ampc_status ampci_cpu_softmax_bw(ampc_ctx *ctx, const ampci_softmax_bw_args *a) {
    ampci_parallel_rows(ctx, a->rows, a->cols, softmax_run,
                        &(softmax_rows){ctx->kernels, a->gx, a->y, a->gy, a->cols, a->log});
    return AMPC_OK;
}

/* ---- layer norm ---- */

/* Rows [r0, r1) of layer norm, or of its backward when g (the output gradient) is set: then chunk
 * `chunk`'s weight and bias gradient sums go to row `chunk` of gw_part and gb_part (when wanted). */
typedef struct layernorm_rows {
    const struct ampc_kernels *k;
    float *out, *mean, *rstd;
    const float *x, *w, *b, *g;
    float *gw_part, *gb_part; /* (chunks, cols) or NULL */
    int64_t cols;
    float eps;
} layernorm_rows;

AMPCI_ROW_BODY(layernorm_run, layernorm_rows, j, r0, r1, chunk) {
    int64_t o = r0 * j->cols, m = r1 - r0;
    if (!j->g) {
        j->k->layernorm(j->out + o, j->mean + r0, j->rstd + r0, j->x + o, j->w, j->b, m, j->cols, j->eps);
        return;
    }
    float *gw = j->gw_part ? j->gw_part + chunk * j->cols : NULL,
          *gb = j->gb_part ? j->gb_part + chunk * j->cols : NULL;
    j->k->layernorm_bw(j->out + o, gw, gb, j->g + o, j->x + o, j->mean + r0, j->rstd + r0, j->w, m, j->cols);
}

ampc_status ampci_cpu_layer_norm(ampc_ctx *ctx, const ampci_layer_norm_args *a) {
    layernorm_rows j = {ctx->kernels, a->y, a->mean, a->rstd, a->x, a->w, a->b, NULL, NULL, NULL, a->cols, a->eps};
    ampci_parallel_rows(ctx, a->rows, a->cols, layernorm_run, &j);
    return AMPC_OK;
}

/* dst (cols) = sum over the chunks of part (nchunks, cols), in chunk order, in double. */
static void sum_partials(float *dst, const float *part, int64_t nchunks, int64_t cols) {
    for (int64_t c = 0; c < cols; c++) {
        double s = 0.0;
        for (int64_t i = 0; i < nchunks; i++) s += part[i * cols + c];
        dst[c] = (float)s;
    }
}

/* (chunks, cols) floats of partials when wanted (*p stays NULL when not); false on OOM. */
static bool partials(ampc_ctx *ctx, bool want, int64_t n, float **p) {
    *p = want ? ampci_step_alloc(ctx, (size_t)(n > 0 ? n : 1) * sizeof(float), "layer norm gradient partials") : NULL;
    return !want || *p;
}

ampc_status ampci_cpu_layer_norm_bw(ampc_ctx *ctx, const ampci_layer_norm_bw_args *a) {
    /* fewer, larger chunks when column sums are needed, so the partials stay small */
    int64_t grain = ampci_row_grain(a->cols);
    if ((a->gw || a->gb) && grain * MAX_PARTIALS < a->rows) grain = (a->rows + MAX_PARTIALS - 1) / MAX_PARTIALS;
    int64_t nchunks = ampc_parallel_chunks(a->rows, grain), npart = nchunks * a->cols;
    layernorm_rows j = {ctx->kernels, a->gx, (float *)a->mean, (float *)a->rstd, a->x, a->w, NULL, a->gy, NULL, NULL,
                        a->cols,      0.0f};
    if (!partials(ctx, a->gw != NULL, npart, &j.gw_part) || !partials(ctx, a->gb != NULL, npart, &j.gb_part)) {
        ampci_step_free(ctx, j.gw_part);
        return ampc_last_status();
    }
    ampc_parallel_for(ctx, a->rows, grain, layernorm_run, &j);
    if (a->gw) sum_partials(a->gw, j.gw_part, nchunks, a->cols);
    if (a->gb) sum_partials(a->gb, j.gb_part, nchunks, a->cols);
    ampci_step_free(ctx, j.gb_part); /* NULL: nothing */
    ampci_step_free(ctx, j.gw_part);
    return AMPC_OK;
}
