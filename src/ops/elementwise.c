/* elementwise.c: unary ops (neg, exp, log, sqrt, tanh, sigmoid, relu, gelu), binary ops with
 * broadcasting (add, sub, mul, div) and their scalar variants. All compute in F32 through the kernel
 * table and round once to the output dtype; backward reduces a broadcast gradient over the broadcast
 * dims (in double) before handing it to the operand. */
#include "ops.h"

#include <string.h>

/* ---- unary ---- */

typedef struct unary_saved {
    ampci_unary kind;
} unary_saved;

/* Elements [b, e) of the forward (fwd) or backward (bwd) through the kernel table, F32 buffers. */
typedef struct unary_map {
    ampc_k_unary_fn fwd;
    ampc_k_unary_bw_fn bwd;
    float *out;
    const float *x, *y, *g;
} unary_map;

AMPCI_ROW_BODY(unary_run, unary_map, j, b, e, chunk) {
    if (j->fwd) j->fwd(j->out + b, j->x + b, e - b);
    else j->bwd(j->out + b, j->g + b, j->x + b, j->y + b, e - b);
}

/* The staged path for contiguous tensors of any dtype: each chunk converts a few thousand elements to
 * F32 on the stack, runs the kernel and rounds straight into the output's dtype, so no full-size F32
 * copy of x, y, the gradient or the result is ever made (a BF16 GELU backward over (B, T, 4D) would
 * otherwise hold four F32 copies of its input at once). F32 tensors are read and written in place. */
#define STAGE 1024

typedef struct staged_map {
    const struct ampc_kernels *k;
    ampci_unary kind;
    const ampc_tensor *x, *y, *g; /* y, g: backward only */
    ampc_tensor *out;             /* y (forward) or gx (backward), contiguous */
} staged_map;

/* Elements [i, i + m) of t as F32: t's own when it is F32, else converted into buf. */
static const float *stage_in(const ampc_tensor *t, int64_t i, int64_t m, float *buf, const struct ampc_kernels *k) {
    const unsigned char *src = ampci_tensor_ptr(t) + (size_t)i * ampc_dtype_size(t->dtype);
    if (t->dtype == AMPC_DTYPE_F32) return (const float *)src;
    ampci_convert_with(k, buf, AMPC_DTYPE_F32, src, t->dtype, (size_t)m);
    return buf;
}

AMPCI_ROW_BODY(staged_run, staged_map, j, b, e, chunk) {
    float xs[STAGE], ys[STAGE], gs[STAGE], os[STAGE];
    bool direct = j->out->dtype == AMPC_DTYPE_F32;
    for (int64_t i = b; i < e; i += STAGE) {
        int64_t m = e - i < STAGE ? e - i : STAGE;
        void *dst = ampci_tensor_ptr(j->out) + (size_t)i * ampc_dtype_size(j->out->dtype);
        float *o = direct ? dst : os;
        const float *x = stage_in(j->x, i, m, xs, j->k);
        if (j->g) j->k->unary_bw[j->kind](o, stage_in(j->g, i, m, gs, j->k), x, stage_in(j->y, i, m, ys, j->k), m);
        else j->k->unary[j->kind](o, x, m);
        if (!direct) ampci_convert_with(j->k, dst, j->out->dtype, os, AMPC_DTYPE_F32, (size_t)m);
    }
}

static bool stageable(const ampc_tensor *a, const ampc_tensor *b, const ampc_tensor *c) {
    return ampc_tensor_is_contiguous(a) && (!b || ampc_tensor_is_contiguous(b)) && (!c || ampc_tensor_is_contiguous(c));
}

static ampc_status unary_backward(ampci_node *n, const ampc_tensor *gout) {
    ampc_tensor *x = n->in[0];
    const unary_saved *sv = n->saved;
    if (stageable(x, n->out, gout)) {
        ampc_tensor *gx = ampci_output(n->op, n->ctx, x->dtype, x->ndim, x->shape);
        if (!gx) return ampc_last_status();
        ampci_parallel_rows(n->ctx, ampci_numel(x), 1, staged_run,
                            &(staged_map){n->ctx->kernels, sv->kind, x, n->out, gout, gx});
        return ampci_grad_accumulate(x, gx);
    }
    const float *g = ampci_as_f32(n->op, gout), *xf = ampci_as_f32(n->op, x), *yf = ampci_as_f32(n->op, n->out);
    float *gx = ampci_scratch(n->ctx, n->op, ampci_numel(x));
    if (!g || !xf || !yf || !gx) return ampc_last_status();
    ampci_parallel_rows(n->ctx, ampci_numel(x), 1, unary_run,
                        &(unary_map){NULL, n->ctx->kernels->unary_bw[sv->kind], gx, xf, yf, g});
    return ampci_accumulate_f32(n->op, x, gx);
}

/* The unary ops' descriptors, by kernel: one input, whose value and output the backward reads. */
#define UNARY_OP(name, id)                                                                                             \
    {                                                                                                                  \
        "ampc_" name, id, 1, {"input"}, .backward = unary_backward, .saves = 1u | AMPCI_SAVES_OUT,                     \
                                        .saved_size = sizeof(unary_saved)                                              \
    }
static const ampci_op_desc unary_ops[AMPCI_UNARY_COUNT] = {
    [AMPCI_UNARY_NEG] = UNARY_OP("neg", AMPCI_OP_NEG),
    [AMPCI_UNARY_EXP] = UNARY_OP("exp", AMPCI_OP_EXP),
    [AMPCI_UNARY_LOG] = UNARY_OP("log", AMPCI_OP_LOG),
    [AMPCI_UNARY_SQRT] = UNARY_OP("sqrt", AMPCI_OP_SQRT),
    [AMPCI_UNARY_TANH] = UNARY_OP("tanh", AMPCI_OP_TANH),
    [AMPCI_UNARY_SIGMOID] = UNARY_OP("sigmoid", AMPCI_OP_SIGMOID),
    [AMPCI_UNARY_RELU] = UNARY_OP("relu", AMPCI_OP_RELU),
    [AMPCI_UNARY_GELU_ERF] = UNARY_OP("gelu", AMPCI_OP_GELU),
    [AMPCI_UNARY_GELU_TANH] = UNARY_OP("gelu", AMPCI_OP_GELU),
};

static ampc_tensor *unary(ampc_ctx *ctx, const ampc_tensor *x, ampci_unary kind) {
    ampci_op_call c = {.op = &unary_ops[kind], .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    const char *op = c.op->name;
    int64_t n = ampci_numel(x);
    ampc_tensor *out;
    if (stageable(x, NULL, NULL)) {
        out = ampci_output(op, ctx, x->dtype, x->ndim, x->shape);
        if (out) ampci_parallel_rows(ctx, n, 1, staged_run, &(staged_map){ctx->kernels, kind, x, NULL, NULL, out});
    } else {
        const float *xf = ampci_as_f32(op, x);
        float *y = xf ? ampci_scratch(ctx, op, n) : NULL;
        if (!y) return NULL;
        ampci_parallel_rows(ctx, n, 1, unary_run, &(unary_map){ctx->kernels->unary[kind], NULL, y, xf, NULL, NULL});
        ampci_as_f32_done(x, xf);
        out = ampci_result(op, ctx, x->dtype, x->ndim, x->shape, y);
    }
    return ampci_op_end(&c, out, &(unary_saved){kind});
}

ampc_tensor *ampc_neg(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_NEG); }
ampc_tensor *ampc_exp(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_EXP); }
ampc_tensor *ampc_log(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_LOG); }
ampc_tensor *ampc_sqrt(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_SQRT); }
ampc_tensor *ampc_tanh(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_TANH); }
ampc_tensor *ampc_relu(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_RELU); }
ampc_tensor *ampc_sigmoid(ampc_ctx *ctx, const ampc_tensor *x) { return unary(ctx, x, AMPCI_UNARY_SIGMOID); }

ampc_tensor *ampc_gelu(ampc_ctx *ctx, const ampc_tensor *x, ampc_gelu_form form) {
    if (form != AMPC_GELU_ERF && form != AMPC_GELU_TANH)
        return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "ampc_gelu: form %d; expected AMPC_GELU_ERF or AMPC_GELU_TANH",
                               (int)form);
    return unary(ctx, x, form == AMPC_GELU_TANH ? AMPCI_UNARY_GELU_TANH : AMPCI_UNARY_GELU_ERF);
}

/* ---- scalar variants: x op s, computed in F32 with s rounded to F32 ---- */

typedef struct scalar_saved {
    ampci_binary kind;
    float s;
} scalar_saved;

/* Elements [b, e) of out = x op s. */
typedef struct scalar_map {
    ampci_binary kind;
    float s;
    float *out;
    const float *x;
} scalar_map;

AMPCI_ROW_BODY(scalar_run, scalar_map, j, b, e, chunk) {
    for (int64_t i = b; i < e; i++) {
        float v = j->x[i];
        switch (j->kind) {
        case AMPCI_BINARY_ADD: v = v + j->s; break;
        case AMPCI_BINARY_SUB: v = v - j->s; break;
        case AMPCI_BINARY_MUL: v = v * j->s; break;
        default: v = v / j->s; break;
        }
        j->out[i] = v;
    }
}

static ampc_status scalar_backward(ampci_node *n, const ampc_tensor *gout) {
    const scalar_saved *sv = n->saved;
    float *g = (float *)ampci_as_f32(n->op, gout); /* read only: node gradients are never modified */
    if (!g) return ampc_last_status();
    if (sv->kind == AMPCI_BINARY_ADD || sv->kind == AMPCI_BINARY_SUB) return ampci_accumulate_f32(n->op, n->in[0], g);
    /* d(x s)/dx = s; d(x / s)/dx = 1/s, applied as a division like the forward */
    int64_t cnt = ampci_numel(gout);
    float *gx = ampci_scratch(n->ctx, n->op, cnt);
    if (!gx) return ampc_last_status();
    ampci_parallel_rows(n->ctx, cnt, 1, scalar_run, &(scalar_map){sv->kind, sv->s, gx, g});
    return ampci_accumulate_f32(n->op, n->in[0], gx);
}

#define SCALAR_OP(name, id)                                                                                            \
    { "ampc_" name, id, 1, {"input"}, .backward = scalar_backward, .saved_size = sizeof(scalar_saved) }
static const ampci_op_desc scalar_ops[AMPCI_BINARY_COUNT] = {
    [AMPCI_BINARY_ADD] = SCALAR_OP("add_scalar", AMPCI_OP_ADD_SCALAR),
    [AMPCI_BINARY_SUB] = SCALAR_OP("sub_scalar", AMPCI_OP_SUB_SCALAR),
    [AMPCI_BINARY_MUL] = SCALAR_OP("mul_scalar", AMPCI_OP_MUL_SCALAR),
    [AMPCI_BINARY_DIV] = SCALAR_OP("div_scalar", AMPCI_OP_DIV_SCALAR),
};

static ampc_tensor *scalar_op(ampc_ctx *ctx, const ampc_tensor *x, double s, ampci_binary kind) {
    ampci_op_call c = {.op = &scalar_ops[kind], .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    const char *op = c.op->name;
    int64_t n = ampci_numel(x);
    const float *xf = ampci_as_f32(op, x);
    float *y = xf ? ampci_scratch(ctx, op, n) : NULL;
    if (!y) return NULL;
    ampci_parallel_rows(ctx, n, 1, scalar_run, &(scalar_map){kind, (float)s, y, xf});
    ampci_as_f32_done(x, xf);
    ampc_tensor *out = ampci_result(op, ctx, x->dtype, x->ndim, x->shape, y);
    return ampci_op_end(&c, out, &(scalar_saved){kind, (float)s});
}

ampc_tensor *ampc_add_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s) {
    return scalar_op(ctx, x, s, AMPCI_BINARY_ADD);
}
ampc_tensor *ampc_sub_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s) {
    return scalar_op(ctx, x, s, AMPCI_BINARY_SUB);
}
ampc_tensor *ampc_mul_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s) {
    return scalar_op(ctx, x, s, AMPCI_BINARY_MUL);
}
ampc_tensor *ampc_div_scalar(ampc_ctx *ctx, const ampc_tensor *x, double s) {
    return scalar_op(ctx, x, s, AMPCI_BINARY_DIV);
}

/* ---- binary with broadcasting ---- */

typedef struct binary_saved {
    ampci_binary kind;
    ampci_bcast bc;
} binary_saved;

/* Elements [b, e) of z = x op y through the kernel table (no broadcasting). */
typedef struct binary_map {
    ampc_k_binary_fn fn;
    float *z;
    const float *x, *y;
} binary_map;

AMPCI_ROW_BODY(binary_run, binary_map, j, b, e, chunk) { j->fn(j->z + b, j->x + b, j->y + b, e - b); }

/* z = a op b over the broadcast shape (a, b row-major in their own shapes). */
static void binary_bcast(ampc_ctx *ctx, ampci_binary kind, const ampci_bcast *bc, const float *a, const float *b,
                         float *z, int64_t na, int64_t nb) {
    ampc_k_binary_fn fn = ctx->kernels->binary[kind];
    if (na == bc->n && nb == bc->n) {
        ampci_parallel_rows(ctx, bc->n, 1, binary_run, &(binary_map){fn, z, a, b});
        return;
    }
    /* innermost runs: a row of the last dim at a time, each operand either contiguous or a repeated value */
    int64_t len = bc->dims[3], k = 0;
    float ra[256], rb[256];
    for (int64_t i0 = 0; i0 < bc->dims[0]; i0++)
        for (int64_t i1 = 0; i1 < bc->dims[1]; i1++)
            for (int64_t i2 = 0; i2 < bc->dims[2]; i2++, k += len) {
                int64_t oa = i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
                int64_t ob = i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
                for (int64_t c = 0; c < len; c += 256) {
                    int64_t m = len - c < 256 ? len - c : 256;
                    const float *pa = a + oa + c, *pb = b + ob + c;
                    if (!bc->sa[3]) {
                        for (int64_t q = 0; q < m; q++) ra[q] = a[oa];
                        pa = ra;
                    }
                    if (!bc->sb[3]) {
                        for (int64_t q = 0; q < m; q++) rb[q] = b[ob];
                        pb = rb;
                    }
                    fn(z + k + c, pa, pb, m);
                }
            }
}

static ampc_status binary_operand_grad(ampci_node *n, int which, float *g_full) {
    const binary_saved *sv = n->saved;
    ampc_tensor *t = n->in[which];
    int64_t nt = ampci_numel(t);
    if (nt == sv->bc.n) return ampci_accumulate_f32(n->op, t, g_full);
    float *g = ampci_scratch(n->ctx, n->op, nt);
    if (!g || !ampci_sum_to_operand(n->op, n->ctx, &sv->bc, which, g_full, g, nt)) return ampc_last_status();
    return ampci_accumulate_f32(n->op, t, g);
}

/* The layout of (g, other): g a full row-major tensor of the result's shape, other with its broadcast
 * strides (bc.sa or bc.sb). */
static ampci_bcast with_full(const ampci_bcast *bc, const int64_t *other_strides) {
    ampci_bcast f = *bc;
    int64_t st = 1;
    for (int i = 3; i >= 0; i--) f.sa[i] = bc->dims[i] == 1 ? 0 : st, st *= bc->dims[i];
    memcpy(f.sb, other_strides, sizeof f.sb);
    return f;
}

static ampc_status binary_backward(ampci_node *n, const ampc_tensor *gout) {
    const binary_saved *sv = n->saved;
    ampc_ctx *ctx = n->ctx;
    ampc_tensor *a = n->in[0], *b = n->in[1];
    int64_t cnt = sv->bc.n, na = ampci_numel(a), nb = ampci_numel(b);
    float *g = (float *)ampci_as_f32(n->op, gout); /* read only */
    if (!g) return ampc_last_status();
    bool muldiv = sv->kind == AMPCI_BINARY_MUL || sv->kind == AMPCI_BINARY_DIV;
    const float *af = muldiv ? ampci_as_f32(n->op, a) : NULL, *bf = muldiv ? ampci_as_f32(n->op, b) : NULL;
    if (muldiv && (!af || !bf)) return ampc_last_status();
    ampci_bcast g_b = with_full(&sv->bc, sv->bc.sb), g_a = with_full(&sv->bc, sv->bc.sa);
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) {
        float *ga = g;
        if (muldiv) { /* g * b, g / b */
            ga = ampci_scratch(ctx, n->op, cnt);
            if (!ga) return ampc_last_status();
            binary_bcast(ctx, sv->kind, &g_b, g, bf, ga, cnt, nb);
        }
        s = binary_operand_grad(n, 0, ga);
    }
    if (s == AMPC_OK && ampci_input_needs_grad(n, 1)) {
        float *gb = ampci_scratch(ctx, n->op, cnt);
        if (!gb) return ampc_last_status();
        if (sv->kind == AMPCI_BINARY_ADD) {
            memcpy(gb, g, (size_t)cnt * sizeof *gb);
        } else if (sv->kind == AMPCI_BINARY_SUB) {
            for (int64_t i = 0; i < cnt; i++) gb[i] = -g[i];
        } else { /* mul: g * a; div: -(g * a / b) / b */
            binary_bcast(ctx, AMPCI_BINARY_MUL, &g_a, g, af, gb, cnt, na);
            if (sv->kind == AMPCI_BINARY_DIV) {
                float *tmp = ampci_scratch(ctx, n->op, cnt);
                if (!tmp) return ampc_last_status();
                binary_bcast(ctx, AMPCI_BINARY_DIV, &g_b, gb, bf, tmp, cnt, nb);
                binary_bcast(ctx, AMPCI_BINARY_DIV, &g_b, tmp, bf, gb, cnt, nb);
                for (int64_t i = 0; i < cnt; i++) gb[i] = -gb[i];
            }
        }
        s = binary_operand_grad(n, 1, gb);
    }
    return s;
}

/* The binary ops' descriptors, by kernel: mul and div read both operands in the backward, add and sub
 * neither. */
#define BINARY_OP(name, id, mask)                                                                                      \
    { "ampc_" name, id, 2, {"a", "b"}, .backward = binary_backward, .saves = mask, .saved_size = sizeof(binary_saved) }
static const ampci_op_desc binary_ops[AMPCI_BINARY_COUNT] = {
    [AMPCI_BINARY_ADD] = BINARY_OP("add", AMPCI_OP_ADD, 0u),
    [AMPCI_BINARY_SUB] = BINARY_OP("sub", AMPCI_OP_SUB, 0u),
    [AMPCI_BINARY_MUL] = BINARY_OP("mul", AMPCI_OP_MUL, 3u),
    [AMPCI_BINARY_DIV] = BINARY_OP("div", AMPCI_OP_DIV, 3u),
};

static ampc_tensor *binary(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b, ampci_binary kind) {
    ampci_op_call c = {.op = &binary_ops[kind], .ctx = ctx, .in = {a, b}};
    if (!ampci_op_begin(&c)) return NULL;
    a = c.in[0], b = c.in[1];
    const char *op = c.op->name;
    ampci_bcast bc;
    if (!ampci_broadcast(op, a, b, &bc)) return NULL;
    const float *af = ampci_as_f32(op, a), *bf = af ? ampci_as_f32(op, b) : NULL;
    float *z = bf ? ampci_scratch(ctx, op, bc.n) : NULL;
    if (!z) return NULL;
    binary_bcast(ctx, kind, &bc, af, bf, z, ampci_numel(a), ampci_numel(b));
    ampci_as_f32_done(a, af);
    ampci_as_f32_done(b, bf);
    ampc_tensor *out = ampci_result(op, ctx, ampci_promote(a->dtype, b->dtype), bc.ndim, bc.shape, z);
    return ampci_op_end(&c, out, &(binary_saved){kind, bc});
}

ampc_tensor *ampc_add(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b) {
    return binary(ctx, a, b, AMPCI_BINARY_ADD);
}
ampc_tensor *ampc_sub(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b) {
    return binary(ctx, a, b, AMPCI_BINARY_SUB);
}
ampc_tensor *ampc_mul(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b) {
    return binary(ctx, a, b, AMPCI_BINARY_MUL);
}
ampc_tensor *ampc_div(ampc_ctx *ctx, const ampc_tensor *a, const ampc_tensor *b) {
    return binary(ctx, a, b, AMPCI_BINARY_DIV);
}
