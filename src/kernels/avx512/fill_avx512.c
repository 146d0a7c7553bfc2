/* fill_avx512.c: installs the avx512 folder's kernels, family by family, over the ref ones. Each family
 * checks the finer features it needs (AVX512-BF16, AVX512-FP16) itself. */
#include "../kernels.h"

void ampci_fill_avx512(struct ampc_kernels *k) {
    ampci_fill_avx512_gemm(k, true);
    ampci_fill_avx512_eltwise(k);
    ampci_fill_avx512_attention(k);
}
