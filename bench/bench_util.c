/* bench_util.c: timing and buffers for the benchmarks (see bench_util.h). The median of several runs
 * is reported because a single run on a shared machine is mostly noise, and the minimum flatters; the
 * warm-up run pulls code, TLB entries and, for small arrays, data into caches, as in real use. */
#include "bench_util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HUGE_ALIGN ((size_t)2 << 20)

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bench_timing bench_time(void (*fn)(void *arg), void *arg, const bench_repeat *rep) {
    int min_runs = rep && rep->min_runs > 0 ? rep->min_runs : 5;
    int max_runs = rep && rep->max_runs > 0 ? rep->max_runs : 200;
    double min_seconds = rep && rep->min_seconds > 0 ? rep->min_seconds : 0.3;
    if (max_runs < min_runs) max_runs = min_runs;
    bench_timing t = {0, 0, 0, 0};
    double *times = malloc((size_t)max_runs * sizeof *times);
    if (!times) return t;
    fn(arg); /* warm-up */
    double total = 0;
    while (t.runs < max_runs && (t.runs < min_runs || total < min_seconds)) {
        double t0 = bench_now();
        fn(arg);
        double dt = bench_now() - t0;
        times[t.runs++] = dt;
        total += dt;
    }
    t.median_s = bench_median(times, (size_t)t.runs); /* sorted now: ends are min and max */
    t.min_s = times[0];
    t.max_s = times[t.runs - 1];
    free(times);
    return t;
}

void *bench_alloc(size_t size) {
    size_t rounded = (size + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    if (rounded < size) return NULL;
    void *p = aligned_alloc(HUGE_ALIGN, rounded ? rounded : HUGE_ALIGN);
    if (p) memset(p, 0, rounded); /* fault every page in now, not during the first timed run */
    return p;
}

void bench_free(void *p) { free(p); }

typedef struct copy_job {
    void *dst;
    const void *src;
    size_t bytes;
} copy_job;

static void copy_once(void *arg) {
    copy_job *j = arg;
    memcpy(j->dst, j->src, j->bytes);
}

double bench_memcpy_gbps(size_t bytes) {
    copy_job j = {bench_alloc(bytes), bench_alloc(bytes), bytes};
    double gbps = 0;
    if (j.dst && j.src) {
        memset((void *)j.src, 1, bytes);
        bench_timing t = bench_time(copy_once, &j, &(bench_repeat){.min_runs = 5, .min_seconds = 0.1});
        gbps = 2.0 * (double)bytes / t.median_s * 1e-9;
    }
    bench_free(j.dst);
    bench_free((void *)j.src);
    return gbps;
}

/* splitmix64: the cheap per-element draws (scale, special or not) need no statistical strength. */
static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The values a conversion must treat specially; a random sign is applied on top. */
static float special(unsigned which, bool negative) {
    const float specials[8] = {0.0f,
                               1e-40f /* f32 subnormal */,
                               1e-45f /* smallest f32 */,
                               65504.0f,
                               65520.0f /* rounds to FP16 inf */,
                               3e38f /* near f32 max */,
                               __builtin_inff(),
                               __builtin_nanf("")};
    float v = specials[which & 7];
    return negative ? -v : v;
}

static void fill_f32(float *x, size_t n, ampc_rng *rng, uint64_t *mix_state) {
    ampc_rng_uniform(rng, x, n, -2.0f, 2.0f);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix(mix_state);
        int k = (int)(r % 25) - 12;
        float scale = k < 0 ? 1.0f / (float)(1 << -k) : (float)(1 << k);
        x[i] = (r >> 8 & 511) == 0 ? special((unsigned)(r >> 20), r >> 23 & 1) : x[i] * scale;
    }
}

ampc_status bench_fill(void *dst, ampc_dtype dtype, size_t n, uint64_t seed) {
    ampc_rng rng = ampc_rng_make(seed, 7);
    uint64_t mix_state = seed;
    if (dtype == AMPC_DTYPE_F32) {
        fill_f32(dst, n, &rng, &mix_state);
        return AMPC_OK;
    }
    /* Other dtypes: draw in F32 a block at a time, then convert (the block stays in L1/L2). */
    enum { BLOCK = 8192 };
    float *tmp = malloc(BLOCK * sizeof *tmp);
    if (!tmp) return AMPC_STATUS_OOM;
    size_t es = ampc_dtype_size(dtype);
    ampc_status s = AMPC_OK;
    for (size_t i = 0; i < n && s == AMPC_OK; i += BLOCK) {
        size_t m = n - i < BLOCK ? n - i : BLOCK;
        fill_f32(tmp, m, &rng, &mix_state);
        s = ampc_convert((char *)dst + i * es, dtype, tmp, AMPC_DTYPE_F32, m);
    }
    free(tmp);
    return s;
}
