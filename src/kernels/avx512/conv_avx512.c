/* conv_avx512.c: AVX-512 versions of kernels/ref/conv_ref.c, bit-identical to them. They work on blocks of
 * up to 16 output pixels of one output row, one pixel per lane: im2row (F32, F16, BF16) loads each (c, kh,
 * kw) column of the block's windows as one strided load and turns 16 columns into the pixels' rows with a
 * 16 x 16 transpose; col2im transposes the other way and adds each column into its input row, walking
 * output rows ascending, pixel blocks ascending and kw descending, so that every input element receives
 * its terms in ref's order (output pixels ascending) and the sums are ref's bits; max pooling forward
 * applies ref's rule lane by lane (padding skipped, strictly greater replaces, NaN always replaces);
 * its backward scatters 0 + gy to the argmax where windows cannot overlap (one term per element, ref's
 * one addition) and runs ref's loop where they can. */
#include "kernels_avx512.h"
#include "simd_avx512.h"

#include <string.h>

#define BLK 16       /* output pixels per block: one per lane */
#define MAX_COLS 256 /* columns col2im transposes per pass (a 16 KiB buffer) */

/* ---- one block's taps ---- */

/* Tap (kh, kw) of a block: lane i reads plane element off + i sw when lane i of m is set. */
typedef struct tap {
    int64_t off;
    __mmask16 m;
} tap;

/* The lanes i < np with 0 <= w0 + i sw < W (a contiguous run). */
static __mmask16 lanes_in(int64_t w0, int64_t sw, int64_t W, int64_t np) {
    int64_t lo = w0 >= 0 ? 0 : (sw - 1 - w0) / sw, hi = W - w0 <= 0 ? 0 : (W - 1 - w0) / sw + 1;
    if (hi > np) hi = np;
    return lo >= hi ? 0 : (__mmask16)(m16(hi) & ~m16(lo));
}

/* Tap (kh, kw) of the block of np pixels from (oh, ow0); no lanes where row h is padding. */
static tap tap_of(const ampci_conv_geom *g, int64_t oh, int64_t ow0, int64_t np, int64_t kh, int64_t kw) {
    int64_t h = oh * g->sh - g->ph + kh, w0 = ow0 * g->sw - g->pw + kw;
    if (h < 0 || h >= g->H) return (tap){0, 0};
    return (tap){h * g->W + w0, lanes_in(w0, g->sw, g->W, np)};
}

/* p advanced by i elements of es bytes; the masked accesses below may start before p's object (lanes
 * outside the plane are masked off and never touched). */
static inline void *addr(const void *p, int64_t i, int64_t es) { return (void *)((uintptr_t)p + (uintptr_t)(i * es)); }

/* Lanes of a 32-bit plane at t (zero where t's mask is clear). */
SIMD_INLINE __m512i ld32(const void *plane, tap t, int64_t sw) {
    if (sw == 1) return _mm512_maskz_loadu_epi32(t.m, addr(plane, t.off, 4));
    if (sw == 2 && t.m) { /* the run of elements 2 lo .. 2 hi - 2, then the even ones */
        int lo = 2 * __builtin_ctz(t.m), hi = 2 * (32 - __builtin_clz(t.m)) - 1;
        uint32_t run = (hi >= 32 ? 0xffffffffu : (1u << hi) - 1) & ~((1u << lo) - 1);
        __m512i a = _mm512_maskz_loadu_epi32((__mmask16)run, addr(plane, t.off, 4));
        __m512i b = _mm512_maskz_loadu_epi32((__mmask16)(run >> 16), addr(plane, t.off + 16, 4));
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        return _mm512_permutex2var_epi32(a, even, b);
    }
    __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                     _mm512_set1_epi32((int)sw));
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), t.m, idx, addr(plane, t.off, 4), 4);
}

/* Lanes of a 16-bit plane at t, zero-extended to 32 bits. */
SIMD_INLINE __m512i ld16(const void *plane, tap t, int64_t sw) {
    if (sw == 1) return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(t.m, addr(plane, t.off, 2)));
    uint16_t v[BLK] = {0};
    for (int i = 0; i < BLK; i++)
        if (t.m >> i & 1) v[i] = ((const uint16_t *)plane)[t.off + i * sw];
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)v));
}

/* The block's taps: all KH*KW of them when they fit the table, else computed per column by tap_at. */
#define MAX_TAPS 64
typedef struct taps {
    const ampci_conv_geom *g;
    int64_t oh, ow0, np;
    tap t[MAX_TAPS];
} taps;

static void taps_fill(taps *T, const ampci_conv_geom *g, int64_t oh, int64_t ow0, int64_t np) {
    *T = (taps){.g = g, .oh = oh, .ow0 = ow0, .np = np};
    if (g->KH * g->KW > MAX_TAPS) return;
    for (int64_t k = 0; k < g->KH * g->KW; k++) T->t[k] = tap_of(g, oh, ow0, np, k / g->KW, k % g->KW);
}

static inline tap tap_at(const taps *T, int64_t kh, int64_t kw) {
    const ampci_conv_geom *g = T->g;
    return g->KH * g->KW <= MAX_TAPS ? T->t[kh * g->KW + kw] : tap_of(g, T->oh, T->ow0, T->np, kh, kw);
}

/* ---- im2row ---- */

/* Rows of the block (np pixels from (n, oh, ow0)) of col (N*OH*OW, C*KH*KW), element size es (4 or 2):
 * columns j0.. j0+15 are loaded one per vector (c, kh, kw advancing with j), transposed, and stored as
 * 16-column pieces of the np rows. */
SIMD_INLINE void im2row_block(void *col, const void *x, const ampci_conv_geom *g, int64_t n, int64_t oh, int64_t ow0,
                              int64_t np, int64_t es) {
    int64_t ckk = g->C * g->KH * g->KW, hw = g->H * g->W, c = 0, kh = 0, kw = 0;
    const unsigned char *img = (const unsigned char *)x + n * g->C * hw * es;
    unsigned char *dst = (unsigned char *)col + ((n * g->OH + oh) * g->OW + ow0) * ckk * es;
    taps T;
    taps_fill(&T, g, oh, ow0, np);
    for (int64_t j0 = 0; j0 < ckk; j0 += BLK) {
        __m512 v[BLK];
        int64_t nj = ckk - j0 < BLK ? ckk - j0 : BLK;
        for (int64_t jj = 0; jj < BLK; jj++) {
            if (jj >= nj) {
                v[jj] = _mm512_setzero_ps();
                continue;
            }
            const void *plane = img + c * hw * es;
            tap t = tap_at(&T, kh, kw);
            v[jj] = _mm512_castsi512_ps(es == 4 ? ld32(plane, t, g->sw) : ld16(plane, t, g->sw));
            if (++kw == g->KW) kw = 0, kh = kh + 1 == g->KH ? (c++, 0) : kh + 1;
        }
        transpose16(v);
        for (int64_t i = 0; i < np; i++) {
            void *p = dst + (i * ckk + j0) * es;
            if (es == 4) _mm512_mask_storeu_ps(p, m16(nj), v[i]);
            else _mm256_mask_storeu_epi16(p, m16(nj), _mm512_cvtepi32_epi16(_mm512_castps_si512(v[i])));
        }
    }
}

/* Rows [r0, r1) of col, block by block within each output row. */
SIMD_INLINE void im2row(void *col, const void *x, const ampci_conv_geom *g, int64_t r0, int64_t r1, int64_t es) {
    for (int64_t r = r0; r < r1;) {
        int64_t n = r / (g->OH * g->OW), oh = r / g->OW % g->OH, ow = r % g->OW;
        int64_t np = g->OW - ow < BLK ? g->OW - ow : BLK;
        if (np > r1 - r) np = r1 - r;
        im2row_block(col, x, g, n, oh, ow, np, es);
        r += np;
    }
}

/* col: rows [r0, r1) of (N*OH*OW, C*KH*KW); x: (N, C, H, W) contiguous; both of the slot's dtype */
void ampc_k_im2col_f32__avx512(void *col, const void *x, const ampci_conv_geom *g, int64_t r0, int64_t r1) {
    im2row(col, x, g, r0, r1, 4);
}
void ampc_k_im2col_f16__avx512(void *col, const void *x, const ampci_conv_geom *g, int64_t r0, int64_t r1) {
    im2row(col, x, g, r0, r1, 2);
}
/* the F16 kernel's code (a copy of 16-bit patterns); an entry of its own per dtype, as in ref */
void ampc_k_im2col_bf16__avx512(void *col, const void *x, const ampci_conv_geom *g, int64_t r0, int64_t r1) {
    im2row(col, x, g, r0, r1, 2);
}

/* ---- col2im ---- */

/* buf[j - j0] (16 lanes: the block's np pixels) = columns [j0, j1) of rows row0.. row0+np-1 of gcol. */
static void gather_cols(float (*buf)[BLK], const float *row0, int64_t ckk, int64_t np, int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; j += BLK) {
        __m512 v[BLK];
        for (int64_t i = 0; i < BLK; i++)
            v[i] = i < np ? _mm512_maskz_loadu_ps(m16(j1 - j), row0 + i * ckk + j) : _mm512_setzero_ps();
        transpose16(v);
        for (int64_t k = 0; k < BLK && j + k < j1; k++) _mm512_store_ps(buf[j - j0 + k], v[k]);
    }
}

/* plane[t] += v on t's lanes (distinct elements: w0 + i sw). */
static inline void add_tap(float *plane, tap t, int64_t sw, __m512 v) {
    if (sw == 1) {
        float *p = addr(plane, t.off, 4);
        _mm512_mask_storeu_ps(p, t.m, _mm512_add_ps(_mm512_maskz_loadu_ps(t.m, p), v));
        return;
    }
    __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                     _mm512_set1_epi32((int)sw));
    float *p = addr(plane, t.off, 4);
    __m512 old = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), t.m, idx, p, 4);
    _mm512_mask_i32scatter_ps(p, t.m, idx, _mm512_add_ps(old, v), 4);
}

/* Planes c0..c1-1 of image n (zeroed) += their columns of gcol. Per block the columns go in descending
 * order, MAX_COLS at a time: within one (c, kh) kw descends, which is ow ascending for each element, and
 * an element takes at most one kh per output row; output rows and blocks ascend. */
static void col2im_image(float *gx, const float *gcol, const ampci_conv_geom *g, int64_t n, int64_t c0, int64_t c1) {
    _Alignas(64) float buf[MAX_COLS][BLK];
    int64_t kk = g->KH * g->KW, ckk = g->C * kk, hw = g->H * g->W;
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow0 = 0; ow0 < g->OW; ow0 += BLK) {
            int64_t np = g->OW - ow0 < BLK ? g->OW - ow0 : BLK;
            taps T;
            taps_fill(&T, g, oh, ow0, np);
            for (int64_t j1 = c1 * kk, j0; j1 > c0 * kk; j1 = j0) {
                j0 = j1 - MAX_COLS > c0 * kk ? j1 - MAX_COLS : c0 * kk;
                gather_cols(buf, gcol + ((n * g->OH + oh) * g->OW + ow0) * ckk, ckk, np, j0, j1);
                int64_t c = (j1 - 1) / kk, kh = (j1 - 1) % kk / g->KW, kw = (j1 - 1) % g->KW;
                for (int64_t j = j1 - 1; j >= j0; j--) {
                    tap t = tap_at(&T, kh, kw);
                    if (t.m) add_tap(gx + (n * g->C + c) * hw, t, g->sw, _mm512_load_ps(buf[j - j0]));
                    if (--kw < 0) kw = g->KW - 1, kh = kh ? kh - 1 : (c--, g->KH - 1);
                }
            }
        }
}

/* gx: planes [p0, p1) of (N, C, H, W) written; gcol: (N*OH*OW, C*KH*KW) */
void ampc_k_col2im_f32__avx512(float *gx, const float *gcol, const ampci_conv_geom *g, int64_t p0, int64_t p1) {
    int64_t hw = g->H * g->W;
    memset(gx + p0 * hw, 0, (size_t)((p1 - p0) * hw) * sizeof *gx);
    for (int64_t p = p0; p < p1;) {
        int64_t n = p / g->C, c0 = p % g->C, c1 = g->C - c0 < p1 - p ? g->C : c0 + (p1 - p);
        col2im_image(gx, gcol, g, n, c0, c1);
        p += c1 - c0;
    }
}

/* ---- max pooling ---- */

/* y, arg: planes [p0, p1) of (N*C, OH*OW); x: (N*C, H*W). Per lane ref's rule over the window in row-major
 * order: padding is skipped, the first in-plane element is taken, then strictly greater or NaN replaces. */
void ampc_k_maxpool_f32__avx512(float *y, int32_t *arg, const float *x, const ampci_conv_geom *g, int64_t p0,
                                int64_t p1) {
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)g->sw));
    for (int64_t p = p0; p < p1; p++) {
        const float *plane = x + p * g->H * g->W;
        for (int64_t oh = 0; oh < g->OH; oh++)
            for (int64_t ow0 = 0; ow0 < g->OW; ow0 += BLK) {
                int64_t np = g->OW - ow0 < BLK ? g->OW - ow0 : BLK, o = (p * g->OH + oh) * g->OW + ow0;
                __m512 best = _mm512_set1_ps(-__builtin_inff());
                __m512i at = _mm512_set1_epi32(-1);
                __mmask16 none = m16(np); /* lanes that have taken no element yet */
                for (int64_t kh = 0; kh < g->KH; kh++)
                    for (int64_t kw = 0; kw < g->KW; kw++) {
                        tap t = tap_of(g, oh, ow0, np, kh, kw);
                        __m512 v = _mm512_castsi512_ps(ld32(plane, t, g->sw));
                        __mmask16 up = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                        up = t.m & (up | none);
                        none &= (__mmask16)~t.m;
                        best = _mm512_mask_mov_ps(best, up, v);
                        at = _mm512_mask_mov_epi32(at, up, _mm512_add_epi32(_mm512_set1_epi32((int)t.off), step));
                    }
                _mm512_mask_storeu_ps(y + o, m16(np), best);
                _mm512_mask_storeu_epi32(arg + o, m16(np), at);
            }
    }
}

/* gx: planes [p0, p1) of (N*C, H*W) written; gy, arg: (N*C, OH*OW) */
void ampc_k_maxpool_bw_f32__avx512(float *gx, const float *gy, const int32_t *arg, const ampci_conv_geom *g, int64_t p0,
                                   int64_t p1) {
    int64_t ohw = g->OH * g->OW, hw = g->H * g->W;
    bool disjoint = g->sh >= g->KH && g->sw >= g->KW; /* no element in two windows: distinct argmaxes */
    memset(gx + p0 * hw, 0, (size_t)((p1 - p0) * hw) * sizeof *gx);
    for (int64_t p = p0; p < p1; p++) {
        float *plane = gx + p * hw;
        const float *gp = gy + p * ohw;
        const int32_t *ap = arg + p * ohw;
        if (!disjoint) {
            for (int64_t o = 0; o < ohw; o++) plane[ap[o]] += gp[o];
            continue;
        }
        for (int64_t o = 0; o < ohw; o += BLK) {
            __mmask16 m = m16(ohw - o);
            __m512 v = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, gp + o)); /* ref's 0 + gy */
            _mm512_mask_i32scatter_ps(plane, m, _mm512_maskz_loadu_epi32(m, ap + o), v, 4);
        }
    }
}
