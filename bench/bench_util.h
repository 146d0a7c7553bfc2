/* bench_util.h: what every benchmark shares: a monotonic clock, the repeat-and-take-the-median timing
 * loop, and page-touched, aligned buffers filled with realistic data (random finite values plus a
 * sprinkling of the special values a training run meets: zeros, subnormals, infinities, NaN). */
#ifndef AMPC_BENCH_UTIL_H
#define AMPC_BENCH_UTIL_H

#include "ampc.h"

#include <stddef.h>
#include <stdint.h>

/* Seconds on the monotonic clock (CLOCK_MONOTONIC). */
double bench_now(void);

/* Median of v[0..n) (sorts v in place); 0 when n == 0. */
double bench_median(double *v, size_t n);

typedef struct bench_timing {
    double median_s, min_s, max_s; /* per run */
    int runs;                      /* measured runs (the warm-up excluded) */
} bench_timing;

typedef struct bench_repeat {
    int min_runs;       /* at least this many measured runs; 0 = 5 */
    int max_runs;       /* at most; 0 = 200 */
    double min_seconds; /* keep going until the measured runs add up to this; 0 = 0.3 */
} bench_repeat;

/* One untimed warm-up call of fn(arg), then timed calls as `rep` says. */
bench_timing bench_time(void (*fn)(void *arg), void *arg, const bench_repeat *rep);

/* size bytes, 2 MiB aligned (so transparent huge pages can back it) and written once, so that page
 * faults are not timed. NULL on failure. Free with bench_free. */
void *bench_alloc(size_t size);
void bench_free(void *p);

/* memcpy of `bytes` between two buffers of this thread, GB/s counting bytes read + written (as the
 * conversion and packing benchmarks count theirs), median of repeated runs. 0 when out of memory. */
double bench_memcpy_gbps(size_t bytes);

/* n values of dtype (F32, F16 or BF16) drawn from the counter-based RNG with `seed`: normal values
 * scaled by 2^k, k in [-12, 12], with about one element in 512 replaced by a special (+-0, +-inf, NaN,
 * a subnormal, a value at the edge of FP16's range). Deterministic for a seed. */
ampc_status bench_fill(void *dst, ampc_dtype dtype, size_t n, uint64_t seed);

#endif
