/* shape.c: the public, differentiable shape ops: reshape, view, transpose, permute, slice, contiguous,
 * cast and concat. The data movement is the tensor module's (tensor_view.c, tensor_fill.c); this file
 * adds the autograd record. Backward of a view re-shapes or re-strides the gradient; of a slice, places
 * it into zeros; of a cast, converts it back to the source dtype. */
#include "ops.h"


#include <stdio.h>
#include <string.h>

typedef struct view_saved {
    int dim0, dim1;                 /* transpose */
    int perm[AMPC_MAX_DIMS];        /* permute */
    int64_t start, end, step;       /* slice (normalised), dim in dim0 */
} view_saved;

/* Records `out` (a view or copy of `in`) when in requires grad. */
static ampc_tensor *record1(ampc_ctx *ctx, const char *op, ampc_tensor *out, const ampc_tensor *in, ampci_backward_fn bw,
                            const view_saved *sv) {
    if (!out || !ampci_wants_grad(ctx, &in, 1)) return out;
    ampci_node *n = ampci_record(ctx, op, out, &in, 1, bw, 0, sv ? sizeof *sv : 0);
    if (!n) return NULL;
    if (sv) memcpy(n->saved, sv, sizeof *sv);
    return out;
}

/* The gradient reaches the input unchanged in values: reshape, view, contiguous, cast. */
static ampc_status same_values_backward(ampci_node *n, const ampc_tensor *g) {
    ampc_tensor *in = n->in[0];
    /* a view, not a wrap of the data: it shares g's storage, so g's step buffer stays referenced */
    ampc_tensor *w = ampci_view(n->op, g, in->ndim, in->shape);
    return w ? ampci_grad_accumulate(in, w) : ampc_last_status();
}

static bool check_input(const char *op, const ampc_tensor *t) {
    if (t) return true;
    ampci_null_input(op, "input tensor");
    return false;
}

ampc_tensor *ampc_tensor_reshape(const ampc_tensor *t, int ndim, const int64_t *shape) {
    static const char op[] = "ampc_tensor_reshape";
    if (!check_input(op, t)) return NULL;
    return record1(t->ctx, op, ampci_reshape(op, t, ndim, shape), t, same_values_backward, NULL);
}

ampc_tensor *ampc_tensor_view(const ampc_tensor *t, int ndim, const int64_t *shape) {
    static const char op[] = "ampc_tensor_view";
    if (!check_input(op, t)) return NULL;
    return record1(t->ctx, op, ampci_view(op, t, ndim, shape), t, same_values_backward, NULL);
}

ampc_tensor *ampc_tensor_contiguous(const ampc_tensor *t) {
    static const char op[] = "ampc_tensor_contiguous";
    if (!check_input(op, t)) return NULL;
    return record1(t->ctx, op, ampci_copy_as(op, t, t->dtype), t, same_values_backward, NULL);
}

ampc_tensor *ampc_tensor_cast(const ampc_tensor *t, ampc_dtype dtype) {
    static const char op[] = "ampc_tensor_cast";
    if (!check_input(op, t)) return NULL;
    if ((unsigned)dtype >= AMPC_DTYPE_COUNT)
        return ampci_fail_null(AMPC_STATUS_DTYPE, "%s: dtype %d is not an ampc_dtype", op, (int)dtype);
    if (t->requires_grad && !ampc_dtype_is_float(dtype))
        return ampci_fail_null(AMPC_STATUS_DTYPE, "%s: cannot cast a tensor that requires grad to %s (no gradient "
                               "flows through integers)", op, ampc_dtype_name(dtype));
    ampc_tensor *c = ampci_copy_as(op, t, dtype);
    if (c && !ampci_check_output(t->ctx, c)) return NULL;   /* e.g. F32 -> F16 overflow in anomaly mode */
    return record1(t->ctx, op, c, t, same_values_backward, NULL);
}

/* Contiguous copy of a re-strided view of g, accumulated into in. */
static ampc_status accumulate_copy(ampci_node *n, const ampc_tensor *view) {
    ampc_tensor *c = view ? ampci_copy_as(n->op, view, view->dtype) : NULL;
    return c ? ampci_grad_accumulate(n->in[0], c) : ampc_last_status();
}

static ampc_status transpose_backward(ampci_node *n, const ampc_tensor *g) {
    const view_saved *sv = n->saved;
    return accumulate_copy(n, ampci_transpose(n->op, g, sv->dim0, sv->dim1));
}

ampc_tensor *ampc_tensor_transpose(const ampc_tensor *t, int dim0, int dim1) {
    static const char op[] = "ampc_tensor_transpose";
    if (!check_input(op, t)) return NULL;
    view_saved sv = {.dim0 = dim0, .dim1 = dim1};
    return record1(t->ctx, op, ampci_transpose(op, t, dim0, dim1), t, transpose_backward, &sv);
}

static ampc_status permute_backward(ampci_node *n, const ampc_tensor *g) {
    const view_saved *sv = n->saved;
    int inv[AMPC_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inv[sv->perm[i]] = i;
    return accumulate_copy(n, ampci_permute(n->op, g, inv));
}

ampc_tensor *ampc_tensor_permute(const ampc_tensor *t, const int *perm) {
    static const char op[] = "ampc_tensor_permute";
    if (!check_input(op, t)) return NULL;
    ampc_tensor *out = ampci_permute(op, t, perm);
    view_saved sv = {0};
    for (int i = 0; out && i < t->ndim; i++) sv.perm[i] = perm[i] < 0 ? perm[i] + t->ndim : perm[i];
    return record1(t->ctx, op, out, t, permute_backward, &sv);
}

static ampc_status slice_backward(ampci_node *n, const ampc_tensor *g) {
    const view_saved *sv = n->saved;
    ampc_tensor *in = n->in[0];
    ampc_tensor *z = ampci_tensor_arena(n->op, n->ctx, g->dtype, in->ndim, in->shape);
    ampc_tensor *part = z ? ampci_slice(n->op, z, sv->dim0, sv->start, sv->end, sv->step) : NULL;
    if (!part) return ampc_last_status();
    ampci_tensor_scatter(part, ampci_tensor_ptr(g), g->dtype);
    return ampci_grad_accumulate(in, z);
}

ampc_tensor *ampc_tensor_slice(const ampc_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    static const char op[] = "ampc_tensor_slice";
    if (!check_input(op, t)) return NULL;
    ampc_tensor *out = ampci_slice(op, t, dim, start, end, step);
    if (!out) return NULL;
    /* the same normalisation as ampci_slice, so the backward cuts the same window */
    int d = dim < 0 ? dim + t->ndim : dim;
    int64_t ext = t->shape[d];
    view_saved sv = {.dim0 = d, .start = start < 0 ? start + ext : start, .end = end < 0 ? end + ext : end, .step = step};
    if (sv.end > ext) sv.end = ext;
    return record1(t->ctx, op, out, t, slice_backward, &sv);
}

/* ---- concat ---- */

typedef struct concat_saved {
    int dim;
} concat_saved;

static ampc_status concat_backward(ampci_node *n, const ampc_tensor *g) {
    const concat_saved *sv = n->saved;
    int64_t at = 0;
    for (int i = 0; i < n->nin; i++) {
        int64_t len = n->in[i]->shape[sv->dim];
        if (ampci_input_needs_grad(n, i)) {
            ampc_tensor *part = ampci_slice(n->op, g, sv->dim, at, at + len, 1);
            ampc_tensor *c = part ? ampci_copy_as(n->op, part, g->dtype) : NULL;
            ampc_status s = c ? ampci_grad_accumulate(n->in[i], c) : ampc_last_status();
            if (s != AMPC_OK) return s;
        }
        at += len;
    }
    return AMPC_OK;
}

static bool concat_check(ampc_ctx *ctx, const char *op, const ampc_tensor *const *ts, int n, int dim, int *d,
                         int64_t *total) {
    if (!ts || n < 1)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %d tensors; expected at least 1", op, ts ? n : 0), false;
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "tensors[%d]", i);
        if (!ampci_op_input(ctx, op, ts[i], what)) return false;
    }
    if ((*d = ampci_wrap_dim(op, ts[0], dim)) < 0) return false;
    *total = 0;
    for (int i = 0; i < n; i++) {
        const ampc_tensor *t = ts[i];
        bool ok = t->ndim == ts[0]->ndim && t->dtype == ts[0]->dtype;
        for (int k = 0; ok && k < t->ndim; k++) ok = k == *d || t->shape[k] == ts[0]->shape[k];
        if (!ok) {
            char a[128], b[128];
            return ampci_fail(AMPC_STATUS_SHAPE, "%s: tensors[%d] %s does not match tensors[0] %s outside dim %d (or "
                              "its dtype differs)", op, i, ampc_tensor_describe(t, a, sizeof a),
                              ampc_tensor_describe(ts[0], b, sizeof b), dim), false;
        }
        *total += t->shape[*d];
    }
    return true;
}

ampc_tensor *ampc_concat(ampc_ctx *ctx, const ampc_tensor *const *inputs, int n, int dim) {
    static const char op[] = "ampc_concat";
    int d;
    int64_t total;
    /* autocast may replace inputs by casts: work on a copy of the list */
    const ampc_tensor **tensors = ctx && inputs && n > 0 ? ampci_arena_alloc(ctx, (size_t)n * sizeof *tensors, op) : NULL;
    if (tensors) {
        memcpy(tensors, inputs, (size_t)n * sizeof *tensors);
        if (!ampci_op_enter(ctx, AMPCI_OP_CONCAT, tensors, n)) return NULL;
    }
    if (!concat_check(ctx, op, tensors ? tensors : inputs, n, dim, &d, &total)) return NULL;
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, tensors[0]->shape, sizeof shape);
    shape[d] = total;
    ampc_tensor *out = ampci_tensor_arena(op, ctx, tensors[0]->dtype, tensors[0]->ndim, shape);
    int64_t at = 0;
    for (int i = 0; out && i < n; i++) {
        const ampc_tensor *t = tensors[i];
        ampc_tensor *part = ampci_slice(op, out, d, at, at + t->shape[d], 1);
        ampc_tensor *c = part ? ampci_copy_as(op, t, t->dtype) : NULL;
        if (!c) return NULL;
        ampci_tensor_scatter(part, ampci_tensor_ptr(c), t->dtype);
        at += t->shape[d];
    }
    if (out && ampci_wants_grad(ctx, tensors, n)) {
        ampci_node *node = ampci_record(ctx, op, out, tensors, n, concat_backward, 0, sizeof(concat_saved));
        if (!node) return NULL;
        ((concat_saved *)node->saved)->dim = d;
    }
    return out;
}
