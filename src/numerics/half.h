/* half.h: the scalar FP16 and BF16 <-> FP32 conversions, as inline functions on bit patterns (no float
 * arithmetic, so FTZ/DAZ and excess precision cannot change a result). These are THE reference: every
 * vector path must reproduce their bits, and the exhaustive test checks them against an independent
 * rounding in double. The NaN rules copy what x86 hardware does (vcvtps2ph, vcvtneps2bf16, vcvtph2ps),
 * so that the vector paths can use those instructions unchanged:
 *    f32 NaN -> f16  : sign | 0x7e00 | top 9 payload bits   (quiet bit forced)
 *    f32 NaN -> bf16 : upper 16 bits | 0x0040                (quiet bit forced)
 *    f16/bf16 NaN -> f32 : payload shifted up, quiet bit forced
 *
 *   binary32:  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm   bias 127
 *   binary16:  s eeeee mmmmmmmmmm                   bias 15
 *   bfloat16:  s eeeeeeee mmmmmmm                   bias 127 (the top half of binary32)
 */
#ifndef AMPC_HALF_H
#define AMPC_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ampci_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float ampci_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round the integer m right by `shift` bits (1 <= shift <= 31), ties to even. */
static inline uint32_t ampci_rshift_rne(uint32_t m, unsigned shift) {
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}

static inline uint16_t ampci_f16_from_f32_bits(uint32_t x) {
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 = 65504 + half ulp: inf */
    if (a >= 0x38800000u) {
        /* Normal result (>= 2^-14). Rebias the exponent 127 -> 15 in place, then round the 23-bit
         * mantissa to 10 bits; a carry out of the mantissa correctly bumps the exponent. */
        uint32_t r = a - ((127u - 15u) << 23);
        return (uint16_t)(sign | ampci_rshift_rne(r, 13));
    }
    if (a <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25 (half the smallest subnormal): +-0 */
    /* Subnormal result: value = m * 2^(e-150) with the implicit bit restored; in units of 2^-24 that is
     * m >> (126 - e), rounded. Rounding up to 0x400 gives the smallest normal, which is right. */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | ampci_rshift_rne(m, 126u - e));
}

static inline uint32_t ampci_f16_to_f32_bits(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u); /* inf / quiet NaN */
    if (e == 0) {
        if (m == 0) return sign;
        /* Subnormal m * 2^-24: normalise so the leading 1 sits at bit 10, adjusting the exponent. */
        unsigned sh = (unsigned)__builtin_clz(m) - 21u;
        return sign | ((113u - sh) << 23) | (((m << sh) & 0x3ffu) << 13);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}

static inline uint16_t ampci_bf16_from_f32_bits(uint32_t x) {
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    /* RNE on the low 16 bits; overflow of the mantissa carries into the exponent, and the largest
     * finite values carry into infinity (0x7f7fffff -> 0x7f80), as they must. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline uint32_t ampci_bf16_to_f32_bits(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    return (x & 0x7fffffffu) > 0x7f800000u ? x | 0x400000u : x;
}

#endif
