/* elementwise.c: unary ops (neg, exp, log, sqrt, tanh, sigmoid, relu, gelu), binary ops with
 * broadcasting (add, sub, mul, div) and their scalar variants. All compute in F32 on the device
 * (kernels/dev_elementwise.h) and round once to the output dtype; backward reduces a broadcast gradient
 * over the broadcast dims (in double) before handing it to the operand. */
#include "ops.h"

#include <string.h>

/* ---- unary ---- */

typedef struct unary_saved {
    ampci_unary kind;
} unary_saved;

/* t itself when contiguous, else a contiguous copy in its own dtype (exact): the device's unary maps take
 * contiguous operands. */
static const ampc_tensor *contiguous(const char *op, const ampc_tensor *t) {
    return ampc_tensor_is_contiguous(t) ? t : ampci_copy_as(op, t, t->dtype);
}

static ampc_status unary_backward(ampci_node *n, const ampc_tensor *gout) {
    ampc_tensor *x = n->in[0];
    const unary_saved *sv = n->saved;
    bool staged = ampc_tensor_is_contiguous(x) && ampc_tensor_is_contiguous(n->out) && ampc_tensor_is_contiguous(gout);
    const ampc_tensor *xc = contiguous(n->op, x), *yc = contiguous(n->op, n->out), *gc = contiguous(n->op, gout);
    if (!xc || !yc || !gc) return ampc_last_status();
    /* contiguous operands: the gradient in x's dtype straight from the map; a strided one gives an F32
     * gradient, which ampci_grad_accumulate rounds (or sums) as any F32 contribution */
    ampc_dtype gdt = staged ? x->dtype : AMPC_DTYPE_F32;
    ampc_tensor *gx = ampci_output(n->op, n->ctx, gdt, x->ndim, x->shape);
    if (!gx || AMPCI_DEV(n->ctx, unary_bw, .kind = sv->kind, .gx = ampci_dev_ptr(gx), .gx_dt = gdt,
                         .g = ampci_dev_ptr(gc), .x = ampci_dev_ptr(xc), .y = ampci_dev_ptr(yc), .g_dt = gout->dtype,
                         .x_dt = x->dtype, .y_dt = n->out->dtype, .n = ampci_numel(x)) != AMPC_OK)
        return ampc_last_status();
    return ampci_grad_accumulate(x, gx);
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
    const ampc_tensor *xc = contiguous(op, x);
#ifdef AMPC_PLANT_HOST_ACCESS /* tests/test_planted.c only: a host read behind the device's back */
    static volatile unsigned char planted __attribute__((unused));
    if (xc && ampci_numel(xc) > 0) planted = *(const volatile unsigned char *)ampci_dev_ptr(xc);
#endif
    ampc_tensor *out = xc ? ampci_output(op, ctx, x->dtype, x->ndim, x->shape) : NULL;
    if (out && AMPCI_DEV(ctx, unary, .kind = kind, .y = ampci_dev_ptr(out), .y_dt = x->dtype, .x = ampci_dev_ptr(xc),
                         .x_dt = x->dtype, .n = ampci_numel(x)) != AMPC_OK)
        out = NULL;
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

static ampc_status scalar_backward(ampci_node *n, const ampc_tensor *gout) {
    const scalar_saved *sv = n->saved;
    float *g = (float *)ampci_as_f32(n->op, gout); /* read only: node gradients are never modified */
    if (!g) return ampc_last_status();
    if (sv->kind == AMPCI_BINARY_ADD || sv->kind == AMPCI_BINARY_SUB) return ampci_accumulate_f32(n->op, n->in[0], g);
    /* d(x s)/dx = s; d(x / s)/dx = 1/s, applied as a division like the forward */
    int64_t cnt = ampci_numel(gout);
    float *gx = ampci_scratch(n->ctx, n->op, cnt);
    if (!gx || AMPCI_DEV(n->ctx, scalar, .kind = sv->kind, .s = sv->s, .y = gx, .x = g, .n = cnt) != AMPC_OK)
        return ampc_last_status();
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
    if (!y || AMPCI_DEV(ctx, scalar, .kind = kind, .s = (float)s, .y = y, .x = xf, .n = n) != AMPC_OK) return NULL;
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

/* z = a op b over the broadcast shape (a, b row-major in their own shapes, F32), on the device. */
static bool binary_bcast(ampc_ctx *ctx, ampci_binary kind, const ampci_bcast *bc, const float *a, const float *b,
                         float *z, int64_t na, int64_t nb) {
    return AMPCI_DEV(ctx, binary, .kind = kind, .bc = *bc, .z = z, .a = a, .b = b, .na = na, .nb = nb) == AMPC_OK;
}

/* y (n, F32) = -x (n, F32); y may be x. */
static bool negate(ampc_ctx *ctx, float *y, const float *x, int64_t n) {
    return AMPCI_DEV(ctx, unary, .kind = AMPCI_UNARY_NEG, .y = y, .y_dt = AMPC_DTYPE_F32, .x = x,
                     .x_dt = AMPC_DTYPE_F32, .n = n) == AMPC_OK;
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
            if (!ga || !binary_bcast(ctx, sv->kind, &g_b, g, bf, ga, cnt, nb)) return ampc_last_status();
        }
        s = binary_operand_grad(n, 0, ga);
    }
    if (s == AMPC_OK && ampci_input_needs_grad(n, 1)) {
        float *gb = ampci_scratch(ctx, n->op, cnt);
        if (!gb) return ampc_last_status();
        bool ok = true;
        if (sv->kind == AMPCI_BINARY_ADD) {
            ampci_dev_copy(ctx, gb, g, (size_t)cnt * sizeof *gb);
        } else if (sv->kind == AMPCI_BINARY_SUB) {
            ok = negate(ctx, gb, g, cnt);
        } else { /* mul: g * a; div: -(g * a / b) / b */
            ok = binary_bcast(ctx, AMPCI_BINARY_MUL, &g_a, g, af, gb, cnt, na);
            if (ok && sv->kind == AMPCI_BINARY_DIV) {
                float *tmp = ampci_scratch(ctx, n->op, cnt);
                ok = tmp && binary_bcast(ctx, AMPCI_BINARY_DIV, &g_b, gb, bf, tmp, cnt, nb) &&
                     binary_bcast(ctx, AMPCI_BINARY_DIV, &g_b, tmp, bf, gb, cnt, nb) && negate(ctx, gb, gb, cnt);
            }
        }
        if (!ok) return ampc_last_status();
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
    if (!z || !binary_bcast(ctx, kind, &bc, af, bf, z, ampci_numel(a), ampci_numel(b))) return NULL;
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
