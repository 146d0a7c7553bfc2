/* tensor_view.c: shape changes that share storage: reshape (a view when the strides allow, a copy
 * otherwise), view (never copies), transpose, permute and slice. These are the primitives; the public
 * functions in src/ops/shape.c add the autograd record. The view test is PyTorch's
 * computeStride: a reshape is a view iff it only splits or merges dims that are laid out as one
 * contiguous chunk in memory. */
#include "tensor.h"

#include <stdio.h>

/* Resolves one -1 extent and checks the element count. Returns false with the error recorded. */
static bool resolve_shape(const char *fn, const ampc_tensor *t, int ndim, const int64_t *shape, int64_t *out) {
    char a[128], b[96];
    if (ndim < 0 || ndim > AMPC_MAX_DIMS || (ndim > 0 && !shape)) {
        ampci_fail(AMPC_STATUS_SHAPE, "%s: %d dims%s; expected 0 to %d", fn, ndim,
                   ndim > 0 && !shape ? " with a NULL shape" : "", AMPC_MAX_DIMS);
        return false;
    }
    int infer = -1;
    int64_t known = 1, numel = ampci_numel(t);
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer < 0) {
            infer = i;
            continue;
        }
        if (shape[i] < 0 || __builtin_mul_overflow(known, shape[i], &known)) {
            ampci_fail(AMPC_STATUS_SHAPE, "%s: target shape %s is invalid (one extent may be -1, the rest >= 0)", fn,
                       ampci_shape_str(b, sizeof b, ndim, shape));
            return false;
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known != 0) {
            ampci_fail(AMPC_STATUS_SHAPE, "%s: cannot infer the -1 extent of %s from %s (%lld elements)", fn,
                       ampci_shape_str(b, sizeof b, ndim, shape), ampc_tensor_describe(t, a, sizeof a),
                       (long long)numel);
            return false;
        }
        out[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        ampci_fail(AMPC_STATUS_SHAPE, "%s: cannot reshape %s (%lld elements) to %s (%lld elements)", fn,
                   ampc_tensor_describe(t, a, sizeof a), (long long)numel, ampci_shape_str(b, sizeof b, ndim, shape),
                   (long long)known);
        return false;
    }
    return true;
}

/* Strides for viewing t as (ndim, shape) without a copy; false when impossible. */
static bool view_strides(const ampc_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
    if (t->ndim == 0 || ampci_numel(t) == 0) {
        ampci_contiguous_strides(ndim, shape, stride);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = t->stride[t->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        bool chunk_ends = d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
            stride[view_d] = view_numel * chunk_base;
            view_numel *= shape[view_d];
            view_d--;
        }
        if (view_numel != tensor_numel) return false;
        if (d > 0) {
            chunk_base = t->stride[d - 1];
            tensor_numel = view_numel = 1;
        }
    }
    return view_d == -1;
}

static ampc_tensor *make_view(const char *fn, const ampc_tensor *t, int ndim, const int64_t *shape,
                              const int64_t *stride) {
    ampc_tensor *v = ampci_tensor_view_of(fn, t);
    if (!v) return NULL;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) v->shape[i] = shape[i], v->stride[i] = stride[i];
    return v;
}

ampc_tensor *ampci_view(const char *fn, const ampc_tensor *t, int ndim, const int64_t *shape) {
    int64_t s[AMPC_MAX_DIMS], st[AMPC_MAX_DIMS];
    if (!resolve_shape(fn, t, ndim, shape, s)) return NULL;
    if (!view_strides(t, ndim, s, st)) {
        char a[128], b[96];
        return ampci_fail_null(AMPC_STATUS_SHAPE,
                               "%s: %s cannot be viewed as %s without a copy; use ampc_tensor_reshape "
                               "or ampc_tensor_contiguous first",
                               fn, ampc_tensor_describe(t, a, sizeof a), ampci_shape_str(b, sizeof b, ndim, s));
    }
    return make_view(fn, t, ndim, s, st);
}

ampc_tensor *ampci_reshape(const char *fn, const ampc_tensor *t, int ndim, const int64_t *shape) {
    int64_t s[AMPC_MAX_DIMS], st[AMPC_MAX_DIMS];
    if (!resolve_shape(fn, t, ndim, shape, s)) return NULL;
    if (view_strides(t, ndim, s, st)) return make_view(fn, t, ndim, s, st);
    ampc_tensor *c = ampci_copy_as(fn, t, t->dtype);
    if (!c) return NULL;
    c->ndim = ndim;
    for (int i = 0; i < ndim; i++) c->shape[i] = s[i];
    ampci_contiguous_strides(ndim, s, c->stride);
    return c;
}

ampc_tensor *ampci_transpose(const char *fn, const ampc_tensor *t, int dim0, int dim1) {
    int a = ampci_wrap_dim(fn, t, dim0), b = a < 0 ? -1 : ampci_wrap_dim(fn, t, dim1);
    if (b < 0) return NULL;
    ampc_tensor *v = ampci_tensor_view_of(fn, t);
    if (!v) return NULL;
    v->shape[a] = t->shape[b], v->shape[b] = t->shape[a];
    v->stride[a] = t->stride[b], v->stride[b] = t->stride[a];
    return v;
}

ampc_tensor *ampci_permute(const char *fn, const ampc_tensor *t, const int *perm) {
    if (!perm && t->ndim > 0) return ampci_fail_null(AMPC_STATUS_INVALID_ARG, "%s: perm is NULL", fn);
    int p[AMPC_MAX_DIMS];
    bool seen[AMPC_MAX_DIMS] = {false};
    for (int i = 0; i < t->ndim; i++) {
        int d = perm[i] < 0 ? perm[i] + t->ndim : perm[i];
        if (d < 0 || d >= t->ndim || seen[d]) {
            char a[128];
            return ampci_fail_null(AMPC_STATUS_SHAPE, "%s: perm[%d] = %d is %s for %s; expected a permutation of 0..%d",
                                   fn, i, perm[i], d >= 0 && d < t->ndim ? "repeated" : "out of range",
                                   ampc_tensor_describe(t, a, sizeof a), t->ndim - 1);
        }
        seen[d] = true;
        p[i] = d;
    }
    ampc_tensor *v = ampci_tensor_view_of(fn, t);
    if (!v) return NULL;
    for (int i = 0; i < t->ndim; i++) v->shape[i] = t->shape[p[i]], v->stride[i] = t->stride[p[i]];
    return v;
}

ampc_tensor *ampci_slice(const char *fn, const ampc_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    int d = ampci_wrap_dim(fn, t, dim);
    if (d < 0) return NULL;
    int64_t n = t->shape[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (end > n) end = n;
    if (step < 1 || start < 0 || start > n || end < start) {
        char a[128];
        return ampci_fail_null(AMPC_STATUS_SHAPE,
                               "%s: slice [%lld:%lld:%lld] of dim %d is invalid for %s "
                               "(expected 0 <= start <= end, start <= %lld, step >= 1)",
                               fn, (long long)start, (long long)end, (long long)step, dim,
                               ampc_tensor_describe(t, a, sizeof a), (long long)n);
    }
    ampc_tensor *v = ampci_tensor_view_of(fn, t);
    if (!v) return NULL;
    v->offset += start * t->stride[d];
    v->shape[d] = (end - start + step - 1) / step;
    v->stride[d] = t->stride[d] * step;
    return v;
}
