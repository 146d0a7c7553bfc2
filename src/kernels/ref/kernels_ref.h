/* kernels_ref.h: the ref folder's kernels, declared for its table (kernels_ref.c) and for the ref kernels
 * that call each other (the GEMM and attention widen their operands with the ref conversions, never
 * through a context's table or the process-wide dispatch). Portable C, no ISA flags. */
#ifndef AMPC_KERNELS_REF_H
#define AMPC_KERNELS_REF_H

#include "../kernels.h"

/* convert_ref.c: dst from src */
AMPCI_HIDDEN ampci_cvt_kernel ampc_k_cvt_f16f32__ref, ampc_k_cvt_f32f16__ref, ampc_k_cvt_bf16f32__ref,
    ampc_k_cvt_f32bf16__ref, ampc_k_cvt_bf16f16__ref, ampc_k_cvt_f16bf16__ref;

/* gemm_ref.c: by operand dtype; the split F32 oracles */
AMPCI_HIDDEN ampci_gemm_kernel ampc_k_gemm_f32f32__ref, ampc_k_gemm_f16f32__ref, ampc_k_gemm_bf16f32__ref,
    ampc_k_gemm_f32_bf16x1__ref, ampc_k_gemm_f32_bf16x3__ref;

/* eltwise_ref.c: ampc_k_<op>_f32__ref, ampc_k_<op>_bw_f32__ref (every unary op), ampc_k_<op>_f32__ref (binary) */
/* clang-format off */
AMPCI_UNARY_OPS(AMPCI_DECLARE_UNARY, ref)
AMPCI_BINARY_OPS(AMPCI_DECLARE_BINARY, ref)
/* clang-format on */

/* norm_ref.c */
AMPCI_HIDDEN ampci_softmax_kernel ampc_k_softmax_f32__ref;
AMPCI_HIDDEN ampci_softmax_bw_kernel ampc_k_softmax_bw_f32__ref;
AMPCI_HIDDEN ampci_layernorm_kernel ampc_k_layernorm_f32__ref;
AMPCI_HIDDEN ampci_layernorm_bw_kernel ampc_k_layernorm_bw_f32__ref;

/* nn_ref.c */
AMPCI_HIDDEN ampci_xent_kernel ampc_k_xent_f32__ref;
AMPCI_HIDDEN ampci_xent_bw_kernel ampc_k_xent_bw_f32__ref;
AMPCI_HIDDEN ampci_embedding_bw_kernel ampc_k_embedding_bw_f32__ref;

/* optim_ref.c: the doctor's range statistics */
AMPCI_HIDDEN ampci_range_kernel ampc_k_range_f32__ref;

/* quant_ref.c: FP8 quantisation */
AMPCI_HIDDEN ampci_quant8_kernel ampc_k_quant8_f32__ref;

/* conv_ref.c, attention_ref.c */
AMPCI_HIDDEN ampci_im2col_kernel ampc_k_im2col_f32__ref, ampc_k_im2col_f16__ref, ampc_k_im2col_bf16__ref;
AMPCI_HIDDEN ampci_col2im_kernel ampc_k_col2im_f32__ref;
AMPCI_HIDDEN ampci_maxpool_kernel ampc_k_maxpool_f32__ref;
AMPCI_HIDDEN ampci_maxpool_bw_kernel ampc_k_maxpool_bw_f32__ref;
AMPCI_HIDDEN ampci_attention_kernel ampc_k_attention__ref;
AMPCI_HIDDEN ampci_attention_bw_kernel ampc_k_attention_bw__ref;

/* optim_ref.c */
AMPCI_HIDDEN ampci_sgd_kernel ampc_k_sgd_f32__ref;
AMPCI_HIDDEN ampci_adamw_kernel ampc_k_adamw_f32__ref;
AMPCI_HIDDEN ampci_unscale_kernel ampc_k_unscale_f32__ref, ampc_k_unscale_f16__ref, ampc_k_unscale_bf16__ref;
AMPCI_HIDDEN ampci_sumsq_kernel ampc_k_sumsq_f32__ref, ampc_k_sumsq_f16__ref, ampc_k_sumsq_bf16__ref;
AMPCI_HIDDEN ampci_colsum_kernel ampc_k_colsum_f32__ref, ampc_k_colsum_f16__ref, ampc_k_colsum_bf16__ref;

#endif
