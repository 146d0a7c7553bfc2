/* kernels_avx512.h: the avx512 folder's kernels, declared for its table (kernels_avx512.c), and the one
 * test hook of the folder: the attention kernel's vector exp. Everything here is compiled with AVX-512
 * F/BW/VL/DQ flags; functions that also need AVX512-BF16 say so in their name (__avx512bf16) and in
 * their entry. */
#ifndef AMPC_KERNELS_AVX512_H
#define AMPC_KERNELS_AVX512_H

#include "../driver_util.h" /* ampci_gemm_packer */
#include "../kernels.h"

/* convert_avx512.c: dst from src */
AMPCI_HIDDEN ampci_cvt_kernel ampc_k_cvt_f16f32__avx512, ampc_k_cvt_f32f16__avx512, ampc_k_cvt_bf16f32__avx512,
    ampc_k_cvt_bf16f32__avx512bf16, ampc_k_cvt_f32bf16__avx512, ampc_k_cvt_bf16f16__avx512, ampc_k_cvt_f16bf16__avx512;

/* gemm_avx512.c: by operand dtype (BF16: widened, or vdpbf16ps), and F32 as one BF16 pass */
AMPCI_HIDDEN ampci_gemm_kernel ampc_k_gemm_f32f32__avx512, ampc_k_gemm_f16f32__avx512, ampc_k_gemm_bf16f32__avx512,
    ampc_k_gemm_bf16f32__avx512bf16, ampc_k_gemm_f32_bf16x1__avx512bf16;
/* ...and their packing on its own, which `ampc bench gemm` times (driver_util.h) */
extern AMPCI_HIDDEN const ampci_gemm_packer ampci_gemm_packers_avx512[];
extern AMPCI_HIDDEN const size_t ampci_gemm_packers_avx512_count;

/* eltwise_avx512.c: ampc_k_<op>_f32__avx512 and ampc_k_<op>_bw_f32__avx512 (every unary op),
 * ampc_k_<op>_f32__avx512 (binary) */
/* clang-format off */
AMPCI_UNARY_OPS(AMPCI_DECLARE_UNARY, avx512)
AMPCI_BINARY_OPS(AMPCI_DECLARE_BINARY, avx512)
/* clang-format on */

/* norm_avx512.c, nn_avx512.c */
AMPCI_HIDDEN ampci_softmax_kernel ampc_k_softmax_f32__avx512;
AMPCI_HIDDEN ampci_softmax_bw_kernel ampc_k_softmax_bw_f32__avx512;
AMPCI_HIDDEN ampci_layernorm_kernel ampc_k_layernorm_f32__avx512;
AMPCI_HIDDEN ampci_layernorm_bw_kernel ampc_k_layernorm_bw_f32__avx512;
AMPCI_HIDDEN ampci_xent_kernel ampc_k_xent_f32__avx512;
AMPCI_HIDDEN ampci_xent_bw_kernel ampc_k_xent_bw_f32__avx512;
AMPCI_HIDDEN ampci_embedding_bw_kernel ampc_k_embedding_bw_f32__avx512;

/* attention_avx512.c: BF16 widened, or through vdpbf16ps */
AMPCI_HIDDEN ampci_attention_kernel ampc_k_attention__avx512, ampc_k_attention__avx512bf16;
AMPCI_HIDDEN ampci_attention_bw_kernel ampc_k_attention_bw__avx512, ampc_k_attention_bw__avx512bf16;
/* The attention kernels' exp, y (n) = exp(x (n)): not a kernel of any slot (the unary exp is vm_exp), a
 * hook for its accuracy test. */
AMPCI_HIDDEN void ampci_attn_exp_avx512(float *y, const float *x, int64_t n);

/* conv_avx512.c: bit-identical to ref */
AMPCI_HIDDEN ampci_im2col_kernel ampc_k_im2col_f32__avx512, ampc_k_im2col_f16__avx512, ampc_k_im2col_bf16__avx512;
AMPCI_HIDDEN ampci_col2im_kernel ampc_k_col2im_f32__avx512;
AMPCI_HIDDEN ampci_maxpool_kernel ampc_k_maxpool_f32__avx512;
AMPCI_HIDDEN ampci_maxpool_bw_kernel ampc_k_maxpool_bw_f32__avx512;

/* optim_avx512.c */
AMPCI_HIDDEN ampci_sgd_kernel ampc_k_sgd_f32__avx512;
AMPCI_HIDDEN ampci_adamw_kernel ampc_k_adamw_f32__avx512;
AMPCI_HIDDEN ampci_unscale_kernel ampc_k_unscale_f32__avx512, ampc_k_unscale_f16__avx512, ampc_k_unscale_bf16__avx512;
AMPCI_HIDDEN ampci_sumsq_kernel ampc_k_sumsq_f32__avx512, ampc_k_sumsq_f16__avx512, ampc_k_sumsq_bf16__avx512;
AMPCI_HIDDEN ampci_colsum_kernel ampc_k_colsum_f32__avx512, ampc_k_colsum_f16__avx512, ampc_k_colsum_bf16__avx512;
AMPCI_HIDDEN ampci_range_kernel ampc_k_range_f32__avx512; /* the doctor's range statistics, equal to ref's */

/* quant_avx512.c: FP8 quantisation, equal to ref's in every bit, count and amax */
AMPCI_HIDDEN ampci_quant8_kernel ampc_k_quant8_f32__avx512;

#endif
