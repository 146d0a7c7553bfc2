/* amp.c: the CPU device's amp operations (dev_amp.h). FP8 quantisation runs the table's quant8 kernel over
 * tasks of QCHUNK values (16-bit inputs widened in pieces on the stack), lowers each piece's exponents by
 * log2(scale) while it is in cache, and keeps one amax and one saturation count per task, folded at the end;
 * range statistics split the values into at most MAX_TASKS tasks with one accumulator each, folded into the
 * result. The cuts depend only on the sizes, and the folds are maxima and integer sums, so the results do
 * not depend on the thread count. */
#include "../device.h"

#include <math.h>
#include <stdlib.h>

#define QCHUNK 16384 /* values per quantisation task */
#define QPIECE 1024  /* values widened / quantised per kernel call */
#define RCHUNK 65536 /* values per range task, at least */
#define MAX_TASKS 64 /* range tasks at most */

/* ---- FP8 quantisation ---- */

/* q / scale on BF16 patterns: the exponent lowered by log2(scale) (every FP8 value is a normal BF16 one,
 * and the result stays in BF16's range); zeros and NaN stay. Branch-free, so it vectorises. */
static inline uint16_t descale1(uint16_t v, uint16_t step) {
    uint16_t e = v & 0x7f80u;
    return (uint16_t)(v - (uint16_t)(step & -(uint16_t)(e != 0 && e != 0x7f80u)));
}

/* Blocks of 32 with a fixed trip count: gcc -O2's vectoriser takes those (it leaves open-ended loops). */
static void descale(uint16_t *v, int64_t n, int k) {
    uint16_t step = (uint16_t)((unsigned)k << 7); /* k < 0 (a scale below 1) wraps to the right add */
    if (step == 0) return;                        /* scale 1 */
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 32; j++) v[i + j] = descale1(v[i + j], step);
    for (; i < n; i++) v[i] = descale1(v[i], step);
}

typedef struct quant_job {
    const struct ampc_kernels *k;
    const ampci_quant8_args *a;
    float *amax;   /* per task */
    uint64_t *sat; /* per task */
} quant_job;

static void quant_task(void *arg, int64_t b, int64_t e, int64_t chunk) {
    const quant_job *j = arg;
    const ampci_quant8_args *a = j->a;
    (void)e;
    int64_t lo = b * QCHUNK, hi = lo + QCHUNK < a->n ? lo + QCHUNK : a->n;
    float buf[QPIECE], amax = 0;
    uint16_t scratch[QPIECE];
    uint64_t sat = 0;
    size_t es = ampc_dtype_size(a->x_dt);
    const unsigned char *x = a->x;
    for (int64_t i = lo; i < hi; i += QPIECE) {
        int64_t m = hi - i < QPIECE ? hi - i : QPIECE;
        const float *src = (const float *)(x + (size_t)i * es);
        if (a->x_dt != AMPC_DTYPE_F32)
            ampci_convert_with(j->k, buf, AMPC_DTYPE_F32, x + (size_t)i * es, a->x_dt, (size_t)m), src = buf;
        uint16_t *dst = a->dst ? a->dst + i : scratch;
        sat += j->k->quant8(dst, src, m, a->scale, a->fmt, &amax);
        if (a->dst) descale(dst, m, ilogb(a->scale)); /* while the piece is in cache */
    }
    j->amax[chunk] = amax, j->sat[chunk] = sat;
}

ampc_status ampci_cpu_quant8(ampc_ctx *ctx, const ampci_quant8_args *a) {
    int64_t tasks = (a->n + QCHUNK - 1) / QCHUNK;
    float am_small[64];
    uint64_t sat_small[64];
    quant_job j = {ctx->kernels, a, tasks <= 64 ? am_small : malloc((size_t)tasks * sizeof(float)),
                   tasks <= 64 ? sat_small : malloc((size_t)tasks * sizeof(uint64_t))};
    bool ok = j.amax && j.sat;
    ampci_quant8_result r = {0};
    if (ok && tasks == 1) quant_task(&j, 0, 1, 0); /* small: no hand-off to the threads */
    else if (ok && tasks > 1) ampc_parallel_for(ctx, tasks, 1, quant_task, &j);
    for (int64_t i = 0; ok && i < tasks; i++) r.amax = j.amax[i] > r.amax ? j.amax[i] : r.amax, r.sat += j.sat[i];
    if (j.amax != am_small) free(j.amax);
    if (j.sat != sat_small) free(j.sat);
    if (!ok) return ampci_fail(AMPC_STATUS_OOM, "FP8: out of memory quantising %lld values", (long long)a->n);
    *a->res = r;
    return AMPC_OK;
}

/* ---- range statistics ---- */

void ampci_range_host(const struct ampc_kernels *k, const void *x, ampc_dtype dt, int64_t n, const uint32_t *thr,
                      int nthr, ampci_range_acc *acc) {
    if (dt == AMPC_DTYPE_F32) {
        k->range(x, n, thr, nthr, acc);
        return;
    }
    float buf[QPIECE]; /* 16-bit values widen exactly */
    size_t es = ampc_dtype_size(dt);
    for (int64_t i = 0; i < n; i += QPIECE) {
        size_t m = (size_t)(n - i < QPIECE ? n - i : QPIECE);
        ampc_convert(buf, AMPC_DTYPE_F32, (const unsigned char *)x + (size_t)i * es, dt, m);
        k->range(buf, (int64_t)m, thr, nthr, acc);
    }
}

typedef struct range_job {
    const struct ampc_kernels *k;
    const ampci_range_args *a;
    int64_t per_task;
    ampci_range_acc *acc; /* one per task */
} range_job;

static void range_task(void *arg, int64_t begin, int64_t end, int64_t chunk) {
    const range_job *j = arg;
    const ampci_range_args *a = j->a;
    (void)end;
    int64_t lo = begin * j->per_task, hi = lo + j->per_task < a->n ? lo + j->per_task : a->n;
    ampci_range_host(j->k, (const unsigned char *)a->x + (size_t)lo * ampc_dtype_size(a->x_dt), a->x_dt, hi - lo,
                     a->thr, a->nthr, &j->acc[chunk]);
}

/* into += what: counts add, the extremes fold. */
static void range_fold(ampci_range_acc *into, const ampci_range_acc *what) {
    for (int b = 0; b < 256; b++) into->hist[b] += what->hist[b];
    for (int t = 0; t < AMPCI_RANGE_MAX_THR; t++) into->ge[t] += what->ge[t];
    into->zeros += what->zeros;
    if (what->amax_bits > into->amax_bits) into->amax_bits = what->amax_bits;
    if (what->min_bits < into->min_bits) into->min_bits = what->min_bits;
}

ampc_status ampci_cpu_range(ampc_ctx *ctx, const ampci_range_args *a) {
    int64_t tasks = a->n > 0 ? (a->n + RCHUNK - 1) / RCHUNK : 0;
    if (tasks > MAX_TASKS) tasks = MAX_TASKS;
    ampci_range_acc stack_acc[4], *acc = tasks <= 4 ? stack_acc : calloc((size_t)tasks, sizeof *acc);
    if (!acc) return ampci_fail(AMPC_STATUS_OOM, "range statistics: out of memory for %lld tasks", (long long)tasks);
    for (int64_t i = 0; i < tasks; i++) acc[i] = (ampci_range_acc){.min_bits = 0x7f800000u};
    range_job job = {ctx->kernels, a, tasks ? (a->n + tasks - 1) / tasks : 0, acc};
    if (tasks == 1) range_task(&job, 0, 1, 0);
    else if (tasks > 1) ampc_parallel_for(ctx, tasks, 1, range_task, &job);
    ampci_range_acc r = {.min_bits = 0x7f800000u};
    for (int64_t i = 0; i < tasks; i++) range_fold(&r, &acc[i]);
    *a->acc = r;
    if (acc != stack_acc) free(acc);
    return AMPC_OK;
}
