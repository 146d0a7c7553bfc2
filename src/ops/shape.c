/* shape.c: the public, differentiable shape ops: reshape, view, transpose, permute, slice, contiguous,
 * cast and concat. The data movement is the tensor module's (tensor_view.c, tensor_fill.c); this file
 * adds the autograd record. Backward of a view re-shapes or re-strides the gradient; of a slice, places
 * it into zeros; of a cast, converts it back to the source dtype. */
#include "ops.h"

#include <stdio.h>
#include <string.h>

typedef struct view_saved {
    int dim0, dim1;           /* transpose */
    int perm[AMPC_MAX_DIMS];  /* permute */
    int64_t start, end, step; /* slice (normalised), dim in dim0 */
} view_saved;

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

/* The shape ops have no autocast id and take any dtype, so they skip ampci_op_begin (their check is
 * check_input) but close with the epilogue like every op: out, a view or copy of t, is recorded when t
 * requires grad, and a copy is handed to model code's frame (a view shares t's storage: it is not). */
static ampc_tensor *shape_end(const ampci_op_desc *d, const ampc_tensor *t, ampc_tensor *out, const void *saved,
                              bool internal) {
    ampci_op_call c = {.op = d, .ctx = t->ctx, .in = {t}, .saves = d->saves, .internal = internal};
    return ampci_op_end(&c, out, saved);
}

/* A shape op's descriptor: the output moves or copies values exactly (no anomaly check). */
#define SHAPE_OP(name, bw, size)                                                                                       \
    { "ampc_tensor_" name, AMPCI_OP_COUNT, 1, {"input tensor"}, .exact = true, .backward = bw, .saved_size = size }

ampc_tensor *ampc_tensor_reshape(const ampc_tensor *t, int ndim, const int64_t *shape) {
    static const ampci_op_desc d = SHAPE_OP("reshape", same_values_backward, 0);
    if (!check_input(d.name, t)) return NULL;
    return shape_end(&d, t, ampci_reshape(d.name, t, ndim, shape), NULL, false);
}

ampc_tensor *ampc_tensor_view(const ampc_tensor *t, int ndim, const int64_t *shape) {
    static const ampci_op_desc d = SHAPE_OP("view", same_values_backward, 0);
    if (!check_input(d.name, t)) return NULL;
    return shape_end(&d, t, ampci_view(d.name, t, ndim, shape), NULL, false);
}

ampc_tensor *ampc_tensor_contiguous(const ampc_tensor *t) {
    static const ampci_op_desc d = SHAPE_OP("contiguous", same_values_backward, 0);
    if (!check_input(d.name, t)) return NULL;
    return shape_end(&d, t, ampci_copy_as(d.name, t, t->dtype), NULL, false);
}

/* A cast can overflow (F32 -> F16): checked in anomaly mode. */
static const ampci_op_desc cast_op = {
    "ampc_tensor_cast", AMPCI_OP_COUNT, 1, {"input tensor"}, .backward = same_values_backward};

static ampc_tensor *cast(const ampc_tensor *t, ampc_dtype dtype, bool internal) {
    const char *op = cast_op.name;
    if (!check_input(op, t)) return NULL;
    if ((unsigned)dtype >= AMPC_DTYPE_COUNT)
        return ampci_fail_null(AMPC_STATUS_DTYPE, "%s: dtype %d is not an ampc_dtype", op, (int)dtype);
    if (t->requires_grad && !ampc_dtype_is_float(dtype))
        return ampci_fail_null(AMPC_STATUS_DTYPE,
                               "%s: cannot cast a tensor that requires grad to %s (no gradient "
                               "flows through integers)",
                               op, ampc_dtype_name(dtype));
    return shape_end(&cast_op, t, ampci_copy_as(op, t, dtype), NULL, internal);
}

ampc_tensor *ampc_tensor_cast(const ampc_tensor *t, ampc_dtype dtype) { return cast(t, dtype, false); }
ampc_tensor *ampci_op_cast(const ampc_tensor *t, ampc_dtype dtype) { return cast(t, dtype, true); }

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
    static const ampci_op_desc d = SHAPE_OP("transpose", transpose_backward, sizeof(view_saved));
    if (!check_input(d.name, t)) return NULL;
    return shape_end(&d, t, ampci_transpose(d.name, t, dim0, dim1), &(view_saved){.dim0 = dim0, .dim1 = dim1}, false);
}

static ampc_status permute_backward(ampci_node *n, const ampc_tensor *g) {
    const view_saved *sv = n->saved;
    int inv[AMPC_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) inv[sv->perm[i]] = i;
    return accumulate_copy(n, ampci_permute(n->op, g, inv));
}

ampc_tensor *ampc_tensor_permute(const ampc_tensor *t, const int *perm) {
    static const ampci_op_desc d = SHAPE_OP("permute", permute_backward, sizeof(view_saved));
    if (!check_input(d.name, t)) return NULL;
    ampc_tensor *out = ampci_permute(d.name, t, perm);
    view_saved sv = {0};
    for (int i = 0; out && i < t->ndim; i++) sv.perm[i] = perm[i] < 0 ? perm[i] + t->ndim : perm[i];
    return shape_end(&d, t, out, &sv, false);
}

/* The window a slice cut (view_saved) of a tensor shaped like its input. */
static ampc_tensor *slice_window(const void *arg, ampc_tensor *whole) {
    const view_saved *sv = arg;
    return ampci_slice("slice", whole, sv->dim0, sv->start, sv->end, sv->step);
}

/* Into the input's pending gradient where it can take it in place (the other slices of a split, e.g. q, k
 * and v of one projection, then cost their own size, not the whole input's); else placed in zeros. */
static ampc_status slice_backward(ampci_node *n, const ampc_tensor *g) {
    const view_saved *sv = n->saved;
    ampc_tensor *in = n->in[0];
    bool done;
    ampc_status s = ampci_grad_accumulate_window(in, g, slice_window, sv, &done);
    if (s != AMPC_OK || done) return s;
    ampc_tensor *z = ampci_tensor_arena(n->op, n->ctx, g->dtype, in->ndim, in->shape);
    ampc_tensor *part = z ? ampci_slice(n->op, z, sv->dim0, sv->start, sv->end, sv->step) : NULL;
    if (!part || ampci_tensor_scatter(part, ampci_dev_ptr(g), g->dtype) != AMPC_OK) return ampc_last_status();
    return ampci_grad_accumulate(in, z);
}

ampc_tensor *ampc_tensor_slice(const ampc_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    static const ampci_op_desc d = SHAPE_OP("slice", slice_backward, sizeof(view_saved));
    if (!check_input(d.name, t)) return NULL;
    ampc_tensor *out = ampci_slice(d.name, t, dim, start, end, step);
    if (!out) return NULL;
    /* the same normalisation as ampci_slice, so the backward cuts the same window */
    int dm = dim < 0 ? dim + t->ndim : dim;
    int64_t ext = t->shape[dm];
    view_saved sv = {
        .dim0 = dm, .start = start < 0 ? start + ext : start, .end = end < 0 ? end + ext : end, .step = step};
    if (sv.end > ext) sv.end = ext;
    return shape_end(&d, t, out, &sv, false);
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
            return ampci_fail(AMPC_STATUS_SHAPE,
                              "%s: tensors[%d] %s does not match tensors[0] %s outside dim %d (or "
                              "its dtype differs)",
                              op, i, ampc_tensor_describe(t, a, sizeof a), ampc_tensor_describe(ts[0], b, sizeof b),
                              dim),
                   false;
        }
        *total += t->shape[*d];
    }
    return true;
}

/* Concat copies values exactly (mixed dtypes were cast by autocast's promote, or refused). */
static const ampci_op_desc concat_op = {"ampc_concat",
                                        AMPCI_OP_CONCAT,
                                        0,
                                        {NULL},
                                        .exact = true,
                                        .backward = concat_backward,
                                        .saved_size = sizeof(concat_saved)};

ampc_tensor *ampc_concat(ampc_ctx *ctx, const ampc_tensor *const *inputs, int n, int dim) {
    const char *op = concat_op.name;
    ampci_op_call c = {.op = &concat_op, .ctx = ctx, .n = n};
    if (ctx && inputs && n > 0) { /* autocast may replace inputs by casts: the call works on a copy */
        if (!(c.list = ampci_arena_alloc(ctx, (size_t)n * sizeof *c.list, op))) return NULL;
        memcpy(c.list, inputs, (size_t)n * sizeof *c.list);
        if (!ampci_op_begin(&c)) return NULL;
    }
    int d;
    int64_t total;
    if (!concat_check(ctx, op, c.list ? c.list : inputs, n, dim, &d, &total)) return NULL;
    const ampc_tensor **ts = c.list;
    int64_t shape[AMPC_MAX_DIMS];
    memcpy(shape, ts[0]->shape, sizeof shape);
    shape[d] = total;
    ampc_tensor *out = ampci_tensor_arena(op, ctx, ts[0]->dtype, ts[0]->ndim, shape);
    int64_t at = 0;
    for (int i = 0; out && i < n; i++) {
        ampc_tensor *part = ampci_slice(op, out, d, at, at + ts[i]->shape[d], 1);
        ampc_tensor *copy = part ? ampci_copy_as(op, ts[i], ts[i]->dtype) : NULL;
        if (!copy || ampci_tensor_scatter(part, ampci_dev_ptr(copy), ts[i]->dtype) != AMPC_OK) return NULL;
        at += ts[i]->shape[d];
    }
    return ampci_op_end(&c, out, &(concat_saved){d});
}
