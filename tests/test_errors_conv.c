/* test_errors_conv.c: bad input to conv2d, max_pool2d and attention: NULL inputs, wrong ranks, channel and
 * head-size mismatches, kernels larger than the padded input, bad strides and paddings, mismatched
 * dtypes. Every case must return NULL with a message naming the op, the shapes and what was expected;
 * none may crash (the sanitizer build runs this too). Also the semantics the op-test driver cannot see:
 * max-pool ties and NaN, empty batches, causal rows that cannot go NaN, and results that do not depend
 * on the thread count. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(3, 2)

#define F32 AMPC_DTYPE_F32

static void test_null_inputs(void **state) {
    (void)state;
    ampc_tensor *x = Z(F32, 1, 2, 5, 5), *w = Z(F32, 3, 2, 3, 3), *q = Z(F32, 1, 1, 2, 4);
    ampc_clear_error();
    assert_null(ampc_conv2d(g_ctx, NULL, w, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "input is NULL");
    ampc_clear_error();
    assert_null(ampc_conv2d(g_ctx, x, NULL, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "weight is NULL");
    ampc_clear_error();
    assert_null(ampc_max_pool2d(g_ctx, NULL, &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2}));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "input is NULL");
    ampc_clear_error();
    assert_null(ampc_attention(g_ctx, q, NULL, q, false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "k is NULL");
    assert_null(ampc_conv2d(NULL, x, w, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "ctx is NULL");
    /* in a chain the first failure's message survives */
    ampc_clear_error();
    assert_null(ampc_max_pool2d(g_ctx, ampc_conv2d(g_ctx, x, Z(F32, 3, 4, 3, 3), NULL, NULL),
                                &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2}));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "[3, 4, 3, 3] F32");
}

static void test_conv_shapes(void **state) {
    (void)state;
    ampc_tensor *x = Z(F32, 1, 3, 5, 5), *w = Z(F32, 2, 3, 3, 3);
    assert_null(ampc_conv2d(g_ctx, Z(F32, 3, 5, 5), w, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "[3, 5, 5] F32", "(N, C, H, W)");
    assert_null(ampc_conv2d(g_ctx, x, Z(F32, 2, 27), NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "weight [2, 27] F32", "(O, C, KH, KW)");
    assert_null(ampc_conv2d(g_ctx, x, Z(F32, 2, 4, 3, 3), NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "input [1, 3, 5, 5] F32", "weight [2, 4, 3, 3] F32", "C = 3");
    assert_null(ampc_conv2d(g_ctx, x, w, Z(F32, 3), NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "bias [3] F32", "bias (O)");
    assert_null(ampc_conv2d(g_ctx, x, Z(F32, 2, 3, 0, 3), NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "KH, KW >= 1");
    assert_null(ampc_conv2d(g_ctx, Z(F32, 1, 0, 5, 5), Z(F32, 2, 0, 3, 3), NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "[1, 0, 5, 5] F32", "C, H, W >= 1");
    /* a 7x3 kernel on 5x5: too tall unless padded by at least 1 */
    ampc_tensor *tall = Z(F32, 2, 3, 7, 3);
    assert_null(ampc_conv2d(g_ctx, x, tall, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "[1, 3, 5, 5] F32", "kernel height 7", "padded input height 5");
    assert_null(ampc_conv2d(g_ctx, x, tall, NULL, &(ampc_conv2d_params){.pad_w = 3}));
    ASSERT_ERROR_MENTIONS("kernel height 7");
    ampc_tensor *y = ampc_conv2d(g_ctx, x, tall, NULL, &(ampc_conv2d_params){.pad_h = 1});
    assert_non_null(y);
    assert_int_equal(ampc_tensor_dim(y, 2), 1);
    assert_int_equal(ampc_tensor_dim(y, 3), 3);
    assert_null(ampc_conv2d(g_ctx, Z(F32, 1, 3, 5, 2), w, NULL, NULL));
    ASSERT_ERROR_MENTIONS("kernel width 3", "padded input width 2");
}

static void test_conv_params_and_dtypes(void **state) {
    (void)state;
    ampc_tensor *x = Z(F32, 1, 3, 5, 5), *w = Z(F32, 2, 3, 3, 3);
    assert_null(ampc_conv2d(g_ctx, x, w, NULL, &(ampc_conv2d_params){.stride_h = -1}));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "stride (-1, 0)", "stride >= 0");
    assert_null(ampc_conv2d(g_ctx, x, w, NULL, &(ampc_conv2d_params){.pad_w = -2}));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "pad (0, -2)", "pad >= 0");
    assert_int_equal(ampc_last_status(), AMPC_STATUS_INVALID_ARG);
    /* stride 0 means 1; a big stride still yields one output */
    ampc_tensor *y = ampc_conv2d(g_ctx, x, w, NULL, &(ampc_conv2d_params){.stride_h = 9, .stride_w = 0});
    assert_non_null(y);
    assert_int_equal(ampc_tensor_dim(y, 2), 1);
    assert_int_equal(ampc_tensor_dim(y, 3), 3);
    assert_null(ampc_conv2d(g_ctx, Z(AMPC_DTYPE_BF16, 1, 3, 5, 5), w, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "[1, 3, 5, 5] BF16", "[2, 3, 3, 3] F32", "same dtype");
    assert_int_equal(ampc_last_status(), AMPC_STATUS_DTYPE);
    assert_null(ampc_conv2d(g_ctx, x, w, Z(AMPC_DTYPE_F16, 2), NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "bias [2] F16", "same dtype");
    assert_null(ampc_conv2d(g_ctx, Z(AMPC_DTYPE_I32, 1, 3, 5, 5), w, NULL, NULL));
    ASSERT_ERROR_MENTIONS("ampc_conv2d", "I32", "expected F32, F16 or BF16");
}

static void test_pool_params(void **state) {
    (void)state;
    ampc_tensor *x = Z(F32, 2, 3, 6, 5);
    assert_null(ampc_max_pool2d(g_ctx, x, NULL));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "params is NULL");
    assert_null(ampc_max_pool2d(g_ctx, x, &(ampc_pool2d_params){.kernel_h = 0, .kernel_w = 2}));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "kernel (0, 2)", "kernel >= 1");
    assert_null(ampc_max_pool2d(g_ctx, x, &(ampc_pool2d_params){.kernel_h = 3, .kernel_w = 3, .pad_h = 2}));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "pad (2, 0)", "pad <= kernel / 2");
    assert_null(ampc_max_pool2d(g_ctx, x, &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2, .stride_w = -1}));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "stride (0, -1)");
    assert_null(ampc_max_pool2d(g_ctx, x, &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 6}));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "[2, 3, 6, 5] F32", "kernel width 6", "padded input width 5");
    assert_null(ampc_max_pool2d(g_ctx, Z(F32, 6, 5), &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2}));
    ASSERT_ERROR_MENTIONS("ampc_max_pool2d", "[6, 5] F32", "(N, C, H, W)");
    /* pad = kernel / 2 is allowed, and stride 0 is the kernel */
    ampc_tensor *y = ampc_max_pool2d(g_ctx, x,
                                     &(ampc_pool2d_params){.kernel_h = 3, .kernel_w = 2, .pad_h = 1, .pad_w = 1});
    assert_non_null(y);
    assert_int_equal(ampc_tensor_dim(y, 2), 2); /* (6 + 2 - 3) / 3 + 1 */
    assert_int_equal(ampc_tensor_dim(y, 3), 3); /* (5 + 2 - 2) / 2 + 1 */
}

static void test_attention_shapes(void **state) {
    (void)state;
    ampc_tensor *q = Z(F32, 2, 3, 4, 8), *k = Z(F32, 2, 3, 5, 8), *v = Z(F32, 2, 3, 5, 6);
    assert_null(ampc_attention(g_ctx, Z(F32, 6, 4, 8), k, v, false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "q [6, 4, 8] F32", "4-D", "(B, H, Tq, D)");
    assert_null(ampc_attention(g_ctx, q, Z(F32, 2, 2, 5, 8), v, false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "k [2, 2, 5, 8] F32", "(B, H) differ");
    assert_null(ampc_attention(g_ctx, q, Z(F32, 2, 3, 5, 7), v, true));
    ASSERT_ERROR_MENTIONS("ampc_attention", "q [2, 3, 4, 8] F32", "k [2, 3, 5, 7] F32", "head sizes D differ");
    assert_null(ampc_attention(g_ctx, q, k, Z(F32, 2, 3, 4, 6), false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "v [2, 3, 4, 6] F32", "key counts Tk differ");
    assert_null(ampc_attention(g_ctx, Z(F32, 1, 1, 2, 0), Z(F32, 1, 1, 2, 0), Z(F32, 1, 1, 2, 3), false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "D must be at least 1");
    assert_null(ampc_attention(g_ctx, q, Z(AMPC_DTYPE_F16, 2, 3, 5, 8), v, false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "q [2, 3, 4, 8] F32", "k [2, 3, 5, 8] F16", "same dtype");
    assert_null(ampc_attention(g_ctx, q, k, Z(AMPC_DTYPE_BF16, 2, 3, 5, 6), false));
    ASSERT_ERROR_MENTIONS("ampc_attention", "v [2, 3, 5, 6] BF16", "same dtype");
    ampc_tensor *o = ampc_attention(g_ctx, q, k, v, true); /* causal with Tq != Tk is fine */
    assert_non_null(o);
    assert_int_equal(ampc_tensor_dim(o, 3), 6);
}

/* ---- semantics ---- */

static ampc_tensor *from(ampc_ctx *ctx, ampc_dtype dt, int nd, const int64_t *shape, const float *v, bool grad) {
    ampc_tensor *t = ampc_tensor_from_buffer(ctx, dt, nd, shape, v, F32);
    assert_non_null(t);
    if (grad) ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    return t;
}

static void test_pool_ties_and_nan(void **state) {
    (void)state;
    /* all equal, 2x2 windows at stride 1 on 3x3: each window gives its gradient to its top-left element */
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ampc_tensor *x = from(g_ctx, AMPC_DTYPE_BF16, SHAPE(1, 1, 3, 3), ones, true);
    ampc_tensor *y = ampc_max_pool2d(g_ctx, x,
                                     &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 1});
    assert_non_null(y);
    float g4[4] = {1, 2, 3, 4}, got[9];
    ASSERT_OK(ampc_backward_with(g_ctx, y, from(g_ctx, F32, SHAPE(1, 1, 2, 2), g4, false)));
    ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(x), got, F32));
    const float want[9] = {1, 2, 0, 3, 4, 0, 0, 0, 0};
    for (int i = 0; i < 9; i++) assert_true(got[i] == want[i]);
    /* NaN propagates; padding never wins, even over -inf */
    float v[4] = {-INFINITY, NAN, -INFINITY, -INFINITY}, out[9];
    ampc_tensor *p = ampc_max_pool2d(
        g_ctx, from(g_ctx, F32, SHAPE(1, 1, 2, 2), v, false),
        &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1});
    assert_non_null(p);
    assert_int_equal(ampc_tensor_numel(p), 9);
    ASSERT_OK(ampc_tensor_copy_to(p, out, F32));
    assert_true(out[0] == -INFINITY && isnan(out[1]) && isnan(out[2]) && out[3] == -INFINITY && isnan(out[4]));
    ampc_ctx_step_end(g_ctx);
}

static void test_empty_batch_and_causal_rows(void **state) {
    (void)state;
    ampc_tensor *y = ampc_conv2d(g_ctx, Z(F32, 0, 2, 4, 4), Z(F32, 3, 2, 3, 3), Z(F32, 3), NULL);
    assert_non_null(y);
    assert_int_equal(ampc_tensor_numel(y), 0);
    assert_int_equal(ampc_tensor_dim(y, 1), 3);
    assert_non_null(ampc_max_pool2d(g_ctx, Z(F32, 0, 2, 4, 4), &(ampc_pool2d_params){.kernel_h = 2, .kernel_w = 2}));
    /* no keys: the weights over an empty row are empty and the output is 0 (as softmax(empty) @ v) */
    ampc_tensor *e = ampc_attention(g_ctx, Z(F32, 1, 2, 3, 4), Z(F32, 1, 2, 0, 4), Z(F32, 1, 2, 0, 5), false);
    assert_non_null(e);
    float z[30];
    ASSERT_OK(ampc_tensor_copy_to(e, z, F32));
    for (int i = 0; i < 30; i++) assert_true(z[i] == 0);
    /* huge scores: causal row 0 sees key 0 only and is exactly v[0]; nothing overflows to NaN */
    float q[8], k[8], v[8], o[8];
    for (int i = 0; i < 8; i++) {
        q[i] = 1e3f * (float)(i + 1), v[i] = (float)i;
        k[i] = (i % 2 ? -500.0f : 1000.0f) * (float)(i / 2 + 1);
    }
    ampc_tensor *t = ampc_attention(g_ctx, from(g_ctx, AMPC_DTYPE_F16, SHAPE(1, 1, 4, 2), q, false),
                                    from(g_ctx, AMPC_DTYPE_F16, SHAPE(1, 1, 4, 2), k, false),
                                    from(g_ctx, AMPC_DTYPE_F16, SHAPE(1, 1, 4, 2), v, false), true);
    assert_non_null(t);
    ASSERT_OK(ampc_tensor_copy_to(t, o, F32));
    for (int i = 0; i < 8; i++) assert_true(isfinite(o[i]));
    assert_true(o[0] == 0 && o[1] == 1);
    ampc_ctx_step_end(g_ctx);
}

/* conv2d + max_pool2d + attention, forward and backward, in a context with `threads` threads: every output
 * and gradient, concatenated as raw F32 bits. */
static void run_all(int threads, float *res, size_t n) {
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 7, .threads = threads}, &ctx));
    ampc_tensor *x = ampc_tensor_normal(ctx, AMPC_DTYPE_BF16, SHAPE(3, 5, 17, 19), 0, 1);
    ampc_tensor *w = ampc_tensor_normal(ctx, AMPC_DTYPE_BF16, SHAPE(6, 5, 3, 3), 0, 1);
    ampc_tensor *q = ampc_tensor_normal(ctx, AMPC_DTYPE_BF16, SHAPE(2, 9, 40, 16), 0, 1);
    ampc_tensor *tensors[3] = {x, w, q};
    for (int i = 0; i < 3; i++) ASSERT_OK(ampc_tensor_set_requires_grad(tensors[i], true));
    ampc_tensor *c = ampc_conv2d(ctx, x, w, NULL, &(ampc_conv2d_params){.stride_h = 2, .pad_h = 1, .pad_w = 1});
    ampc_tensor *p = ampc_max_pool2d(
        ctx, c,
        &(ampc_pool2d_params){.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1});
    ampc_tensor *a = ampc_attention(ctx, q, q, q, true);
    ampc_tensor *loss = ampc_add(ctx, ampc_sum(ctx, ampc_mul(ctx, p, p), NULL, 0, false),
                                 ampc_sum(ctx, ampc_mul(ctx, a, a), NULL, 0, false));
    ASSERT_OK(ampc_backward(ctx, loss));
    ampc_tensor *outs[5] = {p, a, ampc_tensor_grad(x), ampc_tensor_grad(w), ampc_tensor_grad(q)};
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        assert_non_null(outs[i]);
        size_t m = (size_t)ampc_tensor_numel(outs[i]);
        assert_true(at + m <= n);
        ASSERT_OK(ampc_tensor_copy_to(outs[i], res + at, F32));
        at += m;
    }
    ampc_ctx_free(ctx);
}

static void test_thread_count_independent(void **state) {
    (void)state;
    size_t n = 1 << 17;
    float *one = calloc(n, sizeof *one), *many = calloc(n, sizeof *many);
    run_all(1, one, n);
    run_all(5, many, n);
    assert_memory_equal(one, many, n * sizeof *one);
    free(one), free(many);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_inputs),
        cmocka_unit_test(test_conv_shapes),
        cmocka_unit_test(test_conv_params_and_dtypes),
        cmocka_unit_test(test_pool_params),
        cmocka_unit_test(test_attention_shapes),
        cmocka_unit_test(test_pool_ties_and_nan),
        cmocka_unit_test(test_empty_batch_and_causal_rows),
        cmocka_unit_test(test_thread_count_independent),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
