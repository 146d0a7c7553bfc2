/* test_optim_device.c: the optimizer floor on the guard device (memory the host cannot touch outside the
 * device's own calls, so any host read of a gradient, master or moment faults) against the CPU, bit for
 * bit. A small two-layer model of elementwise ops (h = tanh(x * w1 + b1), loss = mean((h * w2)^2)) with
 * F32 or BF16 parameters trains a few steps under AdamW or SGD with momentum, masters on and off (and
 * stochastic rounding), a GradScaler with an overflow step, gradient clipping, owned ranges narrowed and
 * widened again (the data-parallel reallocation), and the checkpoint state walk. Every observable value
 * (losses, norms, decisions, overflow reports, parameters, masters, moments, synchronisation counts) is
 * recorded on both devices and the records must be equal. */
#include "test_util.h"

#include "optim/optim.h"

#include <stdlib.h>

enum { B = 4, D = 9000, STEPS = 4, OVERFLOW_STEP = 2 };

typedef struct config {
    const char *name;
    ampc_optim_kind kind;
    ampc_dtype dt1, dt2; /* layer 1's and layer 2's parameters */
    ampc_master_mode master;
    bool sr, clip, scaler, ranges;
} config;

/* What a run shows the host, appended as bytes. */
typedef struct record {
    unsigned char *b;
    size_t n, cap;
} record;

static void put(record *r, const void *p, size_t n) {
    if (r->n + n > r->cap) {
        r->cap = (r->n + n) * 2;
        r->b = realloc(r->b, r->cap);
        assert_non_null(r->b);
    }
    memcpy(r->b + r->n, p, n);
    r->n += n;
}

/* t's elements in its own dtype (or F32), read through the tensor floor. */
static void put_tensor(record *r, const ampc_tensor *t, ampc_dtype as) {
    size_t n = (size_t)ampc_tensor_numel(t) * (as == AMPC_DTYPE_F32 ? 4 : 2);
    void *h = malloc(n ? n : 1);
    assert_non_null(h);
    ASSERT_OK(ampc_tensor_copy_to(t, h, as));
    put(r, h, n);
    free(h);
}

static ampc_tensor *param(ampc_ctx *ctx, ampc_dtype dt, int nd, const int64_t *shape, double mean, const char *name) {
    ampc_tensor *p = ampc_tensor_new(ctx, dt, nd, shape);
    assert_non_null(p);
    ASSERT_OK(ampc_tensor_fill_normal(p, mean, 0.5));
    ASSERT_OK(ampc_tensor_set_requires_grad(p, true));
    ASSERT_OK(ampc_tensor_set_name(p, name));
    return p;
}

static ampc_status walk_entry(void *arg, const char *name, ampc_tensor *t, ampc_dtype dt, int nd, const int64_t *shape,
                              void *data) {
    (void)nd, (void)shape;
    put(arg, name, strlen(name));
    if (t) put_tensor(arg, t, AMPC_DTYPE_F32);
    else if (dt == AMPC_DTYPE_I64) put(arg, data, sizeof(int64_t));
    return AMPC_OK;
}

/* Overwrites element 5 of p's gradient with inf (through the tensor floor). */
static void poison_grad(ampc_tensor *p) {
    ampc_tensor *g = ampc_tensor_grad(p);
    assert_non_null(g);
    float *h = malloc((size_t)ampc_tensor_numel(g) * sizeof *h);
    ASSERT_OK(ampc_tensor_copy_to(g, h, AMPC_DTYPE_F32));
    h[5] = INFINITY;
    ASSERT_OK(ampc_tensor_copy_from(g, h, AMPC_DTYPE_F32));
    free(h);
}

/* Narrows every owned range to [n / 5, n - 7) and widens it back: the state survives where both own it. */
static void narrow_and_widen(ampc_optim *opt) {
    int64_t lo[4], hi[4];
    for (int i = 0; i < opt->n; i++) lo[i] = opt->params[i].n / 5, hi[i] = opt->params[i].n - 7;
    ASSERT_OK(ampci_optim_set_ranges(opt, lo, hi, false));
    for (int i = 0; i < opt->n; i++) lo[i] = 0, hi[i] = opt->params[i].n;
    ASSERT_OK(ampci_optim_set_ranges(opt, lo, hi, false));
}

/* One training step; the overflow step poisons w2's gradient after the backward. */
static void step(const config *c, ampc_ctx *ctx, ampc_tensor *const *ps, ampc_tensor *x, ampc_optim *opt,
                 ampc_grad_scaler *gs, int t, record *r) {
    ampc_tensor *h = ampc_tanh(ctx, ampc_add(ctx, ampc_mul(ctx, x, ps[0]), ps[1]));
    ampc_tensor *o = ampc_mul(ctx, h, ps[2]);
    ampc_tensor *loss = ampc_mean(ctx, ampc_mul(ctx, o, o), NULL, 0, false);
    float lv;
    ASSERT_OK(ampc_tensor_copy_to(loss, &lv, AMPC_DTYPE_F32));
    put(r, &lv, sizeof lv);
    ASSERT_OK(ampc_backward(ctx, c->scaler ? ampc_grad_scaler_scale(gs, loss) : loss));
    if (c->scaler && t == OVERFLOW_STEP) poison_grad(ps[2]);
    const char *bad = NULL;
    bool finite = ampc_optim_grads_finite(opt, &bad);
    put(r, &finite, sizeof finite);
    if (bad) put(r, bad, strlen(bad));
    if (c->scaler) {
        assert_int_equal(finite, t != OVERFLOW_STEP); /* the poisoned step is seen before unscale */
        ASSERT_OK(ampc_grad_scaler_unscale(gs, opt));
    }
    if (c->clip) {
        double norm;
        ASSERT_OK(ampc_clip_grad_norm(opt, 0.05, &norm));
        put(r, &norm, sizeof norm);
    }
    bool stepped = true;
    if (c->scaler) {
        ASSERT_OK(ampc_grad_scaler_step(gs, opt, &stepped));
        ASSERT_OK(ampc_grad_scaler_update(gs));
        ampc_grad_scaler_overflow ov;
        ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &ov));
        double scale = ampc_grad_scaler_get_scale(gs);
        put(r, &ov.found_inf, sizeof ov.found_inf), put(r, &ov.tensors, sizeof ov.tensors);
        put(r, ov.first_tensor, strlen(ov.first_tensor)), put(r, &ov.at_step, sizeof ov.at_step);
        put(r, &scale, sizeof scale);
        assert_int_equal(stepped, t != OVERFLOW_STEP);
    } else {
        ASSERT_OK(ampc_optim_step(opt));
    }
    put(r, &stepped, sizeof stepped);
    ampc_optim_zero_grad(opt);
    ampc_ctx_step_end(ctx);
}

static void run(const config *c, ampc_device_kind kind, record *r) {
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 7, .threads = 2, .device = {kind}}, &ctx));
    ampc_tensor *ps[3] = {param(ctx, c->dt1, 1, (int64_t[]){D}, 0.5, "w1"),
                          param(ctx, c->dt1, 1, (int64_t[]){D}, 0, "b1"),
                          param(ctx, c->dt2, 1, (int64_t[]){D}, 0, "w2")};
    ampc_tensor *x = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, (int64_t[]){B, D});
    ASSERT_OK(ampc_tensor_fill_normal(x, 0, 1));
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(ctx,
                             &(ampc_optim_params){.kind = c->kind,
                                                  .lr = c->kind == AMPC_OPTIM_ADAMW ? 1e-2 : 0.5,
                                                  .weight_decay = 0.01,
                                                  .momentum = 0.9,
                                                  .nesterov = true,
                                                  .master = c->master,
                                                  .stochastic_rounding = c->sr},
                             &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "layer1", ps, 2, &(ampc_param_group_params){.lr_scale = 0.5}));
    ASSERT_OK(ampc_optim_add_group(opt, "layer2", ps + 2, 1, &(ampc_param_group_params){.no_weight_decay = true}));
    ampc_grad_scaler *gs = NULL;
    if (c->scaler) ASSERT_OK(ampc_grad_scaler_new(ctx, TU_SP(.enabled = true, .growth_interval = 2), &gs));
    for (int t = 1; t <= STEPS; t++) {
        step(c, ctx, ps, x, opt, gs, t, r);
        if (c->ranges && t == 1) narrow_and_widen(opt);
    }
    for (int i = 0; i < 3; i++) put_tensor(r, ps[i], ampc_tensor_dtype(ps[i]));
    for (int i = 0; i < 3; i++) put_tensor(r, ampc_optim_master(opt, i), AMPC_DTYPE_F32);
    ASSERT_OK(ampci_optim_each_state(opt, walk_entry, r));
    uint64_t syncs[AMPC_SYNC_POINT_COUNT];
    ASSERT_OK(ampc_ctx_sync_counts(ctx, syncs));
    /* one found-inf read per unscale and per finiteness check, one norm read per clip */
    assert_int_equal(syncs[AMPC_SYNC_FOUND_INF], STEPS * (c->scaler ? 2 : 1));
    assert_int_equal(syncs[AMPC_SYNC_CLIP_NORM], c->clip ? STEPS : 0);
    put(r, syncs, sizeof syncs);
    ampc_grad_scaler_free(gs);
    ampc_optim_free(opt);
    for (int i = 0; i < 3; i++) ampc_tensor_free(ps[i]);
    ampc_tensor_free(x);
    ampc_ctx_free(ctx);
}

static void check(const config *c) {
    record cpu = {0}, guard = {0};
    run(c, AMPC_DEVICE_CPU, &cpu);
    run(c, AMPC_DEVICE_GUARD, &guard);
    if (cpu.n != guard.n) FAILF("%s: the guard device recorded %zu bytes, the CPU %zu", c->name, guard.n, cpu.n);
    for (size_t i = 0; i < cpu.n; i++)
        if (cpu.b[i] != guard.b[i]) FAILF("%s: the records differ first at byte %zu of %zu", c->name, i, cpu.n);
    free(cpu.b), free(guard.b);
}

static void test_adamw_f32_scaler_clip(void **state) {
    (void)state;
    check(&(config){"adamw f32", AMPC_OPTIM_ADAMW, AMPC_DTYPE_F32, AMPC_DTYPE_F32, AMPC_MASTER_AUTO, false, true, true,
                    false});
}

static void test_adamw_bf16_masters_ranges(void **state) {
    (void)state;
    check(&(config){"adamw bf16 masters", AMPC_OPTIM_ADAMW, AMPC_DTYPE_BF16, AMPC_DTYPE_BF16, AMPC_MASTER_AUTO, false,
                    true, true, true});
}

static void test_sgd_mixed_masters(void **state) {
    (void)state;
    check(&(config){"sgd mixed", AMPC_OPTIM_SGD, AMPC_DTYPE_F32, AMPC_DTYPE_BF16, AMPC_MASTER_AUTO, false, true, false,
                    true});
}

static void test_sgd_bf16_no_master_sr(void **state) {
    (void)state;
    check(&(config){"sgd bf16 sr", AMPC_OPTIM_SGD, AMPC_DTYPE_BF16, AMPC_DTYPE_BF16, AMPC_MASTER_NONE, true, false,
                    true, false});
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_f32_scaler_clip),
        cmocka_unit_test(test_adamw_bf16_masters_ranges),
        cmocka_unit_test(test_sgd_mixed_masters),
        cmocka_unit_test(test_sgd_bf16_no_master_sr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
