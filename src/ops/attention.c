/* attention.c: scaled dot-product attention softmax(q k^T / sqrt(D) [causal mask]) v over (B, H) heads.
 * The op checks shapes and dtypes, makes the operands contiguous in their own dtype and hands them to the
 * device's attention operations (kernels/dev_linear.h; on the CPU the kernel table's attention slots).
 * Scores and probabilities never leave F32 (or wider): only the output is rounded to the inputs' dtype,
 * once. The backward rebuilds the probabilities from per-row statistics the forward saved (two floats per
 * query row) instead of keeping the (Tq, Tk) matrix. */
#include "ops.h"

#include <math.h>

typedef struct attn_saved {
    ampci_attn a; /* contiguous data of the inputs or their copies (arena) */
    float *stats; /* (B*H, Tq, 2), arena */
} attn_saved;

/* The FLOPs of the forward (ampc_ctx_matmul_flops): 2 BH P (D + Dv), P the (query, key) pairs the kernels
 * compute: Tq Tk, or causal (query i sees keys j <= i, aligned at the top left as the kernels do:
 * kernels/ref/attention_ref.c, visible) the sum over i of min(i + 1, Tk). The backward counts twice this. */
static uint64_t attention_flops(const ampci_attn *a) {
    uint64_t Tq = (uint64_t)a->Tq, Tk = (uint64_t)a->Tk, m = Tq < Tk ? Tq : Tk;
    uint64_t pairs = a->causal ? m * (m + 1) / 2 + (Tq - m) * Tk : Tq * Tk;
    return 2 * (uint64_t)a->BH * pairs * (uint64_t)(a->D + a->Dv);
}

static ampc_status attention_backward(ampci_node *n, const ampc_tensor *gout) {
    const attn_saved *sv = n->saved;
    ampc_ctx *ctx = n->ctx;
    const ampc_tensor *go = gout->dtype == sv->a.dt && ampc_tensor_is_contiguous(gout)
                                ? gout
                                : ampci_copy_as(n->op, gout, sv->a.dt);
    if (!go) return ampc_last_status();
    float *g[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++)
        if (ampci_input_needs_grad(n, i) && !(g[i] = ampci_scratch(ctx, n->op, ampci_numel(n->in[i]))))
            return ampc_last_status();
    ampc_status s = AMPCI_DEV(ctx, attention_bw, .a = sv->a, .stats = sv->stats, .go = ampci_dev_ptr(go), .gq = g[0],
                              .gk = g[1], .gv = g[2]);
    if (s == AMPC_OK) ampci_matmul_flops_add(ctx, 2 * attention_flops(&sv->a));
    for (int i = 0; i < 3 && s == AMPC_OK; i++)
        if (g[i]) s = ampci_accumulate_f32(n->op, n->in[i], g[i]);
    return s;
}

/* q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv), one dtype, D >= 1. */
static bool check(const char *op, const ampc_tensor *q, const ampc_tensor *k, const ampc_tensor *v) {
    const char *why = NULL;
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) why = "all three must be 4-D";
    else if (q->shape[0] != k->shape[0] || q->shape[0] != v->shape[0] || q->shape[1] != k->shape[1] ||
             q->shape[1] != v->shape[1])
        why = "batch and head dims (B, H) differ";
    else if (q->shape[3] != k->shape[3]) why = "q and k head sizes D differ";
    else if (k->shape[2] != v->shape[2]) why = "k and v key counts Tk differ";
    else if (q->shape[3] < 1) why = "D must be at least 1 (the scale is 1/sqrt(D))";
    if (why) {
        char a[128], b[128], c[128];
        ampci_fail(AMPC_STATUS_SHAPE,
                   "%s: q %s, k %s, v %s: %s; expected q (B, H, Tq, D), k (B, H, Tk, D), "
                   "v (B, H, Tk, Dv)",
                   op, ampc_tensor_describe(q, a, sizeof a), ampc_tensor_describe(k, b, sizeof b),
                   ampc_tensor_describe(v, c, sizeof c), why);
        return false;
    }
    return ampci_same_dtype(op, q, "q", k, "k") && ampci_same_dtype(op, q, "q", v, "v");
}

static const void *contiguous_data(const char *op, const ampc_tensor *t) {
    if (ampc_tensor_is_contiguous(t)) return ampci_dev_ptr(t);
    ampc_tensor *c = ampci_copy_as(op, t, t->dtype);
    return c ? ampci_dev_ptr(c) : NULL;
}

static const ampci_op_desc attention_op = {"ampc_attention",
                                           AMPCI_OP_ATTENTION,
                                           3,
                                           {"q", "k", "v"},
                                           .backward = attention_backward,
                                           .saved_size = sizeof(attn_saved)};

ampc_tensor *ampc_attention(ampc_ctx *ctx, const ampc_tensor *q, const ampc_tensor *k, const ampc_tensor *v,
                            bool causal) {
    const char *op = attention_op.name;
    ampci_op_call c = {.op = &attention_op, .ctx = ctx, .in = {q, k, v}};
    if (!ampci_op_begin(&c)) return NULL;
    q = c.in[0], k = c.in[1], v = c.in[2];
    if (!check(op, q, k, v)) return NULL;
    attn_saved sv = {.a = {.BH = q->shape[0] * q->shape[1],
                           .Tq = q->shape[2],
                           .Tk = k->shape[2],
                           .D = q->shape[3],
                           .Dv = v->shape[3],
                           .dt = q->dtype,
                           .causal = causal}};
    sv.a.scale = 1.0 / sqrt((double)sv.a.D);
    sv.a.q = contiguous_data(op, q), sv.a.k = contiguous_data(op, k), sv.a.v = contiguous_data(op, v);
    if (!sv.a.q || !sv.a.k || !sv.a.v) return NULL;
    bool grad = ampci_wants_grad(ctx, c.in, 3);
    float *o = ampci_scratch(ctx, op, sv.a.BH * sv.a.Tq * sv.a.Dv);
    if (grad && !(sv.stats = ampci_scratch(ctx, op, sv.a.BH * sv.a.Tq * 2))) return NULL;
    if (!o || AMPCI_DEV(ctx, attention, .a = sv.a, .o = o, .stats = sv.stats) != AMPC_OK) return NULL;
    ampci_matmul_flops_add(ctx, attention_flops(&sv.a));
    /* the backward reads an input only where the kernel ran on its own data (not on a contiguous copy) */
    const void *used[3] = {sv.a.q, sv.a.k, sv.a.v};
    c.saves = 0;
    for (int i = 0; i < 3; i++) c.saves |= (unsigned)(used[i] == ampci_dev_ptr(c.in[i])) << i;
    int64_t shape[4] = {q->shape[0], q->shape[1], sv.a.Tq, sv.a.Dv};
    return ampci_op_end(&c, ampci_result(op, ctx, q->dtype, 4, shape, o), &sv);
}
