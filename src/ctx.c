/* ctx.c: the context assembly, above every floor and the only file that knows them all. A context is
 * core's part (allocator, threads, RNG, step arena) plus each floor's state: the kernel table of the
 * context's level (kernels), the tape and anomaly mode (autograd), autocast regions and the weight-cast
 * cache (amp). Creating, ending a step and freeing visit the floors in order, bottom up on the way in
 * and top down on the way out. */
#include "amp/amp.h"
#include "autograd/autograd.h"
#include "kernels/device.h"

ampc_status ampc_ctx_new(const ampc_ctx_params *params, ampc_ctx **out) {
    static const ampc_ctx_params defaults;
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_new: out must not be NULL");
    *out = NULL;
    ampc_ctx *ctx;
    ampc_status s = ampci_ctx_core_new(params ? params : &defaults, &ctx);
    if (s != AMPC_OK) return s;
    ctx->kernels = ampci_kernels(params ? params->isa : AMPC_ISA_AUTO);
    ctx->isa = ctx->kernels->isa;
    ctx->dev = ampci_device_ops_for(ctx->dev_mem.device.kind); /* present: core opened the device */
    *out = ctx; /* autograd and amp start empty (their state is zero, or made on first use) */
    return AMPC_OK;
}

void ampc_ctx_free(ampc_ctx *ctx) {
    if (!ctx) return;
    ampc_ctx_profile_stop(ctx);
    if (ctx->stats) ampc_stats_attach(ctx, NULL); /* the statistics outlive the context */
    ampci_amp_release(ctx);
    ampci_kernels_adopt(ctx, NULL); /* a restored checkpoint's kernels */
    ampci_tensor_headers_free(ctx);
    ampci_ctx_core_free(ctx);
}

void ampc_ctx_step_end(ampc_ctx *ctx) {
    if (!ctx) return;
    ampci_stats_step_end(ctx);
    ampci_amp_step_end(ctx);      /* cached casts live in the arena: they go first */
    ampci_autograd_step_end(ctx); /* the tape lives in the arena too */
    ampci_tensor_step_end(ctx);   /* the step's tensor handles are marked released */
    ampci_ctx_core_step_end(ctx);
}
