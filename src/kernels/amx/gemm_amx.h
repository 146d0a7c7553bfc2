/* gemm_amx.h: what the amx folder exports besides its registry table (kernels.h): its GEMMs' packing on
 * its own, which `ampc bench gemm` times (ampci_gemm_packer, driver_util.h). */
#ifndef AMPC_KERNELS_AMX_GEMM_AMX_H
#define AMPC_KERNELS_AMX_GEMM_AMX_H

#include "../driver_util.h"

extern AMPCI_HIDDEN const ampci_gemm_packer ampci_gemm_packers_amx[];
extern AMPCI_HIDDEN const size_t ampci_gemm_packers_amx_count;

#endif
