/* norm.c: softmax and log_softmax over any dim, and layer norm over the last dim. The input is staged
 * as F32 rows with the reduced dim last (a transposed gather when it is not last already), the device's
 * row operations run (kernels/dev_nn.h: the row kernels over row ranges in parallel), and the result is
 * moved back and rounded once to the input's dtype. Every row is computed on its own (sums in double
 * inside the kernels), so results do not depend on the thread count; layer norm's weight and bias
 * gradients are summed over fixed row chunks and the chunk partials added in chunk order (on the
 * device). */
#include "ops.h"

#include <math.h>
#include <string.h>

/* ---- staging with the reduced dim last ---- */

/* t's elements as F32 in the layout of t with dims d and last swapped, row-major: rows along dim d. */
static const float *stage_dim_last(const char *op, const ampc_tensor *t, int d) {
    if (d == t->ndim - 1) return ampci_as_f32(op, t);
    ampc_tensor *v = ampci_transpose(op, t, d, t->ndim - 1);
    float *buf = v ? ampci_scratch(t->ctx, op, ampci_numel(t)) : NULL;
    return buf && ampci_tensor_gather(v, buf, AMPC_DTYPE_F32) == AMPC_OK ? buf : NULL;
}

/* The inverse: buf (rows along dim d, as made by stage_dim_last for a tensor shaped like `like`) back in
 * like's row-major order. Returns buf itself when d is the last dim. */
static float *unstage_dim_last(const char *op, const ampc_tensor *like, int d, float *buf) {
    if (!buf || d == like->ndim - 1) return buf;
    int last = like->ndim - 1;
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, like->shape, sizeof shape);
    shape[d] = like->shape[last], shape[last] = like->shape[d];
    ampc_tensor *w = ampci_tensor_wrap(op, like->ctx, AMPC_DTYPE_F32, like->ndim, shape, buf);
    ampc_tensor *v = w ? ampci_transpose(op, w, d, last) : NULL;
    float *out = v ? ampci_scratch(like->ctx, op, ampci_numel(like)) : NULL;
    return out && ampci_tensor_gather(v, out, AMPC_DTYPE_F32) == AMPC_OK ? out : NULL;
}

/* ---- softmax / log_softmax ---- */

typedef struct softmax_saved {
    int dim; /* normalised; -1 for a 0-dim input */
    bool log;
} softmax_saved;

static int64_t dim_extent(const ampc_tensor *t, int d) { return d < 0 ? 1 : t->shape[d]; }

static ampc_status softmax_backward(ampci_node *n, const ampc_tensor *gout) {
    const softmax_saved *sv = n->saved;
    ampc_tensor *x = n->in[0];
    int64_t numel = ampci_numel(x), cols = dim_extent(x, sv->dim), rows = cols ? numel / cols : 0;
    const float *g = stage_dim_last(n->op, gout, sv->dim), *y = g ? stage_dim_last(n->op, n->out, sv->dim) : NULL;
    float *gx = y ? ampci_scratch(n->ctx, n->op, numel) : NULL;
    if (!gx ||
        AMPCI_DEV(n->ctx, softmax_bw, .gx = gx, .gy = g, .y = y, .rows = rows, .cols = cols, .log = sv->log) != AMPC_OK)
        return ampc_last_status();
    return ampci_accumulate_f32(n->op, x, unstage_dim_last(n->op, x, sv->dim, gx));
}

static const ampci_op_desc softmax_op = {"ampc_softmax",
                                         AMPCI_OP_SOFTMAX,
                                         1,
                                         {"input"},
                                         .backward = softmax_backward,
                                         .saves = AMPCI_SAVES_OUT,
                                         .saved_size = sizeof(softmax_saved)};
static const ampci_op_desc log_softmax_op = {"ampc_log_softmax",
                                             AMPCI_OP_LOG_SOFTMAX,
                                             1,
                                             {"input"},
                                             .backward = softmax_backward,
                                             .saves = AMPCI_SAVES_OUT,
                                             .saved_size = sizeof(softmax_saved)};

static ampc_tensor *softmax(ampc_ctx *ctx, const ampc_tensor *x, int dim, bool log) {
    ampci_op_call c = {.op = log ? &log_softmax_op : &softmax_op, .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    const char *op = c.op->name;
    /* a 0-dim tensor is one row of one element, reachable as dim 0 or -1 (as in PyTorch) */
    bool scalar = x->ndim == 0 && (dim == 0 || dim == -1);
    int d = scalar ? -1 : ampci_wrap_dim(op, x, dim);
    if (d < 0 && !scalar) return NULL;
    int64_t numel = ampci_numel(x), cols = dim_extent(x, d), rows = cols ? numel / cols : 0;
    const float *xf = stage_dim_last(op, x, d);
    float *y = xf ? ampci_scratch(ctx, op, numel) : NULL;
    if (!y || AMPCI_DEV(ctx, softmax, .y = y, .x = xf, .rows = rows, .cols = cols, .log = log) != AMPC_OK) return NULL;
    ampc_tensor *out = ampci_result(op, ctx, x->dtype, x->ndim, x->shape, unstage_dim_last(op, x, d, y));
    return ampci_op_end(&c, out, &(softmax_saved){d, log});
}

ampc_tensor *ampc_softmax(ampc_ctx *ctx, const ampc_tensor *x, int dim) { return softmax(ctx, x, dim, false); }

ampc_tensor *ampc_log_softmax(ampc_ctx *ctx, const ampc_tensor *x, int dim) { return softmax(ctx, x, dim, true); }

/* ---- layer norm ---- */

typedef struct layernorm_saved {
    float *mean, *rstd; /* (rows) F32, device memory */
    int64_t rows, cols;
} layernorm_saved;

static ampc_status layernorm_backward(ampci_node *n, const ampc_tensor *gout) {
    const layernorm_saved *sv = n->saved;
    ampc_ctx *ctx = n->ctx;
    const char *op = n->op;
    ampc_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    bool need_w = ampci_input_needs_grad(n, 1), need_b = ampci_input_needs_grad(n, 2);
    const float *xf = ampci_as_f32(op, x), *wf = w ? ampci_as_f32(op, w) : NULL, *g = ampci_as_f32(op, gout);
    float *gx = ampci_scratch(ctx, op, ampci_numel(x));
    float *gw = need_w ? ampci_scratch(ctx, op, sv->cols) : NULL,
          *gb = need_b ? ampci_scratch(ctx, op, sv->cols) : NULL;
    if (!xf || (w && !wf) || !g || !gx || (need_w && !gw) || (need_b && !gb) ||
        AMPCI_DEV(ctx, layer_norm_bw, .gx = gx, .gw = gw, .gb = gb, .gy = g, .x = xf, .mean = sv->mean,
                  .rstd = sv->rstd, .w = wf, .rows = sv->rows, .cols = sv->cols) != AMPC_OK)
        return ampc_last_status();
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) s = ampci_accumulate_f32(op, x, gx);
    if (s == AMPC_OK && need_w) s = ampci_accumulate_f32(op, w, gw);
    if (s == AMPC_OK && need_b) s = ampci_accumulate_f32(op, b, gb);
    return s;
}

static bool layernorm_check(const char *op, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                            double eps) {
    char p[128], q[128], r[128];
    int64_t D = x->ndim ? x->shape[x->ndim - 1] : 0;
    if (x->ndim < 1 || (w && (w->ndim != 1 || w->shape[0] != D)) || (b && (b->ndim != 1 || b->shape[0] != D))) {
        ampci_fail(AMPC_STATUS_SHAPE,
                   "%s: x %s, weight %s, bias %s; expected x (..., D) with at least 1 dim, "
                   "weight and bias (D) = (%lld) or none",
                   op, ampc_tensor_describe(x, p, sizeof p), w ? ampc_tensor_describe(w, q, sizeof q) : "none",
                   b ? ampc_tensor_describe(b, r, sizeof r) : "none", (long long)D);
        return false;
    }
    if (!(eps > 0.0) || !isfinite(eps)) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: eps %g for x %s; expected a finite eps > 0", op, eps,
                   ampc_tensor_describe(x, p, sizeof p));
        return false;
    }
    return (!w || ampci_same_dtype(op, x, "x", w, "weight")) && (!b || ampci_same_dtype(op, x, "x", b, "bias"));
}

static const ampci_op_desc layer_norm_op = {"ampc_layer_norm",
                                            AMPCI_OP_LAYER_NORM,
                                            3,
                                            {"x", "weight", "bias"},
                                            .optional = 6u,
                                            .backward = layernorm_backward,
                                            .saves = 3u,
                                            .saved_size = sizeof(layernorm_saved)};

ampc_tensor *ampc_layer_norm(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                             double eps) {
    const char *op = layer_norm_op.name;
    ampci_op_call c = {.op = &layer_norm_op, .ctx = ctx, .in = {x, w, b}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0], w = c.in[1], b = c.in[2];
    if (!layernorm_check(op, x, w, b, eps)) return NULL;
    int64_t numel = ampci_numel(x), cols = x->shape[x->ndim - 1], rows = 1;
    for (int i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
    float *y = ampci_scratch(ctx, op, numel);
    layernorm_saved sv = {ampci_scratch(ctx, op, rows), ampci_scratch(ctx, op, rows), rows, cols};
    const float *xf = ampci_as_f32(op, x), *wf = w ? ampci_as_f32(op, w) : NULL, *bf = b ? ampci_as_f32(op, b) : NULL;
    if (!y || !sv.mean || !sv.rstd || !xf || (w && !wf) || (b && !bf) ||
        AMPCI_DEV(ctx, layer_norm, .y = y, .mean = sv.mean, .rstd = sv.rstd, .x = xf, .w = wf, .b = bf, .rows = rows,
                  .cols = cols, .eps = (float)eps) != AMPC_OK)
        return NULL;
    ampci_as_f32_done(x, xf);
    ampc_tensor *out = ampci_result(op, ctx, x->dtype, x->ndim, x->shape, y);
    return ampci_op_end(&c, out, &sv);
}
