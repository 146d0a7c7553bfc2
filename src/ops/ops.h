/* ops.h: what the op files share. A public op opens with ampci_op_begin (anomaly record, autocast's
 * casts, input checks, all from the op's descriptor), stages its inputs as contiguous F32 (ampci_as_f32),
 * runs the device's operations (AMPCI_DEV, kernels/device.h) into F32 scratch, wraps the result in its
 * output dtype (ampci_result) and closes with ampci_op_end, which records a node whose backward does the
 * same in reverse and hands F32 gradients to ampci_accumulate_f32. An op body computes shapes and
 * addresses; it never reads or writes tensor memory itself: every pointer here is a device address. */
#ifndef AMPC_OPS_H
#define AMPC_OPS_H

#include "../amp/amp.h"
#include "../autograd/autograd.h"
#include "../kernels/device.h"
#include "frame.h"

/* ---- the plumbing every public op shares: ampci_op_begin ... ampci_op_end ----
 * An op states what it is once, in a static descriptor, and brackets its own work with the pair:
 *
 *     static const ampci_op_desc linear_op = {"ampc_linear", AMPCI_OP_LINEAR, 3, {"x", "weight", "bias"},
 *         .optional = 4u, .backward = linear_backward, .saves = 3u, .saved_size = sizeof(linear_saved)};
 *     ampci_op_call c = {.op = &linear_op, .ctx = ctx, .in = {x, w, b}};
 *     if (!ampci_op_begin(&c)) return NULL;
 *     x = c.in[0], w = c.in[1], b = c.in[2];   // autocast's casts
 *     ... checks of its own, the kernels ...
 *     return ampci_op_end(&c, out, &sv);
 */
#define AMPCI_OP_MAX_IN 4

typedef struct ampci_op_desc {
    const char *name;                      /* the public name errors and tape nodes use: "ampc_linear" */
    ampci_op id;                           /* autocast's id, also the anomaly report's short name
                                              * (AMPCI_OP_COUNT: a shape op, which autocast leaves alone) */
    int nin;                               /* inputs (concat: 0, its list comes with the call) */
    const char *in_names[AMPCI_OP_MAX_IN]; /* as error messages name them: "x", "weight", "bias" */
    unsigned optional;                     /* bit i: input i may be NULL (an absent bias) */
    unsigned index;                        /* bit i: input i holds integer ids or targets: the op checks it
                                              * against the float inputs itself, and it is not recorded */
    bool exact;                            /* the output copies input values: no anomaly check */
    ampci_backward_fn backward;
    unsigned saves;    /* ampci_record's saved_mask, over the recorded inputs */
    size_t saved_size; /* bytes of op data the backward reads (node->saved) */
} ampci_op_desc;

typedef struct ampci_op_call {
    const ampci_op_desc *op;
    ampc_ctx *ctx;
    const ampc_tensor *in[AMPCI_OP_MAX_IN]; /* the inputs; ampci_op_begin puts autocast's casts here */
    const ampc_tensor **list;               /* concat: its n inputs instead (a copy the op may change) */
    int n;
    unsigned saves; /* op->saves, unless the op knows better after begin */
    bool internal;  /* made for another op's own use (an autocast cast): never
                                               * handed to model code's frame */
} ampci_op_call;

/* The prologue: records the op for anomaly reports; inside an enabled autocast region replaces the inputs
 * by their casts as autocast's plan says (F32 weights through the weight-cast cache); then checks each
 * input in order as ampci_op_input does (a NULL optional input is skipped, index inputs are the op's).
 * False (the first failure recorded) when the op cannot run. */
AMPCI_HIDDEN bool ampci_op_begin(ampci_op_call *c);
/* The epilogue: out (NULL when the op failed) is checked for non-finite values in anomaly mode unless the
 * op is exact, recorded on the tape with op->saved_size bytes of `saved` when an input requires grad, and
 * handed to model code's frame (frame.h). Returns out, or NULL with the error recorded. */
AMPCI_HIDDEN ampc_tensor *ampci_op_end(ampci_op_call *c, ampc_tensor *out, const void *saved);
/* The differentiable cast behind ampc_tensor_cast, for casts an op makes for itself (autocast's): recorded
 * on the tape, never handed to a frame (a cached cast is served again later in the region). */
AMPCI_HIDDEN ampc_tensor *ampci_op_cast(const ampc_tensor *t, ampc_dtype dtype);

/* A required op input: false (error recorded) when t is NULL (keeping an earlier failure's message), comes
 * from another context, or is not F32/F16/BF16. */
AMPCI_HIDDEN bool ampci_op_input(ampc_ctx *ctx, const char *op, const ampc_tensor *t, const char *what);
/* An integer input (ids, targets): false (error recorded) when t is NULL (keeping an earlier failure's
 * message), comes from another context, or is not I32/I64; `kind` ends the dtype complaint ("" or
 * " class indices"). */
AMPCI_HIDDEN bool ampci_op_index_input(ampc_ctx *ctx, const char *op, const ampc_tensor *t, const char *what,
                                       const char *kind);
/* ids (an I32/I64 tensor of ctx, any strides) as int64 in step memory (what kernels read and nodes save),
 * checked on the device against [0, limit), values equal to ignore_index skipped when has_ignore: r =
 * {the first position out of range or -1, its value, how many values are not ignore_index}, read at one
 * AMPC_SYNC_INDEX point. NULL (error recorded) when memory runs out; the caller words the range error. */
AMPCI_HIDDEN int64_t *ampci_ids_checked(ampc_ctx *ctx, const char *op, const ampc_tensor *ids, int64_t limit,
                                        bool has_ignore, int64_t ignore_index, int64_t r[3]);
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
/* A contiguous arena tensor of dtype whose every element the caller will write: ampci_tensor_arena without
 * its zero fill. NULL (error recorded) on failure. */
AMPCI_HIDDEN ampc_tensor *ampci_output(const char *op, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape);
/* A contiguous arena tensor of dtype holding buf's values (buf itself for F32, else a rounded copy, and
 * then buf is released: the caller must not keep it). The epilogue checks it in anomaly mode. */
AMPCI_HIDDEN ampc_tensor *ampci_result(const char *op, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape,
                                       float *buf);
/* Hands an F32 gradient (t's shape, row-major, arena memory) to t. */
AMPCI_HIDDEN ampc_status ampci_accumulate_f32(const char *op, ampc_tensor *t, float *g);

/* Broadcasting of two shapes (ampci_bcast, kernels/dev_elementwise.h), or false with the error recorded. */
AMPCI_HIDDEN bool ampci_broadcast(const char *op, const ampc_tensor *a, const ampc_tensor *b, ampci_bcast *bc);
/* dst (the operand's numel) = sum of g (the result's numel) over the broadcast dims of operand `which`
 * (0: a, 1: b), accumulated in double, on the device. false on OOM. */
AMPCI_HIDDEN bool ampci_sum_to_operand(const char *op, ampc_ctx *ctx, const ampci_bcast *bc, int which, const float *g,
                                       float *dst, int64_t dst_n);

/* GEMM-like ops read the last two dims of t as matrices: t's data pointer when t is row-major
 * (*transposed = false) or a transposed view of a row-major tensor (*transposed = true: the data holds
 * the transposes); NULL when t needs a contiguous copy first. */
AMPCI_HIDDEN const void *ampci_matrix_data(const ampc_tensor *t, bool *transposed);

#endif
