/* test_fp8_checkpoint.c: the FP8 state in checkpoints (src/io/checkpoint.c, src/amp/fp8.c; test_fp8.c
 * checks the FP8 arithmetic itself). A 1-layer GPT trained under BF16 autocast + FP8 (delayed, history 4)
 * with AdamW for K steps, saved, continued to 2K; a fresh context restored from the file and continued to
 * 2K has bit-identical parameters; the file holds fp8.<param>.scale (3) / .amax_history (3, 4) and
 * metadata ampc.fp8.recipe; a restore into a context whose FP8 state has another recipe fails (STATE)
 * leaving every object, the GradScaler included, untouched; a file with a malformed or out-of-range
 * recipe, a history of another length or a missing state tensor fails (FORMAT) before anything is
 * restored. */
#include "fp8_test.h"
#include "st_edit.h"
#include "test_dir.h"

#include <stdlib.h>

enum { CK_K = 3, CK_B = 2, CK_T = 8, CK_V = 16 };
static const ampc_fp8_recipe CK_RECIPE = {.amax_history_len = 4};

typedef struct trainer {
    ampc_ctx *ctx;
    ampc_model *model;
    ampc_optim *opt;
} trainer;

static void trainer_new(trainer *t, uint64_t ctx_seed) {
    t->ctx = ctx_new(ctx_seed);
    ampc_model_config mc = {
        .kind = AMPC_MODEL_GPT, .seed = 5, .layers = 1, .d_model = 32, .heads = 2, .context = CK_T, .vocab = CK_V};
    ASSERT_OK(ampc_model_new(t->ctx, &mc, &t->model));
    ASSERT_OK(ampc_optim_new(t->ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = 1e-2, .weight_decay = 0.1},
                             &t->opt));
    ASSERT_OK(ampc_model_add_to_optim(t->model, t->opt));
}

static void trainer_free(trainer *t) {
    ampc_optim_free(t->opt), ampc_model_free(t->model);
    ctx_free(t->ctx);
}

/* Training step `step` (1-based) on a batch that depends on the step only: BF16 autocast + FP8. */
static void trainer_step(trainer *t, int step) {
    int64_t ids[CK_B * CK_T], next[CK_B * CK_T];
    uint64_t s = 77 + (uint64_t)step;
    for (int i = 0; i < CK_B * CK_T; i++) ids[i] = (int64_t)(tu_rand(&s) % CK_V), next[i] = (ids[i] * 5 + 3) % CK_V;
    ampc_tensor *x = ampc_tensor_from_buffer(t->ctx, AMPC_DTYPE_I64, SHAPE(CK_B, CK_T), ids, AMPC_DTYPE_I64),
                *y = ampc_tensor_from_buffer(t->ctx, AMPC_DTYPE_I64, SHAPE(CK_B, CK_T), next, AMPC_DTYPE_I64);
    ASSERT_OK(ampc_autocast_begin(t->ctx, NULL));
    ASSERT_OK(ampc_fp8_begin(t->ctx, &CK_RECIPE));
    ampc_tensor *loss = ampc_model_loss(t->model, x, y);
    ASSERT_OK(ampc_fp8_end(t->ctx));
    ASSERT_OK(ampc_autocast_end(t->ctx));
    if (!loss) FAILF("loss: %s", ampc_last_error());
    ASSERT_OK(ampc_backward(t->ctx, loss));
    ASSERT_OK(ampc_optim_step(t->opt));
    ampc_optim_zero_grad(t->opt);
    ampc_ctx_step_end(t->ctx);
}

/* The file's FP8 part: the recipe, and a scale (3) and history (3, 4) for each GEMM weight, some scales
 * learned (not 1). */
static void expect_fp8_in_file(const char *path) {
    static const char *const weights[] = {"wte.weight", "blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight",
                                          "blocks.0.mlp.fc.weight", "blocks.0.mlp.proj.weight"};
    ampc_safetensors *st;
    ASSERT_OK(ampc_safetensors_read(path, &st));
    const char *meta = ampc_safetensors_metadata(st, "ampc.fp8.recipe");
    assert_non_null(meta);
    assert_string_equal(meta, "0 0 4 0 0");
    int fp8 = 0, learned = 0;
    for (int i = 0; i < ampc_safetensors_count(st); i++)
        fp8 += !strncmp(ampc_safetensors_tensor(st, i)->name, "fp8.", 4);
    assert_int_equal(fp8, 2 * 5);
    for (int i = 0; i < 5; i++) {
        char a[128], b[128];
        snprintf(a, sizeof a, "fp8.%s.scale", weights[i]), snprintf(b, sizeof b, "fp8.%s.amax_history", weights[i]);
        const ampc_st_tensor *sc = ampc_safetensors_find(st, a), *h = ampc_safetensors_find(st, b);
        if (!sc || !h) FAILF("%s or %s missing", a, b);
        assert_true(sc->dtype == AMPC_DTYPE_F32 && sc->ndim == 1 && sc->shape[0] == 3);
        assert_true(h->dtype == AMPC_DTYPE_F32 && h->ndim == 2 && h->shape[0] == 3 && h->shape[1] == 4);
        for (int r = 0; r < 3; r++) learned += ((const float *)sc->data)[r] != 1.0f;
    }
    assert_true(learned >= 10);
    ampc_safetensors_free(st);
}

/* Elements of the models' parameters that differ in their bits. */
static int64_t params_diff(const trainer *a, const trainer *b) {
    int64_t d = 0;
    for (int i = 0; i < ampc_model_num_params(a->model); i++) {
        const ampc_tensor *pa = ampc_model_param(a->model, i), *pb = ampc_model_param(b->model, i);
        const uint32_t *x = ampc_tensor_data(pa), *y = ampc_tensor_data(pb);
        assert_int_equal(ampc_tensor_dtype(pa), AMPC_DTYPE_F32);
        for (int64_t k = 0; k < ampc_tensor_numel(pa); k++) d += x[k] != y[k];
    }
    return d;
}

static void test_checkpoint_resume(void **state) {
    (void)state;
    tu_dir_make("fp8");
    char path[512];
    snprintf(path, sizeof path, "%s", tu_path("fp8.safetensors"));
    trainer a, b;
    trainer_new(&a, 7);
    for (int s = 1; s <= CK_K; s++) trainer_step(&a, s);
    ampc_checkpoint_state sa = {.model = a.model, .optim = a.opt, .rng = ampc_ctx_rng(a.ctx), .step = CK_K};
    ASSERT_OK(ampc_checkpoint_save(path, &sa));
    for (int s = CK_K + 1; s <= 2 * CK_K; s++) trainer_step(&a, s);
    expect_fp8_in_file(path);
    trainer_new(&b, 99);
    ampc_safetensors *ck;
    ASSERT_OK(ampc_checkpoint_open(path, &ck));
    ampc_checkpoint_state sb = {.model = b.model, .optim = b.opt, .rng = ampc_ctx_rng(b.ctx)};
    ASSERT_OK(ampc_checkpoint_restore(ck, &sb));
    assert_int_equal(sb.step, CK_K);
    ampc_safetensors_free(ck);
    for (int s = CK_K + 1; s <= 2 * CK_K; s++) trainer_step(&b, s);
    int64_t d = params_diff(&a, &b);
    if (d) FAILF("the resumed run differs from the uninterrupted one in %lld parameter elements", (long long)d);
    trainer_free(&a), trainer_free(&b);
    tu_dir_remove();
}

/* A checkpoint of one FP8 recipe restored into a context whose FP8 state has another fails (STATE) and,
 * as every failed restore, leaves the objects untouched: parameters, optimizer and GradScaler. */
static void test_checkpoint_recipe_mismatch(void **state) {
    (void)state;
    tu_dir_make("fp8m");
    char path[512];
    snprintf(path, sizeof path, "%s", tu_path("fp8m.safetensors"));
    trainer a, c, d;
    ampc_grad_scaler *ga, *gc;
    trainer_new(&a, 7), trainer_new(&c, 7), trainer_new(&d, 7); /* d: c as it was */
    ASSERT_OK(ampc_grad_scaler_new(a.ctx, TU_SP(.enabled = true, .init_scale = 1024), &ga));
    ASSERT_OK(ampc_grad_scaler_new(c.ctx, TU_SP(.enabled = true, .init_scale = 32), &gc));
    trainer_step(&a, 1);
    ampc_checkpoint_state sa = {.model = a.model, .optim = a.opt, .scaler = ga, .step = 1};
    ASSERT_OK(ampc_checkpoint_save(path, &sa));
    ASSERT_OK(ampc_fp8_begin(c.ctx, &(ampc_fp8_recipe){.amax_history_len = 8})); /* state under history 8 */
    ampc_tensor *w = param_new(c.ctx, "w", SHAPE(3, 4), 1.0);
    assert_non_null(ampc_linear(c.ctx, normal(c.ctx, SHAPE(2, 4), 1.0), w, NULL));
    ASSERT_OK(ampc_fp8_end(c.ctx));
    ampc_safetensors *ck;
    ASSERT_OK(ampc_checkpoint_open(path, &ck));
    ampc_checkpoint_state sc = {.model = c.model, .optim = c.opt, .scaler = gc};
    assert_int_equal(ampc_checkpoint_restore(ck, &sc), AMPC_STATUS_STATE);
    ampc_safetensors_free(ck);
    assert_int_equal(params_diff(&c, &d), 0);
    assert_int_equal(ampc_optim_steps(c.opt), 0);
    if (ampc_grad_scaler_get_scale(gc) != 32)
        FAILF("the failed restore loaded the GradScaler: scale %g, expected 32 (untouched)",
              ampc_grad_scaler_get_scale(gc));
    ampc_tensor_free(w);
    ampc_grad_scaler_free(ga), ampc_grad_scaler_free(gc);
    trainer_free(&a), trainer_free(&c), trainer_free(&d);
    tu_dir_remove();
}

/* A file whose FP8 part is damaged (the recipe malformed or out of range, a state tensor missing or of
 * the wrong shape) is refused with FORMAT and a message naming it, before anything is restored. */
static void test_checkpoint_bad_fp8(void **state) {
    (void)state;
    tu_dir_make("fp8b");
    char good[512], bad[512];
    snprintf(good, sizeof good, "%s", tu_path("good.safetensors"));
    snprintf(bad, sizeof bad, "%s", tu_path("bad.safetensors"));
    trainer a;
    trainer_new(&a, 7);
    trainer_step(&a, 1);
    ASSERT_OK(ampc_checkpoint_save(good, &(ampc_checkpoint_state){.model = a.model, .optim = a.opt, .step = 1}));
    trainer_free(&a);
    static const struct {
        edit e;
        const char *needle;
    } cases[] = {
        {{.key = "ampc.fp8.recipe", .value = "0 0 4"}, "ampc.fp8.recipe"},
        {{.key = "ampc.fp8.recipe", .value = "7 0 4 0 0"}, "format"},
        {{.key = "ampc.fp8.recipe", .value = "0 2 4 0 0"}, "scaling"},
        {{.key = "ampc.fp8.recipe", .value = "0 0 4 9 0"}, "amax_compute"},
        {{.key = "ampc.fp8.recipe", .value = "0 0 4 0 100"}, "margin"},
        {{.key = "ampc.fp8.recipe", .value = "0 0 5 0 0"}, "fp8.wte.weight.amax_history (3, 5)"},
        {{.drop = "fp8.blocks.0.mlp.fc.weight.scale"}, "fp8.blocks.0.mlp.fc.weight.scale"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(good, bad, cases[i].e);
        trainer c, d; /* d: c as it was */
        trainer_new(&c, 7), trainer_new(&d, 7);
        ampc_safetensors *ck;
        ASSERT_OK(ampc_checkpoint_open(bad, &ck));
        ampc_status s = ampc_checkpoint_restore(ck, &(ampc_checkpoint_state){.model = c.model, .optim = c.opt});
        if (s != AMPC_STATUS_FORMAT || !strstr(ampc_last_error(), cases[i].needle))
            FAILF("case %zu: expected FORMAT naming \"%s\", got %s: %s", i, cases[i].needle, ampc_status_str(s),
                  ampc_last_error());
        ampc_safetensors_free(ck);
        assert_int_equal(params_diff(&c, &d), 0);
        assert_int_equal(ampc_optim_steps(c.opt), 0);
        trainer_free(&c), trainer_free(&d);
    }
    tu_dir_remove();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_resume),
        cmocka_unit_test(test_checkpoint_recipe_mismatch),
        cmocka_unit_test(test_checkpoint_bad_fp8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
