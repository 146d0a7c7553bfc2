/* kernels.h: the kernel function table. Every slot is filled by the ref/ path first (complete and
 * obviously correct: the fallback and the test oracle); ISA folders then override the slots they speed
 * up, each implementation declaring the level and CPU features it needs. Kernel names follow
 * ampc_k_<op>_<dst><src>__<isa>. */
#ifndef AMPC_KERNELS_H
#define AMPC_KERNELS_H

#include "../core/core.h"

/* dst: (n) of the implementation's dst dtype; src: (n) of its src dtype. No overlap. */
typedef void (*ampc_k_cvt_fn)(void *restrict dst, const void *restrict src, size_t n);

#define AMPCI_MAX_NEEDS 2

/* One row-conversion implementation, as registered by a kernel folder. */
typedef struct ampci_cvt_impl {
    const char *name;                       /* "ampc_k_cvt_f16f32__avx512" */
    ampc_isa level;                         /* lowest kernel level that may use it */
    ampc_cpu_feature needs[AMPCI_MAX_NEEDS]; /* extra features beyond the level's; SSE42 = none */
    ampc_dtype dst, src;
    ampc_k_cvt_fn fn;
} ampci_cvt_impl;

struct ampc_kernels {
    ampc_isa isa;
    ampc_k_cvt_fn cvt[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT];   /* [dst][src]; NULL: generic path */
    const char *cvt_name[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT];
};

/* The table for a level (AUTO = the process's chosen level); levels above the CPU's best are lowered. */
AMPCI_HIDDEN const struct ampc_kernels *ampci_kernels(ampc_isa isa);

/* Every conversion implementation compiled in, best last within each (dst, src) pair. */
AMPCI_HIDDEN const ampci_cvt_impl *ampci_cvt_impls(size_t *count);
/* The CPU runs it (its level and extra features are usable here). */
AMPCI_HIDDEN bool ampci_cvt_impl_usable(const ampci_cvt_impl *impl);

/* Any dtype pair, element by element through the scalar rules (ints truncate and saturate). */
AMPCI_HIDDEN void ampci_convert_generic(void *dst, ampc_dtype dst_dtype, const void *src, ampc_dtype src_dtype,
                                        size_t n);

/* ampc_convert through a given table (contexts use their own level). */
AMPCI_HIDDEN ampc_status ampci_convert_with(const struct ampc_kernels *k, void *dst, ampc_dtype dst_dtype,
                                            const void *src, ampc_dtype src_dtype, size_t n);

/* Per-folder registries (kernels/<isa>/convert_<isa>.c). */
extern AMPCI_HIDDEN const ampci_cvt_impl ampci_cvt_ref[];
extern AMPCI_HIDDEN const size_t ampci_cvt_ref_count;
extern AMPCI_HIDDEN const ampci_cvt_impl ampci_cvt_avx2[];
extern AMPCI_HIDDEN const size_t ampci_cvt_avx2_count;
extern AMPCI_HIDDEN const ampci_cvt_impl ampci_cvt_avx512[];
extern AMPCI_HIDDEN const size_t ampci_cvt_avx512_count;

#endif
