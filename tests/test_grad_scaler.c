/* test_grad_scaler.c: the GradScaler against PyTorch's own tests (test/test_cuda.py, test_torch.py; the
 * mirrored test is named above each case) plus the opt-in extras: hysteresis, min/max scale and the
 * tutorials' DynamicLossScaler. Models are small Linear stacks trained with SGD; a "control" run without
 * scaling must end with the same bits, since scaling by powers of two is exact. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(5, 2)

/* ---- a one-parameter optimizer whose gradient the test sets directly ---- */

typedef struct one {
    ampc_tensor *w;
    ampc_optim *opt;
} one;

static one one_new(ampc_dtype dt, const char *name) {
    one o;
    o.w = ampc_tensor_new(g_ctx, dt, 2, (int64_t[]){20, 20});
    ASSERT_OK(ampc_tensor_set_requires_grad(o.w, true));
    ASSERT_OK(ampc_tensor_set_name(o.w, name));
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.lr = 1.0}, &o.opt));
    ASSERT_OK(ampc_optim_add_group(o.opt, "all", &o.w, 1, NULL));
    return o;
}

/* Gives w the gradient `value` everywhere (through a real backward of sum(w * value)). */
static void set_grad(one *o, double value) {
    ampc_tensor_clear_grad(o->w);
    ampc_tensor *c = ampc_tensor_full(g_ctx, ampc_tensor_dtype(o->w), 2, (int64_t[]){20, 20}, value);
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul(g_ctx, o->w, c), NULL, 0, false)));
}

static void one_free(one *o) {
    ampc_ctx_step_end(g_ctx);
    ampc_optim_free(o->opt);
    ampc_tensor_free(o->w);
}

static ampc_grad_scaler *scaler(ampc_grad_scaler_params p) {
    ampc_grad_scaler *gs;
    p.enabled = true;
    p.init = AMPC_PARAMS_INIT;
    ASSERT_OK(ampc_grad_scaler_new(g_ctx, &p, &gs));
    return gs;
}

/* One iteration with a gradient that is finite or not: unscale, step, update. */
static void iterate(ampc_grad_scaler *gs, one *o, bool inf) {
    set_grad(o, inf ? INFINITY : 1.0);
    ASSERT_OK(ampc_grad_scaler_step(gs, o->opt, NULL));
    ASSERT_OK(ampc_grad_scaler_update(gs));
}

static int64_t tracker(const ampc_grad_scaler *gs) {
    ampc_grad_scaler_state st;
    ASSERT_OK(ampc_grad_scaler_state_save(gs, &st));
    return st.growth_tracker;
}

/* test_grad_scaling_update_scale */
static void test_update_rule_sequence(void **state) {
    (void)state;
    one o = one_new(AMPC_DTYPE_F32, "w");
    ampc_grad_scaler *gs = scaler(
        (ampc_grad_scaler_params){.init_scale = 4, .growth_factor = 2, .backoff_factor = 0.25, .growth_interval = 2});
    iterate(gs, &o, false);
    assert_true(tracker(gs) == 1 && ampc_grad_scaler_get_scale(gs) == 4.0);
    iterate(gs, &o, false);
    assert_true(tracker(gs) == 0 && ampc_grad_scaler_get_scale(gs) == 8.0);
    iterate(gs, &o, true);
    assert_true(tracker(gs) == 0 && ampc_grad_scaler_get_scale(gs) == 2.0);
    ampc_grad_scaler_free(gs);
    one_free(&o);
}

/* test_grad_scale_will_not_overflow */
static void test_will_not_overflow(void **state) {
    (void)state;
    one o = one_new(AMPC_DTYPE_F32, "w");
    ampc_grad_scaler *gs = scaler(
        (ampc_grad_scaler_params){.init_scale = 1e38, .growth_factor = 16, .growth_interval = 1});
    iterate(gs, &o, false);
    assert_true(ampc_grad_scaler_get_scale(gs) == (double)1e38f); /* growth to inf refused, tracker reset */
    assert_int_equal(tracker(gs), 0);
    ampc_grad_scaler_free(gs);
    one_free(&o);
}

/* test_grad_scaling_unscale: 4.0 gradients times 0.25 are exactly 1, in F32, F16 and BF16 (PyTorch refuses
 * F16 gradients; ampc does not); an inf in any gradient is found and named */
static void test_unscale_dtypes(void **state) {
    (void)state;
    static const ampc_dtype dts[3] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    for (int d = 0; d < 3; d++) {
        one o = one_new(dts[d], "layers.1.weight");
        ampc_grad_scaler *gs = scaler((ampc_grad_scaler_params){.init_scale = 4});
        set_grad(&o, 4.0);
        ASSERT_OK(ampc_grad_scaler_unscale(gs, o.opt));
        float g[400];
        ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(o.w), g, AMPC_DTYPE_F32));
        for (int i = 0; i < 400; i++) assert_true(g[i] == 1.0f);
        ampc_grad_scaler_overflow ov;
        ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &ov));
        assert_false(ov.found_inf);
        ASSERT_OK(ampc_grad_scaler_update(gs));
        /* a NaN in one element */
        set_grad(&o, 1.0);
        ASSERT_OK(ampc_tensor_fill(
            ampc_tensor_slice(ampc_tensor_reshape(ampc_tensor_grad(o.w), 1, (int64_t[]){400}), 0, 397, 398, 1), NAN));
        bool stepped = true;
        ASSERT_OK(ampc_grad_scaler_step(gs, o.opt, &stepped));
        assert_false(stepped);
        ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &ov));
        assert_true(ov.found_inf && ov.tensors == 1);
        assert_string_equal(ov.first_tensor, "layers.1.weight");
        ASSERT_OK(ampc_grad_scaler_update(gs));
        assert_true(ampc_grad_scaler_get_scale(gs) == 2.0);
        ampc_grad_scaler_free(gs);
        one_free(&o);
    }
}

/* the per-optimizer state machine (READY / UNSCALED / STEPPED) and its errors */
static void test_state_machine_errors(void **state) {
    (void)state;
    one o = one_new(AMPC_DTYPE_F32, "w");
    ampc_grad_scaler *gs = scaler((ampc_grad_scaler_params){0});
    assert_int_equal(ampc_grad_scaler_update(gs), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("no inf checks were recorded");
    set_grad(&o, 1.0);
    ASSERT_OK(ampc_grad_scaler_unscale(gs, o.opt));
    assert_int_equal(ampc_grad_scaler_unscale(gs, o.opt), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("already called", "since the last update");
    ASSERT_OK(ampc_grad_scaler_step(gs, o.opt, NULL));
    assert_int_equal(ampc_grad_scaler_step(gs, o.opt, NULL), AMPC_STATUS_STATE);
    assert_int_equal(ampc_grad_scaler_unscale(gs, o.opt), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("after step()");
    ASSERT_OK(ampc_grad_scaler_update(gs));
    ASSERT_OK(ampc_grad_scaler_unscale(gs, o.opt)); /* READY again */
    ampc_grad_scaler_free(gs);
    one_free(&o);
    assert_int_equal(ampc_grad_scaler_new(g_ctx, TU_SP(.growth_factor = 0.9, .enabled = true), &gs),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("growth_factor must be > 1");
    assert_int_equal(ampc_grad_scaler_new(g_ctx, TU_SP(.backoff_factor = 1.5, .enabled = true), &gs),
                     AMPC_STATUS_INVALID_ARG);
}

/* test_params_invalidated_with_grads_invalidated_between_unscale_and_step */
static void test_found_inf_decided_at_unscale(void **state) {
    (void)state;
    one o = one_new(AMPC_DTYPE_F32, "w");
    ampc_grad_scaler *gs = scaler((ampc_grad_scaler_params){0});
    set_grad(&o, 1.0);
    ASSERT_OK(ampc_grad_scaler_unscale(gs, o.opt));
    ASSERT_OK(ampc_tensor_fill(ampc_tensor_grad(o.w), INFINITY)); /* broken after the check */
    bool stepped = false;
    ASSERT_OK(ampc_grad_scaler_step(gs, o.opt, &stepped));
    assert_true(stepped);
    assert_false(ampc_all_finite(o.w)); /* ... and applied */
    ampc_grad_scaler_free(gs);
    one_free(&o);
}

/* ---- the scaling harness of _run_scaling_case: Linear(8, 8) x 2, MSE, SGD lr 1, 4 iterations ---- */

typedef struct model {
    ampc_tensor *p[4]; /* w0, b0, w1, b1 */
    ampc_optim *opt;
} model;

static model model_new(uint64_t seed) {
    model m;
    ampc_rng saved = *ampc_ctx_rng(g_ctx);
    *ampc_ctx_rng(g_ctx) = ampc_rng_make(seed, 9); /* identical initial weights for control and scaling */
    static const char *names[4] = {"0.weight", "0.bias", "1.weight", "1.bias"};
    for (int i = 0; i < 4; i++) {
        m.p[i] = i % 2 ? ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){8})
                       : ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){8, 8});
        ASSERT_OK(ampc_tensor_fill_uniform(m.p[i], -0.35, 0.35));
        ASSERT_OK(ampc_tensor_set_requires_grad(m.p[i], true));
        ASSERT_OK(ampc_tensor_set_name(m.p[i], names[i]));
    }
    *ampc_ctx_rng(g_ctx) = saved;
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.lr = 1.0}, &m.opt));
    ASSERT_OK(ampc_optim_add_group(m.opt, "all", m.p, 4, NULL));
    return m;
}

static void model_free(model *m) {
    ampc_optim_free(m->opt);
    for (int i = 0; i < 4; i++) ampc_tensor_free(m->p[i]);
}

static ampc_tensor *batch(int i, int which) {
    ampc_rng r = ampc_rng_make(100 + (uint64_t)i, (uint64_t)which);
    float v[64];
    ampc_rng_normal(&r, v, 64, 0, 1);
    return ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){8, 8}, v, AMPC_DTYPE_F32);
}

static ampc_tensor *loss_of(model *m, int i, double divide) {
    ampc_tensor *h = ampc_linear(g_ctx, ampc_linear(g_ctx, batch(i, 0), m->p[0], m->p[1]), m->p[2], m->p[3]);
    return ampc_div_scalar(g_ctx, ampc_mse_loss(g_ctx, h, batch(i, 1)), divide);
}

static void assert_same_params(model *a, model *b) {
    for (int i = 0; i < 4; i++)
        assert_memory_equal(ampc_tensor_data(a->p[i]), ampc_tensor_data(b->p[i]),
                            (size_t)ampc_tensor_numel(a->p[i]) * 4);
}

enum { SKIP_ITER = 2 };

/* test_grad_scaling_autocast-style harness without autocast: the control skips the same iteration */
static void test_scaling_harness(void **state) {
    (void)state;
    for (int enabled = 1; enabled >= 0; enabled--) {
        model ctl = model_new(7), sc = model_new(7);
        ampc_grad_scaler *gs;
        ASSERT_OK(ampc_grad_scaler_new(g_ctx, TU_SP(.init_scale = 128, .growth_interval = 1, .enabled = enabled), &gs));
        for (int i = 0; i < 4; i++) {
            ASSERT_OK(ampc_backward(g_ctx, loss_of(&ctl, i, 1)));
            if (!enabled || i != SKIP_ITER) ASSERT_OK(ampc_optim_step(ctl.opt));
            ampc_optim_zero_grad(ctl.opt);
            ASSERT_OK(ampc_backward(g_ctx, ampc_grad_scaler_scale(gs, loss_of(&sc, i, 1))));
            if (enabled && i == SKIP_ITER) ASSERT_OK(ampc_tensor_fill(ampc_tensor_grad(sc.p[2]), INFINITY));
            ASSERT_OK(ampc_grad_scaler_step(gs, sc.opt, NULL));
            ASSERT_OK(ampc_grad_scaler_update(gs));
            ampc_optim_zero_grad(sc.opt);
            ampc_ctx_step_end(g_ctx);
        }
        /* 128 * growth^unskipped * backoff^skipped, or 1 when disabled */
        assert_true(ampc_grad_scaler_get_scale(gs) == (enabled ? 128.0 * 8 * 0.5 : 1.0));
        assert_same_params(&ctl, &sc); /* exact: scaling by powers of two loses nothing */
        ampc_grad_scaler_state st;
        ASSERT_OK(ampc_grad_scaler_state_save(gs, &st));
        assert_int_equal(st.skipped_steps, enabled ? 1 : 0);
        ampc_grad_scaler_free(gs);
        model_free(&ctl), model_free(&sc);
    }
}

/* test_grad_scaling_multiple: two models, optimizers and losses; one is skipped, both share the scale */
static void test_two_optimizers_one_skipped(void **state) {
    (void)state;
    model c0 = model_new(1), c1 = model_new(2), s0 = model_new(1), s1 = model_new(2);
    ampc_grad_scaler *gs = scaler((ampc_grad_scaler_params){.init_scale = 128, .growth_interval = 1});
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(ampc_backward(g_ctx, ampc_add(g_ctx, loss_of(&c0, i, 1), loss_of(&c1, i, 1))));
        ASSERT_OK(ampc_optim_step(c0.opt));
        if (i != SKIP_ITER) ASSERT_OK(ampc_optim_step(c1.opt));
        ampc_optim_zero_grad(c0.opt), ampc_optim_zero_grad(c1.opt);
        ampc_tensor *l0 = ampc_grad_scaler_scale(gs, loss_of(&s0, i, 1)),
                    *l1 = ampc_grad_scaler_scale(gs, loss_of(&s1, i, 1));
        ASSERT_OK(ampc_backward(g_ctx, ampc_add(g_ctx, l0, l1)));
        if (i == SKIP_ITER) ASSERT_OK(ampc_tensor_fill(ampc_tensor_grad(s1.p[0]), INFINITY));
        bool st0, st1;
        ASSERT_OK(ampc_grad_scaler_step(gs, s0.opt, &st0));
        ASSERT_OK(ampc_grad_scaler_step(gs, s1.opt, &st1));
        assert_true(st0 && st1 == (i != SKIP_ITER));
        ASSERT_OK(ampc_grad_scaler_update(gs));
        ampc_optim_zero_grad(s0.opt), ampc_optim_zero_grad(s1.opt);
        ampc_ctx_step_end(g_ctx);
    }
    assert_true(ampc_grad_scaler_get_scale(gs) == 128.0 * 8 * 0.5);
    assert_same_params(&c0, &s0);
    assert_same_params(&c1, &s1);
    ampc_grad_scaler_overflow ov;
    ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &ov));
    assert_true(ov.found_inf && ov.at_step == SKIP_ITER);
    assert_string_equal(ov.first_tensor, "0.weight");
    ampc_grad_scaler_free(gs);
    model_free(&c0), model_free(&c1), model_free(&s0), model_free(&s1);
}

/* test_grad_scaling_clipping_separate_unscale: unscale, clip, step == clip, step without scaling */
static void test_clipping_after_unscale(void **state) {
    (void)state;
    model ctl = model_new(3), sc = model_new(3);
    ampc_grad_scaler *gs = scaler((ampc_grad_scaler_params){.init_scale = 128, .growth_interval = 1});
    for (int i = 0; i < 4; i++) {
        double n1, n2;
        ASSERT_OK(ampc_backward(g_ctx, loss_of(&ctl, i, 1)));
        ASSERT_OK(ampc_clip_grad_norm(ctl.opt, 0.2, &n1));
        ASSERT_OK(ampc_optim_step(ctl.opt));
        ampc_optim_zero_grad(ctl.opt);
        ASSERT_OK(ampc_backward(g_ctx, ampc_grad_scaler_scale(gs, loss_of(&sc, i, 1))));
        ASSERT_OK(ampc_grad_scaler_unscale(gs, sc.opt));
        ASSERT_OK(ampc_clip_grad_norm(sc.opt, 0.2, &n2));
        assert_true(n1 == n2 && n1 > 0.2); /* the norm is of the unscaled gradients, and clipping happened */
        ASSERT_OK(ampc_grad_scaler_step(gs, sc.opt, NULL));
        ASSERT_OK(ampc_grad_scaler_update(gs));
        ampc_optim_zero_grad(sc.opt);
        ampc_ctx_step_end(g_ctx);
    }
    assert_same_params(&ctl, &sc);
    /* a non-finite norm is reported and the gradients are left alone */
    ASSERT_OK(ampc_backward(g_ctx, loss_of(&sc, 0, 1)));
    ASSERT_OK(ampc_tensor_fill(ampc_tensor_grad(sc.p[1]), INFINITY));
    double n;
    ASSERT_OK(ampc_clip_grad_norm(sc.opt, 1.0, &n));
    assert_true(isinf(n));
    const char *bad;
    assert_false(ampc_optim_grads_finite(sc.opt, &bad));
    assert_string_equal(bad, "0.bias");
    ampc_ctx_step_end(g_ctx);
    ampc_grad_scaler_free(gs);
    model_free(&ctl), model_free(&sc);
}

/* test_grad_scaling_accumulation: step and update every 2 micro-batches, losses divided by 2 */
static void test_gradient_accumulation(void **state) {
    (void)state;
    model ctl = model_new(4), sc = model_new(4);
    ampc_grad_scaler *gs = scaler((ampc_grad_scaler_params){.init_scale = 128, .growth_interval = 1});
    for (int i = 0; i < 8; i++) {
        ASSERT_OK(ampc_backward(g_ctx, loss_of(&ctl, i, 2)));
        ASSERT_OK(ampc_backward(g_ctx, ampc_grad_scaler_scale(gs, loss_of(&sc, i, 2))));
        if ((i + 1) % 2 == 0) {
            ASSERT_OK(ampc_optim_step(ctl.opt));
            ASSERT_OK(ampc_grad_scaler_step(gs, sc.opt, NULL));
            ASSERT_OK(ampc_grad_scaler_update(gs));
            ampc_optim_zero_grad(ctl.opt), ampc_optim_zero_grad(sc.opt);
        }
        ampc_ctx_step_end(g_ctx);
    }
    assert_true(ampc_grad_scaler_get_scale(gs) == 128.0 * 16);
    assert_same_params(&ctl, &sc);
    ampc_grad_scaler_free(gs);
    model_free(&ctl), model_free(&sc);
}

/* test_grad_scaling_state_dict */
static void test_state_round_trip(void **state) {
    (void)state;
    one o = one_new(AMPC_DTYPE_F32, "w");
    ampc_grad_scaler *a = scaler((ampc_grad_scaler_params){.init_scale = 3,
                                                           .growth_factor = 4,
                                                           .backoff_factor = 0.5,
                                                           .growth_interval = 2,
                                                           .hysteresis = 2,
                                                           .max_scale = 1e6});
    iterate(a, &o, false);
    iterate(a, &o, true);
    iterate(a, &o, false);
    ampc_grad_scaler_state sa, sb;
    ASSERT_OK(ampc_grad_scaler_state_save(a, &sa));
    ampc_grad_scaler *b = scaler((ampc_grad_scaler_params){0});
    ASSERT_OK(ampc_grad_scaler_state_load(b, &sa));
    ASSERT_OK(ampc_grad_scaler_state_save(b, &sb));
    assert_memory_equal(&sa, &sb, sizeof sa);
    /* the two scalers now evolve identically */
    for (int i = 0; i < 5; i++) iterate(a, &o, i == 3), iterate(b, &o, i == 3);
    assert_true(ampc_grad_scaler_get_scale(a) == ampc_grad_scaler_get_scale(b));
    /* a disabled scaler's state cannot be loaded into an enabled one; a disabled one ignores states */
    ampc_grad_scaler *off;
    ASSERT_OK(ampc_grad_scaler_new(g_ctx, TU_SP(0), &off));
    ASSERT_OK(ampc_grad_scaler_state_save(off, &sb));
    assert_int_equal(ampc_grad_scaler_state_load(a, &sb), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("disabled");
    ASSERT_OK(ampc_grad_scaler_state_load(off, &sa));
    assert_true(ampc_grad_scaler_get_scale(off) == 1.0);
    sa.scale = -1;
    assert_int_equal(ampc_grad_scaler_state_load(b, &sa), AMPC_STATUS_FORMAT);
    ampc_grad_scaler_free(a), ampc_grad_scaler_free(b), ampc_grad_scaler_free(off);
    one_free(&o);
}

/* the opt-in extras: hysteresis (Megatron), min and max scale (Megatron/DeepSpeed/Apex) */
static void test_hysteresis_min_max(void **state) {
    (void)state;
    one o = one_new(AMPC_DTYPE_F32, "w");
    ampc_grad_scaler *h = scaler((ampc_grad_scaler_params){.init_scale = 64, .growth_interval = 2, .hysteresis = 2});
    iterate(h, &o, true);
    assert_true(ampc_grad_scaler_get_scale(h) == 64); /* first overflow since growth: delayed */
    iterate(h, &o, true);
    assert_true(ampc_grad_scaler_get_scale(h) == 32); /* second: backs off */
    iterate(h, &o, true);
    assert_true(ampc_grad_scaler_get_scale(h) == 16); /* exhausted until the next growth */
    iterate(h, &o, false), iterate(h, &o, false);
    assert_true(ampc_grad_scaler_get_scale(h) == 32); /* growth refills the hysteresis */
    iterate(h, &o, true);
    assert_true(ampc_grad_scaler_get_scale(h) == 32);
    ampc_grad_scaler_state st;
    ASSERT_OK(ampc_grad_scaler_state_save(h, &st));
    assert_int_equal(st.skipped_steps, 4); /* every overflow skips its step, delayed or not */
    ampc_grad_scaler *m = scaler(
        (ampc_grad_scaler_params){.init_scale = 4, .min_scale = 1, .max_scale = 16, .growth_interval = 1});
    for (int i = 0; i < 5; i++) iterate(m, &o, true);
    assert_true(ampc_grad_scaler_get_scale(m) == 1); /* floored at min_scale (PyTorch would reach 0.125) */
    for (int i = 0; i < 10; i++) iterate(m, &o, false);
    assert_true(ampc_grad_scaler_get_scale(m) == 16); /* capped at max_scale */
    /* the tutorials' DynamicLossScaler: x1.01 after every clean step, x0.5 on overflow */
    ampc_grad_scaler *t = scaler((ampc_grad_scaler_params){.growth_factor = 1.01, .growth_interval = 1});
    iterate(t, &o, false);
    assert_true(ampc_grad_scaler_get_scale(t) == (double)(float)(65536.0 * 1.01));
    iterate(t, &o, true);
    assert_true(ampc_grad_scaler_get_scale(t) == (double)(float)((double)(float)(65536.0 * 1.01) * 0.5));
    ASSERT_OK(ampc_grad_scaler_update_to(t, 1024));
    assert_true(ampc_grad_scaler_get_scale(t) == 1024);
    ampc_grad_scaler_free(h), ampc_grad_scaler_free(m), ampc_grad_scaler_free(t);
    one_free(&o);
}

/* The parameter struct: a user who writes only .init_scale is refused (not handed a disabled scaler);
 * the defaults function gives PyTorch's enabled scaler, with the fields they change. */
static void test_params_defaults(void **state) {
    (void)state;
    ampc_grad_scaler *gs = NULL;
    assert_int_equal(ampc_grad_scaler_new(g_ctx, &(ampc_grad_scaler_params){.init_scale = 1024}, &gs),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("not made by ampc_grad_scaler_defaults()", "enabled = false", "pass NULL");
    assert_null(gs);
    ampc_grad_scaler_params p = ampc_grad_scaler_defaults();
    assert_true(p.enabled && p.init_scale == 65536 && p.growth_factor == 2 && p.backoff_factor == 0.5 &&
                p.growth_interval == 2000);
    p.init_scale = 1024;
    ASSERT_OK(ampc_grad_scaler_new(g_ctx, &p, &gs));
    assert_true(ampc_grad_scaler_enabled(gs) && ampc_grad_scaler_get_scale(gs) == 1024);
    ampc_grad_scaler_free(gs);
    ASSERT_OK(ampc_grad_scaler_new(g_ctx, NULL, &gs));
    assert_true(ampc_grad_scaler_enabled(gs) && ampc_grad_scaler_get_scale(gs) == 65536);
    ampc_grad_scaler_free(gs);
}

/* a disabled scaler is a pass-through: the run equals one that never calls a scaler function */
static void test_disabled_is_bit_identical(void **state) {
    (void)state;
    model plain = model_new(6), amp = model_new(6);
    ampc_grad_scaler *gs;
    ASSERT_OK(ampc_grad_scaler_new(g_ctx, TU_SP(.init_scale = 1024, .enabled = false), &gs));
    assert_false(ampc_grad_scaler_enabled(gs));
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(ampc_backward(g_ctx, loss_of(&plain, i, 1)));
        ASSERT_OK(ampc_optim_step(plain.opt));
        ampc_optim_zero_grad(plain.opt);
        ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.enabled = false)));
        ampc_tensor *loss = loss_of(&amp, i, 1);
        ASSERT_OK(ampc_autocast_end(g_ctx));
        ampc_tensor *scaled = ampc_grad_scaler_scale(gs, loss);
        assert_ptr_equal(scaled, loss);
        ASSERT_OK(ampc_backward(g_ctx, scaled));
        ASSERT_OK(ampc_grad_scaler_unscale(gs, amp.opt));
        ASSERT_OK(ampc_grad_scaler_step(gs, amp.opt, NULL));
        ASSERT_OK(ampc_grad_scaler_update(gs));
        ampc_optim_zero_grad(amp.opt);
        ampc_ctx_step_end(g_ctx);
    }
    assert_true(ampc_grad_scaler_get_scale(gs) == 1.0);
    assert_same_params(&plain, &amp);
    ampc_grad_scaler_free(gs);
    model_free(&plain), model_free(&amp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_update_rule_sequence),
        cmocka_unit_test(test_will_not_overflow),
        cmocka_unit_test(test_unscale_dtypes),
        cmocka_unit_test(test_state_machine_errors),
        cmocka_unit_test(test_found_inf_decided_at_unscale),
        cmocka_unit_test(test_scaling_harness),
        cmocka_unit_test(test_two_optimizers_one_skipped),
        cmocka_unit_test(test_clipping_after_unscale),
        cmocka_unit_test(test_gradient_accumulation),
        cmocka_unit_test(test_state_round_trip),
        cmocka_unit_test(test_hysteresis_min_max),
        cmocka_unit_test(test_params_defaults),
        cmocka_unit_test(test_disabled_is_bit_identical),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
