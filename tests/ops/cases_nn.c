/* cases_nn.c: op-test cases for softmax, log_softmax, layer_norm, embedding, cross_entropy, mse_loss,
 * dropout and positional encoding. */
#include "op_test.h"

const ot_op *const ot_ops_nn[] = {NULL};
