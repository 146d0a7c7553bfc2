/* norm_avx512.c: AVX-512 row softmax / log_softmax and layer norm, forward and backward, with
 * kernels/ref/norm_ref.c's formulas. Row sums run in double like ref's, over 16 lanes in a fixed order
 * (so a row's result never depends on threads or timing, but may differ from ref's sequential sums in
 * the last bits of a double); exp is vm_exp (<= 1 ulp from libm). Everything after the sums repeats
 * ref's float operations in ref's order: layer norm's output is bit-identical to ref whenever the mean
 * and rstd round to the same floats, and layer norm's weight and bias gradients (column sums walked over
 * the rows in ref's order, 16 columns at a time) are always bit-identical. */
#include "kernels_avx512.h"
#include "vmath_avx512.h"

#include <math.h>

/* ---- softmax ---- */

/* y, x: (rows, cols); y may be x */
void ampc_k_softmax_f32__avx512(float *y, const float *x, int64_t rows, int64_t cols, bool logsm) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = vm_row_max(xr, cols);
        if (mx == -INFINITY) mx = 0.0f; /* an all -inf row gives NaN below, as in ref */
        __m512 m = VM_SET1(mx);
        if (logsm) {
            __m512 lse = VM_SET1((float)log(vm_row_sumexp(NULL, xr, cols, mx)));
            for (int64_t c = 0; c < cols; c += 16)
                vm_store(yr + c, _mm512_sub_ps(_mm512_sub_ps(vm_load(xr + c, cols - c), m), lse), cols - c);
        } else { /* the exp values are kept in y, then scaled */
            __m512 inv = VM_SET1((float)(1.0 / vm_row_sumexp(yr, xr, cols, mx)));
            for (int64_t c = 0; c < cols; c += 16)
                vm_store(yr + c, _mm512_mul_ps(vm_load(yr + c, cols - c), inv), cols - c);
        }
    }
}

/* gx, gy, y: (rows, cols) */
void ampc_k_softmax_bw_f32__avx512(float *gx, const float *gy, const float *y, int64_t rows, int64_t cols, bool logsm) {
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gy + r * cols, *yr = y + r * cols;
        float *o = gx + r * cols;
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        if (logsm) { /* gx = gy - softmax * sum(gy) */
            for (int64_t c = 0; c < cols; c += 16) vm_acc_pd(&lo, &hi, vm_load(g + c, cols - c));
            __m512 s = VM_SET1((float)vm_sum_pd(lo, hi));
            for (int64_t c = 0; c < cols; c += 16) {
                __m512 p = vm_exp(vm_load(yr + c, cols - c));
                vm_store(o + c, _mm512_sub_ps(vm_load(g + c, cols - c), _mm512_mul_ps(p, s)), cols - c);
            }
        } else { /* gx = y * (gy - sum(gy * y)) */
            for (int64_t c = 0; c < cols; c += 16)
                vm_acc_prod_pd(&lo, &hi, vm_load(g + c, cols - c), vm_load(yr + c, cols - c));
            __m512 s = VM_SET1((float)vm_sum_pd(lo, hi));
            for (int64_t c = 0; c < cols; c += 16) {
                __m512 d = _mm512_sub_ps(vm_load(g + c, cols - c), s);
                vm_store(o + c, _mm512_mul_ps(vm_load(yr + c, cols - c), d), cols - c);
            }
        }
    }
}

/* ---- layer norm ---- */

/* Two-pass mean and variance of one row in double (masked lanes add exact zeros). */
static void row_moments(const float *x, int64_t cols, float eps, float *mean, float *rstd) {
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t c = 0; c < cols; c += 16) vm_acc_pd(&lo, &hi, vm_load(x + c, cols - c));
    double mu = vm_sum_pd(lo, hi) / (double)cols;
    __m512d m = _mm512_set1_pd(mu);
    lo = hi = _mm512_setzero_pd();
    for (int64_t c = 0; c < cols; c += 16) {
        __m512 v = vm_load(x + c, cols - c);
        __mmask16 k = vm_mask16(cols - c);
        __m512d dl = _mm512_maskz_sub_pd((__mmask8)k, vm_lo_pd(v), m);
        __m512d dh = _mm512_maskz_sub_pd((__mmask8)(k >> 8), vm_hi_pd(v), m);
        lo = _mm512_add_pd(lo, _mm512_mul_pd(dl, dl));
        hi = _mm512_add_pd(hi, _mm512_mul_pd(dh, dh));
    }
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(vm_sum_pd(lo, hi) / (double)cols + eps));
}

/* y, x: (rows, cols); mean, rstd: (rows); w, b: (cols) or NULL */
void ampc_k_layernorm_f32__avx512(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                                  int64_t rows, int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        row_moments(xr, cols, eps, &mean[r], &rstd[r]);
        __m512 m = VM_SET1(mean[r]), rs = VM_SET1(rstd[r]);
        for (int64_t c = 0; c < cols; c += 16) {
            int64_t k = cols - c;
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(vm_load(xr + c, k), m), rs);
            if (w) v = _mm512_mul_ps(v, vm_load(w + c, k));
            if (b) v = _mm512_add_ps(v, vm_load(b + c, k));
            vm_store(yr + c, v, k);
        }
    }
}

/* gw[c] = sum_r gy[r, c] xhat[r, c], gb[c] = sum_r gy[r, c] in double over r in order, for 16 columns
 * at a time: per column exactly ref's sequence of operations (products of floats are exact in double). */
static void layernorm_colsums(float *gw, float *gb, const float *gy, const float *x, const float *mean,
                              const float *rstd, int64_t rows, int64_t cols) {
    for (int64_t c = 0; c < cols; c += 16) {
        int64_t k = cols - c;
        __m512d wl = _mm512_setzero_pd(), wh = wl, bl = wl, bh = wl;
        for (int64_t r = 0; r < rows; r++) {
            __m512 g = vm_load(gy + r * cols + c, k);
            __m512 xh = _mm512_sub_ps(vm_load(x + r * cols + c, k), VM_SET1(mean[r]));
            xh = _mm512_mul_ps(xh, VM_SET1(rstd[r]));
            vm_acc_prod_pd(&wl, &wh, g, xh);
            vm_acc_pd(&bl, &bh, g);
        }
        if (gw) vm_store(gw + c, vm_cvt_pd_ps(wl, wh), k);
        if (gb) vm_store(gb + c, vm_cvt_pd_ps(bl, bh), k);
    }
}

/* Up to FUSE_COLS columns, the column sums of gw and gb are taken in the rows' first pass (their terms are
 * computed there anyway), in stack accumulators; past it by layernorm_colsums, a pass of their own. Both
 * add the same terms in the same order: the same bits. */
#define FUSE_COLS 1024

/* gx: (rows, cols); gw, gb: (cols) written when non-NULL; w: (cols) or NULL. Per row, with
 * xhat = (x - mean) rstd and g = gy w: gx = rstd ((g - mean(g)) - xhat mean(g xhat)). */
void ampc_k_layernorm_bw_f32__avx512(float *gx, float *gw, float *gb, const float *gy, const float *x,
                                     const float *mean, const float *rstd, const float *w, int64_t rows, int64_t cols) {
    __m512d acc[FUSE_COLS / 16][4]; /* per 16 columns: gw lanes 0-7, 8-15, gb lanes 0-7, 8-15 */
    bool fuse = (gw || gb) && cols <= FUSE_COLS;
    if ((gw || gb) && !fuse) layernorm_colsums(gw, gb, gy, x, mean, rstd, rows, cols);
    for (int64_t c = 0; fuse && c < cols; c += 16)
        acc[c / 16][0] = acc[c / 16][1] = acc[c / 16][2] = acc[c / 16][3] = _mm512_setzero_pd();
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gy + r * cols, *xr = x + r * cols;
        __m512 m = VM_SET1(mean[r]), rs = VM_SET1(rstd[r]);
        __m512d sl = _mm512_setzero_pd(), sh = sl, tl = sl, th = sl;
        for (int64_t c = 0; c < cols; c += 16) {
            int64_t k = cols - c;
            __m512 gv = vm_load(g + c, k), gc = w ? _mm512_mul_ps(gv, vm_load(w + c, k)) : gv;
            __m512 xh = _mm512_mul_ps(_mm512_sub_ps(vm_load(xr + c, k), m), rs);
            vm_acc_pd(&sl, &sh, gc);
            vm_acc_prod_pd(&tl, &th, gc, _mm512_maskz_mov_ps(vm_mask16(k), xh));
            if (fuse) {
                __m512d *a = acc[c / 16];
                vm_acc_prod_pd(&a[0], &a[1], gv, xh);
                vm_acc_pd(&a[2], &a[3], gv);
            }
        }
        __m512 mg = VM_SET1((float)(vm_sum_pd(sl, sh) / (double)cols));
        __m512 mgx = VM_SET1((float)(vm_sum_pd(tl, th) / (double)cols));
        for (int64_t c = 0; c < cols; c += 16) {
            int64_t k = cols - c;
            __m512 gc = w ? _mm512_mul_ps(vm_load(g + c, k), vm_load(w + c, k)) : vm_load(g + c, k);
            __m512 xh = _mm512_mul_ps(_mm512_sub_ps(vm_load(xr + c, k), m), rs);
            __m512 d = _mm512_sub_ps(_mm512_sub_ps(gc, mg), _mm512_mul_ps(xh, mgx));
            vm_store(gx + r * cols + c, _mm512_mul_ps(rs, d), k);
        }
    }
    for (int64_t c = 0; fuse && c < cols; c += 16) {
        __m512d *a = acc[c / 16];
        if (gw) vm_store(gw + c, vm_cvt_pd_ps(a[0], a[1]), cols - c);
        if (gb) vm_store(gb + c, vm_cvt_pd_ps(a[2], a[3]), cols - c);
    }
}
