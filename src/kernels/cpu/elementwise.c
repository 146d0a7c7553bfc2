/* elementwise.c: the CPU device's elementwise and reduction operations (dev_elementwise.h). Unary maps
 * run in chunks of a few thousand elements staged as F32 on the stack (a 16-bit tensor is converted, the
 * kernel runs, the result is rounded straight into the output's dtype), so no full-size F32 copy is
 * ever made; F32 operands are read and written in place. Chunks go to the context's threads in a cut that
 * depends only on the size. Binary maps run in F32, broadcast operands a row of the last dim at a time
 * (rows on the threads); sums over broadcast or reduced dims accumulate in double in the input's
 * row-major order (a sum that keeps the last dim: column blocks on the threads, each in that order). */
#include "../device.h"

#include <string.h>

#define STAGE 1024 /* elements staged per step of a unary chunk */
#define RUN 256    /* elements of a repeated operand value per binary kernel call */

/* ---- unary ---- */

/* Elements [b, e) of the forward (g NULL) or backward through the kernel table, staged per STAGE. */
typedef struct staged_map {
    const struct ampc_kernels *k;
    ampci_unary kind;
    void *out;
    ampc_dtype out_dt;
    const void *x, *y, *g; /* y, g: backward only */
    ampc_dtype x_dt, y_dt, g_dt;
} staged_map;

/* Elements [i, i + m) of p (dtype dt) as F32: p's own when it is F32, else converted into buf. */
static const float *stage_in(const void *p, ampc_dtype dt, int64_t i, int64_t m, float *buf,
                             const struct ampc_kernels *k) {
    const unsigned char *src = (const unsigned char *)p + (size_t)i * ampc_dtype_size(dt);
    if (dt == AMPC_DTYPE_F32) return (const float *)src;
    ampci_convert_with(k, buf, AMPC_DTYPE_F32, src, dt, (size_t)m);
    return buf;
}

AMPCI_ROW_BODY(staged_run, staged_map, j, b, e, chunk) {
    float xs[STAGE], ys[STAGE], gs[STAGE], os[STAGE];
    bool direct = j->out_dt == AMPC_DTYPE_F32;
    for (int64_t i = b; i < e; i += STAGE) {
        int64_t m = e - i < STAGE ? e - i : STAGE;
        void *dst = (unsigned char *)j->out + (size_t)i * ampc_dtype_size(j->out_dt);
        float *o = direct ? dst : os;
        const float *x = stage_in(j->x, j->x_dt, i, m, xs, j->k);
        if (j->g)
            j->k->unary_bw[j->kind](o, stage_in(j->g, j->g_dt, i, m, gs, j->k), x,
                                    stage_in(j->y, j->y_dt, i, m, ys, j->k), m);
        else j->k->unary[j->kind](o, x, m);
        if (!direct) ampci_convert_with(j->k, dst, j->out_dt, os, AMPC_DTYPE_F32, (size_t)m);
    }
}

ampc_status ampci_cpu_unary(ampc_ctx *ctx, const ampci_unary_args *a) {
    staged_map j = {ctx->kernels, a->kind, a->y, a->y_dt, a->x, NULL, NULL, a->x_dt, a->x_dt, a->x_dt};
    ampci_parallel_rows(ctx, a->n, 1, staged_run, &j);
    return AMPC_OK;
}

ampc_status ampci_cpu_unary_bw(ampc_ctx *ctx, const ampci_unary_bw_args *a) {
    staged_map j = {ctx->kernels, a->kind, a->gx, a->gx_dt, a->x, a->y, a->g, a->x_dt, a->y_dt, a->g_dt};
    ampci_parallel_rows(ctx, a->n, 1, staged_run, &j);
    return AMPC_OK;
}

/* ---- scalar: y = x op s ---- */

AMPCI_ROW_BODY(scalar_run, ampci_scalar_args, j, b, e, chunk) {
    for (int64_t i = b; i < e; i++) {
        float v = j->x[i];
        switch (j->kind) {
        case AMPCI_BINARY_ADD: v = v + j->s; break;
        case AMPCI_BINARY_SUB: v = v - j->s; break;
        case AMPCI_BINARY_MUL: v = v * j->s; break;
        default: v = v / j->s; break;
        }
        j->y[i] = v;
    }
}

ampc_status ampci_cpu_scalar(ampc_ctx *ctx, const ampci_scalar_args *a) {
    ampci_parallel_rows(ctx, a->n, 1, scalar_run, a);
    return AMPC_OK;
}

/* ---- binary with broadcasting ---- */

/* Elements [b, e) of z = x op y through the kernel table (no broadcasting). */
typedef struct binary_map {
    ampc_k_binary_fn fn;
    float *z;
    const float *x, *y;
} binary_map;

AMPCI_ROW_BODY(binary_run, binary_map, j, b, e, chunk) { j->fn(j->z + b, j->x + b, j->y + b, e - b); }

/* Rows [r0, r1) of a broadcast binary map, a row being one index (i0, i1, i2) of the last dim's run;
 * each operand is contiguous along the row or one repeated value. */
typedef struct bcast_map {
    ampc_k_binary_fn fn;
    const ampci_binary_args *a;
} bcast_map;

AMPCI_ROW_BODY(bcast_run, bcast_map, j, r0, r1, chunk) {
    const ampci_binary_args *a = j->a;
    const ampci_bcast *bc = &a->bc;
    int64_t len = bc->dims[3];
    float ra[RUN], rb[RUN];
    for (int64_t r = r0; r < r1; r++) {
        int64_t i2 = r % bc->dims[2], i1 = r / bc->dims[2] % bc->dims[1], i0 = r / bc->dims[2] / bc->dims[1];
        int64_t oa = i0 * bc->sa[0] + i1 * bc->sa[1] + i2 * bc->sa[2];
        int64_t ob = i0 * bc->sb[0] + i1 * bc->sb[1] + i2 * bc->sb[2];
        for (int64_t c = 0; c < len; c += RUN) {
            int64_t m = len - c < RUN ? len - c : RUN;
            const float *pa = a->a + oa + c, *pb = a->b + ob + c;
            if (!bc->sa[3]) {
                for (int64_t q = 0; q < m; q++) ra[q] = a->a[oa];
                pa = ra;
            }
            if (!bc->sb[3]) {
                for (int64_t q = 0; q < m; q++) rb[q] = a->b[ob];
                pb = rb;
            }
            j->fn(a->z + r * len + c, pa, pb, m);
        }
    }
}

ampc_status ampci_cpu_binary(ampc_ctx *ctx, const ampci_binary_args *a) {
    const ampci_bcast *bc = &a->bc;
    ampc_k_binary_fn fn = ctx->kernels->binary[a->kind];
    if (a->na == bc->n && a->nb == bc->n) {
        ampci_parallel_rows(ctx, bc->n, 1, binary_run, &(binary_map){fn, a->z, a->a, a->b});
        return AMPC_OK;
    }
    /* broadcast: rows of the last dim on the threads, each element computed alike whoever takes it */
    ampci_parallel_rows(ctx, bc->dims[0] * bc->dims[1] * bc->dims[2], bc->dims[3], bcast_run, &(bcast_map){fn, a});
    return AMPC_OK;
}

/* Output elements of a sum over broadcast dims, split by columns: when the last dim is kept (s[3] != 0),
 * columns [c0, c1) of every row go to one chunk, which adds each of its outputs' inputs in g's row-major
 * order, as one pass would. */
typedef struct sum_to_map {
    const ampci_sum_to_args *a;
    const int64_t *s;
    double *sum;
} sum_to_map;

#define SUM_TO_COLS 64

AMPCI_ROW_BODY(sum_to_run, sum_to_map, j, b0, b1, chunk) {
    const ampci_bcast *bc = &j->a->bc;
    const int64_t *s = j->s;
    int64_t c0 = b0 * SUM_TO_COLS, c1 = b1 * SUM_TO_COLS < bc->dims[3] ? b1 * SUM_TO_COLS : bc->dims[3];
    for (int64_t i0 = 0, k = 0; i0 < bc->dims[0]; i0++)
        for (int64_t i1 = 0; i1 < bc->dims[1]; i1++)
            for (int64_t i2 = 0; i2 < bc->dims[2]; i2++, k += bc->dims[3]) {
                double *out = j->sum + i0 * s[0] + i1 * s[1] + i2 * s[2];
                for (int64_t i3 = c0; i3 < c1; i3++) out[i3 * s[3]] += j->a->g[k + i3];
            }
}

ampc_status ampci_cpu_sum_to(ampc_ctx *ctx, const ampci_sum_to_args *a) {
    const ampci_bcast *bc = &a->bc;
    const int64_t *s = a->which ? bc->sb : bc->sa;
    double *sum = ampci_step_alloc(ctx, (size_t)(a->n > 0 ? a->n : 1) * sizeof *sum, "sum over broadcast dims");
    if (!sum) return ampc_last_status();
    memset(sum, 0, (size_t)a->n * sizeof *sum);
    sum_to_map j = {a, s, sum};
    if (s[3]) { /* the last dim is kept: column blocks are independent */
        int64_t blocks = (bc->dims[3] + SUM_TO_COLS - 1) / SUM_TO_COLS;
        ampci_parallel_rows(ctx, blocks, bc->n / (blocks ? blocks : 1), sum_to_run, &j);
    } else {
        int64_t k = 0;
        for (int64_t i0 = 0; i0 < bc->dims[0]; i0++)
            for (int64_t i1 = 0; i1 < bc->dims[1]; i1++)
                for (int64_t i2 = 0; i2 < bc->dims[2]; i2++)
                    for (int64_t i3 = 0; i3 < bc->dims[3]; i3++, k++)
                        sum[i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3]] += a->g[k];
    }
    for (int64_t i = 0; i < a->n; i++) a->dst[i] = (float)sum[i];
    ampci_step_free(ctx, sum);
    return AMPC_OK;
}

/* ---- reductions ---- */

#define FOR_EACH_INPUT(p, k, o)                                                                                        \
    for (int64_t i0 = 0, k = 0; i0 < (p)->dims[0]; i0++)                                                               \
        for (int64_t i1 = 0; i1 < (p)->dims[1]; i1++)                                                                  \
            for (int64_t i2 = 0; i2 < (p)->dims[2]; i2++)                                                              \
                for (int64_t i3 = 0, o = i0 * (p)->ostride[0] + i1 * (p)->ostride[1] + i2 * (p)->ostride[2];           \
                     i3 < (p)->dims[3]; i3++, k++, o += (p)->ostride[3])

ampc_status ampci_cpu_reduce(ampc_ctx *ctx, const ampci_reduce_args *a) {
    const ampci_reduce_plan *p = &a->plan;
    double *acc = ampci_step_alloc(ctx, (size_t)(p->out_n ? p->out_n : 1) * sizeof *acc, "reduction");
    if (!acc) return ampc_last_status();
    memset(acc, 0, (size_t)p->out_n * sizeof *acc);
    FOR_EACH_INPUT(p, k, o) acc[o] += a->x[k];
    for (int64_t i = 0; i < p->out_n; i++) a->y[i] = (float)(a->mean ? acc[i] / (double)p->count : acc[i]);
    ampci_step_free(ctx, acc);
    return AMPC_OK;
}

ampc_status ampci_cpu_reduce_bw(ampc_ctx *ctx, const ampci_reduce_bw_args *a) {
    (void)ctx;
    const ampci_reduce_plan *p = &a->plan;
    float scale = a->mean ? (float)(1.0 / (double)p->count) : 1.0f;
    FOR_EACH_INPUT(p, k, o) a->gx[k] = a->mean ? a->g[o] * scale : a->g[o];
    return AMPC_OK;
}
