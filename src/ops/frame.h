/* frame.h: scoped frames for model code. Inside a frame, every tensor a public op hands to model code
 * (a new storage, not a view of an input) is noted; when the frame ends, those not kept are released
 * (ampci_tensor_release: their step buffers go back as soon as no recorded backward needs them), and the
 * kept ones pass to the enclosing frame. So model code reads as the math and still lets each intermediate
 * go at its last use, as PyTorch's reference counts do:
 *
 *     ampci_frame f = ampci_frame_begin(ctx);
 *     ampc_tensor *h = ln(m, "ln1", x);
 *     ampc_tensor *y = ampci_frame_keep(&f, attn(m, h));   // h goes now that attn is done
 *     return ampci_frame_end(&f, ampc_add(ctx, x, y));      // y goes; the sum passes to the caller's frame
 *
 * A kept tensor keeps every tensor of its storage (views). Only outputs of public ops called by model
 * code count: never what an op makes for itself (autocast's cached weight casts, staged copies), nor
 * tensors made before the frame began. Frames belong to a context (its `frames` list), end innermost
 * first, and never span a step end. */
#ifndef AMPC_OPS_FRAME_H
#define AMPC_OPS_FRAME_H

#include "../tensor/tensor.h"

typedef struct ampci_frame {
    ampc_ctx *ctx;
    int base, depth; /* where its tensors start on the context's list; frames open around it */
    uint64_t step;
} ampci_frame;

AMPCI_HIDDEN ampci_frame ampci_frame_begin(ampc_ctx *ctx);
/* Releases what the frame made so far except t (and t's storage); the frame stays open. Returns t. */
AMPCI_HIDDEN ampc_tensor *ampci_frame_keep(ampci_frame *f, ampc_tensor *t);
/* Ends the frame: releases what it made except `keep`, which passes to the enclosing frame. Returns keep
 * (NULL when the work failed: then everything is released). */
AMPCI_HIDDEN ampc_tensor *ampci_frame_end(ampci_frame *f, ampc_tensor *keep);
/* The same with n kept tensors (NULL entries allowed). */
AMPCI_HIDDEN void ampci_frame_end_keeping(ampci_frame *f, ampc_tensor *const *keep, int n);

/* The op epilogue's hand-off: out, made by a public op from in[0..n), is noted by the innermost open frame
 * of its context unless it shares an input's storage (a view). */
AMPCI_HIDDEN void ampci_frame_add(ampc_tensor *out, const ampc_tensor *const *in, int n);

#endif
