/* conv.c: 2-D convolution and max pooling over (N, C, H, W) inputs.
 * conv2d is im2row + one GEMM: every output pixel's input window is copied (in the input dtype, exactly)
 * into a row of col (N*OH*OW, C*KH*KW), and out^T = col W^T runs through the kernel table's GEMM in that
 * dtype with F32 accumulation; the bias is added in F32 and the result rounded once. The backward is the
 * usual pair: gx = col2im(gY^T W) per image, gW = sum over images of gY_n col_n (F32, image order), gb
 * the sum of gY in double. max_pool2d computes in F32 (a selection: exact), saves the argmax of every
 * window as an int32 plane index and routes the gradient there. */
#include "ops.h"


#define GRAIN_ELEMS 16384

/* Items per parallel chunk when each costs per_item elements of work. */
static int64_t grain_of(int64_t per_item) {
    return per_item >= GRAIN_ELEMS ? 1 : GRAIN_ELEMS / (per_item ? per_item : 1);
}

/* ---- geometry ---- */

/* Output extent of one spatial dim; false (error recorded) when the kernel does not fit the padded input. */
static bool out_extent(const char *op, const ampc_tensor *x, const char *dim, int64_t in, int64_t k, int64_t s,
                       int64_t p, int64_t *out) {
    if (in + 2 * p < k) {
        char b[128];
        ampci_fail(AMPC_STATUS_SHAPE, "%s: input %s: kernel %s %lld is larger than the padded input %s %lld "
                   "(%lld + 2 * pad %lld); expected kernel <= input + 2 * pad", op,
                   ampc_tensor_describe(x, b, sizeof b), dim, (long long)k, dim, (long long)(in + 2 * p), (long long)in,
                   (long long)p);
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

/* ---- parallel drivers for the range kernels ---- */

typedef struct conv_job {
    const ampci_conv_geom *g;
    ampc_k_im2col_fn im2col;
    ampc_k_col2im_fn col2im;
    void *col;
    const void *x;
    float *gx;
    const float *gcol;
} conv_job;

static void im2col_chunk(void *vp, int64_t b, int64_t e, int64_t c) {
    (void)c;
    const conv_job *j = vp;
    j->im2col(j->col, j->x, j->g, b, e);
}

static void col2im_chunk(void *vp, int64_t b, int64_t e, int64_t c) {
    (void)c;
    const conv_job *j = vp;
    j->col2im(j->gx, j->gcol, j->g, b, e);
}

/* col (N*OH*OW, C*KH*KW) in x's dtype, arena. */
static void *im2row(ampc_ctx *ctx, const char *op, ampc_dtype dt, const void *x, const ampci_conv_geom *g) {
    int64_t rows = g->N * g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    void *col = ampci_arena_alloc(ctx, (size_t)(rows * ckk > 0 ? rows * ckk : 1) * ampc_dtype_size(dt), op);
    if (!col) return NULL;
    conv_job j = {.g = g, .im2col = ctx->kernels->im2col[dt], .col = col, .x = x};
    ampc_parallel_for(ctx, rows, grain_of(ckk), im2col_chunk, &j);
    return col;
}

/* ---- conv2d ---- */

typedef struct conv_saved {
    ampci_conv_geom g;
    int64_t O;
    const void *x, *w;   /* contiguous data (the inputs' or arena copies), their dtype */
} conv_saved;

typedef struct bias_job {
    float *y;
    const float *yt, *b;
    int64_t O, ohw;
} bias_job;

/* planes [b, e) of y (N, O, OH*OW) = the transposed GEMM result yt (N*OH*OW, O) + bias */
static void bias_planes(void *vp, int64_t b, int64_t e, int64_t c) {
    (void)c;
    const bias_job *j = vp;
    for (int64_t p = b; p < e; p++) {
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
    for (int64_t i = 0; i < g->N; i++) {   /* gcol_n (OHW, CKK) = gY_n^T (OHW, O) W (O, CKK) */
        ampci_gemm m = {ohw, ckk, sv->O, (const unsigned char *)gy + (size_t)(i * sv->O * ohw) * es, ohw, true,
                        sv->w, ckk, false, gcol + i * ohw * ckk, ckk, 0.0f};
        ampc_status s = ampci_gemm_fn(ctx, dt)(ctx, &m);
        if (s != AMPC_OK) return s;
    }
    conv_job j = {.g = g, .col2im = ctx->kernels->col2im, .gx = gx, .gcol = gcol};
    ampc_parallel_for(ctx, g->N * g->C, grain_of(ohw * g->KH * g->KW), col2im_chunk, &j);
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
    for (int64_t i = 0; i < g->N; i++) {   /* gW (O, CKK) += gY_n (O, OHW) col_n (OHW, CKK), image order */
        ampci_gemm m = {sv->O, ckk, ohw, (const unsigned char *)gy + (size_t)(i * sv->O * ohw) * es, ohw, false,
                        col + (size_t)(i * ohw * ckk) * es, ckk, false, gw, ckk, i ? 1.0f : 0.0f};
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
        ampci_fail(AMPC_STATUS_SHAPE, "%s: input %s, weight %s, bias %s; expected weight (O, C, KH, KW) with C = %lld "
                   "input channels and KH, KW >= 1, bias (O)", op, ampc_tensor_describe(x, xs, sizeof xs),
                   ampc_tensor_describe(w, ws, sizeof ws), b ? ampc_tensor_describe(b, bs, sizeof bs) : "none",
                   (long long)x->shape[1]);
        return false;
    }
    if (p && (p->stride_h < 0 || p->stride_w < 0 || p->pad_h < 0 || p->pad_w < 0)) {
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: stride (%d, %d), pad (%d, %d); expected stride >= 0 (0 = 1) and "
                   "pad >= 0", op, p->stride_h, p->stride_w, p->pad_h, p->pad_w);
        return false;
    }
    *g = (ampci_conv_geom){.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
                           .KH = w->shape[2], .KW = w->shape[3], .sh = p && p->stride_h ? p->stride_h : 1,
                           .sw = p && p->stride_w ? p->stride_w : 1, .ph = p ? p->pad_h : 0, .pw = p ? p->pad_w : 0};
    if (!out_extent(op, x, "height", g->H, g->KH, g->sh, g->ph, &g->OH) ||
        !out_extent(op, x, "width", g->W, g->KW, g->sw, g->pw, &g->OW))
        return false;
    return ampci_same_dtype(op, x, "input", w, "weight") && (!b || ampci_same_dtype(op, x, "input", b, "bias"));
}

ampc_tensor *ampc_conv2d(ampc_ctx *ctx, const ampc_tensor *x, const ampc_tensor *w, const ampc_tensor *b,
                         const ampc_conv2d_params *params) {
    static const char op[] = "ampc_conv2d";
    const ampc_tensor *ac_[3] = {x, w, b};
    if (!ampci_op_enter(ctx, AMPCI_OP_CONV2D, ac_, 3)) return NULL;
    x = ac_[0], w = ac_[1], b = ac_[2];
    if (!ampci_op_input(ctx, op, x, "input") || !ampci_op_input(ctx, op, w, "weight")) return NULL;
    if (b && !ampci_op_input(ctx, op, b, "bias")) return NULL;
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
    ampci_gemm m = {rows, sv.O, ckk, col, ckk, false, sv.w, ckk, true, yt, sv.O, 0.0f};   /* yt = col W^T */
    if (ampci_gemm_fn(ctx, dt)(ctx, &m) != AMPC_OK) return NULL;
    bias_job bj = {y, yt, b ? ampci_as_f32(op, b) : NULL, sv.O, g->OH * g->OW};
    if (b && !bj.b) return NULL;
    ampc_parallel_for(ctx, g->N * sv.O, grain_of(bj.ohw), bias_planes, &bj);
    int64_t shape[4] = {g->N, sv.O, g->OH, g->OW};
    ampc_tensor *out = ampci_result(op, ctx, dt, 4, shape, y);
    const ampc_tensor *in[3] = {x, w, b};
    if (out && ampci_wants_grad(ctx, in, 3)) {
        ampci_node *node = ampci_record(ctx, op, out, in, 3, conv_backward, 3u, sizeof sv);
        if (!node) return NULL;
        *(conv_saved *)node->saved = sv;
    }
    return out;
}

/* ---- max_pool2d ---- */

typedef struct pool_saved {
    ampci_conv_geom g;
    int32_t *arg;   /* (N, C, OH, OW) plane indices of the maxima, arena */
} pool_saved;

typedef struct pool_job {
    const ampci_conv_geom *g;
    const struct ampc_kernels *k;
    float *out;
    int32_t *arg;
    const float *in;
} pool_job;

static void pool_chunk(void *vp, int64_t b, int64_t e, int64_t c) {
    (void)c;
    const pool_job *j = vp;
    j->k->maxpool(j->out, j->arg, j->in, j->g, b, e);
}

static void pool_bw_chunk(void *vp, int64_t b, int64_t e, int64_t c) {
    (void)c;
    const pool_job *j = vp;
    j->k->maxpool_bw(j->out, j->in, j->arg, j->g, b, e);
}

static ampc_status pool_backward(ampci_node *n, const ampc_tensor *gout) {
    const pool_saved *sv = n->saved;
    const ampci_conv_geom *g = &sv->g;
    const float *gy = ampci_as_f32(n->op, gout);
    float *gx = gy ? ampci_scratch(n->ctx, n->op, g->N * g->C * g->H * g->W) : NULL;
    if (!gx) return ampc_last_status();
    pool_job j = {g, n->ctx->kernels, gx, sv->arg, gy};
    ampc_parallel_for(n->ctx, g->N * g->C, grain_of(g->H * g->W + g->OH * g->OW), pool_bw_chunk, &j);
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
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: kernel (%d, %d), stride (%d, %d), pad (%d, %d); expected kernel >= 1, "
                   "stride >= 0 (0 = the kernel) and 0 <= pad <= kernel / 2", op, p->kernel_h, p->kernel_w,
                   p->stride_h, p->stride_w, p->pad_h, p->pad_w);
        return false;
    }
    if (x->shape[2] * x->shape[3] > INT32_MAX) {
        char b[128];
        ampci_fail(AMPC_STATUS_UNSUPPORTED, "%s: input %s: planes of more than 2^31 - 1 elements are not supported", op,
                   ampc_tensor_describe(x, b, sizeof b));
        return false;
    }
    *g = (ampci_conv_geom){.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3],
                           .KH = p->kernel_h, .KW = p->kernel_w, .sh = p->stride_h ? p->stride_h : p->kernel_h,
                           .sw = p->stride_w ? p->stride_w : p->kernel_w, .ph = p->pad_h, .pw = p->pad_w};
    return out_extent(op, x, "height", g->H, g->KH, g->sh, g->ph, &g->OH) &&
           out_extent(op, x, "width", g->W, g->KW, g->sw, g->pw, &g->OW);
}

ampc_tensor *ampc_max_pool2d(ampc_ctx *ctx, const ampc_tensor *x, const ampc_pool2d_params *params) {
    static const char op[] = "ampc_max_pool2d";
    const ampc_tensor *ac_[1] = {x};
    if (!ampci_op_enter(ctx, AMPCI_OP_MAX_POOL2D, ac_, 1)) return NULL;
    x = ac_[0];
    if (!ampci_op_input(ctx, op, x, "input")) return NULL;
    pool_saved sv;
    if (!pool_check(op, x, params, &sv.g)) return NULL;
    const ampci_conv_geom *g = &sv.g;
    int64_t planes = g->N * g->C, nout = planes * g->OH * g->OW;
    const float *xf = ampci_as_f32(op, x);
    float *y = xf ? ampci_scratch(ctx, op, nout) : NULL;
    sv.arg = y ? ampci_arena_alloc(ctx, (size_t)(nout ? nout : 1) * sizeof *sv.arg, op) : NULL;
    if (!sv.arg) return NULL;
    pool_job j = {g, ctx->kernels, y, sv.arg, xf};
    ampc_parallel_for(ctx, planes, grain_of(g->OH * g->OW * g->KH * g->KW), pool_chunk, &j);
    int64_t shape[4] = {g->N, g->C, g->OH, g->OW};
    ampc_tensor *out = ampci_result(op, ctx, x->dtype, 4, shape, y);
    if (out && ampci_wants_grad(ctx, &x, 1)) {
        ampci_node *node = ampci_record(ctx, op, out, &x, 1, pool_backward, 0u, sizeof sv);
        if (!node) return NULL;
        *(pool_saved *)node->saved = sv;
    }
    return out;
}
