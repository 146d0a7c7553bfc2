/* tensor_fill.c: everything that reads or writes a tensor's elements as a whole: fills (constant,
 * uniform, normal), copies in and out of user buffers, contiguous copies and dtype casts. All of them
 * walk the tensor as rows along its last dim (any strides), converting through the context's kernel
 * table, and split the rows over the context's threads; random fills draw element i of the row-major
 * order from counter-based RNG position i, so the bits do not depend on the thread count. */
#include "tensor.h"

#include "../kernels/kernels.h"

#include <string.h>

#define ROW_PIECE 256            /* elements per staging buffer for strided rows */
#define PARALLEL_ELEMS (1 << 15) /* elements per parallel chunk */

typedef void (*row_fn)(void *arg, unsigned char *row, int64_t len, int64_t stride, int64_t first);

typedef struct row_walk {
    const ampc_tensor *t;
    int64_t len; /* row length (last extent; 1 for 0-dim) */
    row_fn fn;
    void *arg;
} row_walk;

AMPCI_ROW_BODY(walk_rows, row_walk, w, begin, end, chunk) {
    const ampc_tensor *t = w->t;
    size_t es = ampc_dtype_size(t->dtype);
    int64_t inner = t->ndim ? t->stride[t->ndim - 1] : 1;
    for (int64_t r = begin; r < end; r++) {
        int64_t off = t->offset, rest = r;
        for (int d = t->ndim - 2; d >= 0; d--) {
            off += (rest % t->shape[d]) * t->stride[d];
            rest /= t->shape[d];
        }
        w->fn(w->arg, t->storage->data + (size_t)off * es, w->len, inner, r * w->len);
    }
}

/* Calls fn once per row, rows in parallel; a contiguous tensor is cut into flat pieces instead. */
static void for_each_row(const ampc_tensor *t, row_fn fn, void *arg) {
    int64_t numel = ampci_numel(t);
    if (numel == 0) return;
    if (ampc_tensor_is_contiguous(t)) {
        ampc_tensor flat = *t;
        int64_t len = numel < PARALLEL_ELEMS ? numel : PARALLEL_ELEMS, rows = (numel + len - 1) / len;
        /* rows of `len` elements; the last row may be shorter, so walk it by hand */
        row_walk w = {&flat, len, fn, arg};
        flat.ndim = 2, flat.shape[0] = rows - 1, flat.shape[1] = len, flat.stride[0] = len, flat.stride[1] = 1;
        ampc_parallel_for(t->ctx, rows - 1, 1, walk_rows, &w);
        int64_t done = (rows - 1) * len;
        fn(arg, ampci_tensor_ptr(t) + (size_t)done * ampc_dtype_size(t->dtype), numel - done, 1, done);
        return;
    }
    int64_t len = t->shape[t->ndim - 1], rows = numel / len;
    row_walk w = {t, len, fn, arg};
    int64_t grain = len >= PARALLEL_ELEMS ? 1 : PARALLEL_ELEMS / len;
    ampc_parallel_for(t->ctx, rows, grain, walk_rows, &w);
}

/* ---- converting copies between a tensor and a row-major buffer ---- */

typedef struct copy_rows {
    const ampc_tensor *t;
    unsigned char *buf; /* row-major buffer, buf_dtype */
    ampc_dtype buf_dtype;
    bool into_tensor;
} copy_rows;

/* One row of t (len elements, `stride` apart) <-> len contiguous elements of buf (buf_dtype). */
static void convert_row(const ampc_tensor *t, unsigned char *row, int64_t len, int64_t stride, unsigned char *buf,
                        ampc_dtype buf_dtype, bool into_tensor) {
    const struct ampc_kernels *k = t->ctx->kernels;
    ampc_dtype tdt = t->dtype;
    size_t es = ampc_dtype_size(tdt), bs = ampc_dtype_size(buf_dtype);
    if (stride == 1) {
        if (into_tensor) ampci_convert_with(k, row, tdt, buf, buf_dtype, (size_t)len);
        else ampci_convert_with(k, buf, buf_dtype, row, tdt, (size_t)len);
        return;
    }
    /* Strided row: stage pieces contiguously in the tensor's dtype, convert, then place. */
    unsigned char tmp[ROW_PIECE * 8];
    for (int64_t i = 0; i < len; i += ROW_PIECE) {
        int64_t m = len - i < ROW_PIECE ? len - i : ROW_PIECE;
        unsigned char *b = buf + (size_t)i * bs;
        if (into_tensor) {
            ampci_convert_with(k, tmp, tdt, b, buf_dtype, (size_t)m);
            for (int64_t e = 0; e < m; e++) memcpy(row + (size_t)((i + e) * stride) * es, tmp + (size_t)e * es, es);
        } else {
            for (int64_t e = 0; e < m; e++) memcpy(tmp + (size_t)e * es, row + (size_t)((i + e) * stride) * es, es);
            ampci_convert_with(k, b, buf_dtype, tmp, tdt, (size_t)m);
        }
    }
}

static void copy_row(void *vp, unsigned char *row, int64_t len, int64_t stride, int64_t first) {
    const copy_rows *j = vp;
    unsigned char *b = j->buf + (size_t)first * ampc_dtype_size(j->buf_dtype);
    convert_row(j->t, row, len, stride, b, j->buf_dtype, j->into_tensor);
}

void ampci_tensor_gather(const ampc_tensor *t, void *dst, ampc_dtype dst_dtype) {
    copy_rows j = {t, dst, dst_dtype, false};
    for_each_row(t, copy_row, &j);
}

void ampci_tensor_scatter(ampc_tensor *t, const void *src, ampc_dtype src_dtype) {
    copy_rows j = {t, (unsigned char *)src, src_dtype, true};
    for_each_row(t, copy_row, &j);
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

ampc_status ampc_tensor_copy_from(ampc_tensor *t, const void *src, ampc_dtype src_dtype) {
    static const char fn[] = "ampc_tensor_copy_from";
    if (!t) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: tensor is NULL", fn);
    if (!check_buffer(fn, t, src, src_dtype, "src")) return ampc_last_status();
    ampci_tensor_scatter(t, src, src_dtype);
    t->storage->version++;
    return AMPC_OK;
}

ampc_status ampc_tensor_copy_to(const ampc_tensor *t, void *dst, ampc_dtype dst_dtype) {
    static const char fn[] = "ampc_tensor_copy_to";
    if (!t) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: tensor is NULL", fn);
    if (!check_buffer(fn, t, dst, dst_dtype, "dst")) return ampc_last_status();
    ampci_tensor_gather(t, dst, dst_dtype);
    return AMPC_OK;
}

/* ---- fills ---- */

typedef struct fill_rows {
    size_t es;
    unsigned char pattern[8]; /* the value, already converted to the tensor's dtype */
} fill_rows;

static void fill_row(void *vp, unsigned char *row, int64_t len, int64_t stride, int64_t first) {
    (void)first;
    const fill_rows *j = vp;
    for (int64_t i = 0; i < len; i++) memcpy(row + (size_t)(i * stride) * j->es, j->pattern, j->es);
}

ampc_status ampc_tensor_fill(ampc_tensor *t, double value) {
    if (!t) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_tensor_fill: tensor is NULL");
    fill_rows j = {ampc_dtype_size(t->dtype), {0}};
    ampci_convert_generic(j.pattern, t->dtype, &value, AMPC_DTYPE_F64, 1);
    for_each_row(t, fill_row, &j);
    t->storage->version++;
    return AMPC_OK;
}

typedef struct random_rows {
    const ampc_tensor *t;
    ampc_rng rng;
    bool normal;
    float a, b;
} random_rows;

static void random_row(void *vp, unsigned char *row, int64_t len, int64_t stride, int64_t first) {
    const random_rows *j = vp;
    float vals[ROW_PIECE];
    size_t es = ampc_dtype_size(j->t->dtype);
    for (int64_t i = 0; i < len; i += ROW_PIECE) {
        int64_t m = len - i < ROW_PIECE ? len - i : ROW_PIECE;
        if (j->normal) ampci_rng_normal_range(&j->rng, vals, first + i, first + i + m, j->a, j->b);
        else ampci_rng_uniform_range(&j->rng, vals, first + i, first + i + m, j->a, j->b);
        convert_row(j->t, row + (size_t)(i * stride) * es, m, stride, (unsigned char *)vals, AMPC_DTYPE_F32, true);
    }
}

static ampc_status fill_random(const char *fn, ampc_tensor *t, bool normal, double a, double b) {
    if (!t) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: tensor is NULL", fn);
    if (normal ? !(b >= 0) : !(a <= b))
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          normal ? "%s: std = %g; expected >= 0"
                                 : "%s: [%g, %g) is empty; "
                                   "expected lo <= hi",
                          fn, normal ? b : a, b);
    ampc_rng *rng = &t->ctx->rng;
    random_rows j = {t, *rng, normal, (float)a, (float)b};
    for_each_row(t, random_row, &j);
    rng->counter += ((uint64_t)ampci_numel(t) + 3) / 4;
    t->storage->version++;
    return AMPC_OK;
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
    ampci_tensor_scatter(t, data, data_dtype);
    return t;
}

/* ---- copies ---- */

ampc_tensor *ampci_copy_as(const char *fn, const ampc_tensor *t, ampc_dtype dtype) {
    ampc_tensor *c = ampci_tensor_arena(fn, t->ctx, dtype, t->ndim, t->shape);
    if (c) ampci_tensor_gather(t, ampci_tensor_ptr(c), dtype);
    return c;
}

ampc_tensor *ampc_tensor_detach_copy(const ampc_tensor *t) {
    if (!t) return ampci_null_input("ampc_tensor_detach_copy", "input tensor");
    ampc_tensor *c = ampc_tensor_new(t->ctx, t->dtype, t->ndim, t->shape);
    if (c) ampci_tensor_gather(t, ampci_tensor_ptr(c), t->dtype);
    return c;
}
