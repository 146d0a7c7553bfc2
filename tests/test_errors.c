/* test_errors.c: bad input to the elementwise, GEMM-like, reduction and shape ops: NULL inputs, shapes
 * that do not broadcast or multiply, wrong ranks, unsupported dtypes, dims out of range, tensors of
 * another context. Every case must return NULL with a message naming the op and what was wrong;
 * none may crash (the sanitizer build runs this too). */
#include "test_util.h"

TU_CONTEXT(0, 1)

static void test_null_inputs(void **state) {
    (void)state;
    ampc_tensor *x = Z(AMPC_DTYPE_F32, 2, 3);
    ampc_clear_error();
    assert_null(ampc_add(g_ctx, x, NULL));
    ASSERT_ERROR_MENTIONS("ampc_add", "b is NULL");
    ampc_clear_error();
    assert_null(ampc_linear(g_ctx, NULL, x, NULL));
    ASSERT_ERROR_MENTIONS("ampc_linear", "x is NULL");
    ampc_clear_error();
    assert_null(ampc_exp(g_ctx, NULL));
    ASSERT_ERROR_MENTIONS("ampc_exp");
    /* a NULL ctx is named, not dereferenced */
    assert_null(ampc_relu(NULL, x));
    ASSERT_ERROR_MENTIONS("ampc_relu", "ctx is NULL");
    /* in a chain the first failure's message survives */
    assert_null(ampc_tanh(g_ctx, ampc_matmul(g_ctx, x, x, 0)));
    ASSERT_ERROR_MENTIONS("ampc_matmul", "[2, 3] F32", "inner dims 3 and 2");
}

static void test_shapes(void **state) {
    (void)state;
    ampc_tensor *a = Z(AMPC_DTYPE_F32, 4, 3), *b = Z(AMPC_DTYPE_F32, 5, 3), *v = Z(AMPC_DTYPE_F32, 3);
    assert_null(ampc_add(g_ctx, a, b));
    ASSERT_ERROR_MENTIONS("ampc_add", "[4, 3] F32", "[5, 3] F32", "do not broadcast", "4 vs 5");
    assert_null(ampc_matmul(g_ctx, a, v, 0));
    ASSERT_ERROR_MENTIONS("ampc_matmul", "[3] F32", "at least 2 dims");
    assert_null(ampc_matmul(g_ctx, a, b, AMPC_TRANS_A));
    ASSERT_ERROR_MENTIONS("[4, 3] F32^T", "inner dims 4 and 5");
    assert_non_null(ampc_matmul(g_ctx, a, b, AMPC_TRANS_B));
    assert_null(ampc_matmul(g_ctx, a, b, 4u));
    ASSERT_ERROR_MENTIONS("flags 0x4");
    assert_null(ampc_matmul(g_ctx, Z(AMPC_DTYPE_F32, 2, 4, 3), Z(AMPC_DTYPE_F32, 3, 3, 2), 0));
    ASSERT_ERROR_MENTIONS("batch dims", "2 vs 3");
    assert_null(ampc_bmm(g_ctx, Z(AMPC_DTYPE_F32, 2, 4, 3), Z(AMPC_DTYPE_F32, 3, 2), 0));
    ASSERT_ERROR_MENTIONS("ampc_bmm", "3-D");
    assert_null(ampc_bmm(g_ctx, Z(AMPC_DTYPE_F32, 2, 4, 3), Z(AMPC_DTYPE_F32, 3, 3, 2), 0));
    ASSERT_ERROR_MENTIONS("ampc_bmm", "batch sizes differ");
    assert_null(ampc_linear(g_ctx, a, Z(AMPC_DTYPE_F32, 2, 4), NULL));
    ASSERT_ERROR_MENTIONS("ampc_linear", "x [4, 3] F32", "weight [2, 4] F32", "(out, in)");
    assert_null(ampc_linear(g_ctx, a, Z(AMPC_DTYPE_F32, 2, 3), Z(AMPC_DTYPE_F32, 3)));
    ASSERT_ERROR_MENTIONS("bias [3] F32");
    assert_null(ampc_linear(g_ctx, a, Z(AMPC_DTYPE_BF16, 2, 3), NULL));
    ASSERT_ERROR_MENTIONS("same dtype", "BF16");
}

static void test_dtypes_and_contexts(void **state) {
    (void)state;
    ampc_tensor *d = Z(AMPC_DTYPE_F64, 3), *i = Z(AMPC_DTYPE_I32, 3), *f = Z(AMPC_DTYPE_F32, 3);
    assert_null(ampc_add(g_ctx, f, d));
    ASSERT_ERROR_MENTIONS("ampc_add", "b [3] F64", "expected F32, F16 or BF16");
    assert_null(ampc_sigmoid(g_ctx, i));
    ASSERT_ERROR_MENTIONS("ampc_sigmoid", "I32");
    assert_null(ampc_gelu(g_ctx, f, (ampc_gelu_form)7));
    ASSERT_ERROR_MENTIONS("ampc_gelu", "form 7");
    ampc_ctx *other;
    ASSERT_OK(ampc_ctx_new(NULL, &other));
    ampc_tensor *o = ampc_tensor_zeros(other, AMPC_DTYPE_F32, 1, (int64_t[]){3});
    assert_null(ampc_mul(g_ctx, f, o));
    ASSERT_ERROR_MENTIONS("ampc_mul", "another context");
    ampc_ctx_free(other);
}

static void test_reductions_and_shape_ops(void **state) {
    (void)state;
    ampc_tensor *x = Z(AMPC_DTYPE_F32, 2, 3, 4);
    assert_null(ampc_sum(g_ctx, x, (int[]){3}, 1, false));
    ASSERT_ERROR_MENTIONS("ampc_sum", "dim 3", "out of range", "-3 to 2");
    assert_null(ampc_mean(g_ctx, x, (int[]){1, -2}, 2, false));
    ASSERT_ERROR_MENTIONS("ampc_mean", "listed twice");
    assert_null(ampc_sum(g_ctx, x, NULL, 2, false));
    ASSERT_ERROR_MENTIONS("ampc_sum", "2 dims to reduce");
    const ampc_tensor *parts[2] = {x, Z(AMPC_DTYPE_F32, 2, 5, 4)};
    assert_null(ampc_concat(g_ctx, parts, 2, 2));
    ASSERT_ERROR_MENTIONS("ampc_concat", "tensors[1] [2, 5, 4] F32", "outside dim 2");
    assert_non_null(ampc_concat(g_ctx, parts, 2, 1));
    const ampc_tensor *mixed[2] = {x, Z(AMPC_DTYPE_BF16, 2, 3, 4)};
    assert_null(ampc_concat(g_ctx, mixed, 2, 0));
    ASSERT_ERROR_MENTIONS("dtype differs");
    assert_null(ampc_concat(g_ctx, parts, 0, 0));
    ASSERT_ERROR_MENTIONS("0 tensors");
    ampc_tensor *g = Z(AMPC_DTYPE_F32, 3);
    ASSERT_OK(ampc_tensor_set_requires_grad(g, true));
    assert_null(ampc_tensor_cast(g, AMPC_DTYPE_I64));
    ASSERT_ERROR_MENTIONS("ampc_tensor_cast", "requires grad", "I64");
    assert_null(ampc_tensor_cast(g, (ampc_dtype)40));
    ASSERT_ERROR_MENTIONS("dtype 40");
}

/* The range-statistics and FP8 calls on wrong input: a status and a message naming the call. */
static void test_stats_and_fp8(void **state) {
    (void)state;
    ampc_stats *st;
    assert_int_equal(ampc_stats_new(NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_OK(ampc_stats_new(&st));
    assert_int_equal(ampc_stats_attach(NULL, st), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_stats_attach", "ctx is NULL");
    ampc_stats_advice a;
    assert_int_equal(ampc_stats_advise(st, 0, AMPC_FORMAT_FP16, &a), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_stats_advise", "site 0 of 0");
    assert_null(ampc_stats_get(st, 0));
    assert_int_equal(ampc_stats_cast_inputs(st, -1, NULL, 0), 0);
    int k;
    assert_int_equal(ampc_stats_loss_scale(st, AMPC_FORMAT_FP32, 0, &k, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_stats_loss_scale", "FP16");
    ampc_stats_recommendation r;
    assert_int_equal(ampc_stats_recommend(st, AMPC_FORMAT_FP8_E4M3, &r), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_stats_recommend", "FP16 or BF16");
    float x = 1;
    ampc_stats_range rg;
    assert_int_equal(ampc_stats_classify(AMPC_FORMAT_FP16, &x, AMPC_DTYPE_I32, 1, &rg), AMPC_STATUS_DTYPE);
    ASSERT_ERROR_MENTIONS("ampc_stats_classify", "I32");
    ampc_stats_free(st);
    ampc_fp8_stats fs;
    assert_int_equal(ampc_fp8_get_stats(g_ctx, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_fp8_get_stats");
    ASSERT_OK(ampc_fp8_get_stats(g_ctx, &fs));
    assert_int_equal(fs.tensors, 0);
    assert_int_equal(ampc_fp8_begin(NULL, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_fp8_begin", "ctx is NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_inputs),         cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_dtypes_and_contexts), cmocka_unit_test(test_reductions_and_shape_ops),
        cmocka_unit_test(test_stats_and_fp8),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
