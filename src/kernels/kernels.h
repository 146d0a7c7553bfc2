/* kernels.h: the kernel signatures, the one kernel registry and the resolved per-level tables.
 *
 * A kernel is a function whose C identifier is its name, ampc_k_<op>_<dtypes>__<isa>[_<variant>] (so the
 * name a table, `ampc info`, a test or a benchmark prints can never belong to another function). Each
 * folder (kernels/ref, avx2, avx512, amx) exports one table of entries {slot, key, name, level, needs,
 * fn}; ref/ is complete (one usable-everywhere entry in every cell: the fallback and the test oracle),
 * the ISA folders add faster candidates for the cells they speed up. registry.c collects, per cell (a
 * slot and its key: a dtype, a dtype pair or an op), the usable candidates of each level; dispatch.c
 * picks one, by measurement (tune.h) or by the fixed rule, into `struct ampc_kernels`, which is all the
 * rest of the library sees. Tests and benchmarks iterate the same registry, so a new kernel is one entry. */
#ifndef AMPC_KERNELS_H
#define AMPC_KERNELS_H

#include "../core/core.h"

/* Every signature comes twice: the function type (ampci_<x>_kernel, to declare kernels) and the pointer
 * (ampc_k_<x>_fn, for tables and callers). */

/* dst: (n) of the implementation's dst dtype; src: (n) of its src dtype. No overlap. */
typedef void ampci_cvt_kernel(void *restrict dst, const void *restrict src, size_t n);
typedef ampci_cvt_kernel *ampc_k_cvt_fn;

/* ---- compute kernels: F32 in and out unless said otherwise; the op layer converts dtypes ---- */

typedef enum ampci_unary {
    AMPCI_UNARY_NEG = 0,
    AMPCI_UNARY_EXP,
    AMPCI_UNARY_LOG,
    AMPCI_UNARY_SQRT,
    AMPCI_UNARY_TANH,
    AMPCI_UNARY_SIGMOID,
    AMPCI_UNARY_RELU,
    AMPCI_UNARY_GELU_ERF,
    AMPCI_UNARY_GELU_TANH,
    AMPCI_UNARY_COUNT
} ampci_unary;
/* y: (n), x: (n) */
typedef void ampci_unary_kernel(float *y, const float *x, int64_t n);
typedef ampci_unary_kernel *ampc_k_unary_fn;
/* gx: (n) = gy * f'(x); x and y (= f(x)) are both given so a kernel can use either */
typedef void ampci_unary_bw_kernel(float *gx, const float *gy, const float *x, const float *y, int64_t n);
typedef ampci_unary_bw_kernel *ampc_k_unary_bw_fn;

typedef enum ampci_binary {
    AMPCI_BINARY_ADD = 0,
    AMPCI_BINARY_SUB,
    AMPCI_BINARY_MUL,
    AMPCI_BINARY_DIV,
    AMPCI_BINARY_COUNT
} ampci_binary;
/* z: (n) = x op y, all (n) */
typedef void ampci_binary_kernel(float *z, const float *x, const float *y, int64_t n);
typedef ampci_binary_kernel *ampc_k_binary_fn;

/* One GEMM: c (M, N) F32 row-major (ldc) = beta * c + op(a) op(b), where op(a) is (M, K): a stored (M, K)
 * with leading dimension lda, or (K, M) when ta; op(b) is (K, N): b stored (K, N), or (N, K) when tb.
 * a and b have the slot's dtype; products are exact in F32 (F16/BF16 significands fit) and accumulate in
 * F32. beta = 0 ignores c's old contents (NaN included).
 * The write-out (the op layer's epilogue, fused so the result makes one trip to memory): with a bias,
 * c = (beta * c + op(a) op(b)) + bias[column] (bias (N) F32, added once after the whole K sum: the bits of
 * a bias-free GEMM followed by an F32 add); with c16 (beta 0 only), the result goes there instead of c,
 * rounded once (RNE, ampc_convert's bits) to c16_dt (BF16 or F16), rows ldc elements apart, and c is
 * neither read nor written (it may be NULL). */
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
    const float *bias; /* (N) or NULL */
    uint16_t *c16;     /* NULL: the result is c's */
    ampc_dtype c16_dt; /* c16's dtype: BF16 or F16 */
} ampci_gemm;
/* May use the context's threads; results do not depend on the thread count. Fails only for lack of
 * scratch memory (AMPC_STATUS_OOM, error recorded). */
typedef ampc_status ampci_gemm_kernel(ampc_ctx *ctx, const ampci_gemm *g);
typedef ampci_gemm_kernel *ampc_k_gemm_fn;

/* Row softmax: y, x: (rows, cols); log selects log_softmax. */
typedef void ampci_softmax_kernel(float *y, const float *x, int64_t rows, int64_t cols, bool log);
typedef ampci_softmax_kernel *ampc_k_softmax_fn;
/* gx = J^T gy from the saved output y (softmax or log_softmax values). */
typedef void ampci_softmax_bw_kernel(float *gx, const float *gy, const float *y, int64_t rows, int64_t cols, bool log);
typedef ampci_softmax_bw_kernel *ampc_k_softmax_bw_fn;
/* Layer norm over rows of length cols: y = (x - mean) * rstd * w + b (w, b may be NULL); mean and rstd
 * (rows) are saved for the backward. */
typedef void ampci_layernorm_kernel(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                                    int64_t rows, int64_t cols, float eps);
typedef ampci_layernorm_kernel *ampc_k_layernorm_fn;
/* gx (rows, cols); gw, gb (cols) are written (not accumulated) when non-NULL. */
typedef void ampci_layernorm_bw_kernel(float *gx, float *gw, float *gb, const float *gy, const float *x,
                                       const float *mean, const float *rstd, const float *w, int64_t rows,
                                       int64_t cols);
typedef ampci_layernorm_bw_kernel *ampc_k_layernorm_bw_fn;

/* ---- nn family kernels ---- */
/* Cross-entropy rows: for each row r of logits (rows, cols), lse[r] = log(sum(exp(logits[r, :]))) and
 * loss[r] = lse[r] - logits[r, targets[r]]; rows whose target is ignore_index get loss 0 (lse is still
 * written). Targets are already validated (in [0, cols) or ignore_index). */
typedef void ampci_xent_kernel(float *loss, float *lse, const float *logits, const int64_t *targets, int64_t rows,
                               int64_t cols, int64_t ignore_index);
typedef ampci_xent_kernel *ampc_k_xent_fn;
/* gx (rows, cols) = (exp(logits - lse) - onehot(target)) * scale on kept rows, 0 on ignored rows. */
typedef void ampci_xent_bw_kernel(float *gx, const float *logits, const float *lse, const int64_t *targets,
                                  int64_t rows, int64_t cols, int64_t ignore_index, float scale);
typedef ampci_xent_bw_kernel *ampc_k_xent_bw_fn;
/* Embedding backward over a block of `cols` columns: gw[ids[i], :] += gy[i, :] for i = 0..n-1 in that
 * order (so repeated ids sum deterministically); rows of gw (V rows, zeroed by the caller) and of gy (n
 * rows) are `ld` floats apart. Column blocks are independent, so a caller may split them over threads.
 * ids are already validated. */
typedef void ampci_embedding_bw_kernel(float *gw, const float *gy, const int64_t *ids, int64_t n, int64_t cols,
                                       int64_t ld);
typedef ampci_embedding_bw_kernel *ampc_k_embedding_bw_fn;

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
typedef void ampci_im2col_kernel(void *col, const void *x, const ampci_conv_geom *g, int64_t r0, int64_t r1);
typedef ampci_im2col_kernel *ampc_k_im2col_fn;
/* The adjoint: planes [p0, p1) (plane = n*C + c) of gx (N, C, H, W) F32 are written (not accumulated) as
 * the sum of the gcol (N*OH*OW, C*KH*KW) F32 entries that im2row read from them, in ref's order: +0, then
 * the entries in output pixel order (oh, then ow, ascending). Every entry gives the same bits. */
typedef void ampci_col2im_kernel(float *gx, const float *gcol, const ampci_conv_geom *g, int64_t p0, int64_t p1);
typedef ampci_col2im_kernel *ampc_k_col2im_fn;
/* Max pooling of planes [p0, p1) (N*C planes of H*W): y (OH*OW per plane) = the window maxima (padding is
 * -inf; the first maximum in row-major window order wins; NaN propagates), arg = its index h*W + w in the
 * plane. */
typedef void ampci_maxpool_kernel(float *y, int32_t *arg, const float *x, const ampci_conv_geom *g, int64_t p0,
                                  int64_t p1);
typedef ampci_maxpool_kernel *ampc_k_maxpool_fn;
/* planes [p0, p1) of gx (H*W each) written: +0, plus gy routed to arg in output order (overlapping windows
 * summed so), as ref: every entry gives the same bits. */
typedef void ampci_maxpool_bw_kernel(float *gx, const float *gy, const int32_t *arg, const ampci_conv_geom *g,
                                     int64_t p0, int64_t p1);
typedef ampci_maxpool_bw_kernel *ampc_k_maxpool_bw_fn;
/* Scaled dot-product attention over BH independent heads. q (BH, Tq, D), k (BH, Tk, D), v (BH, Tk, Dv),
 * contiguous, of dtype dt; causal masks key j > query i. Scores and probabilities stay F32 or wider. */
typedef struct ampci_attn {
    int64_t BH, Tq, Tk, D, Dv;
    ampc_dtype dt;
    const void *q, *k, *v;
    bool causal;
    double scale; /* 1 / sqrt(D) */
} ampci_attn;
/* o (BH, Tq, Dv) F32; stats (BH, Tq, 2) F32, when non-NULL, receives per query row what the backward
 * needs to rebuild the probabilities (the ref kernel: the row max of the scaled scores and 1 / sum exp).
 * May use the context's threads; results do not depend on the thread count. Fails only for lack of
 * memory. */
typedef ampc_status ampci_attention_kernel(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats);
typedef ampci_attention_kernel *ampc_k_attention_fn;
/* gq, gk, gv (F32, the shapes of q, k, v; each may be NULL: not wanted) from go (BH, Tq, Dv) of dtype dt
 * and the forward's stats. */
typedef ampc_status ampci_attention_bw_kernel(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go,
                                              float *gq, float *gk, float *gv);
typedef ampci_attention_bw_kernel *ampc_k_attention_bw_fn;

/* ---- optimizer and scaler kernels (src/optim, src/amp/grad_scaler.c; kernels/ref/optim_ref.c) ---- */
/* One SGD step on n F32 weights w with gradient g, PyTorch's order of operations in F32:
 * d = g + wd w; buf = first ? d : momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf;
 * w = w - lr d. buf is unused without momentum. */
typedef struct ampci_sgd_args {
    float lr, weight_decay, momentum, dampening;
    bool nesterov, first;
} ampci_sgd_args;
typedef void ampci_sgd_kernel(float *w, const float *g, float *buf, int64_t n, const ampci_sgd_args *a);
typedef ampci_sgd_kernel *ampc_k_sgd_fn;
/* One AdamW step (torch.optim.AdamW, single-tensor path) in F32: w *= decay; m = lerp(m, g, 1 - beta1);
 * v = beta2 v + (1 - beta2) g^2; w -= step_size m / (sqrt(v) / bias2_sqrt + eps). */
typedef struct ampci_adamw_args {
    float decay; /* 1 - lr * weight_decay */
    float beta1, beta2, eps;
    float step_size;  /* lr / (1 - beta1^t) */
    float bias2_sqrt; /* sqrt(1 - beta2^t) */
} ampci_adamw_args;
typedef void ampci_adamw_kernel(float *w, const float *g, float *m, float *v, int64_t n, const ampci_adamw_args *a);
typedef ampci_adamw_kernel *ampc_k_adamw_fn;
/* Multiplies n gradient values (of the slot's dtype, in place) by inv unless inv == 1 and returns whether
 * any value was non-finite before the multiplication (PyTorch's _amp_foreach_non_finite_check_and_unscale_:
 * non-finite values are multiplied too and stay non-finite). */
typedef bool ampci_unscale_kernel(void *g, int64_t n, float inv);
typedef ampci_unscale_kernel *ampc_k_unscale_fn;
/* Sum of squares of n values of the slot's dtype, in double (the global grad norm). */
typedef double ampci_sumsq_kernel(const void *g, int64_t n);
typedef ampci_sumsq_kernel *ampc_k_sumsq_fn;
/* Column sums (a bias gradient): acc[c] += g[r][c] for r = 0..rows-1 in row order, each in double, for
 * the w columns of g (rows of the slot's dtype, ld elements apart). Exact order, so every level gives the
 * same bits. */
typedef void ampci_colsum_kernel(double *acc /* (w) */, const void *g /* (rows, ld) */, int64_t ld, int64_t rows,
                                 int64_t w);
typedef ampci_colsum_kernel *ampc_k_colsum_fn;

/* Range statistics (the doctor's, src/amp/stats.c) of n F32 values, added into acc: hist[e] counts the
 * biased exponent e of |x| (bin 0: zeros and subnormals; 255: inf and NaN); ge[j] counts |x|'s bit
 * pattern >= thr[j] for j < nthr (thresholds on absolute bit patterns: a format's overflow, underflow and
 * subnormal boundaries, found through its conversion code); zeros; amax_bits the largest finite |x| bits
 * and min_bits the smallest non-zero finite ones (start them at 0 and 0x7F800000). Integer counts, so
 * every path gives the same numbers. */
#define AMPCI_RANGE_MAX_THR 16
typedef struct ampci_range_acc {
    uint64_t hist[256];
    uint64_t ge[AMPCI_RANGE_MAX_THR];
    uint64_t zeros;
    uint32_t amax_bits, min_bits;
} ampci_range_acc;
typedef void ampci_range_kernel(const float *x, int64_t n, const uint32_t *thr, int nthr, ampci_range_acc *acc);
typedef ampci_range_kernel *ampc_k_range_fn;

/* FP8 quantisation (TransformerEngine's saturating cast) of n F32 values: dst[i] = the BF16 bit pattern of
 * q(x[i] * scale), where q rounds to nearest even into FP8-E4M3 (fmt 0) or FP8-E5M2 (fmt 1), keeping
 * subnormals, and saturates: a finite product beyond the format's largest finite (448 / 57344), or an
 * infinite one, becomes that largest finite with its sign and is counted (the return value); NaN stays
 * NaN (a quiet BF16 NaN, 0x7FC0 with the input's sign). *amax = max(*amax, largest finite |x[i]|) over the
 * UNSCALED inputs (the delayed-scaling history records it). scale is a power of two in practice but any
 * finite positive float must work (the product x * scale is rounded to F32 first, then to FP8: exactly
 * what ampc_fp8_e4m3_from_f32(x * scale) does after saturation).
 * The count, precisely: a non-NaN product p counts exactly when its RNE rounding to the format's
 * precision, with an unbounded exponent, exceeds max, i.e. exactly when ampc_fp8_*_from_f32(p) overflows
 * (to NaN for E4M3, to inf for E5M2). E4M3: |p| > 464 (448 < |p| <= 464 rounds to 448: not counted, 464
 * is the tie between 448 and 480 and goes to the even 448); E5M2: |p| >= 61440 (57344 < |p| < 61440
 * rounds to 57344: not counted, 61440 is the tie between 57344 and 65536 and goes to the even 65536);
 * +-inf counts in both. */
#define AMPCI_QUANT8_E4M3 0
#define AMPCI_QUANT8_E5M2 1
typedef uint64_t ampci_quant8_kernel(uint16_t *dst /* (n) BF16 bits */, const float *x /* (n) */, int64_t n,
                                     float scale, int fmt, float *amax);
typedef ampci_quant8_kernel *ampc_k_quant8_fn;

/* ---- the registry ---- */

/* A slot is one kind of kernel (one signature, one field of struct ampc_kernels); a cell is a slot and a
 * key. Keys: CONVERT (dtype = dst, src); GEMM, IM2COL, UNSCALE, SUMSQ, COLSUM: dtype (the operands'); UNARY,
 * UNARY_BW: op (ampci_unary); BINARY: op (ampci_binary); the other slots have one cell (key 0). */
typedef enum ampci_slot {
    AMPCI_SLOT_CONVERT = 0,
    AMPCI_SLOT_GEMM,
    AMPCI_SLOT_GEMM_F32_BF16X1,
    AMPCI_SLOT_GEMM_F32_BF16X3,
    AMPCI_SLOT_UNARY,
    AMPCI_SLOT_UNARY_BW,
    AMPCI_SLOT_BINARY,
    AMPCI_SLOT_SOFTMAX,
    AMPCI_SLOT_SOFTMAX_BW,
    AMPCI_SLOT_LAYERNORM,
    AMPCI_SLOT_LAYERNORM_BW,
    AMPCI_SLOT_XENT,
    AMPCI_SLOT_XENT_BW,
    AMPCI_SLOT_EMBEDDING_BW,
    AMPCI_SLOT_IM2COL,
    AMPCI_SLOT_COL2IM,
    AMPCI_SLOT_MAXPOOL,
    AMPCI_SLOT_MAXPOOL_BW,
    AMPCI_SLOT_ATTENTION,
    AMPCI_SLOT_ATTENTION_BW,
    AMPCI_SLOT_SGD,
    AMPCI_SLOT_ADAMW,
    AMPCI_SLOT_UNSCALE,
    AMPCI_SLOT_SUMSQ,
    AMPCI_SLOT_RANGE,
    AMPCI_SLOT_QUANT8,
    AMPCI_SLOT_COLSUM,
    AMPCI_SLOT_COUNT
} ampci_slot;
/* Keys run over [0, AMPCI_KEY_COUNT): a conversion's is dst * AMPC_DTYPE_COUNT + src. */
#define AMPCI_KEY_COUNT (AMPC_DTYPE_COUNT * AMPC_DTYPE_COUNT)
typedef enum ampci_key_kind { AMPCI_KEY_NONE = 0, AMPCI_KEY_DTYPE, AMPCI_KEY_OP, AMPCI_KEY_PAIR } ampci_key_kind;
/* What a slot's cells are keyed by (the list in the comment above, in code). */
AMPCI_HIDDEN ampci_key_kind ampci_slot_key_kind(ampci_slot slot);

/* What dispatch may do with an entry. Oracles and emulations are compared against and timed, never run by
 * the library's ops. */
typedef enum ampci_role {
    AMPCI_ROLE_KERNEL = 0, /* a candidate: dispatch may choose it */
    AMPCI_ROLE_ORACLE,     /* the ref entry of a cell whose ref level runs nothing (the split F32 GEMMs: at
                                the ref level F32 GEMMs stay F32): the reference the faster entries match */
    AMPCI_ROLE_EMULATION,  /* a level's source run on an emulation of its instructions (tests/test_amx.c
                                builds kernels/amx/gemm_amx.c so; not in the library's registry) */
} ampci_role;

/* CPU feature sets: bit f for ampc_cpu_feature f (AMPCI_FEAT(AVX512_BF16)). */
#define AMPCI_FEAT(F) (1u << AMPC_CPU_##F)
/* This CPU's features as such a set: the usable ones, or (reported) all that CPUID reports. */
AMPCI_HIDDEN uint32_t ampci_feature_set(bool reported);

/* The function of an entry. Members are named after the slots, so AMPCI_ENTRY picks the member from the
 * slot and the compiler checks the function's type against the slot's signature. */
typedef union ampci_kernel_fn {
    ampc_k_cvt_fn CONVERT;
    ampc_k_gemm_fn GEMM, GEMM_F32_BF16X1, GEMM_F32_BF16X3;
    ampc_k_unary_fn UNARY;
    ampc_k_unary_bw_fn UNARY_BW;
    ampc_k_binary_fn BINARY;
    ampc_k_softmax_fn SOFTMAX;
    ampc_k_softmax_bw_fn SOFTMAX_BW;
    ampc_k_layernorm_fn LAYERNORM;
    ampc_k_layernorm_bw_fn LAYERNORM_BW;
    ampc_k_xent_fn XENT;
    ampc_k_xent_bw_fn XENT_BW;
    ampc_k_embedding_bw_fn EMBEDDING_BW;
    ampc_k_im2col_fn IM2COL;
    ampc_k_col2im_fn COL2IM;
    ampc_k_maxpool_fn MAXPOOL;
    ampc_k_maxpool_bw_fn MAXPOOL_BW;
    ampc_k_attention_fn ATTENTION;
    ampc_k_attention_bw_fn ATTENTION_BW;
    ampc_k_sgd_fn SGD;
    ampc_k_adamw_fn ADAMW;
    ampc_k_unscale_fn UNSCALE;
    ampc_k_sumsq_fn SUMSQ;
    ampc_k_range_fn RANGE;
    ampc_k_quant8_fn QUANT8;
    ampc_k_colsum_fn COLSUM;
} ampci_kernel_fn;

/* One registered kernel. */
typedef struct ampci_kernel {
    ampc_device_kind device; /* the registry's outer key: the device whose operations run it (the CPU for
                                the ISA folders; a GPU's kernels will register under their own device) */
    ampci_slot slot;
    ampc_dtype dtype;   /* key of CONVERT (the dst), GEMM, IM2COL, UNSCALE, SUMSQ, COLSUM; F32 elsewhere */
    ampc_dtype src;     /* key of CONVERT; elsewhere equal to dtype */
    int op;             /* key of UNARY, UNARY_BW (ampci_unary), BINARY (ampci_binary); 0 elsewhere */
    const char *name;   /* the function's identifier */
    ampc_isa level;     /* its folder's: the lowest table (and AMPC_ISA cap) that may run it */
    uint32_t needs;     /* CPU features it needs beyond its level's (AMPCI_FEAT bits) */
    uint32_t slow_with; /* the rule passes it over on CPUs whose CPUID reports one of these (a speed
                             judgement, not correctness: tests and benches still run it) */
    ampci_role role;
    ampci_kernel_fn fn;
} ampci_kernel;

/* Entry constructors for the folder tables; FN's identifier (after macro expansion) becomes the name.
 * The short forms take the level from AMPCI_FOLDER_LEVEL, which each table file defines. */
#define AMPCI_ENTRY(SLOT, DT, SRC, OP, FN, LEVEL, NEEDS, SLOW_WITH, ROLE)                                              \
    {                                                                                                                  \
        .device = AMPC_DEVICE_CPU, .slot = AMPCI_SLOT_##SLOT, .dtype = DT, .src = SRC, .op = OP,                       \
        .name = AMPCI_STR(FN), .level = LEVEL, .needs = NEEDS, .slow_with = SLOW_WITH, .role = ROLE, .fn = {           \
            .SLOT = FN                                                                                                 \
        }                                                                                                              \
    }
/* a one-cell slot */
#define AMPCI_K(SLOT, FN)                                                                                              \
    AMPCI_ENTRY(SLOT, AMPC_DTYPE_F32, AMPC_DTYPE_F32, 0, FN, AMPCI_FOLDER_LEVEL, 0, 0, AMPCI_ROLE_KERNEL)
/* a slot keyed by dtype (DT: F32, F16, BF16) */
#define AMPCI_K_DT(SLOT, DT, FN)                                                                                       \
    AMPCI_ENTRY(SLOT, AMPC_DTYPE_##DT, AMPC_DTYPE_##DT, 0, FN, AMPCI_FOLDER_LEVEL, 0, 0, AMPCI_ROLE_KERNEL)
/* a slot keyed by op (OP: an ampci_unary or ampci_binary constant) */
#define AMPCI_K_OP(SLOT, OP, FN)                                                                                       \
    AMPCI_ENTRY(SLOT, AMPC_DTYPE_F32, AMPC_DTYPE_F32, OP, FN, AMPCI_FOLDER_LEVEL, 0, 0, AMPCI_ROLE_KERNEL)
/* a conversion, src to dst */
#define AMPCI_K_CVT(DST, SRC, FN, NEEDS)                                                                               \
    AMPCI_ENTRY(CONVERT, AMPC_DTYPE_##DST, AMPC_DTYPE_##SRC, 0, FN, AMPCI_FOLDER_LEVEL, NEEDS, 0, AMPCI_ROLE_KERNEL)

/* The unary and binary ops as X(OP, op, ISA): the enum constant's suffix and the op's part of kernel
 * names, for folders that implement a whole family (ISA is passed through to X). */
/* clang-format off */
#define AMPCI_UNARY_OPS(X, ISA)                                                                                        \
    X(NEG, neg, ISA) X(EXP, exp, ISA) X(LOG, log, ISA) X(SQRT, sqrt, ISA) X(TANH, tanh, ISA)                           \
    X(SIGMOID, sigmoid, ISA) X(RELU, relu, ISA) X(GELU_ERF, gelu_erf, ISA) X(GELU_TANH, gelu_tanh, ISA)
/* clang-format on */
#define AMPCI_BINARY_OPS(X, ISA) X(ADD, add, ISA) X(SUB, sub, ISA) X(MUL, mul, ISA) X(DIV, div, ISA)
/* Their declarations (ampc_k_exp_f32__<ISA>, ampc_k_exp_bw_f32__<ISA>, ampc_k_add_f32__<ISA>) and entries. */
#define AMPCI_DECLARE_UNARY(OP, op, ISA)                                                                               \
    AMPCI_HIDDEN ampci_unary_kernel ampc_k_##op##_f32__##ISA;                                                          \
    AMPCI_HIDDEN ampci_unary_bw_kernel ampc_k_##op##_bw_f32__##ISA;
#define AMPCI_DECLARE_BINARY(OP, op, ISA) AMPCI_HIDDEN ampci_binary_kernel ampc_k_##op##_f32__##ISA;
#define AMPCI_K_UNARY(OP, op, ISA)                                                                                     \
    AMPCI_K_OP(UNARY, AMPCI_UNARY_##OP, ampc_k_##op##_f32__##ISA),                                                     \
        AMPCI_K_OP(UNARY_BW, AMPCI_UNARY_##OP, ampc_k_##op##_bw_f32__##ISA),
#define AMPCI_K_BINARY(OP, op, ISA) AMPCI_K_OP(BINARY, AMPCI_BINARY_##OP, ampc_k_##op##_f32__##ISA),

/* The folder tables, in the order the registry reads them (kernels/<isa>/: kernels_ref.c, convert_avx2.c,
 * kernels_avx512.c, gemm_amx.c). Within a cell a folder lists its entries best last. */
extern AMPCI_HIDDEN const ampci_kernel ampci_kernels_ref[];
extern AMPCI_HIDDEN const size_t ampci_kernels_ref_count;
extern AMPCI_HIDDEN const ampci_kernel ampci_kernels_avx2[];
extern AMPCI_HIDDEN const size_t ampci_kernels_avx2_count;
extern AMPCI_HIDDEN const ampci_kernel ampci_kernels_avx512[];
extern AMPCI_HIDDEN const size_t ampci_kernels_avx512_count;
extern AMPCI_HIDDEN const ampci_kernel ampci_kernels_amx[];
extern AMPCI_HIDDEN const size_t ampci_kernels_amx_count;

/* The registry's answers (kernels/registry.c, the bottom of the floor: it calls nothing above it). */
/* Every entry of the four tables, in that order (registry order). */
AMPCI_HIDDEN const ampci_kernel *const *ampci_registry(size_t *count);
/* The CPU runs it: its level is at most the CPU's best and its extra features are usable. */
AMPCI_HIDDEN bool ampci_kernel_usable(const ampci_kernel *e);
/* Its cell's key (see ampci_slot), and whether two entries share a cell. */
AMPCI_HIDDEN int ampci_kernel_key(const ampci_kernel *e);
AMPCI_HIDDEN bool ampci_same_cell(const ampci_kernel *a, const ampci_kernel *b);
/* The GEMM cells (gemm_f32, gemm_f16, gemm_bf16, gemm_f32_bf16x1, gemm_f32_bf16x3) as 0..4, -1 for others. */
AMPCI_HIDDEN int ampci_gemm_cell(ampci_slot slot, int key);
/* A split F32 cell: its choice may be "none" (the F32 GEMM runs; NULL in the table). */
AMPCI_HIDDEN bool ampci_split_cell(ampci_slot slot);
/* The ref entry of e's cell (the oracle every other entry of the cell is tested against). */
AMPCI_HIDDEN const ampci_kernel *ampci_kernel_ref(const ampci_kernel *e);
/* The registered entry of that name, or NULL. */
AMPCI_HIDDEN const ampci_kernel *ampci_kernel_find(const char *name);
/* The level whose table runs for isa: AUTO and levels above the process's chosen one become the chosen
 * one (so AMPC_ISA and a context's cap can only lower what runs). */
AMPCI_HIDDEN ampc_isa ampci_kernel_level(ampc_isa isa);
/* The candidates the rule chooses from for cell (slot, key) in the CPU device's table of `level` (lowered
 * as by ampci_kernel_level): device CPU, role KERNEL, level <= the table's, usable; registry order. Fills out[0..max) and
 * returns how many there are. A cell has a choice when it has two or more, or is a split F32 cell with
 * one (its choice may be none: the F32 GEMM). */
AMPCI_HIDDEN size_t ampci_candidates(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max);
/* The same for the table of exactly `level` (not lowered: every level's table is filled, also those above
 * the process's chosen one). */
AMPCI_HIDDEN size_t ampci_candidates_at(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max);
/* Cell (slot, key) has a choice in the table of `level` (lowered as by ampci_candidates). */
AMPCI_HIDDEN bool ampci_cell_has_choice(ampc_isa level, ampci_slot slot, int key);
/* "gemm", "unary_bw", ...; and a cell's: "gemm_bf16", "unary_exp", "convert_f32_to_bf16", "softmax". */
AMPCI_HIDDEN const char *ampci_slot_name(ampci_slot slot);
AMPCI_HIDDEN const char *ampci_cell_name(ampci_slot slot, int key);
/* The i-th cell that holds an entry, in (slot, key) order: its name, *slot and *key; NULL past the end. */
AMPCI_HIDDEN const char *ampci_cell_at(int i, ampci_slot *slot, int *key);

/* ---- the resolved table of a level (what the library runs) ---- */

#define AMPCI_GEMM_CELLS 5   /* gemm_f32, gemm_f16, gemm_bf16, gemm_f32_bf16x1, gemm_f32_bf16x3 */
#define AMPCI_SIZE_CLASSES 3 /* small, medium, large (tune.h) */

struct ampc_kernels {
    ampc_isa isa;
    /* per cell; NULL: none (see below). A GEMM cell's is its largest size class's (by_size has each). */
    const ampci_kernel *chosen[AMPCI_SLOT_COUNT][AMPCI_KEY_COUNT];
    /* The GEMM cells (ampci_gemm_cell: F32, F16, BF16, split x1, x3) per size class (ampci_gemm_size_class,
     * tune.h); NULL in a split cell: the F32 GEMM runs. Where the classes differ the cell's field is a
     * dispatcher that runs by_size's kernel for each product's class. */
    const ampci_kernel *by_size[AMPCI_GEMM_CELLS][AMPCI_SIZE_CLASSES];
    ampc_k_cvt_fn cvt[AMPC_DTYPE_COUNT][AMPC_DTYPE_COUNT]; /* [dst][src]; NULL: generic path */
    ampc_k_unary_fn unary[AMPCI_UNARY_COUNT];
    ampc_k_unary_bw_fn unary_bw[AMPCI_UNARY_COUNT];
    ampc_k_binary_fn binary[AMPCI_BINARY_COUNT];
    ampc_k_gemm_fn gemm[AMPC_DTYPE_COUNT]; /* by the dtype of a and b: F32, F16, BF16 */
    /* F32 GEMMs allowed to run on BF16 hardware (ampc_ctx_set_fp32_matmul_precision): x1 = one BF16 pass
     * (HIGH... MEDIUM), x3 = a*b as ahi*bhi + ahi*blo + alo*bhi with a = ahi + alo split exactly into BF16
     * parts (HIGH). NULL where that would not be faster than the F32 slot: the op layer then runs F32. */
    ampc_k_gemm_fn gemm_f32_bf16x1, gemm_f32_bf16x3;
    ampc_k_softmax_fn softmax;
    ampc_k_softmax_bw_fn softmax_bw;
    ampc_k_layernorm_fn layernorm;
    ampc_k_layernorm_bw_fn layernorm_bw;
    /* ---- nn family (ops/norm.c, loss.c, embedding.c, dropout.c) ---- */
    ampc_k_xent_fn xent;
    ampc_k_xent_bw_fn xent_bw;
    ampc_k_embedding_bw_fn embedding_bw;
    /* ---- conv family (ops/conv.c, attention.c) ---- */
    ampc_k_im2col_fn im2col[AMPC_DTYPE_COUNT]; /* by the dtype of x and col: F32, F16, BF16 */
    ampc_k_col2im_fn col2im;
    ampc_k_maxpool_fn maxpool;
    ampc_k_maxpool_bw_fn maxpool_bw;
    ampc_k_attention_fn attention;
    ampc_k_attention_bw_fn attention_bw;
    /* ---- optimizer and scaler ---- */
    ampc_k_sgd_fn sgd;
    ampc_k_adamw_fn adamw;
    ampc_k_unscale_fn unscale[AMPC_DTYPE_COUNT]; /* F32, F16, BF16 */
    ampc_k_sumsq_fn sumsq[AMPC_DTYPE_COUNT];
    ampc_k_colsum_fn colsum[AMPC_DTYPE_COUNT]; /* the bias gradient's column sums */
    /* ---- range statistics (src/amp/stats.c) ---- */
    ampc_k_range_fn range;
    /* ---- FP8 quantisation (E4M3 / E5M2 values as BF16 bits) ---- */
    ampc_k_quant8_fn quant8;
};

/* The table for a level (AUTO = the process's chosen level); levels above the CPU's chosen one are
 * lowered, so AMPC_ISA and a context's cap can only lower what runs. The first call measures the
 * candidates or reads their times from the cache (tune.h), then fills every level's table. */
AMPCI_HIDDEN const struct ampc_kernels *ampci_kernels(ampc_isa isa);

/* One cell's choice in the table of `level` (not lowered) for size class cls (0 for cells without classes):
 * the measured fastest, unless the rule's pick is within AMPCI_TUNE_MARGIN of it; the rule's pick when
 * measurement is off or the cell has no times. */
typedef struct ampci_choice {
    const ampci_kernel *kernel; /* NULL: none (an empty cell, or a split cell where the F32 GEMM is faster) */
    double sec;                 /* its measured seconds for the class's shapes; INFINITY: not measured */
    const ampci_kernel *second; /* the runner-up; NULL with second_none: "none" (the F32 GEMM) */
    bool second_none;
    double second_sec; /* INFINITY: no runner-up */
    bool measured;     /* chosen by the times, not the rule */
} ampci_choice;
AMPCI_HIDDEN ampci_choice ampci_kernels_choose(ampc_isa level, ampci_slot slot, int key, int cls);
/* Sets cell (slot, key) of k to run by_class[c] for size class c (every class: by_class[0] alone is read for
 * cells without classes): chosen, by_size and the field, which is a per-size dispatcher when the classes
 * differ. The dispatcher reads the table it was made for: `table` is k's level for the process's tables,
 * AMPCI_TABLE_CTX for a context's own table (it then reads ctx->kernels, which must be k). */
#define AMPCI_TABLE_CTX AMPC_ISA_COUNT
AMPCI_HIDDEN void ampci_kernels_set(struct ampc_kernels *k, ampci_slot slot, int key,
                                    const ampci_kernel *const *by_class, int table);
/* The kernel k runs in cell (slot, key) for an M x N x K product (NULL: none). */
AMPCI_HIDDEN const ampci_kernel *ampci_gemm_pick(const struct ampc_kernels *k, ampci_slot slot, int key, int64_t M,
                                                 int64_t N, int64_t K);

/* ---- a context's own table (kernels/choices.c): the kernels a checkpoint recorded ---- */

/* The choices of every cell with a choice in ctx's table, as the checkpoint key ampc.kernels holds them:
 * "cell=kernel" joined by ';', a GEMM cell whose size classes differ "cell=small,medium,large", "-" for
 * none. Returns the length (like snprintf). */
AMPCI_HIDDEN int ampci_kernels_format(const ampc_ctx *ctx, char *buf, size_t size);
/* A copy of ctx's table with the recorded choices applied where they are usable at its level (the others
 * keep ctx's choice; one warning through ctx's log, naming `what`, the file, says how many and the first).
 * *out = NULL when the recorded choices equal ctx's table. Fails only for lack of memory. */
AMPCI_HIDDEN ampc_status ampci_kernels_recorded(const ampc_ctx *ctx, const char *what, const char *choices,
                                                struct ampc_kernels **out);
/* ctx runs k from now on (it takes k; NULL: back to its level's table). */
AMPCI_HIDDEN void ampci_kernels_adopt(ampc_ctx *ctx, struct ampc_kernels *k);

/* The GEMM for operands of dtype dt under the context's FP32 matmul precision (kernels/fp32_precision.c):
 * for F32 a split slot when the setting allows it and the table has one, else gemm[dt]. */
AMPCI_HIDDEN ampc_k_gemm_fn ampci_gemm_fn(const ampc_ctx *ctx, ampc_dtype dt);

/* ---- conversions (kernels/convert.c, the generic path in ref/convert_ref.c) ---- */

/* Any dtype pair, element by element through the scalar rules (ints truncate and saturate). */
AMPCI_HIDDEN void ampci_convert_generic(void *dst, ampc_dtype dst_dtype, const void *src, ampc_dtype src_dtype,
                                        size_t n);

/* ampc_convert through a given table (contexts use their own level). */
AMPCI_HIDDEN ampc_status ampci_convert_with(const struct ampc_kernels *k, void *dst, ampc_dtype dst_dtype,
                                            const void *src, ampc_dtype src_dtype, size_t n);

#endif
