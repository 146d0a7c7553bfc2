/* test_util.h: what the cmocka test programs share: cmocka's includes, a failure macro that prints the
 * values involved, an independent FP16/BF16 rounding (exact rounding in double, written without the
 * library's bit tricks) and deterministic test inputs. */
#ifndef AMPC_TEST_UTIL_H
#define AMPC_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ampc.h"
#include "test_params.h"

/* Fails the current test with a formatted message. */
#define FAILF(...)                                                                                                     \
    do {                                                                                                               \
        print_error(__VA_ARGS__);                                                                                      \
        print_error("\n");                                                                                             \
        fail();                                                                                                        \
    } while (0)

#define ASSERT_OK(expr)                                                                                                \
    do {                                                                                                               \
        ampc_status s_ = (expr);                                                                                       \
        if (s_ != AMPC_OK) FAILF("%s -> %s: %s", #expr, ampc_status_str(s_), ampc_last_error());                       \
    } while (0)

/* The last error message contains every one of the given substrings. */
static inline void assert_error_mentions(const char *const *needles, size_t n) {
    const char *msg = ampc_last_error();
    for (size_t i = 0; i < n; i++)
        if (!strstr(msg, needles[i])) FAILF("error message \"%s\" does not mention \"%s\"", msg, needles[i]);
}
#define ASSERT_ERROR_MENTIONS(...)                                                                                     \
    do {                                                                                                               \
        const char *const n_[] = {__VA_ARGS__};                                                                        \
        assert_error_mentions(n_, sizeof n_ / sizeof n_[0]);                                                           \
    } while (0)

/* One context per test program: TU_CONTEXT(seed, threads) defines g_ctx and cmocka group setup/teardown. */
#define TU_CONTEXT(SEED, THREADS)                                                                                      \
    static ampc_ctx *g_ctx;                                                                                            \
    static int setup(void **state) {                                                                                   \
        (void)state;                                                                                                   \
        return ampc_ctx_new(&(ampc_ctx_params){.seed = (SEED), .threads = (THREADS)}, &g_ctx) == AMPC_OK ? 0 : -1;     \
    }                                                                                                                  \
    static int teardown(void **state) {                                                                                \
        (void)state;                                                                                                   \
        ampc_ctx_step_end(g_ctx);                                                                                      \
        ampc_ctx_free(g_ctx);                                                                                          \
        return 0;                                                                                                      \
    }

/* A compound-literal shape: SHAPE(2, 3) expands to the (ndim, shape) pair ops take. */
#define SHAPE(...)                                                                                                     \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

/* An arena tensor of zeros in ctx that must exist: Z(ctx, F32, 2, 3). */
static inline ampc_tensor *tu_zeros(ampc_ctx *ctx, ampc_dtype dt, int nd, const int64_t *shape) {
    ampc_tensor *t = ampc_tensor_zeros(ctx, dt, nd, shape);
    if (!t) FAILF("ampc_tensor_zeros: %s", ampc_last_error());
    return t;
}
#define Z(dt, ...) tu_zeros(g_ctx, dt, SHAPE(__VA_ARGS__))

/* An arena tensor of N(0, 1) values that must exist: R(F32, 2, 3). */
static inline ampc_tensor *tu_normal(ampc_ctx *ctx, ampc_dtype dt, int nd, const int64_t *shape) {
    ampc_tensor *t = ampc_tensor_normal(ctx, dt, nd, shape, 0, 1);
    if (!t) FAILF("ampc_tensor_normal: %s", ampc_last_error());
    return t;
}
#define R(dt, ...) tu_normal(g_ctx, dt, SHAPE(__VA_ARGS__))

/* Opens an enabled autocast region of dt with the weight-cast cache on. */
#define TU_AUTOCAST(dt)                                                                                                \
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = (dt), .enabled = true, .cache_enabled = true)))

static inline uint32_t tu_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float tu_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round a non-negative double to an integer, ties to even, using the FPU's default rounding: adding and
 * subtracting 2^52 leaves exactly the rounded integer for 0 <= x < 2^52. */
static inline double tu_rne(double x) { return (x + 0x1p52) - 0x1p52; }

/* Independent reference: f32 -> binary format with `m` fraction bits, exponent range [emin, emax]
 * (IEEE-like, with infinity), computed by scaling in double. NaNs follow the documented x86 rule. */
static inline uint32_t tu_round_ieee(float f, int m, int emin, int emax, int ebits) {
    uint32_t u = tu_bits(f), sign = (u >> 31) << (ebits + m);
    uint32_t inf = ((1u << ebits) - 1) << m;
    if (isnan(f)) return sign | inf | 1u << (m - 1) | ((u & 0x7fffff) >> (23 - m) & ((1u << (m - 1)) - 1));
    double x = fabs((double)f);
    if (isinf(f)) return sign | inf;
    int e = x == 0 ? emin : ilogb(x);
    if (e < emin) e = emin;             /* subnormal: fixed quantum 2^(emin-m) */
    double q = tu_rne(ldexp(x, m - e)); /* significand in units of the quantum, rounded */
    uint32_t mag = x < ldexp(1.0, emin) ? (uint32_t)q : ((uint32_t)(e + (1 - emin) - 1) << m) + (uint32_t)q;
    if (mag >= inf) mag = inf; /* carried past the largest finite value */
    if (e > emax) mag = inf;
    return sign | mag;
}
static inline uint16_t tu_f16_ref(float f) { return (uint16_t)tu_round_ieee(f, 10, -14, 15, 5); }
static inline uint16_t tu_bf16_ref(float f) { return (uint16_t)tu_round_ieee(f, 7, -126, 127, 8); }

/* Independent decode of every FP16 / BF16 pattern: ldexp on the fields. NaN returns NAN. */
static inline double tu_decode(uint32_t h, int m, int ebits, int bias) {
    uint32_t e = (h >> m) & ((1u << ebits) - 1), f = h & ((1u << m) - 1);
    double v;
    if (e == (1u << ebits) - 1) v = f ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)f, 1 - bias - m);
    else v = ldexp((double)(f + (1u << m)), (int)e - bias - m);
    return (h >> (m + ebits)) & 1 ? -v : v;
}

/* xorshift64*: deterministic inputs for tests. */
static inline uint64_t tu_rand(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

/* Float bit patterns that hit every interesting region: specials, both signs, subnormals, the FP16 and
 * BF16 rounding boundaries, ties, plus random patterns. */
static inline void tu_fill_interesting(uint32_t *x, size_t n, uint64_t seed) {
    static const uint32_t special[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
        0x7fa00000, 0x7fffffff, 0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x7f7fffff, 0xff7fffff,
        0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x33000000, 0x33000001, 0x387fc000, 0x38800000,
        0x3f808000, 0x3f818000, 0x3f800001, 0x7f7f8000, 0x7f7f7fff, 0x00008000, 0x00018000, 0x807f8000};
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_rand(&s);
        x[i] = (i % 3 == 0) ? special[r % (sizeof special / sizeof special[0])] : (uint32_t)(r >> 32);
    }
}

#endif
