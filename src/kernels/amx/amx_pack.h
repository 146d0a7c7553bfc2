/* amx_pack.h: packing for the AMX GEMMs, part of gemm_amx.c's translation unit (plain C, so the emulated
 * build of tests/test_amx.c runs exactly this code too). Packing turns op(a) and op(b) of any layout and
 * dtype into BF16 tiles, splitting each value into BF16 parts, zero-padding every edge, and flags the
 * panels that hold values the tile path must not see (see "Special values" in gemm_amx.c).
 *
 * A tile is 16 rows x 32 BF16 (1 KiB, rows 64 bytes apart: the tile-load stride).
 *   A tile (row group G, k-step t): row r, element e = op(a)[16 G + r][k0 + 32 t + e].
 *   B tile (column group H, k-step t): row p, element 2 n + s = op(b)[k0 + 32 t + 2 p + s][16 H + n]
 *   (VNNI order: the pair (k, k + 1) of one column is one 32-bit word, which tdpbf16ps multiplies with
 *   the pair (k, k + 1) of one row of A).
 * A group's tiles for one K-block are stored k-step by k-step, each k-step as `parts` tiles (hi, then lo
 * for two-part kinds): tile (t, part) at (t * parts + part) * TWORDS. */
#ifndef AMPC_AMX_PACK_H
#define AMPC_AMX_PACK_H

#include "../../numerics/half.h"
#include "../kernels.h"

#include <string.h>

#define TWORDS 512 /* BF16 per tile */
#define TROWS 16   /* rows of a tile; rows and columns of a C tile */
#define TK 32      /* BF16 elements along K in one k-step (16 pairs) */

#define AI __attribute__((always_inline)) static inline

/* Operand kinds: the source dtype and how many BF16 parts each value becomes. */
typedef enum akind {
    AK_BF16 = 0, /* BF16: one part, as is */
    AK_F16X3,    /* F16: hi + lo, exact */
    AK_F32X1,    /* F32: hi only */
    AK_F32X3,    /* F32: hi + lo */
    AK_COUNT
} akind;

AI int kind_parts(akind kd) { return kd == AK_F16X3 || kd == AK_F32X3 ? 2 : 1; }
AI size_t kind_size(akind kd) { return kd == AK_F32X1 || kd == AK_F32X3 ? 4 : 2; }

AI bool bf16_subnormal(uint16_t h) { return (h & 0x7f80u) == 0 && (h & 0x7fu) != 0; }
AI bool bf16_nonfinite(uint16_t h) { return (h & 0x7f80u) == 0x7f80u; }

/* x = hi + lo (split_bf16 of gemm_ref.c): hi = x rounded to BF16, lo = (x - hi) rounded to BF16, lo = 0
 * when hi is inf or NaN. x - hi is exact in F32 (it is the rounding remainder). */
AI void split_f32(uint32_t x, uint16_t *hi, uint16_t *lo) {
    *hi = ampci_bf16_from_f32_bits(x);
    if (bf16_nonfinite(*hi)) {
        *lo = 0;
        return;
    }
    float r = ampci_f32_from_bits(x) - ampci_f32_from_bits(ampci_bf16_to_f32_bits(*hi));
    *lo = ampci_bf16_from_f32_bits(ampci_f32_bits(r));
}

/* The BF16 part(s) of the source element at p; returns whether the tile path must not see them: a BF16
 * subnormal part (tdpbf16ps reads it as 0), or, for three-pass kinds, an inf/NaN hi (its cross products
 * inf * lo would turn inf * 1 into inf * 0 = NaN). */
AI bool load_parts(const akind kd, const unsigned char *p, uint16_t *hi, uint16_t *lo) {
    uint16_t h;
    uint32_t x;
    switch (kd) {
    case AK_BF16: memcpy(hi, p, 2); return bf16_subnormal(*hi);
    case AK_F16X3: /* F16 values and their parts are multiples of 2^-24: never BF16 subnormals */
        memcpy(&h, p, 2);
        split_f32(ampci_f16_to_f32_bits(h), hi, lo);
        return bf16_nonfinite(*hi);
    case AK_F32X1:
        memcpy(&x, p, 4);
        *hi = ampci_bf16_from_f32_bits(x);
        return bf16_subnormal(*hi);
    default: /* AK_F32X3 */
        memcpy(&x, p, 4);
        split_f32(x, hi, lo);
        return bf16_subnormal(*hi) || bf16_subnormal(*lo) || bf16_nonfinite(*hi);
    }
}

/* One operand of a K-block: element (x, k) of op(a) (x = row) or op(b) (x = column) is at
 * base + (x * sx + k * sk) * es; nx of the 16 x's and kc k's exist (the rest is zero padding). */
typedef struct pack_src {
    const unsigned char *base;
    int64_t sx, sk;
    int64_t nx, kc;
} pack_src;

/* Position of element (x, k) in a group's tiles (without the part offset). */
AI size_t pos_a(int parts, int64_t x, int64_t k) { return (size_t)((k / TK * parts) * TWORDS + x * TK + k % TK); }
AI size_t pos_b(int parts, int64_t x, int64_t k) {
    return (size_t)((k / TK * parts) * TWORDS + (k % TK) / 2 * TK + 2 * x + (k & 1));
}

/* Stores the part(s) of the element at src as element (x, k) of a group; returns whether it is special. */
AI bool put(const akind kd, const bool is_b, const unsigned char *src, int64_t x, int64_t k, uint16_t *dst) {
    const int parts = kind_parts(kd);
    uint16_t hi, lo = 0;
    bool special = load_parts(kd, src, &hi, &lo);
    size_t at = is_b ? pos_b(parts, x, k) : pos_a(parts, x, k);
    dst[at] = hi;
    if (parts == 2) dst[at + TWORDS] = lo;
    return special;
}

/* Packs one group (16 rows of op(a) when is_b is false, 16 columns of op(b) when true) over kt k-steps
 * into dst; returns whether it holds a special value. The inner loop runs along whichever of x and k is
 * contiguous in the source. */
AI bool pack_group_body(const akind kd, const bool is_b, const pack_src *s, int64_t kt, uint16_t *dst) {
    const size_t es = kind_size(kd);
    bool special = false;
    if (s->nx < TROWS || s->kc < kt * TK) memset(dst, 0, (size_t)(kt * kind_parts(kd) * TWORDS) * sizeof(uint16_t));
    if (s->sk == 1) { /* k contiguous */
        for (int64_t x = 0; x < s->nx; x++) {
            const unsigned char *row = s->base + (size_t)(x * s->sx) * es;
            for (int64_t k = 0; k < s->kc; k++) special |= put(kd, is_b, row + (size_t)k * es, x, k, dst);
        }
    } else { /* x contiguous */
        for (int64_t k = 0; k < s->kc; k++) {
            const unsigned char *row = s->base + (size_t)(k * s->sk) * es;
            for (int64_t x = 0; x < s->nx; x++) special |= put(kd, is_b, row + (size_t)(x * s->sx) * es, x, k, dst);
        }
    }
    return special;
}

typedef bool (*pack_group_fn)(const pack_src *s, int64_t kt, uint16_t *dst);
#define DEF_PACK_GROUP(KD, tag)                                                                                        \
    static bool pack_a_##tag(const pack_src *s, int64_t kt, uint16_t *dst) {                                           \
        return pack_group_body(KD, false, s, kt, dst);                                                                 \
    }                                                                                                                  \
    static bool pack_b_##tag(const pack_src *s, int64_t kt, uint16_t *dst) {                                           \
        return pack_group_body(KD, true, s, kt, dst);                                                                  \
    }
DEF_PACK_GROUP(AK_BF16, bf16)
DEF_PACK_GROUP(AK_F16X3, f16x3)
DEF_PACK_GROUP(AK_F32X1, f32x1)
DEF_PACK_GROUP(AK_F32X3, f32x3)
/* [kind][0 = A, 1 = B] */
static const pack_group_fn g_pack_group[AK_COUNT][2] = {
    {pack_a_bf16, pack_b_bf16},
    {pack_a_f16x3, pack_b_f16x3},
    {pack_a_f32x1, pack_b_f32x1},
    {pack_a_f32x3, pack_b_f32x3},
};

#endif
