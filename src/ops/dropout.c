/* dropout.c: (being written) */
#include "ops.h"
