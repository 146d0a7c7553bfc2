/* profile.c: ampc_ctx_profile_start / _stop. While the profile is on, ctx->dev is a table of wrappers,
 * one per device operation, that pass each call on to the table that was there before (the CPU's, the
 * guard's; kept in the profile) between ampci_prof_enter and _leave (core/profile.c: the rows, the
 * clock, the buffer type's memsets and copies, ampc_ctx_profile_read). Host wall time is the right clock
 * for a synchronous device. */
#include "device.h"

#include <stdlib.h>

#define PROF_WRAP(op)                                                                                                  \
    static ampc_status prof_##op(ampc_ctx *ctx, const ampci_##op##_args *a) {                                          \
        const ampci_device_ops *inner = ctx->prof->inner;                                                              \
        ampci_prof_mark m;                                                                                             \
        ampci_prof_enter(ctx, &m);                                                                                     \
        ampc_status s = inner->op(ctx, a);                                                                             \
        ampci_prof_leave(ctx, #op, &m);                                                                                \
        return s;                                                                                                      \
    }
AMPCI_DEVICE_OPS(PROF_WRAP)
#undef PROF_WRAP

#define PROF_ENTRY(op) .op = prof_##op,
static const ampci_device_ops prof_ops = {.name = "profile", AMPCI_DEVICE_OPS(PROF_ENTRY)};
#undef PROF_ENTRY

ampc_status ampc_ctx_profile_start(ampc_ctx *ctx) {
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_ctx_profile_start: ctx is NULL");
    if (!ctx->prof) {
        ampci_profile *p = malloc(sizeof *p);
        if (!p) return ampci_fail(AMPC_STATUS_OOM, "ampc_ctx_profile_start: out of memory for the profile");
        p->inner = ctx->dev;
        ctx->prof = p;
        ctx->dev = &prof_ops;
    }
    ctx->prof->depth = ctx->prof->n = 0; /* from zero; the cells are written as rows appear */
    ctx->prof->cells[AMPCI_PROF_CELLS].calls = 0;
    return AMPC_OK;
}

void ampc_ctx_profile_stop(ampc_ctx *ctx) {
    if (!ctx || !ctx->prof) return;
    ctx->dev = ctx->prof->inner;
    free(ctx->prof);
    ctx->prof = NULL;
}
