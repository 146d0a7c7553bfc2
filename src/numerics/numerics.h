/* numerics.h: internal interface of the numerics module (dtype table, scalar conversions, finiteness on
 * bit patterns). */
#ifndef AMPC_NUMERICS_H
#define AMPC_NUMERICS_H

#include "../core/core.h"
#include "half.h"

#include <string.h>

/* Index of the first inf or NaN among n contiguous elements of dtype dt at p, or -1 (always -1 for
 * integer dtypes). Reads bit patterns, so no compiler flag can turn it into a constant. */
AMPCI_HIDDEN int64_t ampci_first_nonfinite(ampc_dtype dt, const void *p, int64_t n);

#endif
