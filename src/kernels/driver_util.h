/* driver_util.h: the small pieces the blocked drivers of the ISA folders share (the AVX-512 and AMX GEMMs,
 * the AVX-512 and AMX attention): integer helpers, claiming a scratch slot for a task, the GEMM's scalar
 * write-out of one element (the ref GEMM's too: one definition of kernels.h's epilogue) and its K = 0
 * case, and the description of a GEMM kernel's packing that `ampc bench gemm` times on its own. The functions are
 * static inline, so each ISA file compiles its own copy with its own flags and none leaks into generic
 * code. */
#ifndef AMPC_KERNELS_DRIVER_UTIL_H
#define AMPC_KERNELS_DRIVER_UTIL_H

#include "../numerics/half.h"
#include "kernels.h"

#include <cpuid.h>
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

/* This core's L2 in KiB (CPUID 0x80000006 ECX[31:16], on Intel and AMD alike), asked once; 0 when the
 * leaf is missing. Blocking may depend on it, never results. */
static inline int64_t l2_kib(void) {
    static atomic_int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        unsigned a, b, c, d;
        v = __get_cpuid(0x80000006u, &a, &b, &c, &d) ? (int)(c >> 16) : 0;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* The write-out of element (i, j) whose sum over K is acc (kernels.h): beta c + acc (c read only for
 * beta != 0, multiply then add), plus the bias, into c or rounded once into c16 (half.h's bits). */
static inline void gemm_put(const ampci_gemm *g, int64_t i, int64_t j, float acc) {
    size_t at = (size_t)(i * g->ldc + j);
    float v = g->beta == 0.0f ? acc : g->beta * g->c[at] + acc;
    if (g->bias) v += g->bias[j];
    if (!g->c16) {
        g->c[at] = v;
        return;
    }
    uint32_t x = ampci_f32_bits(v);
    g->c16[at] = g->c16_dt == AMPC_DTYPE_F16 ? ampci_f16_from_f32_bits(x) : ampci_bf16_from_f32_bits(x);
}

/* K = 0: c = beta c + 0 (+ bias), as the ref kernel (beta 0 gives 0 even over NaN). */
static inline void gemm_scale_c(const ampci_gemm *g) {
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t n = 0; n < g->N; n++) gemm_put(g, i, n, 0.0f);
}

/* A GEMM kernel's packing on its own (bench/bench_gemm.c times it): pack(g, is_b, scratch) turns all of
 * op(a) (is_b false) or op(b) of g into the kernel's packed layout, every K-block, as the kernel does;
 * scratch holds bytes(g, is_b), of which packed(g, is_b) are the packed operand. Runs on one thread. */
typedef struct ampci_gemm_packer {
    const char *name;      /* the packing, as the kernels that use it: "amx bf16", "avx512 f16 (widened)" */
    ampc_dtype dtype;      /* of the operands */
    ampc_cpu_feature need; /* a CPU feature beyond the folder's level, or AMPC_CPU_FEATURE_COUNT */
    size_t (*bytes)(const ampci_gemm *g, bool is_b);
    size_t (*packed)(const ampci_gemm *g, bool is_b);
    void (*pack)(const ampci_gemm *g, bool is_b, void *scratch);
} ampci_gemm_packer;

/* A file's packer functions for kind KD (tag names them), from its bytes_whole, packed_whole and
 * pack_whole (each (g, is_b, KD[, scratch])). */
#define AMPCI_DEF_PACKER(KD, tag)                                                                                      \
    static size_t bytes_##tag(const ampci_gemm *g, bool is_b) { return bytes_whole(g, is_b, KD); }                     \
    static size_t packed_##tag(const ampci_gemm *g, bool is_b) { return packed_whole(g, is_b, KD); }                   \
    static void pack_##tag(const ampci_gemm *g, bool is_b, void *scratch) { pack_whole(g, is_b, KD, scratch); }

#endif
