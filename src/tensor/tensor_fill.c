/* tensor_fill.c: everything that reads or writes a tensor's elements as a whole: fills (constant,
 * uniform, normal), copies in and out of host buffers and between contexts, contiguous copies and dtype
 * casts. The element work is the device's (kernels/dev_tensor.h: strided copies, fills); what comes from
 * or goes to host memory is staged through a device buffer on a device whose memory the host cannot
 * touch, and goes straight to the tensor on the CPU. */
#include "tensor.h"

#include <string.h>

ampci_strided ampci_tensor_strided(const ampc_tensor *t) {
    ampci_strided s = {.p = ampci_dev_ptr(t), .dt = t->dtype, .ndim = t->ndim};
    memcpy(s.shape, t->shape, sizeof s.shape);
    memcpy(s.stride, t->stride, sizeof s.stride);
    return s;
}

ampc_status ampci_tensor_gather(const ampc_tensor *t, void *dst, ampc_dtype dst_dtype) {
    return AMPCI_DEV(t->ctx, strided_copy, .t = ampci_tensor_strided(t), .buf = dst, .buf_dt = dst_dtype);
}

ampc_status ampci_tensor_scatter(ampc_tensor *t, const void *src, ampc_dtype src_dtype) {
    return AMPCI_DEV(t->ctx, strided_copy, .t = ampci_tensor_strided(t), .buf = (void *)src, .buf_dt = src_dtype,
                     .to_tensor = true);
}

static bool check_buffer(const char *fn, const ampc_tensor *t, const void *buf, ampc_dtype dt, const char *what) {
    if ((unsigned)dt >= AMPC_DTYPE_COUNT) {
        ampci_fail(AMPC_STATUS_DTYPE, "%s: %s dtype %d is not an ampc_dtype", fn, what, (int)dt);
        return false;
    }
    if (!buf && ampci_numel(t) > 0) {
        char a[128];
        ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s is NULL for %s", fn, what, ampc_tensor_describe(t, a, sizeof a));
        return false;
    }
    return true;
}

/* A device buffer for numel(t) elements of dt staged from or to host memory: the host buffer itself on the
 * CPU. */
static void *staging(const ampc_tensor *t, const void *host, ampc_dtype dt, const char *fn) {
    if (ampci_dev_is_host(t->ctx)) return (void *)host;
    return ampci_step_alloc(t->ctx, (size_t)ampci_numel(t) * ampc_dtype_size(dt) + 1, fn);
}

ampc_status ampc_tensor_copy_from(ampc_tensor *t, const void *src, ampc_dtype src_dtype) {
    static const char fn[] = "ampc_tensor_copy_from";
    if (ampci_tensor_usable(fn, "tensor", t) != AMPC_OK) return ampc_last_status();
    if (!check_buffer(fn, t, src, src_dtype, "src")) return ampc_last_status();
    void *buf = staging(t, src, src_dtype, fn);
    if (!buf) return ampc_last_status();
    if (buf != src) ampci_dev_copy_in(t->ctx, buf, src, (size_t)ampci_numel(t) * ampc_dtype_size(src_dtype));
    ampc_status s = ampci_tensor_scatter(t, buf, src_dtype);
    if (buf != src) ampci_step_free(t->ctx, buf);
    t->storage->version++;
    return s;
}

ampc_status ampc_tensor_copy_to(const ampc_tensor *t, void *dst, ampc_dtype dst_dtype) {
    static const char fn[] = "ampc_tensor_copy_to";
    if (ampci_tensor_usable(fn, "tensor", t) != AMPC_OK) return ampc_last_status();
    if (!check_buffer(fn, t, dst, dst_dtype, "dst")) return ampc_last_status();
    void *buf = staging(t, dst, dst_dtype, fn);
    ampc_status s = buf ? ampci_tensor_gather(t, buf, dst_dtype) : ampc_last_status();
    if (buf == dst) ampci_sync_count(t->ctx, AMPC_SYNC_READ);
    else if (buf) {
        if (s == AMPC_OK)
            ampci_sync_read(t->ctx, AMPC_SYNC_READ, dst, buf, (size_t)ampci_numel(t) * ampc_dtype_size(dst_dtype));
        ampci_step_free(t->ctx, buf);
    }
    return s;
}

ampc_status ampc_tensor_copy(ampc_tensor *dst, const ampc_tensor *src) {
    static const char fn[] = "ampc_tensor_copy";
    if (ampci_tensor_usable(fn, "dst", dst) != AMPC_OK || ampci_tensor_usable(fn, "src", src) != AMPC_OK)
        return ampc_last_status();
    char a[128], b[128];
    if (ampci_numel(dst) != ampci_numel(src))
        return ampci_fail(AMPC_STATUS_SHAPE, "%s: dst %s and src %s have different numbers of elements", fn,
                          ampc_tensor_describe(dst, a, sizeof a), ampc_tensor_describe(src, b, sizeof b));
    if (dst->ctx == src->ctx) { /* one device: a converting copy on it */
        ampc_tensor *c = ampci_copy_as(fn, src, dst->dtype);
        ampc_status s = c ? ampci_tensor_scatter(dst, ampci_dev_ptr(c), dst->dtype) : ampc_last_status();
        dst->storage->version++;
        return s;
    }
    /* two contexts, possibly two devices: through host memory in src's dtype */
    size_t bytes = (size_t)ampci_numel(src) * ampc_dtype_size(src->dtype);
    void *host = ampci_alloc(src->ctx, bytes, fn);
    ampc_status s = host ? ampc_tensor_copy_to(src, host, src->dtype) : ampc_last_status();
    if (s == AMPC_OK) s = ampc_tensor_copy_from(dst, host, src->dtype);
    ampci_free(src->ctx, host, bytes);
    return s;
}

/* ---- fills ---- */

ampc_status ampc_tensor_fill(ampc_tensor *t, double value) {
    if (ampci_tensor_usable("ampc_tensor_fill", "tensor", t) != AMPC_OK) return ampc_last_status();
    ampci_fill_args a = {.t = ampci_tensor_strided(t)};
    ampci_convert_generic(a.pattern, t->dtype, &value, AMPC_DTYPE_F64, 1);
    ampc_status s = t->ctx->dev->fill(t->ctx, &a);
    t->storage->version++;
    return s;
}

static ampc_status fill_random(const char *fn, ampc_tensor *t, bool normal, double a, double b) {
    if (ampci_tensor_usable(fn, "tensor", t) != AMPC_OK) return ampc_last_status();
    if (normal ? !(b >= 0) : !(a <= b))
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          normal ? "%s: std = %g; expected >= 0"
                                 : "%s: [%g, %g) is empty; "
                                   "expected lo <= hi",
                          fn, normal ? b : a, b);
    ampc_rng *rng = &t->ctx->rng;
    ampc_status s = AMPCI_DEV(t->ctx, fill_random, .t = ampci_tensor_strided(t), .rng = *rng, .normal = normal,
                              .a = (float)a, .b = (float)b);
    rng->counter += ((uint64_t)ampci_numel(t) + 3) / 4;
    t->storage->version++;
    return s;
}

ampc_status ampc_tensor_fill_uniform(ampc_tensor *t, double lo, double hi) {
    return fill_random("ampc_tensor_fill_uniform", t, false, lo, hi);
}

ampc_status ampc_tensor_fill_normal(ampc_tensor *t, double mean, double std) {
    return fill_random("ampc_tensor_fill_normal", t, true, mean, std);
}

/* ---- factories (arena) ---- */

ampc_tensor *ampc_tensor_zeros(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape) {
    return ampci_tensor_arena("ampc_tensor_zeros", ctx, dtype, ndim, shape);
}

ampc_tensor *ampc_tensor_full(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, double value) {
    ampc_tensor *t = ampci_tensor_arena("ampc_tensor_full", ctx, dtype, ndim, shape);
    return t && ampc_tensor_fill(t, value) == AMPC_OK ? t : NULL;
}

ampc_tensor *ampc_tensor_uniform(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, double lo,
                                 double hi) {
    ampc_tensor *t = ampci_tensor_arena("ampc_tensor_uniform", ctx, dtype, ndim, shape);
    return t && fill_random("ampc_tensor_uniform", t, false, lo, hi) == AMPC_OK ? t : NULL;
}

ampc_tensor *ampc_tensor_normal(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, double mean,
                                double std) {
    ampc_tensor *t = ampci_tensor_arena("ampc_tensor_normal", ctx, dtype, ndim, shape);
    return t && fill_random("ampc_tensor_normal", t, true, mean, std) == AMPC_OK ? t : NULL;
}

ampc_tensor *ampc_tensor_from_buffer(ampc_ctx *ctx, ampc_dtype dtype, int ndim, const int64_t *shape, const void *data,
                                     ampc_dtype data_dtype) {
    static const char fn[] = "ampc_tensor_from_buffer";
    ampc_tensor *t = ampci_tensor_arena(fn, ctx, dtype, ndim, shape);
    if (!t || !check_buffer(fn, t, data, data_dtype, "data")) return NULL;
    return ampc_tensor_copy_from(t, data, data_dtype) == AMPC_OK ? t : NULL;
}

/* ---- copies ---- */

ampc_tensor *ampci_copy_as(const char *fn, const ampc_tensor *t, ampc_dtype dtype) {
    ampc_tensor *c = ampci_tensor_arena_empty(fn, t->ctx, dtype, t->ndim, t->shape); /* gather writes all of it */
    return c && ampci_tensor_gather(t, ampci_dev_ptr(c), dtype) == AMPC_OK ? c : NULL;
}

ampc_tensor *ampc_tensor_detach_copy(const ampc_tensor *t) {
    if (ampci_tensor_usable("ampc_tensor_detach_copy", "input tensor", t) != AMPC_OK) return NULL;
    ampc_tensor *c = ampc_tensor_new(t->ctx, t->dtype, t->ndim, t->shape);
    if (c && ampci_tensor_gather(t, ampci_dev_ptr(c), t->dtype) != AMPC_OK) {
        ampc_tensor_free(c);
        return NULL;
    }
    return c;
}
