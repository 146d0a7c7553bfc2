/* nn_ref.c: reference kernels of the nn family beyond norm_ref.c: cross-entropy rows (forward loss and
 * log-sum-exp per row, backward softmax minus one-hot) and the embedding gradient scatter-add. Each row
 * is computed on its own with sums in double, and the scatter walks ids in order, so results do not
 * depend on how a caller splits rows over threads. */
#include "kernels_ref.h"

#include <math.h>
#include <string.h>

void ampc_k_xent_f32__ref(float *loss, float *lse, const float *x, const int64_t *t, int64_t rows, int64_t cols,
                          int64_t ignore_index) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float mx = -INFINITY;
        for (int64_t c = 0; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
        if (mx == -INFINITY) mx = 0.0f; /* an all -inf row gives lse = -inf and a NaN loss, as in PyTorch */
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++) sum += expf(xr[c] - mx);
        /* lse and the loss in double: the loss lse - x_t can be much smaller than either term */
        double l = (double)mx + log(sum);
        lse[r] = (float)l;
        loss[r] = t[r] == ignore_index ? 0.0f : (float)(l - (double)xr[t[r]]);
    }
}

void ampc_k_xent_bw_f32__ref(float *gx, const float *x, const float *lse, const int64_t *t, int64_t rows, int64_t cols,
                             int64_t ignore_index, float scale) {
    for (int64_t r = 0; r < rows; r++) {
        float *o = gx + r * cols;
        if (t[r] == ignore_index) {
            memset(o, 0, (size_t)cols * sizeof *o);
            continue;
        }
        /* the target's p - 1 is formed as -(sum of the other p), free of cancellation when p_t is near 1 */
        const float *xr = x + r * cols;
        double others = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            float p = expf(xr[c] - lse[r]);
            if (c != t[r]) others += p;
            o[c] = p * scale;
        }
        o[t[r]] = (float)-others * scale;
    }
}

void ampc_k_embedding_bw_f32__ref(float *gw, const float *gy, const int64_t *ids, int64_t n, int64_t cols, int64_t ld) {
    for (int64_t i = 0; i < n; i++) {
        float *row = gw + ids[i] * ld;
        const float *g = gy + i * ld;
        for (int64_t c = 0; c < cols; c++) row[c] += g[c];
    }
}
