/* ops.h: what the op files share. An op validates its inputs (ampci_op_input), stages them as contiguous
 * F32 (ampci_as_f32), runs kernels from the context's table into F32 scratch, wraps the result in its
 * output dtype (ampci_result) and, when an input requires grad, records a node whose backward does the
 * same in reverse and hands F32 gradients to ampci_accumulate_f32. */
#ifndef AMPC_OPS_H
#define AMPC_OPS_H

#include "../amp/amp.h"
#include "../autograd/autograd.h"
#include "../kernels/kernels.h"

/* Every public op starts here: records the op for anomaly reports and, inside an enabled autocast
 * region, replaces in[0..n) by their casts as autocast's plan says (weights through the weight-cast
 * cache). False (error recorded) when the op is banned or a cast fails. NULL entries stay NULL (the op
 * reports them). */
AMPCI_HIDDEN bool ampci_op_enter(ampc_ctx *ctx, ampci_op op, const ampc_tensor **in, int n);

/* A required op input: false (error recorded) when t is NULL (keeping an earlier failure's message), comes
 * from another context, or is not F32/F16/BF16. */
AMPCI_HIDDEN bool ampci_op_input(ampc_ctx *ctx, const char *op, const ampc_tensor *t, const char *what);
/* A float dtype an op accepts: F32, F16 or BF16. */
AMPCI_HIDDEN bool ampci_op_dtype(ampc_dtype dt);
/* PyTorch's promotion for two float dtypes: equal stays, F16 with BF16 or anything with F32 gives F32. */
AMPCI_HIDDEN ampc_dtype ampci_promote(ampc_dtype a, ampc_dtype b);
/* Requires a->dtype == b->dtype (GEMM-like ops), naming both operands otherwise. */
AMPCI_HIDDEN bool ampci_same_dtype(const char *op, const ampc_tensor *a, const char *an, const ampc_tensor *b,
                                   const char *bn);

/* t's elements, row-major, as F32: t's own data when it is F32 and contiguous, else an arena copy. */
AMPCI_HIDDEN const float *ampci_as_f32(const char *op, const ampc_tensor *t);
/* The op is done with f, an ampci_as_f32(t) result: a copy is given back to the step heap at once (t's
 * own data is left alone). f may be NULL. */
AMPCI_HIDDEN void ampci_as_f32_done(const ampc_tensor *t, const float *f);
/* n floats of uninitialised (or zeroed) arena scratch. */
AMPCI_HIDDEN float *ampci_scratch(ampc_ctx *ctx, const char *op, int64_t n);
AMPCI_HIDDEN float *ampci_zeros(ampc_ctx *ctx, const char *op, int64_t n);
/* A contiguous arena tensor of dtype holding buf's values (buf itself for F32, else a rounded copy, and
 * then buf is released: the caller must not keep it). */
AMPCI_HIDDEN ampc_tensor *ampci_result(const char *op, ampc_ctx *ctx, ampc_dtype dtype, int ndim,
                                       const int64_t *shape, float *buf);
/* Hands an F32 gradient (t's shape, row-major, arena memory) to t. */
AMPCI_HIDDEN ampc_status ampci_accumulate_f32(const char *op, ampc_tensor *t, float *g);

/* Runs fn over [0, n) in chunks of about 16K elements on the context's threads. */
typedef void (*ampci_range_fn)(void *arg, int64_t begin, int64_t end);
AMPCI_HIDDEN void ampci_parallel(ampc_ctx *ctx, int64_t n, ampci_range_fn fn, void *arg);

/* Broadcasting of two shapes (NumPy rules, right-aligned, up to 4 dims). Strides index the row-major
 * data of each operand, 0 along broadcast dims; shapes are padded on the left to 4 dims. */
typedef struct ampci_bcast {
    int ndim;                     /* of the result */
    int64_t shape[AMPC_MAX_DIMS]; /* result shape (ndim entries) */
    int64_t dims[4];              /* result shape padded to 4 */
    int64_t sa[4], sb[4];
    int64_t n;                    /* result elements */
} ampci_bcast;
AMPCI_HIDDEN bool ampci_broadcast(const char *op, const ampc_tensor *a, const ampc_tensor *b, ampci_bcast *bc);
/* dst (the operand's numel) = sum of g (the result's numel) over the broadcast dims of operand `which`
 * (0: a, 1: b), accumulated in double. false on OOM. */
AMPCI_HIDDEN bool ampci_sum_to_operand(const char *op, ampc_ctx *ctx, const ampci_bcast *bc, int which,
                                       const float *g, float *dst, int64_t dst_n);

/* GEMM-like ops read the last two dims of t as matrices: t's data pointer when t is row-major
 * (*transposed = false) or a transposed view of a row-major tensor (*transposed = true: the data holds
 * the transposes); NULL when t needs a contiguous copy first. */
AMPCI_HIDDEN const void *ampci_matrix_data(const ampc_tensor *t, bool *transposed);

#endif
