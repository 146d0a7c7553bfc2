/* optim_ref.c: reference optimizer and loss-scaler kernels: SGD and AdamW updates in F32 with
 * torch.optim's order of operations (so a run matches PyTorch's F32 arithmetic step for step), the
 * scaler's fused non-finite check + unscale for F32/F16/BF16 gradients, and sums of squares in double for
 * the global gradient norm. Finiteness is read from the bit patterns. */
#include "../../numerics/half.h"
#include "kernels_ref.h"

#include <math.h>
#include <string.h>

void ampc_k_sgd_f32__ref(float *w, const float *g, float *buf, int64_t n, const ampci_sgd_args *a) {
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (a->weight_decay != 0.0f) d = d + a->weight_decay * w[i];
        if (a->momentum != 0.0f) {
            buf[i] = a->first ? d : buf[i] * a->momentum + (1.0f - a->dampening) * d;
            d = a->nesterov ? d + a->momentum * buf[i] : buf[i];
        }
        w[i] = w[i] + (-a->lr) * d;
    }
}

/* torch.lerp(start, end, weight): the formula switches at weight 0.5 to stay exact at both ends */
static inline float lerp(float start, float end, float weight) {
    return weight < 0.5f ? start + weight * (end - start) : end - (end - start) * (1.0f - weight);
}

void ampc_k_adamw_f32__ref(float *w, const float *g, float *m, float *v, int64_t n, const ampci_adamw_args *a) {
    float one_minus_b1 = 1.0f - a->beta1, one_minus_b2 = 1.0f - a->beta2;
    for (int64_t i = 0; i < n; i++) {
        float wi = w[i] * a->decay;
        m[i] = lerp(m[i], g[i], one_minus_b1);
        v[i] = v[i] * a->beta2 + one_minus_b2 * (g[i] * g[i]);
        float denom = sqrtf(v[i]) / a->bias2_sqrt + a->eps;
        w[i] = wi + (-a->step_size) * (m[i] / denom);
    }
}

bool ampc_k_unscale_f32__ref(void *gp, int64_t n, float inv) {
    uint32_t *g = gp;
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        bad |= (g[i] & 0x7f800000u) == 0x7f800000u;
        if (inv != 1.0f) g[i] = ampci_f32_bits(ampci_f32_from_bits(g[i]) * inv);
    }
    return bad;
}

/* The two 16-bit formats differ only in their conversions. */
static inline float widen16(uint16_t h, bool f16) {
    return ampci_f32_from_bits(f16 ? ampci_f16_to_f32_bits(h) : ampci_bf16_to_f32_bits(h));
}

static inline uint16_t narrow16(float f, bool f16) {
    return f16 ? ampci_f16_from_f32_bits(ampci_f32_bits(f)) : ampci_bf16_from_f32_bits(ampci_f32_bits(f));
}

static bool unscale16(uint16_t *g, int64_t n, float inv, bool f16) {
    uint16_t exp_mask = f16 ? 0x7c00u : 0x7f80u;
    bool bad = false;
    for (int64_t i = 0; i < n; i++) {
        bad |= (g[i] & exp_mask) == exp_mask;
        if (inv != 1.0f) g[i] = narrow16(widen16(g[i], f16) * inv, f16);
    }
    return bad;
}

bool ampc_k_unscale_f16__ref(void *g, int64_t n, float inv) { return unscale16(g, n, inv, true); }
bool ampc_k_unscale_bf16__ref(void *g, int64_t n, float inv) { return unscale16(g, n, inv, false); }

/* The sum of squares in double, in a fixed order that the vector kernels share, so that the global
 * gradient norm, and the clipped update that depends on it, is the same at every kernel level: 32
 * accumulators over blocks of 32 (element j of a block into acc[j]), the rest in blocks of 16 into
 * acc[0..15]; then acc[j] + acc[j + 16], pairs 8 apart, 4 apart, 2 apart, and the last two (the
 * AVX-512 kernel's lo/hi halves and its halving tree). Squares of F32 values are exact in double. */
static double value(const void *g, int64_t i, ampc_dtype dt) {
    if (dt == AMPC_DTYPE_F32) return ((const float *)g)[i];
    return widen16(((const uint16_t *)g)[i], dt == AMPC_DTYPE_F16);
}

static double sumsq(const void *g, int64_t n, ampc_dtype dt) {
    double acc[32] = {0};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 32; j++) acc[j] += value(g, i + j, dt) * value(g, i + j, dt);
    for (; i < n; i += 16)
        for (int j = 0; j < 16 && i + j < n; j++) acc[j] += value(g, i + j, dt) * value(g, i + j, dt);
    double v[16];
    for (int j = 0; j < 16; j++) v[j] = acc[j] + acc[j + 16];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) v[j] = v[j] + v[j + w];
    return v[0];
}

double ampc_k_sumsq_f32__ref(const void *g, int64_t n) { return sumsq(g, n, AMPC_DTYPE_F32); }
double ampc_k_sumsq_f16__ref(const void *g, int64_t n) { return sumsq(g, n, AMPC_DTYPE_F16); }
double ampc_k_sumsq_bf16__ref(const void *g, int64_t n) { return sumsq(g, n, AMPC_DTYPE_BF16); }

static void colsum(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w, ampc_dtype dt) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < w; c++) acc[c] += value(g, r * ld + c, dt);
}
void ampc_k_colsum_f32__ref(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w) {
    colsum(acc, g, ld, rows, w, AMPC_DTYPE_F32);
}
void ampc_k_colsum_f16__ref(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w) {
    colsum(acc, g, ld, rows, w, AMPC_DTYPE_F16);
}
void ampc_k_colsum_bf16__ref(double *acc, const void *g, int64_t ld, int64_t rows, int64_t w) {
    colsum(acc, g, ld, rows, w, AMPC_DTYPE_BF16);
}

/* The doctor's range statistics: one pass, integer counts on |x|'s bit pattern (monotone in |x| for
 * finite values), so the vector kernels give the same numbers. */
void ampc_k_range_f32__ref(const float *x /* (n) */, int64_t n, const uint32_t *thr /* (nthr) ascending */, int nthr,
                           ampci_range_acc *acc) {
    uint32_t amax = acc->amax_bits, amin = acc->min_bits;
    for (int64_t i = 0; i < n; i++) {
        uint32_t a;
        memcpy(&a, &x[i], sizeof a);
        a &= 0x7fffffffu;
        acc->hist[a >> 23]++;
        for (int j = 0; j < nthr; j++) acc->ge[j] += a >= thr[j];
        if (a == 0) {
            acc->zeros++;
        } else if (a < 0x7f800000u) {
            if (a > amax) amax = a;
            if (a < amin) amin = a;
        }
    }
    acc->amax_bits = amax, acc->min_bits = amin;
}
