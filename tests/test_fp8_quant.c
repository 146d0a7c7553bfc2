/* test_fp8_quant.c: the FP8 quantisation slot (kernels.h: ampci_quant8_kernel, TransformerEngine's
 * saturating cast into E4M3 / E5M2, written as BF16 bit patterns).
 *   ref      against an oracle built from the library's exact double conversions (ampc_format_from_f64 /
 *            ampc_format_to_f64 of the F32 product x * scale; where that overflows, to NaN for E4M3 or
 *            inf for E5M2, the result is max with the sign and the value counts), and against a table of
 *            pinned patterns on every boundary: max, the rounding band above it (E4M3: 448 < p <= 464 is
 *            448 and not counted, above 464 counted; E5M2: p < 61440 is 57344 and not counted, 61440 and
 *            above counted), infinities, NaNs (quiet, sign kept), the min normals, the largest and
 *            smallest subnormals, their halves (ties to zero) and just above, -0, tiny and F32 subnormal
 *            inputs; at scales 1, 2^-8, 2^12, 3 and over random F32 patterns of every finite class with
 *            random power-of-two scales; the count and amax (finite |x| only, unscaled) exactly.
 *   fast     every other entry of the slot this CPU runs (today avx512) equal to ref in every bit, in the
 *            count and in amax, at the edge sizes of a 16-lane vector, unaligned, with guard elements
 *            past the output that must stay untouched; and over more than 2^24 values (ref's chunks). */
#include "kernel_check.h"

#include <float.h>

static ampc_k_quant8_fn REF; /* the ref level's entry */

static const float MAXV[2] = {448.0f, 57344.0f};

/* ---- the oracle ---- */

/* The BF16 pattern of q(x * scale) through the exact double conversions; *sat set where it saturated. */
static uint16_t oracle(float x, float scale, int fmt, bool *sat) {
    ampc_format f = fmt == AMPCI_QUANT8_E4M3 ? AMPC_FORMAT_FP8_E4M3 : AMPC_FORMAT_FP8_E5M2;
    float p = x * scale;
    *sat = false;
    if (isnan(p)) return signbit(x) ? 0xffc0 : 0x7fc0;
    double v = ampc_format_to_f64(f, ampc_format_from_f64(f, (double)p));
    if (!isfinite(v)) *sat = true, v = copysign((double)MAXV[fmt], (double)p);
    uint32_t b = tu_bits((float)v);
    assert_int_equal(b & 0xffff, 0); /* every FP8 value is a BF16 value */
    return (uint16_t)(b >> 16);
}

/* The oracle over x (n): patterns into want, the count returned, *amax updated as the kernel must. */
static uint64_t oracle_row(uint16_t *want, const float *x, int64_t n, float scale, int fmt, float *amax) {
    uint64_t sat = 0;
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        bool s;
        want[i] = oracle(x[i], scale, fmt, &s);
        sat += s;
        if (isfinite(x[i]) && fabsf(x[i]) > m) m = fabsf(x[i]);
    }
    if (m > *amax) *amax = m;
    return sat;
}

/* ref on x (n) against the oracle, from a few starting amax values. */
static void ref_vs_oracle(const float *x, int64_t n, float scale, int fmt) {
    static const float starts[] = {0.0f, 0.5f, 1e10f};
    uint16_t *got = malloc((size_t)(n ? n : 1) * 2), *want = malloc((size_t)(n ? n : 1) * 2);
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        float ga = starts[s], wa = starts[s];
        uint64_t gs = REF(got, x, n, scale, fmt, &ga), ws = oracle_row(want, x, n, scale, fmt, &wa);
        for (int64_t i = 0; i < n; i++)
            if (got[i] != want[i])
                FAILF("fmt %d scale %a: x %a (0x%08x) -> 0x%04x, oracle 0x%04x", fmt, (double)scale, (double)x[i],
                      tu_bits(x[i]), got[i], want[i]);
        if (gs != ws || tu_bits(ga) != tu_bits(wa))
            FAILF("fmt %d scale %a n %lld: count %llu amax %a, oracle %llu %a", fmt, (double)scale, (long long)n,
                  (unsigned long long)gs, (double)ga, (unsigned long long)ws, (double)wa);
    }
    free(got), free(want);
}

/* ---- boundary values ---- */

/* The products p every test puts through each format: both formats' boundaries, ulps around them. */
static int boundary_products(float *p, int cap) {
    static const float base[] = {0.0f,       448.0f,    450.0f,    464.0f,     480.0f,     496.0f,    512.0f,
                                 1e30f,      FLT_MAX,   57344.0f,  60000.0f,   61440.0f,   65536.0f,  0x1p-6f,
                                 0x1.cp-7f,  0x1p-9f,   0x1p-10f,  0x1.8p-9f,  0x1.4p-8f,  0x1.ep-7f, 0x1p-14f,
                                 0x1.8p-15f, 0x1p-16f,  0x1p-17f,  0x1.8p-16f, 0x1.cp-15f, 1.0f,      1.0625f,
                                 1.1875f,    1.5f,      240.0f,    1e-30f,     FLT_MIN,    0x1p-149f, 0x1.fffffcp-127f,
                                 0x1.08p0f,  0x1.18p0f, 0x1.28p0f, 3.0f,       0.1f,       -7.0f,     0x1p-13f};
    int n = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        for (int d = -1; d <= 1; d++) {
            float v = d < 0 ? nextafterf(base[i], 0.0f) : d > 0 ? nextafterf(base[i], INFINITY) : base[i];
            if (n + 2 <= cap) p[n++] = v, p[n++] = -v;
        }
    static const uint32_t special[] = {0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
                                       0xffa00000, 0x7fffffff, 0x80000000, 0x807fffff, 0x00000001};
    for (size_t i = 0; i < sizeof special / sizeof special[0] && n < cap; i++) p[n++] = tu_float(special[i]);
    return n;
}

/* Pinned results (scale 1): the saturation rule and the roundings, independent of the oracle. */
typedef struct pin {
    float p;
    int fmt;
    uint16_t bits;
    bool sat;
} pin;

static const pin PINS[] = {
    {448.0f, 0, 0x43e0, false},
    {450.0f, 0, 0x43e0, false},
    {0x1.cffffep8f, 0, 0x43e0, false},
    {464.0f, 0, 0x43e0, false},
    {0x1.d00002p8f, 0, 0x43e0, true},
    {480.0f, 0, 0x43e0, true},
    {-1e30f, 0, 0xc3e0, true},
    {INFINITY, 0, 0x43e0, true},
    {-INFINITY, 0, 0xc3e0, true},
    {NAN, 0, 0x7fc0, false},
    {-NAN, 0, 0xffc0, false},
    {0x1p-6f, 0, 0x3c80, false},
    {0x1.cp-7f, 0, 0x3c60, false},
    {0x1p-9f, 0, 0x3b00, false},
    {0x1p-10f, 0, 0x0000, false},
    {-0x1p-10f, 0, 0x8000, false},
    {0x1.000002p-10f, 0, 0x3b00, false},
    {0x1.8p-9f, 0, 0x3b80, false},
    {0x1.ep-7f, 0, 0x3c80, false},
    {-0.0f, 0, 0x8000, false},
    {1.0625f, 0, 0x3f80, false},
    {1.1875f, 0, 0x3fa0, false},
    {0x1p-149f, 0, 0x0000, false},
    {57344.0f, 1, 0x4760, false},
    {60000.0f, 1, 0x4760, false},
    {0x1.dffffep15f, 1, 0x4760, false},
    {61440.0f, 1, 0x4760, true},
    {-65536.0f, 1, 0xc760, true},
    {-INFINITY, 1, 0xc760, true},
    {-NAN, 1, 0xffc0, false},
    {0x1p-14f, 1, 0x3880, false},
    {0x1.8p-15f, 1, 0x3840, false},
    {0x1p-16f, 1, 0x3780, false},
    {0x1p-17f, 1, 0x0000, false},
    {0x1.000002p-17f, 1, 0x3780, false},
    {0x1.8p-16f, 1, 0x3800, false},
    {0x1.cp-15f, 1, 0x3880, false},
    {-0.0f, 1, 0x8000, false},
    {1.125f, 1, 0x3f80, false},
    {448.0f, 1, 0x43e0, false},
    {480.0f, 1, 0x4400, false},
};

static void test_pinned(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof PINS / sizeof PINS[0]; i++) {
        const pin *c = &PINS[i];
        uint16_t got, want;
        bool osat;
        float amax = 0.0f;
        uint64_t sat = REF(&got, &c->p, 1, 1.0f, c->fmt, &amax);
        want = oracle(c->p, 1.0f, c->fmt, &osat);
        if (got != c->bits || sat != c->sat || want != c->bits || osat != c->sat)
            FAILF("fmt %d p %a: ref 0x%04x sat %d, oracle 0x%04x sat %d, pinned 0x%04x sat %d", c->fmt, (double)c->p,
                  got, (int)sat, want, (int)osat, c->bits, (int)c->sat);
        float want_amax = isfinite(c->p) ? fabsf(c->p) : 0.0f;
        if (tu_bits(amax) != tu_bits(want_amax)) FAILF("fmt %d p %a: amax %a", c->fmt, (double)c->p, (double)amax);
    }
}

/* Every boundary product at every scale (x = p / scale, exact for powers of two), and the raw values. */
static void test_boundaries(void **state) {
    (void)state;
    static const float scales[] = {1.0f, 0x1p-8f, 0x1p12f, 3.0f};
    float p[512], x[512];
    int n = boundary_products(p, 512);
    for (int fmt = 0; fmt < 2; fmt++)
        for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
            for (int i = 0; i < n; i++) x[i] = p[i] / scales[s];
            ref_vs_oracle(x, n, scales[s], fmt);
            ref_vs_oracle(p, n, scales[s], fmt); /* includes F32 overflow and underflow of the product */
        }
}

/* Counts and amax pinned on a small row: 4 saturations (E4M3), NaN and inf outside amax. */
static void test_count_amax(void **state) {
    (void)state;
    const float x[] = {1.0f, 500.0f, -465.0f, 464.0f, INFINITY, -NAN, -1e30f, 0.25f, -0.0f};
    uint16_t d[9];
    float amax = 0.0f;
    assert_int_equal(REF(d, x, 9, 1.0f, AMPCI_QUANT8_E4M3, &amax), 4);
    assert_true(amax == 1e30f);
    amax = 2e30f;
    assert_int_equal(REF(d, x, 9, 0x1p-8f, AMPCI_QUANT8_E4M3, &amax), 2); /* 1e30 / 256 and inf */
    assert_true(amax == 2e30f);
    amax = 0.0f;
    assert_int_equal(REF(d, x + 4, 2, 1.0f, AMPCI_QUANT8_E5M2, &amax), 1); /* no finite x: amax stays 0 */
    assert_true(amax == 0.0f && !signbit(amax));
    amax = 7.0f;
    assert_int_equal(REF(d, x, 0, 1.0f, AMPCI_QUANT8_E5M2, &amax), 0);
    assert_true(amax == 7.0f);
}

/* ---- random sweep ---- */

/* A random finite-class pattern: uniform bits, or an exponent near the FP8 ranges, or F32 subnormal. */
static float random_value(uint64_t *s) {
    uint64_t r = tu_rand(s);
    uint32_t sign = (uint32_t)(r >> 63) << 31, man = (uint32_t)(r >> 8) & 0x7fffff;
    switch (r % 4) {
    case 0: return tu_float((uint32_t)(r >> 32));
    case 1: return tu_float(sign | man); /* F32 subnormal or zero */
    default: return tu_float(sign | (uint32_t)(127 - 40 + (int)((r >> 40) % 64)) << 23 | man);
    }
}

static void test_random(void **state) {
    (void)state;
    enum { N = 4096, ROUNDS = 64 };
    float *x = malloc(N * sizeof *x);
    uint64_t s = 12345;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N; i++) x[i] = random_value(&s);
        float scale = ldexpf(1.0f, (int)(tu_rand(&s) % 41) - 20);
        if (round % 8 == 7) scale = round % 16 == 7 ? 0x1p-149f : 0x1p127f; /* extremes of a finite scale */
        ref_vs_oracle(x, N, scale, round & 1);
    }
    free(x);
}

/* ---- every fast entry against ref ---- */

#define Q_SENT 0xbadbu

/* Inputs for the fast tests: interesting patterns with the boundary products mixed in. */
static void fast_inputs(float *x, int64_t n, uint64_t seed, float scale) {
    float p[512];
    int np = boundary_products(p, 512);
    kc_fill_interesting(x, n, seed);
    for (int64_t i = 1; i < n; i += 3) x[i] = p[(i / 3 + (int64_t)seed) % np] / scale;
}

/* One fast entry on x (n) at dst offset off, against ref. */
static void fast_case(const ampci_kernel *e, const float *x, int64_t n, float scale, int fmt) {
    uint16_t *want = malloc((size_t)(n + 1) * 2), *buf = malloc((size_t)(n + 1 + KC_GUARD) * 2), *got = buf + 1;
    for (int64_t i = 0; i < n + 1 + KC_GUARD; i++) buf[i] = Q_SENT;
    float ra = 0.25f, ga = 0.25f;
    uint64_t rs = REF(want, x, n, scale, fmt, &ra), gs = e->fn.QUANT8(got, x, n, scale, fmt, &ga);
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i])
            FAILF("%s fmt %d scale %a n %lld: x[%lld] %a -> 0x%04x, ref 0x%04x", e->name, fmt, (double)scale,
                  (long long)n, (long long)i, (double)x[i], got[i], want[i]);
    if (buf[0] != Q_SENT) FAILF("%s n %lld: wrote before dst", e->name, (long long)n);
    for (int i = 0; i < KC_GUARD; i++)
        if (got[n + i] != Q_SENT) FAILF("%s n %lld: wrote past dst[n + %d]", e->name, (long long)n, i);
    if (gs != rs || tu_bits(ga) != tu_bits(ra))
        FAILF("%s fmt %d n %lld: count %llu amax %a, ref %llu %a", e->name, fmt, (long long)n, (unsigned long long)gs,
              (double)ga, (unsigned long long)rs, (double)ra);
    free(want), free(buf);
}

static void test_fast(void **state) {
    (void)state;
    static const int64_t ns[] = {0, 1, 15, 16, 17, 31, 33, 1000, 65537};
    static const float scales[] = {1.0f, 0x1p-8f, 0x1p12f, 3.0f, 0x1p-149f};
    kc_list l = kc_fast(AMPCI_SLOT_QUANT8, KC_ANY);
    for (int e = 0; e < l.n; e++)
        for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
            int64_t n = ns[si];
            float *x = kc_fbuf(n + 1);
            for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++)
                for (int fmt = 0; fmt < 2; fmt++) {
                    fast_inputs(x, n + 1, 70 + (uint64_t)n + k, scales[k]);
                    fast_case(l.e[e], x, n, scales[k], fmt);
                    fast_case(l.e[e], x + 1, n, scales[k], fmt); /* x off the 64-byte grid */
                }
            free(x);
        }
}

/* Past ref's 2^24-value chunks (32-bit lane counts) with a third of the values saturating: the count
 * against the oracle's, every fast entry against ref. */
static void test_large(void **state) {
    (void)state;
    int64_t n = ((int64_t)1 << 24) + 4133;
    float *x = kc_fbuf(n);
    uint16_t *want = malloc((size_t)n * 2), *got = malloc((size_t)n * 2);
    uint64_t s = 777;
    for (int64_t i = 0; i < n; i++) x[i] = i % 3 ? random_value(&s) : (i & 1 ? -500.0f : INFINITY);
    kc_list l = kc_fast(AMPCI_SLOT_QUANT8, KC_ANY);
    for (int fmt = 0; fmt < 2; fmt++) {
        float ra = 0.0f, oa = 0.0f;
        uint64_t rs = REF(want, x, n, 128.0f, fmt, &ra), os = oracle_row(got, x, n, 128.0f, fmt, &oa);
        if (rs != os || tu_bits(ra) != tu_bits(oa) || memcmp(got, want, (size_t)n * 2) != 0)
            FAILF("ref fmt %d: count %llu amax %a, oracle %llu %a", fmt, (unsigned long long)rs, (double)ra,
                  (unsigned long long)os, (double)oa);
        assert_true(rs > (uint64_t)n / 3);
        for (int e = 0; e < l.n; e++) {
            float ga = 0.0f;
            uint64_t gs = l.e[e]->fn.QUANT8(got, x, n, 128.0f, fmt, &ga);
            if (gs != rs || tu_bits(ga) != tu_bits(ra) || memcmp(got, want, (size_t)n * 2) != 0)
                FAILF("%s fmt %d: count %llu, ref %llu", l.e[e]->name, fmt, (unsigned long long)gs,
                      (unsigned long long)rs);
        }
    }
    free(x), free(want), free(got);
}

int main(void) {
    REF = ampci_kernels(AMPC_ISA_REF)->quant8;
    kc_note_unusable(AMPCI_SLOT_QUANT8);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pinned),     cmocka_unit_test(test_boundaries),
                                       cmocka_unit_test(test_count_amax), cmocka_unit_test(test_random),
                                       cmocka_unit_test(test_fast),       cmocka_unit_test(test_large)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
