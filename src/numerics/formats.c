/* formats.c: the floating-point format table behind `ampc formats`, and one generic conversion for every
 * format in it (FP32, TF32, BF16, FP16, FP8-E4M3, FP8-E5M2). A format is defined only by its exponent
 * bits, mantissa bits, bias and whether it has infinities; max, min normal, min subnormal and epsilon
 * are computed from those by formula, then recomputed independently through the conversion code (and,
 * for FP32/FP16/BF16, through <float.h> and the dedicated scalar conversions), and `verified` says whether
 * the two agree. Nothing is typed in.
 *
 * The generic encoder works on the bits of a double: every FP32 value is exact in double, so converting
 * a float through here rounds exactly once, as does converting an FP64 value. */
#include "numerics.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

typedef struct fmt_def {
    const char *name;
    int e, m, bias;
    bool has_inf;
    int shift; /* left shift of the right-aligned pattern in storage (TF32 lives in FP32's layout) */
} fmt_def;

static const fmt_def defs[AMPC_FORMAT_COUNT] = {
    [AMPC_FORMAT_FP32] = {"FP32", 8, 23, 127, true, 0},       [AMPC_FORMAT_TF32] = {"TF32", 8, 10, 127, true, 13},
    [AMPC_FORMAT_BF16] = {"BF16", 8, 7, 127, true, 0},        [AMPC_FORMAT_FP16] = {"FP16", 5, 10, 15, true, 0},
    [AMPC_FORMAT_FP8_E4M3] = {"FP8-E4M3", 4, 3, 7, false, 0}, [AMPC_FORMAT_FP8_E5M2] = {"FP8-E5M2", 5, 2, 15, true, 0},
};

static uint32_t exp_all(const fmt_def *f) { return (1u << f->e) - 1; }
static uint32_t man_mask(const fmt_def *f) { return (1u << f->m) - 1; }
static int emin_of(const fmt_def *f) { return 1 - f->bias; }
/* The top exponent field holds inf/NaN in IEEE-like formats; without infinities it holds normal numbers
 * except the all-ones pattern, which is the only NaN. */
static int emax_of(const fmt_def *f) { return (int)exp_all(f) - (f->has_inf ? 1 : 0) - f->bias; }
static uint32_t max_bits_of(const fmt_def *f) {
    return f->has_inf ? ((exp_all(f) - 1) << f->m) | man_mask(f) : (exp_all(f) << f->m) | (man_mask(f) - 1);
}
static uint32_t nan_bits_of(const fmt_def *f, uint64_t frac52) {
    if (!f->has_inf) return (exp_all(f) << f->m) | man_mask(f);
    uint32_t quiet = 1u << (f->m - 1);
    uint32_t payload = (uint32_t)(frac52 >> (52 - f->m)) & (quiet - 1); /* top payload bits */
    return (exp_all(f) << f->m) | quiet | payload;
}
static uint32_t overflow_bits_of(const fmt_def *f) { return f->has_inf ? exp_all(f) << f->m : nan_bits_of(f, 0); }

static uint32_t encode(const fmt_def *f, double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    uint32_t sbit = (uint32_t)(u >> 63) << (f->e + f->m);
    uint32_t ebits = (uint32_t)(u >> 52) & 0x7ffu;
    uint64_t frac = u & ((1ull << 52) - 1);
    uint32_t mag;
    if (ebits == 0x7ff) {
        mag = frac ? nan_bits_of(f, frac) : overflow_bits_of(f);
    } else if (ebits == 0) {
        mag = 0; /* zero, or a double subnormal: far below half of any format's smallest subnormal */
    } else {
        int e = (int)ebits - 1023, emin = emin_of(f);
        if (e > emax_of(f)) {
            mag = overflow_bits_of(f); /* >= 2^(emax+1) is beyond max + half an ulp */
        } else {
            /* Keep m fraction bits (fewer below emin, where the quantum stays 2^(emin-m)), RNE. */
            uint64_t sig = frac | 1ull << 52;
            int shift = 52 - f->m + (e < emin ? emin - e : 0);
            uint64_t q = 0;
            if (shift <= 63) {
                uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
                q = (sig >> shift) + (rem > half || (rem == half && ((sig >> shift) & 1)));
            }
            /* Normal: (biased exponent - 1) << m plus q in [2^m, 2^(m+1)]; the carry of a rounded-up
             * mantissa lands in the exponent. Subnormal: q itself (2^m is the smallest normal). */
            mag = e < emin ? (uint32_t)q : ((uint32_t)(e + f->bias - 1) << f->m) + (uint32_t)q;
            if (mag > max_bits_of(f)) mag = overflow_bits_of(f);
        }
    }
    return (sbit | mag) << f->shift;
}

static double decode(const fmt_def *f, uint32_t bits) {
    bits >>= f->shift;
    bool neg = bits >> (f->e + f->m) & 1;
    uint32_t E = (bits >> f->m) & exp_all(f), M = bits & man_mask(f);
    double v;
    if (E == exp_all(f) && (f->has_inf ? M != 0 : M == man_mask(f))) {
        /* NaN: quiet, payload moved to the top of the double's fraction (none for FP8-E4M3). */
        uint64_t payload = f->has_inf ? (uint64_t)(M & (man_mask(f) >> 1)) << (52 - f->m) : 0;
        uint64_t u = (uint64_t)neg << 63 | 0x7ffull << 52 | 1ull << 51 | payload;
        memcpy(&v, &u, 8);
        return v;
    }
    if (E == exp_all(f) && f->has_inf) v = INFINITY;
    else if (E == 0) v = ldexp((double)M, emin_of(f) - f->m);
    else v = ldexp((double)(M | 1u << f->m), (int)E - f->bias - f->m);
    return neg ? -v : v;
}

uint32_t ampc_format_from_f64(ampc_format fmt, double x) {
    return (unsigned)fmt < AMPC_FORMAT_COUNT ? encode(&defs[fmt], x) : 0;
}

double ampc_format_to_f64(ampc_format fmt, uint32_t bits) {
    return (unsigned)fmt < AMPC_FORMAT_COUNT ? decode(&defs[fmt], bits) : NAN;
}

/* ---- the table, derived and then checked ---- */

typedef struct checker {
    ampc_format_info *info;
    bool ok;
} checker;

static void check(checker *c, bool cond, const char *what) {
    if (cond || !c->ok) return;
    c->ok = false;
    snprintf(c->info->verify_note, sizeof c->info->verify_note, "%s", what);
}

/* The dedicated code paths for the formats that have them: FP32 itself (float.h), FP16, BF16. */
static void check_dedicated(checker *c, ampc_format fmt) {
    const ampc_format_info *in = c->info;
    if (fmt == AMPC_FORMAT_FP32) {
        check(c, in->max_finite == FLT_MAX, "max differs from FLT_MAX");
        check(c, in->min_normal == FLT_MIN, "min normal differs from FLT_MIN");
        check(c, in->min_subnormal == FLT_TRUE_MIN, "min subnormal differs from FLT_TRUE_MIN");
        check(c, in->epsilon == FLT_EPSILON, "epsilon differs from FLT_EPSILON");
    } else if (fmt == AMPC_FORMAT_FP16 || fmt == AMPC_FORMAT_BF16) {
        uint16_t (*from)(float) = fmt == AMPC_FORMAT_FP16 ? ampc_f16_from_f32 : ampc_bf16_from_f32;
        float (*to)(uint16_t) = fmt == AMPC_FORMAT_FP16 ? ampc_f16_to_f32 : ampc_bf16_to_f32;
        check(c, from((float)in->max_finite) == in->max_finite_bits, "scalar conversion: max pattern");
        check(c, to((uint16_t)in->max_finite_bits) == (float)in->max_finite, "scalar conversion: max value");
        check(c, isinf(to((uint16_t)(in->max_finite_bits + 1))), "scalar conversion: pattern after max is not inf");
        check(c, to(1) == (float)in->min_subnormal, "scalar conversion: min subnormal");
        check(c, to((uint16_t)(1u << in->mantissa_bits)) == (float)in->min_normal, "scalar conversion: min normal");
        check(c, from((float)(in->min_subnormal / 2)) == 0, "scalar conversion: half min subnormal not 0");
        check(c, to((uint16_t)(from(1.0f) + 1)) - 1.0f == (float)in->epsilon, "scalar conversion: epsilon");
    }
}

static void verify(ampc_format fmt, ampc_format_info *in) {
    const fmt_def *f = &defs[fmt];
    checker c = {in, true};
    uint32_t one_bit = 1u << f->shift, min_normal_bits = (1u << f->m) << f->shift;
    uint32_t max_bits = in->max_finite_bits;
    check(&c, decode(f, max_bits) == in->max_finite, "decode(max pattern) != max");
    check(&c, encode(f, in->max_finite) == max_bits, "encode(max) != max pattern");
    double above = decode(f, max_bits + one_bit);
    check(&c, isinf(above) || isnan(above), "pattern after max is finite");
    check(&c, !isfinite(decode(f, encode(f, ldexp(1.0, in->emax + 1)))), "2^(emax+1) does not overflow");
    check(&c, decode(f, min_normal_bits) == in->min_normal, "decode(min normal pattern) != min normal");
    check(&c, decode(f, min_normal_bits - one_bit) < in->min_normal, "pattern below min normal is not smaller");
    check(&c, decode(f, one_bit) == in->min_subnormal, "decode(1) != min subnormal");
    check(&c, encode(f, in->min_subnormal / 2) == 0, "half the min subnormal does not round to 0 (ties to even)");
    check(&c, encode(f, in->min_subnormal * 0.75) == one_bit, "0.75 min subnormal does not round up");
    check(&c, decode(f, encode(f, 1.0) + one_bit) - 1.0 == in->epsilon, "next after 1 is not 1 + epsilon");
    check_dedicated(&c, fmt);
    in->verified = c.ok;
}

ampc_status ampc_format_get_info(ampc_format fmt, ampc_format_info *out) {
    if ((unsigned)fmt >= AMPC_FORMAT_COUNT || !out)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "ampc_format_get_info: format %d is not one of the %d formats "
                          "(or out is NULL)",
                          (int)fmt, AMPC_FORMAT_COUNT);
    const fmt_def *f = &defs[fmt];
    memset(out, 0, sizeof *out);
    out->name = f->name;
    out->exponent_bits = f->e;
    out->mantissa_bits = f->m;
    out->total_bits = 1 + f->e + f->m;
    out->bias = f->bias;
    out->has_inf = f->has_inf;
    out->emin = emin_of(f);
    out->emax = emax_of(f);
    /* Largest mantissa: all ones, or all ones but the last where that pattern is the NaN. */
    double top_mantissa = f->has_inf ? 2.0 - ldexp(1.0, -f->m) : 2.0 - ldexp(1.0, 1 - f->m);
    out->max_finite = ldexp(top_mantissa, out->emax);
    out->min_normal = ldexp(1.0, out->emin);
    out->min_subnormal = ldexp(1.0, out->emin - f->m);
    out->epsilon = ldexp(1.0, -f->m);
    out->decimal_digits = (f->m + 1) * log10(2.0);
    out->range_decades = log10(out->max_finite / out->min_subnormal);
    out->normal_range_decades = log10(out->max_finite / out->min_normal);
    out->max_finite_bits = max_bits_of(f) << f->shift;
    verify(fmt, out);
    return AMPC_OK;
}

/* ---- public scalar wrappers for the formats without a dedicated fast path ---- */

float ampc_tf32_round(float x) { return ampci_f32_from_bits(encode(&defs[AMPC_FORMAT_TF32], (double)x)); }
uint8_t ampc_fp8_e4m3_from_f32(float x) { return (uint8_t)encode(&defs[AMPC_FORMAT_FP8_E4M3], (double)x); }
float ampc_fp8_e4m3_to_f32(uint8_t v) { return (float)decode(&defs[AMPC_FORMAT_FP8_E4M3], v); }
uint8_t ampc_fp8_e5m2_from_f32(float x) { return (uint8_t)encode(&defs[AMPC_FORMAT_FP8_E5M2], (double)x); }
float ampc_fp8_e5m2_to_f32(uint8_t v) { return (float)decode(&defs[AMPC_FORMAT_FP8_E5M2], v); }
