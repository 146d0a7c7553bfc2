/* norm.c: (being written) */
#include "ops.h"
