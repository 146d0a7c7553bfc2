/* device_ops.c: the devices' operation tables. The CPU's holds the implementations of kernels/cpu/; the
 * guard device's wraps each of them in the device's enter/leave, so its memory is readable exactly while
 * one of its own operations runs (core/device_guard.c) and any other access faults. */
#include "device.h"

#define CPU_ENTRY(op) .op = ampci_cpu_##op,
static const ampci_device_ops cpu_ops = {.name = "cpu", AMPCI_DEVICE_OPS(CPU_ENTRY)};
#undef CPU_ENTRY

/* guard_<op>: the CPU's operation between the buffer type's enter and leave. */
#define GUARD_WRAP(op)                                                                                                 \
    static ampc_status guard_##op(ampc_ctx *ctx, const ampci_##op##_args *a) {                                         \
        const ampci_buft *b = ctx->dev_mem.buft;                                                                       \
        b->enter(ctx);                                                                                                 \
        ampc_status s = ampci_cpu_##op(ctx, a);                                                                        \
        b->leave(ctx);                                                                                                 \
        return s;                                                                                                      \
    }
AMPCI_DEVICE_OPS(GUARD_WRAP)
#undef GUARD_WRAP

#define GUARD_ENTRY(op) .op = guard_##op,
static const ampci_device_ops guard_ops = {.name = "guard", AMPCI_DEVICE_OPS(GUARD_ENTRY)};
#undef GUARD_ENTRY

const ampci_device_ops *ampci_device_ops_for(ampc_device_kind kind) {
    switch (kind) {
    case AMPC_DEVICE_CPU: return &cpu_ops;
    case AMPC_DEVICE_GUARD: return &guard_ops;
    default: return NULL;
    }
}

#define OP_NAME(op) #op,
static const char *const op_names[] = {AMPCI_DEVICE_OPS(OP_NAME)};
#undef OP_NAME

const char *const *ampci_device_op_names(int *count) {
    *count = (int)(sizeof op_names / sizeof op_names[0]);
    return op_names;
}
