/* tensor.c: the CPU device's tensor operations (dev_tensor.h): converting copies between a strided tensor
 * and a contiguous buffer, fills and random fills, contiguous conversions, the finiteness scan and
 * gradient sums. The strided ones walk the tensor as rows along its last dim (a contiguous tensor as
 * flat pieces), converting through the context's kernel table, and split the rows over the context's
 * threads; random fills draw element i of the row-major order from counter-based RNG position i, so the
 * bits do not depend on the thread count. */
#include "../device.h"
#include "../../numerics/numerics.h"

#include <string.h>

#define ROW_PIECE 256            /* elements per staging buffer for strided rows */
#define PARALLEL_ELEMS (1 << 15) /* elements per parallel chunk */
#define ADD_CHUNK 4096           /* elements per F32 staging buffer of a gradient sum */

typedef void (*row_fn)(const void *arg, unsigned char *row, int64_t len, int64_t stride, int64_t first);

typedef struct row_walk {
    const ampci_strided *t;
    int64_t len; /* row length (last extent; 1 for 0-dim) */
    row_fn fn;
    const void *arg;
} row_walk;

static int64_t numel_of(const ampci_strided *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static bool contiguous(const ampci_strided *t) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

AMPCI_ROW_BODY(walk_rows, row_walk, w, begin, end, chunk) {
    const ampci_strided *t = w->t;
    size_t es = ampc_dtype_size(t->dt);
    int64_t inner = t->ndim ? t->stride[t->ndim - 1] : 1;
    for (int64_t r = begin; r < end; r++) {
        int64_t off = 0, rest = r;
        for (int d = t->ndim - 2; d >= 0; d--) {
            off += (rest % t->shape[d]) * t->stride[d];
            rest /= t->shape[d];
        }
        w->fn(w->arg, (unsigned char *)t->p + off * (int64_t)es, w->len, inner, r * w->len);
    }
}

/* Calls fn once per row, rows in parallel; a contiguous tensor is cut into flat pieces instead. */
static void for_each_row(ampc_ctx *ctx, const ampci_strided *t, row_fn fn, const void *arg) {
    int64_t numel = numel_of(t);
    if (numel == 0) return;
    if (contiguous(t)) {
        int64_t len = numel < PARALLEL_ELEMS ? numel : PARALLEL_ELEMS, rows = (numel + len - 1) / len;
        /* rows of `len` elements; the last row may be shorter, so walk it by hand */
        ampci_strided flat = {.p = t->p, .dt = t->dt, .ndim = 2, .shape = {rows - 1, len}, .stride = {len, 1}};
        row_walk w = {&flat, len, fn, arg};
        ampc_parallel_for(ctx, rows - 1, 1, walk_rows, &w);
        int64_t done = (rows - 1) * len;
        fn(arg, (unsigned char *)t->p + (size_t)done * ampc_dtype_size(t->dt), numel - done, 1, done);
        return;
    }
    int64_t len = t->shape[t->ndim - 1], rows = numel / len;
    row_walk w = {t, len, fn, arg};
    int64_t grain = len >= PARALLEL_ELEMS ? 1 : PARALLEL_ELEMS / len;
    ampc_parallel_for(ctx, rows, grain, walk_rows, &w);
}

/* ---- converting copies between a tensor and a contiguous buffer ---- */

typedef struct copy_rows {
    const struct ampc_kernels *k;
    ampc_dtype tdt;
    unsigned char *buf; /* contiguous, buf_dt */
    ampc_dtype buf_dt;
    bool to_tensor, add;
} copy_rows;

/* row (len elements of tdt, `stride` apart) += buf (buf_dt), ROW_PIECE at a time: both widened to F32,
 * added, rounded once back into the row. */
static void add_row(const copy_rows *j, unsigned char *row, int64_t len, int64_t stride, const unsigned char *buf) {
    const struct ampc_kernels *k = j->k;
    size_t es = ampc_dtype_size(j->tdt), bs = ampc_dtype_size(j->buf_dt);
    unsigned char tmp[ROW_PIECE * 8];
    float x[ROW_PIECE], y[ROW_PIECE];
    for (int64_t i = 0; i < len; i += ROW_PIECE) {
        int64_t m = len - i < ROW_PIECE ? len - i : ROW_PIECE;
        unsigned char *r = row + i * stride * (int64_t)es, *t = stride == 1 ? r : tmp;
        if (stride != 1)
            for (int64_t e = 0; e < m; e++) memcpy(tmp + (size_t)e * es, r + e * stride * (int64_t)es, es);
        ampci_convert_with(k, x, AMPC_DTYPE_F32, t, j->tdt, (size_t)m);
        ampci_convert_with(k, y, AMPC_DTYPE_F32, buf + (size_t)i * bs, j->buf_dt, (size_t)m);
        k->binary[AMPCI_BINARY_ADD](x, x, y, m);
        ampci_convert_with(k, t, j->tdt, x, AMPC_DTYPE_F32, (size_t)m);
        if (stride != 1)
            for (int64_t e = 0; e < m; e++) memcpy(r + e * stride * (int64_t)es, tmp + (size_t)e * es, es);
    }
}

/* One row of the tensor (len elements, `stride` apart) <-> len contiguous elements of buf (buf_dt). */
static void convert_row(const copy_rows *j, unsigned char *row, int64_t len, int64_t stride, unsigned char *buf) {
    const struct ampc_kernels *k = j->k;
    ampc_dtype tdt = j->tdt;
    size_t es = ampc_dtype_size(tdt), bs = ampc_dtype_size(j->buf_dt);
    if (stride == 1) {
        if (j->to_tensor) ampci_convert_with(k, row, tdt, buf, j->buf_dt, (size_t)len);
        else ampci_convert_with(k, buf, j->buf_dt, row, tdt, (size_t)len);
        return;
    }
    /* Strided row: stage pieces contiguously in the tensor's dtype, convert, then place. */
    unsigned char tmp[ROW_PIECE * 8];
    for (int64_t i = 0; i < len; i += ROW_PIECE) {
        int64_t m = len - i < ROW_PIECE ? len - i : ROW_PIECE;
        unsigned char *b = buf + (size_t)i * bs;
        if (j->to_tensor) {
            ampci_convert_with(k, tmp, tdt, b, j->buf_dt, (size_t)m);
            for (int64_t e = 0; e < m; e++) memcpy(row + (i + e) * stride * (int64_t)es, tmp + (size_t)e * es, es);
        } else {
            for (int64_t e = 0; e < m; e++) memcpy(tmp + (size_t)e * es, row + (i + e) * stride * (int64_t)es, es);
            ampci_convert_with(k, b, j->buf_dt, tmp, tdt, (size_t)m);
        }
    }
}

static void copy_row(const void *vp, unsigned char *row, int64_t len, int64_t stride, int64_t first) {
    const copy_rows *j = vp;
    unsigned char *buf = j->buf + (size_t)first * ampc_dtype_size(j->buf_dt);
    if (j->add) add_row(j, row, len, stride, buf);
    else convert_row(j, row, len, stride, buf);
}

ampc_status ampci_cpu_strided_copy(ampc_ctx *ctx, const ampci_strided_copy_args *a) {
    copy_rows j = {ctx->kernels, a->t.dt, a->buf, a->buf_dt, a->to_tensor, a->add && a->to_tensor};
    for_each_row(ctx, &a->t, copy_row, &j);
    return AMPC_OK;
}

/* ---- fills ---- */

typedef struct fill_rows {
    size_t es;
    const unsigned char *pattern;
} fill_rows;

static void fill_row(const void *vp, unsigned char *row, int64_t len, int64_t stride, int64_t first) {
    (void)first;
    const fill_rows *j = vp;
    for (int64_t i = 0; i < len; i++) memcpy(row + i * stride * (int64_t)j->es, j->pattern, j->es);
}

ampc_status ampci_cpu_fill(ampc_ctx *ctx, const ampci_fill_args *a) {
    fill_rows j = {ampc_dtype_size(a->t.dt), a->pattern};
    for_each_row(ctx, &a->t, fill_row, &j);
    return AMPC_OK;
}

typedef struct random_rows {
    const ampci_fill_random_args *a;
    copy_rows copy; /* F32 draws into the tensor */
} random_rows;

static void random_row(const void *vp, unsigned char *row, int64_t len, int64_t stride, int64_t first) {
    const random_rows *j = vp;
    const ampci_fill_random_args *a = j->a;
    float vals[ROW_PIECE];
    size_t es = ampc_dtype_size(a->t.dt);
    for (int64_t i = 0; i < len; i += ROW_PIECE) {
        int64_t m = len - i < ROW_PIECE ? len - i : ROW_PIECE;
        if (a->normal) ampci_rng_normal_range(&a->rng, vals, first + i, first + i + m, a->a, a->b);
        else ampci_rng_uniform_range(&a->rng, vals, first + i, first + i + m, a->a, a->b);
        convert_row(&j->copy, row + i * stride * (int64_t)es, m, stride, (unsigned char *)vals);
    }
}

ampc_status ampci_cpu_fill_random(ampc_ctx *ctx, const ampci_fill_random_args *a) {
    random_rows j = {a, {ctx->kernels, a->t.dt, NULL, AMPC_DTYPE_F32, true, false}};
    for_each_row(ctx, &a->t, random_row, &j);
    return AMPC_OK;
}

/* ---- contiguous ---- */

/* A contiguous element-wise job from src into dst (a conversion, a gradient sum), cut into pieces over the
 * threads: element-wise, so the bits do not depend on the cut. */
typedef struct pair_job {
    void *dst;
    ampc_dtype dst_dt;
    const void *src;
    ampc_dtype src_dt;
    const struct ampc_kernels *k;
} pair_job;
#define PAIR_JOB(A, CTX) (&(pair_job){(A)->dst, (A)->dst_dt, (A)->src, (A)->src_dt, (CTX)->kernels})

AMPCI_ROW_BODY(convert_run, pair_job, a, b, e, chunk) {
    size_t ds = ampc_dtype_size(a->dst_dt), ss = ampc_dtype_size(a->src_dt);
    ampci_convert_with(a->k, (unsigned char *)a->dst + (size_t)b * ds, a->dst_dt,
                       (const unsigned char *)a->src + (size_t)b * ss, a->src_dt, (size_t)(e - b));
}

ampc_status ampci_cpu_convert(ampc_ctx *ctx, const ampci_convert_args *a) {
    /* small, bad arguments (reported there) or overlapping ranges: in one piece */
    bool whole = a->n < 2 * PARALLEL_ELEMS || (unsigned)a->dst_dt >= AMPC_DTYPE_COUNT ||
                 (unsigned)a->src_dt >= AMPC_DTYPE_COUNT || !a->dst || !a->src ||
                 ((const unsigned char *)a->dst <
                      (const unsigned char *)a->src + a->n * (int64_t)ampc_dtype_size(a->src_dt) &&
                  (const unsigned char *)a->src <
                      (const unsigned char *)a->dst + a->n * (int64_t)ampc_dtype_size(a->dst_dt));
    if (whole) return ampci_convert_with(ctx->kernels, a->dst, a->dst_dt, a->src, a->src_dt, (size_t)a->n);
    ampci_parallel_rows(ctx, a->n, 1, convert_run, PAIR_JOB(a, ctx));
    return AMPC_OK;
}

ampc_status ampci_cpu_first_nonfinite(ampc_ctx *ctx, const ampci_first_nonfinite_args *a) {
    (void)ctx;
    a->index[0] = ampci_first_nonfinite(a->dt, a->p, a->n);
    return AMPC_OK;
}

/* Elements [b, e) of dst += src, summed in F32 and rounded once to dst's dtype. In parallel because
 * gradient accumulation runs it over every parameter's gradient once per micro-batch (serially it was
 * most of what a 2-thread step waited on). */
AMPCI_ROW_BODY(accumulate_run, pair_job, a, b, e, chunk) {
    const pair_job *j = a;
    size_t ds = ampc_dtype_size(a->dst_dt), ss = ampc_dtype_size(a->src_dt);
    unsigned char *d = a->dst;
    const unsigned char *s = a->src;
    if (a->dst_dt == AMPC_DTYPE_F32 && a->src_dt == AMPC_DTYPE_F32) { /* no staging at all */
        float *df = (float *)a->dst + b;
        j->k->binary[AMPCI_BINARY_ADD](df, df, (const float *)a->src + b, e - b);
        return;
    }
    float x[ADD_CHUNK], y[ADD_CHUNK];
    bool f32 = a->dst_dt == AMPC_DTYPE_F32; /* an F32 sum is added in place: no staging copies of it */
    for (int64_t i = b; i < e; i += ADD_CHUNK) {
        size_t m = (size_t)(e - i < ADD_CHUNK ? e - i : ADD_CHUNK);
        float *sum = f32 ? (float *)a->dst + i : x;
        if (!f32) ampci_convert_with(j->k, x, AMPC_DTYPE_F32, d + (size_t)i * ds, a->dst_dt, m);
        ampci_convert_with(j->k, y, AMPC_DTYPE_F32, s + (size_t)i * ss, a->src_dt, m);
        j->k->binary[AMPCI_BINARY_ADD](sum, sum, y, (int64_t)m);
        if (!f32) ampci_convert_with(j->k, d + (size_t)i * ds, a->dst_dt, x, AMPC_DTYPE_F32, m);
    }
}

ampc_status ampci_cpu_accumulate(ampc_ctx *ctx, const ampci_accumulate_args *a) {
    ampci_parallel_rows(ctx, a->n, 1, accumulate_run, PAIR_JOB(a, ctx));
    return AMPC_OK;
}
