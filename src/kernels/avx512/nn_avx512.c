/* nn_avx512.c: AVX-512 cross-entropy rows (forward: log-sum-exp and loss per row; backward: softmax
 * minus one-hot) and the embedding gradient scatter-add, with kernels/ref/nn_ref.c's formulas. Row sums
 * run in double over 16 lanes in a fixed order (results never depend on threads; they may differ from
 * ref's sequential sums in a double's last bits), exp is vm_exp (<= 1 ulp from libm), and the final
 * log, the loss and the target's -(sum of the other p) are formed in double exactly as ref forms them.
 * The embedding scatter is plain float addition in ref's order: bit-identical. */
#include "kernels_avx512.h"
#include "vmath_avx512.h"

#include <math.h>
#include <string.h>

/* loss, lse: (rows); x: (rows, cols) logits; t: (rows) targets in [0, cols) or ignore_index */
void ampc_k_xent_f32__avx512(float *loss, float *lse, const float *x, const int64_t *t, int64_t rows, int64_t cols,
                             int64_t ignore_index) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float mx = vm_row_max(xr, cols);
        if (mx == -INFINITY) mx = 0.0f; /* an all -inf row gives lse = -inf and a NaN loss, as in ref */
        double l = (double)mx + log(vm_row_sumexp(NULL, xr, cols, mx));
        lse[r] = (float)l;
        loss[r] = t[r] == ignore_index ? 0.0f : (float)(l - (double)xr[t[r]]);
    }
}

/* gx: (rows, cols) = (exp(x - lse) - onehot(t)) * scale on kept rows, 0 on ignored ones */
void ampc_k_xent_bw_f32__avx512(float *gx, const float *x, const float *lse, const int64_t *t, int64_t rows,
                                int64_t cols, int64_t ignore_index, float scale) {
    __m512 sc = _mm512_set1_ps(scale);
    for (int64_t r = 0; r < rows; r++) {
        float *o = gx + r * cols;
        if (t[r] == ignore_index) {
            memset(o, 0, (size_t)cols * sizeof *o);
            continue;
        }
        /* the target's p - 1 is formed as -(sum of the other p), free of cancellation when p_t is near 1 */
        const float *xr = x + r * cols;
        __m512 l = _mm512_set1_ps(lse[r]);
        __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
        for (int64_t c = 0; c < cols; c += 16) {
            __mmask16 keep = vm_mask16(cols - c);
            if (t[r] >= c && t[r] < c + 16) keep &= (__mmask16) ~(1u << (t[r] - c));
            __m512 p = vm_exp(_mm512_sub_ps(vm_load(xr + c, cols - c), l));
            vm_acc_pd(&lo, &hi, _mm512_maskz_mov_ps(keep, p));
            vm_store(o + c, _mm512_mul_ps(p, sc), cols - c);
        }
        o[t[r]] = (float)-vm_sum_pd(lo, hi) * scale;
    }
}

/* gw (V rows), gy (n rows): rows `ld` floats apart, `cols` columns of each; gw[ids[i], :] += gy[i, :] in
 * the order i = 0..n-1 */
void ampc_k_embedding_bw_f32__avx512(float *gw, const float *gy, const int64_t *ids, int64_t n, int64_t cols,
                                     int64_t ld) {
    for (int64_t i = 0; i < n; i++) {
        float *row = gw + ids[i] * ld;
        const float *g = gy + i * ld;
        for (int64_t c = 0; c < cols; c += 16)
            vm_store(row + c, _mm512_add_ps(vm_load(row + c, cols - c), vm_load(g + c, cols - c)), cols - c);
    }
}
