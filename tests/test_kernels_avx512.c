/* test_kernels_avx512.c: the avx512 eltwise, norm, nn and optimizer kernels against the ref kernels
 * (the oracle), at the edge sizes of a 16-lane vector (n = 0, 1, 15, 16, 17, 31, 33, odd, large) with
 * guard elements past every output that must stay untouched, and with NaN/inf/-0/subnormal inputs.
 *
 * Bit-identical (memcmp, NaN payloads included, except where two NaN operands meet: see check_exact):
 * neg, sqrt, relu forward; every unary backward but the GELUs; add/sub/mul/div; embedding backward;
 * layer norm's weight/bias gradients; SGD, AdamW; unscale for F32/F16/BF16 (every FP16/BF16 pattern) and
 * its found-inf result.
 *
 * Transcendentals: exp, log, tanh, sigmoid (through the slots) and erf (vmath_avx512.h itself) over
 * every 37th float pattern plus the special values: ulp distance to ref's libm result within the bound
 * that vmath_avx512.h documents, NaN exactly where ref has NaN. GELU (both forms): ref's 1 + tanh(u) and
 * 1 + erf(z) cancel in the left tail, so the error there is absolute. It is measured in units of u |x|
 * forward (y = x Phi, Phi in [0, 1]; at least 2^-149) and u (1 + |x u'(x)|) backward, u' = du/dx of
 * ref's tanh argument (erf form: u, its x phi(x) term is bounded and well conditioned). Each side is
 * within 4 such units of the exact value (first order: its <= 2 ulp function plus the formula's
 * roundings), so the bound is 8.
 *
 * Reductions (the avx512 sums run in double over 16 lanes in a fixed order, ref's in sequence).
 * Notation: u = 2^-24; E = 1, vm_exp's bound in ulp (an ulp of v is at most 2u |v| for normal v, plus a
 * floor of 4 * 2^-149 for subnormal results); g(n) = n 2^-53 / (1 - n 2^-53), which bounds the error of
 * a double sum of n terms relative to the sum of their magnitudes, so two orders differ by at most
 * 2 g(n) that sum. Each bound follows the rounded operations of the formula (first order), both sides
 * rounding independently (hence 2u per float rounding):
 *   softmax     y = fl(e inv): |dy| <= (4E + 4) u y + 2 g(n) y   (exp 2Eu, sum 2Eu + 2g, 1/S to float
 *               2u, product 2u)
 *   log_softmax y = fl(d - lse), d = x - max: |dy| <= 2Eu + 2 g(n) + 2u (|d| + 2|y|)   (lse = log S moves
 *               by the relative error of S; then lse, |lse| <= |d| + |y|, and y are rounded)
 *   softmax bw  s = sum(g y) resp. sum(g), rounded to float: |ds| <= 2 g(n) sum|.| + 2u |s|;
 *               gx = y (g - s): |dgx| <= |y| (|ds| + 2u |g - s|) + 2u |gx|;
 *               log: gx = g - p, p = exp(y) s: |dgx| <= e^y (|ds| + 2Eu |s|) + 2u |p| + 2u (|g| + |p|)
 *   layer norm  mean: dm = 2 g(n) mean|x| + 2u |m|; rstd: drs = (g(n) + 2u) rs; a = x - m, v = a rs,
 *               y = v w + b: |dy| <= |w| (rs (dm + 2u |a|) + |a| drs + 2u |v|) + 2u |v w| + 2u (|y| + |b|)
 *   layer norm bw  dmg = 2 g(n) mean|g w| + 2u |mg|, dmgx likewise with g w xhat; with d = g w - mg - xh mgx:
 *               |dgx| <= rs (dmg + |xh| dmgx + 2u (|g w - mg| + |xh mgx| + |d|)) + 2u |gx|
 *   xent        |dlse| <= 2Eu + 2 g(n) + 2u |lse|, |dloss| <= 2Eu + 2 g(n) + 2u |loss|
 *   xent bw     |do| <= |scale| 2Eu p + 2u |o|; target: |scale| (2Eu + 2 g(n) + 2u) others + 2u |o_t|
 *   sumsq       bit-identical: ref sums in the vector kernel's order (the grad norm, and so a clipped
 *               update, must not depend on the kernel level)
 *
 * Set AMPC_KERNEL_BENCH=1 to print ref vs avx512 speeds (nothing is asserted on speed). */
#include "test_util.h"

#include "kernels/kernels.h"

#include <float.h>
#include <stdlib.h>
#include <time.h>

/* vm_erf is not a slot: it is tested through the header, compiled here for the kernels' ISA */
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "kernels/avx512/vmath_avx512.h"
static void erf_rows(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) vm_store(y + i, vm_erf(vm_load(x + i, n - i)), n - i);
}
#pragma GCC pop_options

#define U 0x1p-24
#define E_EXP 1.0
#define SUB_FLOOR (4 * 0x1p-149)
#define GUARD 16
#define SENTINEL 0x7fbadbadu   /* a NaN pattern no kernel produces */
#define SWEEP_STRIDE 37u

static const struct ampc_kernels *R, *A;
static struct ampc_kernels g_direct;   /* the avx512 kernels over ref when AMPC_ISA caps the level */
static const int64_t SIZES[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 47, 64, 100, 1000, 4099};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static double gam(int64_t n) { return (double)n * 0x1p-53 / (1.0 - (double)n * 0x1p-53); }

/* ---- buffers and comparisons ---- */

/* n floats plus GUARD sentinel floats after them. */
static float *fbuf(int64_t n) {
    float *p = malloc((size_t)(n + GUARD) * sizeof *p);
    uint32_t s = SENTINEL;
    for (int64_t i = 0; i < n + GUARD; i++) memcpy(&p[i], &s, 4);
    return p;
}

static void fill_interesting(float *x, int64_t n, uint64_t seed) {
    tu_fill_interesting((uint32_t *)x, (size_t)n, seed);
}

/* uniform in [lo, hi) */
static void fill_uniform(float *x, int64_t n, float lo, float hi, uint64_t seed) {
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((tu_rand(&s) >> 40) * 0x1p-24);
}

/* approximately normal (sum of 4 uniforms), mean mu, deviation sd */
static void fill_normal(float *x, int64_t n, float mu, float sd, uint64_t seed) {
    uint64_t s = seed | 1;
    for (int64_t i = 0; i < n; i++) {
        double t = 0;
        for (int k = 0; k < 4; k++) t += (double)(tu_rand(&s) >> 11) * 0x1p-53 - 0.5;
        x[i] = mu + sd * (float)(t * 1.7320508);
    }
}

static void check_bits(const void *got, const void *ref, size_t bytes, const char *what, int64_t n) {
    if (memcmp(got, ref, bytes) == 0) return;
    const uint32_t *g = got, *r = ref;
    size_t i = 0;
    while (i + 1 < bytes / 4 && g[i] == r[i]) i++;
    FAILF("%s (n %lld): word %zu is 0x%08x, ref 0x%08x", what, (long long)n, i, g[i], r[i]);
}

/* got equals ref bit for bit over n values plus the guard, except that where two NaN operands met, the
 * result may carry either one's payload: IEEE 754 and C leave that choice open (gcc swaps the operands
 * of commutative operations at will), so a NaN that differs from ref's must be the quieted pattern of
 * one of the NaN inputs in[k][i]; with in = NULL (a chain of operations), any NaN where ref has NaN. */
static void check_exact(const float *got, const float *ref, int64_t n, const float *const *in, int nin,
                        const char *what) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t g = tu_bits(got[i]), r = tu_bits(ref[i]);
        bool ok = g == r || (!in && isnan(got[i]) && isnan(ref[i]));
        for (int k = 0; k < nin && !ok && isnan(got[i]) && isnan(ref[i]); k++)
            ok = isnan(in[k][i]) && g == (tu_bits(in[k][i]) | 0x400000u);
        if (!ok) FAILF("%s (n %lld): [%lld] is 0x%08x, ref 0x%08x", what, (long long)n, (long long)i, g, r);
    }
    check_bits(got + n, ref + n, GUARD * sizeof *got, what, n);
}

/* got within tol[i] of ref; NaN exactly where ref has NaN, infinities equal; the guard intact.
 * Returns the largest error / tolerance. */
static double check_tol(const float *got, const float *ref, const double *tol, int64_t n, const char *what) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        float g = got[i], r = ref[i];
        bool ok = isnan(r) ? isnan(g) : isinf(r) ? g == r : fabs((double)g - r) <= tol[i];
        if (!ok)
            FAILF("%s (n %lld): [%lld] = %a, ref %a, tolerance %.3g", what, (long long)n, (long long)i, g, r, tol[i]);
        if (!isnan(r) && !isinf(r) && tol[i] > 0) worst = fmax(worst, fabs((double)g - r) / tol[i]);
    }
    check_bits(got + n, ref + n, GUARD * sizeof *got, what, n);
    return worst;
}

/* ulp distance of two floats (0 for two NaNs, huge for one) */
static double ulps(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : 1e30;
    uint32_t x = tu_bits(a), y = tu_bits(b);
    int64_t ox = x >> 31 ? -(int64_t)(x & 0x7fffffff) : (int64_t)x;
    int64_t oy = y >> 31 ? -(int64_t)(y & 0x7fffffff) : (int64_t)y;
    return (double)llabs(ox - oy);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the table ---- */

static void test_table(void **state) {
    (void)state;
    static const struct { ampci_slot slot; const char *name; } want[] = {
        {AMPCI_SLOT_UNARY, "ampc_k_unary_f32__avx512"},       {AMPCI_SLOT_BINARY, "ampc_k_binary_f32__avx512"},
        {AMPCI_SLOT_SOFTMAX, "ampc_k_softmax_f32__avx512"},   {AMPCI_SLOT_LAYERNORM, "ampc_k_layernorm_f32__avx512"},
        {AMPCI_SLOT_XENT, "ampc_k_xent_f32__avx512"},
        {AMPCI_SLOT_EMBEDDING_BW, "ampc_k_embedding_bw_f32__avx512"},
        {AMPCI_SLOT_SGD, "ampc_k_sgd_f32__avx512"},           {AMPCI_SLOT_ADAMW, "ampc_k_adamw_f32__avx512"},
        {AMPCI_SLOT_UNSCALE, "ampc_k_unscale__avx512"},       {AMPCI_SLOT_SUMSQ, "ampc_k_sumsq__avx512"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) assert_string_equal(A->impl[want[i].slot], want[i].name);
    for (int i = 0; i < AMPCI_UNARY_COUNT; i++)
        assert_true(A->unary[i] != R->unary[i] && A->unary_bw[i] != R->unary_bw[i]);
    assert_true(A->softmax != R->softmax && A->xent_bw != R->xent_bw && A->adamw != R->adamw);
    assert_true(A->unscale[AMPC_DTYPE_BF16] != R->unscale[AMPC_DTYPE_BF16]);
    assert_true(A->sumsq[AMPC_DTYPE_F16] != R->sumsq[AMPC_DTYPE_F16]);
}

/* ---- bit-identical elementwise ---- */

static void test_unary_bitexact(void **state) {
    (void)state;
    static const ampci_unary fwd_exact[] = {AMPCI_UNARY_NEG, AMPCI_UNARY_SQRT, AMPCI_UNARY_RELU};
    for (size_t s = 0; s < NSIZES; s++) {
        int64_t n = SIZES[s];
        float *x = fbuf(n), *y = fbuf(n), *gy = fbuf(n), *a = fbuf(n), *r = fbuf(n);
        fill_interesting(x, n, 1 + (uint64_t)n), fill_interesting(y, n, 2 + (uint64_t)n);
        fill_interesting(gy, n, 3 + (uint64_t)n);
        const float *in[3] = {gy, x, y};
        for (size_t k = 0; k < sizeof fwd_exact / sizeof fwd_exact[0]; k++) {
            A->unary[fwd_exact[k]](a, x, n), R->unary[fwd_exact[k]](r, x, n);
            check_exact(a, r, n, in + 1, 1, "unary forward");
        }
        for (int k = 0; k < AMPCI_UNARY_COUNT; k++) {
            if (k == AMPCI_UNARY_GELU_ERF || k == AMPCI_UNARY_GELU_TANH) continue;
            A->unary_bw[k](a, gy, x, y, n), R->unary_bw[k](r, gy, x, y, n);
            check_exact(a, r, n, in, 3, "unary backward");
        }
        for (int k = 0; k < AMPCI_BINARY_COUNT; k++) {
            A->binary[k](a, x, y, n), R->binary[k](r, x, y, n);
            check_exact(a, r, n, in + 1, 2, "binary");
        }
        memcpy(a, x, (size_t)n * 4);   /* in place, as the kernels allow */
        A->binary[AMPCI_BINARY_MUL](a, a, y, n), R->binary[AMPCI_BINARY_MUL](r, x, y, n);
        check_exact(a, r, n, in + 1, 2, "binary in place");
        free(x), free(y), free(gy), free(a), free(r);
    }
}

/* ---- transcendentals: sweeps in ulp ---- */

typedef void (*row_fn)(float *y, const float *x, int64_t n);

static const float SPECIALS[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, FLT_MIN, -FLT_MIN,
                                 0x1p-149f, -0x1p-149f, FLT_MAX, -FLT_MAX, 88.72283f, 88.72284f, -87.33655f,
                                 -103.97208f, -103.97209f, -104.0f, 0.75f, -0.75f, 9.0f, 1.0f - 0x1p-24f, 4.0f,
                                 -4.0f, 1e-30f, -1e-30f, 0x1.fffffep-127f, 20.0f, -20.0f, 1e10f, -1e10f};
#define NSPECIALS (sizeof SPECIALS / sizeof SPECIALS[0])

/* largest ulp distance of f to g over every `stride`-th float pattern and the specials */
static double sweep_ulps(row_fn f, row_fn g, unsigned stride, float *worst_x) {
    enum { CH = 4096 };
    static float x[CH], a[CH], r[CH];
    double worst = 0;
    for (uint64_t b = 0; b < (1ull << 32); b += (uint64_t)CH * stride) {
        int64_t n = 0;
        if (b == 0) for (; n < (int64_t)NSPECIALS; n++) x[n] = SPECIALS[n];
        for (; n < CH && b + (uint64_t)n * stride < (1ull << 32); n++)
            x[n] = tu_float((uint32_t)(b + (uint64_t)n * stride));
        f(a, x, n), g(r, x, n);
        for (int64_t i = 0; i < n; i++) {
            double d = ulps(a[i], r[i]);
            if (d > worst) worst = d, *worst_x = x[i];
        }
    }
    return worst;
}

static void ref_erf(float *y, const float *x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = erff(x[i]); }

static void test_transcendental_ulps(void **state) {
    (void)state;
    static const struct { ampci_unary k; const char *name; double bound; } fns[] = {
        {AMPCI_UNARY_EXP, "exp", 1}, {AMPCI_UNARY_LOG, "log", 1}, {AMPCI_UNARY_TANH, "tanh", 2},
        {AMPCI_UNARY_SIGMOID, "sigmoid", 4}};
    for (size_t i = 0; i <= sizeof fns / sizeof fns[0]; i++) {
        bool erf = i == sizeof fns / sizeof fns[0];
        float wx = 0;
        double w = erf ? sweep_ulps(erf_rows, ref_erf, SWEEP_STRIDE, &wx)
                       : sweep_ulps(A->unary[fns[i].k], R->unary[fns[i].k], SWEEP_STRIDE, &wx);
        const char *name = erf ? "erf" : fns[i].name;
        double bound = erf ? 1 : fns[i].bound;
        print_message("  %-8s max %.0f ulp from ref (bound %.0f) at x = %a\n", name, w, bound, wx);
        if (w > bound) FAILF("%s: %.0f ulp from ref at x = %a exceeds the bound %.0f", name, w, wx, bound);
    }
    /* the special values, exactly */
    static const float x[] = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, -1.0f, 100.0f, -200.0f, 0x1p-149f};
    float y[9];
    A->unary[AMPCI_UNARY_EXP](y, x, 9);
    assert_true(y[0] == 0 && y[1] == INFINITY && isnan(y[2]) && y[3] == 1);
    assert_true(y[6] == INFINITY && y[7] == 0 && !signbit(y[7]));
    A->unary[AMPCI_UNARY_LOG](y, x, 9);
    assert_true(isnan(y[0]) && y[1] == INFINITY && isnan(y[2]) && y[3] == -INFINITY && y[4] == -INFINITY);
    assert_true(isnan(y[5]));
    assert_true(y[8] == logf(0x1p-149f));
    A->unary[AMPCI_UNARY_TANH](y, x, 9);
    assert_true(y[0] == -1 && y[1] == 1 && isnan(y[2]) && tu_bits(y[3]) == 0 && tu_bits(y[4]) == 0x80000000u);
    assert_true(y[8] == 0x1p-149f);
    erf_rows(y, x, 9);
    assert_true(y[0] == -1 && y[1] == 1 && isnan(y[2]) && tu_bits(y[3]) == 0 && tu_bits(y[4]) == 0x80000000u);
    assert_true(y[7] == -1);
}

/* ---- GELU: absolute error in units of u times the conditioning scale ---- */

#define SQRT_2_OVER_PI 0.7978845608028654
/* the unit of the error: u |x| forward (at least a subnormal ulp), u (1 + |x u'(x)|) backward */
static double gelu_unit(ampci_unary k, bool bwd, float x) {
    double ax = fabs((double)x);
    if (!bwd) return fmax(U * ax, 0x1p-149);
    return U * (k == AMPCI_UNARY_GELU_ERF ? 1.0 : 1.0 + ax * SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * ax * ax));
}

static void test_gelu(void **state) {
    (void)state;
    enum { CH = 4096 };
    static float x[CH], gy[CH], a[CH], r[CH];
    for (int i = 0; i < CH; i++) gy[i] = 1.0f;
    for (int kk = 0; kk < 2; kk++)
        for (int bwd = 0; bwd < 2; bwd++) {
            ampci_unary k = kk ? AMPCI_UNARY_GELU_TANH : AMPCI_UNARY_GELU_ERF;
            double worst = 0, bound = 8;
            float wx = 0;
            for (uint64_t b = 0; b < (1ull << 32); b += (uint64_t)CH * SWEEP_STRIDE) {
                int64_t n = 0;
                if (b == 0) for (; n < (int64_t)NSPECIALS; n++) x[n] = SPECIALS[n];
                for (; n < CH && b + (uint64_t)n * SWEEP_STRIDE < (1ull << 32); n++)
                    x[n] = tu_float((uint32_t)(b + (uint64_t)n * SWEEP_STRIDE));
                if (bwd) A->unary_bw[k](a, gy, x, x, n), R->unary_bw[k](r, gy, x, x, n);
                else A->unary[k](a, x, n), R->unary[k](r, x, n);
                for (int64_t i = 0; i < n; i++) {
                    bool ok = isnan(r[i]) ? isnan(a[i]) : isinf(r[i]) ? a[i] == r[i] : !isnan(a[i]);
                    if (!ok) FAILF("gelu %d bwd %d: x = %a gives %a, ref %a", kk, bwd, x[i], a[i], r[i]);
                    if (isnan(r[i]) || isinf(r[i])) continue;
                    double e = fabs((double)a[i] - r[i]) / gelu_unit(k, bwd, x[i]);
                    if (e > worst) worst = e, wx = x[i];
                }
            }
            print_message("  gelu_%s %s max %.2f (bound %.0f) at x = %a\n", kk ? "tanh" : "erf ", bwd ? "bwd" : "fwd",
                          worst, bound, wx);
            if (worst > bound) FAILF("gelu %d bwd %d: error %.2f at x = %a", kk, bwd, worst, wx);
        }
}

/* ---- softmax ---- */

static const int64_t COLS[] = {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 63, 100, 256, 1000, 4097};
#define NCOLS (sizeof COLS / sizeof COLS[0])
enum { ROWS = 5 };

/* rows of normal values with the deviations 0.1, 3, 30, then row 3 with -inf entries, row 4 special:
 * by `kind` NaN, +inf, all -inf, huge, or plain */
static void fill_rows(float *x, int64_t cols, int kind, uint64_t seed) {
    static const float sd[3] = {0.1f, 3.0f, 30.0f};
    for (int r = 0; r < 3; r++) fill_normal(x + r * cols, cols, 0.5f, sd[r], seed + (uint64_t)r);
    fill_normal(x + 3 * cols, cols, 0.0f, 5.0f, seed + 3);
    for (int64_t c = 0; c < cols; c += 3) x[3 * cols + c] = -INFINITY;
    float *s = x + 4 * cols;
    fill_normal(s, cols, 1.0f, 2.0f, seed + 4);
    if (kind == 0) s[cols / 2] = NAN;
    if (kind == 1) s[cols - 1] = INFINITY;
    if (kind == 2) for (int64_t c = 0; c < cols; c++) s[c] = -INFINITY;
    if (kind == 3) for (int64_t c = 0; c < cols; c++) s[c] *= 1e37f;
}

static void softmax_tol(double *tol, const float *x, const float *gy, const float *y, int64_t cols, bool logsm,
                        bool bwd) {
    double g = gam(cols);
    for (int r = 0; r < ROWS; r++) {
        const float *xr = x + r * cols, *yr = y + r * cols, *gr = gy + r * cols;
        double mx = -INFINITY, s = 0, sabs = 0;
        for (int64_t c = 0; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
        if (bwd) for (int64_t c = 0; c < cols; c++) {
            double t = logsm ? gr[c] : (double)gr[c] * yr[c];
            s += t, sabs += fabs(t);
        }
        double ds = 2 * g * sabs + 2 * U * fabs(s);
        for (int64_t c = 0; c < cols; c++) {
            double yv = fabs((double)yr[c]), d = fabs((double)xr[c] - (mx == -INFINITY ? 0 : mx));
            double *t = &tol[r * cols + c];
            if (!bwd) *t = logsm ? 2 * E_EXP * U + 2 * g + 2 * U * (d + 2 * yv) : (4 * E_EXP + 4) * U * yv + 2 * g * yv;
            else if (!logsm) *t = yv * (ds + 2 * U * fabs(gr[c] - s)) + 2 * U * fabs(yv * (gr[c] - s));
            else *t = exp(yr[c]) * (ds + 2 * E_EXP * U * fabs(s)) + 4 * U * fabs(exp(yr[c]) * s) + 2 * U * fabs(gr[c]);
            *t += SUB_FLOOR;
        }
    }
}

static void test_softmax(void **state) {
    (void)state;
    double worst[4] = {0};
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int kind = 0; kind < 5; kind++)
            for (int lg = 0; lg < 2; lg++) {
                int64_t cols = COLS[ci], n = ROWS * cols;
                float *x = fbuf(n), *a = fbuf(n), *r = fbuf(n), *gy = fbuf(n), *y = fbuf(n);
                double *tol = malloc((size_t)n * sizeof *tol);
                fill_rows(x, cols, kind, 10 * (uint64_t)cols + (uint64_t)kind);
                fill_normal(gy, n, 0.0f, 1.0f, 77);
                A->softmax(a, x, ROWS, cols, lg), R->softmax(r, x, ROWS, cols, lg);
                softmax_tol(tol, x, gy, r, cols, lg, false);
                worst[lg] = fmax(worst[lg], check_tol(a, r, tol, n, lg ? "log_softmax" : "softmax"));
                memcpy(y, r, (size_t)n * 4);   /* the backward reads ref's output */
                A->softmax_bw(a, gy, y, ROWS, cols, lg), R->softmax_bw(r, gy, y, ROWS, cols, lg);
                softmax_tol(tol, x, gy, y, cols, lg, true);
                worst[2 + lg] = fmax(worst[2 + lg], check_tol(a, r, tol, n, lg ? "log_softmax bw" : "softmax bw"));
                free(x), free(a), free(r), free(gy), free(y), free(tol);
            }
    print_message("  error/tolerance: softmax %.3f, log_softmax %.3f, bw %.3f, log bw %.3f\n", worst[0], worst[1],
                  worst[2], worst[3]);
}

/* ---- layer norm ---- */

static void layernorm_tol(double *tol, double *tm, double *trs, const float *x, const float *w, const float *b,
                          const float *mean, const float *rstd, const float *y, int64_t cols) {
    double g = gam(cols);
    for (int r = 0; r < ROWS; r++) {
        const float *xr = x + r * cols;
        double sabs = 0, m = mean[r], rs = rstd[r];
        for (int64_t c = 0; c < cols; c++) sabs += fabs((double)xr[c]);
        double dm = 2 * g * sabs / (double)cols + 2 * U * fabs(m), drs = (g + 2 * U) * rs;
        tm[r] = dm, trs[r] = drs;
        for (int64_t c = 0; c < cols; c++) {
            double wv = w ? fabs((double)w[c]) : 1, a = fabs(xr[c] - m), v = a * rs;
            tol[r * cols + c] = wv * (rs * (dm + 2 * U * a) + a * drs + 2 * U * v) + 2 * U * v * wv +
                                2 * U * (fabs((double)y[r * cols + c]) + (b ? fabs((double)b[c]) : 0)) + SUB_FLOOR;
        }
    }
}

static void layernorm_bw_tol(double *tol, const float *gy, const float *x, const float *w, const float *mean,
                             const float *rstd, const float *gx, int64_t cols) {
    double g = gam(cols);
    for (int r = 0; r < ROWS; r++) {
        double sg = 0, sgx = 0, ag = 0, agx = 0, rs = rstd[r];
        for (int64_t c = 0; c < cols; c++) {
            float gc = w ? gy[r * cols + c] * w[c] : gy[r * cols + c], xh = (x[r * cols + c] - mean[r]) * rstd[r];
            sg += gc, sgx += (double)gc * xh, ag += fabs((double)gc), agx += fabs((double)gc * xh);
        }
        double mg = sg / (double)cols, mgx = sgx / (double)cols;
        double dmg = 2 * g * ag / (double)cols + 2 * U * fabs(mg);
        double dmgx = 2 * g * agx / (double)cols + 2 * U * fabs(mgx);
        for (int64_t c = 0; c < cols; c++) {
            double gc = w ? (double)(gy[r * cols + c] * w[c]) : gy[r * cols + c];
            double xh = (double)((x[r * cols + c] - mean[r]) * rstd[r]), d = gc - mg - xh * mgx;
            tol[r * cols + c] = rs * (dmg + fabs(xh) * dmgx + 2 * U * (fabs(gc - mg) + fabs(xh * mgx) + fabs(d))) +
                                2 * U * fabs((double)gx[r * cols + c]) + SUB_FLOOR;
        }
    }
}

static void test_layernorm(void **state) {
    (void)state;
    double worst[2] = {0};
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int var = 0; var < 4; var++) {   /* w and b present or not; means 0 and 1000 */
            int64_t cols = COLS[ci], n = ROWS * cols;
            float *x = fbuf(n), *a = fbuf(n), *r = fbuf(n), *gy = fbuf(n), *w = fbuf(cols), *b = fbuf(cols);
            float *ma = fbuf(ROWS), *mr = fbuf(ROWS), *sa = fbuf(ROWS), *sr = fbuf(ROWS);
            float *gwa = fbuf(cols), *gwr = fbuf(cols), *gba = fbuf(cols), *gbr = fbuf(cols);
            double *tol = malloc((size_t)n * sizeof *tol), tm[ROWS], trs[ROWS];
            fill_normal(x, n, var >= 2 ? 1000.0f : 0.0f, 2.0f, 5 + (uint64_t)cols);
            x[4 * cols + cols / 3] = var == 1 ? NAN : var == 3 ? INFINITY : x[4 * cols + cols / 3];
            for (int64_t c = 0; c < cols; c++) x[3 * cols + c] = 0.25f;   /* a constant row: variance 0 */
            fill_normal(w, cols, 1.0f, 0.5f, 6), fill_normal(b, cols, 0.0f, 1.0f, 7), fill_normal(gy, n, 0.0f, 1.0f, 8);
            const float *wp = var & 1 ? NULL : w, *bp = var & 1 ? NULL : b;
            A->layernorm(a, ma, sa, x, wp, bp, ROWS, cols, 1e-5f);
            R->layernorm(r, mr, sr, x, wp, bp, ROWS, cols, 1e-5f);
            layernorm_tol(tol, tm, trs, x, wp, bp, mr, sr, r, cols);
            worst[0] = fmax(worst[0], check_tol(a, r, tol, n, "layernorm"));
            check_tol(ma, mr, tm, ROWS, "layernorm mean"), check_tol(sa, sr, trs, ROWS, "layernorm rstd");
            A->layernorm_bw(a, gwa, gba, gy, x, mr, sr, wp, ROWS, cols);
            R->layernorm_bw(r, gwr, gbr, gy, x, mr, sr, wp, ROWS, cols);
            layernorm_bw_tol(tol, gy, x, wp, mr, sr, r, cols);
            worst[1] = fmax(worst[1], check_tol(a, r, tol, n, "layernorm bw"));
            check_bits(gwa, gwr, (size_t)(cols + GUARD) * 4, "layernorm gw", cols);
            check_bits(gba, gbr, (size_t)(cols + GUARD) * 4, "layernorm gb", cols);
            A->layernorm_bw(a, NULL, gba, gy, x, mr, sr, wp, ROWS, cols);   /* one of the two wanted */
            check_bits(gba, gbr, (size_t)(cols + GUARD) * 4, "layernorm gb alone", cols);
            free(x), free(a), free(r), free(gy), free(w), free(b), free(ma), free(mr), free(sa), free(sr);
            free(gwa), free(gwr), free(gba), free(gbr), free(tol);
        }
    print_message("  error/tolerance: layernorm %.3f, bw %.3f\n", worst[0], worst[1]);
}

/* ---- cross-entropy ---- */

static void test_xent(void **state) {
    (void)state;
    static const int64_t cols_list[] = {1, 2, 15, 16, 17, 31, 33, 256, 1000, 50257};
    double worst[3] = {0};
    for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++)
        for (int kind = 0; kind < 5; kind++) {
            int64_t cols = cols_list[ci], n = ROWS * cols, t[ROWS];
            float *x = fbuf(n), *a = fbuf(n), *r = fbuf(n);
            float *la = fbuf(ROWS), *lr = fbuf(ROWS), *sa = fbuf(ROWS), *sr = fbuf(ROWS);
            double *tol = malloc((size_t)n * sizeof *tol), tl[ROWS], ts[ROWS], g = gam(cols);
            fill_rows(x, cols, kind, 3 * (uint64_t)cols + (uint64_t)kind);
            uint64_t s = 99 + (uint64_t)cols;
            for (int i = 0; i < ROWS; i++) t[i] = (int64_t)(tu_rand(&s) % (uint64_t)cols);
            t[1] = -100;               /* ignored */
            if (cols > 3) t[3] = 0;    /* a target at -inf: loss inf */
            A->xent(la, sa, x, t, ROWS, cols, -100), R->xent(lr, sr, x, t, ROWS, cols, -100);
            for (int i = 0; i < ROWS; i++) {
                ts[i] = 2 * E_EXP * U + 2 * g + 2 * U * fabs((double)sr[i]);
                tl[i] = 2 * E_EXP * U + 2 * g + 2 * U * fabs((double)lr[i]);
            }
            worst[0] = fmax(worst[0], check_tol(sa, sr, ts, ROWS, "xent lse"));
            worst[1] = fmax(worst[1], check_tol(la, lr, tl, ROWS, "xent loss"));
            float scale = kind == 4 ? 0.37f : 1.0f / ROWS;
            A->xent_bw(a, x, sr, t, ROWS, cols, -100, scale), R->xent_bw(r, x, sr, t, ROWS, cols, -100, scale);
            for (int i = 0; i < ROWS; i++) {
                double others = 0;
                for (int64_t c = 0; c < cols; c++) {
                    double p = exp((double)x[i * cols + c] - sr[i]);
                    if (c != t[i]) others += p;
                    tol[i * cols + c] = fabs(scale) * 2 * E_EXP * U * p + 2 * U * fabs((double)r[i * cols + c]);
                    tol[i * cols + c] += SUB_FLOOR;
                }
                if (t[i] != -100) tol[i * cols + t[i]] = fabs(scale) * (2 * E_EXP * U + 2 * g + 2 * U) * others +
                                                         2 * U * fabs((double)r[i * cols + t[i]]) + SUB_FLOOR;
            }
            worst[2] = fmax(worst[2], check_tol(a, r, tol, n, "xent bw"));
            free(x), free(a), free(r), free(la), free(lr), free(sa), free(sr), free(tol);
        }
    print_message("  error/tolerance: lse %.3f, loss %.3f, bw %.3f\n", worst[0], worst[1], worst[2]);
}

/* ---- embedding backward: a block of columns of (V, ld) and (n, ld) rows, repeated ids ---- */

static void test_embedding_bw(void **state) {
    (void)state;
    enum { V = 7, N = 40, OFF = 5 };
    int64_t ids[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) ids[i] = (int64_t)(tu_rand(&s) % V);
    for (int64_t cols = 1; cols <= 100; cols += cols < 40 ? 1 : 29) {
        int64_t ld = cols + OFF + 3;
        float *gy = fbuf(N * ld), *a = fbuf(V * ld), *r = fbuf(V * ld);
        fill_interesting(gy, N * ld, 11 + (uint64_t)cols);
        fill_normal(a, V * ld, 0.0f, 1.0f, 12);
        memcpy(r, a, (size_t)(V * ld + GUARD) * 4);
        A->embedding_bw(a + OFF, gy + OFF, ids, N, cols, ld), R->embedding_bw(r + OFF, gy + OFF, ids, N, cols, ld);
        check_exact(a, r, V * ld, NULL, 0, "embedding_bw");
        free(gy), free(a), free(r);
    }
}

/* ---- optimizer: bit-identical over several steps ---- */

/* weights, moments and gradients: normal values with specials mixed into the gradients */
static void optim_inputs(float *w, float *g, float *m, float *v, int64_t n, uint64_t seed) {
    fill_normal(w, n, 0.0f, 1.0f, seed);
    fill_normal(m, n, 0.0f, 0.1f, seed + 1);
    fill_uniform(v, n, 0.0f, 0.01f, seed + 2);
    fill_interesting(g, n, seed + 3);
    for (int64_t i = 0; i < n; i += 2) g[i] = 0.01f * (float)(i % 7) - 0.03f;
}

static void test_sgd(void **state) {
    (void)state;
    for (size_t si = 0; si < NSIZES; si++)
        for (int combo = 0; combo < 16; combo++) {
            int64_t n = SIZES[si];
            float *wa = fbuf(n), *wr = fbuf(n), *g = fbuf(n), *ba = fbuf(n), *br = fbuf(n), *v = fbuf(n);
            optim_inputs(wa, g, ba, v, n, 20 + (uint64_t)n);
            memcpy(wr, wa, (size_t)(n + GUARD) * 4), memcpy(br, ba, (size_t)(n + GUARD) * 4);
            ampci_sgd_args sa = {0.1f, combo & 1 ? 0.01f : 0.0f, combo & 2 ? 0.9f : 0.0f, combo & 4 ? 0.1f : 0.0f,
                                 (combo & 8) != 0, true};
            for (int step = 0; step < 3; step++, sa.first = false) {
                A->sgd(wa, g, ba, n, &sa), R->sgd(wr, g, br, n, &sa);
                check_bits(wa, wr, (size_t)(n + GUARD) * 4, "sgd w", n);
                check_bits(ba, br, (size_t)(n + GUARD) * 4, "sgd buf", n);
            }
            free(wa), free(wr), free(g), free(ba), free(br), free(v);
        }
}

static void test_adamw(void **state) {
    (void)state;
    static const float beta1s[] = {0.9f, 0.3f, 0.5f};   /* lerp weight 1 - beta1 below, above, at 0.5 */
    for (size_t si = 0; si < NSIZES; si++)
        for (size_t bi = 0; bi < sizeof beta1s / sizeof beta1s[0]; bi++) {
            int64_t n = SIZES[si];
            float *wa = fbuf(n), *wr = fbuf(n), *g = fbuf(n), *ma = fbuf(n), *mr = fbuf(n);
            float *va = fbuf(n), *vr = fbuf(n);
            optim_inputs(wa, g, ma, va, n, 30 + (uint64_t)n);
            memcpy(wr, wa, (size_t)(n + GUARD) * 4), memcpy(mr, ma, (size_t)(n + GUARD) * 4);
            memcpy(vr, va, (size_t)(n + GUARD) * 4);
            for (int t = 1; t <= 3; t++) {
                double lr = 1e-3, b1 = beta1s[bi], b2 = 0.999;
                ampci_adamw_args aa = {(float)(1.0 - lr * 0.1), (float)b1, (float)b2, 1e-8f,
                                       (float)(lr / (1.0 - pow(b1, t))), (float)sqrt(1.0 - pow(b2, t))};
                A->adamw(wa, g, ma, va, n, &aa), R->adamw(wr, g, mr, vr, n, &aa);
                check_bits(wa, wr, (size_t)(n + GUARD) * 4, "adamw w", n);
                check_bits(ma, mr, (size_t)(n + GUARD) * 4, "adamw m", n);
                check_bits(va, vr, (size_t)(n + GUARD) * 4, "adamw v", n);
            }
            free(wa), free(wr), free(g), free(ma), free(mr), free(va), free(vr);
        }
}

/* ---- unscale: every FP16/BF16 pattern, F32 specials; found-inf and the bits ---- */

static const float INVS[] = {1.0f, 0.5f, 0x1p-16f, 1.0f / 3.0f, 65536.0f, 3.0e-5f, 1e30f, 0.0f};
#define NINVS (sizeof INVS / sizeof INVS[0])

/* runs both kernels on copies of src (plus 64 bytes that must stay as they are); returns the found-inf flag */
static bool unscale_case(ampc_dtype dt, const void *src, int64_t n, float inv) {
    size_t es = dt == AMPC_DTYPE_F32 ? 4 : 2, bytes = (size_t)n * es + 64;
    unsigned char *a = malloc(bytes), *r = malloc(bytes);
    memcpy(a, src, bytes), memcpy(r, src, bytes);
    bool ba = A->unscale[dt](a, n, inv), br = R->unscale[dt](r, n, inv);
    if (ba != br)
        FAILF("unscale %s n %lld inv %a: found-inf %d, ref %d", ampc_dtype_name(dt), (long long)n, inv, ba, br);
    check_bits(a, r, bytes, "unscale", n);
    free(a), free(r);
    return ba;
}

static void test_unscale(void **state) {
    (void)state;
    enum { ALL16 = 65536 + 64 };
    uint16_t *h = malloc(ALL16 * 2);
    for (uint32_t i = 0; i < ALL16; i++) h[i] = (uint16_t)(i * 0x9e37u);   /* a permutation: all 65536 */
    float *f = fbuf(100000);
    fill_interesting(f, 100000, 41);
    for (size_t k = 0; k < NINVS; k++) {
        unscale_case(AMPC_DTYPE_F16, h, 65536, INVS[k]), unscale_case(AMPC_DTYPE_BF16, h, 65536, INVS[k]);
        unscale_case(AMPC_DTYPE_F32, f, 100000, INVS[k]);
    }
    /* all finite, then one inf or NaN in the last lane of each tail */
    static const uint32_t bad32[] = {0x7f800000u, 0xff800000u, 0x7fc00001u};
    static const uint16_t bad16[] = {0x7c00u, 0xfc01u, 0x7f80u, 0xff81u};   /* F16 inf, NaN; BF16 inf, NaN */
    for (size_t si = 0; si < NSIZES; si++) {
        int64_t n = SIZES[si];
        float *g = fbuf(n + 64);
        uint16_t *g16 = malloc((size_t)(n + 64) * 2);
        fill_normal(g, n + 64, 0.0f, 100.0f, 42);
        for (int64_t i = 0; i < n + 64; i++) g16[i] = (uint16_t)(tu_bits(g[i]) >> 16);   /* finite BF16 */
        for (int64_t i = 0; i < n + 64; i++)   /* and finite as FP16 too */
            if ((g16[i] & 0x7c00u) == 0x7c00u) g16[i] ^= 0x4000u;
        for (size_t k = 0; k < 3; k++) {
            assert_false(unscale_case(AMPC_DTYPE_F32, g, n, INVS[k]));
            assert_false(unscale_case(AMPC_DTYPE_F16, g16, n, INVS[k]));
            assert_false(unscale_case(AMPC_DTYPE_BF16, g16, n, INVS[k]));
            if (n == 0) continue;
            float keep32 = g[n - 1];
            memcpy(&g[n - 1], &bad32[k], 4);
            assert_true(unscale_case(AMPC_DTYPE_F32, g, n, INVS[k]));
            g[n - 1] = keep32;
            uint16_t keep = g16[n - 1];
            for (int j = 0; j < 4; j++) {
                g16[n - 1] = bad16[j];
                assert_true(unscale_case(j < 2 ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16, g16, n, INVS[k]));
            }
            g16[n - 1] = keep;
        }
        free(g), free(g16);
    }
    free(h), free(f);
}

/* ---- sums of squares ---- */

static void test_sumsq(void **state) {
    (void)state;
    static const int64_t ns[] = {0, 1, 15, 16, 17, 31, 32, 33, 63, 65, 1000, 100003};
    for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
        int64_t n = ns[si];
        float *g = fbuf(n);
        uint16_t *g16 = malloc((size_t)(n + 1) * 2);
        fill_normal(g, n, 0.0f, 3.0f, 50 + (uint64_t)n);
        for (int64_t i = 0; i < n; i++) g[i] *= (i % 5 == 0) ? 1e-3f : 1.0f, g16[i] = (uint16_t)(tu_bits(g[i]) >> 16);
        for (int dti = 0; dti < 3; dti++) {
            ampc_dtype dt = dti == 0 ? AMPC_DTYPE_F32 : dti == 1 ? AMPC_DTYPE_F16 : AMPC_DTYPE_BF16;
            const void *p = dti == 0 ? (const void *)g : g16;
            double a = A->sumsq[dt](p, n), r = R->sumsq[dt](p, n);
            if (memcmp(&a, &r, sizeof a) != 0)
                FAILF("sumsq %s n %lld: %.17g, ref %.17g", ampc_dtype_name(dt), (long long)n, a, r);
        }
        if (n > 0) {   /* non-finite values give what ref gives */
            g[n - 1] = INFINITY;
            assert_true(A->sumsq[AMPC_DTYPE_F32](g, n) == INFINITY);
            g[n / 2] = NAN;
            assert_true(isnan(A->sumsq[AMPC_DTYPE_F32](g, n)));
            g16[n - 1] = 0x7c00u;   /* F16 inf */
            assert_true(A->sumsq[AMPC_DTYPE_F16](g16, n) == INFINITY);
            g16[n - 1] = 0xff81u;   /* BF16 NaN */
            assert_true(isnan(A->sumsq[AMPC_DTYPE_BF16](g16, n)));
        }
        free(g), free(g16);
    }
}

/* ---- results do not depend on how a caller splits rows or elements ---- */

static void test_split_invariance(void **state) {
    (void)state;
    enum { C = 37, RW = 9, N = C * RW };
    float x[N], full[N], part[N], mean[RW], rstd[RW], m2[RW], s2[RW], loss[RW], lse[RW], l2[RW], e2[RW];
    int64_t t[RW];
    fill_normal(x, N, 0.0f, 4.0f, 60);
    for (int i = 0; i < RW; i++) t[i] = (i * 7) % C;
    A->softmax(full, x, RW, C, false);
    for (int r = 0; r < RW; r++) A->softmax(part + r * C, x + r * C, 1, C, false);
    check_bits(full, part, sizeof full, "softmax row split", N);
    A->layernorm(full, mean, rstd, x, NULL, NULL, RW, C, 1e-5f);
    A->layernorm(part, m2, s2, x, NULL, NULL, 4, C, 1e-5f);
    A->layernorm(part + 4 * C, m2 + 4, s2 + 4, x + 4 * C, NULL, NULL, RW - 4, C, 1e-5f);
    check_bits(full, part, sizeof full, "layernorm row split", N);
    A->xent(loss, lse, x, t, RW, C, -1);
    for (int r = 0; r < RW; r++) A->xent(l2 + r, e2 + r, x + r * C, t + r, 1, C, -1);
    check_bits(loss, l2, sizeof loss, "xent row split", RW);
    A->unary[AMPCI_UNARY_GELU_TANH](full, x, N);
    for (int64_t b = 0, step = 1; b < N; b += step, step = step * 3 % 41 + 1)
        A->unary[AMPCI_UNARY_GELU_TANH](part + b, x + b, b + step <= N ? step : N - b);
    check_bits(full, part, sizeof full, "gelu element split", N);
}

/* ---- speed (AMPC_KERNEL_BENCH=1) ---- */

typedef struct bench_data {
    int64_t n, rows, cols;
    float *x, *y, *g, *w, *m, *v, *mean, *rstd, *lse, *loss;
    int64_t *t;
    uint16_t *h;
    int call;
} bench_data;

typedef void (*bench_fn)(const struct ampc_kernels *k, bench_data *d);

static void b_gelu(const struct ampc_kernels *k, bench_data *d) {
    k->unary[AMPCI_UNARY_GELU_TANH](d->y, d->x, d->n);
    k->unary_bw[AMPCI_UNARY_GELU_TANH](d->m, d->g, d->x, d->y, d->n);
}
static void b_exp(const struct ampc_kernels *k, bench_data *d) { k->unary[AMPCI_UNARY_EXP](d->y, d->x, d->n); }
static void b_softmax(const struct ampc_kernels *k, bench_data *d) {
    k->softmax(d->y, d->x, d->rows, d->cols, false);
    k->softmax_bw(d->m, d->g, d->y, d->rows, d->cols, false);
}
static void b_layernorm(const struct ampc_kernels *k, bench_data *d) {
    k->layernorm(d->y, d->mean, d->rstd, d->x, d->w, d->w, d->rows, d->cols, 1e-5f);
    k->layernorm_bw(d->m, d->v, d->v + d->cols, d->g, d->x, d->mean, d->rstd, d->w, d->rows, d->cols);
}
static void b_xent(const struct ampc_kernels *k, bench_data *d) {
    k->xent(d->loss, d->lse, d->x, d->t, d->rows, d->cols, -100);
    k->xent_bw(d->y, d->x, d->lse, d->t, d->rows, d->cols, -100, 1.0f / (float)d->rows);
}
static void b_adamw(const struct ampc_kernels *k, bench_data *d) {
    ampci_adamw_args a = {0.9999f, 0.9f, 0.999f, 1e-8f, 1e-3f, 0.03f};
    k->adamw(d->w, d->g, d->m, d->v, d->n, &a);
}
static void b_unscale(const struct ampc_kernels *k, bench_data *d) {
    k->unscale[AMPC_DTYPE_BF16](d->h, d->n, d->call++ & 1 ? 2.0f : 0.5f);
}

/* seconds per call: calls repeated for at least 0.3 s after a warm-up */
static double time_calls(const struct ampc_kernels *k, bench_fn f, bench_data *d) {
    f(k, d);
    int reps = 0;
    double t0 = now(), t;
    do f(k, d), reps++;
    while ((t = now() - t0) < 0.3 || reps < 3);
    return t / reps;
}

static void bench_one(const char *what, bench_fn f, bench_data *d, double elems, double bytes) {
    double tr = time_calls(R, f, d), ta = time_calls(A, f, d);
    print_message("  %-34s ref %8.3f ns/elem %6.2f GB/s | avx512 %8.3f ns/elem %6.2f GB/s | x%.1f\n", what,
                  1e9 * tr / elems, bytes / tr * 1e-9, 1e9 * ta / elems, bytes / ta * 1e-9, tr / ta);
}

static void test_bench(void **state) {
    (void)state;
    enum { BIG = 10800000 };
    bench_data d = {0};
    d.x = fbuf(BIG), d.y = fbuf(BIG), d.g = fbuf(BIG), d.w = fbuf(BIG), d.m = fbuf(BIG), d.v = fbuf(BIG);
    d.mean = fbuf(8192), d.rstd = fbuf(8192), d.lse = fbuf(8192), d.loss = fbuf(8192);
    d.t = malloc(8192 * sizeof *d.t), d.h = malloc((size_t)BIG * 2);
    fill_normal(d.x, BIG, 0.0f, 2.0f, 1), fill_normal(d.g, BIG, 0.0f, 1e-3f, 2), fill_normal(d.w, BIG, 0.0f, 1.0f, 3);
    fill_normal(d.m, BIG, 0.0f, 1e-3f, 4), fill_uniform(d.v, BIG, 0.0f, 1e-6f, 5);
    for (int64_t i = 0; i < BIG; i++) d.h[i] = (uint16_t)(tu_bits(d.g[i]) >> 16);
    for (int i = 0; i < 8192; i++) d.t[i] = (i * 37) % 256;
    d.n = 1 << 20;
    bench_one("gelu_tanh fwd+bwd (1M)", b_gelu, &d, (double)d.n, 20.0 * (double)d.n);
    bench_one("exp (1M)", b_exp, &d, (double)d.n, 8.0 * (double)d.n);
    d.rows = 4096, d.cols = 256;
    bench_one("softmax fwd+bwd rows of 256", b_softmax, &d, 1048576.0, 20.0 * 1048576.0);
    d.rows = 2048, d.cols = 384;
    bench_one("layernorm fwd+bwd rows of 384", b_layernorm, &d, 786432.0, 24.0 * 786432.0);
    d.rows = 4096, d.cols = 256;
    bench_one("xent fwd+bwd rows of 256", b_xent, &d, 1048576.0, 12.0 * 1048576.0);
    d.n = BIG;
    bench_one("adamw (10.8M F32)", b_adamw, &d, (double)BIG, 28.0 * BIG);
    bench_one("unscale+found-inf (10.8M BF16)", b_unscale, &d, (double)BIG, 4.0 * BIG);
    free(d.x), free(d.y), free(d.g), free(d.w), free(d.m), free(d.v), free(d.mean), free(d.rstd), free(d.lse);
    free(d.loss), free(d.t), free(d.h);
}

int main(void) {
    R = ampci_kernels(AMPC_ISA_REF);
    if (ampc_cpu()->best < AMPC_ISA_AVX512) {
        printf("test_kernels_avx512: this CPU has no AVX-512: skipped\n");
        return 0;
    }
    A = ampci_kernels(AMPC_ISA_AVX512);
    /* AMPC_ISA may cap the table below avx512: then test the family installed over ref directly */
    ampci_kernels_fill_ref(&g_direct);
    ampci_fill_avx512_unary(&g_direct), ampci_fill_avx512_norm(&g_direct);
    ampci_fill_avx512_nn(&g_direct), ampci_fill_avx512_optim(&g_direct);
    if (A->isa < AMPC_ISA_AVX512) {
        printf("  note: AMPC_ISA caps the level at %s: testing the avx512 kernels over a ref table\n",
               ampc_isa_name(A->isa));
        A = &g_direct;
    }
    struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),         cmocka_unit_test(test_unary_bitexact), cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_transcendental_ulps), cmocka_unit_test(test_softmax), cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_xent),          cmocka_unit_test(test_embedding_bw),   cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adamw),         cmocka_unit_test(test_unscale),        cmocka_unit_test(test_sumsq),
        cmocka_unit_test(test_split_invariance), cmocka_unit_test(test_bench)};
    size_t n = sizeof tests / sizeof tests[0] - (getenv("AMPC_KERNEL_BENCH") ? 0 : 1);
    return _cmocka_run_group_tests("kernels_avx512", tests, n, NULL, NULL);
}
