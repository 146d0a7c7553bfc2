/* attention.c: (being written) */
#include "ops.h"
