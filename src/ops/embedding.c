/* embedding.c: (being written) */
#include "ops.h"
