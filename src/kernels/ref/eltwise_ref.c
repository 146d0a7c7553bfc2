/* eltwise_ref.c: reference elementwise kernels in F32 (libm's float functions), forward and backward.
 * The backward formulas use whichever of x and y = f(x) is the more accurate source: exp and tanh use
 * y, gelu recomputes from x. */
#include "kernels_ref.h"

#include <math.h>

#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f
#define GELU_C 0.044715f

void ampc_k_neg_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = -x[i];
}
void ampc_k_exp_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}
void ampc_k_log_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]);
}
void ampc_k_sqrt_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]);
}
void ampc_k_tanh_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}
void ampc_k_sigmoid_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
void ampc_k_relu_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : (isnan(x[i]) ? x[i] : 0.0f);
}
void ampc_k_gelu_erf_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT_2));
}
void ampc_k_gelu_tanh_f32__ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float u = SQRT_2_OVER_PI * (x[i] + GELU_C * x[i] * x[i] * x[i]);
        y[i] = 0.5f * x[i] * (1.0f + tanhf(u));
    }
}

void ampc_k_neg_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x, (void)y;
    for (int64_t i = 0; i < n; i++) gx[i] = -gy[i];
}
void ampc_k_exp_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * y[i];
}
void ampc_k_log_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] / x[i];
}
void ampc_k_sqrt_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] / (2.0f * y[i]);
}
void ampc_k_tanh_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * (1.0f - y[i] * y[i]);
}
void ampc_k_sigmoid_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * y[i] * (1.0f - y[i]);
}
void ampc_k_relu_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;
    for (int64_t i = 0; i < n; i++) gx[i] = x[i] > 0.0f ? gy[i] : 0.0f;
}
void ampc_k_gelu_erf_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y; /* d/dx x Phi(x) = Phi(x) + x phi(x) */
    for (int64_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * INV_SQRT_2)), pdf = INV_SQRT_2PI * expf(-0.5f * x[i] * x[i]);
        gx[i] = gy[i] * (cdf + x[i] * pdf);
    }
}
void ampc_k_gelu_tanh_bw_f32__ref(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;
    for (int64_t i = 0; i < n; i++) {
        float x2 = x[i] * x[i];
        float t = tanhf(SQRT_2_OVER_PI * (x[i] + GELU_C * x2 * x[i]));
        float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * x2);
        gx[i] = gy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
    }
}

void ampc_k_add_f32__ref(float *z, const float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
}
void ampc_k_sub_f32__ref(float *z, const float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] - y[i];
}
void ampc_k_mul_f32__ref(float *z, const float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i];
}
void ampc_k_div_f32__ref(float *z, const float *x, const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] / y[i];
}
