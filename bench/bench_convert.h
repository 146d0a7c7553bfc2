/* bench_convert.h: the conversion benchmark behind `ampc bench convert`. Every row-conversion
 * implementation compiled into the library is timed on large arrays and compared with this machine's
 * memcpy bandwidth, counted the same way (bytes read + bytes written per second), so each path's result
 * reads as a fraction of what the memory system can move at all. Each timed output is also compared
 * bit for bit with the reference implementation, since a fast wrong kernel is worth nothing. */
#ifndef AMPC_BENCH_CONVERT_H
#define AMPC_BENCH_CONVERT_H

#include "bench_util.h"

#include <stdbool.h>

typedef struct bench_cvt_params {
    size_t mib;          /* size of the F32 source array in MiB (n = mib * 2^20 / 4 elements;
                              16-bit sources use the same n); 0 = 64 */
    int threads;         /* the array is cut into `threads` contiguous parts run by a context's
                              ampc_parallel_for; 0 = 1 */
    bench_repeat repeat; /* zero = the defaults of bench_time */
    /* Called before each measurement (done of total finished), e.g. for a progress line; may be NULL. */
    void (*progress)(void *user, int done, int total, const char *what);
    void *progress_user;
} bench_cvt_params;

typedef struct bench_cvt_row {
    const char *kernel;  /* implementation name ("ampc_k_cvt_f16f32__avx512"), or "memcpy" */
    ampc_dtype dst, src; /* memcpy: F32, F32 */
    bool usable;         /* false: compiled in but this CPU cannot run it (nothing measured) */
    const char *missing; /* when !usable: the level or feature it lacks ("avx512_bf16") */
    bool active;         /* the implementation ampc_convert uses in this process */
    bool matches_ref;    /* output bit-identical to the ref implementation's on the same input */
    size_t n;            /* elements per run */
    int threads;
    double bytes; /* bytes read + bytes written per run */
    bench_timing t;
    double gbps, gbps_min, gbps_max; /* from the median, slowest and fastest run; 1 GB = 1e9 bytes */
    double fraction_of_memcpy;       /* gbps / memcpy's gbps */
} bench_cvt_row;

typedef struct bench_cvt_report {
    size_t mib, n;
    int threads;
    ampc_isa chosen; /* the process's kernel level (ampc_cpu()->chosen) */
    bench_cvt_row memcpy_row;
    bench_cvt_row *rows; /* one per implementation, sorted by (src, dst), then by level */
    size_t nrows;
} bench_cvt_report;

/* Runs the whole benchmark. On failure (out of memory, a context that cannot start) returns the status
 * with ampc_last_error() or an OOM status set, and out holds nothing to free. */
ampc_status bench_convert_run(const bench_cvt_params *params, bench_cvt_report *out);
void bench_convert_report_free(bench_cvt_report *r);

#endif
