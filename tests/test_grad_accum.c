/* test_grad_accum.c: gradient accumulation through the library, PyTorch's recipe under AMP: each of N
 * micro-batches backs up loss / N scaled by the same GradScaler scale, the gradients add up in the
 * parameters' own, and one unscale, step and update follow. Against one batch N times larger: FP32 within
 * a few roundings, BF16 and FP16 (with the scaler) within their precision. An overflow in one micro-batch
 * skips the whole step and backs the scale off once, exactly as PyTorch's rule says; the next step trains. */
#include "test_util.h"

#include <stdlib.h>

enum { IN = 24, HID = 32, OUT = 6, BIG = 16 };

typedef struct net {
    ampc_ctx *ctx;
    ampc_tensor *w1, *b1, *w2, *b2;
    ampc_optim *opt;
    ampc_grad_scaler *scaler;
} net;

static float g_x[8][BIG * IN], g_t[8][BIG * OUT];

static net net_new(bool scaler) {
    net n = {0};
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 5, .threads = 2}, &n.ctx));
    int64_t s1[2] = {HID, IN}, s2[2] = {OUT, HID}, sb1[1] = {HID}, sb2[1] = {OUT};
    n.w1 = ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 2, s1), n.b1 = ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 1, sb1);
    n.w2 = ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 2, s2), n.b2 = ampc_tensor_new(n.ctx, AMPC_DTYPE_F32, 1, sb2);
    ASSERT_OK(ampc_tensor_fill_normal(n.w1, 0, 0.2));
    ASSERT_OK(ampc_tensor_fill_normal(n.w2, 0, 0.2));
    ASSERT_OK(ampc_tensor_fill_normal(n.b1, 0, 0.1));
    ASSERT_OK(ampc_tensor_fill_normal(n.b2, 0, 0.1));
    const char *names[4] = {"w1", "b1", "w2", "b2"};
    ampc_tensor *p[4] = {n.w1, n.b1, n.w2, n.b2};
    ASSERT_OK(ampc_optim_new(n.ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = 1e-2}, &n.opt));
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(ampc_tensor_set_name(p[i], names[i]));
        ASSERT_OK(ampc_tensor_set_requires_grad(p[i], true));
    }
    ASSERT_OK(ampc_optim_add_group(n.opt, "all", p, 4, NULL));
    ASSERT_OK(ampc_grad_scaler_new(n.ctx, TU_SP(.enabled = scaler, .init_scale = 65536), &n.scaler));
    return n;
}

static void net_free(net *n) {
    ampc_grad_scaler_free(n->scaler);
    ampc_optim_free(n->opt);
    ampc_tensor_free(n->w1), ampc_tensor_free(n->b1), ampc_tensor_free(n->w2), ampc_tensor_free(n->b2);
    ampc_ctx_free(n->ctx);
}

/* The backward of rows [r0, r0 + rows) of step t's batch, the loss divided by `div`, under autocast dt
 * (F32: none); `boost` multiplies the inputs (a huge one overflows FP16). */
static void micro(net *n, int t, int r0, int rows, double div, ampc_dtype dt, float boost) {
    float x[BIG * IN];
    for (int i = 0; i < rows * IN; i++) x[i] = g_x[t][r0 * IN + i] * boost;
    ampc_tensor *xt = ampc_tensor_from_buffer(n->ctx, AMPC_DTYPE_F32, 2, (int64_t[]){rows, IN}, x, AMPC_DTYPE_F32);
    ampc_tensor *tt = ampc_tensor_from_buffer(n->ctx, AMPC_DTYPE_F32, 2, (int64_t[]){rows, OUT}, g_t[t] + r0 * OUT,
                                              AMPC_DTYPE_F32);
    if (dt != AMPC_DTYPE_F32) ASSERT_OK(ampc_autocast_begin(n->ctx, TU_AC(.dtype = dt, .enabled = true)));
    ampc_tensor *h = ampc_gelu(n->ctx, ampc_linear(n->ctx, xt, n->w1, n->b1), AMPC_GELU_TANH);
    ampc_tensor *y = ampc_linear(n->ctx, h, n->w2, n->b2);
    ampc_tensor *loss = ampc_mse_loss(n->ctx, y, tt); /* autocast runs it in F32 */
    if (dt != AMPC_DTYPE_F32) ASSERT_OK(ampc_autocast_end(n->ctx));
    if (div != 1) loss = ampc_div_scalar(n->ctx, loss, div);
    if (!loss) FAILF("forward: %s", ampc_last_error());
    ASSERT_OK(ampc_backward(n->ctx, ampc_grad_scaler_scale(n->scaler, loss)));
}

/* One optimizer step of the scaler's loop; whether it stepped. */
static bool step(net *n) {
    bool stepped = false;
    ASSERT_OK(ampc_grad_scaler_step(n->scaler, n->opt, &stepped));
    ASSERT_OK(ampc_grad_scaler_update(n->scaler));
    ampc_optim_zero_grad(n->opt);
    ampc_ctx_step_end(n->ctx);
    return stepped;
}

static void params(const net *n, float *out) {
    ampc_tensor *p[4] = {n->w1, n->b1, n->w2, n->b2};
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(ampc_tensor_copy_to(p[i], out, AMPC_DTYPE_F32));
        out += ampc_tensor_numel(p[i]);
    }
}

enum { NPARAM = HID * IN + HID + OUT * HID + OUT };

/* 6 steps of one batch of 16 against 4 micro-batches of 4 (each activation freed after its backward, as
 * `ampc train --grad-accum` does): the largest parameter difference relative to 1 + |p|. */
static double accumulated_vs_big(ampc_dtype dt, bool scaler, double *rms_out) {
    net a = net_new(scaler), b = net_new(scaler);
    for (int t = 0; t < 6; t++) {
        micro(&a, t, 0, BIG, 1, dt, 1);
        for (int k = 0; k < 4; k++) {
            micro(&b, t, 4 * k, 4, 4, dt, 1);
            if (k < 3) ampc_ctx_step_end(b.ctx);
        }
        assert_true(step(&a));
        assert_true(step(&b));
    }
    static float pa[NPARAM], pb[NPARAM];
    params(&a, pa), params(&b, pb);
    double err = 0, rms = 0;
    for (int i = 0; i < NPARAM; i++)
        err = fmax(err, fabs(pa[i] - pb[i]) / (1 + fabs(pa[i]))), rms += (pa[i] - pb[i]) * (pa[i] - pb[i]);
    *rms_out = sqrt(rms / NPARAM);
    net_free(&a), net_free(&b);
    return err;
}

/* Tolerances (the same seed and batches, another summation order: means of 4 divided by 4 against one mean
 * of 16, and the F32 sums of the weight gradients over 4 rows at a time):
 *   F32: a few roundings, amplified by AdamW's per-element normalisation: 1e-5 of 1 + |p|;
 *   BF16, FP16: a gradient one F32 ulp apart can round to another 16-bit value (the output gradients are
 *   16-bit under autocast), and AdamW turns a near-zero gradient's sign into a full lr-sized step, so an
 *   element may move 2 lr per step the other way: max <= 2 * lr * steps, RMS <= lr / 4 (a summation into
 *   the wrong rows would move every element by about lr). */
static void test_matches_one_big_batch(void **state) {
    (void)state;
    const double lr = 1e-2, steps = 6;
    double r32, rbf, r16;
    double e32 = accumulated_vs_big(AMPC_DTYPE_F32, false, &r32);
    double ebf = accumulated_vs_big(AMPC_DTYPE_BF16, false, &rbf);
    double e16 = accumulated_vs_big(AMPC_DTYPE_F16, true, &r16);
    print_message("accumulated vs one batch, max (rms): F32 %.3g (%.3g), BF16 %.3g (%.3g), FP16 %.3g (%.3g)\n", e32,
                  r32, ebf, rbf, e16, r16);
    if (e32 > 1e-5) FAILF("F32: accumulated parameters off the big batch's by %g", e32);
    if (ebf > 2 * lr * steps || rbf > lr / 4) FAILF("BF16: parameters off the big batch's by %g (rms %g)", ebf, rbf);
    if (e16 > 2 * lr * steps || r16 > lr / 4) FAILF("FP16: parameters off the big batch's by %g (rms %g)", e16, r16);
}

/* One micro-batch of four overflows FP16: the whole step is skipped (no parameter moves), the scale backs
 * off once and the growth tracker resets, the overflow names a parameter; the next step trains. */
static void test_overflow_in_one_micro_batch_skips_the_step(void **state) {
    (void)state;
    net n = net_new(true);
    static float before[NPARAM], after[NPARAM];
    params(&n, before);
    for (int k = 0; k < 4; k++) {
        micro(&n, 0, 4 * k, 4, 4, AMPC_DTYPE_F16, k == 2 ? 1e5f : 1.0f); /* inputs x 1e5: FP16 overflows */
        if (k < 3) ampc_ctx_step_end(n.ctx);
    }
    assert_false(step(&n));
    params(&n, after);
    assert_memory_equal(before, after, sizeof before);
    ampc_grad_scaler_state st;
    ASSERT_OK(ampc_grad_scaler_state_save(n.scaler, &st));
    assert_true(st.scale == 32768.0 && st.growth_tracker == 0 && st.skipped_steps == 1);
    ampc_grad_scaler_overflow ov;
    ASSERT_OK(ampc_grad_scaler_get_overflow(n.scaler, &ov));
    assert_true(ov.found_inf && ov.first_tensor[0]);
    for (int k = 0; k < 4; k++) {
        micro(&n, 1, 4 * k, 4, 4, AMPC_DTYPE_F16, 1.0f);
        if (k < 3) ampc_ctx_step_end(n.ctx);
    }
    assert_true(step(&n));
    params(&n, after);
    assert_memory_not_equal(before, after, sizeof before);
    ASSERT_OK(ampc_grad_scaler_state_save(n.scaler, &st));
    assert_true(st.scale == 32768.0 && st.growth_tracker == 1);
    net_free(&n);
}

int main(void) {
    ampc_rng r = ampc_rng_make(11, 0);
    ampc_rng_normal(&r, &g_x[0][0], sizeof g_x / sizeof(float), 0, 1);
    ampc_rng_normal(&r, &g_t[0][0], sizeof g_t / sizeof(float), 0, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_one_big_batch),
        cmocka_unit_test(test_overflow_in_one_micro_batch_skips_the_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
