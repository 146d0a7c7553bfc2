/* loss.c: the CPU device's range check of integer ids and its losses (dev_nn.h). Cross-entropy rows come
 * from the kernel table's xent rows over row ranges on the context's threads; mean squared error sums
 * squares in double per fixed chunk. Each loss is reduced here to its 0-dim value (the per-row losses or
 * the chunk partials added in order in double, divided once, rounded to F32 and then to the loss's
 * dtype), and each backward reads the loss's gradient from device memory itself, so the host never
 * waits for a loss value it does not ask for. The cuts depend only on the sizes, so the bits do not
 * depend on the thread count. */
#include "../device.h"

#include <math.h>

ampc_status ampci_cpu_index_check(ampc_ctx *ctx, const ampci_index_check_args *a) {
    (void)ctx;
    int64_t bad = -1, value = 0, kept = 0;
    for (int64_t i = 0; i < a->n; i++) {
        int64_t v = a->ids[i];
        if (a->has_ignore && v == a->ignore_index) continue;
        if (v < 0 || v >= a->limit) {
            bad = i, value = v;
            break;
        }
        kept++;
    }
    a->result[0] = bad, a->result[1] = value, a->result[2] = kept;
    return AMPC_OK;
}

/* A 0-dim loss of dtype dt = v rounded to F32, then once to dt. */
static ampc_status put_loss(ampc_ctx *ctx, void *loss, ampc_dtype dt, double v) {
    float f = (float)v;
    return ampci_convert_with(ctx->kernels, loss, dt, &f, AMPC_DTYPE_F32, 1);
}

/* ---- cross-entropy ---- */

/* Rows [r0, r1) of the per-row losses (and log-sum-exps), or of the backward into out = gx. */
typedef struct xent_rows {
    const struct ampc_kernels *k;
    float *out, *lse; /* forward: out = per-row loss; backward: out = gx */
    const float *x;
    const int64_t *t;
    int64_t cols, ignore_index;
    float scale;
    bool backward;
} xent_rows;

AMPCI_ROW_BODY(xent_run, xent_rows, j, r0, r1, chunk) {
    if (j->backward)
        j->k->xent_bw(j->out + r0 * j->cols, j->x + r0 * j->cols, j->lse + r0, j->t + r0, r1 - r0, j->cols,
                      j->ignore_index, j->scale);
    else j->k->xent(j->out + r0, j->lse + r0, j->x + r0 * j->cols, j->t + r0, r1 - r0, j->cols, j->ignore_index);
}

ampc_status ampci_cpu_cross_entropy(ampc_ctx *ctx, const ampci_cross_entropy_args *a) {
    float *loss = ampci_step_alloc(ctx, (size_t)(a->rows > 0 ? a->rows : 1) * sizeof *loss, "cross-entropy rows");
    if (!loss) return ampc_last_status();
    ampci_parallel_rows(
        ctx, a->rows, a->cols, xent_run,
        &(xent_rows){ctx->kernels, loss, a->lse, a->logits, a->targets, a->cols, a->ignore_index, 0.0f, false});
    double total = 0.0; /* ignored rows hold 0 */
    for (int64_t r = 0; r < a->rows; r++) total += loss[r];
    ampci_step_free(ctx, loss);
    return put_loss(ctx, a->loss, a->loss_dt, a->kept ? total / (double)a->kept : NAN);
}

ampc_status ampci_cpu_cross_entropy_bw(ampc_ctx *ctx, const ampci_cross_entropy_bw_args *a) {
    /* d loss / d logits = (softmax - onehot) / kept on kept rows; ignored rows (all of them when kept is
     * 0, where the loss is NaN) get 0 */
    float scale = a->kept ? (float)((double)a->g[0] / (double)a->kept) : 0.0f;
    ampci_parallel_rows(ctx, a->rows, a->cols, xent_run,
                        &(xent_rows){ctx->kernels, a->gx, (float *)a->lse, a->logits, a->targets, a->cols,
                                     a->ignore_index, scale, true});
    return AMPC_OK;
}

/* ---- mean squared error ---- */

/* Elements [b, e): the forward's sum of squares of chunk `chunk` into partial[chunk], or (gx set) the
 * backward's gx = (x - t) * scale and gt = -gx (when set). */
typedef struct mse_map {
    const float *x, *t;
    double *partial;
    float *gx, *gt;
    float scale;
} mse_map;

AMPCI_ROW_BODY(mse_run, mse_map, j, b, e, chunk) {
    if (j->gx) {
        for (int64_t i = b; i < e; i++) j->gx[i] = (j->x[i] - j->t[i]) * j->scale;
        if (j->gt)
            for (int64_t i = b; i < e; i++) j->gt[i] = -j->gx[i];
        return;
    }
    double s = 0.0;
    for (int64_t i = b; i < e; i++) {
        double d = (double)j->x[i] - (double)j->t[i];
        s += d * d;
    }
    j->partial[chunk] = s;
}

ampc_status ampci_cpu_mse_loss(ampc_ctx *ctx, const ampci_mse_loss_args *a) {
    int64_t nchunks = ampc_parallel_chunks(a->n, ampci_row_grain(1));
    double *partial = ampci_step_alloc(ctx, (size_t)(nchunks > 0 ? nchunks : 1) * sizeof *partial, "mse partials");
    if (!partial) return ampc_last_status();
    ampci_parallel_rows(ctx, a->n, 1, mse_run, &(mse_map){a->x, a->t, partial, NULL, NULL, 0.0f});
    double total = 0.0;
    for (int64_t k = 0; k < nchunks; k++) total += partial[k];
    ampci_step_free(ctx, partial);
    return put_loss(ctx, a->loss, a->loss_dt, a->n ? total / (double)a->n : NAN);
}

ampc_status ampci_cpu_mse_loss_bw(ampc_ctx *ctx, const ampci_mse_loss_bw_args *a) {
    float scale = (float)(2.0 * (double)a->g[0] / (double)a->n); /* d/dx mean((x - t)^2) = 2 (x - t) / n */
    ampci_parallel_rows(ctx, a->n, 1, mse_run, &(mse_map){a->x, a->t, NULL, a->gx, a->gt, scale});
    return AMPC_OK;
}
