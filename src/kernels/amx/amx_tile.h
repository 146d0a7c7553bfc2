/* amx_tile.h: the tile-instruction layer of the AMX GEMMs, part of gemm_amx.c's translation unit. Every
 * tile instruction the kernels execute goes through the seven macros below (AMX_CONFIG, AMX_RELEASE,
 * AMX_LOAD, AMX_LOAD_T1, AMX_STORE, AMX_ZERO, AMX_DPBF16) and one constant config record. Normally they are the
 * instructions themselves. With AMPCI_AMX_EMULATE defined they become portable C that follows the Intel
 * SDM pseudo-code of LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TDPBF16PS and TILERELEASE on a
 * per-thread tile state, so tests/test_amx.c can compile the very same kernel source and run it on any
 * x86-64 (no AMX or AVX-512 compile flags needed: the emulation is plain C). The emulation also checks
 * what the CPU would fault on (#UD/#GP): tiles used before LDTILECFG on this thread, bad shapes, aliased
 * operands.
 *
 * The configuration the kernels use is fixed: palette 1, all eight tiles 16 rows x 64 bytes (C: 16 x 16
 * F32, A: 16 rows x 16 BF16 pairs, B: 16 pair-rows x 16 columns). */
#ifndef AMPC_AMX_TILE_H
#define AMPC_AMX_TILE_H

#include <stdint.h>

/* The 64-byte LDTILECFG record (palette 1). */
typedef struct amx_tilecfg {
    uint8_t palette_id;
    uint8_t start_row;
    uint8_t reserved0[14];
    uint16_t colsb[16]; /* bytes per row, tiles 0..15 (palette 1 has 8) */
    uint8_t rows[16];
} amx_tilecfg;
_Static_assert(sizeof(amx_tilecfg) == 64, "LDTILECFG reads 64 bytes");

/* A constant object: gcc 12's _tile_loadconfig tells the compiler it reads only 8 bytes of the record,
 * so a record built on the stack just before could be (partly) not yet stored. */
static _Alignas(64) const amx_tilecfg amx_cfg_16x64 = {
    .palette_id = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

#ifndef AMPCI_AMX_EMULATE

#include <immintrin.h>

/* gcc 12's tileloadd asm has no memory operand: without this barrier the compiler may move stores to a
 * packed panel or to the C buffer past the load that reads them. */
#define AMX_BARRIER() __asm__ volatile("" ::: "memory")
#define AMX_CONFIG()                                                                                                   \
    do {                                                                                                               \
        AMX_BARRIER();                                                                                                 \
        _tile_loadconfig(&amx_cfg_16x64);                                                                              \
    } while (0)
#define AMX_RELEASE() _tile_release()
/* t: tile number (a literal); base: row 0; stride: bytes between rows */
#define AMX_LOAD(t, base, stride)                                                                                      \
    do {                                                                                                               \
        AMX_BARRIER();                                                                                                 \
        _tile_loadd(t, base, stride);                                                                                  \
    } while (0)
/* tileloaddt1: the same load with a hint not to keep the data in the caches (the streamed A slivers, so
 * that they do not evict the B sliver the next micro-tiles reuse from L1) */
#define AMX_LOAD_T1(t, base, stride)                                                                                   \
    do {                                                                                                               \
        AMX_BARRIER();                                                                                                 \
        _tile_stream_loadd(t, base, stride);                                                                           \
    } while (0)
#define AMX_STORE(t, base, stride) _tile_stored(t, base, stride)
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_DPBF16(d, s1, s2) _tile_dpbf16ps(d, s1, s2)

#else /* AMPCI_AMX_EMULATE */

#include <float.h>
#include <math.h>
#include <string.h>

/* The architectural tile state of one thread (palette 1: 8 tiles of 16 rows x 64 bytes). */
typedef struct amx_emu_state {
    _Alignas(64) unsigned char tile[8][16][64];
    uint16_t colsb[8];
    uint8_t rows[8];
    uint8_t start_row;
    int configured; /* 0: INIT state (no LDTILECFG since the last TILERELEASE) */
} amx_emu_state;

static _Thread_local amx_emu_state amx_emu;

/* What the hardware would fault on: a kernel bug, never a user error. */
#define AMX_EMU_CHECK(c) AMPCI_ASSERT(c)

static inline void amx_emu_loadconfig(const amx_tilecfg *c) {
    memset(&amx_emu, 0, sizeof amx_emu); /* LDTILECFG zeroes all tile data */
    if (c->palette_id == 0) return;      /* palette 0: back to INIT */
    AMX_EMU_CHECK(c->palette_id == 1);
    for (int i = 0; i < 14; i++) AMX_EMU_CHECK(c->reserved0[i] == 0);
    for (int t = 0; t < 16; t++) {
        if (t >= 8) {
            AMX_EMU_CHECK(c->colsb[t] == 0 && c->rows[t] == 0);
            continue;
        }
        AMX_EMU_CHECK(c->colsb[t] <= 64 && c->rows[t] <= 16);
        AMX_EMU_CHECK((c->colsb[t] == 0) == (c->rows[t] == 0));
        amx_emu.colsb[t] = c->colsb[t];
        amx_emu.rows[t] = c->rows[t];
    }
    amx_emu.start_row = c->start_row;
    amx_emu.configured = 1;
}

static inline void amx_emu_release(void) { memset(&amx_emu, 0, sizeof amx_emu); }

static inline void amx_emu_valid(int t) {
    AMX_EMU_CHECK(amx_emu.configured);
    AMX_EMU_CHECK(t >= 0 && t < 8 && amx_emu.rows[t] != 0);
    AMX_EMU_CHECK(amx_emu.colsb[t] % 4 == 0);
}

/* write_row_and_zero / zero_upper_rows of the pseudo-code. */
static inline void amx_emu_zero_tail(int t, int row) {
    memset(amx_emu.tile[t][row] + amx_emu.colsb[t], 0, 64u - amx_emu.colsb[t]);
}
static inline void amx_emu_zero_upper_rows(int t) {
    for (int r = amx_emu.rows[t]; r < 16; r++) memset(amx_emu.tile[t][r], 0, 64);
}

/* TILELOADD: rows start_row..rows-1 from base + row * stride, colsb bytes each. */
static inline void amx_emu_loadd(int t, const void *base, int64_t stride) {
    amx_emu_valid(t);
    AMX_EMU_CHECK(amx_emu.start_row < amx_emu.rows[t]);
    if (amx_emu.start_row == 0) memset(amx_emu.tile[t], 0, sizeof amx_emu.tile[t]);
    for (int r = amx_emu.start_row; r < amx_emu.rows[t]; r++) {
        memcpy(amx_emu.tile[t][r], (const unsigned char *)base + r * stride, amx_emu.colsb[t]);
        amx_emu_zero_tail(t, r);
    }
    amx_emu_zero_upper_rows(t);
    amx_emu.start_row = 0;
}

/* TILESTORED: rows start_row..rows-1 to base + row * stride, colsb bytes each. */
static inline void amx_emu_stored(int t, void *base, int64_t stride) {
    amx_emu_valid(t);
    AMX_EMU_CHECK(amx_emu.start_row < amx_emu.rows[t]);
    for (int r = amx_emu.start_row; r < amx_emu.rows[t]; r++)
        memcpy((unsigned char *)base + r * stride, amx_emu.tile[t][r], amx_emu.colsb[t]);
    amx_emu.start_row = 0;
}

static inline void amx_emu_zero(int t) {
    amx_emu_valid(t);
    memset(amx_emu.tile[t], 0, sizeof amx_emu.tile[t]);
    amx_emu.start_row = 0;
}

static inline float amx_emu_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* DAZ: a subnormal input counts as a zero of its sign. */
static inline float amx_emu_daz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* FTZ after an FP32 addition of two DAZ'd values: the exact sum is a multiple of 2^-149, so a result below
 * 2^-126 in magnitude is exact and tiny; it becomes a zero of its sign. */
static inline float amx_emu_add(float x, float y) {
    float r = amx_emu_daz(x) + amx_emu_daz(y);
    return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r;
}

/* FP32 FMA a * b + c with DAZ, FTZ, RNE, one rounding. x86 detects tininess after rounding (to 24 bits,
 * exponent unbounded): a result that IEEE rounds to +-2^-126 is still tiny, and flushed, when the exact
 * value is below 2^-126 (1 - 2^-25). With BF16 factors and a normal-or-zero c, a*b + c is exact in
 * double whenever it lies that close to 2^-126, so the double sum decides. */
static inline float amx_emu_fma_ftz(float a, float b, float c) { /* a, b, c already DAZ'd */
    float r = fmaf(a, b, c);
    if (fabsf(r) > FLT_MIN || isnan(r)) return r;
    if (fabsf(r) < FLT_MIN) return copysignf(0.0f, r);
    if (fabs((double)a * (double)b + (double)c) < (double)FLT_MIN - 0x1p-151) return copysignf(0.0f, r);
    return r;
}
static inline float amx_emu_fma(float a, float b, float c) {
    return amx_emu_fma_ftz(amx_emu_daz(a), amx_emu_daz(b), amx_emu_daz(c));
}

/* TDPBF16PS d, s1, s2 (SDM pseudo-code): for each row m of d, two F32 lanes per output column n sum the
 * even and the odd BF16 products of the K pairs separately (FMA chains in k order, from +0), then
 * d[m][n] = d[m][n] + (even + odd). (The intrinsics guide shows a different order, both products
 * accumulated straight into d; the SDM is the architectural definition.) */
static inline void amx_emu_dpbf16ps(int d, int s1, int s2) {
    amx_emu_valid(d);
    amx_emu_valid(s1);
    amx_emu_valid(s2);
    AMX_EMU_CHECK(d != s1 && d != s2 && s1 != s2);
    int M = amx_emu.rows[d], N = amx_emu.colsb[d] / 4, K = amx_emu.colsb[s1] / 4;
    AMX_EMU_CHECK(N == amx_emu.colsb[s2] / 4 && M == amx_emu.rows[s1] && K == amx_emu.rows[s2]);
    AMX_EMU_CHECK(N <= 16 && K <= 16);
    float b[16][32]; /* make_fp32 of every BF16 of src2, DAZ'd: b[k][2 n + s] */
    for (int k = 0; k < K; k++)
        for (int e = 0; e < 2 * N; e++) {
            uint16_t y;
            memcpy(&y, amx_emu.tile[s2][k] + 2 * e, 2);
            b[k][e] = amx_emu_daz(amx_emu_f32((uint32_t)y << 16));
        }
    for (int m = 0; m < M; m++) {
        float a[32], temp[32] = {0};
        for (int e = 0; e < 2 * K; e++) {
            uint16_t x;
            memcpy(&x, amx_emu.tile[s1][m] + 2 * e, 2);
            a[e] = amx_emu_daz(amx_emu_f32((uint32_t)x << 16));
        }
        /* temp starts at +0 and holds FTZ results only: never subnormal, so its DAZ is a no-op */
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                temp[2 * n + 0] = amx_emu_fma_ftz(a[2 * k + 0], b[k][2 * n + 0], temp[2 * n + 0]);
                temp[2 * n + 1] = amx_emu_fma_ftz(a[2 * k + 1], b[k][2 * n + 1], temp[2 * n + 1]);
            }
        for (int n = 0; n < N; n++) {
            float acc;
            memcpy(&acc, amx_emu.tile[d][m] + 4 * n, 4);
            acc = amx_emu_add(acc, amx_emu_add(temp[2 * n], temp[2 * n + 1]));
            memcpy(amx_emu.tile[d][m] + 4 * n, &acc, 4);
        }
        amx_emu_zero_tail(d, m);
    }
    amx_emu_zero_upper_rows(d);
    amx_emu.start_row = 0;
}

#define AMX_CONFIG() amx_emu_loadconfig(&amx_cfg_16x64)
#define AMX_RELEASE() amx_emu_release()
#define AMX_LOAD(t, base, stride) amx_emu_loadd(t, base, stride)
#define AMX_LOAD_T1(t, base, stride) amx_emu_loadd(t, base, stride) /* a cache hint: the same load */
#define AMX_STORE(t, base, stride) amx_emu_stored(t, base, stride)
#define AMX_ZERO(t) amx_emu_zero(t)
#define AMX_DPBF16(d, s1, s2) amx_emu_dpbf16ps(d, s1, s2)

#endif /* AMPCI_AMX_EMULATE */

#endif
