/* conv_avx512.c: AVX-512 versions of kernels/ref/conv_ref.c, bit-identical to them. They work on blocks of
 * up to 16 output pixels of one output row, one pixel per lane: im2row (F32, F16, BF16) loads each (c, kh,
 * kw) column of the block's windows as one strided load and turns 16 columns into the pixels' rows with a
 * 16 x 16 transpose; col2im transposes the other way and adds each column into its input row, walking
 * output rows ascending, pixel blocks ascending and kw descending, so that every input element receives
 * its terms in ref's order (output pixels ascending) and the sums are ref's bits; max pooling forward
 * applies ref's rule lane by lane (padding skipped, strictly greater replaces, NaN always replaces);
 * its backward writes each row once where the windows tile the plane (0 + gy at the argmax, ref's one
 * addition, +0 elsewhere) and runs ref's loop otherwise. */
#include "kernels_avx512.h"
#include "simd_avx512.h"

#include <string.h>

#define BLK 16       /* output pixels per block: one per lane */
#define MAX_COLS 256 /* columns col2im transposes per pass (a 16 KiB buffer) */

/* ---- a block's windows ---- */

/* Where lanes read a row: lane i reads column w0 + i sw where m is set. */
typedef struct span {
    int64_t w0;
    __mmask16 m;
} span;

/* Window column kw of the block of np pixels from ow0: the lanes i < np with 0 <= w0 + i sw < W (a run). */
static span span_of(const ampci_conv_geom *g, int64_t ow0, int64_t np, int64_t kw) {
    int64_t sw = g->sw, w0 = ow0 * sw - g->pw + kw;
    int64_t lo = w0 >= 0 ? 0 : (sw - 1 - w0) / sw, hi = g->W - w0 <= 0 ? 0 : (g->W - 1 - w0) / sw + 1;
    if (hi > np) hi = np;
    return (span){w0, lo >= hi ? 0 : (__mmask16)(m16(hi) & ~m16(lo))};
}

/* The block's spans for every kw, when KW fits the table (else span_at computes them as asked). */
#define MAX_KW 64
typedef struct spans {
    const ampci_conv_geom *g;
    int64_t ow0, np;
    bool table;
    span s[MAX_KW];
} spans;

static inline void spans_fill(spans *S, const ampci_conv_geom *g, int64_t ow0, int64_t np) {
    S->g = g, S->ow0 = ow0, S->np = np, S->table = g->KW <= MAX_KW;
    for (int64_t kw = 0; S->table && kw < g->KW; kw++) S->s[kw] = span_of(g, ow0, np, kw);
}

static inline span span_at(const spans *S, int64_t kw) {
    return S->table ? S->s[kw] : span_of(S->g, S->ow0, S->np, kw);
}

/* p advanced by i elements of es bytes; the masked accesses below may start before p's object (lanes
 * outside the plane are masked off and never touched). */
static inline void *addr(const void *p, int64_t i, int64_t es) { return (void *)((uintptr_t)p + (uintptr_t)(i * es)); }

static inline __m512i lane_step(int64_t sw) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32((int)sw));
}

/* Lanes of a 32-bit row: row[w0 + i sw] where m is set, 0 elsewhere. */
SIMD_INLINE __m512i ld32(const void *row, int64_t w0, __mmask16 m, int64_t sw) {
    if (sw == 1) return _mm512_maskz_loadu_epi32(m, addr(row, w0, 4));
    if (sw == 2 && m) { /* the run of elements 2 lo .. 2 hi - 2, then the even ones */
        int lo = 2 * __builtin_ctz(m), hi = 2 * (32 - __builtin_clz(m)) - 1;
        uint32_t run = (hi >= 32 ? 0xffffffffu : (1u << hi) - 1) & ~((1u << lo) - 1);
        __m512i a = _mm512_maskz_loadu_epi32((__mmask16)run, addr(row, w0, 4));
        __m512i b = _mm512_maskz_loadu_epi32((__mmask16)(run >> 16), addr(row, w0 + 16, 4));
        return _mm512_permutex2var_epi32(a, lane_step(2), b);
    }
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, lane_step(sw), addr(row, w0, 4), 4);
}

/* Lanes of a 16-bit row, zero-extended to 32 bits. */
SIMD_INLINE __m512i ld16(const void *row, int64_t w0, __mmask16 m, int64_t sw) {
    if (sw == 1) return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, addr(row, w0, 2)));
    uint16_t v[BLK] = {0};
    for (int i = 0; i < BLK; i++)
        if (m >> i & 1) v[i] = ((const uint16_t *)row)[w0 + i * sw];
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)v));
}

/* ---- im2row ---- */

/* Rows of the block (np pixels from (n, oh, ow0)) of col (N*OH*OW, C*KH*KW), element size es (4 or 2):
 * 16 columns at a time are loaded one per vector ((c, kh, kw) advancing with the column), transposed,
 * and stored as 16-column pieces of the np rows. */
SIMD_INLINE void im2row_block(void *col, const void *x, const ampci_conv_geom *g, int64_t n, int64_t oh, int64_t ow0,
                              int64_t np, int64_t es) {
    const int64_t KH = g->KH, KW = g->KW, H = g->H, W = g->W, sw = g->sw, ckk = g->C * KH * KW, h0 = oh * g->sh - g->ph;
    const unsigned char *img = (const unsigned char *)x + n * g->C * H * W * es;
    unsigned char *dst = (unsigned char *)col + ((n * g->OH + oh) * g->OW + ow0) * ckk * es;
    spans S;
    spans_fill(&S, g, ow0, np);
    int64_t c = 0, kh = 0, kw = 0, row = h0 * W; /* row: offset of input row h0 + kh of plane c */
    for (int64_t j0 = 0; j0 < ckk; j0 += BLK) {
        __m512 v[BLK];
        int64_t nj = ckk - j0 < BLK ? ckk - j0 : BLK, jj = 0;
        for (; jj < nj; jj++) {
            span s = span_at(&S, kw);
            __mmask16 m = h0 + kh >= 0 && h0 + kh < H ? s.m : 0;
            const void *r = img + row * es;
            v[jj] = _mm512_castsi512_ps(es == 4 ? ld32(r, s.w0, m, sw) : ld16(r, s.w0, m, sw));
            if (++kw == KW) {
                kw = 0, row += W;
                if (++kh == KH) kh = 0, c++, row = (c * H + h0) * W;
            }
        }
        for (; jj < BLK; jj++) v[jj] = _mm512_setzero_ps();
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

/* buf[j - j0] (16 lanes: the block's np pixels, 0 past them) = columns [j0, j1) of the rows of gcol from
 * row0 (ckk apart). */
static void gather_cols(float (*buf)[BLK], const float *row0, int64_t ckk, int64_t np, int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; j += BLK) {
        __m512 v[BLK];
        for (int64_t i = 0; i < BLK; i++)
            v[i] = i < np ? _mm512_maskz_loadu_ps(m16(j1 - j), row0 + i * ckk + j) : _mm512_setzero_ps();
        transpose16(v);
        for (int64_t k = 0; k < BLK && j + k < j1; k++) _mm512_store_ps(buf[j - j0 + k], v[k]);
    }
}

/* row[s] += v on s's lanes (distinct elements w0 + i sw). */
static inline void add_span(float *row, span s, int64_t sw, __m512 v) {
    float *p = addr(row, s.w0, 4);
    if (sw == 1) {
        _mm512_mask_storeu_ps(p, s.m, _mm512_add_ps(_mm512_maskz_loadu_ps(s.m, p), v));
        return;
    }
    __m512 old = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), s.m, lane_step(sw), p, 4);
    _mm512_mask_i32scatter_ps(p, s.m, lane_step(sw), _mm512_add_ps(old, v), 4);
}

/* Stride 1, KW <= 17: row += the block's columns kw = KW-1 .. 0 of one (c, kh) (cols[kw]: 16 pixels),
 * the touched segment (w0 of kw = 0 onward, np + KW - 1 elements) held in two registers meanwhile. Lane
 * i of column kw lands on element kw + i of the segment; lanes outside the row add +0, which leaves a
 * running sum (never -0: it starts at +0) unchanged, and are not stored anyway. */
static void add_row_s1(float *row, const spans *S, const float (*cols)[BLK], int64_t KW, int64_t W) {
    int64_t w0 = S->ow0 - S->g->pw, lo = w0 < 0 ? -w0 : 0, hi = W - w0 < S->np + KW - 1 ? W - w0 : S->np + KW - 1;
    uint32_t run = (hi >= 32 ? 0xffffffffu : (1u << hi) - 1) & ~((1u << lo) - 1);
    float *p = addr(row, w0, 4);
    __m512 a0 = _mm512_maskz_loadu_ps((__mmask16)run, p), a1 = _mm512_maskz_loadu_ps((__mmask16)(run >> 16), p + 16);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t kw = KW - 1; kw >= 0; kw--) { /* pixels ascending per element */
        __m512 v = _mm512_maskz_mov_ps(span_at(S, kw).m, _mm512_load_ps(cols[kw]));
        __m512i idx = _mm512_sub_epi32(lane, _mm512_set1_epi32((int)kw)); /* lane i - kw, mod 16 */
        __mmask16 up = (__mmask16)(0xffffu << kw);                        /* lanes >= kw: into a0 */
        a0 = _mm512_add_ps(a0, _mm512_maskz_permutexvar_ps(up, idx, v));
        if (kw) a1 = _mm512_add_ps(a1, _mm512_maskz_permutexvar_ps((__mmask16)~up, idx, v));
    }
    _mm512_mask_storeu_ps(p, (__mmask16)run, a0);
    _mm512_mask_storeu_ps(p + 16, (__mmask16)(run >> 16), a1);
}

/* Planes c0..c1-1 of image n (zeroed) += their columns of gcol. Per block the columns go in descending
 * order, a buffer at a time: within one (c, kh) kw descends, which is ow ascending for each element, and
 * an element takes at most one kh per output row; output rows and blocks ascend. */
static void col2im_image(float *gx, const float *gcol, const ampci_conv_geom *g, int64_t n, int64_t c0, int64_t c1) {
    _Alignas(64) float buf[MAX_COLS][BLK];
    const int64_t KH = g->KH, KW = g->KW, H = g->H, W = g->W, kk = KH * KW, ckk = g->C * kk;
    bool rows = g->sw == 1 && KW <= 17; /* whole (c, kh) rows in registers; else column by column */
    int64_t chunk = KW <= MAX_COLS ? MAX_COLS / KW * KW : MAX_COLS; /* whole (c, kh) rows where they fit */
    for (int64_t oh = 0; oh < g->OH; oh++)
        for (int64_t ow0 = 0; ow0 < g->OW; ow0 += BLK) {
            int64_t np = g->OW - ow0 < BLK ? g->OW - ow0 : BLK, h0 = oh * g->sh - g->ph;
            spans S;
            spans_fill(&S, g, ow0, np);
            for (int64_t j1 = c1 * kk, j0; j1 > c0 * kk; j1 = j0) {
                j0 = j1 - chunk > c0 * kk ? j1 - chunk : c0 * kk;
                gather_cols(buf, gcol + ((n * g->OH + oh) * g->OW + ow0) * ckk, ckk, np, j0, j1);
                int64_t c = (j1 - 1) / kk, kh = (j1 - 1) % kk / KW, kw = (j1 - 1) % KW; /* of column j, descending */
                for (int64_t j = j1 - 1; j >= j0;) {
                    int64_t h = h0 + kh;
                    float *row = gx + ((n * g->C + c) * H + h) * W;
                    if (rows) { /* kw = KW - 1: the whole (c, kh) row of columns at once */
                        if (h >= 0 && h < H) add_row_s1(row, &S, &buf[j - KW + 1 - j0], KW, W);
                        j -= KW, kw = 0;
                    } else {
                        span s = span_at(&S, kw);
                        if (h >= 0 && h < H && s.m) add_span(row, s, g->sw, _mm512_load_ps(buf[j - j0]));
                        j--;
                    }
                    if (--kw < 0) kw = KW - 1, kh = kh ? kh - 1 : (c--, KH - 1);
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

/* One block of output row oh of a plane: ref's rule per lane over the window in row-major order (padding
 * skipped, the first in-plane element taken, then strictly greater or NaN replaces). */
SIMD_INLINE void pool_block(float *y, int32_t *arg, const float *plane, const ampci_conv_geom *g, const spans *S,
                            int64_t oh) {
    const __m512i step = lane_step(g->sw);
    __m512 best = _mm512_set1_ps(-__builtin_inff());
    __m512i at = _mm512_set1_epi32(-1);
    __mmask16 none = m16(S->np); /* lanes that have taken no element yet */
    for (int64_t kh = 0, h = oh * g->sh - g->ph; kh < g->KH; kh++, h++) {
        if (h < 0 || h >= g->H) continue;
        for (int64_t kw = 0; kw < g->KW; kw++) {
            span s = span_at(S, kw);
            __m512 v = _mm512_castsi512_ps(ld32(plane + h * g->W, s.w0, s.m, g->sw));
            __mmask16 up = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            up = s.m & (up | none);
            none &= (__mmask16)~s.m;
            best = _mm512_mask_mov_ps(best, up, v);
            at = _mm512_mask_mov_epi32(at, up, _mm512_add_epi32(_mm512_set1_epi32((int)(h * g->W + s.w0)), step));
        }
    }
    _mm512_mask_storeu_ps(y, m16(S->np), best);
    _mm512_mask_storeu_epi32(arg, m16(S->np), at);
}

/* y, arg: planes [p0, p1) of (N*C, OH*OW); x: (N*C, H*W) */
void ampc_k_maxpool_f32__avx512(float *y, int32_t *arg, const float *x, const ampci_conv_geom *g, int64_t p0,
                                int64_t p1) {
    for (int64_t ow0 = 0; ow0 < g->OW; ow0 += BLK) {
        spans S;
        spans_fill(&S, g, ow0, g->OW - ow0 < BLK ? g->OW - ow0 : BLK);
        for (int64_t p = p0; p < p1; p++)
            for (int64_t oh = 0; oh < g->OH; oh++) {
                int64_t o = (p * g->OH + oh) * g->OW + ow0;
                pool_block(y + o, arg + o, x + p * g->H * g->W, g, &S, oh);
            }
    }
}

/* Windows that tile the plane (stride = kernel, no padding, KW dividing 16): each row of gx is written
 * once, 16 elements at a time; element w of row h takes 0 + gy of its window (h / KH, w / KW), ref's one
 * addition, where that window's argmax is h*W + w, else +0 (as are the rows and columns no window covers). */
static void pool_bw_tiles(float *plane, const float *gp, const int32_t *ap, const ampci_conv_geom *g) {
    const int shift = __builtin_ctzll((unsigned long long)g->KW); /* w / KW */
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i win = _mm512_srli_epi32(lane, shift);
    for (int64_t h = 0, oh = 0, kh = 0; h < g->H; h++) {
        float *row = plane + h * g->W;
        const float *gr = gp + oh * g->OW;
        const int32_t *ar = ap + oh * g->OW;
        for (int64_t w0 = 0; w0 < g->W; w0 += BLK) {
            __mmask16 mw = oh < g->OH ? m16(g->OW - (w0 >> shift)) : 0; /* the windows of these 16 elements */
            __m512 gv = _mm512_maskz_loadu_ps(mw, gr + (w0 >> shift));
            __m512i av = _mm512_mask_loadu_epi32(_mm512_set1_epi32(-1), mw, ar + (w0 >> shift));
            __m512i pos = _mm512_add_epi32(_mm512_set1_epi32((int)(h * g->W + w0)), lane);
            __mmask16 hit = _mm512_cmpeq_epi32_mask(_mm512_permutexvar_epi32(win, av), pos);
            __m512 v = _mm512_maskz_add_ps(hit, _mm512_setzero_ps(), _mm512_permutexvar_ps(win, gv));
            if (g->W - w0 >= BLK) _mm512_storeu_ps(row + w0, v);
            else _mm512_mask_storeu_ps(row + w0, m16(g->W - w0), v);
        }
        if (++kh == g->KH) kh = 0, oh++;
    }
}

/* gx: planes [p0, p1) of (N*C, H*W) written; gy, arg: (N*C, OH*OW). Tiling windows: pool_bw_tiles; else
 * ref's loop (windows that overlap sum in output order). */
void ampc_k_maxpool_bw_f32__avx512(float *gx, const float *gy, const int32_t *arg, const ampci_conv_geom *g, int64_t p0,
                                   int64_t p1) {
    int64_t ohw = g->OH * g->OW, hw = g->H * g->W;
    bool tiles = g->sh == g->KH && g->sw == g->KW && !g->ph && !g->pw && g->KW <= BLK && BLK % g->KW == 0;
    for (int64_t p = p0; p < p1; p++) {
        float *plane = gx + p * hw;
        if (tiles) {
            pool_bw_tiles(plane, gy + p * ohw, arg + p * ohw, g);
            continue;
        }
        memset(plane, 0, (size_t)hw * sizeof *plane);
        for (int64_t o = 0; o < ohw; o++) plane[arg[p * ohw + o]] += gy[p * ohw + o];
    }
}
