/* autograd.h: the tape and anomaly mode. Each recorded op leaves a node {backward function, inputs,
 * saved data}; the tape is a list of nodes, newest first, living in the step arena. Backward walks it
 * once from newest to oldest (creation order is a topological order), so no recursion and no sorting
 * are needed. Anomaly mode checks what the ops and their backward functions produce. */
#ifndef AMPC_AUTOGRAD_H
#define AMPC_AUTOGRAD_H

#include "../tensor/tensor.h"

typedef struct ampci_node ampci_node;

/* Computes the gradients of the node's inputs from gout (the gradient of n->out: contiguous, out's
 * shape and dtype) and hands each to ampci_grad_accumulate. */
typedef ampc_status (*ampci_backward_fn)(ampci_node *n, const ampc_tensor *gout);

#define AMPCI_SAVES_OUT (1u << 31) /* saved_mask bit: backward reads the output */

struct ampci_node {
    const char *op;
    ampci_backward_fn backward;
    ampc_ctx *ctx;
    ampc_tensor *out;
    ampc_tensor **in; /* nin inputs; NULL entries allowed (an absent bias) */
    int nin;
    unsigned saved_mask;  /* bit i: backward reads in[i] (its version is checked) */
    uint64_t *in_version; /* versions of the inputs when the op ran */
    uint64_t out_version;
    ampc_tensor *grad;  /* accumulated gradient of out (never modified in place) */
    void *saved;        /* op-specific data, `saved_size` bytes in the arena, zeroed */
    ampci_node *prev;   /* older node on the tape */
    int32_t stats_site; /* range statistics: the site of out plus one (0: none; -(s + 1): a weight cast whose
                         * parameter gradient belongs to site s) */
    bool marked, released;
};

/* True when grad mode is on and one of the inputs requires grad: the op must then record. */
AMPCI_HIDDEN bool ampci_wants_grad(const ampc_ctx *ctx, const ampc_tensor *const *in, int nin);
/* Records `out` as made by `op` from in[0..nin). NULL on OOM (the op then fails). */
AMPCI_HIDDEN ampci_node *ampci_record(ampc_ctx *ctx, const char *op, ampc_tensor *out, const ampc_tensor *const *in,
                                      int nin, ampci_backward_fn backward, unsigned saved_mask, size_t saved_size);
/* in[i] of a node exists and needs a gradient. */
AMPCI_HIDDEN bool ampci_input_needs_grad(const ampci_node *n, int i);
/* Adds g (contiguous, t's shape, any dtype) to t's gradient, in t's dtype. */
AMPCI_HIDDEN ampc_status ampci_grad_accumulate(ampc_tensor *t, const ampc_tensor *g);
/* A gradient g (contiguous) for a window of op output t: window(arg, whole) is the view of a tensor shaped
 * like t that g covers. When t's pending gradient is a buffer only this walk holds (the in-place case of
 * ampci_grad_accumulate), g is added into its window there, in F32, rounded once to t's dtype (the sums
 * ampci_grad_accumulate of g placed in zeros would form, but the elements outside the window are not
 * touched) and *done is set; otherwise nothing happens and the caller accumulates a whole gradient. */
typedef ampc_tensor *ampci_window_fn(const void *arg, ampc_tensor *whole);
AMPCI_HIDDEN ampc_status ampci_grad_accumulate_window(ampc_tensor *t, const ampc_tensor *g, ampci_window_fn *window,
                                                      const void *arg, bool *done);
/* The dtype in which a backward may hand t a contribution it computes in F32, for the same result: t's
 * own where ampci_grad_accumulate would round the F32 values to it at once (the first contribution to an
 * op output or to a leaf's gradient this step), so the producer can round on its way out; F32 otherwise,
 * and in anomaly mode, which checks the F32 values. */
AMPCI_HIDDEN ampc_dtype ampci_grad_dtype(const ampc_tensor *t);

/* ---- the backward walk's events, each with its listener list (several subscribers, run in the order
 * they were added) ----
 * grad_ready (DDP's reducer): during ampc_backward, fn(arg, leaf) runs for every leaf that requires grad as
 * soon as the last node reading it has run its backward (its gradient is then final for this walk; it
 * may be absent when no gradient reached it), and fn(arg, NULL) after every node. Leaves no node of the
 * walk reads are not reported.
 * grad_seen (the doctor's range statistics): fn(arg, n, t, g) with the gradient g of node n's output
 * (t == n->out) before n's backward runs, for nodes with a statistics site, and with each contribution g
 * that n's backward hands to a leaf t that requires grad. */
typedef void ampci_grad_ready_fn(void *arg, ampc_tensor *leaf);
typedef void ampci_grad_seen_fn(void *arg, const ampci_node *n, const ampc_tensor *t, const ampc_tensor *g);
AMPCI_HIDDEN ampc_status ampci_autograd_on_grad_ready(ampc_ctx *ctx, ampci_grad_ready_fn *fn, void *arg);
AMPCI_HIDDEN bool ampci_autograd_off_grad_ready(ampc_ctx *ctx, ampci_grad_ready_fn *fn, void *arg);
AMPCI_HIDDEN ampc_status ampci_autograd_on_grad_seen(ampc_ctx *ctx, ampci_grad_seen_fn *fn, void *arg);
AMPCI_HIDDEN bool ampci_autograd_off_grad_seen(ampc_ctx *ctx, ampci_grad_seen_fn *fn, void *arg);

/* Step end (the context assembly calls it): the tape lives in the arena, so it is simply forgotten. */
AMPCI_HIDDEN void ampci_autograd_step_end(ampc_ctx *ctx);

/* ---- anomaly mode (anomaly.c) ---- */
/* The op now running and its inputs (after autocast), named by an anomaly report. op is the op's short
 * name ("linear"); the report prints it as ampc_<op>. */
AMPCI_HIDDEN void ampci_anomaly_op(ampc_ctx *ctx, const char *op, const ampc_tensor *const *in, int n);
/* When anomaly mode is on: false (error recorded) if t, a contiguous op output, holds a non-finite value. */
AMPCI_HIDDEN bool ampci_check_output(ampc_ctx *ctx, const ampc_tensor *t);
/* ... and for a gradient g handed to `input` by the backward of node op `op`. */
AMPCI_HIDDEN bool ampci_check_grad(ampc_ctx *ctx, const char *op, const ampc_tensor *input, const ampc_tensor *g);

#endif
