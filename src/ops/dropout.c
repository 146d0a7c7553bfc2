/* dropout.c: inverted dropout. Element i (row-major) is kept iff u_i >= p, where u_i is element i of the
 * uniform [0, 1) fill the context RNG would make at the call (ampc_rng_uniform's rule: block
 * counter + i/4, word i%4, 24 bits); the context RNG then advances by ceil(n / 4) blocks as that fill
 * would. Kept elements are scaled by 1/(1-p) in F32. Because u_i is a pure function of (seed, stream,
 * counter, i), the mask is the same for any thread count, and the backward regenerates it from the
 * saved RNG state instead of storing it. */
#include "ops.h"

#define PIECE 256 /* uniforms drawn per step of a range */

typedef struct dropout_saved {
    ampc_rng rng; /* the context RNG at the call */
    double p;
    float scale; /* 1 / (1 - p) */
} dropout_saved;

/* Elements [b, e) of out = in masked and scaled; in is x (forward) or the output gradient (backward): the
 * same masking either way. */
typedef struct dropout_map {
    const dropout_saved *sv;
    float *out;
    const float *in;
} dropout_map;

AMPCI_ROW_BODY(dropout_run, dropout_map, j, b, e, chunk) {
    float u[PIECE];
    for (int64_t i = b; i < e; i += PIECE) {
        int64_t m = e - i < PIECE ? e - i : PIECE;
        ampci_rng_uniform_range(&j->sv->rng, u, i, i + m, 0.0f, 1.0f);
        for (int64_t k = 0; k < m; k++) j->out[i + k] = (double)u[k] >= j->sv->p ? j->in[i + k] * j->sv->scale : 0.0f;
    }
}

static ampc_status dropout_backward(ampci_node *n, const ampc_tensor *gout) {
    int64_t cnt = ampci_numel(gout);
    dropout_map j = {n->saved, ampci_scratch(n->ctx, n->op, cnt), ampci_as_f32(n->op, gout)};
    if (!j.out || !j.in) return ampc_last_status();
    ampci_parallel_rows(n->ctx, cnt, 1, dropout_run, &j);
    return ampci_accumulate_f32(n->op, n->in[0], j.out);
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
    dropout_map j = {&sv, ampci_scratch(ctx, op, cnt), ampci_as_f32(op, x)};
    if (!j.out || !j.in) return NULL;
    ampci_parallel_rows(ctx, cnt, 1, dropout_run, &j);
    ampci_as_f32_done(x, j.in);
    ctx->rng.counter += ((uint64_t)cnt + 3) / 4; /* as ampc_rng_uniform(ctx rng, ..., cnt) would */
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, x->ndim, x->shape, j.out), &sv);
}
