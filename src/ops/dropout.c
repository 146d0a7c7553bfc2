/* dropout.c: inverted dropout. Element i (row-major) is kept iff u_i >= p, where u_i is element i of the
 * uniform [0, 1) fill the context RNG would make at the call (ampc_rng_uniform's rule: block
 * counter + i/4, word i%4, 24 bits); the context RNG then advances by ceil(n / 4) blocks as that fill
 * would. Kept elements are scaled by 1/(1-p) in F32. Because u_i is a pure function of (seed, stream,
 * counter, i), the mask is the same for any thread count, and the backward regenerates it on the device
 * from the saved RNG state instead of storing it. */
#include "ops.h"

typedef struct dropout_saved {
    ampc_rng rng; /* the context RNG at the call */
    double p;
    float scale; /* 1 / (1 - p) */
} dropout_saved;

/* out (n) = in (n) masked and scaled on the device; in is x (forward) or the output gradient (backward):
 * the same masking either way. */
static bool masked(ampc_ctx *ctx, const dropout_saved *sv, float *out, const float *in, int64_t n) {
    return AMPCI_DEV(ctx, dropout, .y = out, .x = in, .n = n, .rng = sv->rng, .p = sv->p, .scale = sv->scale) ==
           AMPC_OK;
}

static ampc_status dropout_backward(ampci_node *n, const ampc_tensor *gout) {
    int64_t cnt = ampci_numel(gout);
    float *gx = ampci_scratch(n->ctx, n->op, cnt);
    const float *g = ampci_as_f32(n->op, gout);
    if (!gx || !g || !masked(n->ctx, n->saved, gx, g, cnt)) return ampc_last_status();
    return ampci_accumulate_f32(n->op, n->in[0], gx);
}

static const ampci_op_desc dropout_op = {
    "ampc_dropout", AMPCI_OP_DROPOUT, 1, {"x"}, .backward = dropout_backward, .saved_size = sizeof(dropout_saved)};

ampc_tensor *ampc_dropout(ampc_ctx *ctx, const ampc_tensor *x, double p, bool training) {
    const char *op = dropout_op.name;
    ampci_op_call c = {.op = &dropout_op, .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    if (!(p >= 0.0 && p < 1.0)) {
        char a[128];
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: p = %g for x %s; expected 0 <= p < 1", op, p,
                               ampc_tensor_describe(x, a, sizeof a));
    }
    /* identity: a copy, recorded (and handed to model code) by ampc_tensor_contiguous */
    if (!training || p == 0.0) return ampc_tensor_contiguous(x);
    int64_t cnt = ampci_numel(x);
    dropout_saved sv = {ctx->rng, p, (float)(1.0 / (1.0 - p))};
    float *y = ampci_scratch(ctx, op, cnt);
    const float *xf = ampci_as_f32(op, x);
    if (!y || !xf || !masked(ctx, &sv, y, xf, cnt)) return NULL;
    ampci_as_f32_done(x, xf);
    /* the RNG is host state: it advances here, as ampc_rng_uniform(ctx rng, ..., cnt) would */
    ctx->rng.counter += ((uint64_t)cnt + 3) / 4;
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, x->ndim, x->shape, y), &sv);
}
