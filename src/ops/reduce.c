/* reduce.c: sum and mean over a set of dims (all dims when none are given), with keepdim. Sums run in
 * double in row-major order of the input, so the result is independent of threads; the output keeps
 * the input's dtype. The backward broadcasts the gradient back over the reduced dims. */
#include "ops.h"

#include <string.h>

typedef struct reduce_plan {
    int64_t dims[4];    /* input shape padded to 4 */
    int64_t ostride[4]; /* output element stride along each padded input dim, 0 for reduced dims */
    int64_t out_n, count;
    int ndim;
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
    p->count = 1;
    int64_t st = 1;
    for (int i = 3; i >= 0; i--) {
        int d = x->ndim - (4 - i);
        bool r = d >= 0 && (ndims == 0 || red[d]);
        p->dims[i] = d >= 0 ? x->shape[d] : 1;
        p->ostride[i] = r ? 0 : st;
        if (r) p->count *= p->dims[i];
        else st *= p->dims[i];
    }
    p->out_n = st;
    for (int d = 0; d < x->ndim; d++) {
        bool r = ndims == 0 || red[d];
        if (!r) p->shape[p->ndim++] = x->shape[d];
        else if (keepdim) p->shape[p->ndim++] = 1;
    }
    return true;
}

#define FOR_EACH_INPUT(p, k, o)                                                                                        \
    for (int64_t i0 = 0, k = 0; i0 < (p)->dims[0]; i0++)                                                               \
        for (int64_t i1 = 0; i1 < (p)->dims[1]; i1++)                                                                  \
            for (int64_t i2 = 0; i2 < (p)->dims[2]; i2++)                                                              \
                for (int64_t i3 = 0, o = i0 * (p)->ostride[0] + i1 * (p)->ostride[1] + i2 * (p)->ostride[2];           \
                     i3 < (p)->dims[3]; i3++, k++, o += (p)->ostride[3])

static ampc_status reduce_backward(ampci_node *n, const ampc_tensor *gout) {
    const reduce_saved *sv = n->saved;
    const reduce_plan *p = &sv->plan;
    const float *g = ampci_as_f32(n->op, gout);
    float *gx = g ? ampci_scratch(n->ctx, n->op, ampci_numel(n->in[0])) : NULL;
    if (!gx) return ampc_last_status();
    float scale = sv->mean ? (float)(1.0 / (double)p->count) : 1.0f;
    FOR_EACH_INPUT(p, k, o) gx[k] = sv->mean ? g[o] * scale : g[o];
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
    double *acc = xf ? ampci_arena_alloc(ctx, (size_t)(p->out_n ? p->out_n : 1) * sizeof *acc, op) : NULL;
    float *y = acc ? ampci_scratch(ctx, op, p->out_n) : NULL;
    if (!y) return NULL;
    memset(acc, 0, (size_t)p->out_n * sizeof *acc);
    FOR_EACH_INPUT(p, k, o) acc[o] += xf[k];
    for (int64_t i = 0; i < p->out_n; i++) y[i] = (float)(mean ? acc[i] / (double)p->count : acc[i]);
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, p->ndim, p->shape, y), &sv);
}

ampc_tensor *ampc_sum(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim) {
    return reduce(ctx, x, dims, ndims, keepdim, false);
}

ampc_tensor *ampc_mean(ampc_ctx *ctx, const ampc_tensor *x, const int *dims, int ndims, bool keepdim) {
    return reduce(ctx, x, dims, ndims, keepdim, true);
}
