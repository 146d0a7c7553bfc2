/* fp32_precision.c: the TF32 switch, CPU edition. The context keeps a small stack (the global setting
 * and scoped overrides); the op layer asks ampci_gemm_fn which GEMM the current setting allows, a
 * kernel-selection question, hence here. The setting is a permission: a split kernel is used only where
 * the kernel table has one, and the table has one only where it beats the F32 GEMM (measured per size
 * class, tune.h; by the rule: AVX512-BF16 for one pass, AMX for one or three). A split field that runs
 * only for some size classes is a dispatcher that runs the F32 GEMM for the others. */
#include "kernels.h"

#include <string.h>

static const char *const names[AMPC_FP32_PRECISION_COUNT] = {"highest", "high", "medium"};

const char *ampc_fp32_precision_name(ampc_fp32_precision p) {
    return (unsigned)p < AMPC_FP32_PRECISION_COUNT ? names[p] : "?";
}

ampc_status ampc_fp32_precision_parse(const char *name, ampc_fp32_precision *out) {
    for (int i = 0; name && out && i < AMPC_FP32_PRECISION_COUNT; i++)
        if (strcmp(name, names[i]) == 0) return *out = (ampc_fp32_precision)i, AMPC_OK;
    return ampci_fail(AMPC_STATUS_INVALID_ARG, "unknown FP32 matmul precision '%s': expected highest, high or medium",
                      name ? name : "(null)");
}

static bool valid(const char *fn, const ampc_ctx *ctx, ampc_fp32_precision p) {
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", fn), false;
    if ((unsigned)p >= AMPC_FP32_PRECISION_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: precision %d; expected AMPC_FP32_HIGHEST, _HIGH or _MEDIUM", fn,
                          (int)p),
               false;
    return true;
}

ampc_status ampc_ctx_set_fp32_matmul_precision(ampc_ctx *ctx, ampc_fp32_precision p) {
    if (!valid("ampc_ctx_set_fp32_matmul_precision", ctx, p)) return ampc_last_status();
    ctx->fp32_prec[ctx->fp32_depth] = (int)p; /* inside an override: until its pop, as torch's flags() */
    return AMPC_OK;
}

ampc_fp32_precision ampc_ctx_fp32_matmul_precision(const ampc_ctx *ctx) {
    return ctx ? (ampc_fp32_precision)ctx->fp32_prec[ctx->fp32_depth] : AMPC_FP32_HIGHEST;
}

ampc_status ampc_ctx_push_fp32_matmul_precision(ampc_ctx *ctx, ampc_fp32_precision p) {
    static const char fn[] = "ampc_ctx_push_fp32_matmul_precision";
    if (!valid(fn, ctx, p)) return ampc_last_status();
    if (ctx->fp32_depth + 1 >= (int)(sizeof ctx->fp32_prec / sizeof ctx->fp32_prec[0]))
        return ampci_fail(AMPC_STATUS_STATE, "%s: overrides nest at most %d deep", fn,
                          (int)(sizeof ctx->fp32_prec / sizeof ctx->fp32_prec[0]) - 1);
    ctx->fp32_prec[++ctx->fp32_depth] = (int)p;
    return AMPC_OK;
}

ampc_status ampc_ctx_pop_fp32_matmul_precision(ampc_ctx *ctx) {
    static const char fn[] = "ampc_ctx_pop_fp32_matmul_precision";
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", fn);
    if (ctx->fp32_depth == 0) return ampci_fail(AMPC_STATUS_STATE, "%s: no override to end (push first)", fn);
    ctx->fp32_depth--;
    return AMPC_OK;
}

ampc_k_gemm_fn ampci_gemm_fn(const ampc_ctx *ctx, ampc_dtype dt) {
    const struct ampc_kernels *k = ctx->kernels;
    if (dt != AMPC_DTYPE_F32) return k->gemm[dt];
    /* MEDIUM allows one pass or three; HIGH three only; a missing kernel means "not faster here" */
    ampc_fp32_precision p = (ampc_fp32_precision)ctx->fp32_prec[ctx->fp32_depth];
    if (p == AMPC_FP32_MEDIUM && k->gemm_f32_bf16x1) return k->gemm_f32_bf16x1;
    if (p != AMPC_FP32_HIGHEST && k->gemm_f32_bf16x3) return k->gemm_f32_bf16x3;
    return k->gemm[AMPC_DTYPE_F32];
}
