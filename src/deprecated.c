/* deprecated.c: the old names of renamed public functions (ampc.h, "Deprecated names"), each calling its
 * new name, kept for one release so that code written against 0.1 still links. */
#include "core/core.h"

#define AMPCI_NO_DEPRECATION_WARNINGS _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
AMPCI_NO_DEPRECATION_WARNINGS

ampc_status ampc_format_info_get(ampc_format fmt, ampc_format_info *out) { return ampc_format_get_info(fmt, out); }

ampc_status ampc_autocast_get_policy(const ampc_ctx *ctx, const char *op, ampc_cast_policy *out) {
    return ampc_autocast_policy(ctx, op, out);
}

ampc_status ampc_autocast_stats_get(const ampc_ctx *ctx, ampc_autocast_stats *out) {
    return ampc_autocast_get_stats(ctx, out);
}

void ampc_ctx_set_check_finite(ampc_ctx *ctx, bool on) { ampc_autograd_set_detect_anomaly(ctx, on); }

ampc_status ampc_grad_scaler_overflow_get(const ampc_grad_scaler *gs, ampc_grad_scaler_overflow *out) {
    return ampc_grad_scaler_get_overflow(gs, out);
}

ampc_status ampc_dataset_info_get(const ampc_dataset *ds, ampc_dataset_info *out) {
    return ampc_dataset_get_info(ds, out);
}

ampc_status ampc_set_fp32_matmul_precision(ampc_ctx *ctx, ampc_fp32_precision p) {
    return ampc_ctx_set_fp32_matmul_precision(ctx, p);
}

ampc_fp32_precision ampc_get_fp32_matmul_precision(const ampc_ctx *ctx) { return ampc_ctx_fp32_matmul_precision(ctx); }

ampc_status ampc_fp32_matmul_precision_push(ampc_ctx *ctx, ampc_fp32_precision p) {
    return ampc_ctx_push_fp32_matmul_precision(ctx, p);
}

ampc_status ampc_fp32_matmul_precision_pop(ampc_ctx *ctx) { return ampc_ctx_pop_fp32_matmul_precision(ctx); }
