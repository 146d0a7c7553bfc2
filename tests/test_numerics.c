/* test_numerics.c: the scalar conversions and the format table. Exhaustive over the 16-bit formats
 * (every FP16 and BF16 pattern decodes to the exact value and survives a round trip), boundary-exact at
 * the named edge cases, and the generic codec (FP8, TF32, F64 and integer conversions) checked against
 * the dedicated paths and against hand-computed values. */
#include "test_util.h"

#include <fenv.h>
#include <float.h>
#include <stdlib.h>

/* ---- decoding: all 65,536 patterns, against ldexp on the fields ---- */

static void test_f16_decode_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = tu_decode(h, 10, 5, 15);
        float got = ampc_f16_to_f32((uint16_t)h);
        if (isnan(want)) {
            uint32_t g = tu_bits(got);
            /* quiet NaN, same sign, payload moved up */
            uint32_t expect = (h & 0x8000u) << 16 | 0x7fc00000u | (h & 0x1ffu) << 13;
            if (g != expect) FAILF("f16 0x%04x: got 0x%08x, expected NaN 0x%08x", h, g, expect);
        } else if ((double)got != want || !signbit(got) != !signbit(want)) {
            FAILF("f16 0x%04x decodes to %a, expected %a", h, (double)got, want);
        }
    }
}

static void test_bf16_decode_all(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = tu_decode(h, 7, 8, 127);
        float got = ampc_bf16_to_f32((uint16_t)h);
        if (isnan(want)) {
            uint32_t expect = h << 16 | 0x400000u;
            if (tu_bits(got) != expect) FAILF("bf16 0x%04x: got 0x%08x, expected 0x%08x", h, tu_bits(got), expect);
        } else if ((double)got != want || !signbit(got) != !signbit(want)) {
            FAILF("bf16 0x%04x decodes to %a, expected %a", h, (double)got, want);
        }
    }
}

/* ---- round trips: f32 -> 16 -> f32 reproduces every non-NaN pattern ---- */

static void test_round_trips(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        bool f16_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff), bf16_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (!f16_nan && ampc_f16_from_f32(ampc_f16_to_f32((uint16_t)h)) != h)
            FAILF("f16 0x%04x does not survive f16 -> f32 -> f16", h);
        if (!bf16_nan && ampc_bf16_from_f32(ampc_bf16_to_f32((uint16_t)h)) != h)
            FAILF("bf16 0x%04x does not survive bf16 -> f32 -> bf16", h);
        /* NaNs stay NaN with their sign (and quiet NaNs keep their bits) */
        if (f16_nan) {
            uint16_t r = ampc_f16_from_f32(ampc_f16_to_f32((uint16_t)h));
            if ((r & 0x7e00) != 0x7e00 || (r & 0x8000) != (h & 0x8000) || ((h & 0x200) && r != h))
                FAILF("f16 NaN 0x%04x came back as 0x%04x", h, r);
        }
    }
}

/* ---- named edge cases ---- */

typedef struct edge {
    const char *name;
    uint32_t f32;
    uint16_t f16, bf16;
} edge;

static const edge edges[] = {
    {"+0", 0x00000000, 0x0000, 0x0000},
    {"-0.0", 0x80000000, 0x8000, 0x8000},
    {"+inf", 0x7f800000, 0x7c00, 0x7f80},
    {"-inf", 0xff800000, 0xfc00, 0xff80},
    {"quiet NaN", 0x7fc00000, 0x7e00, 0x7fc0},
    {"negative quiet NaN with payload", 0xffc12345, 0xfe09, 0xffc1},
    {"signalling NaN 0x7f800001 (made quiet)", 0x7f800001, 0x7e00, 0x7fc0},
    {"signalling NaN 0x7fa00000 (payload kept)", 0x7fa00000, 0x7f00, 0x7fe0},
    {"65504 (fp16 max)", 0x477fe000, 0x7bff, 0x4780},
    {"65519.99 (below the fp16 overflow tie)", 0x477fefff, 0x7bff, 0x4780},
    {"65520 (fp16 overflow tie -> inf)", 0x477ff000, 0x7c00, 0x4780},
    {"-65520", 0xc77ff000, 0xfc00, 0xc780},
    {"FLT_MAX", 0x7f7fffff, 0x7c00, 0x7f80},
    {"bf16 max 0x7f7f0000", 0x7f7f0000, 0x7c00, 0x7f7f},
    {"bf16 overflow tie 0x7f7f8000 -> inf", 0x7f7f8000, 0x7c00, 0x7f80},
    {"just below the bf16 overflow tie", 0x7f7f7fff, 0x7c00, 0x7f7f},
    {"smallest fp16 subnormal 2^-24", 0x33800000, 0x0001, 0x3380},
    {"2^-25 (tie between 0 and 2^-24 -> 0)", 0x33000000, 0x0000, 0x3300},
    {"just above 2^-25 -> 2^-24", 0x33000001, 0x0001, 0x3300},
    {"1.5 * 2^-24 (tie -> 2^-23, even)", 0x33c00000, 0x0002, 0x33c0},
    {"largest fp16 subnormal", 0x387fc000, 0x03ff, 0x3880},
    {"smallest fp16 normal 2^-14", 0x38800000, 0x0400, 0x3880},
    {"smallest f32 subnormal", 0x00000001, 0x0000, 0x0000},
    {"-smallest f32 subnormal", 0x80000001, 0x8000, 0x8000},
    {"largest f32 subnormal (bf16 rounds up to normal)", 0x007fffff, 0x0000, 0x0080},
    {"f32 subnormal tie 0x00008000 -> 0 (even)", 0x00008000, 0x0000, 0x0000},
    {"f32 subnormal tie 0x00018000 -> 0x0002 (even)", 0x00018000, 0x0000, 0x0002},
    {"smallest f32 normal", 0x00800000, 0x0000, 0x0080},
    {"1 + 2^-11 (fp16 tie down to 1)", 0x3f801000, 0x3c00, 0x3f80},
    {"1 + 3*2^-11 (fp16 tie up to even)", 0x3f803000, 0x3c02, 0x3f80},
    {"1 + 2^-8 (bf16 tie down to 1)", 0x3f808000, 0x3c04, 0x3f80},
    {"1 + 3*2^-8 (bf16 tie up to even)", 0x3f818000, 0x3c0c, 0x3f82},
    {"1 + 2^-8 + 2^-23 (bf16 just above tie)", 0x3f808001, 0x3c04, 0x3f81},
    {"0.1", 0x3dcccccd, 0x2e66, 0x3dcd},
    {"pi", 0x40490fdb, 0x4248, 0x4049},
};

static void test_named_edges(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const edge *e = &edges[i];
        float f = tu_float(e->f32);
        uint16_t h = ampc_f16_from_f32(f), b = ampc_bf16_from_f32(f);
        if (h != e->f16) FAILF("%s (0x%08x): f16 0x%04x, expected 0x%04x", e->name, e->f32, h, e->f16);
        if (b != e->bf16) FAILF("%s (0x%08x): bf16 0x%04x, expected 0x%04x", e->name, e->f32, b, e->bf16);
        /* the independent reference agrees on every named case too */
        if (tu_f16_ref(f) != e->f16 || tu_bf16_ref(f) != e->bf16) FAILF("%s: independent reference disagrees", e->name);
        /* and so does ampc_convert (the vector path of this machine) */
        uint16_t vh, vb;
        ASSERT_OK(ampc_convert(&vh, AMPC_DTYPE_F16, &f, AMPC_DTYPE_F32, 1));
        ASSERT_OK(ampc_convert(&vb, AMPC_DTYPE_BF16, &f, AMPC_DTYPE_F32, 1));
        if (vh != e->f16 || vb != e->bf16) FAILF("%s: ampc_convert gives f16 0x%04x bf16 0x%04x", e->name, vh, vb);
    }
}

/* Sampled f32 patterns against the independent reference (the exhaustive test covers all 2^32). */
static void test_sampled_against_independent(void **state) {
    (void)state;
    assert_int_equal(fegetround(), FE_TONEAREST);
    enum { N = 1 << 20 };
    uint32_t *x = malloc(N * sizeof *x);
    tu_fill_interesting(x, N, 42);
    for (size_t i = 0; i < N; i++) {
        float f = tu_float(x[i]);
        if (ampc_f16_from_f32(f) != tu_f16_ref(f))
            FAILF("f32 0x%08x: f16 0x%04x, independent 0x%04x", x[i], ampc_f16_from_f32(f), tu_f16_ref(f));
        if (ampc_bf16_from_f32(f) != tu_bf16_ref(f))
            FAILF("f32 0x%08x: bf16 0x%04x, independent 0x%04x", x[i], ampc_bf16_from_f32(f), tu_bf16_ref(f));
    }
    free(x);
}

/* ---- the generic codec agrees with the dedicated paths on every 16-bit pattern and sampled f32 ---- */

static void test_generic_codec_matches_dedicated(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t a = tu_bits(ampc_f16_to_f32((uint16_t)h));
        uint32_t b = tu_bits((float)ampc_format_to_f64(AMPC_FORMAT_FP16, h));
        if (a != b) FAILF("FP16 0x%04x: dedicated 0x%08x, generic 0x%08x", h, a, b);
        a = tu_bits(ampc_bf16_to_f32((uint16_t)h));
        b = tu_bits((float)ampc_format_to_f64(AMPC_FORMAT_BF16, h));
        if (a != b) FAILF("BF16 0x%04x: dedicated 0x%08x, generic 0x%08x", h, a, b);
    }
    enum { N = 1 << 18 };
    uint32_t *x = malloc(N * sizeof *x);
    tu_fill_interesting(x, N, 7);
    for (size_t i = 0; i < N; i++) {
        float f = tu_float(x[i]);
        if (isnan(f) && !(x[i] & 0x400000)) continue; /* (double)f of a signalling NaN is compiler-defined */
        if (ampc_format_from_f64(AMPC_FORMAT_FP16, f) != ampc_f16_from_f32(f))
            FAILF("FP16 generic differs at 0x%08x", x[i]);
        if (ampc_format_from_f64(AMPC_FORMAT_BF16, f) != ampc_bf16_from_f32(f))
            FAILF("BF16 generic differs at 0x%08x", x[i]);
        if (ampc_format_from_f64(AMPC_FORMAT_FP32, f) != x[i] && !isnan(f)) FAILF("FP32 generic changes 0x%08x", x[i]);
    }
    free(x);
}

/* ---- FP8 and TF32 ---- */

static void test_fp8_values(void **state) {
    (void)state;
    /* E4M3 (OCP "fn"): max 448 = 0x7e, no infinity, overflow and inf -> NaN 0x7f, min subnormal 2^-9 */
    assert_int_equal(ampc_fp8_e4m3_from_f32(448.0f), 0x7e);
    assert_int_equal(ampc_fp8_e4m3_from_f32(464.0f), 0x7e); /* tie between 448 and 480: even (448) */
    assert_int_equal(ampc_fp8_e4m3_from_f32(465.0f), 0x7f); /* above the tie: overflow -> NaN */
    assert_int_equal(ampc_fp8_e4m3_from_f32(INFINITY), 0x7f);
    assert_int_equal(ampc_fp8_e4m3_from_f32(-INFINITY), 0xff);
    assert_int_equal(ampc_fp8_e4m3_from_f32(0x1p-9f), 0x01);
    assert_int_equal(ampc_fp8_e4m3_from_f32(0x1p-10f), 0x00);
    assert_int_equal(ampc_fp8_e4m3_from_f32(-1.0f), 0xb8);
    assert_true(ampc_fp8_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(isnan(ampc_fp8_e4m3_to_f32(0x7f)) && isnan(ampc_fp8_e4m3_to_f32(0xff)));
    assert_true(signbit(ampc_fp8_e4m3_to_f32(0xff)));
    assert_true(ampc_fp8_e4m3_to_f32(0x78) == 256.0f); /* exponent 15 is a normal binade here */
    /* E5M2: IEEE-like, max 57344 = 0x7b, inf 0x7c */
    assert_int_equal(ampc_fp8_e5m2_from_f32(57344.0f), 0x7b);
    assert_int_equal(ampc_fp8_e5m2_from_f32(61440.0f), 0x7c); /* tie at max + half ulp: odd max -> inf */
    assert_int_equal(ampc_fp8_e5m2_from_f32(0x1p-16f), 0x01);
    assert_true(isinf(ampc_fp8_e5m2_to_f32(0x7c)));
    assert_true(isnan(ampc_fp8_e5m2_to_f32(0x7d)));
    /* every FP8 pattern that is not NaN round-trips */
    for (uint32_t v = 0; v < 256; v++) {
        float a = ampc_fp8_e4m3_to_f32((uint8_t)v), b = ampc_fp8_e5m2_to_f32((uint8_t)v);
        if (!isnan(a) && ampc_fp8_e4m3_from_f32(a) != v) FAILF("E4M3 0x%02x does not round-trip", v);
        if (!isnan(b) && ampc_fp8_e5m2_from_f32(b) != v) FAILF("E5M2 0x%02x does not round-trip", v);
        /* E5M2 is FP16 with the low 8 bits dropped: decoding must agree with FP16 */
        if (!isnan(b) && b != ampc_f16_to_f32((uint16_t)(v << 8))) FAILF("E5M2 0x%02x disagrees with FP16", v);
    }
}

static void test_tf32_round(void **state) {
    (void)state;
    assert_true(ampc_tf32_round(1.0f) == 1.0f);
    assert_true(ampc_tf32_round(1.0f + 0x1p-11f) == 1.0f); /* tie -> even */
    assert_true(ampc_tf32_round(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
    assert_true(ampc_tf32_round(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f); /* tie -> even (up) */
    assert_true(isinf(ampc_tf32_round(FLT_MAX)));                        /* rounds past the TF32 max */
    assert_true(ampc_tf32_round(0x1p-149f) == 0.0f);                     /* below half the TF32 min subnormal */
    assert_true(ampc_tf32_round(0x1p-136f) == 0x1p-136f);
    /* TF32 keeps exactly BF16's exponent range and FP16's precision: it agrees with both where they fit */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ampc_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && ampc_tf32_round(f) != f) FAILF("bf16 value 0x%04x changed by TF32 rounding", h);
    }
}

/* ---- the format table ---- */

static void test_format_table(void **state) {
    (void)state;
    static const struct {
        ampc_format f;
        const char *name;
        int bits, e, m;
        double max, min_normal, min_sub, eps;
    } expect[] = {
        {AMPC_FORMAT_FP32, "FP32", 32, 8, 23, FLT_MAX, FLT_MIN, FLT_TRUE_MIN, FLT_EPSILON},
        {AMPC_FORMAT_TF32, "TF32", 19, 8, 10, 0x1.ffcp127, 0x1p-126, 0x1p-136, 0x1p-10},
        {AMPC_FORMAT_BF16, "BF16", 16, 8, 7, 0x1.fep127, 0x1p-126, 0x1p-133, 0x1p-7},
        {AMPC_FORMAT_FP16, "FP16", 16, 5, 10, 65504.0, 0x1p-14, 0x1p-24, 0x1p-10},
        {AMPC_FORMAT_FP8_E4M3, "FP8-E4M3", 8, 4, 3, 448.0, 0x1p-6, 0x1p-9, 0.125},
        {AMPC_FORMAT_FP8_E5M2, "FP8-E5M2", 8, 5, 2, 57344.0, 0x1p-14, 0x1p-16, 0.25},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        ampc_format_info in;
        ASSERT_OK(ampc_format_get_info(expect[i].f, &in));
        assert_string_equal(in.name, expect[i].name);
        if (!in.verified) FAILF("%s not verified: %s", in.name, in.verify_note);
        assert_int_equal(in.total_bits, expect[i].bits);
        assert_int_equal(in.exponent_bits, expect[i].e);
        assert_int_equal(in.mantissa_bits, expect[i].m);
        if (in.max_finite != expect[i].max || in.min_normal != expect[i].min_normal ||
            in.min_subnormal != expect[i].min_sub || in.epsilon != expect[i].eps)
            FAILF("%s: max %a min normal %a min sub %a eps %a", in.name, in.max_finite, in.min_normal, in.min_subnormal,
                  in.epsilon);
        assert_true(fabs(in.decimal_digits - (in.mantissa_bits + 1) * log10(2.0)) < 1e-12);
        assert_true(fabs(in.range_decades - log10(in.max_finite / in.min_subnormal)) < 1e-12);
    }
    ampc_format_info in;
    assert_int_equal(ampc_format_get_info(AMPC_FORMAT_COUNT, &in), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_format_get_info");
}

/* ---- ampc_convert across dtypes: the generic pairs ---- */

static void test_convert_generic_pairs(void **state) {
    (void)state;
    double d[] = {0.0, -0.0, 1.5, -2.5, 1e300, -1e300, NAN, 65519.0, 3.7, -3.7, 255.5, 4294967296.0};
    enum { N = sizeof d / sizeof d[0] };
    uint16_t h[N];
    ASSERT_OK(ampc_convert(h, AMPC_DTYPE_F16, d, AMPC_DTYPE_F64, N));
    for (int i = 0; i < N; i++) {
        uint16_t want = (uint16_t)ampc_format_from_f64(AMPC_FORMAT_FP16, d[i]);
        if (h[i] != want) FAILF("F64 %g -> F16 0x%04x, expected 0x%04x", d[i], h[i], want);
    }
    /* one rounding: 1 + 2^-11 + 2^-40 is just above an FP16 tie; via FP32 it would fall on the tie */
    double above_tie = 1.0 + 0x1p-11 + 0x1p-40;
    ASSERT_OK(ampc_convert(h, AMPC_DTYPE_F16, &above_tie, AMPC_DTYPE_F64, 1));
    assert_int_equal(h[0], 0x3c01);
    int32_t i32[N];
    uint8_t u8[N];
    ASSERT_OK(ampc_convert(i32, AMPC_DTYPE_I32, d, AMPC_DTYPE_F64, N));
    ASSERT_OK(ampc_convert(u8, AMPC_DTYPE_U8, d, AMPC_DTYPE_F64, N));
    int32_t want32[N] = {0, 0, 1, -2, INT32_MAX, INT32_MIN, 0, 65519, 3, -3, 255, INT32_MAX};
    uint8_t want8[N] = {0, 0, 1, 0, 255, 0, 0, 255, 3, 0, 255, 255};
    assert_memory_equal(i32, want32, sizeof want32);
    assert_memory_equal(u8, want8, sizeof want8);
    /* int64 beyond 2^53 to BF16 rounds once: 2^60 + 2^52 + 1 is above the tie -> 2^60 + 2^53 */
    int64_t big[2] = {((int64_t)1 << 60) + ((int64_t)1 << 52) + 1, INT64_MIN};
    uint16_t b[2];
    ASSERT_OK(ampc_convert(b, AMPC_DTYPE_BF16, big, AMPC_DTYPE_I64, 2));
    assert_int_equal(b[0], ampc_bf16_from_f32(0x1.02p60f));
    assert_int_equal(b[1], ampc_bf16_from_f32(-0x1p63f));
    int64_t back[2];
    float f2[2] = {1e30f, -7.9f};
    ASSERT_OK(ampc_convert(back, AMPC_DTYPE_I64, f2, AMPC_DTYPE_F32, 2));
    assert_true(back[0] == INT64_MAX && back[1] == -7);
    /* same dtype copies; bad arguments are errors, not crashes */
    float src[3] = {1, 2, 3}, dst[3];
    ASSERT_OK(ampc_convert(dst, AMPC_DTYPE_F32, src, AMPC_DTYPE_F32, 3));
    assert_memory_equal(src, dst, sizeof src);
    assert_int_equal(ampc_convert(NULL, AMPC_DTYPE_F32, src, AMPC_DTYPE_F16, 3), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_convert", "dst", "NULL");
    assert_int_equal(ampc_convert(dst, (ampc_dtype)99, src, AMPC_DTYPE_F32, 3), AMPC_STATUS_DTYPE);
    ASSERT_ERROR_MENTIONS("ampc_convert", "99");
    ASSERT_OK(ampc_convert(NULL, AMPC_DTYPE_F32, NULL, AMPC_DTYPE_F16, 0));
}

static void test_dtype_table(void **state) {
    (void)state;
    assert_int_equal(ampc_dtype_size(AMPC_DTYPE_BF16), 2);
    assert_int_equal(ampc_dtype_size(AMPC_DTYPE_F64), 8);
    assert_string_equal(ampc_dtype_name(AMPC_DTYPE_BF16), "BF16");
    assert_true(ampc_dtype_is_float(AMPC_DTYPE_F16) && !ampc_dtype_is_float(AMPC_DTYPE_I32));
    ampc_dtype d;
    ASSERT_OK(ampc_dtype_parse("bfloat16", &d));
    assert_int_equal(d, AMPC_DTYPE_BF16);
    ASSERT_OK(ampc_dtype_parse("FP16", &d));
    assert_int_equal(d, AMPC_DTYPE_F16);
    assert_int_equal(ampc_dtype_parse("fp12", &d), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("fp12", "bf16");
    assert_string_equal(ampc_dtype_name((ampc_dtype)42), "?");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_decode_all),
        cmocka_unit_test(test_bf16_decode_all),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_named_edges),
        cmocka_unit_test(test_sampled_against_independent),
        cmocka_unit_test(test_generic_codec_matches_dedicated),
        cmocka_unit_test(test_fp8_values),
        cmocka_unit_test(test_tf32_round),
        cmocka_unit_test(test_format_table),
        cmocka_unit_test(test_convert_generic_pairs),
        cmocka_unit_test(test_dtype_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
