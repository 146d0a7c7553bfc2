/* loss.c: cross-entropy over class logits (with ignore_index) and the mean squared error, both reducing
 * to a 0-dim tensor of the input's dtype. Per-row cross-entropy terms come from the kernel table's
 * xent rows (which also keep each row's log-sum-exp for the backward); every mean is accumulated in
 * double over fixed chunks added in chunk order, so the loss does not depend on the thread count. */
#include "ops.h"

#include <math.h>
#include <string.h>

/* One float value as a 0-dim tensor of dtype. */
static ampc_tensor *scalar_result(const char *op, ampc_ctx *ctx, ampc_dtype dtype, double v) {
    float *buf = ampci_scratch(ctx, op, 1);
    if (!buf) return NULL;
    buf[0] = (float)v;
    static const int64_t none[1] = {1};
    return ampci_result(op, ctx, dtype, 0, none, buf);
}

/* ---- integer class indices ---- */

/* targets as int64 (arena), after checking it is an (N) I32/I64 tensor of ctx and every value is a class
 * in [0, C) or ignore_index. *kept counts the latter's complement. */
static int64_t *class_targets(ampc_ctx *ctx, const char *op, const ampc_tensor *logits, const ampc_tensor *t,
                              int64_t ignore_index, int64_t *kept) {
    char a[128], b[128];
    if (!ampci_op_index_input(ctx, op, t, "targets", " class indices")) return NULL;
    int64_t N = logits->shape[0], C = logits->shape[1];
    if (t->ndim != 1 || t->shape[0] != N)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: targets %s for logits %s; expected targets (N) = (%lld)", op,
                               ampc_tensor_describe(t, a, sizeof a), ampc_tensor_describe(logits, b, sizeof b),
                               (long long)N);
    int64_t *v = ampci_arena_alloc(ctx, (size_t)(N > 0 ? N : 1) * sizeof *v, op);
    if (!v) return NULL;
    ampci_tensor_gather(t, v, AMPC_DTYPE_I64);
    *kept = 0;
    for (int64_t i = 0; i < N; i++) {
        if (v[i] == ignore_index) continue;
        if (v[i] < 0 || v[i] >= C)
            return ampci_fail_null(AMPC_STATUS_INVALID_ARG,
                                   "%s: target %lld at index %lld is not a class of logits %s "
                                   "(expected 0 <= target < C = %lld, or ignore_index %lld)",
                                   op, (long long)v[i], (long long)i, ampc_tensor_describe(logits, b, sizeof b),
                                   (long long)C, (long long)ignore_index);
        (*kept)++;
    }
    return v;
}

/* ---- cross-entropy ---- */

typedef struct xent_saved {
    float *lse;       /* (N) log-sum-exp of each row */
    int64_t *targets; /* (N) */
    int64_t rows, cols, kept, ignore_index;
} xent_saved;

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

static ampc_status xent_backward(ampci_node *n, const ampc_tensor *gout) {
    const xent_saved *sv = n->saved;
    const float *g = ampci_as_f32(n->op, gout);
    if (!g) return ampc_last_status();
    /* d loss / d logits = (softmax - onehot) / kept on kept rows; ignored rows (all of them when kept is
     * 0, where the loss is NaN) get 0 */
    float scale = sv->kept ? (float)((double)g[0] / (double)sv->kept) : 0.0f;
    xent_rows j = {n->ctx->kernels,
                   ampci_scratch(n->ctx, n->op, sv->rows * sv->cols),
                   sv->lse,
                   ampci_as_f32(n->op, n->in[0]),
                   sv->targets,
                   sv->cols,
                   sv->ignore_index,
                   scale,
                   true};
    if (!j.out || !j.x) return ampc_last_status();
    ampci_parallel_rows(n->ctx, sv->rows, sv->cols, xent_run, &j);
    return ampci_accumulate_f32(n->op, n->in[0], j.out);
}

static const ampci_op_desc cross_entropy_op = {
    "ampc_cross_entropy", AMPCI_OP_CROSS_ENTROPY,    2,           {"logits", "targets"},
    .index = 2u,          .backward = xent_backward, .saves = 1u, .saved_size = sizeof(xent_saved)};

ampc_tensor *ampc_cross_entropy(ampc_ctx *ctx, const ampc_tensor *logits, const ampc_tensor *targets,
                                int64_t ignore_index) {
    const char *op = cross_entropy_op.name;
    ampci_op_call c = {.op = &cross_entropy_op, .ctx = ctx, .in = {logits, targets}};
    if (!ampci_op_begin(&c)) return NULL;
    logits = c.in[0], targets = c.in[1];
    char a[128];
    if (logits->ndim != 2)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: logits %s; expected 2-D (N, C)", op,
                               ampc_tensor_describe(logits, a, sizeof a));
    xent_saved sv = {.rows = logits->shape[0], .cols = logits->shape[1], .ignore_index = ignore_index};
    sv.targets = class_targets(ctx, op, logits, targets, ignore_index, &sv.kept);
    if (!sv.targets) return NULL;
    float *loss = ampci_scratch(ctx, op, sv.rows);
    sv.lse = ampci_scratch(ctx, op, sv.rows);
    const float *x = ampci_as_f32(op, logits);
    if (!loss || !sv.lse || !x) return NULL;
    ampci_parallel_rows(ctx, sv.rows, sv.cols, xent_run,
                        &(xent_rows){ctx->kernels, loss, sv.lse, x, sv.targets, sv.cols, ignore_index, 0.0f, false});
    double total = 0.0; /* ignored rows hold 0 */
    for (int64_t r = 0; r < sv.rows; r++) total += loss[r];
    return ampci_op_end(&c, scalar_result(op, ctx, logits->dtype, sv.kept ? total / (double)sv.kept : NAN), &sv);
}

/* ---- mean squared error ---- */

/* Elements [b, e): the forward's sum of squares of chunk `chunk` into partial[chunk], or (gx set) the
 * backward's gx = (x - t) * scale. */
typedef struct mse_map {
    const float *x, *t;
    double *partial;
    float *gx;
    float scale;
} mse_map;

AMPCI_ROW_BODY(mse_run, mse_map, j, b, e, chunk) {
    if (j->gx) {
        for (int64_t i = b; i < e; i++) j->gx[i] = (j->x[i] - j->t[i]) * j->scale;
        return;
    }
    double s = 0.0;
    for (int64_t i = b; i < e; i++) {
        double d = (double)j->x[i] - (double)j->t[i];
        s += d * d;
    }
    j->partial[chunk] = s;
}

static ampc_status mse_backward(ampci_node *n, const ampc_tensor *gout) {
    ampc_tensor *x = n->in[0], *t = n->in[1];
    int64_t cnt = ampci_numel(x);
    const float *g = ampci_as_f32(n->op, gout);
    mse_map j = {ampci_as_f32(n->op, x), ampci_as_f32(n->op, t), NULL, ampci_scratch(n->ctx, n->op, cnt), 0.0f};
    if (!g || !j.x || !j.t || !j.gx) return ampc_last_status();
    j.scale = (float)(2.0 * (double)g[0] / (double)cnt); /* d/dx mean((x - t)^2) = 2 (x - t) / n */
    ampci_parallel_rows(n->ctx, cnt, 1, mse_run, &j);
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) s = ampci_accumulate_f32(n->op, x, j.gx);
    if (s == AMPC_OK && ampci_input_needs_grad(n, 1)) {
        float *gt = ampci_scratch(n->ctx, n->op, cnt);
        if (!gt) return ampc_last_status();
        for (int64_t i = 0; i < cnt; i++) gt[i] = -j.gx[i];
        s = ampci_accumulate_f32(n->op, t, gt);
    }
    return s;
}

static const ampci_op_desc mse_loss_op = {"ampc_mse_loss", AMPCI_OP_MSE_LOSS,        2,
                                          {"x", "target"}, .backward = mse_backward, .saves = 3u};

ampc_tensor *ampc_mse_loss(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *target) {
    const char *op = mse_loss_op.name;
    ampci_op_call c = {.op = &mse_loss_op, .ctx = ctx, .in = {x, target}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0], target = c.in[1];
    char a[128], b[128];
    if (x->ndim != target->ndim || memcmp(x->shape, target->shape, (size_t)x->ndim * sizeof x->shape[0]) != 0)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: x %s and target %s; expected equal shapes", op,
                               ampc_tensor_describe(x, a, sizeof a), ampc_tensor_describe(target, b, sizeof b));
    if (!ampci_same_dtype(op, x, "x", target, "target")) return NULL;
    int64_t cnt = ampci_numel(x), nchunks = ampc_parallel_chunks(cnt, ampci_row_grain(1));
    mse_map j = {ampci_as_f32(op, x), ampci_as_f32(op, target), NULL, NULL, 0.0f};
    j.partial = ampci_arena_alloc(ctx, (size_t)(nchunks > 0 ? nchunks : 1) * sizeof *j.partial, op);
    if (!j.x || !j.t || !j.partial) return NULL;
    ampci_parallel_rows(ctx, cnt, 1, mse_run, &j);
    double total = 0.0;
    for (int64_t k = 0; k < nchunks; k++) total += j.partial[k];
    return ampci_op_end(&c, scalar_result(op, ctx, x->dtype, cnt ? total / (double)cnt : NAN), NULL);
}
