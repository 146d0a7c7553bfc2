/* conv.c: 2-D convolution and max pooling over (N, C, H, W) inputs.
 * conv2d is im2row + GEMM: every output pixel's input window is copied (in the input dtype, exactly) into
 * a row of col (N*OH*OW, C*KH*KW), and out^T = col W^T runs through the kernel table's GEMM in that dtype
 * with F32 accumulation; the bias is added in F32, the result rounded once and transposed into the output
 * planes. The work goes a chunk of images at a time (chunk_images), which changes no bit. The backward is
 * the usual pair: gx = col2im(gY^T W), gW = sum over images of gY_n col_n (F32, image order), gb the sum of
 * gY in double. max_pool2d computes in F32 (a selection: exact; 16-bit planes are staged through the F32
 * kernels), saves the argmax of every window as an int32 plane index and routes the gradient there. */
#include "ops.h"

#include <string.h>

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

/* col (N*OH*OW, C*KH*KW) of g's images = im2row of x, in dt. */
static void im2row(ampc_ctx *ctx, ampc_dtype dt, void *col, const void *x, const ampci_conv_geom *g) {
    ampci_parallel_rows(ctx, g->N * g->OH * g->OW, g->C * g->KH * g->KW, im2col_run,
                        &(conv_rows){.g = g, .im2col = ctx->kernels->im2col[dt], .col = col, .x = x});
}

/* Images are processed a chunk at a time, so that a chunk's buffers (CHUNK_BYTES at most, one image at
 * least: the column matrix and what the step makes from it) are still in cache when the next pass reads
 * them, while the chunk's GEMM stays large enough to be spread over the threads. The chunks depend only on
 * the sizes, and so does every result: a GEMM computes each element of c from its row of op(a) and column
 * of op(b) alone. pixel_bytes: the buffers' bytes per output pixel. */
#define CHUNK_BYTES ((int64_t)2 << 20)

static int64_t chunk_images(const ampci_conv_geom *g, int64_t pixel_bytes) {
    int64_t per_image = g->OH * g->OW * pixel_bytes, k = 1;
    if (per_image > 0 && per_image < CHUNK_BYTES) k = CHUNK_BYTES / per_image;
    return k < g->N ? k : (g->N > 0 ? g->N : 1);
}

/* Images [n0, n0 + k) of g as a geometry of their own. */
static ampci_conv_geom images(const ampci_conv_geom *g, int64_t k) {
    ampci_conv_geom c = *g;
    c.N = k;
    return c;
}

static const void *at_image(const void *p, int64_t n, int64_t per_image, ampc_dtype dt) {
    return (const unsigned char *)p + (size_t)(n * per_image) * ampc_dtype_size(dt);
}

/* ---- conv2d ---- */

typedef struct conv_saved {
    ampci_conv_geom g;
    int64_t O;
    const void *x, *w; /* contiguous data (the inputs' or arena copies), their dtype */
} conv_saved;

/* Images [i0, i1) of a chunk's output: their rows of yt (OH*OW, O) F32 + bias (+0 without one, as
 * y = yt + 0 always was), rounded once to dt into yd (the same layout; yd is yt itself for F32), then
 * transposed into their planes of y (O, OH*OW): im2row with a 1x1 window over yd read as OH*OW planes of
 * one row of O is exactly that transpose (row o gathers element o of every plane), a plain copy. */
typedef struct out_images {
    const struct ampc_kernels *k;
    float *yt;
    void *yd, *y;
    const float *b;
    int64_t O, ohw;
    ampc_dtype dt;
} out_images;

AMPCI_ROW_BODY(out_run, out_images, j, i0, i1, chunk) {
    size_t es = ampc_dtype_size(j->dt), n = (size_t)(j->ohw * j->O);
    ampci_conv_geom t = {
        .N = 1, .C = j->ohw, .H = 1, .W = j->O, .KH = 1, .KW = 1, .OH = 1, .OW = j->O, .sh = 1, .sw = 1};
    for (int64_t i = i0; i < i1; i++) {
        float *yt = j->yt + (size_t)i * n;
        void *yd = j->dt == AMPC_DTYPE_F32 ? (void *)yt : (unsigned char *)j->yd + (size_t)i * n * es;
        for (int64_t r = 0; r < j->ohw; r++)
            for (int64_t o = 0; o < j->O; o++) yt[r * j->O + o] = yt[r * j->O + o] + (j->b ? j->b[o] : 0.0f);
        if (j->dt != AMPC_DTYPE_F32) ampci_convert_with(j->k, yd, j->dt, yt, AMPC_DTYPE_F32, n);
        j->k->im2col[j->dt]((unsigned char *)j->y + (size_t)i * n * es, yd, &t, 0, j->O);
    }
}

/* gb[o] = the sum of gy[i, o, p] over images i and pixels p, in double in (i, p) order; 8 channels at a
 * time so that 8 independent sums are in flight. gy (N, O, OH*OW) in dt, converted a stage at a time. */
#define GB_STAGE 256
typedef struct bias_grad {
    const struct ampc_kernels *k;
    float *gb;
    const void *gy;
    ampc_dtype dt;
    int64_t N, O, ohw;
} bias_grad;

AMPCI_ROW_BODY(bias_grad_run, bias_grad, j, o0, o1, chunk) {
    static const float zero[GB_STAGE];
    float stage[8][GB_STAGE];
    size_t es = ampc_dtype_size(j->dt);
    for (int64_t oa = o0; oa < o1; oa += 8) {
        double s[8] = {0};
        for (int64_t i = 0; i < j->N; i++)
            for (int64_t p0 = 0; p0 < j->ohw; p0 += GB_STAGE) {
                int64_t len = j->ohw - p0 < GB_STAGE ? j->ohw - p0 : GB_STAGE;
                const float *row[8];
                for (int k = 0; k < 8; k++) {
                    const unsigned char *src = (const unsigned char *)j->gy +
                                               (size_t)((i * j->O + oa + k) * j->ohw + p0) * es;
                    row[k] = oa + k >= o1 ? zero : j->dt == AMPC_DTYPE_F32 ? (const float *)src : stage[k];
                    if (oa + k < o1 && j->dt != AMPC_DTYPE_F32)
                        ampci_convert_with(j->k, stage[k], AMPC_DTYPE_F32, src, j->dt, (size_t)len);
                }
                for (int64_t p = 0; p < len; p++)
#pragma GCC unroll 8
                    for (int k = 0; k < 8; k++) s[k] += row[k][p];
            }
        for (int k = 0; k < 8 && oa + k < o1; k++) j->gb[oa + k] = (float)s[k];
    }
}

static ampc_status conv_grad_b(ampci_node *n, const conv_saved *sv, const void *gy, ampc_dtype dt) {
    float *gb = ampci_scratch(n->ctx, n->op, sv->O);
    if (!gb) return ampc_last_status();
    ampc_parallel_for(n->ctx, sv->O, 8, bias_grad_run,
                      &(bias_grad){n->ctx->kernels, gb, gy, dt, sv->g.N, sv->O, sv->g.OH * sv->g.OW});
    return ampci_accumulate_f32(n->op, n->in[2], gb);
}

/* gyt (O, k*OHW) = images [n0, n0 + k) of gy (N, O, OHW) with the channel dim first (row o: those
 * images' planes o, one after the other). */
typedef struct chan_rows {
    unsigned char *gyt;
    const unsigned char *gy;
    int64_t n0, k, O, ohw;
    size_t es;
} chan_rows;

AMPCI_ROW_BODY(chan_run, chan_rows, j, o0, o1, chunk) {
    size_t plane = (size_t)j->ohw * j->es;
    for (int64_t o = o0; o < o1; o++)
        for (int64_t i = 0; i < j->k; i++)
            memcpy(j->gyt + (size_t)(o * j->k + i) * plane, j->gy + (size_t)((j->n0 + i) * j->O + o) * plane, plane);
}

/* gx = col2im(gcol) with gcol (N*OHW, CKK) = gY^T W, a chunk of images at a time: gcol_c = gyt_c^T W for
 * the chunk's gyt_c (O, k*OHW). */
static ampc_status conv_grad_x(ampci_node *n, const conv_saved *sv, const void *gy, ampc_dtype dt) {
    ampc_ctx *ctx = n->ctx;
    const ampci_conv_geom *g = &sv->g;
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW, chw = g->C * g->H * g->W;
    size_t es = ampc_dtype_size(dt);
    int64_t kc = chunk_images(g, ckk * 4 + sv->O * (int64_t)es); /* gcol, gyt */
    float *gcol = ampci_scratch(ctx, n->op, kc * ohw * ckk), *gx = ampci_scratch(ctx, n->op, g->N * chw);
    void *gyt = ampci_step_alloc(ctx, (size_t)(kc * sv->O * ohw > 0 ? kc * sv->O * ohw : 1) * es, n->op);
    if (!gcol || !gx || !gyt) return ampc_last_status();
    for (int64_t n0 = 0; n0 < g->N; n0 += kc) {
        int64_t k = g->N - n0 < kc ? g->N - n0 : kc;
        ampci_parallel_rows(ctx, sv->O, k * ohw, chan_run, &(chan_rows){gyt, gy, n0, k, sv->O, ohw, es});
        ampci_gemm m = {k * ohw, ckk,  sv->O, gyt,  k * ohw, true, sv->w,         ckk,
                        false,   gcol, ckk,   0.0f, NULL,    NULL, AMPC_DTYPE_F32};
        ampc_status s = ampci_gemm_fn(ctx, dt)(ctx, &m);
        if (s != AMPC_OK) return s;
        ampci_conv_geom gc = images(g, k);
        ampci_parallel_rows(ctx, k * g->C, ohw * g->KH * g->KW, col2im_run,
                            &(conv_rows){.g = &gc, .col2im = ctx->kernels->col2im, .gx = gx + n0 * chw, .gcol = gcol});
    }
    ampci_step_free(ctx, gcol), ampci_step_free(ctx, gyt);
    return ampci_accumulate_f32(n->op, n->in[0], gx);
}

/* gW (O, CKK) = sum over images of gY_n (O, OHW) col_n (OHW, CKK), in image order; col made a chunk of
 * images at a time. */
static ampc_status conv_grad_w(ampci_node *n, const conv_saved *sv, const void *gy, ampc_dtype dt) {
    ampc_ctx *ctx = n->ctx;
    const ampci_conv_geom *g = &sv->g;
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW, kc = chunk_images(g, ckk * (int64_t)ampc_dtype_size(dt));
    void *col = ampci_step_alloc(ctx, (size_t)(kc * ohw * ckk > 0 ? kc * ohw * ckk : 1) * ampc_dtype_size(dt), n->op);
    float *gw = ampci_zeros(ctx, n->op, sv->O * ckk);
    if (!col || !gw) return ampc_last_status();
    for (int64_t n0 = 0; n0 < g->N; n0 += kc) {
        int64_t k = g->N - n0 < kc ? g->N - n0 : kc;
        ampci_conv_geom gc = images(g, k);
        im2row(ctx, dt, col, at_image(sv->x, n0, g->C * g->H * g->W, dt), &gc);
        for (int64_t i = n0; i < n0 + k; i++) {
            ampci_gemm m = {sv->O,
                            ckk,
                            ohw,
                            at_image(gy, i, sv->O * ohw, dt),
                            ohw,
                            false,
                            at_image(col, i - n0, ohw * ckk, dt),
                            ckk,
                            false,
                            gw,
                            ckk,
                            i ? 1.0f : 0.0f,
                            NULL,
                            NULL,
                            AMPC_DTYPE_F32};
            ampc_status s = ampci_gemm_fn(ctx, dt)(ctx, &m);
            if (s != AMPC_OK) return s;
        }
    }
    ampci_step_free(ctx, col);
    return ampci_accumulate_f32(n->op, n->in[1], gw);
}

static ampc_status conv_backward(ampci_node *n, const ampc_tensor *gout) {
    const conv_saved *sv = n->saved;
    ampc_dtype dt = n->in[0]->dtype;
    const ampc_tensor *go = gout->dtype == dt && ampc_tensor_is_contiguous(gout) ? gout
                                                                                 : ampci_copy_as(n->op, gout, dt);
    if (!go) return ampc_last_status();
    const void *gy = ampci_dev_ptr(go);
    ampc_status s = AMPC_OK;
    if (ampci_input_needs_grad(n, 0)) s = conv_grad_x(n, sv, gy, dt);
    if (s == AMPC_OK && ampci_input_needs_grad(n, 1)) s = conv_grad_w(n, sv, gy, dt);
    if (s == AMPC_OK && ampci_input_needs_grad(n, 2)) s = conv_grad_b(n, sv, gy, dt);
    return s;
}

/* y (N, O, OH, OW) in dt = conv(x, w) + bias, a chunk of images at a time: col_c = im2row(x_c), yt_c =
 * col_c W^T (F32), + bias and rounded once to dt (yd_c; yt_c itself for F32), then transposed into the
 * chunk's planes of y. */
static ampc_status conv_forward(ampc_ctx *ctx, const char *op, const conv_saved *sv, ampc_dtype dt, const float *bias,
                                void *y) {
    const ampci_conv_geom *g = &sv->g;
    size_t es = ampc_dtype_size(dt);
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    int64_t yd_bytes = dt == AMPC_DTYPE_F32 ? 0 : sv->O * (int64_t)es;                       /* F32: yd is yt */
    int64_t kc = chunk_images(g, ckk * (int64_t)es + sv->O * 4 + yd_bytes), rows = kc * ohw; /* col, yt, yd */
    void *col = ampci_step_alloc(ctx, (size_t)(rows * ckk > 0 ? rows * ckk : 1) * es, op);
    float *yt = ampci_scratch(ctx, op, rows * sv->O);
    void *yd = dt == AMPC_DTYPE_F32 ? yt
                                    : ampci_step_alloc(ctx, (size_t)(rows * sv->O > 0 ? rows * sv->O : 1) * es, op);
    if (!col || !yt || !yd) return ampc_last_status();
    for (int64_t n0 = 0; n0 < g->N; n0 += kc) {
        int64_t k = g->N - n0 < kc ? g->N - n0 : kc;
        ampci_conv_geom gc = images(g, k);
        im2row(ctx, dt, col, at_image(sv->x, n0, g->C * g->H * g->W, dt), &gc);
        ampci_gemm m = {k * ohw, sv->O, ckk,   col,  ckk,  false, sv->w,         ckk,
                        true,    yt,    sv->O, 0.0f, NULL, NULL,  AMPC_DTYPE_F32}; /* yt = col W^T */
        ampc_status s = ampci_gemm_fn(ctx, dt)(ctx, &m);
        if (s != AMPC_OK) return s;
        void *yc = (unsigned char *)y + (size_t)(n0 * sv->O * ohw) * es;
        ampci_parallel_rows(ctx, k, ohw * sv->O, out_run,
                            &(out_images){ctx->kernels, yt, yd, yc, bias, sv->O, ohw, dt});
    }
    if (yd != yt) ampci_step_free(ctx, yd);
    ampci_step_free(ctx, yt), ampci_step_free(ctx, col);
    return AMPC_OK;
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
    if (!out || conv_forward(ctx, op, &sv, dt, bf, ampci_dev_ptr(out)) != AMPC_OK) return NULL;
    return ampci_op_end(&c, out, &sv);
}

/* ---- max_pool2d ---- */

typedef struct pool_saved {
    ampci_conv_geom g;
    int32_t *arg; /* (N, C, OH, OW) plane indices of the maxima, arena */
} pool_saved;

/* Planes [p0, p1) of max pooling through the kernel table: forward (y and the argmax from x) or, with
 * backward set, gx from gy routed by the argmax. in and out have dtype dt: the F32 kernels run on them
 * directly for F32, else on F32 copies of as many planes as fit POOL_STAGE at a time (stage_planes),
 * converted in and rounded out (exact both ways: selections, and 0 + gy where windows are disjoint). */
#define POOL_STAGE 4096

typedef struct pool_planes {
    const ampci_conv_geom *g;
    const struct ampc_kernels *k;
    void *out; /* y or gx */
    int32_t *arg;
    const void *in; /* x or gy */
    ampc_dtype dt;
    bool backward;
} pool_planes;

static int64_t stage_planes(const ampci_conv_geom *g) {
    int64_t hw = g->H * g->W, ohw = g->OH * g->OW;
    return POOL_STAGE / (hw > ohw ? hw : ohw);
}

/* The kernel on planes [0, m) of in (F32) into out, arg planes from arg on. */
static void pool_kernel(const pool_planes *j, float *out, int32_t *arg, const float *in, int64_t m) {
    if (j->backward) j->k->maxpool_bw(out, in, arg, j->g, 0, m);
    else j->k->maxpool(out, arg, in, j->g, 0, m);
}

AMPCI_ROW_BODY(pool_run, pool_planes, j, p0, p1, chunk) {
    int64_t hw = j->g->H * j->g->W, ohw = j->g->OH * j->g->OW;
    int64_t in_n = j->backward ? ohw : hw, out_n = j->backward ? hw : ohw, step = stage_planes(j->g);
    size_t es = ampc_dtype_size(j->dt);
    if (j->dt == AMPC_DTYPE_F32) {
        pool_kernel(j, (float *)j->out + p0 * out_n, j->arg + p0 * ohw, (const float *)j->in + p0 * in_n, p1 - p0);
        return;
    }
    float in[POOL_STAGE], out[POOL_STAGE];
    for (int64_t p = p0, m; p < p1; p += m) {
        m = p1 - p < step ? p1 - p : step;
        ampci_convert_with(j->k, in, AMPC_DTYPE_F32, (const unsigned char *)j->in + (size_t)(p * in_n) * es, j->dt,
                           (size_t)(m * in_n));
        pool_kernel(j, out, j->arg + p * ohw, in, m);
        ampci_convert_with(j->k, (unsigned char *)j->out + (size_t)(p * out_n) * es, j->dt, out, AMPC_DTYPE_F32,
                           (size_t)(m * out_n));
    }
}

/* pool_run over every plane; in and out of dtype dt (F32 where the planes do not fit the stage). */
static void pool_planes_run(ampc_ctx *ctx, const ampci_conv_geom *g, void *out, int32_t *arg, const void *in,
                            ampc_dtype dt, bool backward) {
    int64_t cost = backward ? g->H * g->W + g->OH * g->OW : g->OH * g->OW * g->KH * g->KW;
    ampci_parallel_rows(ctx, g->N * g->C, cost, pool_run, &(pool_planes){g, ctx->kernels, out, arg, in, dt, backward});
}

static ampc_status pool_backward(ampci_node *n, const ampc_tensor *gout) {
    const pool_saved *sv = n->saved;
    const ampci_conv_geom *g = &sv->g;
    ampc_tensor *x = n->in[0];
    /* gx in x's dtype straight away where every gx element is one gy value (disjoint windows): the same
     * bits as F32 rounded by the accumulation */
    if (x->dtype != AMPC_DTYPE_F32 && gout->dtype == x->dtype && ampc_tensor_is_contiguous(gout) &&
        stage_planes(g) > 0 && g->sh >= g->KH && g->sw >= g->KW) {
        ampc_tensor *gx = ampci_output(n->op, n->ctx, x->dtype, x->ndim, x->shape);
        if (!gx) return ampc_last_status();
        pool_planes_run(n->ctx, g, ampci_dev_ptr(gx), sv->arg, ampci_dev_ptr(gout), x->dtype, true);
        return ampci_grad_accumulate(x, gx);
    }
    const float *gy = ampci_as_f32(n->op, gout);
    float *gx = gy ? ampci_scratch(n->ctx, n->op, g->N * g->C * g->H * g->W) : NULL;
    if (!gx) return ampc_last_status();
    pool_planes_run(n->ctx, g, gx, sv->arg, gy, AMPC_DTYPE_F32, true);
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
    sv.arg = ampci_arena_alloc(ctx, (size_t)(nout ? nout : 1) * sizeof *sv.arg, op);
    if (!sv.arg) return NULL;
    ampc_tensor *out;
    if (x->dtype != AMPC_DTYPE_F32 && stage_planes(g) > 0 && ampc_tensor_is_contiguous(x)) { /* staged */
        out = ampci_output(op, ctx, x->dtype, 4, shape);
        if (out) pool_planes_run(ctx, g, ampci_dev_ptr(out), sv.arg, ampci_dev_ptr(x), x->dtype, false);
    } else {
        const float *xf = ampci_as_f32(op, x);
        float *y = xf ? ampci_scratch(ctx, op, nout) : NULL;
        if (!y) return NULL;
        pool_planes_run(ctx, g, y, sv.arg, xf, AMPC_DTYPE_F32, false);
        ampci_as_f32_done(x, xf);
        out = ampci_result(op, ctx, x->dtype, 4, shape, y);
    }
    return ampci_op_end(&c, out, &sv);
}
