/* conv.c: (being written) */
#include "ops.h"
