/* test_fp8_recipe.c: the FP8 scaling recipes against hand-computed values: TransformerEngine's scale rule
 * (powers of two, the margin, amax 0 / inf / NaN keeping the previous scale), current scaling, and
 * delayed scaling's history (MAX and MOST_RECENT, TE's roll with row 0 zeroed, a run of steps whose scales
 * follow the largest amax of the window, history length 1) and the argument errors. */
#include "test_util.h"

#include <math.h>

#define E4M3_MAX 448.0
#define E5M2_MAX 57344.0

static void test_scale_rule(void **state) {
    (void)state;
    assert_true(ampc_fp8_scale_rule(1.0, E4M3_MAX, 0, 7) == 256);        /* log2(448) = 8.81 */
    assert_true(ampc_fp8_scale_rule(1.0, E4M3_MAX, 1, 7) == 128);        /* the margin halves it */
    assert_true(ampc_fp8_scale_rule(448.0, E4M3_MAX, 0, 7) == 1);        /* amax at max: 1 */
    assert_true(ampc_fp8_scale_rule(449.0, E4M3_MAX, 0, 7) == 0.5);      /* just above: scale down */
    assert_true(ampc_fp8_scale_rule(3.0, E5M2_MAX, 0, 7) == 16384);      /* log2(19114.7) = 14.2 */
    assert_true(ampc_fp8_scale_rule(1e5, E5M2_MAX, 0, 7) == 0.5);        /* 57344 / 1e5 = 0.57 */
    assert_true(ampc_fp8_scale_rule(0x1p-20, E4M3_MAX, 2, 7) == 0x1p26); /* 2^(20 + 8) / 4 */
    assert_true(ampc_fp8_scale_rule(0.0, E4M3_MAX, 0, 7) == 7);          /* nothing to learn: keep */
    assert_true(ampc_fp8_scale_rule(-1.0, E4M3_MAX, 0, 7) == 7);
    assert_true(ampc_fp8_scale_rule(INFINITY, E4M3_MAX, 0, 7) == 7);
    assert_true(ampc_fp8_scale_rule(NAN, E4M3_MAX, 0, 7) == 7);
    assert_true(ampc_fp8_current_scale(1.0, E4M3_MAX, 0) == 256);
    assert_true(ampc_fp8_current_scale(0.0, E4M3_MAX, 0) == 1); /* no amax: scale 1 */
    /* every result puts the amax at most fp8_max / 2^margin, and within a factor 2 of it */
    for (double a = 1e-6; a < 1e6; a *= 1.37)
        for (int m = 0; m < 3; m++) {
            double s = ampc_fp8_scale_rule(a, E4M3_MAX, m, 1);
            assert_true(a * s <= E4M3_MAX / ldexp(1, m) && a * s * 2 > E4M3_MAX / ldexp(1, m));
            assert_true(log2(s) == floor(log2(s))); /* a power of two */
        }
}

static void expect_history(const float *h, const float *want, int n) {
    for (int i = 0; i < n; i++)
        if (h[i] != want[i]) FAILF("history[%d] = %g, expected %g", i, h[i], want[i]);
}

static void test_delayed_update_one_step(void **state) {
    (void)state;
    float h[4] = {3, 1, 5, 2}, scale = 1, amax;
    ASSERT_OK(ampc_fp8_delayed_update(h, 4, AMPC_FP8_AMAX_MAX, E4M3_MAX, 0, &scale, &amax));
    assert_true(amax == 5 && scale == 64);             /* 448 / 5 = 89.6 */
    expect_history(h, (const float[]){0, 5, 2, 3}, 4); /* roll(-1), then row 0 zeroed (TE) */
    float r[4] = {3, 1, 5, 2};
    scale = 1;
    ASSERT_OK(ampc_fp8_delayed_update(r, 4, AMPC_FP8_AMAX_MOST_RECENT, E4M3_MAX, 0, &scale, &amax));
    assert_true(amax == 3 && scale == 128); /* 448 / 3 = 149.3 */
    expect_history(r, (const float[]){0, 5, 2, 3}, 4);
}

/* Steps whose forward passes record amaxes 1, 8, 2, 0.5, 0.25 with a history of 3: the scale follows the
 * largest amax still in TE's window (the new row at the end, row 1 dropped each step). */
static void test_delayed_update_run(void **state) {
    (void)state;
    static const float amaxes[] = {1, 8, 2, 0.5f, 0.25f};
    static const float want[] = {256, 32, 32, 32, 128};
    float h[3] = {0}, scale = 1;
    for (int s = 0; s < 5; s++) {
        h[0] = amaxes[s] > h[0] ? amaxes[s] : h[0]; /* the forward raises row 0 */
        ASSERT_OK(ampc_fp8_delayed_update(h, 3, AMPC_FP8_AMAX_MAX, E4M3_MAX, 0, &scale, NULL));
        if (scale != want[s]) FAILF("step %d: scale %g, expected %g", s, scale, want[s]);
    }
    expect_history(h, (const float[]){0, 0.5f, 0.25f}, 3);
}

static void test_delayed_update_edges(void **state) {
    (void)state;
    float h1[1] = {2}, scale = 4, amax;
    ASSERT_OK(ampc_fp8_delayed_update(h1, 1, AMPC_FP8_AMAX_MAX, E5M2_MAX, 1, &scale, &amax));
    assert_true(amax == 2 && scale == 8192 && h1[0] == 0); /* 2^(14 - 1) */
    float z[2] = {0, 0};
    ASSERT_OK(ampc_fp8_delayed_update(z, 2, AMPC_FP8_AMAX_MAX, E4M3_MAX, 0, &scale, NULL));
    assert_true(scale == 8192); /* an empty history keeps the scale */
    float n[3] = {1, NAN, 4};
    ASSERT_OK(ampc_fp8_delayed_update(n, 3, AMPC_FP8_AMAX_MAX, E4M3_MAX, 0, &scale, &amax));
    assert_true(isnan(amax) && scale == 8192); /* torch.max propagates NaN; the rule keeps the scale */
    assert_int_equal(ampc_fp8_delayed_update(NULL, 3, AMPC_FP8_AMAX_MAX, E4M3_MAX, 0, &scale, NULL),
                     AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_fp8_delayed_update(h1, 0, AMPC_FP8_AMAX_MAX, E4M3_MAX, 0, &scale, NULL),
                     AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_fp8_delayed_update(h1, 1, (ampc_fp8_amax_compute)7, E4M3_MAX, 0, &scale, NULL),
                     AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_fp8_delayed_update(h1, 1, AMPC_FP8_AMAX_MAX, 0, 0, &scale, NULL), AMPC_STATUS_INVALID_ARG);
    assert_non_null(strstr(ampc_last_error(), "ampc_fp8_delayed_update"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_rule),
        cmocka_unit_test(test_delayed_update_one_step),
        cmocka_unit_test(test_delayed_update_run),
        cmocka_unit_test(test_delayed_update_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
