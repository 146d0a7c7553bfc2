/* bench_gemm.h: GFLOP/s of the GEMM kernels on this machine (every candidate of every GEMM slot at the
 * chosen kernel level, the chosen one marked, including the split F32 ones the TF32 switch uses), on
 * squares and on the shapes of a GPT training step, as a fraction of the measured peak of the unit each
 * kernel runs on; and the GB/s of each kernel family's operand packing, as a fraction of memcpy. */
#ifndef AMPC_BENCH_GEMM_H
#define AMPC_BENCH_GEMM_H

#include "bench_peak.h"
#include "bench_util.h"

typedef struct bench_gemm_row {
    const char *slot;   /* "gemm_bf16", "gemm_f32_bf16x1", ... */
    const char *kernel; /* "ampc_k_gemm_bf16f32__amx" */
    bool chosen;        /* the kernel the process runs for the slot (the others are candidates) */
    ampc_dtype dtype;   /* of the operands */
    const char *shape;  /* "square", "gpt qkv", "gpt fc dW", ... */
    int64_t m, n, k;
    bool ta; /* a stored transposed (weight-gradient shapes) */
    int threads;
    bench_timing t;
    double gflops;         /* 2 m n k / median time */
    const char *peak_kind; /* "amx", "bf16dp", "fma32" */
    double peak_gflops, peak_fraction;
    bool above_peak;  /* faster than the peak measured for its unit: the probe was disturbed (a busy
                                machine), so peak_fraction means nothing for this row */
    bool matches_ref; /* the kernel's result on a small odd shape agrees with ref (see bench_gemm.c) */
} bench_gemm_row;

/* One GEMM kernel's packing of one operand on its own, one thread (see bench_gemm.c). */
typedef struct bench_pack_row {
    const char *packer;  /* the kernels' packing: "amx bf16", "avx512 f32", ... */
    ampc_dtype dtype;    /* of the operand */
    const char *operand; /* "A", "A^T", "B", "B^T": op(a) from a stored (M, K) or (K, M), op(b) from (K, N) or (N, K) */
    int64_t rows, cols;  /* of the stored operand */
    size_t src_bytes, packed_bytes;
    bench_timing t;
    double gbps;               /* (src_bytes + packed_bytes) / median time */
    double memcpy_gbps;        /* memcpy of packed_bytes on the same thread, bytes read + written */
    double fraction_of_memcpy; /* gbps / memcpy_gbps */
} bench_pack_row;

typedef struct bench_gemm_params {
    int threads;        /* 0 = all CPUs */
    int64_t max_square; /* squares 256, 512, ... up to this; 0 = 2048 */
    bool no_gpt;        /* leave out the GPT shapes */
    bool no_pack;       /* leave out the packing rows (square operands of min(max_square, 1024)) */
    void (*progress)(void *user, int done, int total, const char *what);
    void *user;
} bench_gemm_params;

typedef struct bench_gemm_report {
    bench_peaks peaks; /* the higher of two probes, before and after the kernels */
    ampc_isa level;
    bench_gemm_row *rows; /* malloc'd */
    size_t nrows;
    bench_pack_row *packs; /* malloc'd */
    size_t npacks;
} bench_gemm_report;

ampc_status bench_gemm_run(const bench_gemm_params *p, bench_gemm_report *out);
void bench_gemm_report_free(bench_gemm_report *r);

#endif
