/* loss.c: (being written) */
#include "ops.h"
