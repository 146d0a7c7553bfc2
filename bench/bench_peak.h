/* bench_peak.h: this machine's compute peaks, measured at run time, for GEMM figures as a fraction of what
 * the hardware can do. */
#ifndef AMPC_BENCH_PEAK_H
#define AMPC_BENCH_PEAK_H

#include "ampc.h"

typedef struct bench_peaks {
    int threads;
    double fma32;  /* GFLOP/s of vfmadd231ps zmm; 0 without AVX-512 */
    double bf16dp; /* vdpbf16ps zmm; 0 without AVX512-BF16 */
    double amx;    /* tdpbf16ps; 0 without usable AMX */
} bench_peaks;

/* Runs each loop the CPU supports on `threads` threads at once (~0.5 s each). */
ampc_status bench_peak_measure(int threads, bench_peaks *out);

/* The peak that bounds a GEMM kernel (by its name's ISA suffix), and which one it is ("amx", "bf16dp",
 * "fma32") in *which. 0 when unknown (no AVX-512). */
double bench_peak_for(const bench_peaks *p, const char *kernel, const char **which);

#endif
