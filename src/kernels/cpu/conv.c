/* conv.c: the CPU device's window operations (dev_linear.h): conv2d and its gradients, max pooling and
 * its gradient. conv2d is im2row + GEMM: every output pixel's input window is copied (in the input dtype,
 * exactly) into a row of col (N*OH*OW, C*KH*KW), and out^T = col W^T runs through the GEMM ampci_gemm_fn
 * names for that dtype, with F32 accumulation; the bias is added in F32, the result rounded once and
 * transposed into the output planes. The work goes a chunk of images at a time (chunk_images), which
 * changes no bit. The gradients are the usual pair, gx = col2im(gY^T W) and gW = the sum over images of
 * gY_n col_n (F32, image order), and gb the sum of gY in double. Max pooling runs the F32 kernels, on the
 * planes themselves for F32 and on F32 copies of a few planes at a time for 16-bit ones. */
#include "../device.h"

#include <string.h>

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

/* A step buffer of n elements of es bytes (at least one). */
static void *buffer(ampc_ctx *ctx, int64_t n, size_t es, const char *what) {
    return ampci_step_alloc(ctx, (size_t)(n > 0 ? n : 1) * es, what);
}

/* ---- conv2d ---- */

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

/* A chunk at a time: col_c = im2row(x_c), yt_c = col_c W^T (F32), + bias and rounded once to dt (yd_c;
 * yt_c itself for F32), then transposed into the chunk's planes of y. */
ampc_status ampci_cpu_conv2d(ampc_ctx *ctx, const ampci_conv2d_args *a) {
    static const char what[] = "conv2d";
    const ampci_conv_geom *g = &a->g;
    ampc_dtype dt = a->dt;
    size_t es = ampc_dtype_size(dt);
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW;
    int64_t yd_bytes = dt == AMPC_DTYPE_F32 ? 0 : a->O * (int64_t)es;                       /* F32: yd is yt */
    int64_t kc = chunk_images(g, ckk * (int64_t)es + a->O * 4 + yd_bytes), rows = kc * ohw; /* col, yt, yd */
    void *col = buffer(ctx, rows * ckk, es, what);
    float *yt = buffer(ctx, rows * a->O, sizeof(float), what);
    void *yd = dt == AMPC_DTYPE_F32 ? yt : buffer(ctx, rows * a->O, es, what);
    if (!col || !yt || !yd) return ampc_last_status();
    ampc_k_gemm_fn gemm = ampci_gemm_fn(ctx, dt);
    for (int64_t n0 = 0; n0 < g->N; n0 += kc) {
        int64_t k = g->N - n0 < kc ? g->N - n0 : kc;
        ampci_conv_geom gc = images(g, k);
        im2row(ctx, dt, col, at_image(a->x, n0, g->C * g->H * g->W, dt), &gc);
        ampci_gemm m = {k * ohw, a->O, ckk,  col,  ckk,  false, a->w,          ckk,
                        true,    yt,   a->O, 0.0f, NULL, NULL,  AMPC_DTYPE_F32}; /* yt = col W^T */
        ampc_status s = gemm(ctx, &m);
        if (s != AMPC_OK) return s;
        void *yc = (unsigned char *)a->y + (size_t)(n0 * a->O * ohw) * es;
        ampci_parallel_rows(ctx, k, ohw * a->O, out_run,
                            &(out_images){ctx->kernels, yt, yd, yc, a->bias, a->O, ohw, dt});
    }
    if (yd != yt) ampci_step_free(ctx, yd);
    ampci_step_free(ctx, yt), ampci_step_free(ctx, col);
    return AMPC_OK;
}

/* ---- conv2d's gradients ---- */

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
static ampc_status grad_x(ampc_ctx *ctx, const ampci_conv2d_bw_args *a) {
    const ampci_conv_geom *g = &a->g;
    ampc_dtype dt = a->dt;
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW, chw = g->C * g->H * g->W;
    size_t es = ampc_dtype_size(dt);
    int64_t kc = chunk_images(g, ckk * 4 + a->O * (int64_t)es); /* gcol, gyt */
    float *gcol = buffer(ctx, kc * ohw * ckk, sizeof(float), "conv2d backward");
    void *gyt = buffer(ctx, kc * a->O * ohw, es, "conv2d backward");
    if (!gcol || !gyt) return ampc_last_status();
    ampc_k_gemm_fn gemm = ampci_gemm_fn(ctx, dt);
    for (int64_t n0 = 0; n0 < g->N; n0 += kc) {
        int64_t k = g->N - n0 < kc ? g->N - n0 : kc;
        ampci_parallel_rows(ctx, a->O, k * ohw, chan_run, &(chan_rows){gyt, a->gy, n0, k, a->O, ohw, es});
        ampci_gemm m = {k * ohw, ckk,  a->O, gyt,  k * ohw, true, a->w,          ckk,
                        false,   gcol, ckk,  0.0f, NULL,    NULL, AMPC_DTYPE_F32};
        ampc_status s = gemm(ctx, &m);
        if (s != AMPC_OK) return s;
        ampci_conv_geom gc = images(g, k);
        ampci_parallel_rows(
            ctx, k * g->C, ohw * g->KH * g->KW, col2im_run,
            &(conv_rows){.g = &gc, .col2im = ctx->kernels->col2im, .gx = a->gx + n0 * chw, .gcol = gcol});
    }
    ampci_step_free(ctx, gcol), ampci_step_free(ctx, gyt);
    return AMPC_OK;
}

/* gW (O, CKK) = sum over images of gY_n (O, OHW) col_n (OHW, CKK), in image order; col made a chunk of
 * images at a time. */
static ampc_status grad_w(ampc_ctx *ctx, const ampci_conv2d_bw_args *a) {
    const ampci_conv_geom *g = &a->g;
    ampc_dtype dt = a->dt;
    int64_t ohw = g->OH * g->OW, ckk = g->C * g->KH * g->KW, kc = chunk_images(g, ckk * (int64_t)ampc_dtype_size(dt));
    void *col = buffer(ctx, kc * ohw * ckk, ampc_dtype_size(dt), "conv2d backward");
    if (!col) return ampc_last_status();
    memset(a->gw, 0, (size_t)(a->O * ckk) * sizeof(float)); /* no images: no sum */
    ampc_k_gemm_fn gemm = ampci_gemm_fn(ctx, dt);
    for (int64_t n0 = 0; n0 < g->N; n0 += kc) {
        int64_t k = g->N - n0 < kc ? g->N - n0 : kc;
        ampci_conv_geom gc = images(g, k);
        im2row(ctx, dt, col, at_image(a->x, n0, g->C * g->H * g->W, dt), &gc);
        for (int64_t i = n0; i < n0 + k; i++) {
            ampci_gemm m = {a->O,
                            ckk,
                            ohw,
                            at_image(a->gy, i, a->O * ohw, dt),
                            ohw,
                            false,
                            at_image(col, i - n0, ohw * ckk, dt),
                            ckk,
                            false,
                            a->gw,
                            ckk,
                            i ? 1.0f : 0.0f,
                            NULL,
                            NULL,
                            AMPC_DTYPE_F32};
            ampc_status s = gemm(ctx, &m);
            if (s != AMPC_OK) return s;
        }
    }
    ampci_step_free(ctx, col);
    return AMPC_OK;
}

ampc_status ampci_cpu_conv2d_bw(ampc_ctx *ctx, const ampci_conv2d_bw_args *a) {
    ampc_status s = AMPC_OK;
    if (a->gx) s = grad_x(ctx, a);
    if (s == AMPC_OK && a->gw) s = grad_w(ctx, a);
    if (s == AMPC_OK && a->gb)
        ampc_parallel_for(ctx, a->O, 8, bias_grad_run,
                          &(bias_grad){ctx->kernels, a->gb, a->gy, a->dt, a->g.N, a->O, a->g.OH * a->g.OW});
    return s;
}

/* ---- max pooling ---- */

/* Planes [p0, p1) of max pooling through the kernel table: forward (y and the argmax from x) or, with
 * backward set, gx from gy routed by the argmax. in and out have dtype dt: the F32 kernels run on them
 * directly for F32, else on F32 copies of as many planes as fit POOL_STAGE at a time (stage_planes),
 * converted in and rounded out (exact both ways: selections, and 0 + gy where windows are disjoint). */
#define POOL_STAGE AMPCI_POOL_PLANE_MAX

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

/* pool_run over every plane. */
static ampc_status pool_planes_run(ampc_ctx *ctx, const pool_planes *j) {
    const ampci_conv_geom *g = j->g;
    if (j->dt != AMPC_DTYPE_F32 && stage_planes(g) < 1)
        return ampci_fail(AMPC_STATUS_UNSUPPORTED, "max pooling: 16-bit planes of %lld elements (at most %d)",
                          (long long)(g->H * g->W > g->OH * g->OW ? g->H * g->W : g->OH * g->OW), POOL_STAGE);
    int64_t cost = j->backward ? g->H * g->W + g->OH * g->OW : g->OH * g->OW * g->KH * g->KW;
    ampci_parallel_rows(ctx, g->N * g->C, cost, pool_run, j);
    return AMPC_OK;
}

ampc_status ampci_cpu_max_pool2d(ampc_ctx *ctx, const ampci_max_pool2d_args *a) {
    return pool_planes_run(ctx, &(pool_planes){&a->g, ctx->kernels, a->y, a->arg, a->x, a->dt, false});
}

ampc_status ampci_cpu_max_pool2d_bw(ampc_ctx *ctx, const ampci_max_pool2d_bw_args *a) {
    return pool_planes_run(ctx, &(pool_planes){&a->g, ctx->kernels, a->gx, (int32_t *)a->arg, a->gy, a->dt, true});
}
