/* numerics.h: internal interface of the numerics module (dtype table, scalar conversions). */
#ifndef AMPC_NUMERICS_H
#define AMPC_NUMERICS_H

#include "../core/core.h"
#include "half.h"

#include <string.h>

#endif
