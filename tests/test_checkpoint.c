/* test_checkpoint.c: checkpoints of a small GPT trained with FP16 autocast, AdamW and the GradScaler:
 * a restore into fresh objects reproduces every byte of parameters, masters, optimizer state and step
 * counts, the scaler, RNG and data cursor, and the next steps of both runs agree bit for bit (BF16
 * parameters with F32 masters too); a model-only restore; and bad files (foreign, corrupt, truncated,
 * newer version, another model, a missing, extra or mistyped tensor, bad metadata, another loader),
 * each refused with a message naming the file and the field, leaving the objects untouched; and an
 * optimizer parameter without a name, refused at save. */
#include "st_edit.h"
#include "test_dir.h"

#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

TU_CONTEXT(3, 2)

static ampc_dataset *g_ds;

typedef struct run {
    ampc_model *model;
    ampc_optim *opt;
    ampc_grad_scaler *gs;
    ampc_loader *ld;
} run;

static ampc_model_config model_config(ampc_dtype pdt, int d) {
    return (ampc_model_config){.kind = AMPC_MODEL_GPT,
                               .layers = 1,
                               .d_model = d,
                               .heads = 2,
                               .context = 8,
                               .param_dtype = pdt,
                               .dropout = 0.1,
                               .seed = 5};
}

static void run_new(run *r, ampc_model_config mc, int64_t context) {
    memset(r, 0, sizeof *r);
    if (ampc_model_new(g_ctx, &mc, &r->model) != AMPC_OK ||
        ampc_optim_new(g_ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_ADAMW, .lr = 3e-3, .weight_decay = 0.1},
                       &r->opt) != AMPC_OK ||
        ampc_model_add_to_optim(r->model, r->opt) != AMPC_OK ||
        ampc_grad_scaler_new(g_ctx, TU_SP(.enabled = true, .init_scale = 1e30, .growth_interval = 3), &r->gs) !=
            AMPC_OK ||
        ampc_loader_new(
            g_ctx, g_ds,
            &(ampc_loader_params){
                .batch = 4, .context = context, .seed = 9, .shuffle = true, .drop_last = true, .repeat = true},
            &r->ld) != AMPC_OK)
        FAILF("setup: %s", ampc_last_error());
}

static void run_free(run *r) {
    ampc_loader_free(r->ld), ampc_grad_scaler_free(r->gs), ampc_optim_free(r->opt), ampc_model_free(r->model);
}

static ampc_checkpoint_state state_of(run *r, int64_t step) {
    return (ampc_checkpoint_state){
        .model = r->model, .optim = r->opt, .scaler = r->gs, .rng = ampc_ctx_rng(g_ctx), .loader = r->ld, .step = step};
}

/* One autocast step (FP16; BF16 for BF16 parameters) as `ampc train` takes it (dropout draws from the
 * context RNG). */
static void train_step(run *r) {
    ampc_tensor *x, *y;
    if (ampc_loader_next(r->ld, &x, &y, NULL) != AMPC_OK) FAILF("loader: %s", ampc_last_error());
    ampc_dtype dt = ampc_model_get_config(r->model).param_dtype == AMPC_DTYPE_BF16 ? AMPC_DTYPE_BF16 : AMPC_DTYPE_F16;
    ampc_autocast_begin(g_ctx, TU_AC(.dtype = dt, .enabled = true, .cache_enabled = true));
    ampc_tensor *loss = ampc_model_loss(r->model, x, y);
    ampc_autocast_end(g_ctx);
    if (!loss || ampc_backward(g_ctx, ampc_grad_scaler_scale(r->gs, loss)) != AMPC_OK ||
        ampc_grad_scaler_step(r->gs, r->opt, NULL) != AMPC_OK || ampc_grad_scaler_update(r->gs) != AMPC_OK)
        FAILF("step: %s", ampc_last_error());
    ampc_optim_zero_grad(r->opt);
    ampc_ctx_step_end(g_ctx);
}

static void path_of(const char *name, char *buf, size_t size) { snprintf(buf, size, "%s", tu_path(name)); }

/* Every parameter, master and moment of a and b equal byte for byte. */
static void assert_same_state(const run *a, const run *b) {
    for (int i = 0; i < ampc_optim_num_params(a->opt); i++) {
        const ampc_tensor *pa = ampc_optim_param(a->opt, i), *pb = ampc_optim_param(b->opt, i);
        size_t n = (size_t)ampc_tensor_numel(pa);
        assert_memory_equal(ampc_tensor_data(pa), ampc_tensor_data(pb), n * ampc_dtype_size(ampc_tensor_dtype(pa)));
        assert_memory_equal(ampc_tensor_data(ampc_optim_master(a->opt, i)),
                            ampc_tensor_data(ampc_optim_master(b->opt, i)), n * 4);
    }
    for (int g = 0; g < a->opt->ngroups; g++) {
        const ampci_group *ga = &a->opt->groups[g], *gb = &b->opt->groups[g];
        size_t n = (size_t)ampc_tensor_numel(ga->m_block) * 4;
        assert_memory_equal(ampc_tensor_data(ga->m_block), ampc_tensor_data(gb->m_block), n);
        assert_memory_equal(ampc_tensor_data(ga->v_block), ampc_tensor_data(gb->v_block), n);
    }
    for (int i = 0; i < a->opt->n; i++) assert_int_equal(a->opt->params[i].steps, b->opt->params[i].steps);
    assert_int_equal(ampc_optim_steps(a->opt), ampc_optim_steps(b->opt));
    assert_true(ampc_optim_lr(a->opt) == ampc_optim_lr(b->opt));
    ampc_grad_scaler_state sa, sb;
    ampc_grad_scaler_state_save(a->gs, &sa), ampc_grad_scaler_state_save(b->gs, &sb);
    assert_true(sa.scale == sb.scale && sa.growth_tracker == sb.growth_tracker && sa.steps == sb.steps &&
                sa.skipped_steps == sb.skipped_steps && sa.config.growth_interval == sb.config.growth_interval);
    ampc_loader_cursor ca, cb;
    ampc_loader_get_cursor(a->ld, &ca), ampc_loader_get_cursor(b->ld, &cb);
    assert_true(ca.epoch == cb.epoch && ca.position == cb.position);
}

/* 4 steps, save, 3 more; a fresh run restored from the save takes the same 3 steps: same bytes. */
static void check_continuation(ampc_dtype pdt) {
    char path[512];
    path_of(pdt == AMPC_DTYPE_F32 ? "cont.safetensors" : "cont_bf16.safetensors", path, sizeof path);
    run a, b;
    run_new(&a, model_config(pdt, 16), 8);
    for (int i = 0; i < 4; i++) train_step(&a);
    ampc_grad_scaler_state gs;
    ampc_grad_scaler_state_save(a.gs, &gs);
    if (pdt == AMPC_DTYPE_F32) assert_true(gs.skipped_steps >= 1); /* 1e30 overflows FP16: the save follows a skip */
    ampc_checkpoint_state sa = state_of(&a, 4);
    if (ampc_checkpoint_save(path, &sa) != AMPC_OK) FAILF("save: %s", ampc_last_error());
    ampc_rng saved_rng = *ampc_ctx_rng(g_ctx);
    for (int i = 0; i < 3; i++) train_step(&a);
    ampc_rng after_a = *ampc_ctx_rng(g_ctx);
    assert_true(after_a.counter > saved_rng.counter); /* dropout drew numbers */

    *ampc_ctx_rng(g_ctx) = ampc_rng_make(12345, 0); /* the restore must put the saved RNG back */
    run_new(&b, model_config(pdt, 16), 8);
    ampc_safetensors *ck;
    if (ampc_checkpoint_open(path, &ck) != AMPC_OK) FAILF("open: %s", ampc_last_error());
    ampc_checkpoint_state sb = state_of(&b, 0);
    if (ampc_checkpoint_restore(ck, &sb) != AMPC_OK) FAILF("restore: %s", ampc_last_error());
    assert_int_equal(sb.step, 4);
    assert_true(ampc_ctx_rng(g_ctx)->counter == saved_rng.counter && ampc_ctx_rng(g_ctx)->seed == saved_rng.seed);
    for (int i = 0; i < 3; i++) train_step(&b);
    assert_true(ampc_ctx_rng(g_ctx)->counter == after_a.counter);
    assert_same_state(&a, &b);
    ampc_safetensors_free(ck);
    run_free(&a), run_free(&b);
}

static void test_continuation_f32_params(void **state) {
    (void)state;
    check_continuation(AMPC_DTYPE_F32);
}

static void test_continuation_bf16_params(void **state) {
    (void)state;
    check_continuation(AMPC_DTYPE_BF16);
}

/* What a checkpoint looks like to a PyTorch user: parameters under their names, optimizer state
 * beside them, metadata strings. */
static void test_layout(void **state) {
    (void)state;
    char path[512];
    path_of("layout.safetensors", path, sizeof path);
    run a;
    run_new(&a, model_config(AMPC_DTYPE_BF16, 16), 8);
    train_step(&a);
    ampc_checkpoint_state sa = state_of(&a, 1);
    const char *extra[] = {"train.note", "hello"};
    sa.extra = extra, sa.n_extra = 1;
    if (ampc_checkpoint_save(path, &sa) != AMPC_OK) FAILF("save: %s", ampc_last_error());
    ampc_safetensors *st;
    if (ampc_safetensors_read(path, &st) != AMPC_OK) FAILF("read: %s", ampc_last_error());
    const ampc_st_tensor *w = ampc_safetensors_find(st, "blocks.0.attn.qkv.weight");
    assert_non_null(w);
    assert_int_equal(w->dtype, AMPC_DTYPE_BF16);
    assert_true(w->ndim == 2 && w->shape[0] == 48 && w->shape[1] == 16);
    const ampc_st_tensor *m = ampc_safetensors_find(st, "master.blocks.0.attn.qkv.weight");
    assert_true(m && m->dtype == AMPC_DTYPE_F32);
    assert_non_null(ampc_safetensors_find(st, "optim.blocks.0.attn.qkv.weight.exp_avg"));
    assert_non_null(ampc_safetensors_find(st, "optim.blocks.0.attn.qkv.weight.exp_avg_sq"));
    const ampc_st_tensor *s = ampc_safetensors_find(st, "optim.wte.weight.step");
    assert_true(s && s->dtype == AMPC_DTYPE_I64 && s->ndim == 0);
    assert_string_equal(ampc_safetensors_metadata(st, "format"), "pt");
    assert_string_equal(ampc_safetensors_metadata(st, "ampc.format"), AMPC_CHECKPOINT_FORMAT);
    assert_string_equal(ampc_safetensors_metadata(st, "ampc.step"), "1");
    assert_string_equal(ampc_safetensors_metadata(st, "ampc.scaler.growth_interval"), "3");
    assert_string_equal(ampc_safetensors_metadata(st, "ampc.model.d_model"), "16");
    assert_string_equal(ampc_safetensors_metadata(st, "train.note"), "hello");
    assert_int_equal(ampc_safetensors_verify_checksum(st, "ampc.payload_crc32"), AMPC_OK);
    ampc_safetensors_free(st);
    /* reserved extra keys are refused, and the file stays as it was */
    const char *bad[] = {"ampc.step", "7"};
    sa.extra = bad;
    assert_int_equal(ampc_checkpoint_save(path, &sa), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_safetensors_read(path, &st), AMPC_OK);
    assert_string_equal(ampc_safetensors_metadata(st, "ampc.step"), "1");
    ampc_safetensors_free(st);
    run_free(&a);
}

/* A model alone can be loaded from a full checkpoint (optimizer state is then ignored). */
static void test_model_only(void **state) {
    (void)state;
    char path[512];
    path_of("model_only.safetensors", path, sizeof path);
    run a;
    run_new(&a, model_config(AMPC_DTYPE_F32, 16), 8);
    train_step(&a), train_step(&a);
    ampc_checkpoint_state sa = state_of(&a, 2);
    if (ampc_checkpoint_save(path, &sa) != AMPC_OK) FAILF("save: %s", ampc_last_error());
    ampc_model_config mc;
    ampc_model *m;
    ampc_safetensors *ck;
    assert_int_equal(ampc_checkpoint_open(path, &ck), AMPC_OK);
    assert_int_equal(ampc_checkpoint_model_config(ck, &mc), AMPC_OK);
    assert_true(mc.d_model == 16 && mc.layers == 1 && mc.kind == AMPC_MODEL_GPT);
    assert_int_equal(ampc_model_new(g_ctx, &mc, &m), AMPC_OK);
    ampc_checkpoint_state sm = {.model = m};
    assert_int_equal(ampc_checkpoint_restore(ck, &sm), AMPC_OK);
    assert_memory_equal(ampc_tensor_data(ampc_model_param(m, 0)), ampc_tensor_data(ampc_model_param(a.model, 0)),
                        (size_t)ampc_model_param_count(m) * 4);
    ampc_safetensors_free(ck);
    ampc_model_free(m);
    run_free(&a);
}

/* Optimizer state is stored under parameter names: an unnamed parameter is refused, nothing written. */
static void test_unnamed_parameter(void **state) {
    (void)state;
    run a;
    run_new(&a, model_config(AMPC_DTYPE_F32, 16), 8);
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){3});
    ampc_optim *opt;
    assert_non_null(w);
    assert_int_equal(ampc_tensor_set_requires_grad(w, true), AMPC_OK);
    assert_int_equal(ampc_optim_new(g_ctx, NULL, &opt), AMPC_OK);
    assert_int_equal(ampc_optim_add_group(opt, "extra", &w, 1, NULL), AMPC_OK);
    ampc_checkpoint_state st = {.model = a.model, .optim = opt};
    assert_int_equal(ampc_checkpoint_save(tu_path("unnamed.safetensors"), &st), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("parameter 0", "no name", "ampc_tensor_set_name");
    assert_int_equal(access(tu_path("unnamed.safetensors"), F_OK), -1);
    ampc_optim_free(opt);
    ampc_tensor_free(w);
    run_free(&a);
}

/* ---- bad files ---- */

/* Opening or restoring path into a fresh run fails with status s and a message holding both needles;
 * the fresh run's parameters, moments and RNG are untouched. */
static void expect_refusal(const char *path, int d_model, int64_t context, ampc_status s, const char *n1,
                           const char *n2) {
    run r;
    run_new(&r, model_config(AMPC_DTYPE_F32, d_model), context);
    size_t bytes = (size_t)ampc_model_param_count(r.model) * 4;
    void *before = malloc(bytes);
    memcpy(before, ampc_tensor_data(ampc_model_param(r.model, 0)), bytes);
    ampc_rng rng = *ampc_ctx_rng(g_ctx);
    ampc_safetensors *ck = NULL;
    ampc_status got = ampc_checkpoint_open(path, &ck);
    if (got == AMPC_OK) {
        ampc_checkpoint_state st = state_of(&r, 0);
        got = ampc_checkpoint_restore(ck, &st);
    }
    if (got != s || !strstr(ampc_last_error(), n1) || !strstr(ampc_last_error(), n2))
        FAILF("%s: expected %s with \"%s\" and \"%s\", got %s: %s", path, ampc_status_str(s), n1, n2,
              ampc_status_str(got), ampc_last_error());
    assert_memory_equal(before, ampc_tensor_data(ampc_model_param(r.model, 0)), bytes);
    assert_true(ampc_ctx_rng(g_ctx)->counter == rng.counter);
    assert_int_equal(ampc_optim_steps(r.opt), 0);
    free(before);
    ampc_safetensors_free(ck);
    run_free(&r);
}

static void test_bad_files(void **state) {
    (void)state;
    char good[512], bad[512];
    path_of("good.safetensors", good, sizeof good);
    path_of("bad.safetensors", bad, sizeof bad);
    run a;
    run_new(&a, model_config(AMPC_DTYPE_F32, 16), 8);
    train_step(&a);
    ampc_checkpoint_state sa = state_of(&a, 1);
    if (ampc_checkpoint_save(good, &sa) != AMPC_OK) FAILF("save: %s", ampc_last_error());
    run_free(&a);
    expect_refusal(good, 32, 8, AMPC_STATUS_SHAPE, "another model", "ampc.model.d_model is 16, this model has 32");
    expect_refusal(good, 16, 4, AMPC_STATUS_FORMAT, "data cursor is for 36252 samples", "this loader has 72504");
    /* files rewritten with one change each (the checksum recomputed, so the checks behind it are reached) */
    static const struct {
        edit e;
        ampc_status s;
        const char *n1, *n2;
    } cases[] = {
        {{.drop = "blocks.0.mlp.fc.bias"},
         AMPC_STATUS_FORMAT,
         "bad.safetensors",
         "\"blocks.0.mlp.fc.bias\" is missing"},
        {{.drop = "optim.ln_f.weight.exp_avg_sq"}, AMPC_STATUS_FORMAT, "optim.ln_f.weight.exp_avg_sq", "missing"},
        {{.add = "head.weight"}, AMPC_STATUS_FORMAT, "\"head.weight\"", "not a parameter"},
        {{.as_f16 = "optim.wpe.weight.exp_avg"}, AMPC_STATUS_DTYPE, "optim.wpe.weight.exp_avg\" is F16", "expects F32"},
        {{.key = "ampc.format_version", .value = "2"}, AMPC_STATUS_FORMAT, "format version 2", "reads version 1"},
        {{.key = "ampc.format", .value = "something-else"},
         AMPC_STATUS_FORMAT,
         "not an ampc checkpoint",
         "something-else"},
        {{.key = "ampc.step", .value = "12x"}, AMPC_STATUS_FORMAT, "metadata ampc.step is \"12x\"", "64-bit integer"},
        {{.key = "ampc.scaler.scale", .value = "-1"}, AMPC_STATUS_FORMAT, "GradScaler state", "scale"},
        {{.key = "ampc.scaler.growth_factor", .value = "1"}, AMPC_STATUS_FORMAT, "GradScaler state", "growth_factor"},
        {{.key = "ampc.data.position", .value = "999999999"}, AMPC_STATUS_FORMAT, "data cursor", "outside"},
        {{.key = "ampc.rng.counter", .value = ""}, AMPC_STATUS_FORMAT, "ampc.rng.counter", "unsigned"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite(good, bad, cases[i].e);
        expect_refusal(bad, 16, 8, cases[i].s, cases[i].n1, cases[i].n2);
    }

    /* the bytes themselves: a flipped payload byte, a truncation, a file that is no safetensors at all */
    FILE *f = fopen(good, "rb");
    static unsigned char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    buf[n - 5] ^= 0x40;
    f = fopen(bad, "wb"), fwrite(buf, 1, n, f), fclose(f);
    expect_refusal(bad, 16, 8, AMPC_STATUS_FORMAT, bad, "checksum");
    buf[n - 5] ^= 0x40;
    f = fopen(bad, "wb"), fwrite(buf, 1, n - 100, f), fclose(f);
    expect_refusal(bad, 16, 8, AMPC_STATUS_FORMAT, bad, "");
    f = fopen(bad, "wb"), fputs("PK\3\4 this is a zip file, not a checkpoint", f), fclose(f);
    expect_refusal(bad, 16, 8, AMPC_STATUS_FORMAT, bad, "");
    path_of("does-not-exist.safetensors", bad, sizeof bad);
    expect_refusal(bad, 16, 8, AMPC_STATUS_IO, "does-not-exist.safetensors", "");
}

static int group_setup(void **state) {
    if (setup(state)) return -1;
    tu_dir_make("ckpt");
    return ampc_dataset_open(NULL, &g_ds) == AMPC_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    ampc_dataset_free(g_ds);
    tu_dir_remove();
    return teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_continuation_f32_params),
        cmocka_unit_test(test_continuation_bf16_params),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_model_only),
        cmocka_unit_test(test_unnamed_parameter),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
