/* cases_conv.c: op-test cases for conv2d, max_pool2d and attention. */
#include "op_test.h"

const ot_op *const ot_ops_conv[] = {NULL};
