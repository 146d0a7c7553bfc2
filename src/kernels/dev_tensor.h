/* dev_tensor.h: the device operations of the tensor and autograd floors: converting copies between a
 * strided tensor and a contiguous buffer, fills, contiguous conversions, the finiteness scan and gradient
 * sums. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_TENSOR_H
#define AMPC_KERNELS_DEV_TENSOR_H

#include "kernels.h"

/* A tensor's elements in device memory: p is the first element's address; strides are in elements. */
typedef struct ampci_strided {
    void *p;
    ampc_dtype dt;
    int ndim;
    int64_t shape[AMPC_MAX_DIMS];
    int64_t stride[AMPC_MAX_DIMS];
} ampci_strided;

/* t (any strides) and buf (numel(t) contiguous elements of buf_dt), element i of buf being element i of
 * t in row-major order: buf -> t when to_tensor, else t -> buf; converted element by element (ampc_convert's
 * rules: floats round to nearest even once, integers truncate and saturate). With add (to_tensor, float
 * dtypes only): t = t + buf instead, the sum formed in F32 and rounded once to t's dtype (a gradient added
 * into a window of a larger one). */
typedef struct ampci_strided_copy_args {
    ampci_strided t;
    void *buf;
    ampc_dtype buf_dt;
    bool to_tensor;
    bool add;
} ampci_strided_copy_args;

/* Every element of t (any strides) = pattern (the value's bytes in t's dtype). */
typedef struct ampci_fill_args {
    ampci_strided t;
    unsigned char pattern[8];
} ampci_fill_args;

/* Element i (row-major) of t = draw i of the fill ampc_rng_uniform(rng, lo = a, hi = b) or
 * ampc_rng_normal(rng, mean = a, std = b) would make, in F32, rounded to t's dtype (rng is not advanced). */
typedef struct ampci_fill_random_args {
    ampci_strided t;
    ampc_rng rng;
    bool normal;
    float a, b;
} ampci_fill_random_args;

/* dst (n, dst_dt) = src (n, src_dt) converted; contiguous, no overlap. */
typedef struct ampci_convert_args {
    void *dst;
    ampc_dtype dst_dt;
    const void *src;
    ampc_dtype src_dt;
    int64_t n;
} ampci_convert_args;

/* index[0] (one int64) = the index of the first inf or NaN of p (n contiguous values of dt), or -1. */
typedef struct ampci_first_nonfinite_args {
    const void *p;
    ampc_dtype dt;
    int64_t n;
    int64_t *index;
} ampci_first_nonfinite_args;

/* dst (n, dst_dt) += src (n, src_dt): the sum formed in F32 and rounded once to dst_dt; contiguous. */
typedef struct ampci_accumulate_args {
    void *dst;
    ampc_dtype dst_dt;
    const void *src;
    ampc_dtype src_dt;
    int64_t n;
} ampci_accumulate_args;

#define AMPCI_DEVOPS_TENSOR(X) X(strided_copy) X(fill) X(fill_random) X(convert) X(first_nonfinite) X(accumulate)

#endif
