/* tensor.c: creating and freeing tensors, shape validation, accessors. Owned tensors (ampc_tensor_new,
 * ampc_tensor_detach_copy) keep their storage on the heap with a reference count; every other tensor
 * lives in the context's step arena. An arena view of owned storage takes a reference and registers an
 * arena hook that drops it at step end, so freeing the base early never leaves a view dangling. */
#include "tensor.h"

#include "../numerics/numerics.h"

#include <stdio.h>
#include <string.h>

const char *ampci_shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < size) snprintf(buf + len, size - len, "]");
    return buf;
}

int64_t ampci_shape_numel(const char *fn, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > AMPC_MAX_DIMS)
        return ampci_fail(AMPC_STATUS_SHAPE, "%s: %d dims; expected 0 to %d", fn, ndim, AMPC_MAX_DIMS), -1;
    if (ndim > 0 && !shape) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: shape is NULL for %d dims", fn, ndim), -1;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        char b[96];
        if (shape[i] < 0)
            return ampci_fail(AMPC_STATUS_SHAPE, "%s: shape %s has extent %lld at dim %d; expected >= 0", fn,
                              ampci_shape_str(b, sizeof b, ndim, shape), (long long)shape[i], i),
                   -1;
        if (__builtin_mul_overflow(n, shape[i], &n) || n > ((int64_t)1 << 56))
            return ampci_fail(AMPC_STATUS_SHAPE, "%s: shape %s has too many elements (limit 2^56)", fn,
                              ampci_shape_str(b, sizeof b, ndim, shape)),
                   -1;
    }
    return n;
}

void ampci_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

static bool check_dtype(const char *fn, ampc_dtype dtype) {
    if ((unsigned)dtype < AMPC_DTYPE_COUNT) return true;
    ampci_fail(AMPC_STATUS_DTYPE, "%s: dtype %d is not an ampc_dtype (expected F32, F16, BF16, F64, I32, I64 or U8)",
               fn, (int)dtype);
    return false;
}

static void set_shape(ampc_tensor *t, ampc_dtype dtype, int ndim, const int64_t *shape) {
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    ampci_contiguous_strides(ndim, shape, t->stride);
    t->offset = 0;
}

/* Validates (ctx, dtype, shape) for `fn`; the storage size in bytes, or -1 with the error recorded. */
static int64_t storage_bytes(const char *fn, const ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape) {
    if (!ctx) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: ctx is NULL", fn), -1;
    if (!check_dtype(fn, dtype)) return -1;
    int64_t n = ampci_shape_numel(fn, ndim, shape);
    return n < 0 ? -1 : n * (int64_t)ampc_dtype_size(dtype);
}

/* Fills in a contiguous tensor t on storage s holding `data` (zeroed unless `empty`). */
static ampc_tensor *init_tensor(ampc_tensor *t, ampci_storage *s, ampc_ctx *ctx, unsigned char *data, size_t bytes,
                                bool owned, bool empty, ampc_dtype dtype, int ndim, const int64_t *shape) {
    if (!empty) ampci_dev_memset(ctx, data, 0, bytes);
    *s = (ampci_storage){.ctx = ctx,
                         .buft = ctx->dev_mem.buft,
                         .data = data,
                         .bytes = bytes,
                         .refs = owned,
                         .arena = !owned,
                         .version = 0};
    *t = (ampc_tensor){.ctx = ctx, .storage = s, .owned = owned, .live = AMPCI_TENSOR_LIVE};
    set_shape(t, dtype, ndim, shape);
    return t;
}

static ampc_tensor *arena_tensor(const char *fn, ampc_ctx *ctx, bool empty, ampc_dtype dtype, int ndim,
                                 const int64_t *shape) {
    int64_t bytes = storage_bytes(fn, ctx, dtype, ndim, shape);
    if (bytes < 0) return NULL;
    ampc_tensor *t = ampci_tensor_header(ctx, fn);
    ampci_storage *s = t ? ampci_arena_alloc(ctx, sizeof *s, fn) : NULL;
    unsigned char *data = s ? ampci_step_alloc(ctx, (size_t)bytes, fn) : NULL;
    return data ? init_tensor(t, s, ctx, data, (size_t)bytes, false, empty, dtype, ndim, shape) : NULL;
}

ampc_tensor *ampci_tensor_arena(const char *fn, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape) {
    return arena_tensor(fn, ctx, false, dtype, ndim, shape);
}

ampc_tensor *ampci_tensor_arena_empty(const char *fn, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape) {
    return arena_tensor(fn, ctx, true, dtype, ndim, shape);
}

ampc_tensor *ampci_tensor_wrap(const char *fn, ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape,
                               void *data) {
    int64_t bytes = storage_bytes(fn, ctx, dtype, ndim, shape);
    if (bytes < 0) return NULL;
    ampc_tensor *t = ampci_tensor_header(ctx, fn);
    ampci_storage *s = t ? ampci_arena_alloc(ctx, sizeof *s, fn) : NULL;
    if (!s) return NULL;
    *s = (ampci_storage){.ctx = ctx,
                         .buft = ctx->dev_mem.buft,
                         .data = data,
                         .bytes = (size_t)bytes,
                         .refs = 0,
                         .arena = true,
                         .version = 0};
    *t = (ampc_tensor){.ctx = ctx, .storage = s, .owned = false, .live = AMPCI_TENSOR_LIVE};
    set_shape(t, dtype, ndim, shape);
    return t;
}

void ampci_tensor_release(const ampc_tensor *t) {
    if (!t || !t->storage->arena || t->storage->released) return;
    t->storage->released = true;
    if (t->storage->saves == 0) ampci_step_free(t->ctx, t->storage->data);
}

void ampci_storage_unsave(ampci_storage *s) {
    if (s->arena && s->saves > 0 && --s->saves == 0 && s->released) ampci_step_free(s->ctx, s->data);
}

ampc_tensor *ampci_tensor_owned_view(const ampc_tensor *base, int64_t offset, int ndim, const int64_t *shape) {
    ampc_tensor *t = ampci_alloc(base->ctx, sizeof *t, "owned view");
    if (!t) return NULL;
    *t = (ampc_tensor){.ctx = base->ctx, .storage = base->storage, .owned = true, .live = AMPCI_TENSOR_LIVE};
    set_shape(t, base->dtype, ndim, shape);
    t->offset = base->offset + offset;
    base->storage->refs++;
    return t;
}

ampc_tensor *ampc_tensor_new(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape) {
    static const char fn[] = "ampc_tensor_new";
    int64_t bytes = storage_bytes(fn, ctx, dtype, ndim, shape);
    if (bytes < 0) return NULL;
    ampc_tensor *t = ampci_alloc(ctx, sizeof *t, fn);
    ampci_storage *s = t ? ampci_alloc(ctx, sizeof *s, fn) : NULL;
    unsigned char *data = s ? ampci_dev_alloc(ctx, (size_t)bytes, fn) : NULL;
    if (!data) {
        ampci_free(ctx, s, sizeof *s);
        ampci_free(ctx, t, sizeof *t);
        return NULL;
    }
    return init_tensor(t, s, ctx, data, (size_t)bytes, true, false, dtype, ndim, shape);
}

static void storage_unref(void *arg) {
    ampci_storage *s = arg;
    if (--s->refs > 0) return;
    ampc_ctx *ctx = s->ctx;
    ampci_dev_free(ctx, s->data, s->bytes);
    ampci_free(ctx, s, sizeof *s);
}

static void free_now(void *arg) {
    ampc_tensor *t = arg;
    ampc_ctx *ctx = t->ctx;
    for (int i = 0; i < ctx->tensor_freed.n; i++)
        ((ampci_freed_fn *)ctx->tensor_freed.at[i].fn)(ctx->tensor_freed.at[i].arg, t);
    if (t->grad != t->grad_slot) ampc_tensor_free(t->grad);
    ampc_tensor_free(t->grad_slot);
    storage_unref(t->storage);
    ampci_tensor_retire(ctx, t);
}

void ampc_tensor_free(ampc_tensor *t) {
    if (!t || !t->owned) return;
    t->live = 0, t->released_step = AMPCI_TENSOR_FREED; /* the user's handle is gone, whenever t is */
    /* The current step's tape still points at t (an input of a recorded op): free it when the step ends,
     * so a backward run after this call stays valid. */
    if (t->graph_step == t->ctx->step_id && ampci_arena_on_reset(t->ctx, free_now, t) == AMPC_OK) {
        t->graph_step = 0;
        return;
    }
    free_now(t);
}

ampc_tensor *ampci_tensor_view_of(const char *fn, const ampc_tensor *t) {
    ampc_tensor *v = ampci_tensor_header(t->ctx, fn);
    if (!v) return NULL;
    *v = *t;
    v->live = AMPCI_TENSOR_LIVE;
    v->owned = false;
    v->requires_grad = false; /* a bare view: src/ops/shape.c records it when it needs a graph */
    v->node = NULL;
    v->grad = NULL;
    if (!t->storage->arena) {
        /* Keep owned storage alive for as long as this view (until step end). */
        if (ampci_arena_on_reset(t->ctx, storage_unref, t->storage) != AMPC_OK) return NULL;
        t->storage->refs++;
    }
    return v;
}

int ampci_wrap_dim(const char *fn, const ampc_tensor *t, int dim) {
    int d = dim < 0 ? dim + t->ndim : dim;
    if (d < 0 || d >= t->ndim) {
        char b[128];
        ampci_fail(AMPC_STATUS_SHAPE, "%s: dim %d is out of range for %s (expected %d to %d)", fn, dim,
                   ampc_tensor_describe(t, b, sizeof b), -t->ndim, t->ndim - 1);
        return -1;
    }
    return d;
}

/* ---- accessors ---- */

ampc_dtype ampc_tensor_dtype(const ampc_tensor *t) { return t ? t->dtype : AMPC_DTYPE_F32; }
int ampc_tensor_ndim(const ampc_tensor *t) { return t ? t->ndim : 0; }
int64_t ampc_tensor_numel(const ampc_tensor *t) { return t ? ampci_numel(t) : 0; }
void *ampc_tensor_data(const ampc_tensor *t) {
    return ampci_tensor_usable("ampc_tensor_data", "tensor", t) == AMPC_OK ? ampci_dev_ptr(t) : NULL;
}
bool ampc_tensor_is_owned(const ampc_tensor *t) { return t && t->owned; }
uint64_t ampc_tensor_version(const ampc_tensor *t) { return t ? t->storage->version : 0; }
ampc_ctx *ampc_tensor_ctx(const ampc_tensor *t) { return t ? t->ctx : NULL; }

void ampc_tensor_bump_version(ampc_tensor *t) {
    if (t) t->storage->version++;
}

int64_t ampc_tensor_dim(const ampc_tensor *t, int dim) {
    if (!t) return 0;
    int d = dim < 0 ? dim + t->ndim : dim;
    return d >= 0 && d < t->ndim ? t->shape[d] : 0;
}

int64_t ampc_tensor_stride(const ampc_tensor *t, int dim) {
    if (!t) return 0;
    int d = dim < 0 ? dim + t->ndim : dim;
    return d >= 0 && d < t->ndim ? t->stride[d] : -1;
}

bool ampc_tensor_is_contiguous(const ampc_tensor *t) {
    if (!t) return false;
    if (ampci_numel(t) == 0) return true;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

char *ampc_tensor_describe(const ampc_tensor *t, char *buf, size_t size) {
    if (!buf || !size) return buf;
    if (!t) {
        snprintf(buf, size, "(null)");
        return buf;
    }
    char sh[96], st[96];
    ampci_shape_str(sh, sizeof sh, t->ndim, t->shape);
    if (ampc_tensor_is_contiguous(t)) snprintf(buf, size, "%s %s", sh, ampc_dtype_name(t->dtype));
    else
        snprintf(buf, size, "%s %s (strides %s)", sh, ampc_dtype_name(t->dtype),
                 ampci_shape_str(st, sizeof st, t->ndim, t->stride));
    return buf;
}

ampc_status ampc_tensor_set_name(ampc_tensor *t, const char *name) {
    if (!t || !name)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_tensor_set_name: tensor and name must not be NULL");
    size_t len = strlen(name);
    if (len >= sizeof t->name)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_tensor_set_name: name '%.40s...' has %zu characters; at most "
                          "%zu fit",
                          name, len, sizeof t->name - 1);
    memcpy(t->name, name, len + 1);
    return AMPC_OK;
}

const char *ampc_tensor_name(const ampc_tensor *t) { return t ? t->name : ""; }

ampc_tensor *ampc_tensor_detach(const ampc_tensor *t) {
    if (ampci_tensor_usable("ampc_tensor_detach", "input tensor", t) != AMPC_OK) return NULL;
    return ampci_tensor_view_of("ampc_tensor_detach", t); /* a fresh header: no node, no requires_grad */
}

/* ---- finiteness ---- */

int64_t ampci_tensor_first_nonfinite(const ampc_tensor *t, ampc_sync_point point) {
    ampc_ctx *ctx = t->ctx;
    int64_t *at = ampci_step_alloc(ctx, sizeof *at, "finiteness check"), index = -1;
    if (!at || AMPCI_DEV(ctx, first_nonfinite, .p = ampci_dev_ptr(t), .dt = t->dtype, .n = ampci_numel(t),
                         .index = at) != AMPC_OK)
        return -1; /* out of memory: the error is recorded, the check passes */
    ampci_sync_read(ctx, point, &index, at, sizeof index);
    ampci_step_free(ctx, at);
    return index;
}

bool ampc_all_finite(const ampc_tensor *t) {
    if (!t) return false;
    if (ampc_tensor_is_contiguous(t)) return ampci_tensor_first_nonfinite(t, AMPC_SYNC_READ) < 0;
    ampc_tensor *c = ampci_copy_as("ampc_all_finite", t, t->dtype);
    return c && ampci_tensor_first_nonfinite(c, AMPC_SYNC_READ) < 0;
}

/* ---- events ---- */

ampc_status ampci_tensor_on_absent(ampc_ctx *ctx, ampci_absent_fn *fn, void *arg) {
    return ampci_listeners_add(&ctx->storage_absent, "tensor absent-storage listener", (void (*)(void))fn, arg);
}
bool ampci_tensor_off_absent(ampc_ctx *ctx, ampci_absent_fn *fn, void *arg) {
    return ampci_listeners_remove(&ctx->storage_absent, (void (*)(void))fn, arg);
}
ampc_status ampci_tensor_on_free(ampc_ctx *ctx, ampci_freed_fn *fn, void *arg) {
    return ampci_listeners_add(&ctx->tensor_freed, "tensor free listener", (void (*)(void))fn, arg);
}
bool ampci_tensor_off_free(ampc_ctx *ctx, ampci_freed_fn *fn, void *arg) {
    return ampci_listeners_remove(&ctx->tensor_freed, (void (*)(void))fn, arg);
}

ampc_status ampci_tensor_present(const ampc_tensor *t) {
    ampci_storage *st = t->storage;
    const ampci_listeners *l = &t->ctx->storage_absent;
    for (int i = 0; st->absent && i < l->n; i++) {
        ampc_status s = ((ampci_absent_fn *)l->at[i].fn)(l->at[i].arg, st);
        if (s != AMPC_OK) return s;
    }
    if (!st->absent) return AMPC_OK;
    char b[128];
    return ampci_fail(AMPC_STATUS_STATE, "%s%s%s: its storage is absent (a sharded parameter) and nothing gathered it",
                      ampc_tensor_describe(t, b, sizeof b), t->name[0] ? " " : "", t->name);
}

/* ---- host mapping ---- */

void *ampci_host_map(ampc_ctx *ctx, void *dev, size_t bytes, unsigned mode, ampc_sync_point point, const char *what,
                     ampci_host_mapping *m) {
    *m = (ampci_host_mapping){.ctx = ctx, .host = dev, .dev = dev, .bytes = bytes, .mode = mode};
    if (ampci_dev_is_host(ctx)) return dev;
    m->copy = true;
    if (!(m->host = ampci_alloc(ctx, bytes, what))) return NULL;
    if (mode & AMPCI_MAP_READ) ampci_sync_read(ctx, point, m->host, dev, bytes);
    return m->host;
}

void *ampci_tensor_host_map(const ampc_tensor *t, unsigned mode, ampc_sync_point point, const char *what,
                            ampci_host_mapping *m) {
    AMPCI_ASSERT(ampc_tensor_is_contiguous(t));
    return ampci_host_map(t->ctx, ampci_dev_ptr(t), (size_t)ampci_numel(t) * ampc_dtype_size(t->dtype), mode, point,
                          what, m);
}

void ampci_host_unmap(ampci_host_mapping *m) {
    if (!m->copy || !m->host) return;
    if (m->mode & AMPCI_MAP_WRITE) ampci_dev_copy_in(m->ctx, m->dev, m->host, m->bytes);
    ampci_free(m->ctx, m->host, m->bytes);
    m->host = NULL;
}
