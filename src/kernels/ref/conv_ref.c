/* conv_ref.c: (being written) */
#include "../kernels.h"

void ampci_fill_ref_conv(struct ampc_kernels *k) { (void)k; }
