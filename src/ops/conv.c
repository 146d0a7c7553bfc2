/* conv.c: 2-D convolution and max pooling over (N, C, H, W) inputs.
 * conv2d is im2row + one GEMM: every output pixel's input window is copied (in the input dtype, exactly)
 * into a row of col (N*OH*OW, C*KH*KW), and out^T = col W^T runs through the kernel table's GEMM in that
 * dtype with F32 accumulation; the bias is added in F32 and the result rounded once. The backward is the
 * usual pair: gx = col2im(gY^T W) per image, gW = sum over images of gY_n col_n (F32, image order), gb
 * the sum of gY in double. max_pool2d computes in F32 (a selection: exact), saves the argmax of every
 * window as an int32 plane index and routes the gradient there. */
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
    if (ampc_tensor_is_contiguous(t)) return ampci_tensor_ptr(t);
    ampc_tensor *c = ampci_copy_as(op, t, t->dtype);
    return c ? ampci_tensor_ptr(c) : NULL;
}

/* ---- im2row and col2im over the kernel table's range kernels ---- */

/* im2col: rows [r0, r1) of col (N*OH*OW, C*KH*KW) from x, in x's dtype; col2im: planes [r0, r1) of gx
 * (N*C planes of H*W, F32) summed back from gcol (N*OH*OW, C*KH*KW, F32). */
typedef struct conv_rows {
    const ampci_conv_geom *g;
    ampc_k_im2col_fn im2col;
    ampc_k_col2im_fn col2im;
    void *col;
    const void *x;
    float *gx;
    const float *gcol;
} conv_rows;

AMPCI_ROW_BODY(im2col_run, conv_rows, j, r0, r1, chunk) { j->im2col(j->col, j->x, j->g, r0, r1); }
AMPCI_ROW_BODY(col2im_run, conv_rows, j, p0, p1, chunk) { j->col2im(j->gx, j->gcol, j->g, p0, p1); }

/* col (N*OH*OW, C*KH*KW) in x's dtype, arena. */
static void *im2row(ampc_ctx *ctx, const char *op, ampc_dtype dt, const void *x, const ampci_conv_geom *g) {
    int64_t rows = g->N * g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    void *col = ampci_arena_alloc(ctx, (size_t)(rows * ckk > 0 ? rows * ckk : 1) * ampc_dtype_size(dt), op);
    if (!col) return NULL;
    ampci_parallel_rows(ctx, rows, ckk, im2col_run,
                        &(conv_rows){.g = g, .im2col = ctx->kernels->im2col[dt], .col = col, .x = x});
    return col;
}

/* ---- conv2d ---- */

typedef struct conv_saved {
    ampci_conv_geom g;
    int64_t O;
    const void *x, *w; /* contiguous data (the inputs' or arena copies), their dtype */
} conv_saved;

/* Planes [p0, p1) of y (N, O, OH*OW) = the transposed GEMM result yt (N*OH*OW, O) + bias. */
typedef struct bias_planes {
    float *y;
    const float *yt, *b;
    int64_t O, ohw;
} bias_planes;

AMPCI_ROW_BODY(bias_run, bias_planes, j, p0, p1, chunk) {
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / j->O, o = p % j->O;
        float bias = j->b ? j->b[o] : 0.0f, *y = j->y + p * j->ohw;
        const float *src = j->yt + n * j->ohw * j->O + o;
        for (int64_t i = 0; i < j->ohw; i++) y[i] = src[i * j->O] + bias;
    }
}

static ampc_status conv_grad_x(ampci_node *n, const conv_saved *sv, const void *gy, ampc_dtype dt) {
    ampc_ctx *ctx = n->ctx;
    const ampci_conv_geom *g = &sv->g;
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    float *gcol = ampci_scratch(ctx, n->op, g->N * ohw * ckk);
    float *gx = ampci_scratch(ctx, n->op, g->N * g->C * g->H * g->W);
    if (!gcol || !gx) return ampc_last_status();
    size_t es = ampc_dtype_size(dt);
    for (int64_t i = 0; i < g->N; i++) { /* gcol_n (OHW, CKK) = gY_n^T (OHW, O) W (O, CKK) */
        ampci_gemm m = {ohw,   ckk,
                        sv->O, (const unsigned char *)gy + (size_t)(i * sv->O * ohw) * es,
                        ohw,   true,
                        sv->w, ckk,
                        false, gcol + i * ohw * ckk,
                        ckk,   0.0f};
        ampc_status s = ampci_gemm_fn(ctx, dt)(ctx, &m);
        if (s != AMPC_OK) return s;
    }
    ampci_parallel_rows(ctx, g->N * g->C, ohw * g->KH * g->KW, col2im_run,
                        &(conv_rows){.g = g, .col2im = ctx->kernels->col2im, .gx = gx, .gcol = gcol});
    return ampci_accumulate_f32(n->op, n->in[0], gx);
}

static ampc_status conv_grad_w(ampci_node *n, const conv_saved *sv, const void *gy, ampc_dtype dt) {
    ampc_ctx *ctx = n->ctx;
    const ampci_conv_geom *g = &sv->g;
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    const unsigned char *col = im2row(ctx, n->op, dt, sv->x, g);
    float *gw = ampci_zeros(ctx, n->op, sv->O * ckk);
    if (!col || !gw) return ampc_last_status();
    size_t es = ampc_dtype_size(dt);
    for (int64_t i = 0; i < g->N; i++) { /* gW (O, CKK) += gY_n (O, OHW) col_n (OHW, CKK), image order */
        ampci_gemm m = {sv->O,
                        ckk,
                        ohw,
                        (const unsigned char *)gy + (size_t)(i * sv->O * ohw) * es,
                        ohw,
                        false,
                        col + (size_t)(i * ohw * ckk) * es,
                        ckk,
                        false,
                        gw,
                        ckk,
                        i ? 1.0f : 0.0f};
        ampc_status s = ampci_gemm_fn(ctx, dt)(ctx, &m);
        if (s != AMPC_OK) return s;
    }
    return ampci_accumulate_f32(n->op, n->in[1], gw);
}

static ampc_status conv_grad_b(ampci_node *n, const conv_saved *sv, const ampc_tensor *gout) {
    int64_t ohw = sv->g.OH * sv->g.OW;
    const float *g = ampci_as_f32(n->op, gout);
    float *gb = g ? ampci_scratch(n->ctx, n->op, sv->O) : NULL;
    if (!gb) return ampc_last_status();
    for (int64_t o = 0; o < sv->O; o++) {
        double s = 0;
        for (int64_t i = 0; i < sv->g.N; i++)
            for (int64_t p = 0; p < ohw; p++) s += g[(i * sv->O + o) * ohw + p];
        gb[o] = (float)s;
    }
    return ampci_accumulate_f32(n->op, n->in[2], gb);
}

static ampc_status conv_backward(ampci_node *n, const ampc_tensor *gout) {
    const conv_saved *sv = n->saved;
    ampc_dtype dt = n->in[0]->dtype;
    const ampc_tensor *go = gout->dtype == dt ? gout : ampci_copy_as(n->op, gout, dt);
    if (!go) return ampc_last_status();
    const void *gy = ampci_tensor_ptr(go);
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) s = conv_grad_x(n, sv, gy, dt);
    if (s == AMPC_OK && ampci_input_needs_grad(n, 1)) s = conv_grad_w(n, sv, gy, dt);
    if (s == AMPC_OK && ampci_input_needs_grad(n, 2)) s = conv_grad_b(n, sv, go);
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
    int64_t rows = g->N * g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    sv.x = contiguous_data(op, x), sv.w = contiguous_data(op, w);
    const void *col = sv.x && sv.w ? im2row(ctx, op, dt, sv.x, g) : NULL;
    float *yt = col ? ampci_scratch(ctx, op, rows * sv.O) : NULL, *y = yt ? ampci_scratch(ctx, op, rows * sv.O) : NULL;
    if (!y) return NULL;
    ampci_gemm m = {rows, sv.O, ckk, col, ckk, false, sv.w, ckk, true, yt, sv.O, 0.0f}; /* yt = col W^T */
    if (ampci_gemm_fn(ctx, dt)(ctx, &m) != AMPC_OK) return NULL;
    const float *bf = b ? ampci_as_f32(op, b) : NULL;
    if (b && !bf) return NULL;
    int64_t ohw = g->OH * g->OW, shape[4] = {g->N, sv.O, g->OH, g->OW};
    ampci_parallel_rows(ctx, g->N * sv.O, ohw, bias_run, &(bias_planes){y, yt, bf, sv.O, ohw});
    return ampci_op_end(&c, ampci_result(op, ctx, dt, 4, shape, y), &sv);
}

/* ---- max_pool2d ---- */

typedef struct pool_saved {
    ampci_conv_geom g;
    int32_t *arg; /* (N, C, OH, OW) plane indices of the maxima, arena */
} pool_saved;

/* Planes [p0, p1) of max pooling through the kernel table: forward (y and the argmax from x) or, with
 * backward set, gx from gy routed by the argmax. */
typedef struct pool_planes {
    const ampci_conv_geom *g;
    const struct ampc_kernels *k;
    float *out; /* y or gx */
    int32_t *arg;
    const float *in; /* x or gy */
    bool backward;
} pool_planes;

AMPCI_ROW_BODY(pool_run, pool_planes, j, p0, p1, chunk) {
    if (j->backward) j->k->maxpool_bw(j->out, j->in, j->arg, j->g, p0, p1);
    else j->k->maxpool(j->out, j->arg, j->in, j->g, p0, p1);
}

static ampc_status pool_backward(ampci_node *n, const ampc_tensor *gout) {
    const pool_saved *sv = n->saved;
    const ampci_conv_geom *g = &sv->g;
    const float *gy = ampci_as_f32(n->op, gout);
    float *gx = gy ? ampci_scratch(n->ctx, n->op, g->N * g->C * g->H * g->W) : NULL;
    if (!gx) return ampc_last_status();
    ampci_parallel_rows(n->ctx, g->N * g->C, g->H * g->W + g->OH * g->OW, pool_run,
                        &(pool_planes){g, n->ctx->kernels, gx, sv->arg, gy, true});
    return ampci_accumulate_f32(n->op, n->in[0], gx);
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
    int64_t planes = g->N * g->C, nout = planes * g->OH * g->OW;
    const float *xf = ampci_as_f32(op, x);
    float *y = xf ? ampci_scratch(ctx, op, nout) : NULL;
    sv.arg = y ? ampci_arena_alloc(ctx, (size_t)(nout ? nout : 1) * sizeof *sv.arg, op) : NULL;
    if (!sv.arg) return NULL;
    ampci_parallel_rows(ctx, planes, g->OH * g->OW * g->KH * g->KW, pool_run,
                        &(pool_planes){g, ctx->kernels, y, sv.arg, xf, false});
    int64_t shape[4] = {g->N, g->C, g->OH, g->OW};
    return ampci_op_end(&c, ampci_result(op, ctx, x->dtype, 4, shape, y), &sv);
}
