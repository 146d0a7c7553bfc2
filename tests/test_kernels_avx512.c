/* test_kernels_avx512.c: every entry of the kernel registry in the eltwise, norm and nn slots but ref's
 * (today the avx512 folder's; a new entry of these slots is picked up) against its cell's ref entry (the
 * oracle), at the edge sizes of a 16-lane vector (n = 0, 1, 15, 16, 17, 31, 33, odd, large) with guard
 * elements past every output that must stay untouched, and with NaN/inf/-0/subnormal inputs. The
 * optimizer and scaler slots are test_kernels_optim.c's.
 *
 * Bit-identical (memcmp, NaN payloads included, except where two NaN operands meet: see check_exact):
 * neg, sqrt, relu forward; every unary backward but the GELUs; add/sub/mul/div; embedding backward;
 * layer norm's weight/bias gradients.
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
 *
 * Set AMPC_KERNEL_BENCH=1 to print the ref level's vs the chosen level's speeds (nothing is asserted on
 * speed). */
#include "kernel_check.h"

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
#define SWEEP_STRIDE 37u

static const struct ampc_kernels *R; /* the ref level's table: every cell holds its ref entry */
static const int64_t SIZES[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 47, 64, 100, 1000, 4099};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

static double gam(int64_t n) { return (double)n * 0x1p-53 / (1.0 - (double)n * 0x1p-53); }

/* ---- buffers and comparisons ---- */

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
    kc_check_bits(got + n, ref + n, KC_GUARD * sizeof *got, what, n);
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
    kc_check_bits(got + n, ref + n, KC_GUARD * sizeof *got, what, n);
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

/* At the avx512 level every cell of this file's slots runs an avx512 kernel. */
static void test_table(void **state) {
    (void)state;
    static const ampci_slot slots[] = {
        AMPCI_SLOT_UNARY,     AMPCI_SLOT_UNARY_BW,     AMPCI_SLOT_BINARY,  AMPCI_SLOT_SOFTMAX, AMPCI_SLOT_SOFTMAX_BW,
        AMPCI_SLOT_LAYERNORM, AMPCI_SLOT_LAYERNORM_BW, AMPCI_SLOT_XENT,    AMPCI_SLOT_XENT_BW, AMPCI_SLOT_EMBEDDING_BW,
        AMPCI_SLOT_SGD,       AMPCI_SLOT_ADAMW,        AMPCI_SLOT_UNSCALE, AMPCI_SLOT_SUMSQ,   AMPCI_SLOT_RANGE,
        AMPCI_SLOT_QUANT8,    AMPCI_SLOT_COLSUM}; /* with optim's */
    const struct ampc_kernels *A = ampci_kernels(AMPC_ISA_AVX512);
    if (A->isa < AMPC_ISA_AVX512) {
        print_message("  note: the avx512 level is lowered to %s here: its table is not checked\n",
                      ampc_isa_name(A->isa));
        return;
    }
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++)
        for (size_t s = 0; s < sizeof slots / sizeof slots[0]; s++) {
            if (all[i]->slot != slots[s] || all[i]->level != AMPC_ISA_REF) continue;
            const ampci_kernel *e = A->chosen[all[i]->slot][ampci_kernel_key(all[i])];
            assert_non_null(e);
            if (e->level != AMPC_ISA_AVX512) FAILF("the avx512 table runs %s", e->name);
        }
}

/* ---- bit-identical elementwise ---- */

/* neg, sqrt, relu forward; every backward but the GELUs; every binary op: ref's bits. */
static bool exact_forward(int op) { return op == AMPCI_UNARY_NEG || op == AMPCI_UNARY_SQRT || op == AMPCI_UNARY_RELU; }
static bool exact_backward(int op) { return op != AMPCI_UNARY_GELU_ERF && op != AMPCI_UNARY_GELU_TANH; }

static void test_unary_bitexact(void **state) {
    (void)state;
    kc_list fw = kc_fast(AMPCI_SLOT_UNARY, KC_ANY), bw = kc_fast(AMPCI_SLOT_UNARY_BW, KC_ANY);
    kc_list bin = kc_fast(AMPCI_SLOT_BINARY, KC_ANY);
    for (size_t s = 0; s < NSIZES; s++) {
        int64_t n = SIZES[s];
        float *x = kc_fbuf(n), *y = kc_fbuf(n), *gy = kc_fbuf(n), *a = kc_fbuf(n), *r = kc_fbuf(n);
        kc_fill_interesting(x, n, 1 + (uint64_t)n), kc_fill_interesting(y, n, 2 + (uint64_t)n);
        kc_fill_interesting(gy, n, 3 + (uint64_t)n);
        const float *in[3] = {gy, x, y};
        for (int i = 0; i < fw.n; i++) {
            if (!exact_forward(fw.e[i]->op)) continue;
            fw.e[i]->fn.UNARY(a, x, n), kc_ref(fw.e[i])->fn.UNARY(r, x, n);
            check_exact(a, r, n, in + 1, 1, fw.e[i]->name);
        }
        for (int i = 0; i < bw.n; i++) {
            if (!exact_backward(bw.e[i]->op)) continue;
            bw.e[i]->fn.UNARY_BW(a, gy, x, y, n), kc_ref(bw.e[i])->fn.UNARY_BW(r, gy, x, y, n);
            check_exact(a, r, n, in, 3, bw.e[i]->name);
        }
        for (int i = 0; i < bin.n; i++) {
            ampc_k_binary_fn f = bin.e[i]->fn.BINARY, fr = kc_ref(bin.e[i])->fn.BINARY;
            f(a, x, y, n), fr(r, x, y, n);
            check_exact(a, r, n, in + 1, 2, bin.e[i]->name);
            memcpy(a, x, (size_t)n * 4); /* in place, as the kernels allow */
            f(a, a, y, n), fr(r, x, y, n);
            check_exact(a, r, n, in + 1, 2, "binary in place");
        }
        free(x), free(y), free(gy), free(a), free(r);
    }
}

/* ---- transcendentals: sweeps in ulp ---- */

typedef void (*row_fn)(float *y, const float *x, int64_t n);

static const float SPECIALS[] = {0.0f,      -0.0f,      INFINITY,    -INFINITY,        NAN,
                                 -NAN,      1.0f,       -1.0f,       FLT_MIN,          -FLT_MIN,
                                 0x1p-149f, -0x1p-149f, FLT_MAX,     -FLT_MAX,         88.72283f,
                                 88.72284f, -87.33655f, -103.97208f, -103.97209f,      -104.0f,
                                 0.75f,     -0.75f,     9.0f,        1.0f - 0x1p-24f,  4.0f,
                                 -4.0f,     1e-30f,     -1e-30f,     0x1.fffffep-127f, 20.0f,
                                 -20.0f,    1e10f,      -1e10f};
#define NSPECIALS (sizeof SPECIALS / sizeof SPECIALS[0])

enum { CH = 4096 }; /* floats per chunk of a sweep */

/* The sweep's chunk from bit pattern b on: every SWEEP_STRIDE-th pattern into x (the specials first in
 * chunk 0); returns how many. */
static int64_t sweep_chunk(float *x, uint64_t b) {
    int64_t n = 0;
    if (b == 0)
        for (; n < (int64_t)NSPECIALS; n++) x[n] = SPECIALS[n];
    for (; n < CH && b + (uint64_t)n * SWEEP_STRIDE < (1ull << 32); n++)
        x[n] = tu_float((uint32_t)(b + (uint64_t)n * SWEEP_STRIDE));
    return n;
}

/* largest ulp distance of f to g over every SWEEP_STRIDE-th float pattern and the specials */
static double sweep_ulps(row_fn f, row_fn g, float *worst_x) {
    static float x[CH], a[CH], r[CH];
    double worst = 0;
    for (uint64_t b = 0; b < (1ull << 32); b += (uint64_t)CH * SWEEP_STRIDE) {
        int64_t n = sweep_chunk(x, b);
        f(a, x, n), g(r, x, n);
        for (int64_t i = 0; i < n; i++) {
            double d = ulps(a[i], r[i]);
            if (d > worst) worst = d, *worst_x = x[i];
        }
    }
    return worst;
}

static void ref_erf(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = erff(x[i]);
}

/* The special values, exactly, through an exp, log or tanh kernel (or erf_rows: op KC_ANY). */
static void transcendental_specials(int op, ampc_k_unary_fn f) {
    static const float x[] = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, -1.0f, 100.0f, -200.0f, 0x1p-149f};
    float y[9];
    f(y, x, 9);
    if (op == AMPCI_UNARY_EXP) {
        assert_true(y[0] == 0 && y[1] == INFINITY && isnan(y[2]) && y[3] == 1);
        assert_true(y[6] == INFINITY && y[7] == 0 && !signbit(y[7]));
    } else if (op == AMPCI_UNARY_LOG) {
        assert_true(isnan(y[0]) && y[1] == INFINITY && isnan(y[2]) && y[3] == -INFINITY && y[4] == -INFINITY);
        assert_true(isnan(y[5]));
        assert_true(y[8] == logf(0x1p-149f));
    } else if (op == AMPCI_UNARY_TANH) {
        assert_true(y[0] == -1 && y[1] == 1 && isnan(y[2]) && tu_bits(y[3]) == 0 && tu_bits(y[4]) == 0x80000000u);
        assert_true(y[8] == 0x1p-149f);
    } else if (op == KC_ANY) { /* erf */
        assert_true(y[0] == -1 && y[1] == 1 && isnan(y[2]) && tu_bits(y[3]) == 0 && tu_bits(y[4]) == 0x80000000u);
        assert_true(y[7] == -1);
    }
}

static void check_ulps(const char *name, row_fn f, row_fn ref, double bound) {
    float wx = 0;
    double w = sweep_ulps(f, ref, &wx);
    print_message("  %-28s max %.0f ulp from ref (bound %.0f) at x = %a\n", name, w, bound, wx);
    if (w > bound) FAILF("%s: %.0f ulp from ref at x = %a exceeds the bound %.0f", name, w, wx, bound);
}

static void test_transcendental_ulps(void **state) {
    (void)state;
    static const double bound[AMPCI_UNARY_COUNT] = {
        [AMPCI_UNARY_EXP] = 1, [AMPCI_UNARY_LOG] = 1, [AMPCI_UNARY_TANH] = 2, [AMPCI_UNARY_SIGMOID] = 4};
    kc_list fw = kc_fast(AMPCI_SLOT_UNARY, KC_ANY);
    for (int i = 0; i < fw.n; i++) {
        int op = fw.e[i]->op;
        if (bound[op] == 0) continue; /* exact ones (test_unary_bitexact) and the GELUs (test_gelu) */
        check_ulps(fw.e[i]->name, fw.e[i]->fn.UNARY, kc_ref(fw.e[i])->fn.UNARY, bound[op]);
        transcendental_specials(op, fw.e[i]->fn.UNARY);
    }
    if (ampc_cpu()->best >= AMPC_ISA_AVX512) { /* vm_erf is not a kernel: through vmath_avx512.h */
        check_ulps("vm_erf", erf_rows, ref_erf, 1);
        transcendental_specials(KC_ANY, erf_rows);
    }
}

/* ---- GELU: absolute error in units of u times the conditioning scale ---- */

#define SQRT_2_OVER_PI 0.7978845608028654
/* the unit of the error: u |x| forward (at least a subnormal ulp), u (1 + |x u'(x)|) backward */
static double gelu_unit(ampci_unary k, bool bwd, float x) {
    double ax = fabs((double)x);
    if (!bwd) return fmax(U * ax, 0x1p-149);
    return U * (k == AMPCI_UNARY_GELU_ERF ? 1.0 : 1.0 + ax * SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * ax * ax));
}

/* One GELU entry (forward or backward) over every SWEEP_STRIDE-th float: the error in gelu_unit()s. */
static void gelu_sweep(const ampci_kernel *e, bool bwd) {
    static float x[CH], gy[CH], a[CH], r[CH];
    for (int i = 0; i < CH; i++) gy[i] = 1.0f;
    const ampci_kernel *ref = kc_ref(e);
    double worst = 0, bound = 8;
    float wx = 0;
    for (uint64_t b = 0; b < (1ull << 32); b += (uint64_t)CH * SWEEP_STRIDE) {
        int64_t n = sweep_chunk(x, b);
        if (bwd) e->fn.UNARY_BW(a, gy, x, x, n), ref->fn.UNARY_BW(r, gy, x, x, n);
        else e->fn.UNARY(a, x, n), ref->fn.UNARY(r, x, n);
        for (int64_t i = 0; i < n; i++) {
            bool ok = isnan(r[i]) ? isnan(a[i]) : isinf(r[i]) ? a[i] == r[i] : !isnan(a[i]);
            if (!ok) FAILF("%s: x = %a gives %a, ref %a", e->name, x[i], a[i], r[i]);
            if (isnan(r[i]) || isinf(r[i])) continue;
            double err = fabs((double)a[i] - r[i]) / gelu_unit((ampci_unary)e->op, bwd, x[i]);
            if (err > worst) worst = err, wx = x[i];
        }
    }
    print_message("  %-32s max %.2f (bound %.0f) at x = %a\n", e->name, worst, bound, wx);
    if (worst > bound) FAILF("%s: error %.2f at x = %a", e->name, worst, wx);
}

static void test_gelu(void **state) {
    (void)state;
    for (int bwd = 0; bwd < 2; bwd++) {
        kc_list l = kc_fast(bwd ? AMPCI_SLOT_UNARY_BW : AMPCI_SLOT_UNARY, KC_ANY);
        for (int i = 0; i < l.n; i++)
            if (l.e[i]->op == AMPCI_UNARY_GELU_ERF || l.e[i]->op == AMPCI_UNARY_GELU_TANH) gelu_sweep(l.e[i], bwd);
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
    for (int r = 0; r < 3; r++) kc_fill_normal(x + r * cols, cols, 0.5f, sd[r], seed + (uint64_t)r);
    kc_fill_normal(x + 3 * cols, cols, 0.0f, 5.0f, seed + 3);
    for (int64_t c = 0; c < cols; c += 3) x[3 * cols + c] = -INFINITY;
    float *s = x + 4 * cols;
    kc_fill_normal(s, cols, 1.0f, 2.0f, seed + 4);
    if (kind == 0) s[cols / 2] = NAN;
    if (kind == 1) s[cols - 1] = INFINITY;
    if (kind == 2)
        for (int64_t c = 0; c < cols; c++) s[c] = -INFINITY;
    if (kind == 3)
        for (int64_t c = 0; c < cols; c++) s[c] *= 1e37f;
}

static void softmax_tol(double *tol, const float *x, const float *gy, const float *y, int64_t cols, bool logsm,
                        bool bwd) {
    double g = gam(cols);
    for (int r = 0; r < ROWS; r++) {
        const float *xr = x + r * cols, *yr = y + r * cols, *gr = gy + r * cols;
        double mx = -INFINITY, s = 0, sabs = 0;
        for (int64_t c = 0; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
        if (bwd)
            for (int64_t c = 0; c < cols; c++) {
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
    kc_list fw = kc_fast(AMPCI_SLOT_SOFTMAX, KC_ANY), bw = kc_fast(AMPCI_SLOT_SOFTMAX_BW, KC_ANY);
    double worst[4] = {0};
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int kind = 0; kind < 5; kind++)
            for (int lg = 0; lg < 2; lg++) {
                int64_t cols = COLS[ci], n = ROWS * cols;
                float *x = kc_fbuf(n), *a = kc_fbuf(n), *r = kc_fbuf(n), *gy = kc_fbuf(n), *y = kc_fbuf(n);
                double *tol = malloc((size_t)n * sizeof *tol);
                fill_rows(x, cols, kind, 10 * (uint64_t)cols + (uint64_t)kind);
                kc_fill_normal(gy, n, 0.0f, 1.0f, 77);
                R->softmax(r, x, ROWS, cols, lg);
                softmax_tol(tol, x, gy, r, cols, lg, false);
                for (int i = 0; i < fw.n; i++) {
                    fw.e[i]->fn.SOFTMAX(a, x, ROWS, cols, lg);
                    worst[lg] = fmax(worst[lg], check_tol(a, r, tol, n, kc_named(fw.e[i], lg ? "log" : "")));
                }
                memcpy(y, r, (size_t)n * 4); /* the backward reads ref's output */
                R->softmax_bw(r, gy, y, ROWS, cols, lg);
                softmax_tol(tol, x, gy, y, cols, lg, true);
                for (int i = 0; i < bw.n; i++) {
                    bw.e[i]->fn.SOFTMAX_BW(a, gy, y, ROWS, cols, lg);
                    worst[2 + lg] = fmax(worst[2 + lg], check_tol(a, r, tol, n, kc_named(bw.e[i], lg ? "log" : "")));
                }
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
    kc_list fw = kc_fast(AMPCI_SLOT_LAYERNORM, KC_ANY), bw = kc_fast(AMPCI_SLOT_LAYERNORM_BW, KC_ANY);
    double worst[2] = {0};
    for (size_t ci = 0; ci < NCOLS; ci++)
        for (int var = 0; var < 4; var++) { /* w and b present or not; means 0 and 1000 */
            int64_t cols = COLS[ci], n = ROWS * cols;
            float *x = kc_fbuf(n), *a = kc_fbuf(n), *r = kc_fbuf(n), *gy = kc_fbuf(n);
            float *w = kc_fbuf(cols), *b = kc_fbuf(cols);
            float *ma = kc_fbuf(ROWS), *mr = kc_fbuf(ROWS), *sa = kc_fbuf(ROWS), *sr = kc_fbuf(ROWS);
            float *gwa = kc_fbuf(cols), *gwr = kc_fbuf(cols), *gba = kc_fbuf(cols), *gbr = kc_fbuf(cols);
            double *tol = malloc((size_t)n * sizeof *tol), tm[ROWS], trs[ROWS];
            kc_fill_normal(x, n, var >= 2 ? 1000.0f : 0.0f, 2.0f, 5 + (uint64_t)cols);
            x[4 * cols + cols / 3] = var == 1 ? NAN : var == 3 ? INFINITY : x[4 * cols + cols / 3];
            for (int64_t c = 0; c < cols; c++) x[3 * cols + c] = 0.25f; /* a constant row: variance 0 */
            kc_fill_normal(w, cols, 1.0f, 0.5f, 6), kc_fill_normal(b, cols, 0.0f, 1.0f, 7);
            kc_fill_normal(gy, n, 0.0f, 1.0f, 8);
            const float *wp = var & 1 ? NULL : w, *bp = var & 1 ? NULL : b;
            R->layernorm(r, mr, sr, x, wp, bp, ROWS, cols, 1e-5f);
            layernorm_tol(tol, tm, trs, x, wp, bp, mr, sr, r, cols);
            for (int i = 0; i < fw.n; i++) {
                fw.e[i]->fn.LAYERNORM(a, ma, sa, x, wp, bp, ROWS, cols, 1e-5f);
                worst[0] = fmax(worst[0], check_tol(a, r, tol, n, fw.e[i]->name));
                check_tol(ma, mr, tm, ROWS, kc_named(fw.e[i], "mean"));
                check_tol(sa, sr, trs, ROWS, kc_named(fw.e[i], "rstd"));
            }
            R->layernorm_bw(r, gwr, gbr, gy, x, mr, sr, wp, ROWS, cols);
            layernorm_bw_tol(tol, gy, x, wp, mr, sr, r, cols);
            for (int i = 0; i < bw.n; i++) {
                ampc_k_layernorm_bw_fn f = bw.e[i]->fn.LAYERNORM_BW;
                f(a, gwa, gba, gy, x, mr, sr, wp, ROWS, cols);
                worst[1] = fmax(worst[1], check_tol(a, r, tol, n, bw.e[i]->name));
                kc_check_bits(gwa, gwr, (size_t)(cols + KC_GUARD) * 4, kc_named(bw.e[i], "gw"), cols);
                kc_check_bits(gba, gbr, (size_t)(cols + KC_GUARD) * 4, kc_named(bw.e[i], "gb"), cols);
                f(a, NULL, gba, gy, x, mr, sr, wp, ROWS, cols); /* one of the two wanted */
                kc_check_bits(gba, gbr, (size_t)(cols + KC_GUARD) * 4, kc_named(bw.e[i], "gb alone"), cols);
            }
            free(x), free(a), free(r), free(gy), free(w), free(b), free(ma), free(mr), free(sa), free(sr);
            free(gwa), free(gwr), free(gba), free(gbr), free(tol);
        }
    print_message("  error/tolerance: layernorm %.3f, bw %.3f\n", worst[0], worst[1]);
}

/* ---- cross-entropy ---- */

static void xent_bw_tol(double *tol, const float *x, const float *lse, const float *r, const int64_t *t, int64_t cols,
                        float scale) {
    double g = gam(cols);
    for (int i = 0; i < ROWS; i++) {
        double others = 0;
        for (int64_t c = 0; c < cols; c++) {
            double p = exp((double)x[i * cols + c] - lse[i]);
            if (c != t[i]) others += p;
            tol[i * cols + c] = fabs(scale) * 2 * E_EXP * U * p + 2 * U * fabs((double)r[i * cols + c]);
            tol[i * cols + c] += SUB_FLOOR;
        }
        if (t[i] != -100)
            tol[i * cols + t[i]] = fabs(scale) * (2 * E_EXP * U + 2 * g + 2 * U) * others +
                                   2 * U * fabs((double)r[i * cols + t[i]]) + SUB_FLOOR;
    }
}

static void test_xent(void **state) {
    (void)state;
    static const int64_t cols_list[] = {1, 2, 15, 16, 17, 31, 33, 256, 1000, 50257};
    kc_list fw = kc_fast(AMPCI_SLOT_XENT, KC_ANY), bw = kc_fast(AMPCI_SLOT_XENT_BW, KC_ANY);
    double worst[3] = {0};
    for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ci++)
        for (int kind = 0; kind < 5; kind++) {
            int64_t cols = cols_list[ci], n = ROWS * cols, t[ROWS];
            float *x = kc_fbuf(n), *a = kc_fbuf(n), *r = kc_fbuf(n);
            float *la = kc_fbuf(ROWS), *lr = kc_fbuf(ROWS), *sa = kc_fbuf(ROWS), *sr = kc_fbuf(ROWS);
            double *tol = malloc((size_t)n * sizeof *tol), tl[ROWS], ts[ROWS], g = gam(cols);
            fill_rows(x, cols, kind, 3 * (uint64_t)cols + (uint64_t)kind);
            uint64_t s = 99 + (uint64_t)cols;
            for (int i = 0; i < ROWS; i++) t[i] = (int64_t)(tu_rand(&s) % (uint64_t)cols);
            t[1] = -100;            /* ignored */
            if (cols > 3) t[3] = 0; /* a target at -inf: loss inf */
            R->xent(lr, sr, x, t, ROWS, cols, -100);
            for (int i = 0; i < ROWS; i++) {
                ts[i] = 2 * E_EXP * U + 2 * g + 2 * U * fabs((double)sr[i]);
                tl[i] = 2 * E_EXP * U + 2 * g + 2 * U * fabs((double)lr[i]);
            }
            for (int i = 0; i < fw.n; i++) {
                fw.e[i]->fn.XENT(la, sa, x, t, ROWS, cols, -100);
                worst[0] = fmax(worst[0], check_tol(sa, sr, ts, ROWS, kc_named(fw.e[i], "lse")));
                worst[1] = fmax(worst[1], check_tol(la, lr, tl, ROWS, kc_named(fw.e[i], "loss")));
            }
            float scale = kind == 4 ? 0.37f : 1.0f / ROWS;
            R->xent_bw(r, x, sr, t, ROWS, cols, -100, scale);
            xent_bw_tol(tol, x, sr, r, t, cols, scale);
            for (int i = 0; i < bw.n; i++) {
                bw.e[i]->fn.XENT_BW(a, x, sr, t, ROWS, cols, -100, scale);
                worst[2] = fmax(worst[2], check_tol(a, r, tol, n, bw.e[i]->name));
            }
            free(x), free(a), free(r), free(la), free(lr), free(sa), free(sr), free(tol);
        }
    print_message("  error/tolerance: lse %.3f, loss %.3f, bw %.3f\n", worst[0], worst[1], worst[2]);
}

/* ---- embedding backward: a block of columns of (V, ld) and (n, ld) rows, repeated ids ---- */

static void test_embedding_bw(void **state) {
    (void)state;
    enum { V = 7, N = 40, OFF = 5 };
    kc_list l = kc_fast(AMPCI_SLOT_EMBEDDING_BW, KC_ANY);
    int64_t ids[N];
    uint64_t s = 5;
    for (int i = 0; i < N; i++) ids[i] = (int64_t)(tu_rand(&s) % V);
    for (int e = 0; e < l.n; e++)
        for (int64_t cols = 1; cols <= 100; cols += cols < 40 ? 1 : 29) {
            int64_t ld = cols + OFF + 3;
            float *gy = kc_fbuf(N * ld), *a = kc_fbuf(V * ld), *r = kc_fbuf(V * ld);
            kc_fill_interesting(gy, N * ld, 11 + (uint64_t)cols);
            kc_fill_normal(a, V * ld, 0.0f, 1.0f, 12);
            memcpy(r, a, (size_t)(V * ld + KC_GUARD) * 4);
            l.e[e]->fn.EMBEDDING_BW(a + OFF, gy + OFF, ids, N, cols, ld);
            R->embedding_bw(r + OFF, gy + OFF, ids, N, cols, ld);
            check_exact(a, r, V * ld, NULL, 0, l.e[e]->name);
            free(gy), free(a), free(r);
        }
}

/* ---- results do not depend on how a caller splits rows or elements ---- */

static void test_split_invariance(void **state) {
    (void)state;
    enum { C = 37, RW = 9, N = C * RW };
    float x[N], full[N], part[N], mean[RW], rstd[RW], m2[RW], s2[RW], loss[RW], lse[RW], l2[RW], e2[RW];
    int64_t t[RW];
    kc_fill_normal(x, N, 0.0f, 4.0f, 60);
    for (int i = 0; i < RW; i++) t[i] = (i * 7) % C;
    kc_list sm = kc_fast(AMPCI_SLOT_SOFTMAX, KC_ANY), ln = kc_fast(AMPCI_SLOT_LAYERNORM, KC_ANY);
    kc_list xe = kc_fast(AMPCI_SLOT_XENT, KC_ANY);
    kc_list gelu = kc_fast(AMPCI_SLOT_UNARY, AMPCI_UNARY_GELU_TANH);
    for (int e = 0; e < sm.n; e++) {
        sm.e[e]->fn.SOFTMAX(full, x, RW, C, false);
        for (int r = 0; r < RW; r++) sm.e[e]->fn.SOFTMAX(part + r * C, x + r * C, 1, C, false);
        kc_check_bits(full, part, sizeof full, kc_named(sm.e[e], "row split"), N);
    }
    for (int e = 0; e < ln.n; e++) {
        ampc_k_layernorm_fn f = ln.e[e]->fn.LAYERNORM;
        f(full, mean, rstd, x, NULL, NULL, RW, C, 1e-5f);
        f(part, m2, s2, x, NULL, NULL, 4, C, 1e-5f);
        f(part + 4 * C, m2 + 4, s2 + 4, x + 4 * C, NULL, NULL, RW - 4, C, 1e-5f);
        kc_check_bits(full, part, sizeof full, kc_named(ln.e[e], "row split"), N);
    }
    for (int e = 0; e < xe.n; e++) {
        xe.e[e]->fn.XENT(loss, lse, x, t, RW, C, -1);
        for (int r = 0; r < RW; r++) xe.e[e]->fn.XENT(l2 + r, e2 + r, x + r * C, t + r, 1, C, -1);
        kc_check_bits(loss, l2, sizeof loss, kc_named(xe.e[e], "row split"), RW);
    }
    for (int e = 0; e < gelu.n; e++) {
        gelu.e[e]->fn.UNARY(full, x, N);
        for (int64_t b = 0, step = 1; b < N; b += step, step = step * 3 % 41 + 1)
            gelu.e[e]->fn.UNARY(part + b, x + b, b + step <= N ? step : N - b);
        kc_check_bits(full, part, sizeof full, kc_named(gelu.e[e], "element split"), N);
    }
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

/* the ref level's table against the chosen level's */
static void bench_one(const char *what, bench_fn f, bench_data *d, double elems, double bytes) {
    const struct ampc_kernels *A = ampci_kernels(AMPC_ISA_AUTO);
    double tr = time_calls(R, f, d), ta = time_calls(A, f, d);
    print_message("  %-34s ref %8.3f ns/elem %6.2f GB/s | %s %8.3f ns/elem %6.2f GB/s | x%.1f\n", what,
                  1e9 * tr / elems, bytes / tr * 1e-9, ampc_isa_name(A->isa), 1e9 * ta / elems, bytes / ta * 1e-9,
                  tr / ta);
}

static void test_bench(void **state) {
    (void)state;
    enum { BIG = 10800000 };
    bench_data d = {0};
    d.x = kc_fbuf(BIG), d.y = kc_fbuf(BIG), d.g = kc_fbuf(BIG);
    d.w = kc_fbuf(BIG), d.m = kc_fbuf(BIG), d.v = kc_fbuf(BIG);
    d.mean = kc_fbuf(8192), d.rstd = kc_fbuf(8192), d.lse = kc_fbuf(8192), d.loss = kc_fbuf(8192);
    d.t = malloc(8192 * sizeof *d.t), d.h = malloc((size_t)BIG * 2);
    kc_fill_normal(d.x, BIG, 0.0f, 2.0f, 1), kc_fill_normal(d.g, BIG, 0.0f, 1e-3f, 2);
    kc_fill_normal(d.w, BIG, 0.0f, 1.0f, 3);
    kc_fill_normal(d.m, BIG, 0.0f, 1e-3f, 4), kc_fill_uniform(d.v, BIG, 0.0f, 1e-6f, 5);
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
    for (int slot = AMPCI_SLOT_UNARY; slot <= AMPCI_SLOT_EMBEDDING_BW; slot++) kc_note_unusable((ampci_slot)slot);
    struct CMUnitTest tests[] = {cmocka_unit_test(test_table),
                                 cmocka_unit_test(test_unary_bitexact),
                                 cmocka_unit_test(test_gelu),
                                 cmocka_unit_test(test_transcendental_ulps),
                                 cmocka_unit_test(test_softmax),
                                 cmocka_unit_test(test_layernorm),
                                 cmocka_unit_test(test_xent),
                                 cmocka_unit_test(test_embedding_bw),
                                 cmocka_unit_test(test_split_invariance),
                                 cmocka_unit_test(test_bench)};
    size_t n = sizeof tests / sizeof tests[0] - (getenv("AMPC_KERNEL_BENCH") ? 0 : 1);
    return _cmocka_run_group_tests("kernels_avx512", tests, n, NULL, NULL);
}
