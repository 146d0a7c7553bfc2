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

/* ---- compute kernels: F32 in and out unless said otherwise; the op layer converts dtypes ---- */

typedef enum ampci_unary {
    AMPCI_UNARY_NEG = 0, AMPCI_UNARY_EXP, AMPCI_UNARY_LOG, AMPCI_UNARY_SQRT, AMPCI_UNARY_TANH,
    AMPCI_UNARY_SIGMOID, AMPCI_UNARY_RELU, AMPCI_UNARY_GELU_ERF, AMPCI_UNARY_GELU_TANH, AMPCI_UNARY_COUNT
} ampci_unary;
/* y: (n), x: (n) */
typedef void (*ampc_k_unary_fn)(float *y, const float *x, int64_t n);
/* gx: (n) = gy * f'(x); x and y (= f(x)) are both given so a kernel can use either */
typedef void (*ampc_k_unary_bw_fn)(float *gx, const float *gy, const float *x, const float *y, int64_t n);

typedef enum ampci_binary { AMPCI_BINARY_ADD = 0, AMPCI_BINARY_SUB, AMPCI_BINARY_MUL, AMPCI_BINARY_DIV,
                            AMPCI_BINARY_COUNT } ampci_binary;
/* z: (n) = x op y, all (n) */
typedef void (*ampc_k_binary_fn)(float *z, const float *x, const float *y, int64_t n);

/* One GEMM: c (M, N) F32 row-major (ldc) = beta * c + op(a) op(b), where op(a) is (M, K): a stored (M, K)
 * with leading dimension lda, or (K, M) when ta; op(b) is (K, N): b stored (K, N), or (N, K) when tb.
 * a and b have the slot's dtype; products are exact in F32 (F16/BF16 significands fit) and accumulate in
 * F32. beta = 0 ignores c's old contents (NaN included). */
typedef struct ampci_gemm {
    int64_t M, N, K;
    const void *a;
    int64_t lda;
    bool ta;
    const void *b;
    int64_t ldb;
    bool tb;
    float *c;
    int64_t ldc;
    float beta;
} ampci_gemm;
/* May use the context's threads; results do not depend on the thread count. Fails only for lack of
 * scratch memory (AMPC_STATUS_OOM, error recorded). */
typedef ampc_status (*ampc_k_gemm_fn)(ampc_ctx *ctx, const ampci_gemm *g);

/* Row softmax: y, x: (rows, cols); log selects log_softmax. */
typedef void (*ampc_k_softmax_fn)(float *y, const float *x, int64_t rows, int64_t cols, bool log);
/* gx = J^T gy from the saved output y (softmax or log_softmax values). */
typedef void (*ampc_k_softmax_bw_fn)(float *gx, const float *gy, const float *y, int64_t rows, int64_t cols,
                                     bool log);
/* Layer norm over rows of length cols: y = (x - mean) * rstd * w + b (w, b may be NULL); mean and rstd
 * (rows) are saved for the backward. */
typedef void (*ampc_k_layernorm_fn)(float *y, float *mean, float *rstd, const float *x, const float *w,
                                    const float *b, int64_t rows, int64_t cols, float eps);
/* gx (rows, cols); gw, gb (cols) are written (not accumulated) when non-NULL. */
typedef void (*ampc_k_layernorm_bw_fn)(float *gx, float *gw, float *gb, const float *gy, const float *x,
                                       const float *mean, const float *rstd, const float *w, int64_t rows,
                                       int64_t cols);

struct ampc_kernels {
    ampc_isa isa;
    ampc_k_cvt_fn cvt[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT];   /* [dst][src]; NULL: generic path */
    const char *cvt_name[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT];
    ampc_k_unary_fn unary[AMPCI_UNARY_COUNT];
    ampc_k_unary_bw_fn unary_bw[AMPCI_UNARY_COUNT];
    ampc_k_binary_fn binary[AMPCI_BINARY_COUNT];
    ampc_k_gemm_fn gemm[AMPC_DTYPE_COUNT];                   /* by the dtype of a and b: F32, F16, BF16 */
    const char *gemm_name[AMPC_DTYPE_COUNT];
    ampc_k_softmax_fn softmax;
    ampc_k_softmax_bw_fn softmax_bw;
    ampc_k_layernorm_fn layernorm;
    ampc_k_layernorm_bw_fn layernorm_bw;
    /* ---- nn family (ops/norm.c, loss.c, embedding.c, dropout.c; kernels/ref/nn_ref.c) ---- */
    /* ---- conv family (ops/conv.c, attention.c; kernels/ref/conv_ref.c, attention_ref.c) ---- */
};

/* Fills every compute slot with the ref kernels (kernels/ref/). */
AMPCI_HIDDEN void ampci_kernels_fill_ref(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_gemm(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_eltwise(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_norm(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_nn(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_conv(struct ampc_kernels *k);

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
