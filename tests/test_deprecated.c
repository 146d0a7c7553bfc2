/* test_deprecated.c: the old names of renamed public functions (ampc.h, "Deprecated names") still link
 * and give what their new names give, so code written against 0.1 keeps working for one release. Built
 * with the deprecation warnings silenced: they are the point of this file. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "test_util.h"

TU_CONTEXT(3, 1)

static void test_format_and_dataset(void **state) {
    (void)state;
    ampc_format_info a, b;
    ASSERT_OK(ampc_format_info_get(AMPC_FORMAT_FP8_E4M3, &a));
    ASSERT_OK(ampc_format_get_info(AMPC_FORMAT_FP8_E4M3, &b));
    assert_true(a.max_finite == b.max_finite && a.mantissa_bits == b.mantissa_bits && a.verified && b.verified);
    assert_int_equal(ampc_format_info_get(AMPC_FORMAT_COUNT, &a), AMPC_STATUS_INVALID_ARG);
    ampc_dataset *ds;
    ASSERT_OK(ampc_dataset_open(&(ampc_dataset_params){.kind = AMPC_DATA_BUILTIN}, &ds));
    ampc_dataset_info x, y;
    ASSERT_OK(ampc_dataset_info_get(ds, &x));
    ASSERT_OK(ampc_dataset_get_info(ds, &y));
    assert_true(x.num_classes == y.num_classes && x.split_size[0] == y.split_size[0] && x.kind == y.kind);
    ampc_dataset_free(ds);
}

static void test_autocast_and_anomaly(void **state) {
    (void)state;
    ampc_cast_policy p, q;
    ASSERT_OK(ampc_autocast_set_policy(g_ctx, "gelu", AMPC_CAST_FP32));
    ASSERT_OK(ampc_autocast_get_policy(g_ctx, "gelu", &p));
    ASSERT_OK(ampc_autocast_policy(g_ctx, "gelu", &q));
    assert_int_equal(p, AMPC_CAST_FP32);
    assert_int_equal(p, q);
    assert_int_equal(ampc_autocast_get_policy(g_ctx, "no_such_op", &p), AMPC_STATUS_INVALID_ARG);
    ampc_autocast_stats s, t;
    ASSERT_OK(ampc_autocast_stats_get(g_ctx, &s));
    ASSERT_OK(ampc_autocast_get_stats(g_ctx, &t));
    assert_true(s.casts == t.casts && s.cache_hits == t.cache_hits && s.cache_entries == t.cache_entries);
    ampc_ctx_set_check_finite(g_ctx, true);
    assert_true(ampc_autograd_detect_anomaly(g_ctx));
    ampc_ctx_set_check_finite(g_ctx, false);
    assert_false(ampc_autograd_detect_anomaly(g_ctx));
}

static void test_grad_scaler(void **state) {
    (void)state;
    ampc_grad_scaler *gs;
    ASSERT_OK(ampc_grad_scaler_new(g_ctx, NULL, &gs));
    ampc_grad_scaler_overflow a, b;
    ASSERT_OK(ampc_grad_scaler_overflow_get(gs, &a));
    ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &b));
    assert_true(!a.found_inf && !b.found_inf && a.tensors == b.tensors);
    assert_int_equal(ampc_grad_scaler_overflow_get(NULL, &a), AMPC_STATUS_INVALID_ARG);
    ampc_grad_scaler_free(gs);
}

static void test_fp32_matmul_precision(void **state) {
    (void)state;
    ASSERT_OK(ampc_set_fp32_matmul_precision(g_ctx, AMPC_FP32_MEDIUM));
    assert_int_equal(ampc_get_fp32_matmul_precision(g_ctx), AMPC_FP32_MEDIUM);
    assert_int_equal(ampc_ctx_fp32_matmul_precision(g_ctx), AMPC_FP32_MEDIUM);
    ASSERT_OK(ampc_fp32_matmul_precision_push(g_ctx, AMPC_FP32_HIGH));
    assert_int_equal(ampc_ctx_fp32_matmul_precision(g_ctx), AMPC_FP32_HIGH);
    ASSERT_OK(ampc_fp32_matmul_precision_pop(g_ctx));
    assert_int_equal(ampc_get_fp32_matmul_precision(g_ctx), AMPC_FP32_MEDIUM);
    assert_int_equal(ampc_fp32_matmul_precision_pop(g_ctx), AMPC_STATUS_STATE); /* nothing pushed */
    ASSERT_OK(ampc_set_fp32_matmul_precision(g_ctx, AMPC_FP32_HIGHEST));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_and_dataset),
        cmocka_unit_test(test_autocast_and_anomaly),
        cmocka_unit_test(test_grad_scaler),
        cmocka_unit_test(test_fp32_matmul_precision),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
