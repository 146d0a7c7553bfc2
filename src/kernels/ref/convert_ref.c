/* convert_ref.c: portable row conversions, the oracle for every vector path. The six FP32/FP16/BF16
 * pairs apply the scalar bit-pattern functions of half.h element by element; every other pair (F64,
 * integers) goes through the generic path, which converts exactly once:
 *   - F64 and every float target through the exact generic encoder (ampc_format_from_f64);
 *   - I64 beyond 2^53 is first rounded to odd in double, so the second rounding is still correct;
 *   - float -> integer truncates toward zero and saturates; NaN gives 0. */
#include "../../numerics/half.h"
#include "kernels_ref.h"

#include <math.h>

void ampc_k_cvt_f16f32__ref(void *restrict dst, const void *restrict src, size_t n) {
    /* dst: (n) f16, src: (n) f32 */
    uint16_t *d = dst;
    const uint32_t *s = src;
    for (size_t i = 0; i < n; i++) d[i] = ampci_f16_from_f32_bits(s[i]);
}

void ampc_k_cvt_f32f16__ref(void *restrict dst, const void *restrict src, size_t n) {
    uint32_t *d = dst;
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) d[i] = ampci_f16_to_f32_bits(s[i]);
}

void ampc_k_cvt_bf16f32__ref(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint32_t *s = src;
    for (size_t i = 0; i < n; i++) d[i] = ampci_bf16_from_f32_bits(s[i]);
}

void ampc_k_cvt_f32bf16__ref(void *restrict dst, const void *restrict src, size_t n) {
    uint32_t *d = dst;
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) d[i] = ampci_bf16_to_f32_bits(s[i]);
}

/* FP16 -> FP32 is exact, so FP16 -> BF16 through FP32 rounds once; likewise the other way. */
void ampc_k_cvt_bf16f16__ref(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) d[i] = ampci_bf16_from_f32_bits(ampci_f16_to_f32_bits(s[i]));
}

void ampc_k_cvt_f16bf16__ref(void *restrict dst, const void *restrict src, size_t n) {
    uint16_t *d = dst;
    const uint16_t *s = src;
    for (size_t i = 0; i < n; i++) d[i] = ampci_f16_from_f32_bits(ampci_bf16_to_f32_bits(s[i]));
}

/* ---- generic path ---- */

/* One element, widened: floats as double (exact for every float dtype), integers as int64. */
typedef struct wide {
    bool is_int;
    double f;
    int64_t i;
} wide;

static wide load(const void *src, ampc_dtype dt, size_t i) {
    wide w = {false, 0.0, 0};
    switch (dt) {
    case AMPC_DTYPE_F32: w.f = ampc_format_to_f64(AMPC_FORMAT_FP32, ((const uint32_t *)src)[i]); break;
    case AMPC_DTYPE_F16: w.f = ampc_format_to_f64(AMPC_FORMAT_FP16, ((const uint16_t *)src)[i]); break;
    case AMPC_DTYPE_BF16: w.f = ampc_format_to_f64(AMPC_FORMAT_BF16, ((const uint16_t *)src)[i]); break;
    case AMPC_DTYPE_F64: w.f = ((const double *)src)[i]; break;
    case AMPC_DTYPE_I32: w.is_int = true, w.i = ((const int32_t *)src)[i]; break;
    case AMPC_DTYPE_I64: w.is_int = true, w.i = ((const int64_t *)src)[i]; break;
    case AMPC_DTYPE_U8: w.is_int = true, w.i = ((const uint8_t *)src)[i]; break;
    default: break;
    }
    return w;
}

/* int64 -> double rounded to odd: exact below 2^53, else truncated with a sticky low bit, so that a
 * later round-to-nearest to any narrower format gives the correctly rounded result. */
static double i64_to_f64_odd(int64_t v) {
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    if (a < (1ull << 53)) return v < 0 ? -(double)a : (double)a;
    int drop = 11 - __builtin_clzll(a); /* bits beyond 53 */
    uint64_t kept = a >> drop, lost = a & ((1ull << drop) - 1);
    double d = ldexp((double)(kept | (lost != 0)), drop);
    return v < 0 ? -d : d;
}

static int64_t f64_to_i64_sat(double d, int64_t lo, int64_t hi) {
    if (isnan(d)) return 0;
    d = trunc(d);
    if (d <= (double)lo) return lo;
    if (d >= (double)hi) return hi; /* (double)INT64_MAX is 2^63, itself out of range: saturate */
    return (int64_t)d;
}

static void store(void *dst, ampc_dtype dt, size_t i, wide w) {
    if (ampc_dtype_is_float(dt) && w.is_int)
        w.f = dt == AMPC_DTYPE_F64 ? (double)w.i : i64_to_f64_odd(w.i), w.is_int = false;
    switch (dt) {
    case AMPC_DTYPE_F32: ((uint32_t *)dst)[i] = ampc_format_from_f64(AMPC_FORMAT_FP32, w.f); return;
    case AMPC_DTYPE_F16: ((uint16_t *)dst)[i] = (uint16_t)ampc_format_from_f64(AMPC_FORMAT_FP16, w.f); return;
    case AMPC_DTYPE_BF16: ((uint16_t *)dst)[i] = (uint16_t)ampc_format_from_f64(AMPC_FORMAT_BF16, w.f); return;
    case AMPC_DTYPE_F64: ((double *)dst)[i] = w.f; return;
    default: break;
    }
    int64_t lo = dt == AMPC_DTYPE_U8 ? 0 : dt == AMPC_DTYPE_I32 ? INT32_MIN : INT64_MIN;
    int64_t hi = dt == AMPC_DTYPE_U8 ? 255 : dt == AMPC_DTYPE_I32 ? INT32_MAX : INT64_MAX;
    int64_t v = w.is_int ? (w.i < lo ? lo : w.i > hi ? hi : w.i) : f64_to_i64_sat(w.f, lo, hi);
    switch (dt) {
    case AMPC_DTYPE_I32: ((int32_t *)dst)[i] = (int32_t)v; return;
    case AMPC_DTYPE_I64: ((int64_t *)dst)[i] = v; return;
    case AMPC_DTYPE_U8: ((uint8_t *)dst)[i] = (uint8_t)v; return;
    default: AMPCI_ASSERT(!"store: dtype out of range");
    }
}

void ampci_convert_generic(void *dst, ampc_dtype dst_dtype, const void *src, ampc_dtype src_dtype, size_t n) {
    for (size_t i = 0; i < n; i++) store(dst, dst_dtype, i, load(src, src_dtype, i));
}
