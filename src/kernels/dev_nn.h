/* dev_nn.h: the device operations of the nn family. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_NN_H
#define AMPC_KERNELS_DEV_NN_H

#include "kernels.h"

#define AMPCI_DEVOPS_NN(X)

#endif
