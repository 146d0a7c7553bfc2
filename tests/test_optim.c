/* test_optim.c: SGD (momentum, nesterov, weight decay) and AdamW (bias correction, decoupled weight
 * decay) against torch.optim's recurrences re-derived here; the three storage modes (F32 parameters as
 * their own masters, low-precision parameters with F32 masters, and the risky master-less low-precision
 * update); set-to-none zero_grad with gradients reusing one contiguous block; parameter groups; and bad
 * configurations. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(21, 2)

enum { N = 6 };

static ampc_tensor *param(ampc_dtype dt, const float *init, const char *name) {
    ampc_tensor *p = ampc_tensor_new(g_ctx, dt, 1, (int64_t[]){N});
    ASSERT_OK(ampc_tensor_copy_from(p, init, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_set_requires_grad(p, true));
    ASSERT_OK(ampc_tensor_set_name(p, name));
    return p;
}

/* p.grad = g (a backward of sum(p * g)) */
static void give_grad(ampc_tensor *p, const float *g) {
    ampc_tensor *c = ampc_tensor_from_buffer(g_ctx, ampc_tensor_dtype(p), 1, (int64_t[]){N}, g, AMPC_DTYPE_F32);
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul(g_ctx, p, c), NULL, 0, false)));
}

static void grads_for_step(int t, float *g) {
    for (int i = 0; i < N; i++) g[i] = (float)((i - 2.5) * 0.3 + 0.1 * t);
}

static const float W0[N] = {0.5f, -1.0f, 0.25f, 2.0f, -0.125f, 1.5f};

/* torch.optim.SGD's single-tensor step, in F32 */
static void sgd_ref(float *w, float *buf, const float *g, int t, float lr, float wd, float mom, float damp, bool nest) {
    for (int i = 0; i < N; i++) {
        float d = g[i];
        if (wd != 0) d = d + wd * w[i];
        if (mom != 0) {
            buf[i] = t == 1 ? d : buf[i] * mom + (1 - damp) * d;
            d = nest ? d + mom * buf[i] : buf[i];
        }
        w[i] = w[i] + -lr * d;
    }
}

static void test_sgd_matches_torch(void **state) {
    (void)state;
    static const struct {
        float wd, mom, damp;
        bool nest;
    } cfg[] = {{0, 0, 0, false}, {0.01f, 0.9f, 0, false}, {0.01f, 0.9f, 0, true}, {0, 0.5f, 0.25f, false}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        ampc_tensor *p = param(AMPC_DTYPE_F32, W0, "w");
        ampc_optim *opt;
        ASSERT_OK(ampc_optim_new(g_ctx,
                                 &(ampc_optim_params){.kind = AMPC_OPTIM_SGD,
                                                      .lr = 0.1,
                                                      .weight_decay = cfg[c].wd,
                                                      .momentum = cfg[c].mom,
                                                      .dampening = cfg[c].damp,
                                                      .nesterov = cfg[c].nest},
                                 &opt));
        ASSERT_OK(ampc_optim_add_group(opt, "all", &p, 1, NULL));
        float w[N], buf[N] = {0}, g[N];
        memcpy(w, W0, sizeof w);
        for (int t = 1; t <= 4; t++) {
            grads_for_step(t, g);
            give_grad(p, g);
            ASSERT_OK(ampc_optim_step(opt));
            ampc_optim_zero_grad(opt);
            sgd_ref(w, buf, g, t, 0.1f, cfg[c].wd, cfg[c].mom, cfg[c].damp, cfg[c].nest);
            ampc_ctx_step_end(g_ctx);
        }
        assert_memory_equal(ampc_tensor_data(p), w, sizeof w); /* the same F32 operations, the same bits */
        assert_int_equal(ampc_optim_steps(opt), 4);
        ampc_optim_free(opt);
        ampc_tensor_free(p);
    }
}

static void test_adamw_matches_closed_form(void **state) {
    (void)state;
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    ampc_tensor *p = param(AMPC_DTYPE_F32, W0, "w");
    ampc_optim *opt;
    ASSERT_OK(
        ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = lr, .weight_decay = wd}, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "all", &p, 1, NULL));
    double w[N], m[N] = {0}, v[N] = {0};
    float g[N];
    for (int i = 0; i < N; i++) w[i] = W0[i];
    for (int t = 1; t <= 5; t++) {
        grads_for_step(t, g);
        give_grad(p, g);
        ASSERT_OK(ampc_optim_step(opt));
        ampc_optim_zero_grad(opt);
        for (int i = 0; i < N; i++) { /* Loshchilov & Hutter's AdamW, in double */
            w[i] *= 1 - lr * wd;
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
            w[i] -= lr * mh / (sqrt(vh) + eps);
        }
        ampc_ctx_step_end(g_ctx);
    }
    const float *got = ampc_tensor_data(p);
    for (int i = 0; i < N; i++)
        if (fabs(got[i] - w[i]) > 1e-6 * (1 + fabs(w[i]))) FAILF("w[%d] = %.9g, closed form %.9g", i, got[i], w[i]);
    ampc_optim_free(opt);
    ampc_tensor_free(p);
}

/* The three storage modes on BF16 parameters with updates far below BF16's resolution (2^-8 relative):
 * with F32 masters they add up; without, each is rounded away. */
static void test_master_modes(void **state) {
    (void)state;
    const float one[N] = {1, 1, 1, 1, 1, 1}, tiny[N] = {1, 1, 1, 1, 1, 1};
    ampc_tensor *o1 = param(AMPC_DTYPE_F32, one, "o1"), *o2 = param(AMPC_DTYPE_BF16, one, "o2"),
                *half = param(AMPC_DTYPE_BF16, one, "half");
    ampc_optim *a, *b, *c;
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.lr = 1e-4}, &a));
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.lr = 1e-4}, &b));
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.lr = 1e-4, .master = AMPC_MASTER_NONE}, &c));
    ASSERT_OK(ampc_optim_add_group(a, NULL, &o1, 1, NULL));
    ASSERT_OK(ampc_optim_add_group(b, NULL, &o2, 1, NULL));
    ASSERT_OK(ampc_optim_add_group(c, NULL, &half, 1, NULL));
    assert_ptr_equal(ampc_optim_master(a, 0), o1); /* an F32 parameter is its own master */
    assert_int_equal(ampc_tensor_dtype(ampc_optim_master(b, 0)), AMPC_DTYPE_F32);
    assert_ptr_equal(ampc_optim_master(c, 0), half);
    for (int t = 0; t < 100; t++) {
        give_grad(o1, tiny), give_grad(o2, tiny), give_grad(half, tiny);
        ASSERT_OK(ampc_optim_step(a));
        ASSERT_OK(ampc_optim_step(b));
        ASSERT_OK(ampc_optim_step(c));
        ampc_optim_zero_grad(a), ampc_optim_zero_grad(b), ampc_optim_zero_grad(c);
        ampc_ctx_step_end(g_ctx);
    }
    float v1[N], m2[N], v2[N], v3[N];
    ASSERT_OK(ampc_tensor_copy_to(o1, v1, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_to(ampc_optim_master(b, 0), m2, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_to(o2, v2, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_to(half, v3, AMPC_DTYPE_F32));
    assert_true(fabsf(v1[0] - 0.99f) < 1e-5f);                         /* 100 updates of 1e-4 */
    assert_memory_equal(m2, v1, sizeof v1);                            /* the O2 master follows the F32 run exactly */
    assert_true(v2[0] == ampc_bf16_to_f32(ampc_bf16_from_f32(m2[0]))); /* the model copy is the rounded master */
    assert_true(v3[0] == 1.0f);                                        /* model.half(): every update rounded away */
    ampc_optim_free(a), ampc_optim_free(b), ampc_optim_free(c);
    ampc_tensor_free(o1), ampc_tensor_free(o2), ampc_tensor_free(half);
}

static void test_zero_grad_and_blocks(void **state) {
    (void)state;
    ampc_tensor *p[3] = {param(AMPC_DTYPE_F32, W0, "a"), param(AMPC_DTYPE_F32, W0, "b"),
                         param(AMPC_DTYPE_BF16, W0, "c")};
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(g_ctx, NULL, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "all", p, 3, NULL));
    float g[N] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 3; i++) give_grad(p[i], g);
    /* gradients of one dtype are adjacent slices of one block */
    assert_ptr_equal((float *)ampc_tensor_data(ampc_tensor_grad(p[0])) + N, ampc_tensor_data(ampc_tensor_grad(p[1])));
    void *slot = ampc_tensor_data(ampc_tensor_grad(p[2]));
    ampc_optim_zero_grad(opt);
    for (int i = 0; i < 3; i++) assert_null(ampc_tensor_grad(p[i])); /* set-to-none */
    /* a parameter without a gradient is not touched by a step */
    give_grad(p[0], g);
    ASSERT_OK(ampc_optim_step(opt));
    assert_memory_equal(ampc_tensor_data(p[1]), W0, sizeof W0);
    give_grad(p[2], g);
    assert_ptr_equal(ampc_tensor_data(ampc_tensor_grad(p[2])), slot); /* the storage is reused */
    ampc_ctx_step_end(g_ctx);
    ampc_optim_free(opt);
    for (int i = 0; i < 3; i++) ampc_tensor_free(p[i]);
}

static void test_groups(void **state) {
    (void)state;
    ampc_tensor *w = param(AMPC_DTYPE_F32, W0, "w"), *b = param(AMPC_DTYPE_F32, W0, "b");
    ampc_optim *opt;
    ASSERT_OK(
        ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_SGD, .lr = 0.5, .weight_decay = 0.1}, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "decay", &w, 1, NULL));
    ASSERT_OK(ampc_optim_add_group(opt, "no_decay", &b, 1,
                                   &(ampc_param_group_params){.lr_scale = 0.5, .no_weight_decay = true}));
    const float zero[N] = {0};
    give_grad(w, zero), give_grad(b, zero);
    ASSERT_OK(ampc_optim_step(opt));
    const float *wv = ampc_tensor_data(w), *bv = ampc_tensor_data(b);
    for (int i = 0; i < N; i++) {
        assert_true(wv[i] == W0[i] + -0.5f * (0.0f + 0.1f * W0[i])); /* decayed */
        assert_true(bv[i] == W0[i]);                                 /* not decayed, zero gradient */
    }
    assert_int_equal(ampc_optim_num_params(opt), 2);
    assert_ptr_equal(ampc_optim_param(opt, 1), b);
    ASSERT_OK(ampc_optim_set_lr(opt, 0.25));
    assert_true(ampc_optim_lr(opt) == 0.25);
    ampc_ctx_step_end(g_ctx);
    ampc_optim_free(opt);
    ampc_tensor_free(w), ampc_tensor_free(b);
}

static void test_bad_configurations(void **state) {
    (void)state;
    ampc_optim *opt;
    assert_int_equal(ampc_optim_new(g_ctx, &(ampc_optim_params){.lr = -1}, &opt), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_optim_new", "lr must be > 0");
    assert_int_equal(ampc_optim_new(g_ctx, &(ampc_optim_params){.nesterov = true}, &opt), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("nesterov");
    assert_int_equal(ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .beta1 = 1.0}, &opt),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_OK(ampc_optim_new(g_ctx, NULL, &opt));
    ampc_tensor *ok = param(AMPC_DTYPE_F32, W0, "ok"),
                *nograd = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){2});
    ampc_tensor *arena = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){2});
    ASSERT_OK(ampc_tensor_set_requires_grad(arena, true));
    ampc_tensor *made = ampc_exp(g_ctx, ok);
    assert_int_equal(ampc_optim_add_group(opt, "x", &nograd, 1, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("parameter 0", "does not require grad");
    assert_int_equal(ampc_optim_add_group(opt, "x", &arena, 1, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("arena tensor");
    assert_int_equal(ampc_optim_add_group(opt, "x", &made, 1, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("not a leaf");
    ampc_tensor *twice[2] = {ok, ok};
    assert_int_equal(ampc_optim_add_group(opt, "x", twice, 2, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("listed twice");
    ASSERT_OK(ampc_optim_add_group(opt, "x", &ok, 1, NULL));
    ampc_optim *other;
    ASSERT_OK(ampc_optim_new(g_ctx, NULL, &other));
    assert_int_equal(ampc_optim_add_group(other, "y", &ok, 1, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("'ok'", "already belongs to an optimizer");
    ampc_ctx_step_end(g_ctx);
    ampc_optim_free(other), ampc_optim_free(opt);
    ampc_tensor_free(ok), ampc_tensor_free(nograd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_matches_torch),
        cmocka_unit_test(test_adamw_matches_closed_form),
        cmocka_unit_test(test_master_modes),
        cmocka_unit_test(test_zero_grad_and_blocks),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_bad_configurations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
