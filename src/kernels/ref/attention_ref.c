/* attention_ref.c: (being written) */
#include "../kernels.h"
