/* kernels_avx512.c: the avx512 folder's registry table. Within a cell the entries are listed best last:
 * where the CPU also has AVX512-BF16, its vdpbf16ps kernels follow the widening ones and so win the
 * dispatch rule (dispatch.c: choose), while the widening ones stay registered, tested and benchmarked. */
#include "kernels_avx512.h"

#define AMPCI_FOLDER_LEVEL AMPC_ISA_AVX512
#define NEEDS_BF16 AMPCI_FEAT(AVX512_BF16)
/* an entry that needs AVX512-BF16 */
#define K_BF16(SLOT, DT, FN) AMPCI_ENTRY(SLOT, DT, DT, 0, FN, AMPC_ISA_AVX512, NEEDS_BF16, 0, AMPCI_ROLE_KERNEL)

/* A table, one entry a line; the X-macro lists expand to several entries each. */
/* clang-format off */
const ampci_kernel ampci_kernels_avx512[] = {
    AMPCI_K_CVT(F16, F32, ampc_k_cvt_f16f32__avx512, 0),
    AMPCI_K_CVT(F32, F16, ampc_k_cvt_f32f16__avx512, 0),
    AMPCI_K_CVT(BF16, F32, ampc_k_cvt_bf16f32__avx512, 0),
    AMPCI_K_CVT(BF16, F32, ampc_k_cvt_bf16f32__avx512bf16, NEEDS_BF16),
    AMPCI_K_CVT(F32, BF16, ampc_k_cvt_f32bf16__avx512, 0),
    AMPCI_K_CVT(BF16, F16, ampc_k_cvt_bf16f16__avx512, 0),
    AMPCI_K_CVT(F16, BF16, ampc_k_cvt_f16bf16__avx512, 0),

    AMPCI_K_DT(GEMM, F32, ampc_k_gemm_f32f32__avx512),
    AMPCI_K_DT(GEMM, F16, ampc_k_gemm_f16f32__avx512),
    AMPCI_K_DT(GEMM, BF16, ampc_k_gemm_bf16f32__avx512),
    K_BF16(GEMM, AMPC_DTYPE_BF16, ampc_k_gemm_bf16f32__avx512bf16),
    /* F32 as one BF16 pass: vdpbf16ps does two k-steps per instruction, about twice the F32 kernel where
     * it runs at the FMA rate (AMD Zen 4/5). Not chosen on CPUs with AMX: there vdpbf16ps runs at half
     * the FMA rate (`ampc bench gemm`'s probe on an Emerald Rapids Xeon: 120 vs 241 GFLOP/s per core),
     * and this level only runs when AMX is capped or denied. No three-pass entry: 3 times the work of
     * one, slower than F32 FMAs everywhere, so gemm_f32_bf16x3 stays empty at this level (the op layer
     * runs F32). */
    AMPCI_ENTRY(GEMM_F32_BF16X1, AMPC_DTYPE_F32, AMPC_DTYPE_F32, 0, ampc_k_gemm_f32_bf16x1__avx512bf16,
                AMPC_ISA_AVX512, NEEDS_BF16, AMPCI_FEAT(AMX_BF16), AMPCI_ROLE_KERNEL),

    AMPCI_UNARY_OPS(AMPCI_K_UNARY, avx512)   /* forward and backward of every unary op */
    AMPCI_BINARY_OPS(AMPCI_K_BINARY, avx512)

    AMPCI_K(SOFTMAX, ampc_k_softmax_f32__avx512),
    AMPCI_K(SOFTMAX_BW, ampc_k_softmax_bw_f32__avx512),
    AMPCI_K(LAYERNORM, ampc_k_layernorm_f32__avx512),
    AMPCI_K(LAYERNORM_BW, ampc_k_layernorm_bw_f32__avx512),
    AMPCI_K(XENT, ampc_k_xent_f32__avx512),
    AMPCI_K(XENT_BW, ampc_k_xent_bw_f32__avx512),
    AMPCI_K(EMBEDDING_BW, ampc_k_embedding_bw_f32__avx512),

    AMPCI_K(ATTENTION, ampc_k_attention__avx512),
    K_BF16(ATTENTION, AMPC_DTYPE_F32, ampc_k_attention__avx512bf16),
    AMPCI_K(ATTENTION_BW, ampc_k_attention_bw__avx512),
    K_BF16(ATTENTION_BW, AMPC_DTYPE_F32, ampc_k_attention_bw__avx512bf16),

    AMPCI_K(SGD, ampc_k_sgd_f32__avx512),
    AMPCI_K(ADAMW, ampc_k_adamw_f32__avx512),
    AMPCI_K_DT(UNSCALE, F32, ampc_k_unscale_f32__avx512),
    AMPCI_K_DT(UNSCALE, F16, ampc_k_unscale_f16__avx512),
    AMPCI_K_DT(UNSCALE, BF16, ampc_k_unscale_bf16__avx512),
    AMPCI_K_DT(SUMSQ, F32, ampc_k_sumsq_f32__avx512),
    AMPCI_K_DT(SUMSQ, F16, ampc_k_sumsq_f16__avx512),
    AMPCI_K_DT(SUMSQ, BF16, ampc_k_sumsq_bf16__avx512),
    AMPCI_K_DT(COLSUM, F32, ampc_k_colsum_f32__avx512),
    AMPCI_K_DT(COLSUM, F16, ampc_k_colsum_f16__avx512),
    AMPCI_K_DT(COLSUM, BF16, ampc_k_colsum_bf16__avx512),
    AMPCI_K(RANGE, ampc_k_range_f32__avx512),
    AMPCI_K(QUANT8, ampc_k_quant8_f32__avx512),

    AMPCI_K_DT(IM2COL, F32, ampc_k_im2col_f32__avx512),
    AMPCI_K_DT(IM2COL, F16, ampc_k_im2col_f16__avx512),
    AMPCI_K_DT(IM2COL, BF16, ampc_k_im2col_bf16__avx512),
    AMPCI_K(COL2IM, ampc_k_col2im_f32__avx512),
    AMPCI_K(MAXPOOL, ampc_k_maxpool_f32__avx512),
    AMPCI_K(MAXPOOL_BW, ampc_k_maxpool_bw_f32__avx512),
};
/* clang-format on */
const size_t ampci_kernels_avx512_count = sizeof ampci_kernels_avx512 / sizeof ampci_kernels_avx512[0];
