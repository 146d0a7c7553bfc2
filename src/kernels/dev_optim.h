/* dev_optim.h: the device operations of the optim family (src/optim): the fused per-parameter update
 * (SGD or AdamW on F32 weights and state, with the 16-bit write-back), and the per-gradient passes of the
 * GradScaler and of clipping (unscale with a non-finite flag, sum of squares). Their results the host
 * needs (flags, sums) land in small device arrays read once per call at a named synchronisation point.
 * Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_OPTIM_H
#define AMPC_KERNELS_DEV_OPTIM_H

#include "kernels.h"

/* Stochastic rounding of a BF16 parameter's write-back: element e draws word e % 4 of Philox block
 * (seed, stream, base + e / 4) (ampc_rng_block) and rounds up when the low 16 bits of its F32 pattern
 * exceed the word's low 16 bits. Off: round to nearest even. */
typedef struct ampci_sr_args {
    bool on;
    uint64_t seed, stream, base;
} ampci_sr_args;

/* One optimizer update of elements [lo, hi) of one parameter of n elements, in chunks of 4096: the
 * gradient as F32; the F32 weights (master when given, else the F32 parameter itself, else the 16-bit
 * parameter widened); SGD (adam false: m is the momentum buffer or NULL) or AdamW (m, v the moments)
 * through the kernel table; then a 16-bit parameter is written back from the weights, rounded to nearest
 * or stochastically (sr.on: BF16 without master). */
typedef struct ampci_optim_update_args {
    void *param; /* (n, param_dt) contiguous; NULL while its storage is absent (src/dist shard FULL: then a
                    master is given and the parameter is not written) */
    ampc_dtype param_dt;
    const void *grad; /* (n, grad_dt) contiguous */
    ampc_dtype grad_dt;
    float *master; /* (hi - lo): element lo of the parameter first; NULL: none */
    float *m, *v;  /* (hi - lo) each, or NULL (v: AdamW only; m: AdamW, or SGD with momentum) */
    int64_t lo, hi;
    bool adam;
    ampci_sgd_args sgd;     /* when !adam */
    ampci_adamw_args adamw; /* when adam */
    ampci_sr_args sr;
} ampci_optim_update_args;

/* g (n, dt: F32, F16 or BF16, contiguous) *= factor in g's dtype (the kernel table's unscale: nothing
 * changes when factor is 1); flag (one int32, or NULL) = 1 when any value of g was inf or NaN before the
 * multiplication, else 0. The GradScaler's unscale (factor fl(1 / scale)) and clipping (factor coef). */
typedef struct ampci_grad_unscale_args {
    void *g;
    ampc_dtype dt;
    int64_t n;
    float factor;
    int32_t *flag;
} ampci_grad_unscale_args;

/* out (one double) = the sum of squares of g (n, dt: F32, F16 or BF16, contiguous) in double, in the
 * kernel table's order. */
typedef struct ampci_grad_sumsq_args {
    const void *g;
    ampc_dtype dt;
    int64_t n;
    double *out;
} ampci_grad_sumsq_args;

#define AMPCI_DEVOPS_OPTIM(X) X(optim_update) X(grad_unscale) X(grad_sumsq)

#endif
