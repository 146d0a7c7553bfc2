/* dev_linear.h: the device operations of the linear family (src/ops/linear.c, conv.c, attention.c):
 * batched GEMMs with their fused write-out, the bias gradient's column sums, 2-D convolution and its
 * gradients, max pooling and its gradient, scaled dot-product attention and its gradients. Included by
 * device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_LINEAR_H
#define AMPC_KERNELS_DEV_LINEAR_H

#include "kernels.h"

/* nb[0] x nb[1] GEMMs of one shape: batch (i, j) is g with a, b and c (or c16) advanced by i * as[0] +
 * j * as[1] elements of a (bs, cs likewise; a's and b's elements are dt's, c's are F32 or c16_dt's). g's
 * pointers (a, b, c, c16, bias) are device addresses: a and b dt, c F32 or c16 c16_dt, bias (N) F32. A
 * batch stride 0 shares the operand; for c it sums the batches into one block in batch order (beta 1 after
 * the first batch that wrote it; F32 c only). The GEMM is the one ampci_gemm_fn(ctx, dt) names: for F32
 * the context's FP32 matmul precision picks it, so the bits are those of that kernel. */
typedef struct ampci_gemm_args {
    ampc_dtype dt; /* a's and b's dtype */
    ampci_gemm g;  /* batch (0, 0), by value */
    int64_t nb[2]; /* batch extents ({1, 1}: one GEMM) */
    int64_t as[2], bs[2], cs[2];
} ampci_gemm_args;

/* out (cols, F32) = the column sums of g (rows, cols) of dtype dt, each column in double: the sums of blocks
 * of 256 rows (in row order) added in block order. */
typedef struct ampci_col_sum_args {
    float *out;
    const void *g;
    ampc_dtype dt;
    int64_t rows, cols;
} ampci_col_sum_args;

/* y (N, O, OH, OW) in dt = conv2d(x, w) + bias, rounded once to dt: x (N, C, H, W) and w (O, C, KH, KW)
 * contiguous in dt, bias (O) F32 or NULL; geometry g. */
typedef struct ampci_conv2d_args {
    ampci_conv_geom g;
    int64_t O;
    ampc_dtype dt;
    void *y;
    const void *x, *w;
    const float *bias;
} ampci_conv2d_args;

/* The gradients of conv2d from gy (N, O, OH, OW) in dt, contiguous, for the forward's x and w; each output
 * may be NULL (not wanted), each is F32 and written (not accumulated): gx (N, C, H, W) = col2im(gy^T w),
 * gw (O, C, KH, KW) = the sum over images of gy_n im2row(x_n), in image order, gb (O) = the sum of gy over
 * images and pixels, in double in (image, pixel) order. */
typedef struct ampci_conv2d_bw_args {
    ampci_conv_geom g;
    int64_t O;
    ampc_dtype dt;
    float *gx, *gw, *gb;
    const void *gy, *x, *w;
} ampci_conv2d_bw_args;

/* The most elements a plane (input or output) of a 16-bit max pooling may have: larger 16-bit planes go
 * through F32 copies made by the op (the CPU stages this many F32 values per thread on its stack). */
#define AMPCI_POOL_PLANE_MAX 4096

/* Max pooling of x (N, C, H, W) in dt, contiguous, with geometry g: y (N, C, OH, OW) in dt = the window
 * maxima, arg (N, C, OH, OW) int32 = their indices h * W + w in the plane. dt F32, or 16-bit where the
 * planes have at most AMPCI_POOL_PLANE_MAX elements (computed in F32: a selection is exact). */
typedef struct ampci_max_pool2d_args {
    ampci_conv_geom g;
    ampc_dtype dt;
    void *y;
    int32_t *arg;
    const void *x;
} ampci_max_pool2d_args;

/* gx (N, C, H, W) in dt (written) = gy (N, C, OH, OW) in dt, contiguous, routed to the forward's arg
 * (N, C, OH, OW), overlapping windows summed in output order in F32. 16-bit dt only for disjoint windows
 * (every gx element is then one gy value or 0, so nothing rounds) on planes of at most
 * AMPCI_POOL_PLANE_MAX elements. */
typedef struct ampci_max_pool2d_bw_args {
    ampci_conv_geom g;
    ampc_dtype dt;
    void *gx;
    const void *gy;
    const int32_t *arg;
} ampci_max_pool2d_bw_args;

/* Attention by the kernel table's slot: a (by value; q, k, v device addresses, contiguous (BH, T*, D*) of
 * a.dt), o (BH, Tq, Dv) F32, stats (BH, Tq, 2) F32 or NULL (no backward). */
typedef struct ampci_attention_args {
    ampci_attn a;
    float *o;
    float *stats;
} ampci_attention_args;

/* gq, gk, gv (F32, the shapes of q, k, v; each NULL when not wanted) from go (BH, Tq, Dv) of a.dt,
 * contiguous, and the forward's stats (BH, Tq, 2). */
typedef struct ampci_attention_bw_args {
    ampci_attn a;
    const float *stats;
    const void *go;
    float *gq, *gk, *gv;
} ampci_attention_bw_args;

#define AMPCI_DEVOPS_LINEAR(X)                                                                                         \
    X(gemm) X(col_sum) X(conv2d) X(conv2d_bw) X(max_pool2d) X(max_pool2d_bw) X(attention) X(attention_bw)

#endif
