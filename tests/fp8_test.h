/* fp8_test.h: what the FP8 test programs share (test_fp8.c: the arithmetic; test_fp8_checkpoint.c: the
 * state in checkpoints): a context of two threads and the tensors they start from. */
#ifndef AMPC_TEST_FP8_TEST_H
#define AMPC_TEST_FP8_TEST_H

#include "test_util.h"

static inline ampc_ctx *ctx_new(uint64_t seed) {
    ampc_ctx *c = NULL;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = seed, .threads = 2}, &c));
    return c;
}

static inline void ctx_free(ampc_ctx *c) {
    ampc_ctx_step_end(c);
    ampc_ctx_free(c);
}

/* An owned F32 parameter (a leaf that requires grad) of N(0, std^2) values. */
static inline ampc_tensor *param_new(ampc_ctx *c, const char *name, int nd, const int64_t *shape, double std) {
    ampc_tensor *t = ampc_tensor_new(c, AMPC_DTYPE_F32, nd, shape);
    if (!t) FAILF("ampc_tensor_new: %s", ampc_last_error());
    ASSERT_OK(ampc_tensor_fill_normal(t, 0, std));
    ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    ASSERT_OK(ampc_tensor_set_name(t, name));
    return t;
}

static inline ampc_tensor *normal(ampc_ctx *c, int nd, const int64_t *shape, double std) {
    ampc_tensor *t = ampc_tensor_normal(c, AMPC_DTYPE_F32, nd, shape, 0, std);
    if (!t) FAILF("ampc_tensor_normal: %s", ampc_last_error());
    return t;
}

#endif
