/* dev_optim.h: the device operations of the optim family. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_OPTIM_H
#define AMPC_KERNELS_DEV_OPTIM_H

#include "kernels.h"

#define AMPCI_DEVOPS_OPTIM(X)

#endif
