/* rng.c: counter-based random numbers, Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11; the generator cuRAND and PyTorch's CUDA RNG use). A block of four 32-bit words is
 * a pure function of (key = seed, counter = (block counter, stream)), so any element of any fill can be
 * computed alone: fills split over threads give the same bits as one thread, and no ISA-specific code
 * is involved. Box-Muller runs in double with libm, once per pair of draws. */
#include "core.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void ampc_rng_block(uint64_t seed, uint64_t stream, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

ampc_rng ampc_rng_make(uint64_t seed, uint64_t stream) {
    return (ampc_rng){.seed = seed, .stream = stream, .counter = 0};
}

/* 24 random bits -> [0, 1) exactly representable in float. */
static inline float unit_f32(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }

void ampci_rng_uniform_range(const ampc_rng *rng, float *out, int64_t begin, int64_t end, float lo, float hi) {
    float span = hi - lo;
    for (int64_t k = begin; k < end;) {
        uint32_t w[4];
        ampc_rng_block(rng->seed, rng->stream, rng->counter + (uint64_t)k / 4, w);
        for (int64_t j = k % 4; j < 4 && k < end; j++, k++) {
            float v = lo + span * unit_f32(w[j]);
            out[k - begin] = v < hi ? v : lo; /* lo + span*u can round up to hi; keep [lo, hi) */
        }
    }
}

void ampci_rng_normal_range(const ampc_rng *rng, float *out, int64_t begin, int64_t end, float mean, float std) {
    /* Element k: block k/4, pair (k%4)/2 gives two normals (cos and sin branch). u1 is offset by half a
     * step so log(u1) is finite. */
    for (int64_t k = begin; k < end;) {
        uint32_t w[4];
        ampc_rng_block(rng->seed, rng->stream, rng->counter + (uint64_t)k / 4, w);
        for (int64_t j = k % 4; j < 4 && k < end; j++, k++) {
            int64_t p = j / 2;
            double u1 = ((double)w[2 * p] + 0.5) * 0x1p-32;
            double u2 = (double)w[2 * p + 1] * 0x1p-32;
            double r = sqrt(-2.0 * log(u1)), th = 2.0 * 3.14159265358979323846 * u2;
            double z = (j % 2) ? r * sin(th) : r * cos(th);
            out[k - begin] = (float)(mean + (double)std * z);
        }
    }
}

void ampc_rng_uniform(ampc_rng *rng, float *out, size_t n, float lo, float hi) {
    if (!rng || (!out && n)) return;
    ampci_rng_uniform_range(rng, out, 0, (int64_t)n, lo, hi);
    rng->counter += (n + 3) / 4;
}

void ampc_rng_normal(ampc_rng *rng, float *out, size_t n, float mean, float std) {
    if (!rng || (!out && n)) return;
    ampci_rng_normal_range(rng, out, 0, (int64_t)n, mean, std);
    rng->counter += (n + 3) / 4;
}
