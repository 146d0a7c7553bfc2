/* eltwise_ref.c: reference elementwise kernels in F32 (libm's float functions), forward and backward.
 * The backward formulas use whichever of x and y = f(x) is the more accurate source: exp and tanh use
 * y, gelu recomputes from x. */
#include "../kernels.h"

#include <math.h>

#define SQRT_2_OVER_PI 0.7978845608028654f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f
#define GELU_C 0.044715f

static void neg_f(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = -x[i]; }
static void exp_f(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]); }
static void log_f(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]); }
static void sqrt_f(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); }
static void tanh_f(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]); }
static void sigmoid_f(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}
static void relu_f(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : (isnan(x[i]) ? x[i] : 0.0f);
}
static void gelu_erf_f(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT_2));
}
static void gelu_tanh_f(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float u = SQRT_2_OVER_PI * (x[i] + GELU_C * x[i] * x[i] * x[i]);
        y[i] = 0.5f * x[i] * (1.0f + tanhf(u));
    }
}

static void neg_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x, (void)y;
    for (int64_t i = 0; i < n; i++) gx[i] = -gy[i];
}
static void exp_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * y[i];
}
static void log_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] / x[i];
}
static void sqrt_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] / (2.0f * y[i]);
}
static void tanh_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * (1.0f - y[i] * y[i]);
}
static void sigmoid_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)x;
    for (int64_t i = 0; i < n; i++) gx[i] = gy[i] * y[i] * (1.0f - y[i]);
}
static void relu_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;
    for (int64_t i = 0; i < n; i++) gx[i] = x[i] > 0.0f ? gy[i] : 0.0f;
}
static void gelu_erf_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;   /* d/dx x Phi(x) = Phi(x) + x phi(x) */
    for (int64_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * INV_SQRT_2)), pdf = INV_SQRT_2PI * expf(-0.5f * x[i] * x[i]);
        gx[i] = gy[i] * (cdf + x[i] * pdf);
    }
}
static void gelu_tanh_b(float *gx, const float *gy, const float *x, const float *y, int64_t n) {
    (void)y;
    for (int64_t i = 0; i < n; i++) {
        float x2 = x[i] * x[i];
        float t = tanhf(SQRT_2_OVER_PI * (x[i] + GELU_C * x2 * x[i]));
        float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * x2);
        gx[i] = gy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
    }
}

static void add_f(float *z, const float *x, const float *y, int64_t n) { for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i]; }
static void sub_f(float *z, const float *x, const float *y, int64_t n) { for (int64_t i = 0; i < n; i++) z[i] = x[i] - y[i]; }
static void mul_f(float *z, const float *x, const float *y, int64_t n) { for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i]; }
static void div_f(float *z, const float *x, const float *y, int64_t n) { for (int64_t i = 0; i < n; i++) z[i] = x[i] / y[i]; }

void ampci_fill_ref_eltwise(struct ampc_kernels *k) {
    static const ampc_k_unary_fn fwd[AMPCI_UNARY_COUNT] = {
        neg_f, exp_f, log_f, sqrt_f, tanh_f, sigmoid_f, relu_f, gelu_erf_f, gelu_tanh_f};
    static const ampc_k_unary_bw_fn bwd[AMPCI_UNARY_COUNT] = {
        neg_b, exp_b, log_b, sqrt_b, tanh_b, sigmoid_b, relu_b, gelu_erf_b, gelu_tanh_b};
    static const ampc_k_binary_fn bin[AMPCI_BINARY_COUNT] = {add_f, sub_f, mul_f, div_f};
    for (int i = 0; i < AMPCI_UNARY_COUNT; i++) k->unary[i] = fwd[i], k->unary_bw[i] = bwd[i];
    for (int i = 0; i < AMPCI_BINARY_COUNT; i++) k->binary[i] = bin[i];
    k->impl[AMPCI_SLOT_UNARY] = "ampc_k_unary_f32__ref";
    k->impl[AMPCI_SLOT_BINARY] = "ampc_k_binary_f32__ref";
}
