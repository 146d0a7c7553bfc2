/* quant_ref.c: reference FP8 quantisation (kernels.h: ampci_quant8_kernel), TransformerEngine's saturating
 * cast of F32 values into FP8-E4M3 / FP8-E5M2, written out as BF16 bit patterns (every FP8 value is a
 * BF16 value). Portable and branch-light, bit-identical to ampc_fp8_*_from_f32 on every non-saturated
 * product, with no call of it: p = x * scale in F32, then on |p|'s bit pattern
 *   - |p| >= the format's min normal: round the F32 pattern to 3 (E4M3) / 2 (E5M2) mantissa bits, ties to
 *     even (add half an ulp less one plus the lowest kept bit, clear the dropped bits; a carry moves into
 *     the exponent, as it should);
 *   - |p| below it: round to a multiple of the subnormal quantum 2^-9 / 2^-16 by (|p| + c) - c with
 *     c = 1.5 * 2^(quantum exponent + 23), whose ulp is the quantum: that F32 addition rounds to nearest
 *     even (the default MXCSR rounding; the library never changes MXCSR, never sets FTZ/DAZ, never builds
 *     with -ffast-math), and subtracting c again is exact;
 *   - a rounded pattern above max's (inf included) is the overflow of the scalar conversion: it becomes
 *     max and is counted; NaN becomes 0x7FC0 with its sign.
 * Then the sign goes back on and the BF16 pattern is the top half of the F32 one (exact). */
#include "kernels_ref.h"

#include <string.h>

#define Q8_LANES 16                 /* values a block: independent lanes the compiler vectorises */
#define Q8_CHUNK ((int64_t)1 << 24) /* values a chunk: its 32-bit lane counts cannot wrap */
#define Q8_PREFETCH 1024            /* values ahead (4 KiB): about 2x the speed from DRAM, none in cache */

/* A format's constants on F32 bit patterns. */
typedef struct q8_fmt {
    uint32_t drop;       /* F32 mantissa bits dropped: 23 - 3 / 23 - 2 */
    uint32_t min_normal; /* 2^-6 / 2^-14 */
    uint32_t max;        /* 448 / 57344 */
    float magic;         /* 1.5 * 2^(-9 + 23) / 1.5 * 2^(-16 + 23) */
} q8_fmt;

static const q8_fmt g_fmt[2] = {
    {20, 0x3c800000u, 0x43e00000u, 24576.0f}, /* E4M3 */
    {21, 0x38800000u, 0x47600000u, 192.0f},   /* E5M2 */
};

static inline uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* p's F32 pattern rounded to the format with its sign: RNE on |p|'s pattern for normals, the magic-number
 * addition below the min normal, max where the rounded pattern is above max's (inf included; *over = 1
 * then), the quiet NaN for NaN. All selects are masks, no branches, so the block loop vectorises. */
static inline uint32_t q8_pattern(float p, const q8_fmt f, uint32_t *over) {
    uint32_t u = bits_of(p), a = u & 0x7fffffffu;
    uint32_t normal = (a + ((1u << (f.drop - 1)) - 1) + ((a >> f.drop) & 1u)) & ~((1u << f.drop) - 1);
    uint32_t sub = bits_of((float_of(a) + f.magic) - f.magic);
    uint32_t small = -(uint32_t)(a < f.min_normal), nan = -(uint32_t)(a > 0x7f800000u);
    uint32_t r = (normal & ~small) | (sub & small);
    uint32_t sat = -(uint32_t)(r > f.max) & ~nan;
    r = (r & ~sat) | (f.max & sat);
    r = (r & ~nan) | (0x7fc00000u & nan);
    *over = sat & 1u;
    return (u & 0x80000000u) | r;
}

/* |x|'s pattern where x is finite, else 0 (integer order is float order for these patterns). */
static inline uint32_t finite_abs(float x) {
    uint32_t a = bits_of(x) & 0x7fffffffu;
    return a & -(uint32_t)(a < 0x7f800000u);
}

/* x (n <= Q8_CHUNK) into dst; *m = max(*m, the largest finite |x| pattern). Returns the count. Blocks of
 * Q8_LANES values with per-lane max and count (32-bit: a chunk cannot wrap them), then the tail. f is a
 * constant at each call, so its fields fold into the code. */
static inline uint64_t q8_chunk(uint16_t *dst, const float *x, int64_t n, float scale, const q8_fmt f, uint32_t *m) {
    uint32_t mv[Q8_LANES] = {0}, cv[Q8_LANES] = {0}, over;
    int64_t i = 0;
    for (; i + Q8_LANES <= n; i += Q8_LANES) {
        __builtin_prefetch((const void *)((uintptr_t)(x + i) + 4 * Q8_PREFETCH)); /* never faults past the end */
        for (int j = 0; j < Q8_LANES; j++) {
            uint32_t a = finite_abs(x[i + j]);
            mv[j] = a > mv[j] ? a : mv[j];
            dst[i + j] = (uint16_t)(q8_pattern(x[i + j] * scale, f, &over) >> 16);
            cv[j] += over;
        }
    }
    for (; i < n; i++) {
        uint32_t a = finite_abs(x[i]);
        mv[0] = a > mv[0] ? a : mv[0];
        dst[i] = (uint16_t)(q8_pattern(x[i] * scale, f, &over) >> 16);
        cv[0] += over;
    }
    uint64_t sat = 0;
    for (int j = 0; j < Q8_LANES; j++) *m = mv[j] > *m ? mv[j] : *m, sat += cv[j];
    return sat;
}

static uint64_t q8_row(uint16_t *dst, const float *x, int64_t n, float scale, const q8_fmt f, uint32_t *m) {
    uint64_t sat = 0;
    for (int64_t i = 0; i < n; i += Q8_CHUNK)
        sat += q8_chunk(dst + i, x + i, n - i < Q8_CHUNK ? n - i : Q8_CHUNK, scale, f, m);
    return sat;
}

uint64_t ampc_k_quant8_f32__ref(uint16_t *dst /* (n) BF16 bits */, const float *x /* (n) */, int64_t n, float scale,
                                int fmt, float *amax) {
    AMPCI_ASSERT(fmt == AMPCI_QUANT8_E4M3 || fmt == AMPCI_QUANT8_E5M2);
    uint32_t m = 0;
    uint64_t sat = fmt == AMPCI_QUANT8_E4M3 ? q8_row(dst, x, n, scale, g_fmt[0], &m)
                                            : q8_row(dst, x, n, scale, g_fmt[1], &m);
    if (float_of(m) > *amax) *amax = float_of(m);
    return sat;
}
