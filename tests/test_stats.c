/* test_stats.c: range statistics (the numerics doctor); ampc_stats_classify itself is
 * test_stats_classify.c's.
 *  - sites recorded while attached: module paths, op names, roles, parameter names, counts/zeros/amax/
 *    min_nonzero/hist against the tensors' values, accumulation over steps, `lowered` simulated from the
 *    tutorial policy table (and not for an op inside an enabled = false island), detaching, reset, freeing
 *    the statistics after their context;
 *  - verdicts: overflow (FP16 unsafe, BF16 safe, FP8 scaled), an F32 input a lowering op casts down,
 *    small gradients (needs scaling; the scale recomputed from the values and the histograms), kept FP32;
 *  - end to end: a three-module MLP whose "big" layer overflows FP16. The doctor blames only "big", and
 *    FP16 autocast with big=fp32 and the recommended loss scale trains like FP32, while plain FP16
 *    autocast does not. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(11, 2)

/* After every test, also a failed one: no statistics, module rules, scopes or regions left behind. */
static int end_step(void **state) {
    (void)state;
    while (ampc_scope_path(g_ctx)[0]) ampc_scope_pop(g_ctx);
    while (ampc_autocast_end(g_ctx) == AMPC_OK) {}
    ampc_clear_error();
    ampc_stats_attach(g_ctx, NULL);
    ampc_module_precision_clear(g_ctx);
    ampc_ctx_step_end(g_ctx);
    return 0;
}

static const ampc_format k_formats[] = {AMPC_FORMAT_FP16, AMPC_FORMAT_BF16, AMPC_FORMAT_FP8_E4M3, AMPC_FORMAT_FP8_E5M2};
#define NFMT (sizeof k_formats / sizeof k_formats[0])

/* ---- 1. recording ---- */

static const ampc_stats_entry *site(const ampc_stats *st, const char *module, const char *op, ampc_stats_role role,
                                    const char *param, int *index) {
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (!strcmp(e->module, module) && !strcmp(e->op, op) && e->role == role && !strcmp(e->param, param)) {
            if (index) *index = i;
            return e;
        }
    }
    FAILF("no site (%s, %s, %s, %s) among %d", module, op, ampc_stats_role_name(role), param, ampc_stats_count(st));
    return NULL;
}

/* What a site should hold for a set of tensors, computed from their values. */
typedef struct summary {
    uint64_t count, zeros, nonfinite;
    double amax, min_nonzero;
    uint64_t hist[AMPC_STATS_BINS];
} summary;

static void summary_add(summary *s, const ampc_tensor *t) {
    int64_t n = ampc_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    ASSERT_OK(ampc_tensor_copy_to(t, v, AMPC_DTYPE_F32));
    for (int64_t i = 0; i < n; i++) {
        double a = fabs((double)v[i]);
        s->count++;
        if (!isfinite(a)) {
            s->nonfinite++, s->hist[255]++;
            continue;
        }
        if (a == 0) s->zeros++;
        else {
            if (a > s->amax) s->amax = a;
            if (s->min_nonzero == 0 || a < s->min_nonzero) s->min_nonzero = a;
        }
        s->hist[fpclassify(v[i]) == FP_NORMAL ? ilogb(a) + 127 : 0]++;
    }
    free(v);
}

static void expect_summary(const ampc_stats_entry *e, const summary *s, const char *what) {
    if (e->count != s->count || e->zeros != s->zeros || e->nonfinite != s->nonfinite || e->amax != s->amax ||
        e->min_nonzero != s->min_nonzero)
        FAILF("%s: site count %llu zeros %llu nonfinite %llu amax %.9g min %.9g; values give %llu %llu %llu %.9g %.9g",
              what, (unsigned long long)e->count, (unsigned long long)e->zeros, (unsigned long long)e->nonfinite,
              e->amax, e->min_nonzero, (unsigned long long)s->count, (unsigned long long)s->zeros,
              (unsigned long long)s->nonfinite, s->amax, s->min_nonzero);
    for (int b = 0; b < AMPC_STATS_BINS; b++)
        if (e->hist[b] != s->hist[b])
            FAILF("%s: hist[%d] %llu, values give %llu", what, b, (unsigned long long)e->hist[b],
                  (unsigned long long)s->hist[b]);
}

static ampc_tensor *param(ampc_ctx *ctx, const char *name, int64_t rows, int64_t cols, double std) {
    ampc_tensor *t = cols ? ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, (int64_t[]){rows, cols})
                          : ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, (int64_t[]){rows});
    assert_non_null(t);
    ASSERT_OK(ampc_tensor_fill_normal(t, 0, std));
    ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    ASSERT_OK(ampc_tensor_set_name(t, name));
    return t;
}

/* The small network of the recording tests: enc.fc (linear) + relu in enc, norm (layer_norm), head
 * (linear), cross entropy at top level. */
typedef struct small_net {
    ampc_tensor *w1, *b1, *w2;
    ampc_tensor *y, *r, *n, *logits, *loss; /* the last forward's tensors */
} small_net;

static void small_forward_backward(small_net *m, uint64_t seed) {
    ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){6, 8}, 0, 1 + (double)seed);
    int32_t cls[6];
    for (int i = 0; i < 6; i++) cls[i] = (int32_t)((i + seed) % 3);
    ampc_tensor *t = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I32, 1, (int64_t[]){6}, cls, AMPC_DTYPE_I32);
    ASSERT_OK(ampc_scope_push(g_ctx, "enc"));
    ASSERT_OK(ampc_scope_push(g_ctx, "fc"));
    m->y = ampc_linear(g_ctx, x, m->w1, m->b1);
    ampc_scope_pop(g_ctx);
    m->r = ampc_relu(g_ctx, m->y);
    ampc_scope_pop(g_ctx);
    ASSERT_OK(ampc_scope_push(g_ctx, "norm"));
    m->n = ampc_layer_norm(g_ctx, m->r, NULL, NULL, 1e-5);
    ampc_scope_pop(g_ctx);
    ASSERT_OK(ampc_scope_push(g_ctx, "head"));
    m->logits = ampc_linear(g_ctx, m->n, m->w2, NULL);
    ampc_scope_pop(g_ctx);
    m->loss = ampc_cross_entropy(g_ctx, m->logits, t, AMPC_IGNORE_INDEX);
    assert_non_null(m->loss);
    ampc_tensor_clear_grad(m->w1), ampc_tensor_clear_grad(m->b1), ampc_tensor_clear_grad(m->w2);
    ASSERT_OK(ampc_backward(g_ctx, m->loss));
}

static void test_sites_and_counts(void **state) {
    (void)state;
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    small_net m = {.w1 = param(g_ctx, "enc.fc.weight", 5, 8, 0.5),
                   .b1 = param(g_ctx, "enc.fc.bias", 5, 0, 0.5),
                   .w2 = param(g_ctx, "head.weight", 3, 5, 0.5)};
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    summary lin = {0}, relu = {0}, wgrad = {0};
    for (uint64_t step = 0; step < 2; step++) {
        small_forward_backward(&m, step);
        summary_add(&lin, m.y), summary_add(&relu, m.r), summary_add(&wgrad, ampc_tensor_grad(m.w1));
        ampc_ctx_step_end(g_ctx);
    }
    assert_int_equal(ampc_stats_steps(st), 2);
    const ampc_stats_entry *e = site(st, "enc.fc", "linear", AMPC_STATS_OUTPUT, "", NULL);
    expect_summary(e, &lin, "enc.fc linear output, two steps");
    assert_true(e->lowered && e->calls == 2);
    e = site(st, "enc", "relu", AMPC_STATS_OUTPUT, "", NULL);
    expect_summary(e, &relu, "enc relu output, two steps");
    assert_true(e->lowered && e->zeros > 0); /* relu of a lowered input keeps its dtype: lowered */
    /* the weight receives one contribution per backward: the site saw exactly its gradient */
    expect_summary(site(st, "enc.fc", "linear", AMPC_STATS_PARAM_GRAD, "enc.fc.weight", NULL), &wgrad,
                   "enc.fc.weight gradient");
    assert_true(site(st, "enc.fc", "linear", AMPC_STATS_PARAM_GRAD, "enc.fc.bias", NULL)->lowered);
    assert_int_equal(site(st, "enc.fc", "linear", AMPC_STATS_GRAD, "", NULL)->count, 2 * 6 * 5);
    assert_true(site(st, "head", "linear", AMPC_STATS_PARAM_GRAD, "head.weight", NULL)->lowered);
    int ln, head;
    assert_false(site(st, "norm", "layer_norm", AMPC_STATS_OUTPUT, "", &ln)->lowered); /* FP32 policy */
    assert_false(site(st, "", "cross_entropy", AMPC_STATS_OUTPUT, "", NULL)->lowered);
    assert_false(site(st, "", "cross_entropy", AMPC_STATS_GRAD, "", NULL)->lowered);
    /* the head linear casts the F32 layer_norm output down: listed as its cast input */
    site(st, "head", "linear", AMPC_STATS_OUTPUT, "", &head);
    int in[4];
    assert_int_equal(ampc_stats_cast_inputs(st, head, in, 4), 1);
    assert_int_equal(in[0], ln);
    assert_string_equal(ampc_stats_role_name(AMPC_STATS_PARAM_GRAD), "param_grad");
    /* detached: nothing more is recorded */
    int n = ampc_stats_count(st);
    uint64_t before = e->count;
    ASSERT_OK(ampc_stats_attach(g_ctx, NULL));
    small_forward_backward(&m, 5);
    ampc_ctx_step_end(g_ctx);
    assert_int_equal(ampc_stats_count(st), n);
    assert_true(site(st, "enc", "relu", AMPC_STATS_OUTPUT, "", NULL)->count == before);
    assert_int_equal(ampc_stats_steps(st), 2);
    ampc_stats_reset(st);
    assert_int_equal(ampc_stats_count(st), 0);
    assert_int_equal(ampc_stats_steps(st), 0);
    assert_null(ampc_stats_get(st, 0));
    ampc_stats_free(st);
    ampc_tensor_free(m.w1), ampc_tensor_free(m.b1), ampc_tensor_free(m.w2);
}

static void test_lifetime(void **state) {
    (void)state;
    ampc_ctx *ctx;
    ampc_stats *st;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 3, .threads = 1}, &ctx));
    ASSERT_OK(ampc_stats_new(&st));
    ASSERT_OK(ampc_stats_attach(ctx, st));
    assert_int_equal(ampc_stats_attach(g_ctx, st), AMPC_STATUS_STATE); /* one context at a time */
    assert_non_null(ampc_relu(ctx, ampc_tensor_normal(ctx, AMPC_DTYPE_F32, 1, (int64_t[]){7}, 0, 1)));
    ampc_ctx_step_end(ctx);
    ampc_ctx_free(ctx); /* detaches: the statistics outlive the context */
    assert_int_equal(ampc_stats_count(st), 1);
    assert_int_equal(ampc_stats_get(st, 0)->count, 7);
    ASSERT_OK(ampc_stats_attach(g_ctx, st)); /* free to serve another one now */
    ampc_stats_free(st);                     /* attached: detaches g_ctx first */
    assert_non_null(ampc_relu(g_ctx, ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){7}, 0, 1)));
}

/* An explicit FP32 island (a region with enabled = false) keeps an F32 linear in F32 under autocast, so
 * an FP32 run must not count it as lowered. */
static void test_lowered_in_disabled_region(void **state) {
    (void)state;
    ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){3, 8}, 0, 1);
    ampc_tensor *w = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){4, 8}, 0, 1);
    const ampc_autocast_params island = tu_ac((ampc_autocast_params){.enabled = false});
    /* the premise: under F16 autocast the island's linear is F32 */
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = AMPC_DTYPE_F16, .enabled = true)));
    ASSERT_OK(ampc_autocast_begin(g_ctx, &island));
    assert_int_equal(ampc_tensor_dtype(ampc_linear(g_ctx, x, w, NULL)), AMPC_DTYPE_F32);
    ASSERT_OK(ampc_autocast_end(g_ctx));
    ASSERT_OK(ampc_autocast_end(g_ctx));
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    ASSERT_OK(ampc_autocast_begin(g_ctx, &island));
    ASSERT_OK(ampc_scope_push(g_ctx, "island"));
    assert_non_null(ampc_linear(g_ctx, x, w, NULL));
    ampc_scope_pop(g_ctx);
    ASSERT_OK(ampc_autocast_end(g_ctx));
    bool lowered = site(st, "island", "linear", AMPC_STATS_OUTPUT, "", NULL)->lowered;
    ampc_stats_free(st);
    if (lowered) FAILF("a linear inside an enabled = false region of an FP32 run is recorded as lowered");
}

/* Under real F16 autocast a weight reaches the linear through autocast's cast: its gradient is still
 * filed under the linear, as a lowered parameter gradient whose values are the F16 ones. */
static void test_param_grad_under_autocast(void **state) {
    (void)state;
    ampc_tensor *w = param(g_ctx, "fc.weight", 4, 8, 0.5);
    ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){3, 8}, 0, 1);
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = AMPC_DTYPE_F16, .enabled = true)));
    ASSERT_OK(ampc_scope_push(g_ctx, "fc"));
    ampc_tensor *y = ampc_linear(g_ctx, x, w, NULL);
    ampc_scope_pop(g_ctx);
    ASSERT_OK(ampc_autocast_end(g_ctx));
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_tensor_cast(y, AMPC_DTYPE_F32), NULL, 0, false)));
    const ampc_stats_entry *e = site(st, "fc", "linear", AMPC_STATS_PARAM_GRAD, "fc.weight", NULL);
    assert_true(e->lowered);
    assert_int_equal(e->count, 32);
    summary want = {0};
    summary_add(&want, ampc_tensor_grad(w));
    expect_summary(e, &want, "fc.weight's gradient through the weight cast");
    ampc_stats_free(st);
    ampc_tensor_free(w);
}

/* ---- 2. verdicts ---- */

static ampc_stats_advice advise(const ampc_stats *st, int i, ampc_format fmt) {
    ampc_stats_advice a;
    ASSERT_OK(ampc_stats_advise(st, i, fmt, &a));
    return a;
}

static void test_verdict_overflow(void **state) {
    (void)state;
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    ampc_tensor *x = ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){4, 8}, 1000);
    ampc_tensor *w = ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){4, 8}, 10);
    ASSERT_OK(ampc_scope_push(g_ctx, "wide"));
    assert_non_null(ampc_linear(g_ctx, x, w, NULL)); /* 80000 everywhere */
    ampc_scope_pop(g_ctx);
    /* an F32 op's output above 65504 that a linear casts down: the linear is unsafe though it fits */
    ampc_tensor *e = ampc_exp(g_ctx, ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){2, 4}, 12));
    ampc_tensor *small = ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){3, 4}, 1e-4);
    assert_non_null(ampc_linear(g_ctx, e, small, NULL)); /* 65.1 */
    int big, ex, lin;
    assert_true(site(st, "wide", "linear", AMPC_STATS_OUTPUT, "", &big)->range[AMPC_FORMAT_FP16].overflow == 16);
    site(st, "", "exp", AMPC_STATS_OUTPUT, "", &ex);
    site(st, "", "linear", AMPC_STATS_OUTPUT, "", &lin);
    assert_int_equal(advise(st, big, AMPC_FORMAT_FP16).verdict, AMPC_VERDICT_UNSAFE);
    assert_int_equal(advise(st, big, AMPC_FORMAT_BF16).verdict, AMPC_VERDICT_SAFE);
    ampc_stats_advice a = advise(st, big, AMPC_FORMAT_FP8_E4M3); /* per-tensor scale: 80000 * 2^-8 <= 448 */
    assert_true(a.verdict == AMPC_VERDICT_NEEDS_SCALING && a.scale_log2 == -8);
    assert_int_equal(advise(st, ex, AMPC_FORMAT_FP16).verdict, AMPC_VERDICT_KEPT_FP32);
    a = advise(st, lin, AMPC_FORMAT_FP16);
    assert_int_equal(a.verdict, AMPC_VERDICT_UNSAFE);
    if (!strstr(a.why, "exp")) FAILF("why \"%s\" does not name the exp input", a.why);
    assert_int_equal(advise(st, lin, AMPC_FORMAT_BF16).verdict, AMPC_VERDICT_SAFE);
    ampc_stats_recommendation rec;
    ASSERT_OK(ampc_stats_recommend(st, AMPC_FORMAT_FP16, &rec));
    assert_string_equal(rec.fp32_modules, "wide");
    assert_string_equal(rec.fp32_ops, "linear");
    assert_int_equal(rec.unsafe_sites, 2);
    ampc_stats_free(st);
}

/* The documented scale rule, over the values themselves: the smallest k >= 0 with more than 99.9% of the
 * non-zero values at or above 2^-14 once scaled by 2^k, and their largest below 65520. */
static int fp16_scale_from_values(const float *v, size_t n) {
    for (int k = 0; k <= 128; k++) {
        size_t nz = 0, normal = 0;
        bool overflow = false;
        for (size_t i = 0; i < n; i++) {
            double a = ldexp(fabs((double)v[i]), k);
            if (a == 0) continue;
            nz++, normal += a >= 0x1p-14, overflow |= a >= 65520;
        }
        if (!overflow && (double)normal > 0.999 * (double)nz) return k;
    }
    return -1000;
}

/* The same from histograms (one bin per binade), summed over sites. */
static int fp16_scale_from_hist(const uint64_t *hist, uint64_t zeros, double amax) {
    for (int k = 0; k <= 128; k++) {
        uint64_t nz = hist[0] - zeros, normal = 0;
        for (int b = 1; b < 255; b++) nz += hist[b], normal += b - 127 + k >= -14 ? hist[b] : 0;
        if (ldexp(amax, k) < 65520 && (double)normal > 0.999 * (double)nz) return k;
    }
    return -1000;
}

static void test_verdict_small_gradients(void **state) {
    (void)state;
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    ampc_tensor *w = param(g_ctx, "small.weight", 32, 32, 0.2);
    ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){16, 32}, 0, 1);
    ASSERT_OK(ampc_scope_push(g_ctx, "small"));
    ampc_tensor *y = ampc_linear(g_ctx, x, w, NULL);
    ampc_scope_pop(g_ctx);
    ampc_tensor *loss = ampc_mse_loss(g_ctx, y, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){16, 32}));
    ASSERT_OK(ampc_backward(g_ctx, ampc_mul_scalar(g_ctx, loss, 1e-6)));
    int g, pg;
    const ampc_stats_entry *eg = site(st, "small", "linear", AMPC_STATS_GRAD, "", &g);
    const ampc_stats_entry *ep = site(st, "small", "linear", AMPC_STATS_PARAM_GRAD, "small.weight", &pg);
    assert_true(eg->lowered && ep->lowered && eg->range[AMPC_FORMAT_FP16].underflow > 0);
    ampc_stats_advice a = advise(st, pg, AMPC_FORMAT_FP16);
    assert_int_equal(a.verdict, AMPC_VERDICT_NEEDS_SCALING);
    assert_true(a.scale_log2 > 0);
    /* the weight's gradient is the one contribution the site saw: the rule over its values */
    float gv[32 * 32];
    ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(w), gv, AMPC_DTYPE_F32));
    assert_int_equal(a.scale_log2, fp16_scale_from_values(gv, 32 * 32));
    assert_true(a.normal_fraction > 0.999);
    assert_int_equal(advise(st, g, AMPC_FORMAT_FP16).verdict, AMPC_VERDICT_NEEDS_SCALING);
    assert_int_equal(advise(st, g, AMPC_FORMAT_BF16).verdict, AMPC_VERDICT_SAFE);
    /* the loss scale over every lowered gradient site: both linear sites (mse_loss and mul_scalar stay F32) */
    uint64_t hist[AMPC_STATS_BINS] = {0}, zeros = 0;
    double amax = 0;
    int lowered_grads = 0;
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (e->role == AMPC_STATS_OUTPUT || !e->lowered) continue;
        lowered_grads++;
        for (int b = 0; b < AMPC_STATS_BINS; b++) hist[b] += e->hist[b];
        zeros += e->zeros, amax = fmax(amax, e->amax);
    }
    assert_int_equal(lowered_grads, 2);
    int k;
    double frac;
    ASSERT_OK(ampc_stats_loss_scale(st, AMPC_FORMAT_FP16, 0, &k, &frac));
    assert_int_equal(k, fp16_scale_from_hist(hist, zeros, amax));
    assert_true(k > 0 && frac > 0.999);
    assert_int_equal(ampc_stats_get(st, pg)->hist[0], 0); /* the values of this test are F32-normal */
    ampc_stats_free(st);
    ampc_tensor_free(w);
}

static void test_verdict_kept_fp32(void **state) {
    (void)state;
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){4, 16}, 0, 1e5); /* FP16 would overflow */
    ASSERT_OK(ampc_scope_push(g_ctx, "ln"));
    assert_non_null(ampc_layer_norm(g_ctx, x, NULL, NULL, 1e-5));
    ampc_scope_pop(g_ctx);
    int i;
    site(st, "ln", "layer_norm", AMPC_STATS_OUTPUT, "", &i);
    for (size_t f = 0; f < NFMT; f++) assert_int_equal(advise(st, i, k_formats[f]).verdict, AMPC_VERDICT_KEPT_FP32);
    assert_string_equal(ampc_stats_verdict_name(AMPC_VERDICT_KEPT_FP32), "kept fp32");
    ampc_stats_free(st);
}

/* ---- 3. end to end: the doctor's recommendation trains like FP32 ---- */

enum { B = 64, D = 8, H = 16, C = 4, STEPS = 50, NPARAM = 6 };
static const char *const k_param_names[NPARAM] = {"inp.weight", "inp.bias",   "big.weight",
                                                  "big.bias",   "out.weight", "out.bias"};
static const int64_t k_param_shape[NPARAM][2] = {{H, D}, {H, 0}, {H, H}, {H, 0}, {C, H}, {C, 0}};

typedef struct problem {
    float *init[NPARAM];
    float x[B * D];
    int32_t y[B];
} problem;

/* A fixed classification problem (labels from a random linear teacher) and initial weights: big's
 * weights are ~5e4, so its outputs reach ~1e5 (FP16 overflows), and 1e-4 brings them back to ~10. */
static void problem_make(problem *p) {
    ampc_rng rng = ampc_rng_make(2024, 7);
    const float stds[NPARAM] = {0.35f, 0.1f, 5e4f, 1e3f, 0.01f, 0.01f};
    for (int i = 0; i < NPARAM; i++) {
        size_t n = (size_t)(k_param_shape[i][0] * (k_param_shape[i][1] ? k_param_shape[i][1] : 1));
        p->init[i] = malloc(n * sizeof(float));
        assert_non_null(p->init[i]);
        ampc_rng_normal(&rng, p->init[i], n, 0, stds[i]);
    }
    float teacher[C * D];
    ampc_rng_normal(&rng, p->x, B * D, 0, 1);
    ampc_rng_normal(&rng, teacher, C * D, 0, 1);
    for (int b = 0; b < B; b++) {
        double best = -INFINITY;
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += (double)teacher[c * D + d] * p->x[b * D + d];
            if (s > best) best = s, p->y[b] = c;
        }
    }
}

typedef enum run_mode { RUN_FP32, RUN_RECOMMENDED, RUN_FP16 } run_mode;

typedef struct run_result {
    double loss[STEPS];
    int64_t skipped;
    ampc_dtype inp_dtype, big_dtype; /* the linears' output dtypes at the first step */
} run_result;

typedef struct net {
    ampc_ctx *ctx;
    ampc_tensor *p[NPARAM], *x, *y;
} net;

static ampc_tensor *net_loss(net *n, run_result *r) {
    ampc_ctx *ctx = n->ctx;
    ASSERT_OK(ampc_scope_push(ctx, "inp"));
    ampc_tensor *a = ampc_linear(ctx, n->x, n->p[0], n->p[1]);
    ampc_tensor *h = ampc_relu(ctx, a);
    ampc_scope_pop(ctx);
    ASSERT_OK(ampc_scope_push(ctx, "big"));
    ampc_tensor *b = ampc_linear(ctx, h, n->p[2], n->p[3]);
    ampc_tensor *z = ampc_mul_scalar(ctx, b, 1e-4);
    ampc_scope_pop(ctx);
    ASSERT_OK(ampc_scope_push(ctx, "out"));
    ampc_tensor *logits = ampc_linear(ctx, z, n->p[4], n->p[5]);
    ampc_scope_pop(ctx);
    ampc_tensor *loss = ampc_cross_entropy(ctx, logits, n->y, AMPC_IGNORE_INDEX);
    if (!loss) FAILF("forward: %s", ampc_last_error());
    r->inp_dtype = ampc_tensor_dtype(a), r->big_dtype = ampc_tensor_dtype(b);
    return loss;
}

/* `steps` AdamW steps from the problem's initial weights in a fresh context. */
static void train(const problem *pb, run_mode mode, const ampc_stats_recommendation *rec, ampc_stats *st, int steps,
                  run_result *r) {
    net n;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 2}, &n.ctx));
    for (int i = 0; i < NPARAM; i++) {
        n.p[i] = k_param_shape[i][1] ? ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 2, k_param_shape[i])
                                     : ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 1, k_param_shape[i]);
        ASSERT_OK(ampc_tensor_copy_from(n.p[i], pb->init[i], AMPC_DTYPE_F32));
        ASSERT_OK(ampc_tensor_set_requires_grad(n.p[i], true));
        ASSERT_OK(ampc_tensor_set_name(n.p[i], k_param_names[i]));
    }
    n.x = ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 2, (int64_t[]){B, D});
    n.y = ampc_tensor_new(n.ctx, AMPC_DTYPE_I32, 1, (int64_t[]){B});
    ASSERT_OK(ampc_tensor_copy_from(n.x, pb->x, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_from(n.y, pb->y, AMPC_DTYPE_I32));
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(n.ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = 1e-2}, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "all", n.p, NPARAM, NULL));
    ampc_grad_scaler *gs = NULL;
    if (mode == RUN_RECOMMENDED) {
        char spec[1100];
        snprintf(spec, sizeof spec, "%s=fp32", rec->fp32_modules);
        ASSERT_OK(ampc_module_precision_parse(n.ctx, spec));
        ASSERT_OK(ampc_grad_scaler_new(n.ctx, TU_SP(.enabled = true, .init_scale = ldexp(1, rec->scale_log2)), &gs));
    } else if (mode == RUN_FP16) {
        ASSERT_OK(ampc_grad_scaler_new(n.ctx, NULL, &gs));
    }
    if (st) ASSERT_OK(ampc_stats_attach(n.ctx, st));
    for (int s = 0; s < steps; s++) {
        run_result scratch; /* the dtypes of the first step only */
        if (mode != RUN_FP32)
            ASSERT_OK(
                ampc_autocast_begin(n.ctx, TU_AC(.dtype = AMPC_DTYPE_F16, .enabled = true, .cache_enabled = true)));
        ampc_tensor *loss = net_loss(&n, s ? &scratch : r);
        if (mode != RUN_FP32) ASSERT_OK(ampc_autocast_end(n.ctx));
        float v;
        ASSERT_OK(ampc_tensor_copy_to(loss, &v, AMPC_DTYPE_F32));
        r->loss[s] = v;
        ASSERT_OK(ampc_backward(n.ctx, gs ? ampc_grad_scaler_scale(gs, loss) : loss));
        if (gs) {
            ASSERT_OK(ampc_grad_scaler_step(gs, opt, NULL));
            ASSERT_OK(ampc_grad_scaler_update(gs));
        } else {
            ASSERT_OK(ampc_optim_step(opt));
        }
        ampc_optim_zero_grad(opt);
        ampc_ctx_step_end(n.ctx);
    }
    ampc_grad_scaler_state gss = {0};
    if (gs) ASSERT_OK(ampc_grad_scaler_state_save(gs, &gss));
    r->skipped = gss.skipped_steps;
    ampc_grad_scaler_free(gs);
    ampc_optim_free(opt);
    for (int i = 0; i < NPARAM; i++) ampc_tensor_free(n.p[i]);
    ampc_tensor_free(n.x), ampc_tensor_free(n.y);
    ampc_ctx_free(n.ctx);
}

/* The doctor on three FP32 steps: only big is unsafe in FP16 (its linear overflows); nothing in BF16. */
static void check_diagnosis(const ampc_stats *st, ampc_stats_recommendation *rec) {
    int big_linear;
    site(st, "big", "linear", AMPC_STATS_OUTPUT, "", &big_linear);
    assert_int_equal(advise(st, big_linear, AMPC_FORMAT_FP16).verdict, AMPC_VERDICT_UNSAFE);
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        ampc_stats_advice a = advise(st, i, AMPC_FORMAT_FP16);
        if (getenv("AMPC_TEST_VERBOSE"))
            print_message("%-4s %-12s %-10s %-11s lowered %d amax %-10.3g min %-10.3g %-13s k %3d  %s\n", e->module,
                          e->op, ampc_stats_role_name(e->role), e->param, e->lowered, e->amax, e->min_nonzero,
                          ampc_stats_verdict_name(a.verdict), a.scale_log2, a.why);
        if (a.verdict == AMPC_VERDICT_UNSAFE && strcmp(e->module, "big"))
            FAILF("site %s %s %s %s is unsafe outside big: %s", e->module, e->op, ampc_stats_role_name(e->role),
                  e->param, a.why);
        if (e->lowered && strcmp(e->module, "big"))
            assert_true(a.verdict == AMPC_VERDICT_SAFE || a.verdict == AMPC_VERDICT_NEEDS_SCALING);
        assert_true(advise(st, i, AMPC_FORMAT_BF16).verdict != AMPC_VERDICT_UNSAFE);
    }
    ASSERT_OK(ampc_stats_recommend(st, AMPC_FORMAT_FP16, rec));
    assert_string_equal(rec->fp32_modules, "big");
    assert_string_equal(rec->fp32_ops, "");
    assert_int_equal(rec->unsafe_sites, 1);
    /* the loss scale over the lowered gradients outside big (big's own need 2^22: they stay F32) */
    uint64_t hist[AMPC_STATS_BINS] = {0}, zeros = 0;
    double amax = 0;
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (e->role == AMPC_STATS_OUTPUT || !e->lowered || !strcmp(e->module, "big")) continue;
        for (int b = 0; b < AMPC_STATS_BINS; b++) hist[b] += e->hist[b];
        zeros += e->zeros, amax = fmax(amax, e->amax);
    }
    assert_int_equal(rec->scale_log2, fp16_scale_from_hist(hist, zeros, amax));
    assert_true(rec->scale_log2 > 0 && rec->normal_fraction > 0.999);
    ampc_stats_recommendation bf;
    ASSERT_OK(ampc_stats_recommend(st, AMPC_FORMAT_BF16, &bf));
    assert_true(bf.fp32_modules[0] == '\0' && bf.unsafe_sites == 0);
}

static void test_end_to_end_recommendation(void **state) {
    (void)state;
    problem pb;
    problem_make(&pb);
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    static run_result diag, fp32, recd, fp16;
    train(&pb, RUN_FP32, NULL, st, 3, &diag);
    assert_int_equal(ampc_stats_steps(st), 3);
    ampc_stats_recommendation rec;
    check_diagnosis(st, &rec);
    ampc_stats_free(st);

    train(&pb, RUN_FP32, NULL, NULL, STEPS, &fp32);
    train(&pb, RUN_RECOMMENDED, &rec, NULL, STEPS, &recd);
    train(&pb, RUN_FP16, NULL, NULL, STEPS, &fp16);
    assert_true(diag.loss[0] == fp32.loss[0] && diag.loss[2] == fp32.loss[2]); /* same start, same path */
    /* the recommended run is mixed: inp in F16, big kept in F32 */
    assert_int_equal(recd.inp_dtype, AMPC_DTYPE_F16);
    assert_int_equal(recd.big_dtype, AMPC_DTYPE_F32);
    assert_int_equal(fp16.big_dtype, AMPC_DTYPE_F16);
    if (getenv("AMPC_TEST_VERBOSE"))
        for (int s = 0; s < STEPS; s++)
            print_message("step %2d  fp32 %.6f  recommended %.6f  fp16 %g  (scale 2^%d)\n", s, fp32.loss[s],
                          recd.loss[s], fp16.loss[s], rec.scale_log2);
    assert_true(fp32.loss[STEPS - 1] < 0.1 * fp32.loss[0]); /* it learns (1.44 -> 0.0022) */
    assert_int_equal(recd.skipped, 0);
    /* Tolerance 2e-2 relative, at every step: FP16 rounds inp's and out's inputs and weights (2^-11 relative
     * each) and the trajectories drift apart over the 50 AdamW steps; observed at most 2.1e-3 (ref, avx2,
     * avx512 and amx kernels alike), so 2e-2 leaves a factor 10 while a broken run (a skipped step, an
     * overflow, a wrong scale) is off by far more. */
    for (int s = 0; s < STEPS; s++)
        if (!isfinite(recd.loss[s]) || fabs(recd.loss[s] - fp32.loss[s]) > 2e-2 * fp32.loss[s])
            FAILF("step %d: recommended loss %.6f, fp32 %.6f", s, recd.loss[s], fp32.loss[s]);
    /* plain FP16: big's linear overflows in the forward pass, whatever the loss scale, so every loss is
     * non-finite and the scaler skips every step */
    for (int s = 0; s < STEPS; s++) assert_false(isfinite(fp16.loss[s]));
    assert_int_equal(fp16.skipped, STEPS);
    for (int i = 0; i < NPARAM; i++) free(pb.init[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sites_and_counts, end_step),
        cmocka_unit_test_teardown(test_lifetime, end_step),
        cmocka_unit_test_teardown(test_lowered_in_disabled_region, end_step),
        cmocka_unit_test_teardown(test_param_grad_under_autocast, end_step),
        cmocka_unit_test_teardown(test_verdict_overflow, end_step),
        cmocka_unit_test_teardown(test_verdict_small_gradients, end_step),
        cmocka_unit_test_teardown(test_verdict_kept_fp32, end_step),
        cmocka_unit_test_teardown(test_end_to_end_recommendation, end_step),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
