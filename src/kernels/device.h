/* device.h: a device's operations, the seam between the floors above the kernels and tensor memory.
 * Everything the tensor, autograd, amp, ops, optim, data, io and dist floors do to the elements of a
 * tensor (staging to F32, splitting into rows, scratch buffers, loops, fills, copies) is one of these
 * calls; code above the kernels floor computes addresses but never dereferences tensor memory (the guard
 * device makes sure of it). Each device has one table of them (struct ampci_device_ops), reached as
 * ctx->dev: the CPU's (kernels/cpu/: staging and threads around the ISA kernels of ctx->kernels), the
 * guard device's (the CPU's, with its memory unprotected around each call), and later a GPU's.
 *
 * Every operation has one signature, ampc_status op(ampc_ctx *ctx, const ampci_<op>_args *a): the
 * argument block names the operands, with their shapes in comments; pointers in it are device addresses
 * unless the comment says host. Results a step needs on the host are written to device memory and read
 * with ampci_sync_read (a named synchronisation point), so a device may keep a decision to itself.
 * Call them as AMPCI_DEV(ctx, unary, .kind = k, .y = y, ...). Adding one: its argument block and a line
 * in its family's list (dev_<family>.h), ampci_cpu_<op> in kernels/cpu/, and a test against ref. */
#ifndef AMPC_KERNELS_DEVICE_H
#define AMPC_KERNELS_DEVICE_H

#include "kernels.h"

#include "dev_tensor.h"
#include "dev_elementwise.h"
#include "dev_nn.h"
#include "dev_linear.h"
#include "dev_optim.h"
#include "dev_amp.h"

#define AMPCI_DEVICE_OPS(X)                                                                                            \
    AMPCI_DEVOPS_TENSOR(X)                                                                                             \
    AMPCI_DEVOPS_ELEMENTWISE(X)                                                                                        \
    AMPCI_DEVOPS_NN(X)                                                                                                 \
    AMPCI_DEVOPS_LINEAR(X)                                                                                             \
    AMPCI_DEVOPS_OPTIM(X)                                                                                              \
    AMPCI_DEVOPS_AMP(X)

/* The table: one function per operation. */
#define AMPCI_DEVOP_FIELD(op) ampc_status (*op)(ampc_ctx * ctx, const ampci_##op##_args *a);
typedef struct ampci_device_ops {
    const char *name; /* the device kind's: "cpu", "guard" */
    AMPCI_DEVICE_OPS(AMPCI_DEVOP_FIELD)
} ampci_device_ops;
#undef AMPCI_DEVOP_FIELD

/* The CPU device's implementations (kernels/cpu/), ampci_cpu_<op>. */
#define AMPCI_DEVOP_DECLARE(op) AMPCI_HIDDEN ampc_status ampci_cpu_##op(ampc_ctx *ctx, const ampci_##op##_args *a);
AMPCI_DEVICE_OPS(AMPCI_DEVOP_DECLARE)
#undef AMPCI_DEVOP_DECLARE

/* The operations of a device kind (NULL: none built). */
AMPCI_HIDDEN const ampci_device_ops *ampci_device_ops_for(ampc_device_kind kind);
/* The names of the operations in table order, and how many there are (for tests and profiles). */
AMPCI_HIDDEN const char *const *ampci_device_op_names(int *count);

/* One call: AMPCI_DEV(ctx, op, designated initialisers of ampci_<op>_args). */
#define AMPCI_DEV(ctx, op, ...) ((ctx)->dev->op((ctx), &(ampci_##op##_args){__VA_ARGS__}))

#endif
