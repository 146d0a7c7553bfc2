/* test_models.c: the four models: parameter names, shapes and counts (the default GPT has the 10.8M
 * parameters of the PyTorch anchor), initial weights that depend only on the seed, forward shapes, a
 * loss whose backward reaches every parameter, the optimizer grouping, module paths in anomaly reports,
 * bad configurations, and a small GPT that memorises a sequence in F32 and under BF16 autocast. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(2, 2)

static ampc_model *make(ampc_model_config c) {
    ampc_model *m;
    if (ampc_model_new(g_ctx, &c, &m) != AMPC_OK) FAILF("ampc_model_new: %s", ampc_last_error());
    return m;
}

static int find(const ampc_model *m, const char *name) {
    for (int i = 0; i < ampc_model_num_params(m); i++)
        if (strcmp(ampc_tensor_name(ampc_model_param(m, i)), name) == 0) return i;
    return -1;
}

static void test_gpt_parameters(void **state) {
    (void)state;
    ampc_model *m = make((ampc_model_config){.kind = AMPC_MODEL_GPT});
    ampc_model_config c = ampc_model_get_config(m);
    assert_true(c.layers == 6 && c.d_model == 384 && c.heads == 6 && c.context == 256 && c.vocab == 256);
    /* wte + wpe + 6 x (2 LN + qkv + proj + 2 LN + fc + proj) + ln_f, with biases */
    int64_t D = 384, per_block = 4 * D + 3 * D * D + 3 * D + D * D + D + 4 * D * D + 4 * D + 4 * D * D + D;
    assert_int_equal(ampc_model_param_count(m), 2 * 256 * D + 6 * per_block + 2 * D);
    assert_true(ampc_model_param_count(m) > 10700000 && ampc_model_param_count(m) < 10900000);
    int qkv = find(m, "blocks.3.attn.qkv.weight");
    assert_true(qkv >= 0);
    assert_int_equal(ampc_tensor_dim(ampc_model_param(m, qkv), 0), 3 * 384);
    assert_true(find(m, "wte.weight") == 0 && find(m, "ln_f.bias") == ampc_model_num_params(m) - 1);
    /* parameters are views of one contiguous block, in declaration order */
    const float *a = ampc_tensor_data(ampc_model_param(m, 0)), *b = ampc_tensor_data(ampc_model_param(m, 1));
    assert_ptr_equal(a + 256 * 384, b);
    ampc_model_free(m);
}

static void test_init_depends_on_seed_only(void **state) {
    (void)state;
    ampc_model_config c = {.kind = AMPC_MODEL_MLP, .hidden = {32, 16}, .seed = 7};
    ampc_model *a = make(c), *b = make(c);
    ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){100}, 0, 1); /* the context RNG moves: no effect */
    c.seed = 8;
    ampc_model *d = make(c);
    size_t bytes = (size_t)ampc_model_param_count(a) * 4;
    assert_memory_equal(ampc_tensor_data(ampc_model_param(a, 0)), ampc_tensor_data(ampc_model_param(b, 0)), bytes);
    assert_memory_not_equal(ampc_tensor_data(ampc_model_param(a, 0)), ampc_tensor_data(ampc_model_param(d, 0)), bytes);
    /* PyTorch's default bound 1/sqrt(fan_in) for layers.0 (fan_in 784) */
    const float *w = ampc_tensor_data(ampc_model_param(a, 0));
    for (int i = 0; i < 32 * 784; i++) assert_true(fabsf(w[i]) <= 1.0f / 28.0f);
    ampc_model_free(a), ampc_model_free(b), ampc_model_free(d);
}

/* Initial weights are made in pieces on the threads: a context of 1 or 3 threads gives the bits of one
 * serial pass of the documented draws (uniform for fan-in layers, normal for the GPT's embeddings), for
 * parameters of several pieces (100352 and 98304 values). */
static void test_init_threads(void **state) {
    (void)state;
    ampc_model_config cs[2] = {
        {.kind = AMPC_MODEL_MLP, .hidden = {128}, .seed = 7},
        {.kind = AMPC_MODEL_GPT, .layers = 1, .d_model = 384, .heads = 6, .context = 8, .seed = 7}};
    for (int k = 0; k < 2; k++) {
        ampc_model *m[2];
        ampc_ctx *ctx[2];
        for (int t = 0; t < 2; t++) {
            ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = t ? 3 : 1}, &ctx[t]));
            if (ampc_model_new(ctx[t], &cs[k], &m[t]) != AMPC_OK) FAILF("ampc_model_new: %s", ampc_last_error());
        }
        const ampc_tensor *p0 = ampc_model_param(m[0], 0);
        int64_t n = ampc_tensor_numel(p0);
        assert_true(n > 65536);
        float *want = malloc((size_t)n * sizeof *want);
        ampc_rng r = ampc_rng_make(7, 1000);                                            /* parameter 0's stream */
        if (k == 0) ampc_rng_uniform(&r, want, (size_t)n, -1.0f / 28.0f, 1.0f / 28.0f); /* fan-in 784 */
        else ampc_rng_normal(&r, want, (size_t)n, 0.0f, 0.02f);
        for (int t = 0; t < 2; t++) {
            const ampc_tensor *p = ampc_model_param(m[t], 0);
            if (memcmp(ampc_tensor_data(p), want, (size_t)n * sizeof *want) != 0)
                FAILF("%s at %d thread(s): %s differs from its serial draws", k ? "gpt" : "mlp", t ? 3 : 1,
                      ampc_tensor_name(p));
            assert_memory_equal(ampc_tensor_data(ampc_model_param(m[t], ampc_model_num_params(m[t]) - 1)),
                                ampc_tensor_data(ampc_model_param(m[0], ampc_model_num_params(m[0]) - 1)),
                                (size_t)ampc_tensor_numel(ampc_model_param(m[0], ampc_model_num_params(m[0]) - 1)) * 4);
        }
        free(want);
        for (int t = 0; t < 2; t++) ampc_model_free(m[t]), ampc_ctx_free(ctx[t]);
    }
}

/* Every parameter receives a finite gradient from one backward. */
static void check_backward_reaches_all(ampc_model *m, const ampc_tensor *x, const ampc_tensor *y) {
    ampc_tensor *loss = ampc_model_loss(m, x, y);
    if (!loss) FAILF("loss: %s", ampc_last_error());
    assert_int_equal(ampc_tensor_ndim(loss), 0);
    ASSERT_OK(ampc_backward(g_ctx, loss));
    for (int i = 0; i < ampc_model_num_params(m); i++) {
        ampc_tensor *g = ampc_tensor_grad(ampc_model_param(m, i));
        if (!g || !ampc_all_finite(g))
            FAILF("parameter %s has no finite gradient", ampc_tensor_name(ampc_model_param(m, i)));
    }
    ampc_ctx_step_end(g_ctx);
}

static ampc_tensor *labels(int n, int classes) {
    int64_t v[64];
    for (int i = 0; i < n; i++) v[i] = (i * 7) % classes;
    return ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 1, (int64_t[]){n}, v, AMPC_DTYPE_I64);
}

static void test_forward_shapes_and_backward(void **state) {
    (void)state;
    ampc_model *cnn = make((ampc_model_config){.kind = AMPC_MODEL_CNN});
    ampc_tensor *img = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 4, (int64_t[]){3, 1, 28, 28}, 0, 1);
    ampc_tensor *out = ampc_model_forward(cnn, img);
    assert_true(out && ampc_tensor_dim(out, 0) == 3 && ampc_tensor_dim(out, 1) == 10);
    assert_int_equal(ampc_tensor_dim(ampc_model_param(cnn, find(cnn, "fc1.weight")), 1), 64 * 7 * 7);
    check_backward_reaches_all(cnn, img, labels(3, 10));
    ampc_model *mlp = make((ampc_model_config){.kind = AMPC_MODEL_MLP, .hidden = {64}});
    img = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 4, (int64_t[]){5, 1, 28, 28}, 0, 1); /* images are flattened */
    out = ampc_model_forward(mlp, img);
    assert_true(out && ampc_tensor_dim(out, 0) == 5 && ampc_tensor_dim(out, 1) == 10);
    check_backward_reaches_all(mlp, img, labels(5, 10));
    ampc_model *gpt = make(
        (ampc_model_config){.kind = AMPC_MODEL_GPT, .layers = 2, .d_model = 32, .heads = 4, .context = 16});
    int64_t ids[2 * 9];
    for (int i = 0; i < 18; i++) ids[i] = (i * 37) % 256;
    ampc_tensor *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){2, 9}, ids, AMPC_DTYPE_I64);
    out = ampc_model_forward(gpt, x);
    assert_true(out && ampc_tensor_dim(out, 0) == 2 && ampc_tensor_dim(out, 1) == 9 && ampc_tensor_dim(out, 2) == 256);
    check_backward_reaches_all(gpt, x, x);
    ampc_model *simple = make((ampc_model_config){.kind = AMPC_MODEL_SIMPLE});
    assert_int_equal(ampc_model_param_count(simple), 4 * 5 + 4 + 3 * 4 + 3);
    ampc_tensor *xs = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){6, 5}, 0, 1);
    check_backward_reaches_all(simple, xs, ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){6, 3}, 0, 1));
    ampc_model_free(cnn), ampc_model_free(mlp), ampc_model_free(gpt), ampc_model_free(simple);
}

static void test_optimizer_groups_and_scopes(void **state) {
    (void)state;
    ampc_model *gpt = make(
        (ampc_model_config){.kind = AMPC_MODEL_GPT, .layers = 1, .d_model = 16, .heads = 2, .context = 8});
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .weight_decay = 0.1}, &opt));
    ASSERT_OK(ampc_model_add_to_optim(gpt, opt));
    assert_int_equal(ampc_optim_num_params(opt), ampc_model_num_params(gpt));
    /* decay holds exactly the 2-D projection weights (qkv, attn.proj, mlp.fc, mlp.proj) */
    for (int i = 0; i < 4; i++) assert_non_null(strstr(ampc_tensor_name(ampc_optim_param(opt, i)), "weight"));
    assert_non_null(strstr(ampc_tensor_name(ampc_optim_param(opt, 4)), "wte"));
    /* anomaly reports name the module path: an inf injected into one weight surfaces in its scope */
    ASSERT_OK(ampc_tensor_fill(ampc_model_param(gpt, find(gpt, "blocks.0.mlp.fc.weight")), INFINITY));
    ampc_autograd_set_detect_anomaly(g_ctx, true);
    int64_t ids[4] = {1, 2, 3, 4};
    ampc_tensor *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){1, 4}, ids, AMPC_DTYPE_I64);
    assert_null(ampc_model_forward(gpt, x));
    ASSERT_ERROR_MENTIONS("anomaly", "ampc_linear", "scope 'blocks.0.mlp.fc'", "'blocks.0.mlp.fc.weight'");
    ampc_autograd_set_detect_anomaly(g_ctx, false);
    while (ampc_scope_path(g_ctx)[0]) ampc_scope_pop(g_ctx); /* the failed forward left its scopes */
    ampc_ctx_step_end(g_ctx);
    ampc_optim_free(opt);
    ampc_model_free(gpt);
}

static void test_bad_configurations(void **state) {
    (void)state;
    ampc_model *m;
    assert_int_equal(ampc_model_new(g_ctx, &(ampc_model_config){.d_model = 10, .heads = 3}, &m),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_model_new (gpt)", "heads must divide d_model", "d_model 10", "heads 3");
    assert_null(strstr(ampc_last_error(), "image")); /* only the GPT's own sizes */
    assert_int_equal(ampc_model_new(g_ctx, &(ampc_model_config){.kind = AMPC_MODEL_CNN, .image_size = 30}, &m),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_model_new (cnn)", "multiple of 4", "image_size 30");
    assert_null(strstr(ampc_last_error(), "heads"));
    /* sizes of another kind do not matter */
    ASSERT_OK(ampc_model_new(
        g_ctx, &(ampc_model_config){.kind = AMPC_MODEL_MLP, .d_model = 10, .heads = 3, .hidden = {16}}, &m));
    ampc_model_free(m);
    assert_int_equal(ampc_model_new(g_ctx, &(ampc_model_config){.param_dtype = AMPC_DTYPE_I32}, &m), AMPC_STATUS_DTYPE);
    ampc_model_kind k;
    ASSERT_OK(ampc_model_kind_parse("CNN", &k));
    assert_int_equal(k, AMPC_MODEL_CNN);
    assert_int_equal(ampc_model_kind_parse("rnn", &k), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("unknown model 'rnn'", "gpt, mlp, cnn or simple");
    m = make((ampc_model_config){.kind = AMPC_MODEL_GPT, .layers = 1, .d_model = 8, .heads = 2, .context = 4});
    int64_t ids[5] = {0};
    assert_null(ampc_model_forward(
        m, ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){1, 5}, ids, AMPC_DTYPE_I64)));
    ASSERT_ERROR_MENTIONS("T <= context 4");
    ampc_ctx_step_end(g_ctx);
    ampc_model_free(m);
}

/* A small GPT memorises a periodic sequence; under BF16 autocast it learns it as well. */
static double memorise(ampc_dtype compute) {
    ampc_model *m = make(
        (ampc_model_config){.kind = AMPC_MODEL_GPT, .layers = 2, .d_model = 32, .heads = 4, .context = 16, .seed = 3});
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = 3e-3}, &opt));
    ASSERT_OK(ampc_model_add_to_optim(m, opt));
    int64_t seq[17];
    for (int i = 0; i < 17; i++) seq[i] = "the cat sat on t"[i % 16];
    float loss = 0;
    for (int step = 0; step < 150; step++) {
        ampc_tensor *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){1, 16}, seq, AMPC_DTYPE_I64);
        ampc_tensor *y = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){1, 16}, seq + 1, AMPC_DTYPE_I64);
        if (compute != AMPC_DTYPE_F32)
            ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = compute, .enabled = true, .cache_enabled = true)));
        ampc_tensor *l = ampc_model_loss(m, x, y);
        if (compute != AMPC_DTYPE_F32) ASSERT_OK(ampc_autocast_end(g_ctx));
        ASSERT_OK(ampc_backward(g_ctx, l));
        ASSERT_OK(ampc_optim_step(opt));
        ampc_optim_zero_grad(opt);
        ASSERT_OK(ampc_tensor_copy_to(l, &loss, AMPC_DTYPE_F32));
        ampc_ctx_step_end(g_ctx);
    }
    ampc_optim_free(opt);
    ampc_model_free(m);
    return loss;
}

static void test_gpt_memorises(void **state) {
    (void)state;
    double f32 = memorise(AMPC_DTYPE_F32), bf16 = memorise(AMPC_DTYPE_BF16);
    print_message("  final loss: F32 %.4f, BF16 autocast %.4f (ln 256 = 5.55 at the start)\n", f32, bf16);
    assert_true(f32 < 0.2 && bf16 < 0.2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_parameters),
        cmocka_unit_test(test_init_depends_on_seed_only),
        cmocka_unit_test(test_init_threads),
        cmocka_unit_test(test_forward_shapes_and_backward),
        cmocka_unit_test(test_optimizer_groups_and_scopes),
        cmocka_unit_test(test_bad_configurations),
        cmocka_unit_test(test_gpt_memorises),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
