/* norm_ref.c: reference row softmax / log_softmax and layer norm, forward and backward, in F32 with
 * sums accumulated in double (one pass for the max, one for the sum, one to write), so a row's result
 * does not depend on how rows are split over threads. */
#include "kernels_ref.h"

#include <math.h>

void ampc_k_softmax_f32__ref(float *y, const float *x, int64_t rows, int64_t cols, bool logsm) {
    /* y: (rows, cols), x: (rows, cols) */
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mx = -INFINITY;
        for (int64_t c = 0; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
        if (mx == -INFINITY) mx = 0.0f; /* an all -inf row gives NaN below, as in PyTorch */
        double sum = 0.0;
        for (int64_t c = 0; c < cols; c++) sum += expf(xr[c] - mx);
        if (logsm) {
            float lse = (float)log(sum);
            for (int64_t c = 0; c < cols; c++) yr[c] = xr[c] - mx - lse;
        } else {
            float inv = (float)(1.0 / sum);
            for (int64_t c = 0; c < cols; c++) yr[c] = expf(xr[c] - mx) * inv;
        }
    }
}

void ampc_k_softmax_bw_f32__ref(float *gx, const float *gy, const float *y, int64_t rows, int64_t cols, bool logsm) {
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gy + r * cols, *yr = y + r * cols;
        float *o = gx + r * cols;
        double s = 0.0;
        if (logsm) { /* gx = gy - softmax * sum(gy) */
            for (int64_t c = 0; c < cols; c++) s += g[c];
            for (int64_t c = 0; c < cols; c++) o[c] = g[c] - expf(yr[c]) * (float)s;
        } else { /* gx = y * (gy - sum(gy * y)) */
            for (int64_t c = 0; c < cols; c++) s += (double)g[c] * yr[c];
            for (int64_t c = 0; c < cols; c++) o[c] = yr[c] * (g[c] - (float)s);
        }
    }
}

void ampc_k_layernorm_f32__ref(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                               int64_t rows, int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double s = 0.0, s2 = 0.0;
        for (int64_t c = 0; c < cols; c++) s += xr[c];
        double mu = s / (double)cols;
        for (int64_t c = 0; c < cols; c++) s2 += (xr[c] - mu) * (xr[c] - mu); /* two-pass variance */
        float m = (float)mu, rs = (float)(1.0 / sqrt(s2 / (double)cols + eps));
        mean[r] = m, rstd[r] = rs;
        for (int64_t c = 0; c < cols; c++) {
            float v = (xr[c] - m) * rs;
            if (w) v *= w[c];
            if (b) v += b[c];
            y[r * cols + c] = v;
        }
    }
}

void ampc_k_layernorm_bw_f32__ref(float *gx, float *gw, float *gb, const float *gy, const float *x, const float *mean,
                                  const float *rstd, const float *w, int64_t rows, int64_t cols) {
    /* xhat = (x - mean) rstd; g = gy * w; gx = rstd (g - mean(g) - xhat mean(g xhat)) */
    for (int64_t c = 0; c < cols && (gw || gb); c++) {
        double sw = 0.0, sb = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            float xh = (x[r * cols + c] - mean[r]) * rstd[r];
            sw += (double)gy[r * cols + c] * xh;
            sb += gy[r * cols + c];
        }
        if (gw) gw[c] = (float)sw;
        if (gb) gb[c] = (float)sb;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gy + r * cols, *xr = x + r * cols;
        double sg = 0.0, sgx = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            float gc = w ? g[c] * w[c] : g[c], xh = (xr[c] - mean[r]) * rstd[r];
            sg += gc, sgx += (double)gc * xh;
        }
        float mg = (float)(sg / (double)cols), mgx = (float)(sgx / (double)cols);
        for (int64_t c = 0; c < cols; c++) {
            float gc = w ? g[c] * w[c] : g[c], xh = (xr[c] - mean[r]) * rstd[r];
            gx[r * cols + c] = rstd[r] * (gc - mg - xh * mgx);
        }
    }
}
