/* dev_elementwise.h: the device operations of the elementwise and reduction ops (src/ops/elementwise.c,
 * reduce.c): unary maps and their gradients in any float dtype, scalar and broadcasting binary maps in
 * F32, sums over broadcast or reduced dims in double. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_ELEMENTWISE_H
#define AMPC_KERNELS_DEV_ELEMENTWISE_H

#include "kernels.h"

/* Broadcasting of two shapes (NumPy rules, right-aligned, up to 4 dims). Strides index the row-major
 * data of each operand, 0 along broadcast dims; shapes are padded on the left to 4 dims. */
typedef struct ampci_bcast {
    int ndim;                     /* of the result */
    int64_t shape[AMPC_MAX_DIMS]; /* result shape (ndim entries) */
    int64_t dims[4];              /* result shape padded to 4 */
    int64_t sa[4], sb[4];
    int64_t n; /* result elements */
} ampci_bcast;

/* y (n, y_dt) = f(x) for x (n, x_dt), contiguous: computed in F32 by the table's unary kernel, rounded
 * once to y_dt. */
typedef struct ampci_unary_args {
    ampci_unary kind;
    void *y;
    ampc_dtype y_dt;
    const void *x;
    ampc_dtype x_dt;
    int64_t n;
} ampci_unary_args;

/* gx (n, gx_dt) = g * f'(x) from g, x and y = f(x) (n each, contiguous, of their own dtypes), computed in
 * F32, rounded once. */
typedef struct ampci_unary_bw_args {
    ampci_unary kind;
    void *gx;
    ampc_dtype gx_dt;
    const void *g, *x, *y;
    ampc_dtype g_dt, x_dt, y_dt;
    int64_t n;
} ampci_unary_bw_args;

/* y (n) = x (n) op s, F32 (add, sub, mul, div). */
typedef struct ampci_scalar_args {
    ampci_binary kind;
    float s;
    float *y;
    const float *x;
    int64_t n;
} ampci_scalar_args;

/* z (bc.n) = a op b, F32: a (na) and b (nb) row-major in their own shapes, broadcast as bc says. */
typedef struct ampci_binary_args {
    ampci_binary kind;
    ampci_bcast bc;
    float *z;
    const float *a, *b;
    int64_t na, nb;
} ampci_binary_args;

/* dst (n, the operand's numel) = g (bc.n) summed over the broadcast dims of operand `which` (0: a, 1: b),
 * in double, in g's row-major order. */
typedef struct ampci_sum_to_args {
    ampci_bcast bc;
    int which;
    const float *g;
    float *dst;
    int64_t n;
} ampci_sum_to_args;

/* A reduction over some dims of a tensor padded to 4 dims: ostride is the output's element stride along
 * each input dim (0 for reduced dims); out_n output elements, count inputs per output. */
typedef struct ampci_reduce_plan {
    int64_t dims[4];
    int64_t ostride[4];
    int64_t out_n, count;
} ampci_reduce_plan;

/* y (out_n) = the sums (mean: the means) of x (numel) over the reduced dims, in double, input order. */
typedef struct ampci_reduce_args {
    ampci_reduce_plan plan;
    bool mean;
    const float *x;
    float *y;
} ampci_reduce_args;

/* gx (numel) = g (out_n) broadcast back over the reduced dims (mean: times fl(1 / count)). */
typedef struct ampci_reduce_bw_args {
    ampci_reduce_plan plan;
    bool mean;
    const float *g;
    float *gx;
} ampci_reduce_bw_args;

#define AMPCI_DEVOPS_ELEMENTWISE(X) X(unary) X(unary_bw) X(scalar) X(binary) X(sum_to) X(reduce) X(reduce_bw)

#endif
