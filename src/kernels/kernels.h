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

/* ---- nn family kernels ---- */
/* Cross-entropy rows: for each row r of logits (rows, cols), lse[r] = log(sum(exp(logits[r, :]))) and
 * loss[r] = lse[r] - logits[r, targets[r]]; rows whose target is ignore_index get loss 0 (lse is still
 * written). Targets are already validated (in [0, cols) or ignore_index). */
typedef void (*ampc_k_xent_fn)(float *loss, float *lse, const float *logits, const int64_t *targets, int64_t rows,
                               int64_t cols, int64_t ignore_index);
/* gx (rows, cols) = (exp(logits - lse) - onehot(target)) * scale on kept rows, 0 on ignored rows. */
typedef void (*ampc_k_xent_bw_fn)(float *gx, const float *logits, const float *lse, const int64_t *targets,
                                  int64_t rows, int64_t cols, int64_t ignore_index, float scale);
/* Embedding backward over a block of `cols` columns: gw[ids[i], :] += gy[i, :] for i = 0..n-1 in that
 * order (so repeated ids sum deterministically); rows of gw (V rows, zeroed by the caller) and of gy (n
 * rows) are `ld` floats apart. Column blocks are independent, so a caller may split them over threads.
 * ids are already validated. */
typedef void (*ampc_k_embedding_bw_fn)(float *gw, const float *gy, const int64_t *ids, int64_t n, int64_t cols,
                                       int64_t ld);

/* ---- conv family kernels ---- */
/* Geometry of a 2-D window op (conv2d, max_pool2d): N images of C planes (H, W), kernel (KH, KW), stride
 * (sh, sw), padding (ph, pw), output planes (OH, OW). Window (oh, ow) covers input rows oh*sh - ph + kh
 * and columns ow*sw - pw + kw; positions outside the plane are padding. */
typedef struct ampci_conv_geom {
    int64_t N, C, H, W, KH, KW, OH, OW;
    int64_t sh, sw, ph, pw;
} ampci_conv_geom;
/* im2row in the slot's dtype (a plain copy, no rounding): rows [r0, r1) of col (N*OH*OW, C*KH*KW); row
 * (n, oh, ow) holds window (oh, ow) of image n of x (contiguous (N, C, H, W)) in (c, kh, kw) order, 0 in
 * the padding. */
typedef void (*ampc_k_im2col_fn)(void *col, const void *x, const ampci_conv_geom *g, int64_t r0, int64_t r1);
/* The adjoint: planes [p0, p1) (plane = n*C + c) of gx (N, C, H, W) F32 are written (not accumulated) as
 * the sum of the gcol (N*OH*OW, C*KH*KW) F32 entries that im2row read from them, in a fixed order. */
typedef void (*ampc_k_col2im_fn)(float *gx, const float *gcol, const ampci_conv_geom *g, int64_t p0, int64_t p1);
/* Max pooling of planes [p0, p1) (N*C planes of H*W): y (OH*OW per plane) = the window maxima (padding is
 * -inf; the first maximum in row-major window order wins; NaN propagates), arg = its index h*W + w in the
 * plane. */
typedef void (*ampc_k_maxpool_fn)(float *y, int32_t *arg, const float *x, const ampci_conv_geom *g, int64_t p0,
                                  int64_t p1);
/* planes [p0, p1) of gx (H*W each) written: gy routed to arg, overlapping windows summed in a fixed order. */
typedef void (*ampc_k_maxpool_bw_fn)(float *gx, const float *gy, const int32_t *arg, const ampci_conv_geom *g,
                                     int64_t p0, int64_t p1);
/* Scaled dot-product attention over BH independent heads. q (BH, Tq, D), k (BH, Tk, D), v (BH, Tk, Dv),
 * contiguous, of dtype dt; causal masks key j > query i. Scores and probabilities stay F32 or wider. */
typedef struct ampci_attn {
    int64_t BH, Tq, Tk, D, Dv;
    ampc_dtype dt;
    const void *q, *k, *v;
    bool causal;
    double scale;   /* 1 / sqrt(D) */
} ampci_attn;
/* o (BH, Tq, Dv) F32; stats (BH, Tq, 2) F32, when non-NULL, receives per query row what the backward
 * needs to rebuild the probabilities (the ref kernel: the row max of the scaled scores and 1 / sum exp).
 * May use the context's threads; results do not depend on the thread count. Fails only for lack of
 * memory. */
typedef ampc_status (*ampc_k_attention_fn)(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats);
/* gq, gk, gv (F32, the shapes of q, k, v; each may be NULL: not wanted) from go (BH, Tq, Dv) of dtype dt
 * and the forward's stats. */
typedef ampc_status (*ampc_k_attention_bw_fn)(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go,
                                              float *gq, float *gk, float *gv);
/* Fills the attention slots (kernels/ref/attention_ref.c; called by ampci_fill_ref_conv). */
AMPCI_HIDDEN void ampci_fill_ref_attention(struct ampc_kernels *k);

/* ---- optimizer and scaler kernels (src/optim, src/amp/grad_scaler.c; kernels/ref/optim_ref.c) ---- */
/* One SGD step on n F32 weights w with gradient g, PyTorch's order of operations in F32:
 * d = g + wd w; buf = first ? d : momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf;
 * w = w - lr d. buf is unused without momentum. */
typedef struct ampci_sgd_args {
    float lr, weight_decay, momentum, dampening;
    bool nesterov, first;
} ampci_sgd_args;
typedef void (*ampc_k_sgd_fn)(float *w, const float *g, float *buf, int64_t n, const ampci_sgd_args *a);
/* One AdamW step (torch.optim.AdamW, single-tensor path) in F32: w *= decay; m = lerp(m, g, 1 - beta1);
 * v = beta2 v + (1 - beta2) g^2; w -= step_size m / (sqrt(v) / bias2_sqrt + eps). */
typedef struct ampci_adamw_args {
    float decay;          /* 1 - lr * weight_decay */
    float beta1, beta2, eps;
    float step_size;      /* lr / (1 - beta1^t) */
    float bias2_sqrt;     /* sqrt(1 - beta2^t) */
} ampci_adamw_args;
typedef void (*ampc_k_adamw_fn)(float *w, const float *g, float *m, float *v, int64_t n, const ampci_adamw_args *a);
/* Multiplies n gradient values (of the slot's dtype, in place) by inv unless inv == 1 and returns whether
 * any value was non-finite before the multiplication (PyTorch's _amp_foreach_non_finite_check_and_unscale_:
 * non-finite values are multiplied too and stay non-finite). */
typedef bool (*ampc_k_unscale_fn)(void *g, int64_t n, float inv);
/* Sum of squares of n values of the slot's dtype, in double (the global grad norm). */
typedef double (*ampc_k_sumsq_fn)(const void *g, int64_t n);

/* Slots listed by `ampc info` (each kernel family's fill function names what it installs). */
typedef enum ampci_slot {
    AMPCI_SLOT_GEMM_F32 = 0, AMPCI_SLOT_GEMM_F16, AMPCI_SLOT_GEMM_BF16,
    AMPCI_SLOT_GEMM_F32_BF16X1, AMPCI_SLOT_GEMM_F32_BF16X3,
    AMPCI_SLOT_UNARY, AMPCI_SLOT_BINARY, AMPCI_SLOT_SOFTMAX, AMPCI_SLOT_LAYERNORM, AMPCI_SLOT_XENT,
    AMPCI_SLOT_EMBEDDING_BW, AMPCI_SLOT_IM2COL, AMPCI_SLOT_COL2IM, AMPCI_SLOT_MAXPOOL, AMPCI_SLOT_ATTENTION,
    AMPCI_SLOT_SGD, AMPCI_SLOT_ADAMW, AMPCI_SLOT_UNSCALE, AMPCI_SLOT_SUMSQ,
    AMPCI_SLOT_COUNT
} ampci_slot;
/* "gemm_f32", "softmax", ...: the name `ampc info` shows for a slot. */
AMPCI_HIDDEN const char *ampci_slot_name(ampci_slot slot);

struct ampc_kernels {
    ampc_isa isa;
    const char *impl[AMPCI_SLOT_COUNT];    /* the implementation installed in each slot ("ampc_k_..."); NULL: none */
    ampc_k_cvt_fn cvt[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT];   /* [dst][src]; NULL: generic path */
    const char *cvt_name[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT];
    ampc_k_unary_fn unary[AMPCI_UNARY_COUNT];
    ampc_k_unary_bw_fn unary_bw[AMPCI_UNARY_COUNT];
    ampc_k_binary_fn binary[AMPCI_BINARY_COUNT];
    ampc_k_gemm_fn gemm[AMPC_DTYPE_COUNT];                   /* by the dtype of a and b: F32, F16, BF16 */
    const char *gemm_name[AMPC_DTYPE_COUNT];
    /* F32 GEMMs allowed to run on BF16 hardware (ampc_set_fp32_matmul_precision): x1 = one BF16 pass
     * (HIGH... MEDIUM), x3 = a*b as ahi*bhi + ahi*blo + alo*bhi with a = ahi + alo split exactly into BF16
     * parts (HIGH). NULL where that would not be faster than the F32 slot: the op layer then runs F32. */
    ampc_k_gemm_fn gemm_f32_bf16x1, gemm_f32_bf16x3;
    ampc_k_softmax_fn softmax;
    ampc_k_softmax_bw_fn softmax_bw;
    ampc_k_layernorm_fn layernorm;
    ampc_k_layernorm_bw_fn layernorm_bw;
    /* ---- nn family (ops/norm.c, loss.c, embedding.c, dropout.c; kernels/ref/nn_ref.c) ---- */
    ampc_k_xent_fn xent;
    ampc_k_xent_bw_fn xent_bw;
    ampc_k_embedding_bw_fn embedding_bw;
    /* ---- conv family (ops/conv.c, attention.c; kernels/ref/conv_ref.c, attention_ref.c) ---- */
    ampc_k_im2col_fn im2col[AMPC_DTYPE_COUNT];   /* by the dtype of x and col: F32, F16, BF16 */
    ampc_k_col2im_fn col2im;
    ampc_k_maxpool_fn maxpool;
    ampc_k_maxpool_bw_fn maxpool_bw;
    ampc_k_attention_fn attention;
    ampc_k_attention_bw_fn attention_bw;
    /* ---- optimizer and scaler ---- */
    ampc_k_sgd_fn sgd;
    ampc_k_adamw_fn adamw;
    ampc_k_unscale_fn unscale[AMPC_DTYPE_COUNT];   /* F32, F16, BF16 */
    ampc_k_sumsq_fn sumsq[AMPC_DTYPE_COUNT];
};

/* Fills every compute slot with the ref kernels (kernels/ref/). */
AMPCI_HIDDEN void ampci_kernels_fill_ref(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_gemm(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_eltwise(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_norm(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_nn(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_conv(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_ref_optim(struct ampc_kernels *k);
/* ISA folders override compute slots for their level (called after the ref fill, only when the level is
 * allowed and its CPU features are usable; a folder checks finer features such as AVX512-BF16 itself). */
AMPCI_HIDDEN void ampci_fill_avx512(struct ampc_kernels *k);
/* The families of the avx512 folder (fill_avx512.c calls them in this order), and the amx folder. */
AMPCI_HIDDEN void ampci_fill_avx512_eltwise(struct ampc_kernels *k);
AMPCI_HIDDEN void ampci_fill_avx512_attention(struct ampc_kernels *k);
/* The attention slots alone; allow_bf16dp = false forces the widening BF16 path (tests), and the
 * kernel's vector exp (y, x: (n)) for its accuracy test. */
AMPCI_HIDDEN void ampci_fill_avx512_attention_ex(struct ampc_kernels *k, bool allow_bf16dp);
AMPCI_HIDDEN void ampci_attn_exp_avx512(float *y, const float *x, int64_t n);
AMPCI_HIDDEN void ampci_fill_amx(struct ampc_kernels *k);
/* The amx GEMM slots alone (ampci_fill_amx calls it). */
AMPCI_HIDDEN void ampci_fill_amx_gemm(struct ampc_kernels *k);
/* The reference for the split F32 GEMMs (passes 1 or 3, see gemm_f32_bf16x1/x3): a test oracle, not a
 * slot (the ref level runs F32 GEMMs in F32 whatever the precision setting). */
AMPCI_HIDDEN ampc_status ampci_gemm_f32_split_ref(ampc_ctx *ctx, const ampci_gemm *g, int passes);
/* The avx512 GEMM slots alone; allow_bf16dp = false forces the widening BF16 kernel even on CPUs with
 * AVX512-BF16 (tests compare both paths). */
AMPCI_HIDDEN void ampci_fill_avx512_gemm(struct ampc_kernels *k, bool allow_bf16dp);

/* The GEMM kernel for operands of dtype dt under the context's FP32 matmul precision (fp32_precision.c). */
AMPCI_HIDDEN ampc_k_gemm_fn ampci_gemm_fn(const ampc_ctx *ctx, ampc_dtype dt);

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
