/* amp.h: internal interface of autocast and the anomaly checks. Every public op starts with
 * ampci_op_enter(ctx, id, inputs, n): it records the op for diagnostics and, inside an enabled autocast
 * region, replaces the op's floating inputs by their casts according to the op's policy. */
#ifndef AMPC_AMP_H
#define AMPC_AMP_H

#include "../kernels/kernels.h"
#include "../tensor/tensor.h"

/* Every op autocast knows; the names (ampc_autocast_op_name) are the public spelling. */
typedef enum ampci_op {
    AMPCI_OP_LINEAR = 0, AMPCI_OP_MATMUL, AMPCI_OP_BMM, AMPCI_OP_CONV2D, AMPCI_OP_ATTENTION,
    AMPCI_OP_SOFTMAX, AMPCI_OP_LOG_SOFTMAX, AMPCI_OP_LAYER_NORM, AMPCI_OP_CROSS_ENTROPY, AMPCI_OP_MSE_LOSS,
    AMPCI_OP_EXP, AMPCI_OP_LOG, AMPCI_OP_SQRT, AMPCI_OP_TANH, AMPCI_OP_SIGMOID, AMPCI_OP_RELU, AMPCI_OP_GELU,
    AMPCI_OP_NEG, AMPCI_OP_ADD, AMPCI_OP_SUB, AMPCI_OP_MUL, AMPCI_OP_DIV, AMPCI_OP_ADD_SCALAR,
    AMPCI_OP_SUB_SCALAR, AMPCI_OP_MUL_SCALAR, AMPCI_OP_DIV_SCALAR, AMPCI_OP_SUM, AMPCI_OP_MEAN,
    AMPCI_OP_EMBEDDING, AMPCI_OP_DROPOUT, AMPCI_OP_MAX_POOL2D, AMPCI_OP_POSITIONAL_ENCODING, AMPCI_OP_CONCAT,
    AMPCI_OP_COUNT
} ampci_op;

/* Records the op as the context's current one (for anomaly messages) and applies autocast to in[0..n):
 * entries may be replaced by casts. False (error recorded) when the op is banned or a cast fails.
 * NULL entries stay NULL (the op reports them). */
AMPCI_HIDDEN bool ampci_op_enter(ampc_ctx *ctx, ampci_op op, const ampc_tensor **in, int n);

/* Anomaly mode: fails (false, error recorded) when t (a contiguous op output) holds a non-finite value. */
AMPCI_HIDDEN bool ampci_check_output(ampc_ctx *ctx, const ampc_tensor *t);
/* ... and for a gradient handed to `input` by the backward of node op `op`. */
AMPCI_HIDDEN bool ampci_check_grad(ampc_ctx *ctx, const char *op, const ampc_tensor *input, const ampc_tensor *g);
/* Index of the first non-finite element of a contiguous float tensor, or -1. */
AMPCI_HIDDEN int64_t ampci_first_nonfinite(const ampc_tensor *t);

/* Lifecycle hooks the context calls. */
AMPCI_HIDDEN void ampci_amp_step_end(ampc_ctx *ctx);
AMPCI_HIDDEN void ampci_amp_release(ampc_ctx *ctx);

#endif
