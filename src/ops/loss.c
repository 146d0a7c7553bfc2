/* loss.c: cross-entropy over class logits (with ignore_index) and the mean squared error, both reducing
 * to a 0-dim tensor of the input's dtype on the device (kernels/dev_nn.h): per-row cross-entropy terms
 * come from the kernel table's xent rows (which also keep each row's log-sum-exp for the backward);
 * every mean is accumulated in double over fixed chunks added in chunk order, so the loss does not
 * depend on the thread count. Class targets are converted to int64 and range-checked on the device; the
 * host reads the check's result once. The backward reads the loss's gradient on the device. */
#include "ops.h"

#include <string.h>

/* ---- integer class indices ---- */

/* targets as int64 (device memory: what the kernels read and the node saves), after checking it is an
 * (N) I32/I64 tensor of ctx and every value is a class in [0, C) or ignore_index (on the device, the
 * result read at one synchronisation point). *kept counts the latter's complement. */
static int64_t *class_targets(ampc_ctx *ctx, const char *op, const ampc_tensor *logits, const ampc_tensor *t,
                              int64_t ignore_index, int64_t *kept) {
    char a[128], b[128];
    if (!ampci_op_index_input(ctx, op, t, "targets", " class indices")) return NULL;
    int64_t N = logits->shape[0], C = logits->shape[1];
    if (t->ndim != 1 || t->shape[0] != N)
        return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: targets %s for logits %s; expected targets (N) = (%lld)", op,
                               ampc_tensor_describe(t, a, sizeof a), ampc_tensor_describe(logits, b, sizeof b),
                               (long long)N);
    int64_t r[3];
    int64_t *v = ampci_ids_checked(ctx, op, t, C, true, ignore_index, r);
    if (!v) return NULL;
    if (r[0] >= 0)
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG,
                               "%s: target %lld at index %lld is not a class of logits %s "
                               "(expected 0 <= target < C = %lld, or ignore_index %lld)",
                               op, (long long)r[1], (long long)r[0], ampc_tensor_describe(logits, b, sizeof b),
                               (long long)C, (long long)ignore_index);
    *kept = r[2];
    return v;
}

/* ---- cross-entropy ---- */

typedef struct xent_saved {
    float *lse;       /* (N) log-sum-exp of each row, device memory */
    int64_t *targets; /* (N) validated, device memory */
    int64_t rows, cols, kept, ignore_index;
} xent_saved;

static ampc_status xent_backward(ampci_node *n, const ampc_tensor *gout) {
    const xent_saved *sv = n->saved;
    /* the loss's gradient stays on the device: the operation reads its one value there */
    const float *g = ampci_as_f32(n->op, gout), *x = ampci_as_f32(n->op, n->in[0]);
    float *gx = ampci_scratch(n->ctx, n->op, sv->rows * sv->cols);
    if (!g || !x || !gx ||
        AMPCI_DEV(n->ctx, cross_entropy_bw, .gx = gx, .logits = x, .lse = sv->lse, .targets = sv->targets, .g = g,
                  .rows = sv->rows, .cols = sv->cols, .ignore_index = sv->ignore_index, .kept = sv->kept) != AMPC_OK)
        return ampc_last_status();
    return ampci_accumulate_f32(n->op, n->in[0], gx);
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
    static const int64_t none[1] = {1};
    ampc_tensor *out = ampci_output(op, ctx, logits->dtype, 0, none);
    sv.lse = ampci_scratch(ctx, op, sv.rows);
    const float *x = ampci_as_f32(op, logits);
    if (!out || !sv.lse || !x ||
        AMPCI_DEV(ctx, cross_entropy, .loss = ampci_dev_ptr(out), .loss_dt = logits->dtype, .lse = sv.lse, .logits = x,
                  .targets = sv.targets, .rows = sv.rows, .cols = sv.cols, .ignore_index = ignore_index,
                  .kept = sv.kept) != AMPC_OK)
        return NULL;
    return ampci_op_end(&c, out, &sv);
}

/* ---- mean squared error ---- */

static ampc_status mse_backward(ampci_node *n, const ampc_tensor *gout) {
    ampc_tensor *x = n->in[0], *t = n->in[1];
    int64_t cnt = ampci_numel(x);
    bool need_t = ampci_input_needs_grad(n, 1);
    /* the loss's gradient stays on the device: the operation reads its one value there */
    const float *g = ampci_as_f32(n->op, gout), *xf = ampci_as_f32(n->op, x), *tf = ampci_as_f32(n->op, t);
    float *gx = ampci_scratch(n->ctx, n->op, cnt), *gt = need_t ? ampci_scratch(n->ctx, n->op, cnt) : NULL;
    if (!g || !xf || !tf || !gx || (need_t && !gt) ||
        AMPCI_DEV(n->ctx, mse_loss_bw, .gx = gx, .gt = gt, .x = xf, .t = tf, .g = g, .n = cnt) != AMPC_OK)
        return ampc_last_status();
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) s = ampci_accumulate_f32(n->op, x, gx);
    if (s == AMPC_OK && need_t) s = ampci_accumulate_f32(n->op, t, gt);
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
    static const int64_t none[1] = {1};
    const float *xf = ampci_as_f32(op, x), *tf = ampci_as_f32(op, target);
    ampc_tensor *out = ampci_output(op, ctx, x->dtype, 0, none);
    if (!xf || !tf || !out ||
        AMPCI_DEV(ctx, mse_loss, .loss = ampci_dev_ptr(out), .loss_dt = x->dtype, .x = xf, .t = tf,
                  .n = ampci_numel(x)) != AMPC_OK)
        return NULL;
    return ampci_op_end(&c, out, NULL);
}
