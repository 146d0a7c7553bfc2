/* dropout.c: inverted dropout. Element i (row-major) is kept iff u_i >= p, where u_i is element i of the
 * uniform [0, 1) fill the context RNG would make at the call (ampc_rng_uniform's rule: block
 * counter + i/4, word i%4, 24 bits); the context RNG then advances by ceil(n / 4) blocks as that fill
 * would. Kept elements are scaled by 1/(1-p) in F32. Because u_i is a pure function of (seed, stream,
 * counter, i), the mask is the same for any thread count, and the backward regenerates it from the
 * saved RNG state instead of storing it. */
#include "ops.h"


#define PIECE 256   /* uniforms drawn per step of a range */

typedef struct dropout_saved {
    ampc_rng rng;   /* the context RNG at the call */
    double p;
    float scale;    /* 1 / (1 - p) */
} dropout_saved;

typedef struct dropout_job {
    const dropout_saved *sv;
    float *out;
    const float *in;   /* x (forward) or the output gradient (backward): the same masking either way */
} dropout_job;

static void dropout_range(void *vp, int64_t b, int64_t e) {
    const dropout_job *j = vp;
    float u[PIECE];
    for (int64_t i = b; i < e; i += PIECE) {
        int64_t m = e - i < PIECE ? e - i : PIECE;
        ampci_rng_uniform_range(&j->sv->rng, u, i, i + m, 0.0f, 1.0f);
        for (int64_t k = 0; k < m; k++) j->out[i + k] = (double)u[k] >= j->sv->p ? j->in[i + k] * j->sv->scale : 0.0f;
    }
}

static ampc_status dropout_backward(ampci_node *n, const ampc_tensor *gout) {
    int64_t cnt = ampci_numel(gout);
    dropout_job j = {n->saved, ampci_scratch(n->ctx, n->op, cnt), ampci_as_f32(n->op, gout)};
    if (!j.out || !j.in) return ampc_last_status();
    ampci_parallel(n->ctx, cnt, dropout_range, &j);
    return ampci_accumulate_f32(n->op, n->in[0], j.out);
}

ampc_tensor *ampc_dropout(ampc_ctx *ctx, const ampc_tensor *x, double p, bool training) {
    static const char op[] = "ampc_dropout";
    const ampc_tensor *ac_[1] = {x};
    if (!ampci_op_enter(ctx, AMPCI_OP_DROPOUT, ac_, 1)) return NULL;
    x = ac_[0];
    if (!ampci_op_input(ctx, op, x, "x")) return NULL;
    if (!(p >= 0.0 && p < 1.0)) {
        char a[128];
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: p = %g for x %s; expected 0 <= p < 1", op, p,
                               ampc_tensor_describe(x, a, sizeof a));
    }
    if (!training || p == 0.0) return ampc_tensor_contiguous(x);   /* identity, already differentiable */
    int64_t cnt = ampci_numel(x);
    dropout_saved sv = {ctx->rng, p, (float)(1.0 / (1.0 - p))};
    dropout_job j = {&sv, ampci_scratch(ctx, op, cnt), ampci_as_f32(op, x)};
    if (!j.out || !j.in) return NULL;
    ampci_parallel(ctx, cnt, dropout_range, &j);
    ampci_as_f32_done(x, j.in);
    ctx->rng.counter += ((uint64_t)cnt + 3) / 4;   /* as ampc_rng_uniform(ctx rng, ..., cnt) would */
    ampc_tensor *out = ampci_result(op, ctx, x->dtype, x->ndim, x->shape, j.out);
    if (out && ampci_wants_grad(ctx, &x, 1)) {
        ampci_node *node = ampci_record(ctx, op, out, &x, 1, dropout_backward, 0, sizeof sv);
        if (!node) return NULL;
        *(dropout_saved *)node->saved = sv;
    }
    return out;
}
