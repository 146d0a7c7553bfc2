/* dev_amp.h: the device operations of the amp family. Included by device.h (read its header first). */
#ifndef AMPC_KERNELS_DEV_AMP_H
#define AMPC_KERNELS_DEV_AMP_H

#include "kernels.h"

#define AMPCI_DEVOPS_AMP(X)

#endif
