/* dev_amp.h: the device operations of the amp family: FP8 quantisation (src/amp/fp8.c) and the range
 * statistics of the numerics doctor (src/amp/stats.c). Each writes what the host must see (an amax and a
 * saturation count, a tensor's range counts) to a small block of device memory that the caller reads with
 * one ampci_sync_read. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_AMP_H
#define AMPC_KERNELS_DEV_AMP_H

#include "kernels.h"

/* What a quantisation reports: the largest |x| of the UNSCALED values (delayed scaling's history, current
 * scaling's scale) and how many products saturated (the quant8 kernel's count). */
typedef struct ampci_quant8_result {
    float amax;
    uint32_t unused; /* keeps sat 8-byte aligned on every ABI */
    uint64_t sat;
} ampci_quant8_result;

/* FP8 quantisation (kernels.h: ampci_quant8_kernel) of x (n values of x_dt: F32, BF16 or F16, contiguous):
 * dst (n, BF16 bit patterns) = q(x * scale) / scale, q the saturating cast to fmt (AMPCI_QUANT8_E4M3 or
 * _E5M2); the division by the power-of-two scale is exact. res (1) = {amax, saturated count}. dst NULL:
 * the amax only (current scaling's first pass; res->sat then counts saturations at `scale`, unused). */
typedef struct ampci_quant8_args {
    const void *x;
    ampc_dtype x_dt;
    int64_t n;
    float scale;
    int fmt;
    uint16_t *dst;
    ampci_quant8_result *res;
} ampci_quant8_args;

/* acc (1) = the range statistics (kernels.h: ampci_range_kernel) of x (n values of x_dt: F32, BF16 or
 * F16, contiguous) against the thresholds thr[0..nthr) (absolute F32 bit patterns; host values copied
 * in); acc is written, not added to. */
typedef struct ampci_range_args {
    const void *x;
    ampc_dtype x_dt;
    int64_t n;
    uint32_t thr[AMPCI_RANGE_MAX_THR];
    int nthr;
    ampci_range_acc *acc;
} ampci_range_args;

#define AMPCI_DEVOPS_AMP(X) X(quant8) X(range)

/* Not a device operation: the range statistics of n host values x (dtype dt) added into acc on the
 * calling thread, with the kernel table k. The CPU device's range operation runs it per task; the
 * context-free ampc_stats_classify (host data) runs it once. */
AMPCI_HIDDEN void ampci_range_host(const struct ampc_kernels *k, const void *x, ampc_dtype dt, int64_t n,
                                   const uint32_t *thr, int nthr, ampci_range_acc *acc);

#endif
