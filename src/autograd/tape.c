/* tape.c: recording ops, gradient accumulation and the backward walk. Gradients live in their tensor's
 * dtype, as in PyTorch (an F32 leaf collects F32; a BF16 activation's gradient is BF16); sums of several
 * contributions are formed in F32 and rounded once. Node gradients are never modified in place, so a
 * backward function may hand the same tensor to several inputs. A backward walk marks the nodes it can
 * reach, runs them newest first, and releases them: a second walk over the same graph is refused.
 * Memory: each node's backward runs in a step-heap generation (core/step_heap.c); a node's pending
 * gradient holds a reference to its buffer, so at the end of each node everything it made that no
 * pending gradient needs is released, and the walk holds about one layer of gradients at a time. A
 * pending gradient that nothing else references (a transient buffer with one reference) takes further
 * contributions in place instead of as a fresh sum. */
#include "autograd.h"

#include <stdio.h>
#include <string.h>

void ampci_autograd_step_end(ampc_ctx *ctx) {
    ctx->tape = NULL;
    ctx->cur_op = NULL;
    ctx->cur_nin = 0;
}

bool ampci_wants_grad(const ampc_ctx *ctx, const ampc_tensor *const *in, int nin) {
    if (ctx->no_grad_depth > 0) return false;
    for (int i = 0; i < nin; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

ampci_node *ampci_record(ampc_ctx *ctx, const char *op, ampc_tensor *out, const ampc_tensor *const *in, int nin,
                         ampci_backward_fn backward, unsigned saved_mask, size_t saved_size) {
    ampci_node *n = ampci_arena_alloc(ctx, sizeof *n, op);
    ampc_tensor **ins = n ? ampci_arena_alloc(ctx, (size_t)nin * sizeof *ins, op) : NULL;
    uint64_t *versions = ins ? ampci_arena_alloc(ctx, (size_t)nin * sizeof *versions, op) : NULL;
    void *saved = versions && saved_size ? ampci_arena_alloc(ctx, saved_size, op) : NULL;
    if (!versions || (saved_size && !saved)) return NULL;
    if (saved) memset(saved, 0, saved_size);
    for (int i = 0; i < nin; i++) {
        ins[i] = (ampc_tensor *)in[i];
        versions[i] = in[i] ? in[i]->storage->version : 0;
        if (in[i] && in[i]->owned) ins[i]->graph_step = ctx->step_id; /* see ampc_tensor_free */
        if (in[i] && (saved_mask >> i & 1)) in[i]->storage->saves++;  /* see ampci_tensor_release */
    }
    if (saved_mask & AMPCI_SAVES_OUT) out->storage->saves++;
    *n = (ampci_node){.op = op,
                      .backward = backward,
                      .ctx = ctx,
                      .out = out,
                      .in = ins,
                      .nin = nin,
                      .saved_mask = saved_mask,
                      .in_version = versions,
                      .out_version = out->storage->version,
                      .saved = saved,
                      .prev = ctx->tape};
    ctx->tape = n;
    out->node = n;
    out->requires_grad = true;
    return n;
}

bool ampci_input_needs_grad(const ampci_node *n, int i) { return i < n->nin && n->in[i] && n->in[i]->requires_grad; }

/* dst (contiguous) += src (contiguous, same numel), in F32, rounded once to dst's dtype (on the device). */
static ampc_status add_into(ampc_tensor *dst, const ampc_tensor *src) {
    return AMPCI_DEV(dst->ctx, accumulate, .dst = ampci_dev_ptr(dst), .dst_dt = dst->dtype, .src = ampci_dev_ptr(src),
                     .src_dt = src->dtype, .n = ampci_numel(dst));
}

/* The listeners of an event, called with the event's arguments. */
static void grad_seen(ampc_ctx *ctx, const ampci_node *n, const ampc_tensor *t, const ampc_tensor *g) {
    for (int i = 0; i < ctx->grad_seen.n; i++)
        ((ampci_grad_seen_fn *)ctx->grad_seen.at[i].fn)(ctx->grad_seen.at[i].arg, n, t, g);
}
static void grad_ready(ampc_ctx *ctx, ampc_tensor *leaf) {
    for (int i = 0; i < ctx->grad_ready.n; i++)
        ((ampci_grad_ready_fn *)ctx->grad_ready.at[i].fn)(ctx->grad_ready.at[i].arg, leaf);
}

ampc_status ampci_autograd_on_grad_ready(ampc_ctx *ctx, ampci_grad_ready_fn *fn, void *arg) {
    return ampci_listeners_add(&ctx->grad_ready, "grad-ready listener", (void (*)(void))fn, arg);
}
bool ampci_autograd_off_grad_ready(ampc_ctx *ctx, ampci_grad_ready_fn *fn, void *arg) {
    return ampci_listeners_remove(&ctx->grad_ready, (void (*)(void))fn, arg);
}
ampc_status ampci_autograd_on_grad_seen(ampc_ctx *ctx, ampci_grad_seen_fn *fn, void *arg) {
    return ampci_listeners_add(&ctx->grad_seen, "gradient listener", (void (*)(void))fn, arg);
}
bool ampci_autograd_off_grad_seen(ampc_ctx *ctx, ampci_grad_seen_fn *fn, void *arg) {
    return ampci_listeners_remove(&ctx->grad_seen, (void (*)(void))fn, arg);
}

/* References on the step buffer behind a gradient (arena and heap storage only; owned storage has its
 * own count). */
static void grad_ref(ampc_tensor *g) {
    if (g && g->storage->arena) ampci_step_ref(g->ctx, g->storage->data);
}
static void grad_unref(ampc_tensor *g) {
    if (g && g->storage->arena) ampci_step_unref(g->ctx, g->storage->data);
}

static ampc_status accumulate_leaf(ampc_tensor *t, const ampc_tensor *g) {
    if (t->grad) {
        t->grad->storage->version++;
        return add_into(t->grad, g);
    }
    static const char fn[] = "ampc_backward";
    ampc_tensor *gr = t->grad_slot ? t->grad_slot
                      : t->owned   ? ampc_tensor_new(t->ctx, t->dtype, t->ndim, t->shape)
                                   : ampci_tensor_arena(fn, t->ctx, t->dtype, t->ndim, t->shape);
    if (!gr) return ampc_last_status();
    if (!t->owned) grad_ref(gr); /* an arena leaf's gradient lives until step end: never unreferenced */
    gr->storage->version++;
    t->grad = gr;
    return AMPCI_DEV(t->ctx, convert, .dst = ampci_dev_ptr(gr), .dst_dt = t->dtype, .src = ampci_dev_ptr(g),
                     .src_dt = g->dtype, .n = ampci_numel(t));
}

/* n's pending gradient is a transient buffer that only the walk holds: contributions may go into it. */
static bool grad_takes_in_place(ampc_ctx *ctx, const ampci_node *n) {
    return n->grad && n->grad->storage->arena && ampc_tensor_is_contiguous(n->grad) && n->grad->offset == 0 &&
           ampci_step_exclusive(ctx, n->grad->storage->data);
}

ampc_status ampci_grad_accumulate_window(ampc_tensor *t, const ampc_tensor *g, ampci_window_fn *window, const void *arg,
                                         bool *done) {
    ampc_ctx *ctx = t->ctx;
    *done = false;
    /* anomaly mode checks whole F32 contributions; a leaf's contributions go to its listeners whole */
    if (ctx->check_finite || !t->node || !grad_takes_in_place(ctx, t->node) || t->node->grad->dtype != t->dtype)
        return AMPC_OK;
    ampc_tensor *w = window(arg, t->node->grad);
    if (!w) return ampc_last_status();
    ampc_status s = AMPCI_DEV(ctx, strided_copy, .t = ampci_tensor_strided(w), .buf = (void *)ampci_dev_ptr(g),
                              .buf_dt = g->dtype, .to_tensor = true, .add = true);
    *done = s == AMPC_OK;
    return s;
}

ampc_status ampci_grad_accumulate(ampc_tensor *t, const ampc_tensor *g) {
    AMPCI_ASSERT(ampci_numel(t) == ampci_numel(g) && ampc_tensor_is_contiguous(g));
    ampc_ctx *ctx = t->ctx;
    if (!ampci_check_grad(ctx, ctx->cur_backward ? ctx->cur_backward : "ampc_backward", t, g)) return AMPC_STATUS_STATE;
    if (!t->node) {
        if (!t->requires_grad) return AMPC_OK;
        if (ctx->grad_seen.n && ctx->cur_node) grad_seen(ctx, ctx->cur_node, t, g);
        return accumulate_leaf(t, g);
    }
    static const char fn[] = "ampc_backward";
    ampci_node *n = t->node;
    ampc_tensor *sum;
    if (!n->grad) {
        sum = g->dtype == t->dtype ? (ampc_tensor *)g : ampci_copy_as(fn, g, t->dtype);
    } else if (grad_takes_in_place(ctx, n)) {
        return add_into(n->grad, g); /* the sum rounds once to t's dtype either way: the same bits */
    } else {
        sum = ampci_copy_as(fn, n->grad, t->dtype);
        if (sum && add_into(sum, g) != AMPC_OK) return ampc_last_status();
    }
    if (!sum) return ampc_last_status();
    grad_ref(sum);
    grad_unref(n->grad);
    n->grad = sum;
    return AMPC_OK;
}

ampc_dtype ampci_grad_dtype(const ampc_tensor *t) {
    if (t->ctx->check_finite) return AMPC_DTYPE_F32;
    bool first = t->node ? !t->node->grad : t->requires_grad && !t->grad;
    return first ? t->dtype : AMPC_DTYPE_F32;
}

/* ---- the walk ---- */

/* Saved inputs whose storage is absent (sharded parameters between uses) are made present first. */
static ampc_status gather_saved(const ampci_node *n) {
    for (int i = 0; i < n->nin; i++) {
        ampc_tensor *t = n->in[i];
        if (t && (n->saved_mask >> i & 1) && t->storage->absent) {
            ampc_status s = ampci_tensor_present(t);
            if (s != AMPC_OK) return s;
        }
    }
    return AMPC_OK;
}

static ampc_status check_versions(const ampci_node *n) {
    for (int i = 0; i < n->nin; i++) {
        const ampc_tensor *t = n->in[i];
        if (!(n->saved_mask >> i & 1) || !t || t->storage->version == n->in_version[i]) continue;
        char b[128];
        return ampci_fail(AMPC_STATUS_STATE,
                          "ampc_backward: input %d of %s (%s%s%s) was modified in place after the "
                          "op ran (version %llu, saved at %llu); its gradient would be wrong",
                          i, n->op, ampc_tensor_describe(t, b, sizeof b), t->name[0] ? ", " : "", t->name,
                          (unsigned long long)t->storage->version, (unsigned long long)n->in_version[i]);
    }
    if ((n->saved_mask & AMPCI_SAVES_OUT) && n->out->storage->version != n->out_version)
        return ampci_fail(AMPC_STATUS_STATE,
                          "ampc_backward: the output of %s was modified in place after the op "
                          "ran; its gradient would be wrong",
                          n->op);
    return AMPC_OK;
}

/* Marks every node `root` depends on. Consumers are newer than producers, so one pass from newest to
 * oldest suffices. Fails when the graph was already consumed by an earlier backward. */
static ampc_status mark(ampc_ctx *ctx, ampci_node *root) {
    root->marked = true;
    for (ampci_node *n = ctx->tape; n; n = n->prev) {
        if (!n->marked) continue;
        if (n->released)
            return ampci_fail(AMPC_STATUS_STATE,
                              "ampc_backward: the graph through %s was already used by an earlier "
                              "backward and released; run one backward per forward",
                              n->op);
        for (int i = 0; i < n->nin; i++) {
            ampc_tensor *t = n->in[i];
            if (t && t->node) t->node->marked = true;
            else if (t && t->requires_grad) t->last_use = n; /* the oldest reader wins: the walk's last */
        }
    }
    return AMPC_OK;
}

/* After node n's backward (or its skip, when no gradient reached it): the leaves it was the last reader
 * of have their final gradients, and the hook hears of them, then of the node's end. */
static void leaves_final(ampc_ctx *ctx, const ampci_node *n) {
    if (!ctx->grad_ready.n) return;
    for (int i = 0; i < n->nin; i++) {
        ampc_tensor *t = n->in[i];
        if (t && !t->node && t->requires_grad && t->last_use == n) {
            t->last_use = NULL; /* a leaf read twice by one node is reported once */
            grad_ready(ctx, t);
        }
    }
    grad_ready(ctx, NULL);
}

static void unmark(ampc_ctx *ctx) {
    for (ampci_node *n = ctx->tape; n; n = n->prev) n->marked = false;
}

/* The node's backward ran: what it saved may go (the step heap takes back what the forward's code
 * already released). */
static void unsave(ampci_node *n) {
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] && (n->saved_mask >> i & 1)) ampci_storage_unsave(n->in[i]->storage);
    if (n->saved_mask & AMPCI_SAVES_OUT) ampci_storage_unsave(n->out->storage);
}

static ampc_status walk(ampc_ctx *ctx) {
    for (ampci_node *n = ctx->tape; n; n = n->prev) {
        if (!n->marked) continue;
        ampc_tensor *g = n->grad;
        n->grad = NULL;
        n->released = true;
        if (!g) { /* reachable, but no gradient flowed into it */
            leaves_final(ctx, n);
            continue;
        }
        ampc_status s = gather_saved(n);
        if (s == AMPC_OK) s = check_versions(n);
        ctx->cur_backward = n->op, ctx->cur_node = n;
        if (s == AMPC_OK && ctx->grad_seen.n && n->stats_site) grad_seen(ctx, n, n->out, g);
        ampci_step_gen_begin(ctx);
        if (s == AMPC_OK) s = n->backward(n, g);
        if (s == AMPC_OK) unsave(n);
        grad_unref(g);
        ampci_step_gen_sweep(ctx);
        ctx->cur_backward = NULL, ctx->cur_node = NULL;
        if (s != AMPC_OK) return s;
        leaves_final(ctx, n);
    }
    return AMPC_OK;
}

static ampc_status backward_walk(ampc_ctx *ctx, ampc_tensor *out, const ampc_tensor *seed) {
    char b[128];
    if (!out->node && !out->requires_grad)
        return ampci_fail(AMPC_STATUS_STATE,
                          "ampc_backward: %s does not require grad and has no graph (was it made "
                          "under no-grad, or from tensors that do not require grad?)",
                          ampc_tensor_describe(out, b, sizeof b));
    if (!out->node) return accumulate_leaf(out, seed);
    if (out->node->released)
        return ampci_fail(AMPC_STATUS_STATE,
                          "ampc_backward: the graph of %s (made by %s) was already used by an "
                          "earlier backward and released; run one backward per forward",
                          ampc_tensor_describe(out, b, sizeof b), out->node->op);
    ampc_status s = mark(ctx, out->node);
    if (s == AMPC_OK) s = ampci_grad_accumulate(out, seed);
    if (s == AMPC_OK) {
        ctx->no_grad_depth++; /* backward records nothing */
        s = walk(ctx);
        ctx->no_grad_depth--;
    }
    unmark(ctx);
    return s;
}

static ampc_status backward_from(ampc_ctx *ctx, ampc_tensor *out, const ampc_tensor *seed) {
    int was = ampci_phase_enter(ctx, AMPCI_PHASE_BACKWARD);
    ampc_status s = backward_walk(ctx, out, seed);
    ampci_phase_leave(ctx, was);
    return s;
}

ampc_status ampc_backward(ampc_ctx *ctx, ampc_tensor *loss) {
    if (!ctx || !loss)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_backward: %s is NULL%s", !ctx ? "ctx" : "loss",
                          !loss ? " (did the forward fail? see the earlier error)" : "");
    if (ampci_tensor_usable("ampc_backward", "the loss", loss) != AMPC_OK) return ampc_last_status();
    if (ampci_numel(loss) != 1) {
        char b[128];
        return ampci_fail(AMPC_STATUS_SHAPE,
                          "ampc_backward: the loss %s is not a scalar; use ampc_backward_with and "
                          "give its gradient",
                          ampc_tensor_describe(loss, b, sizeof b));
    }
    ampc_tensor *seed = ampci_tensor_arena("ampc_backward", ctx, loss->dtype, loss->ndim, loss->shape);
    if (!seed || ampc_tensor_fill(seed, 1.0) != AMPC_OK) return ampc_last_status();
    return backward_from(ctx, loss, seed);
}

ampc_status ampc_backward_with(ampc_ctx *ctx, ampc_tensor *out, const ampc_tensor *grad) {
    static const char fn[] = "ampc_backward_with";
    if (!ctx || !out || !grad)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s is NULL", fn, !ctx ? "ctx" : !out ? "out" : "grad");
    if (ampci_tensor_usable(fn, "out", out) != AMPC_OK || ampci_tensor_usable(fn, "grad", grad) != AMPC_OK)
        return ampc_last_status();
    if (grad->ndim != out->ndim || memcmp(grad->shape, out->shape, (size_t)out->ndim * sizeof(int64_t)) != 0) {
        char a[128], b[128];
        return ampci_fail(AMPC_STATUS_SHAPE, "%s: the gradient %s does not match the output %s", fn,
                          ampc_tensor_describe(grad, a, sizeof a), ampc_tensor_describe(out, b, sizeof b));
    }
    if (!ampc_dtype_is_float(grad->dtype))
        return ampci_fail(AMPC_STATUS_DTYPE, "%s: the gradient has dtype %s; expected a float dtype", fn,
                          ampc_dtype_name(grad->dtype));
    ampc_tensor *seed = ampci_copy_as(fn, grad, out->dtype);
    return seed ? backward_from(ctx, out, seed) : ampc_last_status();
}

/* ---- grad mode and leaf gradients ---- */

void ampc_no_grad_begin(ampc_ctx *ctx) {
    if (ctx) ctx->no_grad_depth++;
}

void ampc_no_grad_end(ampc_ctx *ctx) {
    if (ctx && ctx->no_grad_depth > 0) ctx->no_grad_depth--;
}

bool ampc_grad_enabled(const ampc_ctx *ctx) { return ctx && ctx->no_grad_depth == 0; }

ampc_status ampc_tensor_set_requires_grad(ampc_tensor *t, bool requires_grad) {
    static const char fn[] = "ampc_tensor_set_requires_grad";
    if (ampci_tensor_usable(fn, "tensor", t) != AMPC_OK) return ampc_last_status();
    char b[128];
    if (t->node)
        return ampci_fail(AMPC_STATUS_STATE, "%s: %s was made by %s; only leaves can be marked (detach it first)", fn,
                          ampc_tensor_describe(t, b, sizeof b), t->node->op);
    if (requires_grad && !ampc_dtype_is_float(t->dtype))
        return ampci_fail(AMPC_STATUS_DTYPE, "%s: %s has no gradient: only float tensors can require grad", fn,
                          ampc_tensor_describe(t, b, sizeof b));
    t->requires_grad = requires_grad;
    return AMPC_OK;
}

bool ampc_tensor_requires_grad(const ampc_tensor *t) { return t && t->requires_grad; }
ampc_tensor *ampc_tensor_grad(const ampc_tensor *t) { return t ? t->grad : NULL; }

void ampc_tensor_clear_grad(ampc_tensor *t) {
    if (!t) return;
    if (t->grad != t->grad_slot) ampc_tensor_free(t->grad); /* arena gradients: a no-op, freed at step end */
    t->grad = NULL;                                         /* an optimizer's slot is kept for reuse */
}
