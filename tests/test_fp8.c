/* test_fp8.c: FP8 training (ampc_fp8_begin .. ampc_fp8_end; src/amp/fp8.c, src/ops/linear.c; the FP8 state
 * in checkpoints is test_fp8_checkpoint.c's) against an independent reference in double: the quantisation is redone with
 * ampc_format_from_f64 / ampc_format_to_f64 (E4M3 or E5M2, saturating: beyond the largest finite becomes it)
 * at the scales the recipe rule (ampc_fp8_scale_rule) gives from the amaxes this file records itself, and
 * every GEMM result must lie within the F32 accumulation bound (K 2^-24 sum|qa qb| / (sa sb)) plus half an
 * ulp of the dtype it was last rounded to. Covered:
 *  - GEMM exactness: ampc_linear (F32, and under BF16 autocast) equals sum(qx qw) / (sx sw) + b in the first
 *    step (scales 1) and the second (the delayed scales of the first step's amaxes); ampc_matmul with a
 *    parameter as b (TRANS_B, a GPT's lm_head: h (B, T, D) x wte^T), forward and backward; ampc_matmul with
 *    a non-parameter b is the plain op, bit for bit, and makes no FP8 state; under autocast the input is
 *    quantised from its BF16 cast but the weight from the F32 parameter itself (TE casts the weight, not a
 *    BF16 copy of it: no double rounding);
 *  - backward: dx = qg qw / (sg sw) and dW = qg^T qx / (sg sx) from the output gradient quantised to E5M2
 *    (HYBRID) or E4M3 (AMPC_FP8_E4M3), at scale 1 and at the delayed scale, F32 and BF16 autocast; db the
 *    column sums of the unquantised gradient; dW and dx against central differences of the quantised
 *    forward in double (an output gradient exact in E5M2, so its quantisation is the identity);
 *  - scaling: ampc_fp8_get_stats after each step gives the rule's scales of the recorded amaxes (delayed,
 *    margin 1, history 4, MAX and MOST_RECENT; the next step's GEMMs use them); current scaling uses each
 *    tensor's own amax and step end leaves it; saturation counts (E4M3 |p| > 464, E5M2 |p| >= 61440, inf),
 *    zeroed at step end, inf left out of the amax, and the next step at scales below 1; evaluation under
 *    ampc_no_grad_begin leaves the next step's scales; a parameter made where a freed one was starts
 *    fresh (scale 1); recipe errors (another recipe once state exists: STATE; end without begin: STATE;
 *    history -1, margin 100, format 7, ...: INVALID_ARG; history 0 is the default 1024). */
#include "fp8_test.h"

#include <stdlib.h>

#define E4M3_MAX 448.0
#define E5M2_MAX 57344.0
#define U24 0x1p-24
#define CUR (-1.0) /* a scale to take from the tensor's own amax (current scaling) */

typedef struct triple { /* per role: 0 the op's input, 1 the weight, 2 the output gradient */
    double x, w, g;
} triple;

static const triple ONES = {1, 1, 1};

static double bf16_round(float f) { return tu_decode(tu_bf16_ref(f), 7, 8, 127); }

/* t's values as doubles (malloc'd), rounded to BF16 when bf16 (what autocast's cast hands an op). */
static double *values(const ampc_tensor *t, bool bf16) {
    assert_non_null(t);
    int64_t n = ampc_tensor_numel(t);
    float *f = malloc((size_t)n * sizeof *f + 4);
    double *d = malloc((size_t)n * sizeof *d + 8);
    assert_true(f && d);
    ASSERT_OK(ampc_tensor_copy_to(t, f, AMPC_DTYPE_F32));
    for (int64_t i = 0; i < n; i++) d[i] = bf16 ? bf16_round(f[i]) : (double)f[i];
    free(f);
    return d;
}

/* TransformerEngine's saturating cast of x * s (rounded to F32 first) to E4M3 (e5: E5M2), in the format's
 * own units: the conversion's overflow (NaN for E4M3, inf for E5M2) becomes the largest finite. */
static double quant(double x, double s, bool e5) {
    ampc_format f = e5 ? AMPC_FORMAT_FP8_E5M2 : AMPC_FORMAT_FP8_E4M3;
    double max = e5 ? E5M2_MAX : E4M3_MAX, p = (double)(float)(x * s);
    if (isnan(p)) return p;
    double q = ampc_format_to_f64(f, ampc_format_from_f64(f, p));
    return fabs(q) <= max ? q : copysign(max, p);
}

static double *quant_all(const double *x, int64_t n, double s, bool e5) {
    double *q = malloc((size_t)n * sizeof *q + 8);
    assert_non_null(q);
    for (int64_t i = 0; i < n; i++) q[i] = quant(x[i], s, e5);
    return q;
}

/* The largest finite |x[i]| (what the history records). */
static double amax_of(const double *x, int64_t n) {
    double a = 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs(x[i]) > a) a = fabs(x[i]);
    return a;
}

/* The values whose cast at scale s saturates (kernels.h: E4M3 |p| > 464, E5M2 |p| >= 61440, inf). */
static int64_t saturating(const double *x, int64_t n, double s, bool e5) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = fabs((double)(float)(x[i] * s));
        c += e5 ? p >= 61440.0 : p > 464.0;
    }
    return c;
}

static double rule_max(bool e5) { return e5 ? E5M2_MAX : E4M3_MAX; }

/* The delayed scales after a step whose amaxes were a (prev: the scales before). */
static triple rules(triple a, int margin, bool e5, triple prev) {
    return (triple){ampc_fp8_scale_rule(a.x, E4M3_MAX, margin, prev.x),
                    ampc_fp8_scale_rule(a.w, E4M3_MAX, margin, prev.w),
                    ampc_fp8_scale_rule(a.g, rule_max(e5), margin, prev.g)};
}

/* ---- the reference GEMM and the comparison ---- */

typedef struct mv { /* element (i, k) of a matrix at p[i s0 + k s1] */
    const double *p;
    int64_t s0, s1;
} mv;

/* c (M, N) = a b / scale (+ add[j]) in double; bound: F32 accumulation of K products and the addend. */
static void gemm_ref(int64_t M, int64_t N, int64_t K, mv a, mv b, double scale, const double *add, double *c,
                     double *bound) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, m = 0, ad = add ? add[j] : 0;
            for (int64_t k = 0; k < K; k++) {
                double p = a.p[i * a.s0 + k * a.s1] * b.p[k * b.s0 + j * b.s1];
                s += p, m += fabs(p);
            }
            c[i * N + j] = s / scale + ad;
            bound[i * N + j] = (double)(K + 1) * U24 * (m / scale + fabs(ad));
        }
}

/* t's values against want within bound plus half an ulp of dt, the dtype they were last rounded to. */
static void expect_close(const char *what, const ampc_tensor *t, const double *want, const double *bound,
                         ampc_dtype dt) {
    if (!t) FAILF("%s: no tensor (%s)", what, ampc_last_error());
    double *got = values(t, false);
    int p = dt == AMPC_DTYPE_BF16 ? 8 : 24;
    for (int64_t i = 0; i < ampc_tensor_numel(t); i++) {
        double v = fabs(want[i]) + bound[i], tol = bound[i] + (v > 0 ? ldexp(1, ilogb(v) - p) : 0);
        if (!(fabs(got[i] - want[i]) <= tol))
            FAILF("%s[%lld] = %.9g, expected %.9g (|diff| %.3g > tolerance %.3g)", what, (long long)i, got[i], want[i],
                  fabs(got[i] - want[i]), tol);
    }
    free(got);
}

static void expect_stats(ampc_ctx *c, int tensors, triple s, uint64_t saturated) {
    ampc_fp8_stats st;
    ASSERT_OK(ampc_fp8_get_stats(c, &st));
    double lo = fmin(s.x, fmin(s.w, s.g)), hi = fmax(s.x, fmax(s.w, s.g));
    if (st.tensors != tensors || st.min_scale != lo || st.max_scale != hi || st.saturated != saturated)
        FAILF("stats: %d tensors, scales [%g, %g], %llu saturated; expected %d, [%g, %g], %llu", st.tensors,
              st.min_scale, st.max_scale, (unsigned long long)st.saturated, tensors, lo, hi,
              (unsigned long long)saturated);
}

/* ---- a linear layer in an FP8 region ---- */

typedef struct fx {
    ampc_ctx *c;
    ampc_tensor *w, *b; /* (out, in), (out) */
    int64_t rows, in, out;
    bool bf16; /* under BF16 autocast */
    bool e5;   /* output gradients in E5M2 (HYBRID) */
    int margin;
} fx;

static fx fx_init(ampc_ctx *c, const ampc_fp8_recipe *r, bool bf16, int64_t rows, int64_t in, int64_t out) {
    fx f = {.c = c, .rows = rows, .in = in, .out = out, .bf16 = bf16};
    f.e5 = !r || r->format == AMPC_FP8_HYBRID, f.margin = r ? r->margin : 0;
    ASSERT_OK(ampc_fp8_begin(f.c, r));
    f.w = param_new(f.c, "w", SHAPE(out, in), 0.3);
    f.b = param_new(f.c, "b", SHAPE(out), 0.5);
    return f;
}

static fx fx_new(const ampc_fp8_recipe *r, bool bf16, int64_t rows, int64_t in, int64_t out) {
    return fx_init(ctx_new(11), r, bf16, rows, in, out);
}

static void fx_free(fx *f) {
    ASSERT_OK(ampc_fp8_end(f->c));
    ampc_tensor_free(f->w), ampc_tensor_free(f->b);
    ctx_free(f->c);
}

static ampc_dtype fx_dt(const fx *f) { return f->bf16 ? AMPC_DTYPE_BF16 : AMPC_DTYPE_F32; }

/* db: the column sums of the unquantised gradient g (rows, out). */
static void expect_bias_grad(const fx *f, const double *g) {
    double want[64], bound[64];
    assert_true(f->out <= 64);
    for (int64_t j = 0; j < f->out; j++) {
        double s = 0, m = 0;
        for (int64_t i = 0; i < f->rows; i++) s += g[i * f->out + j], m += fabs(g[i * f->out + j]);
        want[j] = s, bound[j] = U24 * m; /* summed in double, rounded to F32 (then to BF16) */
    }
    expect_close("db", ampc_tensor_grad(f->b), want, bound, fx_dt(f));
}

/* The backward of y with gradient g, checked against the quantised operands qx, qw at scales s (s.g CUR:
 * g's own); the amax of g. */
static double fx_backward(fx *f, ampc_tensor *x, ampc_tensor *y, const ampc_tensor *g, const double *qx,
                          const double *qw, triple s) {
    ASSERT_OK(ampc_backward_with(f->c, y, g));
    int64_t n = f->rows * f->out, big = f->in * (f->rows > f->out ? f->rows : f->out);
    double *gv = values(g, f->bf16), ag = amax_of(gv, n); /* g arrives in y's dtype */
    double sg = s.g == CUR ? ampc_fp8_current_scale(ag, rule_max(f->e5), f->margin) : s.g;
    double *qg = quant_all(gv, n, sg, f->e5), *want = malloc((size_t)big * 8), *bound = malloc((size_t)big * 8);
    gemm_ref(f->rows, f->in, f->out, (mv){qg, f->out, 1}, (mv){qw, f->in, 1}, sg * s.w, NULL, want, bound);
    expect_close("dx", ampc_tensor_grad(x), want, bound, fx_dt(f));
    gemm_ref(f->out, f->in, f->rows, (mv){qg, 1, f->out}, (mv){qx, f->in, 1}, sg * s.x, NULL, want, bound);
    expect_close("dW", ampc_tensor_grad(f->w), want, bound, fx_dt(f));
    expect_bias_grad(f, gv);
    ampc_tensor_clear_grad(f->w), ampc_tensor_clear_grad(f->b);
    free(gv), free(qg), free(want), free(bound);
    return ag;
}

/* One step's y = linear(x, w, b) in the region (and, with g, its backward), checked against the reference
 * at scales s (CUR: the tensor's own amax). Under autocast x and b are the op's BF16 casts, the weight is
 * the F32 parameter itself (as TE casts it). The amaxes of the values quantised. Does not end the step. */
static triple fx_step(fx *f, ampc_tensor *x, const ampc_tensor *g, triple s) {
    if (g) ASSERT_OK(ampc_tensor_set_requires_grad(x, true));
    if (f->bf16)
        ASSERT_OK(ampc_autocast_begin(f->c, TU_AC(.dtype = AMPC_DTYPE_BF16, .enabled = true, .cache_enabled = true)));
    ampc_tensor *y = ampc_linear(f->c, x, f->w, f->b);
    if (f->bf16) ASSERT_OK(ampc_autocast_end(f->c));
    if (!y) FAILF("ampc_linear: %s", ampc_last_error());
    assert_int_equal(ampc_tensor_dtype(y), fx_dt(f));
    int64_t nx = f->rows * f->in, nw = f->out * f->in;
    double *xv = values(x, f->bf16), *wv = values(f->w, false), *bv = values(f->b, f->bf16);
    triple a = {amax_of(xv, nx), amax_of(wv, nw), 0};
    if (s.x == CUR) s.x = ampc_fp8_current_scale(a.x, E4M3_MAX, f->margin);
    if (s.w == CUR) s.w = ampc_fp8_current_scale(a.w, E4M3_MAX, f->margin);
    double *qx = quant_all(xv, nx, s.x, false), *qw = quant_all(wv, nw, s.w, false);
    double *want = malloc((size_t)(f->rows * f->out) * 8), *bound = malloc((size_t)(f->rows * f->out) * 8);
    gemm_ref(f->rows, f->out, f->in, (mv){qx, f->in, 1}, (mv){qw, 1, f->in}, s.x * s.w, bv, want, bound);
    expect_close("y", y, want, bound, fx_dt(f));
    if (g) a.g = fx_backward(f, x, y, g, qx, qw, s);
    free(xv), free(wv), free(bv), free(qx), free(qw), free(want), free(bound);
    return a;
}

static ampc_tensor *fx_x(const fx *f, double std) { return normal(f->c, SHAPE(f->rows, f->in), std); }
static ampc_tensor *fx_g(const fx *f, double std) { return normal(f->c, SHAPE(f->rows, f->out), std); }

/* ---- 1. the forward GEMMs ---- */

/* Step 1 at scales 1; step 2 at the delayed scales of step 1's amaxes (no backward: role 2 keeps 1). */
static void check_linear_steps(bool bf16) {
    fx f = fx_new(NULL, bf16, 6, 40, 9);
    triple a = fx_step(&f, fx_x(&f, 1.0), NULL, ONES);
    expect_stats(f.c, 3, ONES, 0);
    ampc_ctx_step_end(f.c);
    triple s = rules(a, 0, true, ONES);
    assert_true(s.x != 1 && s.w != 1 && s.g == 1);
    expect_stats(f.c, 3, s, 0);
    fx_step(&f, fx_x(&f, 3.0), NULL, s);
    fx_free(&f);
}

static void test_linear_exact_f32(void **state) {
    (void)state;
    check_linear_steps(false);
}

static void test_linear_exact_bf16(void **state) {
    (void)state;
    check_linear_steps(true);
}

/* logits (2, 3, 10) = h (2, 3, 24) x wte (10, 24)^T with wte a parameter: quantised, forward and backward. */
static void check_matmul_param(bool bf16) {
    ampc_ctx *c = ctx_new(12);
    ASSERT_OK(ampc_fp8_begin(c, NULL));
    ampc_tensor *wte = param_new(c, "wte", SHAPE(10, 24), 0.5), *h = normal(c, SHAPE(2, 3, 24), 1.0);
    ASSERT_OK(ampc_tensor_set_requires_grad(h, true));
    if (bf16) ASSERT_OK(ampc_autocast_begin(c, NULL));
    ampc_tensor *y = ampc_matmul(c, h, wte, AMPC_TRANS_B);
    if (bf16) ASSERT_OK(ampc_autocast_end(c));
    ampc_tensor *g = normal(c, SHAPE(2, 3, 10), 0.1);
    ampc_dtype dt = bf16 ? AMPC_DTYPE_BF16 : AMPC_DTYPE_F32;
    double *hv = values(h, bf16), *wv = values(wte, false), *qh = quant_all(hv, 144, 1, false),
           *qw = quant_all(wv, 240, 1, false), want[240], bound[240];
    gemm_ref(6, 10, 24, (mv){qh, 24, 1}, (mv){qw, 1, 24}, 1, NULL, want, bound);
    expect_close("logits", y, want, bound, dt);
    ASSERT_OK(ampc_backward_with(c, y, g));
    double *gv = values(g, bf16), *qg = quant_all(gv, 60, 1, true);
    gemm_ref(6, 24, 10, (mv){qg, 10, 1}, (mv){qw, 24, 1}, 1, NULL, want, bound);
    expect_close("dh", ampc_tensor_grad(h), want, bound, dt);
    gemm_ref(10, 24, 6, (mv){qg, 1, 10}, (mv){qh, 24, 1}, 1, NULL, want, bound); /* summed over the batch */
    expect_close("dwte", ampc_tensor_grad(wte), want, bound, dt);
    free(hv), free(wv), free(qh), free(qw), free(gv), free(qg);
    ASSERT_OK(ampc_fp8_end(c));
    ampc_tensor_free(wte);
    ctx_free(c);
}

static void test_matmul_param_b(void **state) {
    (void)state;
    check_matmul_param(false);
    check_matmul_param(true);
}

/* Under BF16 autocast the weight is quantised from the F32 parameter itself, as TE's Linear casts its
 * weight (only the input takes the autocast dtype first): w = 1 + 2^-4 + 2^-10 is 1.125 in E4M3, while its
 * BF16 copy 1 + 2^-4 is an E4M3 tie that rounds to 1. */
static void test_autocast_weight_single_rounding(void **state) {
    (void)state;
    ampc_ctx *c = ctx_new(15);
    ASSERT_OK(ampc_fp8_begin(c, NULL));
    ampc_tensor *w = param_new(c, "w", SHAPE(1, 1), 1.0), *x = ampc_tensor_full(c, AMPC_DTYPE_F32, SHAPE(1, 1), 1.0);
    const float wv = 1.0f + 0x1p-4f + 0x1p-10f;
    ASSERT_OK(ampc_tensor_copy_from(w, &wv, AMPC_DTYPE_F32));
    assert_true(quant(wv, 1, false) == 1.125 && quant(bf16_round(wv), 1, false) == 1.0);
    ASSERT_OK(ampc_autocast_begin(c, NULL));
    ampc_tensor *y = ampc_linear(c, x, w, NULL), *z = ampc_matmul(c, x, w, AMPC_TRANS_B);
    ASSERT_OK(ampc_autocast_end(c));
    float got[2] = {0, 0};
    assert_true(y && z);
    ASSERT_OK(ampc_tensor_copy_to(y, got, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_to(z, got + 1, AMPC_DTYPE_F32));
    if (got[0] != 1.125f || got[1] != 1.125f)
        FAILF("linear %g, matmul %g; expected 1.125 = E4M3(w): the weight was quantised from its BF16 copy "
              "(double rounding)",
              got[0], got[1]);
    ASSERT_OK(ampc_fp8_end(c));
    ampc_tensor_free(w);
    ctx_free(c);
}

/* A b that is not a parameter (no grad; or a parameter's non-leaf copy) is left alone: the plain op. */
static void test_matmul_plain_b(void **state) {
    (void)state;
    ampc_ctx *c = ctx_new(13);
    ampc_tensor *h = normal(c, SHAPE(2, 3, 24), 1.0), *e = normal(c, SHAPE(10, 24), 0.5),
                *p = param_new(c, "p", SHAPE(10, 24), 0.5);
    ampc_tensor *plain = ampc_matmul(c, h, e, AMPC_TRANS_B), *plain_p = ampc_matmul(c, h, p, AMPC_TRANS_B);
    ASSERT_OK(ampc_fp8_begin(c, NULL));
    ampc_tensor *pc = ampc_tensor_contiguous(p); /* computed from the parameter: not a leaf */
    ampc_tensor *y = ampc_matmul(c, h, e, AMPC_TRANS_B), *yp = ampc_matmul(c, h, pc, AMPC_TRANS_B);
    assert_true(plain && plain_p && y && yp);
    assert_memory_equal(ampc_tensor_data(y), ampc_tensor_data(plain), 60 * sizeof(float));
    assert_memory_equal(ampc_tensor_data(yp), ampc_tensor_data(plain_p), 60 * sizeof(float));
    ampc_fp8_stats st;
    ASSERT_OK(ampc_fp8_get_stats(c, &st));
    assert_int_equal(st.tensors, 0); /* no FP8 state was made */
    ASSERT_OK(ampc_fp8_end(c));
    ampc_tensor_free(p);
    ctx_free(c);
}

/* ---- 2. the backward ---- */

/* Step 1 at scales 1, step 2 at the delayed scales of step 1 (the output gradient's too). */
static void check_backward(ampc_fp8_format fmt, bool bf16) {
    ampc_fp8_recipe r = {.format = fmt};
    fx f = fx_new(&r, bf16, 5, 12, 7);
    triple a = fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.05), ONES);
    ampc_ctx_step_end(f.c);
    triple s = rules(a, 0, f.e5, ONES);
    assert_true(s.g != 1);
    expect_stats(f.c, 3, s, 0);
    fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.05), s);
    fx_free(&f);
}

static void test_backward_hybrid(void **state) {
    (void)state;
    check_backward(AMPC_FP8_HYBRID, false);
    check_backward(AMPC_FP8_HYBRID, true);
}

static void test_backward_e4m3(void **state) {
    (void)state;
    check_backward(AMPC_FP8_E4M3, false);
    check_backward(AMPC_FP8_E4M3, true);
}

enum { FD_R = 3, FD_I = 4, FD_O = 2 };

/* sum(r * (xd wd^T + b)) in double: the quantised forward with the loss below. */
static double fd_loss(const double *xd, const double *wd, const double *b, const double *r) {
    double l = 0;
    for (int i = 0; i < FD_R; i++)
        for (int j = 0; j < FD_O; j++) {
            double y = b[j];
            for (int k = 0; k < FD_I; k++) y += xd[i * FD_I + k] * wd[j * FD_I + k];
            l += r[i * FD_O + j] * y;
        }
    return l;
}

/* d loss / d v[i] by central differences (v: the dequantised operand, perturbed in double). */
static double central(double *v, int i, const double *xd, const double *wd, const double *b, const double *r) {
    double v0 = v[i], h = 0x1p-8;
    v[i] = v0 + h;
    double lp = fd_loss(xd, wd, b, r);
    v[i] = v0 - h;
    double lm = fd_loss(xd, wd, b, r);
    v[i] = v0;
    return (lp - lm) / (2 * h);
}

/* loss = sum(y * r), r exact in E5M2: the output gradient r passes the quantisation unchanged, and the
 * gradients the op returns are those of the quantised GEMM, qx / sx and qw / sw perturbed. */
static void test_backward_finite_differences(void **state) {
    (void)state;
    fx f = fx_new(NULL, false, FD_R, FD_I, FD_O);
    static const float rv[FD_R * FD_O] = {0.75f, -1.25f, 1.5f, -0.5f, 3.0f, -0.875f};
    ampc_tensor *x = fx_x(&f, 1.0),
                *rt = ampc_tensor_from_buffer(f.c, AMPC_DTYPE_F32, SHAPE(FD_R, FD_O), rv, AMPC_DTYPE_F32);
    ASSERT_OK(ampc_tensor_set_requires_grad(x, true));
    ampc_tensor *loss = ampc_sum(f.c, ampc_mul(f.c, ampc_linear(f.c, x, f.w, f.b), rt), NULL, 0, false);
    if (!loss) FAILF("loss: %s", ampc_last_error());
    ASSERT_OK(ampc_backward(f.c, loss));
    double r[FD_R * FD_O], *xd = values(x, false), *wd = values(f.w, false), *b = values(f.b, false);
    for (int i = 0; i < FD_R * FD_O; i++) r[i] = rv[i], assert_true(quant(rv[i], 1, true) == rv[i]);
    for (int i = 0; i < FD_R * FD_I; i++) xd[i] = quant(xd[i], 1, false); /* scales 1: dequantised = q */
    for (int i = 0; i < FD_O * FD_I; i++) wd[i] = quant(wd[i], 1, false);
    double *gw = values(ampc_tensor_grad(f.w), false), *gx = values(ampc_tensor_grad(x), false);
    for (int i = 0; i < FD_O * FD_I; i++) {
        double fd = central(wd, i, xd, wd, b, r);
        if (fabs(gw[i] - fd) > 1e-9 + FD_R * U24 * fabs(fd) * 4) FAILF("dW[%d] = %.9g, central %.9g", i, gw[i], fd);
    }
    for (int i = 0; i < FD_R * FD_I; i++) {
        double fd = central(xd, i, xd, wd, b, r);
        if (fabs(gx[i] - fd) > 1e-9 + FD_O * U24 * fabs(fd) * 4) FAILF("dx[%d] = %.9g, central %.9g", i, gx[i], fd);
    }
    free(xd), free(wd), free(b), free(gw), free(gx);
    fx_free(&f);
}

/* ---- 3. scaling ---- */

/* Margin 1, history 4: step 2's GEMMs use the scales of step 1's amaxes, step 3's those of the amax
 * compute's choice (MAX: step 1's, the larger; MOST_RECENT: step 2's). */
static void check_delayed(ampc_fp8_amax_compute ac) {
    ampc_fp8_recipe r = {.amax_history_len = 4, .amax_compute = ac, .margin = 1};
    fx f = fx_new(&r, false, 4, 16, 6);
    triple a1 = fx_step(&f, fx_x(&f, 2.0), fx_g(&f, 0.5), ONES);
    expect_stats(f.c, 3, ONES, 0);
    ampc_ctx_step_end(f.c);
    triple s = rules(a1, 1, true, ONES);
    expect_stats(f.c, 3, s, 0);
    triple a2 = fx_step(&f, fx_x(&f, 2.0 / 64), fx_g(&f, 0.5 / 64), s);
    ampc_ctx_step_end(f.c);
    triple a = ac == AMPC_FP8_AMAX_MAX ? (triple){fmax(a1.x, a2.x), fmax(a1.w, a2.w), fmax(a1.g, a2.g)} : a2;
    triple s3 = rules(a, 1, true, s);
    if (ac == AMPC_FP8_AMAX_MAX) assert_true(s3.x == s.x && s3.g == s.g);
    else assert_true(s3.x > s.x && s3.g > s.g);
    expect_stats(f.c, 3, s3, 0);
    fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.1), s3);
    fx_free(&f);
}

static void test_delayed_scales(void **state) {
    (void)state;
    check_delayed(AMPC_FP8_AMAX_MAX);
    check_delayed(AMPC_FP8_AMAX_MOST_RECENT);
}

/* Current scaling: every tensor's scale from its own amax, just in time; step end keeps them. */
static void test_current_scaling(void **state) {
    (void)state;
    fx f = fx_new(&(ampc_fp8_recipe){.scaling = AMPC_FP8_CURRENT}, false, 4, 16, 6);
    const triple cur = {CUR, CUR, CUR};
    triple a = fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.01), cur);
    triple s = {ampc_fp8_current_scale(a.x, E4M3_MAX, 0), ampc_fp8_current_scale(a.w, E4M3_MAX, 0),
                ampc_fp8_current_scale(a.g, E5M2_MAX, 0)};
    expect_stats(f.c, 3, s, 0);
    ampc_ctx_step_end(f.c);
    expect_stats(f.c, 3, s, 0);
    a = fx_step(&f, fx_x(&f, 1e-3), fx_g(&f, 30.0), cur); /* other magnitudes: other scales at once */
    assert_true(ampc_fp8_current_scale(a.x, E4M3_MAX, 0) != s.x);
    fx_free(&f);
}

/* Scale 1 in the first step: x beyond 448 (464 ties to 448, inf counts), g beyond 57344 (61440 ties up);
 * the next step runs at the scales below 1 that those amaxes give. */
static void test_saturation(void **state) {
    (void)state;
    fx f = fx_new(NULL, false, 2, 8, 3);
    static const float xs[16] = {
        450, -460,    464,    -464, 0x1.d00002p+8f /* 464 + ulp */, 465, -1000, 3e4, INFINITY, 1.5f, -2, 0.25f,
        448, -448.5f, 463.9f, 0};
    static const float gs[6] = {60000, -61440, 70000, 1.0f, -57344, 0x1.dffffep+15f /* 61440 - ulp */};
    ampc_tensor *x = ampc_tensor_from_buffer(f.c, AMPC_DTYPE_F32, SHAPE(2, 8), xs, AMPC_DTYPE_F32),
                *g = ampc_tensor_from_buffer(f.c, AMPC_DTYPE_F32, SHAPE(2, 3), gs, AMPC_DTYPE_F32);
    double xd[16], gd[6], *wd = values(f.w, false);
    for (int i = 0; i < 16; i++) xd[i] = xs[i];
    for (int i = 0; i < 6; i++) gd[i] = gs[i];
    int64_t nx = saturating(xd, 16, 1, false), nw = saturating(wd, 24, 1, false), ng = saturating(gd, 6, 1, true);
    assert_true(nx == 5 && nw == 0 && ng == 2);
    free(wd);
    triple a = fx_step(&f, x, NULL, ONES);
    expect_stats(f.c, 3, ONES, (uint64_t)nx);
    ampc_tensor *x2 = ampc_tensor_from_buffer(f.c, AMPC_DTYPE_F32, SHAPE(2, 8), xs, AMPC_DTYPE_F32);
    a = fx_step(&f, x2, g, ONES); /* the forward again, and the backward */
    expect_stats(f.c, 3, ONES, (uint64_t)(2 * nx + ng));
    ampc_ctx_step_end(f.c);
    assert_true(a.x == 3e4); /* inf is left out of the amax */
    triple sc = rules(a, 0, true, ONES);
    assert_true(sc.x == 0x1p-7 && sc.g == 0.5);
    expect_stats(f.c, 3, sc, 0);                      /* the count is per step */
    fx_step(&f, fx_x(&f, 1000.0), fx_g(&f, 3e4), sc); /* scales below 1 */
    fx_free(&f);
}

/* A forward under ampc_no_grad_begin (evaluation) records nothing: the scales stay, and the next training
 * step's GEMMs run at those of the last training step. */
static void test_eval_keeps_scales(void **state) {
    (void)state;
    fx f = fx_new(NULL, false, 4, 16, 6);
    triple a = fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.1), ONES);
    ampc_ctx_step_end(f.c);
    triple s = rules(a, 0, true, ONES);
    expect_stats(f.c, 3, s, 0);
    ampc_no_grad_begin(f.c);
    ampc_tensor *y = ampc_linear(f.c, fx_x(&f, 1000.0), f.w, f.b); /* amax ~3000: would lower the scale */
    ampc_no_grad_end(f.c);
    assert_non_null(y);
    ampc_ctx_step_end(f.c);
    expect_stats(f.c, 3, s, 0);
    fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.1), s);
    fx_free(&f);
}

/* An allocator that hands a freed block of the same size back first (last freed, first reused), as
 * malloc often does: a tensor made after another is freed takes its memory. One thread. */
enum { REUSE_MAX = 64 };
static struct {
    void *p[REUSE_MAX];
    size_t size[REUSE_MAX];
    int n;
} g_reuse;

static void *reuse_alloc(void *user, size_t size, size_t align) {
    (void)user;
    for (int i = g_reuse.n - 1; i >= 0; i--)
        if (g_reuse.size[i] == size) {
            void *p = g_reuse.p[i];
            g_reuse.n--;
            memmove(g_reuse.p + i, g_reuse.p + i + 1, (size_t)(g_reuse.n - i) * sizeof(void *));
            memmove(g_reuse.size + i, g_reuse.size + i + 1, (size_t)(g_reuse.n - i) * sizeof(size_t));
            return p;
        }
    return aligned_alloc(align, (size + align - 1) / align * align);
}

static void reuse_free(void *user, void *p, size_t size) {
    (void)user;
    if (g_reuse.n == REUSE_MAX) { /* full: the oldest goes */
        free(g_reuse.p[0]);
        g_reuse.n--;
        memmove(g_reuse.p, g_reuse.p + 1, (size_t)g_reuse.n * sizeof(void *));
        memmove(g_reuse.size, g_reuse.size + 1, (size_t)g_reuse.n * sizeof(size_t));
    }
    g_reuse.p[g_reuse.n] = p, g_reuse.size[g_reuse.n++] = size;
}

/* A parameter's FP8 state is its own: a parameter made after another was freed starts at scale 1, also
 * where it takes the freed one's memory. */
static void test_new_param_fresh_state(void **state) {
    (void)state;
    static const ampc_allocator reuse = {reuse_alloc, reuse_free, NULL};
    ampc_ctx *c = NULL;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 16, .threads = 1, .allocator = &reuse}, &c));
    fx f = fx_init(c, NULL, false, 4, 16, 6);
    fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.1), ONES);
    ampc_ctx_step_end(f.c); /* w's scales are learned now (not 1) */
    uintptr_t old = (uintptr_t)f.w;
    ampc_tensor_free(f.w);
    /* a freed header is kept (marked) for the context's next 64 frees: 64 more send it to the allocator */
    for (int i = 0; i < 64; i++) ampc_tensor_free(ampc_tensor_new(f.c, AMPC_DTYPE_F32, 1, (int64_t[]){1}));
    f.w = param_new(f.c, "w2", SHAPE(f.out, f.in), 0.3);
    assert_true((uintptr_t)f.w == old); /* the allocator's doing */
    fx_step(&f, fx_x(&f, 1.0), fx_g(&f, 0.1), ONES);
    fx_free(&f);
    while (g_reuse.n > 0) free(g_reuse.p[--g_reuse.n]);
}

static void expect_begin_fails(ampc_ctx *c, ampc_fp8_recipe r, ampc_status want) {
    assert_int_equal(ampc_fp8_begin(c, &r), want);
    assert_non_null(strstr(ampc_last_error(), "ampc_fp8_begin"));
}

static void test_recipe_errors(void **state) {
    (void)state;
    ampc_ctx *c = ctx_new(14);
    assert_int_equal(ampc_fp8_end(c), AMPC_STATUS_STATE);
    assert_int_equal(ampc_fp8_end(NULL), AMPC_STATUS_STATE);
    expect_begin_fails(c, (ampc_fp8_recipe){.amax_history_len = -1}, AMPC_STATUS_INVALID_ARG);
    expect_begin_fails(c, (ampc_fp8_recipe){.margin = 100}, AMPC_STATUS_INVALID_ARG);
    expect_begin_fails(c, (ampc_fp8_recipe){.format = (ampc_fp8_format)7}, AMPC_STATUS_INVALID_ARG);
    expect_begin_fails(c, (ampc_fp8_recipe){.scaling = (ampc_fp8_scaling)2}, AMPC_STATUS_INVALID_ARG);
    expect_begin_fails(c, (ampc_fp8_recipe){.amax_compute = (ampc_fp8_amax_compute)9}, AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_fp8_begin(NULL, NULL), AMPC_STATUS_INVALID_ARG);
    assert_false(ampc_fp8_enabled(c));
    ampc_fp8_stats st;
    assert_int_equal(ampc_fp8_get_stats(NULL, &st), AMPC_STATUS_INVALID_ARG);
    ASSERT_OK(ampc_fp8_begin(c, &(ampc_fp8_recipe){.amax_history_len = 8})); /* no state yet: any recipe */
    ASSERT_OK(ampc_fp8_end(c));
    ASSERT_OK(ampc_fp8_begin(c, NULL));
    ampc_tensor *w = param_new(c, "w", SHAPE(3, 4), 1.0);
    assert_non_null(ampc_linear(c, normal(c, SHAPE(2, 4), 1.0), w, NULL));      /* state for w */
    ASSERT_OK(ampc_fp8_begin(c, &(ampc_fp8_recipe){.amax_history_len = 1024})); /* history 0 is 1024 */
    assert_true(ampc_fp8_enabled(c));
    ASSERT_OK(ampc_fp8_end(c));
    expect_begin_fails(c, (ampc_fp8_recipe){.amax_history_len = 4}, AMPC_STATUS_STATE);
    expect_begin_fails(c, (ampc_fp8_recipe){.format = AMPC_FP8_E4M3}, AMPC_STATUS_STATE);
    assert_true(ampc_fp8_enabled(c)); /* the open region stays */
    ASSERT_OK(ampc_fp8_end(c));
    assert_false(ampc_fp8_enabled(c));
    assert_int_equal(ampc_fp8_end(c), AMPC_STATUS_STATE);
    ampc_tensor_free(w);
    ctx_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_exact_f32),
        cmocka_unit_test(test_linear_exact_bf16),
        cmocka_unit_test(test_matmul_param_b),
        cmocka_unit_test(test_matmul_plain_b),
        cmocka_unit_test(test_autocast_weight_single_rounding),
        cmocka_unit_test(test_backward_hybrid),
        cmocka_unit_test(test_backward_e4m3),
        cmocka_unit_test(test_backward_finite_differences),
        cmocka_unit_test(test_delayed_scales),
        cmocka_unit_test(test_current_scaling),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_eval_keeps_scales),
        cmocka_unit_test(test_new_param_fresh_state),
        cmocka_unit_test(test_recipe_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
