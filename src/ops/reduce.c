/* reduce.c: sum and mean over a set of dims (all dims when none are given), with keepdim. Sums run on
 * the device in double in row-major order of the input, so the result is independent of threads; the
 * output keeps the input's dtype. The backward broadcasts the gradient back over the reduced dims. */
#include "ops.h"

#include <string.h>

typedef struct reduce_plan {
    ampci_reduce_plan k; /* what the device reduces (kernels/dev_elementwise.h) */
    int ndim;            /* the output's shape */
    int64_t shape[AMPC_MAX_DIMS];
} reduce_plan;

typedef struct reduce_saved {
    reduce_plan plan;
    bool mean;
} reduce_saved;

static bool plan_reduce(const char *op, const ampc_tensor *x, const int *dims, int ndims, bool keepdim,
                        reduce_plan *p) {
    bool red[AMPC_MAX_DIMS] = {false};
    char b[128];
    if (ndims < 0 || ndims > x->ndim || (ndims > 0 && !dims)) {
        ampci_fail(AMPC_STATUS_SHAPE, "%s: %d dims to reduce for %s; expected 0 (all) to %d", op, ndims,
                   ampc_tensor_describe(x, b, sizeof b), x->ndim);
        return false;
    }
    for (int i = 0; i < ndims; i++) {
        int d = ampci_wrap_dim(op, x, dims[i]);
        if (d < 0) return false;
        if (red[d]) {
            ampci_fail(AMPC_STATUS_SHAPE, "%s: dim %d is listed twice for %s", op, dims[i],
                       ampc_tensor_describe(x, b, sizeof b));
            return false;
        }
        red[d] = true;
    }
    memset(p, 0, sizeof *p);
    ampci_reduce_plan *k = &p->k;
    k->count = 1;
    int64_t st = 1;
    for (int i = 3; i >= 0; i--) {
        int d = x->ndim - (4 - i);
        bool r = d >= 0 && (ndims == 0 || red[d]);
        k->dims[i] = d >= 0 ? x->shape[d] : 1;
        k->ostride[i] = r ? 0 : st;
        if (r) k->count *= k->dims[i];
        else st *= k->dims[i];
    }
    k->out_n = st;
    for (int d = 0; d < x->ndim; d++) {
        bool r = ndims == 0 || red[d];
        if (!r) p->shape[p->ndim++] = x->shape[d];
        else if (keepdim) p->shape[p->ndim++] = 1;
    }
    return true;
}

static ampc_status reduce_backward(ampci_node *n, const ampc_tensor *gout) {
    const reduce_saved *sv = n->saved;
    const float *g = ampci_as_f32(n->op, gout);
    float *gx = g ? ampci_scratch(n->ctx, n->op, ampci_numel(n->in[0])) : NULL;
    if (!gx || AMPCI_DEV(n->ctx, reduce_bw, .plan = sv->plan.k, .mean = sv->mean, .g = g, .gx = gx) != AMPC_OK)
        return ampc_last_status();
    return ampci_accumulate_f32(n->op, n->in[0], gx);
}

static const ampci_op_desc sum_op = {
    "ampc_sum", AMPCI_OP_SUM, 1, {"input"}, .backward = reduce_backward, .saved_size = sizeof(reduce_saved)};
static const ampci_op_desc mean_op = {
    "ampc_mean", AMPCI_OP_MEAN, 1, {"input"}, .backward = reduce_backward, .saved_size = sizeof(reduce_saved)};

static ampc_tensor *reduce(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim, bool mean) {
    ampci_op_call c = {.op = mean ? &mean_op : &sum_op, .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    const char *op = c.op->name;
    reduce_saved sv = {.mean = mean};
    if (!plan_reduce(op, x, dims, ndims, keepdim, &sv.plan)) return NULL;
    const reduce_plan *p = &sv.plan;
    const float *xf = ampci_as_f32(op, x);
    float *y = xf ? ampci_scratch(ctx, op, p->k.out_n) : NULL;
    if (!y || AMPCI_DEV(ctx, reduce, .plan = p->k, .mean = mean, .x = xf, .y = y) != AMPC_OK) return NULL;
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, p->ndim, p->shape, y), &sv);
}

ampc_tensor *ampc_sum(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim) {
    return reduce(ctx, x, dims, ndims, keepdim, false);
}

ampc_tensor *ampc_mean(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim) {
    return reduce(ctx, x, dims, ndims, keepdim, true);
}
