/* cases_conv.c: op-test cases for conv2d, max_pool2d and attention, each with a double-precision
 * reference written as plain loops from the definitions (no ampc calls). K, the tolerance's reduction
 * length, is the longest sum feeding one output or one gradient element: C*KH*KW (forward, gx) or
 * N*OH*OW (gw) for conv; Tk, D, Dv (forward, dq) or Tq (dk, dv) for attention. */
#include "op_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define SHAPE(...)                                                                                                     \
    (sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- conv2d: in0 x (N, C, H, W), in1 w (O, C, KH, KW), in2 b (O) when ip[4]; ip[0..3] = stride_h, stride_w,
 * pad_h, pad_w as passed (0 stride = 1) ---- */

static void conv_dims(const ot_case *c, int64_t *oh, int64_t *ow) {
    int64_t sh = c->ip[0] ? c->ip[0] : 1, sw = c->ip[1] ? c->ip[1] : 1;
    *oh = (c->shape[0][2] + 2 * c->ip[2] - c->shape[1][2]) / sh + 1;
    *ow = (c->shape[0][3] + 2 * c->ip[3] - c->shape[1][3]) / sw + 1;
}

static void conv_make(ot_case *c, int v, uint64_t *r) {
    int64_t O = ot_rand_int(r, 2, 5);
    static const int params[6][5] = {{0, 0, 0, 0, 1}, {1, 1, 0, 0, 1}, {2, 2, 1, 1, 1},
                                     {0, 2, 1, 0, 0}, {1, 1, 1, 1, 1}, {2, 3, 0, 2, 0}};
    memcpy(c->ip, params[v], sizeof params[v]);
    switch (v) {
    case 0:
        O = 1;
        ot_input(c, 0, SHAPE(1, 1, 1, 1));
        ot_input(c, 1, SHAPE(1, 1, 1, 1));
        break;
    case 1:
        ot_input(c, 0, SHAPE(2, 3, 7, 5));
        ot_input(c, 1, SHAPE(O, 3, 3, 3));
        break;
    case 2:
        ot_input(c, 0, SHAPE(2, 3, 9, 8));
        ot_input(c, 1, SHAPE(O, 3, 3, 2));
        break; /* stride 2, pad 1 */
    case 3:
        ot_input(c, 0, SHAPE(1, 2, 6, 7));
        ot_input(c, 1, SHAPE(O, 2, 2, 3));
        c->strided[0] = true;
        break;
    case 4:
        ot_input(c, 0, SHAPE(1, 33, 4, 3));
        ot_input(c, 1, SHAPE(O, 33, 2, 2));
        break; /* C past 32 */
    default:
        ot_input(c, 0, SHAPE(2, 2, 5, 9));
        ot_input(c, 1, SHAPE(O, 2, 1, 5));
        c->strided[1] = true;
        break;
    }
    if (c->ip[4]) ot_input(c, 2, SHAPE(O));
    int64_t oh, ow;
    conv_dims(c, &oh, &ow);
    c->K = max2(c->shape[1][1] * c->shape[1][2] * c->shape[1][3], c->shape[0][0] * oh * ow);
    snprintf(c->label, sizeof c->label, "v%d x%lldx%lldx%lldx%lld w%lldx%lldx%lld s%d,%d p%d,%d bias%d", v,
             (long long)c->shape[0][0], (long long)c->shape[0][1], (long long)c->shape[0][2], (long long)c->shape[0][3],
             (long long)O, (long long)c->shape[1][2], (long long)c->shape[1][3], c->ip[0], c->ip[1], c->ip[2], c->ip[3],
             c->ip[4]);
}

static void conv_shape(const ot_case *c, int *nd, int64_t *sh) {
    int64_t oh, ow;
    conv_dims(c, &oh, &ow);
    *nd = 4;
    sh[0] = c->shape[0][0], sh[1] = c->shape[1][0], sh[2] = oh, sh[3] = ow;
}

static void conv_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t N = c->shape[0][0], C = c->shape[0][1], H = c->shape[0][2], W = c->shape[0][3];
    int64_t O = c->shape[1][0], KH = c->shape[1][2], KW = c->shape[1][3], OH, OW;
    int64_t sh = c->ip[0] ? c->ip[0] : 1, sw = c->ip[1] ? c->ip[1] : 1, ph = c->ip[2], pw = c->ip[3];
    conv_dims(c, &OH, &OW);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double s = c->ip[4] ? in[2][o] : 0;
                    for (int64_t ch = 0; ch < C; ch++)
                        for (int64_t a = 0; a < KH; a++)
                            for (int64_t b = 0; b < KW; b++) {
                                int64_t h = i * sh - ph + a, w = j * sw - pw + b;
                                if (h < 0 || h >= H || w < 0 || w >= W) continue; /* zero padding */
                                s += in[0][((n * C + ch) * H + h) * W + w] * in[1][((o * C + ch) * KH + a) * KW + b];
                            }
                    out[((n * O + o) * OH + i) * OW + j] = s;
                }
}

static ampc_tensor *conv_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    ampc_conv2d_params p = {c->ip[0], c->ip[1], c->ip[2], c->ip[3]};
    bool defaults = !c->ip[0] && !c->ip[1] && !c->ip[2] && !c->ip[3]; /* variant 0 passes NULL params */
    return ampc_conv2d(ctx, in[0], in[1], c->ip[4] ? in[2] : NULL, defaults ? NULL : &p);
}

static const ot_op conv2d_op = {"conv2d", 6, conv_make, conv_run, conv_shape, conv_ref, NULL};

/* ---- max_pool2d: in0 x (N, C, H, W); ip[0..5] = kernel_h, kernel_w, stride_h, stride_w (0 = kernel), pad_h,
 * pad_w. A window whose two largest values are equal has no derivative (central differences split the
 * gradient, the op gives it all to the first maximum, as PyTorch does), so the inputs are drawn distinct
 * after rounding (OT_DISTINCT). ---- */

static void pool_dims(const ot_case *c, int64_t *oh, int64_t *ow, int64_t *sh, int64_t *sw) {
    *sh = c->ip[2] ? c->ip[2] : c->ip[0], *sw = c->ip[3] ? c->ip[3] : c->ip[1];
    *oh = (c->shape[0][2] + 2 * c->ip[4] - c->ip[0]) / *sh + 1;
    *ow = (c->shape[0][3] + 2 * c->ip[5] - c->ip[1]) / *sw + 1;
}

static void pool_make(ot_case *c, int v, uint64_t *r) {
    (void)r;
    static const int params[5][6] = {
        {1, 1, 0, 0, 0, 0}, {3, 3, 2, 2, 0, 0}, {3, 3, 2, 2, 1, 1}, {2, 3, 0, 0, 1, 0}, {2, 2, 1, 1, 1, 1}};
    memcpy(c->ip, params[v], sizeof params[v]);
    switch (v) {
    case 0: ot_input(c, 0, SHAPE(1, 1, 1, 1)); break;
    case 1: ot_input(c, 0, SHAPE(2, 3, 7, 7)); break; /* overlapping windows */
    case 2: ot_input(c, 0, SHAPE(1, 2, 6, 5)); break; /* ... and padding */
    case 3:
        ot_input(c, 0, SHAPE(2, 2, 5, 7));
        c->strided[0] = true;
        break;                                          /* non-square, stride = kernel */
    default: ot_input(c, 0, SHAPE(1, 35, 3, 4)); break; /* C past 32, stride 1 */
    }
    c->dist[0] = OT_DISTINCT;
    c->K = 1;
    snprintf(c->label, sizeof c->label, "v%d k%d,%d s%d,%d p%d,%d", v, c->ip[0], c->ip[1], c->ip[2], c->ip[3], c->ip[4],
             c->ip[5]);
}

static void pool_shape(const ot_case *c, int *nd, int64_t *sh) {
    int64_t sth, stw;
    *nd = 4;
    sh[0] = c->shape[0][0], sh[1] = c->shape[0][1];
    pool_dims(c, &sh[2], &sh[3], &sth, &stw);
}

static void pool_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t planes = c->shape[0][0] * c->shape[0][1], H = c->shape[0][2], W = c->shape[0][3], OH, OW, sh, sw;
    pool_dims(c, &OH, &OW, &sh, &sw);
    for (int64_t p = 0; p < planes; p++)
        for (int64_t i = 0; i < OH; i++)
            for (int64_t j = 0; j < OW; j++) {
                double m = -INFINITY;
                for (int64_t a = 0; a < c->ip[0]; a++)
                    for (int64_t b = 0; b < c->ip[1]; b++) {
                        int64_t h = i * sh - c->ip[4] + a, w = j * sw - c->ip[5] + b;
                        if (h >= 0 && h < H && w >= 0 && w < W && in[0][(p * H + h) * W + w] > m)
                            m = in[0][(p * H + h) * W + w];
                    }
                out[(p * OH + i) * OW + j] = m;
            }
}

static ampc_tensor *pool_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    ampc_pool2d_params p = {c->ip[0], c->ip[1], c->ip[2], c->ip[3], c->ip[4], c->ip[5]};
    return ampc_max_pool2d(ctx, in[0], &p);
}

static const ot_op max_pool2d_op = {"max_pool2d", 5, pool_make, pool_run, pool_shape, pool_ref, NULL};

/* ---- attention: in0 q (B, H, Tq, D), in1 k (B, H, Tk, D), in2 v (B, H, Tk, Dv); ip[0] = causal ---- */

static void attn_make(ot_case *c, int v, uint64_t *r) {
    (void)r;
    /* B, H, Tq, Tk, D, Dv, causal */
    static const int64_t dims[6][7] = {{1, 1, 1, 1, 1, 1, 0},   {2, 3, 5, 5, 4, 3, 1},   {1, 2, 3, 7, 5, 6, 0},
                                       {1, 2, 33, 33, 8, 4, 1}, {2, 1, 6, 9, 20, 17, 0}, {1, 2, 4, 6, 3, 2, 1}};
    const int64_t *d = dims[v];
    ot_input(c, 0, SHAPE(d[0], d[1], d[2], d[4]));
    ot_input(c, 1, SHAPE(d[0], d[1], d[3], d[4]));
    ot_input(c, 2, SHAPE(d[0], d[1], d[3], d[5]));
    c->ip[0] = (int)d[6];
    c->strided[0] = v == 2, c->strided[1] = v == 3, c->strided[2] = v == 4;
    c->K = max2(max2(d[2], d[3]), max2(d[4], d[5]));
    snprintf(c->label, sizeof c->label, "v%d B%lld H%lld Tq%lld Tk%lld D%lld Dv%lld causal%d", v, (long long)d[0],
             (long long)d[1], (long long)d[2], (long long)d[3], (long long)d[4], (long long)d[5], c->ip[0]);
}

static void attn_shape(const ot_case *c, int *nd, int64_t *sh) {
    *nd = 4;
    sh[0] = c->shape[0][0], sh[1] = c->shape[0][1], sh[2] = c->shape[0][2], sh[3] = c->shape[2][3];
}

static void attn_ref(const ot_case *c, const double *const *in, double *out) {
    int64_t BH = c->shape[0][0] * c->shape[0][1], Tq = c->shape[0][2], Tk = c->shape[1][2], D = c->shape[0][3];
    int64_t Dv = c->shape[2][3];
    double s[64]; /* Tk <= 64 in these cases */
    for (int64_t h = 0; h < BH; h++)
        for (int64_t i = 0; i < Tq; i++) {
            const double *q = in[0] + (h * Tq + i) * D, *k = in[1] + h * Tk * D, *v = in[2] + h * Tk * Dv;
            int64_t nv = c->ip[0] && i + 1 < Tk ? i + 1 : Tk;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < nv; j++) {
                s[j] = 0;
                for (int64_t t = 0; t < D; t++) s[j] += q[t] * k[j * D + t];
                s[j] /= sqrt((double)D);
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < nv; j++) sum += (s[j] = exp(s[j] - m));
            for (int64_t t = 0; t < Dv; t++) {
                double o = 0;
                for (int64_t j = 0; j < nv; j++) o += s[j] / sum * v[j * Dv + t];
                out[(h * Tq + i) * Dv + t] = o;
            }
        }
}

static ampc_tensor *attn_run(ampc_ctx *ctx, ampc_tensor *const *in, const ampc_tensor *i, const ot_case *c) {
    (void)i;
    return ampc_attention(ctx, in[0], in[1], in[2], c->ip[0] != 0);
}

static const ot_op attention_op = {"attention", 6, attn_make, attn_run, attn_shape, attn_ref, NULL};

const ot_op *const ot_ops_conv[] = {&conv2d_op, &max_pool2d_op, &attention_op, NULL};
