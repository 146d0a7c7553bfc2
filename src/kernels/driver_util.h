/* driver_util.h: the small pieces the blocked drivers of the ISA folders share (the AVX-512 and AMX GEMMs,
 * the AVX-512 attention): integer helpers, claiming a scratch slot for a task, and the GEMM's K = 0 case.
 * All static inline, so each ISA file compiles its own copy with its own flags and none leaks into
 * generic code. */
#ifndef AMPC_KERNELS_DRIVER_UTIL_H
#define AMPC_KERNELS_DRIVER_UTIL_H

#include "kernels.h"

#include <stdatomic.h>

static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* A free slot of busy[0..n), now marked busy: tasks run on at most n threads at once, so one is free or
 * about to be; the task releases it with atomic_store(&busy[slot], 0). */
static inline int take_slot(atomic_int *busy, int n) {
    for (;;)
        for (int i = 0; i < n; i++) {
            int expect = 0;
            if (atomic_load_explicit(&busy[i], memory_order_relaxed) == 0 &&
                atomic_compare_exchange_strong(&busy[i], &expect, 1))
                return i;
        }
}

/* K = 0: c = beta c + 0, as the ref kernel (beta 0 gives 0 even over NaN). */
static inline void gemm_scale_c(const ampci_gemm *g) {
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t n = 0; n < g->N; n++) {
            float *p = g->c + i * g->ldc + n;
            *p = g->beta == 0.0f ? 0.0f : g->beta * *p + 0.0f;
        }
}

#endif
