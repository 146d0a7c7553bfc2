/* test_stats_classify.c: ampc_stats_classify, the range classes of the numerics doctor (test_stats.c
 * checks the statistics built on them), against a direct computation: every value converted with
 * ampc_format_from_f64 and its result classified from the format's bit fields, for FP16, BF16, FP8-E4M3
 * and FP8-E5M2, on F32 boundaries (65504, 65519.99, 65520, 2^-24, 2^-25, 2^-14, the FP8 maxima and the
 * first values above them that overflow, found by bisection through the conversion code), zeros, signs,
 * inf/NaN, a sweep of F32 bit patterns, and every F16 and BF16 pattern as input. */
#include "test_util.h"

#include <stdlib.h>

static const ampc_format k_formats[] = {AMPC_FORMAT_FP16, AMPC_FORMAT_BF16, AMPC_FORMAT_FP8_E4M3, AMPC_FORMAT_FP8_E5M2};
#define NFMT (sizeof k_formats / sizeof k_formats[0])

/* The class of one value in fmt, from the bits ampc_format_from_f64 gives: 0 fits (or zero, or not
 * finite), 1 overflow, 2 underflow, 3 subnormal. */
static int direct_class(ampc_format fmt, double x) {
    if (x == 0 || !isfinite(x)) return 0;
    ampc_format_info info;
    ampc_format_get_info(fmt, &info);
    uint32_t bits = ampc_format_from_f64(fmt, x);
    uint32_t mag = bits & ((1u << (info.exponent_bits + info.mantissa_bits)) - 1);
    uint32_t exp = mag >> info.mantissa_bits;
    if (!isfinite(ampc_format_to_f64(fmt, bits))) return 1; /* inf, or E4M3's NaN */
    if (mag == 0) return 2;
    return exp == 0 ? 3 : 0;
}

static ampc_stats_range direct_range(ampc_format fmt, const float *x, size_t n) {
    ampc_stats_range r = {0};
    for (size_t i = 0; i < n; i++) {
        int c = direct_class(fmt, x[i]);
        r.overflow += c == 1, r.underflow += c == 2, r.subnormal += c == 3;
    }
    return r;
}

static ampc_stats_range classify(ampc_format fmt, const void *x, ampc_dtype dt, size_t n) {
    ampc_stats_range r;
    ASSERT_OK(ampc_stats_classify(fmt, x, dt, n, &r));
    return r;
}

static void expect_range(ampc_stats_range got, ampc_stats_range want, ampc_format fmt, const char *what) {
    if (got.overflow != want.overflow || got.underflow != want.underflow || got.subnormal != want.subnormal) {
        ampc_format_info info;
        ampc_format_get_info(fmt, &info);
        FAILF("%s in %s: classify (overflow %llu, underflow %llu, subnormal %llu), direct (%llu, %llu, %llu)", what,
              info.name, (unsigned long long)got.overflow, (unsigned long long)got.underflow,
              (unsigned long long)got.subnormal, (unsigned long long)want.overflow, (unsigned long long)want.underflow,
              (unsigned long long)want.subnormal);
    }
}

/* The smallest float above fmt's largest finite value that overflows, by bisection on F32 bit patterns
 * through the conversion code (not the library's thresholds). */
static float overflow_edge(ampc_format fmt) {
    ampc_format_info info;
    ampc_format_get_info(fmt, &info);
    uint32_t lo = tu_bits((float)info.max_finite), hi = 0x7f800000u;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (direct_class(fmt, tu_float(mid)) == 1) hi = mid;
        else lo = mid + 1;
    }
    return tu_float(lo);
}

/* ---- the tests ---- */

static void test_classify_fp16_boundaries(void **state) {
    (void)state;
    const float sub_max = 0x1p-14f - 0x1p-24f;          /* FP16's largest subnormal */
    const float below_normal = nextafterf(0x1p-14f, 0); /* rounds up to 2^-14 or not: the conversion says */
    const bool below_normal_rounds_up = ampc_f16_from_f32(below_normal) == 0x0400;
    const struct {
        float x;
        int cls; /* 0 fits, 1 overflow, 2 underflow, 3 subnormal */
    } cases[] = {
        {65504.0f, 0},
        {65519.99f, 0}, /* rounds to 65504 */
        {65520.0f, 1},
        {-65520.0f, 1},
        {1e6f, 1},
        {0x1p-24f, 3},
        {-0x1p-24f, 3},
        {0x1p-25f, 2}, /* the tie between 0 and 2^-24 goes to even: 0 */
        {nextafterf(0x1p-25f, 1), 3},
        {1e-30f, 2},
        {0x1p-14f, 0},
        {sub_max, 3},
        {below_normal, below_normal_rounds_up ? 0 : 3},
        {0.0f, 0},
        {-0.0f, 0},
        {INFINITY, 0}, /* not finite: never counted as overflow */
        {-INFINITY, 0},
        {NAN, 0},
        {1.0f, 0},
        {-3.5f, 0},
    };
    float all[sizeof cases / sizeof cases[0]];
    ampc_stats_range want = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int c = cases[i].cls;
        all[i] = cases[i].x;
        want.overflow += c == 1, want.underflow += c == 2, want.subnormal += c == 3;
        ampc_stats_range one = classify(AMPC_FORMAT_FP16, &cases[i].x, AMPC_DTYPE_F32, 1);
        ampc_stats_range exp1 = {c == 1, c == 2, c == 3};
        char what[64];
        snprintf(what, sizeof what, "%a alone", (double)cases[i].x);
        expect_range(one, exp1, AMPC_FORMAT_FP16, what);
        expect_range(one, direct_range(AMPC_FORMAT_FP16, &cases[i].x, 1), AMPC_FORMAT_FP16, what);
    }
    expect_range(classify(AMPC_FORMAT_FP16, all, AMPC_DTYPE_F32, sizeof all / sizeof all[0]), want, AMPC_FORMAT_FP16,
                 "the FP16 boundary list");
}

static void test_classify_format_edges(void **state) {
    (void)state;
    for (size_t f = 0; f < NFMT; f++) {
        ampc_format fmt = k_formats[f];
        ampc_format_info info;
        ampc_format_get_info(fmt, &info);
        float edge = overflow_edge(fmt), below = nextafterf(edge, 0);
        /* the documented maxima, and the value just below the edge still rounds to them */
        if (fmt == AMPC_FORMAT_FP8_E4M3) assert_true(info.max_finite == 448.0);
        if (fmt == AMPC_FORMAT_FP8_E5M2) assert_true(info.max_finite == 57344.0);
        assert_true(edge > info.max_finite);
        /* ties go to the even neighbour: 464 (between 448 and the NaN code) stays 448 in E4M3; 61440 (between
         * 57344 and 65536) rounds to infinity in E5M2, as 65520 does in FP16 and 0x7F7F8000 in BF16 */
        const float want_edge = fmt == AMPC_FORMAT_FP8_E4M3   ? nextafterf(464.0f, INFINITY)
                                : fmt == AMPC_FORMAT_FP8_E5M2 ? 61440.0f
                                : fmt == AMPC_FORMAT_FP16     ? 65520.0f
                                                              : tu_float(0x7f7f8000u);
        if (edge != want_edge) FAILF("%s overflows from %a, expected %a", info.name, (double)edge, (double)want_edge);
        assert_true(ampc_format_to_f64(fmt, ampc_format_from_f64(fmt, below)) == info.max_finite);
        const float xs[] = {(float)info.max_finite,
                            -(float)info.max_finite,
                            below,
                            edge,
                            -edge,
                            (float)info.min_normal,
                            (float)info.min_subnormal,
                            (float)info.min_subnormal / 2,
                            nextafterf((float)info.min_subnormal / 2, 1),
                            nextafterf((float)info.min_normal, 0)};
        const int want_cls[] = {0, 0, 0, 1, 1, 0, 3, 2, 3, -1 /* the conversion decides */};
        for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
            ampc_stats_range one = classify(fmt, &xs[i], AMPC_DTYPE_F32, 1);
            int c = want_cls[i] >= 0 ? want_cls[i] : direct_class(fmt, xs[i]);
            char what[80];
            snprintf(what, sizeof what, "%a alone (element %zu)", (double)xs[i], i);
            expect_range(one, (ampc_stats_range){c == 1, c == 2, c == 3}, fmt, what);
            assert_int_equal(direct_class(fmt, xs[i]), c);
        }
    }
}

/* Random F32 patterns with the library's interesting specials, and a sweep over all patterns. */
static void test_classify_f32_sweep(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    uint32_t *bits = malloc(N * sizeof *bits);
    assert_non_null(bits);
    tu_fill_interesting(bits, N / 2, 42);
    for (uint32_t i = N / 2; i < N; i++) bits[i] = (i - N / 2) * 8191u; /* every 8191st pattern, both signs */
    for (size_t f = 0; f < NFMT; f++)
        expect_range(classify(k_formats[f], bits, AMPC_DTYPE_F32, N), direct_range(k_formats[f], (float *)bits, N),
                     k_formats[f], "F32 sweep");
    assert_int_equal(ampc_stats_classify(AMPC_FORMAT_FP16, NULL, AMPC_DTYPE_F32, 0, &(ampc_stats_range){0}), AMPC_OK);
    assert_int_equal(ampc_stats_classify(AMPC_FORMAT_FP32, bits, AMPC_DTYPE_F32, 1, &(ampc_stats_range){0}),
                     AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_stats_classify(AMPC_FORMAT_FP16, bits, AMPC_DTYPE_I32, 1, &(ampc_stats_range){0}),
                     AMPC_STATUS_DTYPE);
    free(bits);
}

/* Every F16 and every BF16 bit pattern as input (src_dtype), widened independently (tu_decode). */
static void test_classify_16bit_inputs(void **state) {
    (void)state;
    static uint16_t h[65536];
    static float wide[65536];
    for (int src = 0; src < 2; src++) {
        ampc_dtype dt = src ? AMPC_DTYPE_BF16 : AMPC_DTYPE_F16;
        for (uint32_t i = 0; i < 65536; i++) {
            h[i] = (uint16_t)i;
            wide[i] = (float)(src ? tu_decode(i, 7, 8, 127) : tu_decode(i, 10, 5, 15));
        }
        for (size_t f = 0; f < NFMT; f++) {
            ampc_stats_range got = classify(k_formats[f], h, dt, 65536), want = direct_range(k_formats[f], wide, 65536);
            expect_range(got, want, k_formats[f], ampc_dtype_name(dt));
            if (k_formats[f] == AMPC_FORMAT_FP16 && dt == AMPC_DTYPE_F16)
                assert_true(got.overflow == 0 && got.underflow == 0 && got.subnormal == 2 * 1023);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_fp16_boundaries),
        cmocka_unit_test(test_classify_format_edges),
        cmocka_unit_test(test_classify_f32_sweep),
        cmocka_unit_test(test_classify_16bit_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
