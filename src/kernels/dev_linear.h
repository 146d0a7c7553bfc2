/* dev_linear.h: the device operations of the linear family. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_LINEAR_H
#define AMPC_KERNELS_DEV_LINEAR_H

#include "kernels.h"

#define AMPCI_DEVOPS_LINEAR(X)

#endif
