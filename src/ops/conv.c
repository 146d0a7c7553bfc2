/* conv.c: 2-D convolution and max pooling over (N, C, H, W) inputs: the checks, the geometry, the
 * operands made contiguous and the autograd record; the work is the device's (kernels/dev_linear.h).
 * conv2d multiplies in the input dtype with F32 accumulation (on the CPU: im2row + GEMM a chunk of images
 * at a time), adds the bias in F32 and rounds the result once. The backward asks the device for each
 * wanted gradient in F32: gx = col2im(gY^T W), gW = the sum over images of gY_n col_n (image order), gb the
 * sum of gY in double. max_pool2d computes in F32 (a selection: exact; 16-bit planes of a bounded size are
 * taken as they are, larger ones through F32 copies), saves the argmax of every window as an int32 plane
 * index and routes the gradient there. */
#include "ops.h"

/* ---- geometry ---- */

/* Output extent of one spatial dim; false (error recorded) when the kernel does not fit the padded input. */
static bool out_extent(const char *op, const ampc_tensor *x, const char *dim, int64_t in, int64_t k, int64_t s,
                       int64_t p, int64_t *out) {
    if (in + 2 * p < k) {
        char b[128];
        ampci_fail(AMPC_STATUS_SHAPE,
                   "%s: input %s: kernel %s %lld is larger than the padded input %s %lld "
                   "(%lld + 2 * pad %lld); expected kernel <= input + 2 * pad",
                   op, ampc_tensor_describe(x, b, sizeof b), dim, (long long)k, dim, (long long)(in + 2 * p),
                   (long long)in, (long long)p);
        return false;
    }
    *out = (in + 2 * p - k) / s + 1;
    return true;
}

/* x must be (N, C, H, W) with C, H, W >= 1. */
static bool check_nchw(const char *op, const ampc_tensor *x) {
    if (x->ndim == 4 && x->shape[1] >= 1 && x->shape[2] >= 1 && x->shape[3] >= 1) return true;
    char b[128];
    ampci_fail(AMPC_STATUS_SHAPE, "%s: input %s; expected 4-D (N, C, H, W) with C, H, W >= 1", op,
               ampc_tensor_describe(x, b, sizeof b));
    return false;
}

static const void *contiguous_data(const char *op, const ampc_tensor *t) {
    if (ampc_tensor_is_contiguous(t)) return ampci_dev_ptr(t);
    ampc_tensor *c = ampci_copy_as(op, t, t->dtype);
    return c ? ampci_dev_ptr(c) : NULL;
}

/* ---- conv2d ---- */

typedef struct conv_saved {
    ampci_conv_geom g;
    int64_t O;
    const void *x, *w; /* contiguous data (the inputs' or arena copies), their dtype */
} conv_saved;

/* The FLOPs of one convolution (ampc_ctx_matmul_flops): 2 N O OH OW C KH KW, the forward's and each of
 * the input and weight gradients'. */
static uint64_t conv_flops(const ampci_conv_geom *g, int64_t O) {
    return 2 * (uint64_t)g->N * (uint64_t)O * (uint64_t)g->OH * (uint64_t)g->OW * (uint64_t)g->C * (uint64_t)g->KH *
           (uint64_t)g->KW;
}

/* The gradient of input i (0: x, 1: w, 2: b) as F32 from the device, handed to that input. */
static ampc_status conv_grad(ampci_node *n, const conv_saved *sv, int i, const void *gy, ampc_dtype dt) {
    float *gr = ampci_scratch(n->ctx, n->op, ampci_numel(n->in[i]));
    if (!gr ||
        AMPCI_DEV(n->ctx, conv2d_bw, .g = sv->g, .O = sv->O, .dt = dt, .gx = i == 0 ? gr : NULL,
                  .gw = i == 1 ? gr : NULL, .gb = i == 2 ? gr : NULL, .gy = gy, .x = sv->x, .w = sv->w) != AMPC_OK)
        return ampc_last_status();
    if (i < 2) ampci_matmul_flops_add(n->ctx, conv_flops(&sv->g, sv->O)); /* the bias gradient is a sum */
    return ampci_accumulate_f32(n->op, n->in[i], gr);
}

static ampc_status conv_backward(ampci_node *n, const ampc_tensor *gout) {
    const conv_saved *sv = n->saved;
    ampc_dtype dt = n->in[0]->dtype;
    const ampc_tensor *go = gout->dtype == dt && ampc_tensor_is_contiguous(gout) ? gout
                                                                                 : ampci_copy_as(n->op, gout, dt);
    if (!go) return ampc_last_status();
    ampc_status s = AMPC_OK;
    for (int i = 0; i < 3 && s == AMPC_OK; i++)
        if (ampci_input_needs_grad(n, i)) s = conv_grad(n, sv, i, ampci_dev_ptr(go), dt);
    return s;
}

static bool conv_check(const char *op, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                       const ampc_conv2d_params *p, ampci_conv_geom *g) {
    char xs[128], ws[128], bs[128];
    if (!check_nchw(op, x)) return false;
    if (w->ndim != 4 || w->shape[1] != x->shape[1] || w->shape[2] < 1 || w->shape[3] < 1 ||
        (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        ampci_fail(AMPC_STATUS_SHAPE,
                   "%s: input %s, weight %s, bias %s; expected weight (O, C, KH, KW) with C = %lld "
                   "input channels and KH, KW >= 1, bias (O)",
                   op, ampc_tensor_describe(x, xs, sizeof xs), ampc_tensor_describe(w, ws, sizeof ws),
                   b ? ampc_tensor_describe(b, bs, sizeof bs) : "none", (long long)x->shape[1]);
        return false;
    }
    if (p && (p->stride_h < 0 || p->stride_w < 0 || p->pad_h < 0 || p->pad_w < 0)) {
        ampci_fail(AMPC_STATUS_INVALID_ARG,
                   "%s: stride (%d, %d), pad (%d, %d); expected stride >= 0 (0 = 1) and "
                   "pad >= 0",
                   op, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
        return false;
    }
    *g = (ampci_conv_geom){.N = x->shape[0],
                           .C = x->shape[1],
                           .H = x->shape[2],
                           .W = x->shape[3],
                           .KH = w->shape[2],
                           .KW = w->shape[3],
                           .sh = p && p->stride_h ? p->stride_h : 1,
                           .sw = p && p->stride_w ? p->stride_w : 1,
                           .ph = p ? p->pad_h : 0,
                           .pw = p ? p->pad_w : 0};
    if (!out_extent(op, x, "height", g->H, g->KH, g->sh, g->ph, &g->OH) ||
        !out_extent(op, x, "width", g->W, g->KW, g->sw, g->pw, &g->OW))
        return false;
    return ampci_same_dtype(op, x, "input", w, "weight") && (!b || ampci_same_dtype(op, x, "input", b, "bias"));
}

static const ampci_op_desc conv2d_op = {
    "ampc_conv2d",  AMPCI_OP_CONV2D,           3,           {"input", "weight", "bias"},
    .optional = 4u, .backward = conv_backward, .saves = 3u, .saved_size = sizeof(conv_saved)};

ampc_tensor *ampc_conv2d(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                         const ampc_conv2d_params *params) {
    const char *op = conv2d_op.name;
    ampci_op_call c = {.op = &conv2d_op, .ctx = ctx, .in = {x, w, b}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0], w = c.in[1], b = c.in[2];
    conv_saved sv = {0};
    if (!conv_check(op, x, w, b, params, &sv.g)) return NULL;
    sv.O = w->shape[0];
    const ampci_conv_geom *g = &sv.g;
    ampc_dtype dt = x->dtype;
    sv.x = contiguous_data(op, x), sv.w = contiguous_data(op, w);
    const float *bf = b && sv.x && sv.w ? ampci_as_f32(op, b) : NULL;
    int64_t shape[4] = {g->N, sv.O, g->OH, g->OW};
    ampc_tensor *out = sv.x && sv.w && (bf || !b) ? ampci_output(op, ctx, dt, 4, shape) : NULL;
    if (!out || AMPCI_DEV(ctx, conv2d, .g = sv.g, .O = sv.O, .dt = dt, .y = ampci_dev_ptr(out), .x = sv.x, .w = sv.w,
                          .bias = bf) != AMPC_OK)
        return NULL;
    ampci_matmul_flops_add(ctx, conv_flops(g, sv.O));
    return ampci_op_end(&c, out, &sv);
}

/* ---- max_pool2d ---- */

typedef struct pool_saved {
    ampci_conv_geom g;
    int32_t *arg; /* (N, C, OH, OW) plane indices of the maxima, device memory */
} pool_saved;

/* The device takes 16-bit planes as they are up to AMPCI_POOL_PLANE_MAX elements (an F32 copy of the
 * whole tensor otherwise). */
static bool planes_fit(const ampci_conv_geom *g) {
    int64_t hw = g->H * g->W, ohw = g->OH * g->OW;
    return (hw > ohw ? hw : ohw) <= AMPCI_POOL_PLANE_MAX;
}

static ampc_status pool_backward(ampci_node *n, const ampc_tensor *gout) {
    const pool_saved *sv = n->saved;
    const ampci_conv_geom *g = &sv->g;
    ampc_tensor *x = n->in[0];
    /* gx in x's dtype straight away where every gx element is one gy value (disjoint windows): the same
     * bits as F32 rounded by the accumulation */
    if (x->dtype != AMPC_DTYPE_F32 && gout->dtype == x->dtype && ampc_tensor_is_contiguous(gout) && planes_fit(g) &&
        g->sh >= g->KH && g->sw >= g->KW) {
        ampc_tensor *gx = ampci_output(n->op, n->ctx, x->dtype, x->ndim, x->shape);
        if (!gx || AMPCI_DEV(n->ctx, max_pool2d_bw, .g = *g, .dt = x->dtype, .gx = ampci_dev_ptr(gx),
                             .gy = ampci_dev_ptr(gout), .arg = sv->arg) != AMPC_OK)
            return ampc_last_status();
        return ampci_grad_accumulate(x, gx);
    }
    const float *gy = ampci_as_f32(n->op, gout);
    float *gx = gy ? ampci_scratch(n->ctx, n->op, g->N * g->C * g->H * g->W) : NULL;
    if (!gx ||
        AMPCI_DEV(n->ctx, max_pool2d_bw, .g = *g, .dt = AMPC_DTYPE_F32, .gx = gx, .gy = gy, .arg = sv->arg) != AMPC_OK)
        return ampc_last_status();
    return ampci_accumulate_f32(n->op, x, gx);
}

static bool pool_check(const char *op, const ampc_tensor *x, const ampc_pool2d_params *p, ampci_conv_geom *g) {
    if (!check_nchw(op, x)) return false;
    if (!p) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: params is NULL; the kernel size is required", op);
        return false;
    }
    if (p->kernel_h < 1 || p->kernel_w < 1 || p->stride_h < 0 || p->stride_w < 0 || p->pad_h < 0 || p->pad_w < 0 ||
        p->pad_h > p->kernel_h / 2 || p->pad_w > p->kernel_w / 2) {
        ampci_fail(AMPC_STATUS_INVALID_ARG,
                   "%s: kernel (%d, %d), stride (%d, %d), pad (%d, %d); expected kernel >= 1, "
                   "stride >= 0 (0 = the kernel) and 0 <= pad <= kernel / 2",
                   op, p->kernel_h, p->kernel_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
        return false;
    }
    if (x->shape[2] * x->shape[3] > INT32_MAX) {
        char b[128];
        ampci_fail(AMPC_STATUS_UNSUPPORTED, "%s: input %s: planes of more than 2^31 - 1 elements are not supported", op,
                   ampc_tensor_describe(x, b, sizeof b));
        return false;
    }
    *g = (ampci_conv_geom){.N = x->shape[0],
                           .C = x->shape[1],
                           .H = x->shape[2],
                           .W = x->shape[3],
                           .KH = p->kernel_h,
                           .KW = p->kernel_w,
                           .sh = p->stride_h ? p->stride_h : p->kernel_h,
                           .sw = p->stride_w ? p->stride_w : p->kernel_w,
                           .ph = p->pad_h,
                           .pw = p->pad_w};
    return out_extent(op, x, "height", g->H, g->KH, g->sh, g->ph, &g->OH) &&
           out_extent(op, x, "width", g->W, g->KW, g->sw, g->pw, &g->OW);
}

static const ampci_op_desc max_pool2d_op = {
    "ampc_max_pool2d", AMPCI_OP_MAX_POOL2D, 1, {"input"}, .backward = pool_backward, .saved_size = sizeof(pool_saved)};

ampc_tensor *ampc_max_pool2d(ampc_ctx *ctx, const ampc_tensor *x, const ampc_pool2d_params *params) {
    const char *op = max_pool2d_op.name;
    ampci_op_call c = {.op = &max_pool2d_op, .ctx = ctx, .in = {x}};
    if (!ampci_op_begin(&c)) return NULL;
    x = c.in[0];
    pool_saved sv;
    if (!pool_check(op, x, params, &sv.g)) return NULL;
    const ampci_conv_geom *g = &sv.g;
    int64_t nout = g->N * g->C * g->OH * g->OW, shape[4] = {g->N, g->C, g->OH, g->OW};
    /* step memory: the device writes it (a host arena buffer would not be device memory) */
    sv.arg = ampci_step_alloc(ctx, (size_t)(nout ? nout : 1) * sizeof *sv.arg, op);
    if (!sv.arg) return NULL;
    ampc_tensor *out;
    if (x->dtype != AMPC_DTYPE_F32 && planes_fit(g) && ampc_tensor_is_contiguous(x)) { /* as it is */
        out = ampci_output(op, ctx, x->dtype, 4, shape);
        if (out && AMPCI_DEV(ctx, max_pool2d, .g = *g, .dt = x->dtype, .y = ampci_dev_ptr(out), .arg = sv.arg,
                             .x = ampci_dev_ptr(x)) != AMPC_OK)
            out = NULL;
    } else {
        const float *xf = ampci_as_f32(op, x);
        float *y = xf ? ampci_scratch(ctx, op, nout) : NULL;
        if (!y || AMPCI_DEV(ctx, max_pool2d, .g = *g, .dt = AMPC_DTYPE_F32, .y = y, .arg = sv.arg, .x = xf) != AMPC_OK)
            return NULL;
        ampci_as_f32_done(x, xf);
        out = ampci_result(op, ctx, x->dtype, 4, shape, y);
    }
    return ampci_op_end(&c, out, &sv);
}
