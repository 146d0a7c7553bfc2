/* kernels_ref.c: the ref folder's registry table. Every cell the library uses has exactly one entry here,
 * usable on any x86-64: the complete fallback and the oracle the other folders' entries are tested
 * against. The split F32 GEMMs are oracles only (at the ref level F32 GEMMs run as F32). */
#include "kernels_ref.h"

#define AMPCI_FOLDER_LEVEL AMPC_ISA_REF
#define ORACLE(SLOT, FN) AMPCI_ENTRY(SLOT, AMPC_DTYPE_F32, AMPC_DTYPE_F32, 0, FN, AMPC_ISA_REF, 0, 0, AMPCI_ROLE_ORACLE)

/* A table, one entry a line; the X-macro lists expand to several entries each. */
/* clang-format off */
const ampci_kernel ampci_kernels_ref[] = {
    AMPCI_K_CVT(F16, F32, ampc_k_cvt_f16f32__ref, 0),
    AMPCI_K_CVT(F32, F16, ampc_k_cvt_f32f16__ref, 0),
    AMPCI_K_CVT(BF16, F32, ampc_k_cvt_bf16f32__ref, 0),
    AMPCI_K_CVT(F32, BF16, ampc_k_cvt_f32bf16__ref, 0),
    AMPCI_K_CVT(BF16, F16, ampc_k_cvt_bf16f16__ref, 0),
    AMPCI_K_CVT(F16, BF16, ampc_k_cvt_f16bf16__ref, 0),

    AMPCI_K_DT(GEMM, F32, ampc_k_gemm_f32f32__ref),
    AMPCI_K_DT(GEMM, F16, ampc_k_gemm_f16f32__ref),
    AMPCI_K_DT(GEMM, BF16, ampc_k_gemm_bf16f32__ref),
    ORACLE(GEMM_F32_BF16X1, ampc_k_gemm_f32_bf16x1__ref),
    ORACLE(GEMM_F32_BF16X3, ampc_k_gemm_f32_bf16x3__ref),

    AMPCI_UNARY_OPS(AMPCI_K_UNARY, ref)   /* forward and backward of every unary op */
    AMPCI_BINARY_OPS(AMPCI_K_BINARY, ref)

    AMPCI_K(SOFTMAX, ampc_k_softmax_f32__ref),
    AMPCI_K(SOFTMAX_BW, ampc_k_softmax_bw_f32__ref),
    AMPCI_K(LAYERNORM, ampc_k_layernorm_f32__ref),
    AMPCI_K(LAYERNORM_BW, ampc_k_layernorm_bw_f32__ref),
    AMPCI_K(XENT, ampc_k_xent_f32__ref),
    AMPCI_K(XENT_BW, ampc_k_xent_bw_f32__ref),
    AMPCI_K(EMBEDDING_BW, ampc_k_embedding_bw_f32__ref),

    AMPCI_K_DT(IM2COL, F32, ampc_k_im2col_f32__ref),
    AMPCI_K_DT(IM2COL, F16, ampc_k_im2col_f16__ref),
    AMPCI_K_DT(IM2COL, BF16, ampc_k_im2col_bf16__ref),
    AMPCI_K(COL2IM, ampc_k_col2im_f32__ref),
    AMPCI_K(MAXPOOL, ampc_k_maxpool_f32__ref),
    AMPCI_K(MAXPOOL_BW, ampc_k_maxpool_bw_f32__ref),
    AMPCI_K(ATTENTION, ampc_k_attention__ref),
    AMPCI_K(ATTENTION_BW, ampc_k_attention_bw__ref),

    AMPCI_K(SGD, ampc_k_sgd_f32__ref),
    AMPCI_K(ADAMW, ampc_k_adamw_f32__ref),
    AMPCI_K_DT(UNSCALE, F32, ampc_k_unscale_f32__ref),
    AMPCI_K_DT(UNSCALE, F16, ampc_k_unscale_f16__ref),
    AMPCI_K_DT(UNSCALE, BF16, ampc_k_unscale_bf16__ref),
    AMPCI_K_DT(SUMSQ, F32, ampc_k_sumsq_f32__ref),
    AMPCI_K_DT(SUMSQ, F16, ampc_k_sumsq_f16__ref),
    AMPCI_K_DT(SUMSQ, BF16, ampc_k_sumsq_bf16__ref),
    AMPCI_K_DT(COLSUM, F32, ampc_k_colsum_f32__ref),
    AMPCI_K_DT(COLSUM, F16, ampc_k_colsum_f16__ref),
    AMPCI_K_DT(COLSUM, BF16, ampc_k_colsum_bf16__ref),
    AMPCI_K(RANGE, ampc_k_range_f32__ref),
    AMPCI_K(QUANT8, ampc_k_quant8_f32__ref),
};
/* clang-format on */
const size_t ampci_kernels_ref_count = sizeof ampci_kernels_ref / sizeof ampci_kernels_ref[0];
