/* test_stochastic_rounding.c: stochastic rounding of optimizer updates into BF16 parameters without F32
 * masters (ampc_optim_params.stochastic_rounding with AMPC_MASTER_NONE):
 *  - unbiased: one step landing at a fraction f of a BF16 step (both signs, several binades, across the
 *    binade edge) gives only the two neighbours, up with probability f within a 5-sigma binomial bound;
 *    many updates far below half a BF16 step are all lost by plain rounding and kept on average by SR;
 *  - exact updates stay exact, NaN stays NaN and infinities stay infinite, negative parameters round in
 *    magnitude (w and -w give bit patterns differing only in the sign);
 *  - the documented draws: element e of parameter k at step t rounds against word e % 4 of
 *    ampc_rng_block(seed, SR_STREAM + k, (t - 1) * ceil(n / 4) + e / 4);
 *  - deterministic: the same bits for the same seed and for 1 or 2 threads (SGD and AdamW), other bits
 *    for another seed; F32 parameters are not rounded;
 *  - refusals: SR with master AUTO, an F16 parameter (named; nothing of the group attached);
 *  - a checkpoint of a BF16 MLP trained with SR resumes bit for bit in a fresh context of another seed
 *    (the restored RNG carries the seed SR draws from). */
#include "test_dir.h"

#include <stdlib.h>

TU_CONTEXT(11, 2)

enum { BIG = 1 << 16 };
#define STEP1 0x1p-7                    /* BF16's step in [1, 2) */
#define SR_STREAM 0x5352000000000000ull /* src/optim/update.c: the Philox stream of parameter 0 */

static float g_w[BIG + 64], g_g[BIG + 64];

static void fill(float *x, int64_t n, float v) {
    for (int64_t i = 0; i < n; i++) x[i] = v;
}

static ampc_tensor *param_in(ampc_ctx *ctx, ampc_dtype dt, int64_t n, const float *init, const char *name) {
    ampc_tensor *p = ampc_tensor_new(ctx, dt, 1, (int64_t[]){n});
    if (!p) FAILF("ampc_tensor_new: %s", ampc_last_error());
    ASSERT_OK(ampc_tensor_copy_from(p, init, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_set_requires_grad(p, true));
    ASSERT_OK(ampc_tensor_set_name(p, name));
    return p;
}

/* p.grad = g (a backward of sum(p * g), g in p's dtype) */
static void give_grad_in(ampc_ctx *ctx, ampc_tensor *p, const float *g) {
    int64_t n = ampc_tensor_numel(p);
    ampc_tensor *c = ampc_tensor_from_buffer(ctx, ampc_tensor_dtype(p), 1, (int64_t[]){n}, g, AMPC_DTYPE_F32);
    ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, ampc_mul(ctx, p, c), NULL, 0, false)));
}

static ampc_optim *optim_in(ampc_ctx *ctx, ampc_optim_kind kind, double lr, bool sr, ampc_tensor **p, int n) {
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(
        ctx, &(ampc_optim_params){.kind = kind, .lr = lr, .master = AMPC_MASTER_NONE, .stochastic_rounding = sr},
        &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "all", p, n, NULL));
    return opt;
}

/* One optimizer step of every parameter with the gradients gs[i] (for p[i]). */
static void step_in(ampc_ctx *ctx, ampc_optim *opt, ampc_tensor **p, const float *const *gs, int n) {
    for (int i = 0; i < n; i++) give_grad_in(ctx, p[i], gs[i]);
    ASSERT_OK(ampc_optim_step(opt));
    ampc_optim_zero_grad(opt);
    ampc_ctx_step_end(ctx);
}

static uint16_t bf16_at(const ampc_tensor *p, int64_t i) { return ((const uint16_t *)ampc_tensor_data(p))[i]; }

/* ---- unbiased ---- */

/* An SGD step from w0 with gradient g (every element alike): each result is one of the BF16 neighbours of
 * the F32 value x = w0 - lr * g, and the count rounded away from zero is n * f within 5 sigma, f the
 * fraction of the step from the neighbour nearer zero. */
static void check_one_step(float w0, float g, double lr) {
    fill(g_w, BIG, w0), fill(g_g, BIG, g);
    ampc_tensor *p = param_in(g_ctx, AMPC_DTYPE_BF16, BIG, g_w, "w");
    ampc_optim *opt = optim_in(g_ctx, AMPC_OPTIM_SGD, lr, true, &p, 1);
    step_in(g_ctx, opt, &p, (const float *[]){g_g}, 1);
    float x = w0 + -(float)lr * g; /* g = +-1: the kernel's F32 result whatever its operation order */
    uint32_t lo = tu_bits(x) & 0xffff0000u, hi = lo + 0x10000u;
    double f = (fabs((double)x) - fabs((double)tu_float(lo))) /
               (fabs((double)tu_float(hi)) - fabs((double)tu_float(lo)));
    int64_t up = 0;
    for (int64_t i = 0; i < BIG; i++) {
        uint16_t b = bf16_at(p, i);
        if (b != lo >> 16 && b != hi >> 16)
            FAILF("w0 %g lr %g: element %lld is %#x, not a neighbour %#x or %#x of %.9g", w0, lr, (long long)i, b,
                  lo >> 16, hi >> 16, x);
        up += b == hi >> 16;
    }
    double mean = BIG * f, bound = 5 * sqrt(BIG * f * (1 - f)) + 1;
    if (fabs((double)up - mean) > bound)
        FAILF("w0 %g lr %g (x %.9g, f %.4f): %lld of %d rounded up, expected %.1f +- %.1f", w0, lr, x, f, (long long)up,
              BIG, mean, bound);
    ampc_optim_free(opt);
    ampc_tensor_free(p);
}

static void test_one_step_unbiased(void **state) {
    (void)state;
    check_one_step(1.0f, -1.0f, 0.25 * STEP1); /* 1 + f step: up to 1 + 2^-7 with probability f */
    check_one_step(1.0f, -1.0f, 0.5 * STEP1);
    check_one_step(1.0f, -1.0f, 0.9 * STEP1);
    check_one_step(-1.0f, 1.0f, 0.25 * STEP1);  /* negative: away from zero with probability f */
    check_one_step(3.0f, 1.0f, 0.3 * 0x1p-6);   /* 3 - small: to 3 with probability 0.7 */
    check_one_step(-3.0f, -1.0f, 0.3 * 0x1p-6); /* -3 + small */
    check_one_step(1.0f, 1.0f, 0.3 * 0x1p-8);   /* below 1 (the step halves): to 1 with probability 0.7 */
    check_one_step(0x1p-100f, -1.0f, 0.6 * 0x1p-107);
}

/* K updates of a tenth of a step: plain rounding loses every one, SR moves the mean by K tenths. */
static void test_small_updates_kept_on_average(void **state) {
    (void)state;
    enum { K = 32 };
    const double lr = 0.1 * STEP1;
    fill(g_w, BIG, 1.0f), fill(g_g, BIG, -1.0f);
    ampc_tensor *plain = param_in(g_ctx, AMPC_DTYPE_BF16, BIG, g_w, "plain"),
                *sr = param_in(g_ctx, AMPC_DTYPE_BF16, BIG, g_w, "sr");
    ampc_optim *a = optim_in(g_ctx, AMPC_OPTIM_SGD, lr, false, &plain, 1),
               *b = optim_in(g_ctx, AMPC_OPTIM_SGD, lr, true, &sr, 1);
    for (int t = 0; t < K; t++) {
        give_grad_in(g_ctx, plain, g_g), give_grad_in(g_ctx, sr, g_g);
        ASSERT_OK(ampc_optim_step(a));
        ASSERT_OK(ampc_optim_step(b));
        ampc_optim_zero_grad(a), ampc_optim_zero_grad(b);
        ampc_ctx_step_end(g_ctx);
    }
    ASSERT_OK(ampc_tensor_copy_to(plain, g_w, AMPC_DTYPE_F32));
    for (int64_t i = 0; i < BIG; i++)
        if (g_w[i] != 1.0f)
            FAILF("plain rounding: element %lld is %.9g, expected 1 (every update lost)", (long long)i, g_w[i]);
    ASSERT_OK(ampc_tensor_copy_to(sr, g_w, AMPC_DTYPE_F32));
    double sum = 0, f = (double)(float)lr / STEP1;
    for (int64_t i = 0; i < BIG; i++) sum += g_w[i];
    /* every value stays on the grid of [1, 2): each step moves an element a whole step with probability f */
    double mean = sum / BIG, want = 1 + K * (double)(float)lr, bound = 5 * STEP1 * sqrt(K * f * (1 - f) / BIG);
    if (fabs(mean - want) > bound) FAILF("SR: mean %.9g after %d steps, expected %.9g +- %.3g", mean, K, want, bound);
    ampc_optim_free(a), ampc_optim_free(b);
    ampc_tensor_free(plain), ampc_tensor_free(sr);
}

/* ---- exact, special and negative values ---- */

/* w = s (1 + (i % 64) 2^-7), g = -s (i % 3), lr 2^-7: every step lands on a BF16 value (or stays). */
static void test_exact_stays_exact(void **state) {
    (void)state;
    enum { N = 3 * 4096 + 5 };
    for (int i = 0; i < N; i++) {
        float s = i % 2 ? -1.0f : 1.0f;
        g_w[i] = s * (1.0f + (float)(i % 64) * (float)STEP1), g_g[i] = -s * (float)(i % 3);
    }
    ampc_tensor *p = param_in(g_ctx, AMPC_DTYPE_BF16, N, g_w, "w");
    ampc_optim *opt = optim_in(g_ctx, AMPC_OPTIM_SGD, STEP1, true, &p, 1);
    for (int t = 1; t <= 5; t++) {
        step_in(g_ctx, opt, &p, (const float *[]){g_g}, 1);
        for (int i = 0; i < N; i++) {
            float s = i % 2 ? -1.0f : 1.0f, want = s * (1.0f + (float)(i % 64 + t * (i % 3)) * (float)STEP1);
            float got = ampc_bf16_to_f32(bf16_at(p, i));
            if (got != want) FAILF("step %d element %d: %.9g, expected exactly %.9g", t, i, got, want);
        }
    }
    ampc_optim_free(opt);
    ampc_tensor_free(p);
}

static void test_nan_and_inf(void **state) {
    (void)state;
    enum { N = 6 };
    const float w[N] = {NAN, INFINITY, -INFINITY, 1.0f, 2.0f, 0.0f}, g[N] = {0, 0, 0, NAN, INFINITY, -INFINITY};
    ampc_tensor *p = param_in(g_ctx, AMPC_DTYPE_BF16, N, w, "w");
    ampc_optim *opt = optim_in(g_ctx, AMPC_OPTIM_SGD, 0.01, true, &p, 1);
    for (int t = 0; t < 3; t++) step_in(g_ctx, opt, &p, (const float *[]){g}, 1);
    float got[N];
    ASSERT_OK(ampc_tensor_copy_to(p, got, AMPC_DTYPE_F32));
    if (!isnan(got[0]) || !isnan(got[3])) FAILF("NaN did not stay NaN: %g %g", got[0], got[3]);
    if (got[1] != INFINITY || got[2] != -INFINITY || got[4] != -INFINITY || got[5] != INFINITY)
        FAILF("infinities: %g %g %g %g, expected inf -inf -inf inf", got[1], got[2], got[4], got[5]);
    ampc_optim_free(opt);
    ampc_tensor_free(p);
}

/* w and -w with gradients g and -g, same context seed, both parameter 0 of their optimizer: the same
 * random bits, so the results differ only in the sign (rounding is in magnitude). */
static void test_sign_symmetric(void **state) {
    (void)state;
    enum { N = 2 * 4096 + 3 };
    static float nw[N], ng[N];
    uint64_t s = 17;
    for (int i = 0; i < N; i++) {
        g_w[i] = ampc_bf16_to_f32(ampc_bf16_from_f32((float)((double)(tu_rand(&s) >> 11) * 0x1p-53 * 4 - 2)));
        g_g[i] = (float)((double)(tu_rand(&s) >> 11) * 0x1p-53 - 0.5);
        nw[i] = -g_w[i], ng[i] = -g_g[i];
    }
    ampc_tensor *p = param_in(g_ctx, AMPC_DTYPE_BF16, N, g_w, "p"), *q = param_in(g_ctx, AMPC_DTYPE_BF16, N, nw, "q");
    ampc_optim *a = optim_in(g_ctx, AMPC_OPTIM_SGD, 0.01, true, &p, 1),
               *b = optim_in(g_ctx, AMPC_OPTIM_SGD, 0.01, true, &q, 1);
    for (int t = 0; t < 3; t++) {
        step_in(g_ctx, a, &p, (const float *[]){g_g}, 1);
        step_in(g_ctx, b, &q, (const float *[]){ng}, 1);
    }
    int moved = 0;
    for (int i = 0; i < N; i++) {
        uint16_t x = bf16_at(p, i), y = bf16_at(q, i);
        if ((x & 0x7fff) == 0 && (y & 0x7fff) == 0) continue; /* an exact zero is +0 on both sides */
        if (y != (x ^ 0x8000)) FAILF("element %d: %#x for w, %#x for -w", i, x, y);
        moved += ampc_bf16_to_f32(x) != g_w[i];
    }
    assert_true(moved > N / 2);
    ampc_optim_free(a), ampc_optim_free(b);
    ampc_tensor_free(p), ampc_tensor_free(q);
}

/* ---- the documented draws ---- */

/* BF16 values of magnitude in [0.5, 4): with lr 2^-10 and such gradients every F32 update is exact. */
static float random_bf16(uint64_t *s) {
    uint64_t r = tu_rand(s);
    float v = (1.0f + (float)(r % 128) / 128.0f) * (float)ldexp(1.0, (int)((r >> 8) % 3) - 1);
    return (r >> 16) & 1 ? -v : v;
}

static uint16_t sr_ref(float x, uint64_t seed, uint64_t k, int64_t t, int64_t n, int64_t e) {
    uint32_t w[4];
    ampc_rng_block(seed, SR_STREAM + k, (uint64_t)(t - 1) * (uint64_t)((n + 3) / 4) + (uint64_t)(e / 4), w);
    uint32_t b = tu_bits(x);
    return (uint16_t)((b >> 16) + ((b & 0xffffu) > (w[e % 4] & 0xffffu)));
}

static void test_documented_draws(void **state) {
    (void)state;
    enum { NA = 5, NB = 3 * 4096 + 3 }; /* b: parameter 1, several chunks, n % 4 = 3 */
    static float wa[NA], wb[NB], ga[NA], gb[NB];
    uint64_t s = 5;
    for (int i = 0; i < NA; i++) wa[i] = random_bf16(&s);
    for (int i = 0; i < NB; i++) wb[i] = random_bf16(&s);
    ampc_tensor *p[2] = {param_in(g_ctx, AMPC_DTYPE_BF16, NA, wa, "a"), param_in(g_ctx, AMPC_DTYPE_BF16, NB, wb, "b")};
    ampc_optim *opt = optim_in(g_ctx, AMPC_OPTIM_SGD, 0x1p-10, true, p, 2);
    const uint64_t seed = ampc_ctx_rng(g_ctx)->seed;
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < NA; i++) ga[i] = random_bf16(&s);
        for (int i = 0; i < NB; i++) gb[i] = random_bf16(&s);
        step_in(g_ctx, opt, p, (const float *[]){ga, gb}, 2);
        float *w[2] = {wa, wb};
        const float *g[2] = {ga, gb};
        for (int k = 0; k < 2; k++)
            for (int64_t e = 0, n = ampc_tensor_numel(p[k]); e < n; e++) {
                float x = (float)((double)w[k][e] - 0x1p-10 * (double)g[k][e]); /* exact */
                uint16_t want = sr_ref(x, seed, (uint64_t)k, t, n, e), got = bf16_at(p[k], e);
                if (got != want)
                    FAILF("step %d parameter %d element %lld: %#x, the documented draw gives %#x (x %.9g)", t, k,
                          (long long)e, got, want, x);
                w[k][e] = ampc_bf16_to_f32(got);
            }
    }
    ampc_optim_free(opt);
    ampc_tensor_free(p[0]), ampc_tensor_free(p[1]);
}

/* ---- determinism ---- */

enum { DA = BIG + 3, DB = 37 };

typedef struct det_run {
    uint64_t seed;
    int threads;
    ampc_optim_kind kind;
    bool sr;
} det_run;

typedef struct det_out {
    uint16_t a[DA], b[DB];
    float f[DB];
} det_out;

/* A fresh context; BF16 parameters a (16 chunks) and b and an F32 parameter f; 3 steps of fixed gradients. */
static void det(const det_run *r, det_out *out) {
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = r->seed, .threads = r->threads}, &ctx));
    static float ga[DA], gb[DB];
    uint64_t s = 99;
    for (int i = 0; i < DA; i++) ga[i] = (float)((double)(tu_rand(&s) >> 11) * 0x1p-53 * 2 - 1);
    ampc_tensor *p[3] = {param_in(ctx, AMPC_DTYPE_BF16, DA, ga, "a"), param_in(ctx, AMPC_DTYPE_BF16, DB, ga + 1, "b"),
                         param_in(ctx, AMPC_DTYPE_F32, DB, ga + 2, "f")};
    ampc_optim *opt = optim_in(ctx, r->kind, r->kind == AMPC_OPTIM_SGD ? 0.003 : 1e-3, r->sr, p, 3);
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < DA; i++) ga[i] = (float)((double)(tu_rand(&s) >> 11) * 0x1p-53 - 0.5);
        for (int i = 0; i < DB; i++) gb[i] = ga[i + 5];
        step_in(ctx, opt, p, (const float *[]){ga, gb, gb}, 3);
    }
    memcpy(out->a, ampc_tensor_data(p[0]), sizeof out->a);
    memcpy(out->b, ampc_tensor_data(p[1]), sizeof out->b);
    memcpy(out->f, ampc_tensor_data(p[2]), sizeof out->f);
    ampc_optim_free(opt);
    for (int i = 0; i < 3; i++) ampc_tensor_free(p[i]);
    ampc_ctx_free(ctx);
}

static int64_t count_diff(const uint16_t *x, const uint16_t *y, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += x[i] != y[i];
    return d;
}

static void check_determinism(ampc_optim_kind kind) {
    static det_out ref, o;
    det(&(det_run){1, 2, kind, true}, &ref);
    det(&(det_run){1, 2, kind, true}, &o); /* again */
    assert_memory_equal(&o, &ref, sizeof o);
    det(&(det_run){1, 1, kind, true}, &o); /* one thread */
    assert_memory_equal(&o, &ref, sizeof o);
    det(&(det_run){2, 2, kind, true}, &o); /* another seed: other draws; F32 f is not rounded */
    int64_t d = count_diff(o.a, ref.a, DA);
    if (d < DA / 20) FAILF("seed 2 changed only %lld of %d elements", (long long)d, DA);
    assert_memory_equal(o.f, ref.f, sizeof o.f);
    det(&(det_run){1, 2, kind, false}, &o); /* round to nearest: other bits; f the same */
    d = count_diff(o.a, ref.a, DA);
    if (d < DA / 20) FAILF("rounding to nearest differs from SR in only %lld of %d elements", (long long)d, DA);
    assert_memory_equal(o.f, ref.f, sizeof o.f);
}

static void test_deterministic_sgd(void **state) {
    (void)state;
    check_determinism(AMPC_OPTIM_SGD);
}

static void test_deterministic_adamw(void **state) {
    (void)state;
    check_determinism(AMPC_OPTIM_ADAMW);
}

/* ---- refusals ---- */

static void test_refusals(void **state) {
    (void)state;
    ampc_optim *opt = (ampc_optim *)&opt;
    assert_int_equal(ampc_optim_new(g_ctx, &(ampc_optim_params){.stochastic_rounding = true}, &opt),
                     AMPC_STATUS_INVALID_ARG);
    assert_null(opt);
    ASSERT_ERROR_MENTIONS("ampc_optim_new", "stochastic_rounding", "master");
    const float one[4] = {1, 1, 1, 1};
    ampc_tensor *p[2] = {param_in(g_ctx, AMPC_DTYPE_BF16, 4, one, "ok"), param_in(g_ctx, AMPC_DTYPE_F16, 4, one, "h")};
    ASSERT_OK(
        ampc_optim_new(g_ctx, &(ampc_optim_params){.master = AMPC_MASTER_NONE, .stochastic_rounding = true}, &opt));
    assert_int_equal(ampc_optim_add_group(opt, "all", p, 2, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_optim_add_group", "parameter 1", "'h'", "F16");
    assert_int_equal(ampc_optim_num_params(opt), 0);
    ASSERT_OK(ampc_optim_add_group(opt, "bf16", p, 1, NULL)); /* nothing of the refused group stayed */
    ampc_optim_free(opt);
    /* without SR an F16 parameter is fine */
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.master = AMPC_MASTER_NONE}, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "f16", p + 1, 1, NULL));
    ampc_optim_free(opt);
    ampc_tensor_free(p[0]), ampc_tensor_free(p[1]);
}

/* ---- checkpoint and resume ---- */

enum { CK_K = 3, CK_B = 8, CK_IN = 12, CK_CLASSES = 5 };

typedef struct trainer {
    ampc_ctx *ctx;
    ampc_model *model;
    ampc_optim *opt;
} trainer;

static void trainer_new_sr(trainer *t, uint64_t ctx_seed, uint64_t model_seed, bool sr) {
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = ctx_seed, .threads = 2}, &t->ctx));
    ampc_model_config mc = {.kind = AMPC_MODEL_MLP,
                            .seed = model_seed,
                            .param_dtype = AMPC_DTYPE_BF16,
                            .in_features = CK_IN,
                            .hidden = {64},
                            .classes = CK_CLASSES};
    ASSERT_OK(ampc_model_new(t->ctx, &mc, &t->model));
    ASSERT_OK(ampc_optim_new(t->ctx,
                             &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW,
                                                  .lr = 1e-3,
                                                  .weight_decay = 0.1,
                                                  .master = AMPC_MASTER_NONE,
                                                  .stochastic_rounding = sr},
                             &t->opt));
    ASSERT_OK(ampc_model_add_to_optim(t->model, t->opt));
}

static void trainer_new(trainer *t, uint64_t ctx_seed, uint64_t model_seed) {
    trainer_new_sr(t, ctx_seed, model_seed, true);
}

static void trainer_free(trainer *t) { ampc_optim_free(t->opt), ampc_model_free(t->model), ampc_ctx_free(t->ctx); }
/* A checkpoint of a stochastically rounding run does not continue as a run that rounds to nearest. */
static void expect_rounding_refused(const char *path) {
    trainer d;
    trainer_new_sr(&d, 7, 5, false);
    ampc_safetensors *ck;
    ASSERT_OK(ampc_checkpoint_open(path, &ck));
    ampc_checkpoint_state st = {.model = d.model, .optim = d.opt};
    assert_int_equal(ampc_checkpoint_restore(ck, &st), AMPC_STATUS_FORMAT);
    assert_non_null(strstr(ampc_last_error(), "stochastically"));
    ampc_safetensors_free(ck);
    trainer_free(&d);
}

/* Training step `step` (1-based): a batch that depends on the step only, BF16 autocast. */
static void trainer_step(trainer *t, int step) {
    float x[CK_B * CK_IN];
    int64_t y[CK_B];
    uint64_t s = 1000 + (uint64_t)step;
    for (int i = 0; i < CK_B * CK_IN; i++) x[i] = (float)((double)(tu_rand(&s) >> 11) * 0x1p-53 * 2 - 1);
    for (int i = 0; i < CK_B; i++) y[i] = (int64_t)(tu_rand(&s) % CK_CLASSES);
    ampc_tensor *xt = ampc_tensor_from_buffer(t->ctx, AMPC_DTYPE_F32, 2, (int64_t[]){CK_B, CK_IN}, x, AMPC_DTYPE_F32),
                *yt = ampc_tensor_from_buffer(t->ctx, AMPC_DTYPE_I64, 1, (int64_t[]){CK_B}, y, AMPC_DTYPE_I64);
    ASSERT_OK(ampc_autocast_begin(t->ctx, TU_AC(.dtype = AMPC_DTYPE_BF16, .enabled = true)));
    ampc_tensor *loss = ampc_model_loss(t->model, xt, yt);
    ampc_autocast_end(t->ctx);
    if (!loss) FAILF("loss: %s", ampc_last_error());
    ASSERT_OK(ampc_backward(t->ctx, loss));
    ASSERT_OK(ampc_optim_step(t->opt));
    ampc_optim_zero_grad(t->opt);
    ampc_ctx_step_end(t->ctx);
}

/* Elements of the model's parameters that differ between a and b. */
static int64_t params_diff(const trainer *a, const trainer *b) {
    int64_t d = 0;
    for (int i = 0; i < ampc_model_num_params(a->model); i++) {
        const ampc_tensor *pa = ampc_model_param(a->model, i), *pb = ampc_model_param(b->model, i);
        assert_int_equal(ampc_tensor_dtype(pa), AMPC_DTYPE_BF16);
        d += count_diff(ampc_tensor_data(pa), ampc_tensor_data(pb), ampc_tensor_numel(pa));
    }
    return d;
}

/* A fresh context of seed ctx_seed, model and optimizer, restored from path (the RNG too when with_rng),
 * then steps K+1..2K. */
static void resume(trainer *t, const char *path, uint64_t ctx_seed, bool with_rng) {
    trainer_new(t, ctx_seed, 5); /* the checkpoint's model configuration, seed included */
    ampc_safetensors *ck;
    ASSERT_OK(ampc_checkpoint_open(path, &ck));
    ampc_checkpoint_state st = {.model = t->model, .optim = t->opt, .rng = with_rng ? ampc_ctx_rng(t->ctx) : NULL};
    ASSERT_OK(ampc_checkpoint_restore(ck, &st));
    assert_int_equal(st.step, CK_K);
    ampc_safetensors_free(ck);
    for (int s = CK_K + 1; s <= 2 * CK_K; s++) trainer_step(t, s);
}

static void test_checkpoint_resume_bit_exact(void **state) {
    (void)state;
    tu_dir_make("sr");
    char path[512];
    snprintf(path, sizeof path, "%s", tu_path("sr.safetensors"));
    trainer a, b, c;
    trainer_new(&a, 7, 5);
    for (int s = 1; s <= CK_K; s++) trainer_step(&a, s);
    ampc_checkpoint_state sa = {.model = a.model, .optim = a.opt, .rng = ampc_ctx_rng(a.ctx), .step = CK_K};
    ASSERT_OK(ampc_checkpoint_save(path, &sa));
    for (int s = CK_K + 1; s <= 2 * CK_K; s++) trainer_step(&a, s);
    resume(&b, path, 99, true);
    assert_int_equal(ampc_optim_steps(b.opt), 2 * CK_K);
    int64_t d = params_diff(&a, &b);
    if (d) FAILF("the resumed run differs from the uninterrupted one in %lld parameter elements", (long long)d);
    /* the seed matters: without restoring the RNG the draws come from the new context's seed */
    resume(&c, path, 99, false);
    assert_true(params_diff(&a, &c) > 0);
    expect_rounding_refused(path);
    trainer_free(&a), trainer_free(&b), trainer_free(&c);
    tu_dir_remove();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_step_unbiased), cmocka_unit_test(test_small_updates_kept_on_average),
        cmocka_unit_test(test_exact_stays_exact), cmocka_unit_test(test_nan_and_inf),
        cmocka_unit_test(test_sign_symmetric),    cmocka_unit_test(test_documented_draws),
        cmocka_unit_test(test_deterministic_sgd), cmocka_unit_test(test_deterministic_adamw),
        cmocka_unit_test(test_refusals),          cmocka_unit_test(test_checkpoint_resume_bit_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
