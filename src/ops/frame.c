/* frame.c: the frames of frame.h. The open frames of a context share one list of the tensors they made
 * (in the context, outermost frame first); a frame is a mark on it, so ending a frame is a sweep from its
 * mark, and handing a kept tensor to the enclosing frame is leaving it below the new end. */
#include "frame.h"

ampci_frame ampci_frame_begin(ampc_ctx *ctx) {
    ampci_frame f = {ctx, ctx->frames.n, ctx->frames.depth, ctx->step_id};
    ctx->frames.depth++;
    return f;
}

static bool kept(const ampc_tensor *t, ampc_tensor *const *keep, int n) {
    for (int i = 0; i < n; i++)
        if (keep[i] && keep[i]->storage == t->storage) return true;
    return false;
}

/* Releases f's tensors except the kept ones, which close up at f's mark; returns the list's new end. */
static int sweep(const ampci_frame *f, ampc_tensor *const *keep, int n) {
    ampc_ctx *ctx = f->ctx;
    AMPCI_ASSERT(ctx->frames.depth == f->depth + 1 && ctx->frames.n >= f->base); /* innermost first */
    AMPCI_ASSERT(ctx->step_id == f->step);                                       /* its tensors died at a step end */
    int end = f->base;
    for (int i = f->base; i < ctx->frames.n; i++) {
        if (kept(ctx->frames.made[i], keep, n)) ctx->frames.made[end++] = ctx->frames.made[i];
        else ampci_tensor_release(ctx->frames.made[i]);
    }
    return end;
}

ampc_tensor *ampci_frame_keep(ampci_frame *f, ampc_tensor *t) {
    f->ctx->frames.n = sweep(f, &t, 1);
    return t;
}

void ampci_frame_end_keeping(ampci_frame *f, ampc_tensor *const *keep, int n) {
    ampc_ctx *ctx = f->ctx;
    int end = sweep(f, keep, n);
    ctx->frames.depth = f->depth;
    ctx->frames.n = ctx->frames.depth > 0 ? end : f->base; /* the kept tensors are the enclosing frame's now */
}

ampc_tensor *ampci_frame_end(ampci_frame *f, ampc_tensor *keep) {
    ampci_frame_end_keeping(f, &keep, 1);
    return keep;
}

void ampci_frame_add(ampc_tensor *out, const ampc_tensor *const *in, int n) {
    ampc_ctx *ctx = out ? out->ctx : NULL;
    if (!ctx || !ctx->frames.depth || !out->storage->arena || ctx->frames.n == AMPCI_FRAME_MAX_MADE) return;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->storage == out->storage) return;
    ctx->frames.made[ctx->frames.n++] = out;
}
