/* gemm_avx512.c: (being written) AVX-512 GEMM kernels. */
#include "../kernels.h"

void ampci_fill_avx512(struct ampc_kernels *k) { (void)k; }
