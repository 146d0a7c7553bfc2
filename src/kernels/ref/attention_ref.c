/* attention_ref.c: the reference scaled dot-product attention, forward and backward, behind the kernel
 * table's attention slots (a fused kernel can replace them). q, k, v are widened to F32 once (exactly);
 * scores are double dot products rounded to F32, the row softmax is F32 with the row max subtracted and
 * its sum in double, and every product with the probabilities sums in double, so the only rounding of
 * consequence is the op's final one. The forward parallelises over query rows; the backward over heads,
 * since dK and dV sum over every query row of their head (in row order). The split never changes a
 * result: each row (forward) or head (backward) is computed by one task in a fixed order. */
#include "kernels_ref.h"

#include <math.h>
#include <string.h>

#define TASKS_PER_THREAD 4

typedef struct attn_job {
    const ampci_attn *a;
    const float *q, *k, *v, *go; /* F32 copies (or the inputs themselves when F32) */
    float *o, *stats;            /* forward outputs */
    const float *stats_in;       /* backward input */
    float *gq, *gk, *gv;         /* backward outputs (NULL: not wanted) */
    unsigned char *scratch;      /* per chunk: chunk_bytes */
    size_t chunk_bytes;
} attn_job;

/* Chunks of about TASKS_PER_THREAD per thread: bounds the per-chunk scratch; the results do not depend on
 * the split, so deriving it from the thread count is safe. */
static int64_t grain_for(ampc_ctx *ctx, int64_t n) {
    int64_t tasks = (int64_t)ampc_ctx_threads(ctx) * TASKS_PER_THREAD;
    return n <= tasks ? 1 : (n + tasks - 1) / tasks;
}

/* Keys visible to query row i. Causal: j <= i (key 0 always, so no row is empty unless Tk = 0). */
static int64_t visible(const ampci_attn *a, int64_t i) { return a->causal && i + 1 < a->Tk ? i + 1 : a->Tk; }

/* s[j] = (q_i . k_j) * scale for the nv visible keys: dot in double, rounded once to F32. */
static void scores(float *s, const float *qi, const float *k, int64_t nv, int64_t D, double scale) {
    for (int64_t j = 0; j < nv; j++) {
        double d = 0;
        for (int64_t t = 0; t < D; t++) d += (double)qi[t] * k[j * D + t];
        s[j] = (float)(d * scale);
    }
}

/* The probabilities from the scores, the row max m and 1 / sum: shared by forward and backward so both
 * see the same bits. */
static float prob(float s, float m, float inv) { return expf(s - m) * inv; }

static void forward_rows(void *vp, int64_t r0, int64_t r1, int64_t chunk) {
    const attn_job *j = vp;
    const ampci_attn *a = j->a;
    unsigned char *mem = j->scratch + (size_t)chunk * j->chunk_bytes;
    double *acc = (double *)mem;
    float *s = (float *)(acc + a->Dv);
    for (int64_t r = r0; r < r1; r++) {
        int64_t h = r / a->Tq, i = r % a->Tq, nv = visible(a, i);
        const float *k = j->k + h * a->Tk * a->D, *v = j->v + h * a->Tk * a->Dv;
        scores(s, j->q + r * a->D, k, nv, a->D, a->scale);
        float m = -INFINITY;
        for (int64_t c = 0; c < nv; c++) m = s[c] > m ? s[c] : m;
        double sum = 0;
        for (int64_t c = 0; c < nv; c++) sum += expf(s[c] - m);
        float inv = nv ? (float)(1.0 / sum) : 0.0f;
        memset(acc, 0, (size_t)a->Dv * sizeof *acc);
        for (int64_t c = 0; c < nv; c++) {
            double p = prob(s[c], m, inv);
            for (int64_t t = 0; t < a->Dv; t++) acc[t] += p * v[c * a->Dv + t];
        }
        for (int64_t t = 0; t < a->Dv; t++) j->o[r * a->Dv + t] = (float)acc[t];
        if (j->stats) j->stats[2 * r] = m, j->stats[2 * r + 1] = inv;
    }
}

/* One query row of the backward: dP = dO V^T, dS = P (dP - rowsum(dP P)); dQ_i = scale dS K; dK and dV
 * accumulate scale dS^T Q and P^T dO (unscaled here; gk is scaled at the end). */
static void backward_row(const attn_job *j, int64_t h, int64_t i, float *p, double *dp, double *gq, double *gk,
                         double *gv) {
    const ampci_attn *a = j->a;
    int64_t D = a->D, Dv = a->Dv, r = h * a->Tq + i, nv = visible(a, i);
    const float *qi = j->q + r * D, *go = j->go + r * Dv;
    const float *k = j->k + h * a->Tk * D, *v = j->v + h * a->Tk * Dv;
    scores(p, qi, k, nv, D, a->scale);
    float m = j->stats_in[2 * r], inv = j->stats_in[2 * r + 1];
    double di = 0;
    for (int64_t c = 0; c < nv; c++) {
        p[c] = prob(p[c], m, inv);
        double d = 0;
        for (int64_t t = 0; t < Dv; t++) d += (double)go[t] * v[c * Dv + t];
        dp[c] = d;
        di += p[c] * d;
    }
    memset(gq, 0, (size_t)D * sizeof *gq);
    for (int64_t c = 0; c < nv; c++) {
        double ds = p[c] * (dp[c] - di);
        for (int64_t t = 0; t < D; t++) gq[t] += ds * k[c * D + t];
        if (gk)
            for (int64_t t = 0; t < D; t++) gk[c * D + t] += ds * qi[t];
        if (gv)
            for (int64_t t = 0; t < Dv; t++) gv[c * Dv + t] += (double)p[c] * go[t];
    }
    if (j->gq)
        for (int64_t t = 0; t < D; t++) j->gq[r * D + t] = (float)(gq[t] * a->scale);
}

static void backward_heads(void *vp, int64_t h0, int64_t h1, int64_t chunk) {
    const attn_job *j = vp;
    const ampci_attn *a = j->a;
    int64_t nk = a->Tk * a->D, nv = a->Tk * a->Dv;
    double *gk = (double *)(j->scratch + (size_t)chunk * j->chunk_bytes), *gv = gk + nk, *gq = gv + nv;
    double *dp = gq + a->D;
    float *p = (float *)(dp + a->Tk);
    for (int64_t h = h0; h < h1; h++) {
        memset(gk, 0, (size_t)(nk + nv) * sizeof *gk);
        for (int64_t i = 0; i < a->Tq; i++) backward_row(j, h, i, p, dp, gq, j->gk ? gk : NULL, j->gv ? gv : NULL);
        if (j->gk)
            for (int64_t t = 0; t < nk; t++) j->gk[h * nk + t] = (float)(gk[t] * a->scale);
        if (j->gv)
            for (int64_t t = 0; t < nv; t++) j->gv[h * nv + t] = (float)gv[t];
    }
}

/* Widens n elements of dtype dt (F16 or BF16: exact) to F32 into *dst (a slice of buf) with the ref
 * conversions (a ref kernel runs ref code only, whatever the context's level), or points at src when it
 * is F32. */
static const float *widen(ampc_dtype dt, const void *src, int64_t n, float **buf) {
    if (dt == AMPC_DTYPE_F32) return src;
    float *dst = *buf;
    (dt == AMPC_DTYPE_F16 ? ampc_k_cvt_f32f16__ref : ampc_k_cvt_f32bf16__ref)(dst, src, (size_t)n);
    *buf += n;
    return dst;
}

/* One allocation for the F32 copies of the `ninputs` first of (q, k, v, go) and the per-chunk scratch. */
static ampc_status run(ampc_ctx *ctx, attn_job *j, const void *go, int64_t n, int64_t grain, size_t chunk_bytes,
                       ampc_parallel_fn fn, const char *what) {
    const ampci_attn *a = j->a;
    if (n == 0) return AMPC_OK;
    int64_t nq = a->BH * a->Tq * a->D, nk = a->BH * a->Tk * a->D, nv = a->BH * a->Tk * a->Dv;
    int64_t ngo = go ? a->BH * a->Tq * a->Dv : 0;
    size_t copies = a->dt == AMPC_DTYPE_F32 ? 0 : (size_t)(nq + nk + nv + ngo) * sizeof(float);
    chunk_bytes = (chunk_bytes + 63) / 64 * 64;
    size_t bytes = copies + (size_t)ampc_parallel_chunks(n, grain) * chunk_bytes + 64;
    unsigned char *mem = ampci_alloc(ctx, bytes, what);
    if (!mem) return AMPC_STATUS_OOM;
    float *cur = (float *)mem;
    j->q = widen(a->dt, a->q, nq, &cur);
    j->k = widen(a->dt, a->k, nk, &cur);
    j->v = widen(a->dt, a->v, nv, &cur);
    j->go = go ? widen(a->dt, go, ngo, &cur) : NULL;
    j->scratch = mem + (copies + 63) / 64 * 64;
    j->chunk_bytes = chunk_bytes;
    ampc_parallel_for(ctx, n, grain, fn, j);
    ampci_free(ctx, mem, bytes);
    return AMPC_OK;
}

ampc_status ampc_k_attention__ref(ampc_ctx *ctx, const ampci_attn *a, float *o, float *stats) {
    attn_job j = {.a = a, .o = o, .stats = stats};
    int64_t rows = a->BH * a->Tq;
    size_t chunk = (size_t)a->Dv * sizeof(double) + (size_t)a->Tk * sizeof(float);
    return run(ctx, &j, NULL, rows, grain_for(ctx, rows), chunk, forward_rows, "attention (ref) scratch");
}

ampc_status ampc_k_attention_bw__ref(ampc_ctx *ctx, const ampci_attn *a, const float *stats, const void *go, float *gq,
                                     float *gk, float *gv) {
    attn_job j = {.a = a, .stats_in = stats, .gq = gq, .gk = gk, .gv = gv};
    size_t chunk = (size_t)(a->Tk * (a->D + a->Dv) + a->D + a->Tk) * sizeof(double) + (size_t)a->Tk * sizeof(float);
    return run(ctx, &j, go, a->BH, grain_for(ctx, a->BH), chunk, backward_heads, "attention backward (ref) scratch");
}
