/* bench_convert.c: times every conversion entry of the kernel registry (kernels.h) against
 * memcpy on the same arrays and thread split. Implementations are run directly, not through
 * ampc_convert, so slower paths that the dispatcher would never pick (ref, avx2 on an AVX-512 machine)
 * are measured too: that is what shows what each ISA level buys. The threaded split is the library's own
 * ampc_parallel_for, so the numbers include its real scheduling cost. */
#include "bench_convert.h"

#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

/* One timed call: fn over [0, n) cut into chunks of `grain` elements. */
typedef struct cvt_job {
    ampc_ctx *ctx;
    int64_t n, grain;
    ampc_k_cvt_fn fn;
    void *dst;
    const void *src;
    size_t dsz, ssz;
} cvt_job;

static void job_chunk(void *arg, int64_t begin, int64_t end, int64_t chunk) {
    (void)chunk;
    const cvt_job *j = arg;
    j->fn((char *)j->dst + (size_t)begin * j->dsz, (const char *)j->src + (size_t)begin * j->ssz,
          (size_t)(end - begin));
}

static void job_run(void *arg) {
    cvt_job *j = arg;
    ampc_parallel_for(j->ctx, j->n, j->grain, job_chunk, j);
}

static void copy_f32(void *restrict dst, const void *restrict src, size_t n) { memcpy(dst, src, n * 4); }

/* Everything one run of the benchmark owns. */
typedef struct bench_state {
    ampc_ctx *ctx;
    size_t n;
    int64_t grain;
    void *src[3];        /* indexed by dtype: F32, F16, BF16 */
    void *dst, *ref_out; /* n * 4 bytes each */
} bench_state;

static void state_free(bench_state *s) {
    for (int i = 0; i < 3; i++) bench_free(s->src[i]);
    bench_free(s->dst);
    bench_free(s->ref_out);
    ampc_ctx_free(s->ctx);
}

static ampc_status state_init(bench_state *s, size_t n, int threads) {
    memset(s, 0, sizeof *s);
    s->n = n;
    /* threads contiguous parts, each a multiple of 64 elements (whole cache lines for every dtype) */
    int64_t part = ((int64_t)n + threads - 1) / threads;
    s->grain = (part + 63) / 64 * 64;
    ampc_status st = ampc_ctx_new(&(ampc_ctx_params){.threads = threads}, &s->ctx);
    if (st != AMPC_OK) return st;
    for (int d = 0; d < 3 && st == AMPC_OK; d++) {
        s->src[d] = bench_alloc(n * ampc_dtype_size((ampc_dtype)d));
        st = s->src[d] ? bench_fill(s->src[d], (ampc_dtype)d, n, 1000 + (uint64_t)d) : AMPC_STATUS_OOM;
    }
    s->dst = bench_alloc(n * 4);
    s->ref_out = bench_alloc(n * 4);
    if (st == AMPC_OK && (!s->dst || !s->ref_out)) st = AMPC_STATUS_OOM;
    if (st != AMPC_OK) state_free(s);
    return st;
}

static void set_rates(bench_cvt_row *r) {
    r->gbps = r->bytes / r->t.median_s * 1e-9;
    r->gbps_min = r->bytes / r->t.max_s * 1e-9;
    r->gbps_max = r->bytes / r->t.min_s * 1e-9;
}

static void measure(bench_state *s, bench_cvt_row *r, ampc_k_cvt_fn fn, const bench_repeat *rep) {
    size_t dsz = ampc_dtype_size(r->dst), ssz = ampc_dtype_size(r->src);
    cvt_job job = {s->ctx, (int64_t)s->n, s->grain, fn, s->dst, s->src[r->src], dsz, ssz};
    r->n = s->n;
    r->threads = ampc_ctx_threads(s->ctx);
    r->bytes = (double)s->n * (double)(dsz + ssz);
    r->t = bench_time(job_run, &job, rep);
    set_rates(r);
}

/* Why an entry cannot run here: its level, or the first extra feature the CPU lacks. */
static const char *missing_of(const ampci_kernel *e) {
    if (e->level > ampc_cpu()->best) return ampc_isa_name(e->level);
    for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++)
        if ((e->needs >> f & 1u) && !ampc_cpu_has((ampc_cpu_feature)f))
            return ampc_cpu_feature_name((ampc_cpu_feature)f);
    return NULL;
}

/* Conversion entries sorted by (src, dst), registry order (= ascending level) within a pair. */
static const ampci_kernel *const *g_reg;
static int cmp_index(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const ampci_kernel *x = g_reg[i], *y = g_reg[j];
    if (x->src != y->src) return (int)x->src - (int)y->src;
    if (x->dtype != y->dtype) return (int)x->dtype - (int)y->dtype;
    return (i > j) - (i < j);
}

/* Times one entry and checks its output against ref_out (computed for its pair). */
static void run_impl(bench_state *s, const ampci_kernel *e, bench_cvt_row *r, const bench_repeat *rep) {
    const ampci_kernel *active = ampci_kernels(AMPC_ISA_AUTO)->chosen[e->slot][ampci_kernel_key(e)];
    *r = (bench_cvt_row){
        .kernel = e->name, .dst = e->dtype, .src = e->src, .n = s->n, .threads = ampc_ctx_threads(s->ctx)};
    r->usable = ampci_kernel_usable(e);
    r->active = active == e;
    if (!r->usable) {
        r->missing = missing_of(e);
        return;
    }
    size_t out_bytes = s->n * ampc_dtype_size(e->dtype);
    memset(s->dst, 0xa5, out_bytes); /* a kernel that skips elements must not pass the check */
    measure(s, r, e->fn.CONVERT, rep);
    r->matches_ref = memcmp(s->dst, s->ref_out, out_bytes) == 0;
}

static void progress(const bench_cvt_params *p, int done, int total, const char *what) {
    if (p->progress) p->progress(p->progress_user, done, total, what);
}

/* The registry's conversion entries, in report order; returns how many (order holds count entries). */
static size_t conversion_order(size_t *order) {
    size_t n, count = 0;
    g_reg = ampci_registry(&n);
    for (size_t i = 0; i < n; i++)
        if (g_reg[i]->slot == AMPCI_SLOT_CONVERT) order[count++] = i;
    qsort(order, count, sizeof *order, cmp_index);
    return count;
}

static ampc_status run_all(bench_state *s, const bench_cvt_params *p, bench_cvt_report *out) {
    size_t n;
    ampci_registry(&n);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    out->rows = calloc(n ? n : 1, sizeof *out->rows);
    if (!order || !out->rows) {
        free(order);
        return AMPC_STATUS_OOM;
    }
    size_t count = conversion_order(order);
    int total = (int)count + 1;
    progress(p, 0, total, "memcpy");
    out->memcpy_row = (bench_cvt_row){
        .kernel = "memcpy", .dst = AMPC_DTYPE_F32, .src = AMPC_DTYPE_F32, .usable = true, .matches_ref = true};
    measure(s, &out->memcpy_row, copy_f32, &p->repeat);
    out->memcpy_row.fraction_of_memcpy = 1.0;
    for (size_t k = 0; k < count; k++) {
        const ampci_kernel *e = g_reg[order[k]], *ref = ampci_kernel_ref(e);
        bool new_pair = k == 0 || !ampci_same_cell(g_reg[order[k - 1]], e);
        if (new_pair && ref) ref->fn.CONVERT(s->ref_out, s->src[e->src], s->n);
        progress(p, (int)k + 1, total, e->name);
        run_impl(s, e, &out->rows[k], &p->repeat);
        if (!ref) out->rows[k].matches_ref = false;
        if (out->rows[k].usable) out->rows[k].fraction_of_memcpy = out->rows[k].gbps / out->memcpy_row.gbps;
    }
    out->nrows = count;
    free(order);
    return AMPC_OK;
}

ampc_status bench_convert_run(const bench_cvt_params *params, bench_cvt_report *out) {
    bench_cvt_params p = params ? *params : (bench_cvt_params){0};
    memset(out, 0, sizeof *out);
    out->mib = p.mib ? p.mib : 64;
    out->threads = p.threads > 0 ? p.threads : 1;
    out->n = out->mib * ((size_t)1 << 20) / 4;
    out->chosen = ampc_cpu()->chosen;
    bench_state s;
    ampc_status st = state_init(&s, out->n, out->threads);
    if (st != AMPC_OK) return st;
    st = run_all(&s, &p, out);
    state_free(&s);
    if (st != AMPC_OK) bench_convert_report_free(out);
    return st;
}

void bench_convert_report_free(bench_cvt_report *r) {
    if (!r) return;
    free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
}
