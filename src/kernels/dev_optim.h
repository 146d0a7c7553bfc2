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

/* A list of gradients for the multi-tensor passes below (PyTorch's _foreach ops): entry i is g[i] (n[i]
 * elements of dt[i]: F32, F16 or BF16, contiguous; n[i] 0 for an entry with nothing to do). The three
 * arrays are host memory holding device addresses and sizes. One call covers the list, so a device runs
 * it as one parallel pass (the CPU: pieces of at most AMPCI_GRAD_PIECE elements on its threads). */
typedef struct ampci_grad_list {
    void *const *g;
    const ampc_dtype *dt;
    const int64_t *n;
    int count;
} ampci_grad_list;
#define AMPCI_GRAD_PIECE ((int64_t)1 << 20)
/* Every g[i] *= factor in its dtype (the kernel table's unscale: nothing changes when factor is 1); flag
 * (count int32, device, or NULL) entry i = 1 when any value of g[i] was inf or NaN before the
 * multiplication, else 0. The GradScaler's unscale (factor fl(1 / scale)) and clipping (factor coef). */
typedef struct ampci_grad_unscale_args {
    ampci_grad_list list;
    float factor;
    int32_t *flag;
} ampci_grad_unscale_args;
/* out (count doubles, device) entry i = the sum of squares of g[i] in double: the kernel table's sum of
 * each piece of AMPCI_GRAD_PIECE elements, the pieces added in order (a gradient of one piece: the
 * kernel's sum itself), so the bits depend on neither the thread count nor the device. */
typedef struct ampci_grad_sumsq_args {
    ampci_grad_list list;
    double *out;
} ampci_grad_sumsq_args;
#define AMPCI_DEVOPS_OPTIM(X) X(optim_update) X(grad_unscale) X(grad_sumsq)

#endif
