/* test_module_precision.c: per-module precision (src/amp/module_precision.c). Covers:
 *  - dtypes: an fp32 rule inside a BF16 and an F16 autocast region makes an FP32 island where every op
 *    (linear, matmul, bmm, gelu, add, mul, layer_norm, softmax, attention, sum) gives F32 from 16-bit
 *    activations, 16-bit parameters and F32 parameters, bitwise as a pure F32 run of the same values;
 *    outside it the region's policies hold; ampc_scope_pop closes the island and leaves the region
 *    stack balanced; a bf16/fp16 rule in an FP32 run; nested modules with their own rules and
 *    inheritance by children; the last added of two matching rules wins; one glob matching a module and
 *    its child ("blocks.*") opens one region;
 *  - gradients: backward through an island inside a BF16 region gives the island's F32 parameters the
 *    gradients of a pure FP32 computation of that module, bit for bit;
 *  - real models (gpt, mlp, cnn): the module paths the forward and backward record in range-statistics
 *    sites are exactly the declared modules; "blocks.*.attn=fp32" under BF16 autocast keeps every value
 *    recorded inside blocks.N.attn in F32 while the MLPs run BF16, with a finite loss;
 *  - errors: malformed specs fail naming the rule, all or none; a rule matching no module of a model
 *    fails naming the glob and the model's modules; the string spelling round-trips through parse;
 *    rules cannot change inside an open module. */
#include "test_util.h"

TU_CONTEXT(11, 2)

#define F32 AMPC_DTYPE_F32
#define BF16 AMPC_DTYPE_BF16
#define F16 AMPC_DTYPE_F16

/* Per-test cleanup: whatever a failed test left open (scopes, regions, rules, statistics) goes. */
static int reset(void **state) {
    (void)state;
    while (ampc_scope_path(g_ctx)[0]) ampc_scope_pop(g_ctx);
    while (ampc_autocast_end(g_ctx) == AMPC_OK) {}
    ampc_module_precision_clear(g_ctx);
    ampc_stats_attach(g_ctx, NULL);
    ampc_clear_error();
    ampc_ctx_step_end(g_ctx);
    return 0;
}

static void begin(ampc_dtype dt) { TU_AUTOCAST(dt); }

static void push(const char *name) { ASSERT_OK(ampc_scope_push(g_ctx, name)); }

static void expect_dtype(const ampc_tensor *t, ampc_dtype want, const char *what) {
    if (!t) FAILF("%s failed: %s", what, ampc_last_error());
    if (ampc_tensor_dtype(t) != want)
        FAILF("%s in '%s': dtype %s, expected %s", what, ampc_scope_path(g_ctx), ampc_dtype_name(ampc_tensor_dtype(t)),
              ampc_dtype_name(want));
}

/* The region state: enabled and (when enabled) its dtype. */
static void expect_region(bool enabled, ampc_dtype dt) {
    if (ampc_autocast_enabled(g_ctx) != enabled || (enabled && ampc_autocast_dtype(g_ctx) != dt))
        FAILF("in '%s': autocast %s %s, expected %s %s", ampc_scope_path(g_ctx),
              ampc_autocast_enabled(g_ctx) ? "enabled" : "disabled", ampc_dtype_name(ampc_autocast_dtype(g_ctx)),
              enabled ? "enabled" : "disabled", ampc_dtype_name(dt));
}

/* Exactly n regions are open: ampc_autocast_end succeeds n times, then fails. Closes them. */
static void expect_open_regions(int n) {
    for (int i = 0; i < n; i++) ASSERT_OK(ampc_autocast_end(g_ctx));
    assert_int_equal(ampc_autocast_end(g_ctx), AMPC_STATUS_STATE);
    ampc_clear_error();
}

static void expect_same_values(const ampc_tensor *a, const ampc_tensor *b, const char *what) {
    int64_t n = ampc_tensor_numel(a);
    assert_int_equal(n, ampc_tensor_numel(b));
    float va[256], vb[256];
    assert_true(n <= 256);
    ASSERT_OK(ampc_tensor_copy_to(a, va, F32));
    ASSERT_OK(ampc_tensor_copy_to(b, vb, F32));
    for (int64_t i = 0; i < n; i++)
        if (tu_bits(va[i]) != tu_bits(vb[i])) FAILF("%s: element %lld: %.9g vs %.9g", what, (long long)i, va[i], vb[i]);
}

/* ---- 1. dtypes ---- */

typedef struct island_inputs {
    ampc_tensor *act, *act4, *w, *b, *wl, *ln_w, *x32;
} island_inputs;

/* Every op class inside the island gives F32: 16-bit activations, F32 and 16-bit parameters. */
static void check_island_ops(const island_inputs *in) {
    expect_dtype(ampc_linear(g_ctx, in->act, in->w, in->b), F32, "linear (16-bit x, F32 w)");
    expect_dtype(ampc_linear(g_ctx, in->x32, in->w, NULL), F32, "linear (F32 x, F32 w)");
    expect_dtype(ampc_linear(g_ctx, in->act, in->wl, NULL), F32, "linear (16-bit w)");
    expect_dtype(ampc_matmul(g_ctx, in->act, in->act, AMPC_TRANS_B), F32, "matmul");
    expect_dtype(ampc_bmm(g_ctx, in->act4, in->act4, AMPC_TRANS_B), F32, "bmm");
    expect_dtype(ampc_gelu(g_ctx, in->act, AMPC_GELU_TANH), F32, "gelu");
    expect_dtype(ampc_add(g_ctx, in->act, in->act), F32, "add");
    expect_dtype(ampc_mul(g_ctx, in->act, in->act), F32, "mul");
    expect_dtype(ampc_layer_norm(g_ctx, in->act, in->ln_w, NULL, 1e-5), F32, "layer_norm");
    expect_dtype(ampc_softmax(g_ctx, in->act, -1), F32, "softmax");
    expect_dtype(ampc_sum(g_ctx, in->act, NULL, 0, false), F32, "sum");
    ampc_tensor *q = ampc_tensor_reshape(in->act, 4, (int64_t[]){1, 2, 2, 8});
    expect_dtype(ampc_attention(g_ctx, q, q, q, true), F32, "attention");
}

/* The same ops under the plain region of dtype lp. */
static void check_region_ops(const island_inputs *in, ampc_dtype lp) {
    expect_dtype(ampc_linear(g_ctx, in->act, in->w, in->b), lp, "linear");
    expect_dtype(ampc_linear(g_ctx, in->x32, in->w, NULL), lp, "linear (F32 x, F32 w)");
    expect_dtype(ampc_gelu(g_ctx, in->act, AMPC_GELU_TANH), lp, "gelu (policy none)");
    expect_dtype(ampc_add(g_ctx, in->act, in->act), lp, "add (promote of 16-bit inputs)");
    expect_dtype(ampc_softmax(g_ctx, in->act, -1), F32, "softmax (fp32 policy)");
}

static void island_in_region(ampc_dtype lp) {
    island_inputs in = {.x32 = R(F32, 4, 8), .w = R(F32, 8, 8), .b = R(F32, 8), .wl = R(lp, 6, 8), .ln_w = R(F32, 8)};
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "island=fp32"));
    begin(lp);
    in.act = ampc_linear(g_ctx, in.x32, in.w, NULL); /* an activation made in the region, outside the island */
    expect_dtype(in.act, lp, "activation before the island");
    in.act4 = ampc_tensor_reshape(in.act, 3, (int64_t[]){2, 2, 8});
    push("island");
    expect_region(true, F32);
    check_island_ops(&in);
    /* the island casts up exactly: the result is the F32 computation of the same values */
    ampc_tensor *y = ampc_linear(g_ctx, in.act, in.w, in.b);
    ampc_scope_pop(g_ctx);
    expect_region(true, lp);
    check_region_ops(&in, lp);
    expect_open_regions(1);
    ampc_tensor *ref = ampc_linear(g_ctx, ampc_tensor_cast(in.act, F32), in.w, in.b);
    expect_same_values(y, ref, "island linear vs F32 linear");
    ampc_module_precision_clear(g_ctx);
}

static void test_fp32_island_in_region(void **state) {
    (void)state;
    island_in_region(BF16);
    ampc_ctx_step_end(g_ctx);
    island_in_region(F16);
}

/* A 16-bit rule in an FP32 run (no region) opens an autocast region of that dtype for the module only. */
static void test_low_rule_in_fp32_run(void **state) {
    (void)state;
    static const ampc_dtype lps[2] = {BF16, F16};
    ampc_tensor *x = R(F32, 4, 8), *w = R(F32, 6, 8);
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "enc.ff=bf16,dec=fp16"));
    static const char *const mods[2][2] = {{"enc", "ff"}, {"dec", NULL}};
    for (int k = 0; k < 2; k++) {
        push(mods[k][0]);
        if (mods[k][1]) {
            expect_region(false, F32); /* "enc" itself has no rule */
            expect_dtype(ampc_linear(g_ctx, x, w, NULL), F32, "linear outside the rule");
            push(mods[k][1]);
        }
        expect_region(true, lps[k]);
        expect_dtype(ampc_linear(g_ctx, x, w, NULL), lps[k], "linear inside");
        expect_dtype(ampc_layer_norm(g_ctx, x, NULL, NULL, 1e-5), F32, "layer_norm inside (fp32 policy)");
        while (ampc_scope_path(g_ctx)[0]) ampc_scope_pop(g_ctx);
        expect_region(false, F32);
        expect_dtype(ampc_linear(g_ctx, x, w, NULL), F32, "linear after the pop");
        expect_open_regions(0);
    }
}

/* "a" fp32 and "a.b" bf16 inside an F16 region: a.b runs BF16, a (outside a.b) F32, a.b.c inherits a.b,
 * the sibling a.c inherits a. */
static void test_nested_modules(void **state) {
    (void)state;
    ampc_tensor *x = R(F32, 4, 8), *w = R(F32, 6, 8);
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "a=fp32,a.b=bf16"));
    begin(F16);
    push("a");
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), F32, "linear in a");
    push("b");
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), BF16, "linear in a.b");
    push("c");
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), BF16, "linear in a.b.c (inherits a.b)");
    ampc_scope_pop(g_ctx);
    ampc_scope_pop(g_ctx);
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), F32, "linear in a after a.b");
    push("c");
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), F32, "linear in a.c (inherits a)");
    ampc_scope_pop(g_ctx);
    ampc_scope_pop(g_ctx);
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), F16, "linear outside a");
    expect_open_regions(1);
}

/* Of two rules matching one path, the one added last decides, whichever order. */
static void test_last_rule_wins(void **state) {
    (void)state;
    ampc_tensor *x = R(F32, 4, 8), *w = R(F32, 6, 8);
    static const char *const specs[3] = {"m=fp32,m=bf16", "m=bf16,m=fp32", "m*=fp16,m=fp32,?=bf16"};
    static const ampc_dtype want[3] = {BF16, F32, BF16};
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(ampc_module_precision_parse(g_ctx, specs[i]));
        push("m");
        expect_dtype(ampc_linear(g_ctx, x, w, NULL), want[i], specs[i]);
        ampc_scope_pop(g_ctx);
        expect_open_regions(0);
        ampc_module_precision_clear(g_ctx);
    }
}

/* "blocks.*" matches blocks.0 and blocks.0.attn: one region, opened by blocks.0. Closing one region by
 * hand inside blocks.0.attn must reach the outer BF16 region (with two it would still be the island). */
static void test_glob_opens_one_region(void **state) {
    (void)state;
    ampc_tensor *x = R(F32, 4, 8), *w = R(F32, 6, 8);
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "blocks.*=fp32"));
    begin(BF16);
    push("blocks.0");
    push("attn");
    expect_region(true, F32);
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), F32, "linear in blocks.0.attn");
    ASSERT_OK(ampc_autocast_end(g_ctx));
    expect_region(true, BF16);
    begin(BF16); /* stands in for the island the pop of blocks.0 closes */
    ampc_scope_pop(g_ctx);
    expect_region(true, BF16);
    ampc_scope_pop(g_ctx);
    expect_open_regions(1);
    /* untouched: the pops close exactly what the pushes opened */
    begin(BF16);
    push("blocks.0");
    push("attn");
    ampc_scope_pop(g_ctx);
    expect_region(true, F32); /* blocks.0's island is still open */
    ampc_scope_pop(g_ctx);
    expect_region(true, BF16);
    expect_open_regions(1);
}

/* ---- 2. gradients ---- */

typedef struct mod_params {
    ampc_tensor *w1, *b1, *w2;
} mod_params;

static ampc_tensor *param(ampc_dtype dt, int nd, const int64_t *shape) {
    ampc_tensor *t = ampc_tensor_new(g_ctx, dt, nd, shape);
    assert_non_null(t);
    ASSERT_OK(ampc_tensor_fill_normal(t, 0, 0.5));
    ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    return t;
}
#define P(...) param(F32, SHAPE(__VA_ARGS__))

/* The module: sum(linear(gelu(layer_norm(linear(x, w1, b1))), w2)), with its scope. */
static ampc_tensor *module(const mod_params *p, const ampc_tensor *x) {
    push("island");
    ampc_tensor *h = ampc_linear(g_ctx, x, p->w1, p->b1);
    h = ampc_gelu(g_ctx, ampc_layer_norm(g_ctx, h, NULL, NULL, 1e-5), AMPC_GELU_TANH);
    ampc_tensor *y = ampc_linear(g_ctx, h, p->w2, NULL);
    ampc_scope_pop(g_ctx);
    return ampc_sum(g_ctx, y, NULL, 0, false);
}

static void clear_grads(const mod_params *p) {
    ampc_tensor_clear_grad(p->w1), ampc_tensor_clear_grad(p->b1), ampc_tensor_clear_grad(p->w2);
}

/* Equal, not just close: the island widens the BF16 activation exactly and then runs, forward and
 * backward, the same F32 kernels on the same values as the reference; the BF16 branch (the cast's
 * backward into the activation) feeds no parameter of the island. */
static void test_island_gradients(void **state) {
    (void)state;
    mod_params p = {P(12, 8), P(12), P(5, 12)};
    ampc_tensor *w0 = P(8, 8), *x = R(F32, 6, 8);
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "island=fp32"));
    begin(BF16);
    ampc_tensor *act = ampc_linear(g_ctx, x, w0, NULL);
    expect_dtype(act, BF16, "activation");
    ampc_tensor *loss = module(&p, act);
    expect_dtype(loss, F32, "loss");
    ASSERT_OK(ampc_autocast_end(g_ctx));
    ASSERT_OK(ampc_backward(g_ctx, loss));
    ampc_tensor *g[4] = {ampc_tensor_detach_copy(ampc_tensor_grad(p.w1)),
                         ampc_tensor_detach_copy(ampc_tensor_grad(p.b1)),
                         ampc_tensor_detach_copy(ampc_tensor_grad(p.w2)), ampc_tensor_detach_copy(loss)};
    expect_dtype(ampc_tensor_grad(w0), F32, "grad of the F32 weight outside the island");
    /* the reference: the same values, F32 throughout, no region, no rules */
    ampc_tensor *act32 = ampc_tensor_detach_copy(ampc_tensor_cast(act, F32));
    ampc_module_precision_clear(g_ctx);
    ampc_ctx_step_end(g_ctx);
    clear_grads(&p);
    ampc_tensor *ref = module(&p, act32);
    ASSERT_OK(ampc_backward(g_ctx, ref));
    expect_same_values(g[3], ref, "loss");
    expect_same_values(g[0], ampc_tensor_grad(p.w1), "grad w1");
    expect_same_values(g[1], ampc_tensor_grad(p.b1), "grad b1");
    expect_same_values(g[2], ampc_tensor_grad(p.w2), "grad w2");
    for (int i = 0; i < 4; i++) ampc_tensor_free(g[i]);
    ampc_tensor_free(act32), ampc_tensor_free(w0);
    ampc_tensor_free(p.w1), ampc_tensor_free(p.b1), ampc_tensor_free(p.w2);
}

/* ---- 3. real models ---- */

static ampc_model *make(ampc_model_config c) {
    ampc_model *m;
    if (ampc_model_new(g_ctx, &c, &m) != AMPC_OK) FAILF("ampc_model_new: %s", ampc_last_error());
    return m;
}

static const ampc_model_config gpt_cfg = {
    .kind = AMPC_MODEL_GPT, .layers = 2, .d_model = 32, .heads = 2, .context = 16, .vocab = 16, .seed = 3};

/* One batch for m: (input, target). */
static void batch(const ampc_model *m, ampc_tensor **x, ampc_tensor **y) {
    int64_t ids[2 * 8], tgt[2 * 8];
    for (int i = 0; i < 16; i++) ids[i] = (i * 5 + 1) % 16, tgt[i] = (i * 3 + 2) % 16;
    ampc_model_config c = ampc_model_get_config(m);
    if (c.kind == AMPC_MODEL_GPT) {
        *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){2, 8}, ids, AMPC_DTYPE_I64);
        *y = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 2, (int64_t[]){2, 8}, tgt, AMPC_DTYPE_I64);
        return;
    }
    for (int i = 0; i < 3; i++) tgt[i] %= c.classes;
    *y = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 1, (int64_t[]){3}, tgt, AMPC_DTYPE_I64);
    *x = c.kind == AMPC_MODEL_CNN ? R(F32, 3, c.in_channels, c.image_size, c.image_size) : R(F32, 3, c.in_features);
}

/* One forward + backward of the loss with st attached; the loss must be finite. */
static void run_step(ampc_model *m, ampc_stats *st) {
    ampc_tensor *x, *y;
    batch(m, &x, &y);
    ASSERT_OK(ampc_stats_attach(g_ctx, st));
    ampc_tensor *loss = ampc_model_loss(m, x, y);
    if (!loss) FAILF("loss: %s", ampc_last_error());
    if (!ampc_all_finite(loss)) FAILF("loss is not finite");
    ASSERT_OK(ampc_backward(g_ctx, loss));
    ASSERT_OK(ampc_stats_attach(g_ctx, NULL));
    assert_string_equal(ampc_scope_path(g_ctx), "");
}

static bool declared(const ampc_model *m, const char *path) {
    for (int i = 0; i < ampc_model_num_modules(m); i++)
        if (!strcmp(ampc_model_module_name(m, i), path)) return true;
    return false;
}

/* mod is path or a module inside it. */
static bool within(const char *mod, const char *path) {
    size_t n = strlen(path);
    return !strncmp(mod, path, n) && (mod[n] == '\0' || mod[n] == '.');
}

static bool seen_within(const ampc_stats *st, const char *path) {
    for (int i = 0; i < ampc_stats_count(st); i++)
        if (within(ampc_stats_get(st, i)->module, path)) return true;
    return false;
}

/* Every site's module is declared; every declared module is entered (a site in it or inside it). */
static void check_modules_match(const ampc_model *m, const ampc_stats *st) {
    const char *kind = ampc_model_kind_name(ampc_model_get_config(m).kind);
    assert_true(ampc_model_num_modules(m) > 0 && ampc_stats_count(st) > 0);
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (e->module[0] && !declared(m, e->module))
            FAILF("%s: site %s/%s/%s in undeclared module '%s'", kind, e->module, e->op, ampc_stats_role_name(e->role),
                  e->module);
    }
    for (int i = 0; i < ampc_model_num_modules(m); i++)
        if (!seen_within(st, ampc_model_module_name(m, i)))
            FAILF("%s: declared module '%s' was never entered", kind, ampc_model_module_name(m, i));
}

static void test_models_declare_their_scopes(void **state) {
    (void)state;
    const ampc_model_config cfgs[3] = {
        gpt_cfg,
        {.kind = AMPC_MODEL_MLP, .in_features = 12, .hidden = {8, 6}, .classes = 4, .seed = 4},
        {.kind = AMPC_MODEL_CNN, .image_size = 8, .classes = 3, .seed = 5},
    };
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    for (int k = 0; k < 3; k++) {
        ampc_model *m = make(cfgs[k]);
        run_step(m, st);
        check_modules_match(m, st);
        ampc_stats_reset(st);
        ampc_ctx_step_end(g_ctx);
        ampc_model_free(m);
    }
    ampc_stats_free(st);
}

/* blocks.N.attn or inside it. */
static bool in_attn(const char *mod) {
    int n = -1;
    return sscanf(mod, "blocks.%*d.attn%n", &n) == 0 && n > 0 && (mod[n] == '\0' || mod[n] == '.');
}

/* Every value recorded inside blocks.N.attn (outputs, their gradients, parameter gradients) is F32 in a
 * real region: lowered is false. The MLPs' linears, outside the island, are lowered (BF16). */
static void check_attn_sites(const ampc_stats *st) {
    int island = 0, mlp_lowered = 0;
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (in_attn(e->module)) {
            island++;
            if (e->lowered)
                FAILF("site %s/%s/%s%s%s is 16-bit inside the FP32 island", e->module, e->op,
                      ampc_stats_role_name(e->role), e->param[0] ? " " : "", e->param);
        } else if (e->role == AMPC_STATS_OUTPUT && strstr(e->module, ".mlp.fc") && !strcmp(e->op, "linear"))
            mlp_lowered += e->lowered;
    }
    /* per layer: qkv linear, attention, proj linear, each with out and grad, plus parameter grads */
    assert_true(island >= 2 * 6);
    assert_int_equal(mlp_lowered, 2);
}

static void test_gpt_attention_island(void **state) {
    (void)state;
    ampc_model *m = make(gpt_cfg);
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "blocks.*.attn=fp32"));
    ASSERT_OK(ampc_model_check_module_precision(m));
    ampc_stats *st;
    ASSERT_OK(ampc_stats_new(&st));
    begin(BF16);
    run_step(m, st);
    expect_region(true, BF16);
    expect_open_regions(1);
    check_modules_match(m, st);
    check_attn_sites(st);
    ampc_stats_free(st);
    ampc_model_free(m);
}

/* ---- 4. errors ---- */

static void test_malformed_specs(void **state) {
    (void)state;
    static const struct {
        const char *spec, *names;
    } bad[] = {{"", "rule ''"},
               {"=fp32", "'=fp32'"},
               {"blocks.0", "'blocks.0'"},
               {"a=fp64", "'a=fp64'"},
               {"a=bf16,,b=fp32", "rule ''"},
               {"a b=fp32", "'a b'"},
               {"a=bf16,b=", "'b='"},
               {"a=bf16,b=half16", "'b=half16'"},
               {"a\nb=fp32", "'a?b'"}, /* a control character: refused, and the message stays one line */
               {"a\x7f=bf16", "'a?'"}};
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "keep=fp32"));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ampc_status s = ampc_module_precision_parse(g_ctx, bad[i].spec);
        if (s != AMPC_STATUS_INVALID_ARG)
            FAILF("parse(\"%s\") -> %s, expected INVALID_ARG", bad[i].spec, ampc_status_str(s));
        ASSERT_ERROR_MENTIONS(bad[i].names);
        if (strpbrk(ampc_last_error(), "\n\x7f")) FAILF("'%s': message not one line", ampc_last_error());
        assert_int_equal(ampc_module_precision_count(g_ctx), 1); /* all or none */
    }
    assert_int_equal(ampc_module_precision_add(g_ctx, "a", AMPC_DTYPE_F64), AMPC_STATUS_DTYPE);
    ASSERT_ERROR_MENTIONS("'a'", "F64");
    assert_int_equal(ampc_module_precision_parse(g_ctx, NULL), AMPC_STATUS_INVALID_ARG);
    const char *pat;
    ampc_dtype dt;
    assert_int_equal(ampc_module_precision_rule(g_ctx, 1, &pat, &dt), AMPC_STATUS_INVALID_ARG);
    ASSERT_OK(ampc_module_precision_rule(g_ctx, 0, &pat, &dt));
    assert_string_equal(pat, "keep");
    assert_int_equal(dt, F32);
}

static void test_check_against_model(void **state) {
    (void)state;
    ampc_model *m = make(gpt_cfg);
    ASSERT_OK(ampc_model_check_module_precision(m)); /* no rules */
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "blocks.*.attn=fp32,blocks.*.atn=fp32"));
    assert_int_equal(ampc_model_check_module_precision(m), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("'blocks.*.atn'", "blocks.N.attn", "blocks.N.mlp.fc", "wte", "lm_head");
    const char *msg = ampc_last_error();
    if (strstr(msg, "blocks.0") || strstr(msg, "blocks.1"))
        FAILF("numbered modules should be listed once as blocks.N: %s", msg);
    ampc_module_precision_clear(g_ctx);
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "blocks.*.attn=fp32,lm_head=bf16,blocks.1=fp16,*ln?=f32"));
    ASSERT_OK(ampc_model_check_module_precision(m));
    ampc_model_free(m);
}

static void test_string_round_trip(void **state) {
    (void)state;
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "blocks.*.attn=bf16,lm_head=FP32,x?=f16,[ab]c=float16"));
    char buf[256], again[256];
    size_t n = ampc_module_precision_string(g_ctx, buf, sizeof buf);
    assert_string_equal(buf, "blocks.*.attn=bf16,lm_head=fp32,x?=fp16,[ab]c=fp16");
    assert_int_equal(n, strlen(buf));
    assert_int_equal(ampc_module_precision_string(g_ctx, NULL, 0), n);
    char small[8];
    assert_int_equal(ampc_module_precision_string(g_ctx, small, sizeof small), n);
    assert_string_equal(small, "blocks.");
    ampc_module_precision_clear(g_ctx);
    assert_int_equal(ampc_module_precision_string(g_ctx, again, sizeof again), 0);
    assert_string_equal(again, "");
    ASSERT_OK(ampc_module_precision_parse(g_ctx, buf));
    assert_int_equal(ampc_module_precision_count(g_ctx), 4);
    ampc_module_precision_string(g_ctx, again, sizeof again);
    assert_string_equal(again, buf);
}

static void test_rules_fixed_inside_a_module(void **state) {
    (void)state;
    ASSERT_OK(ampc_module_precision_parse(g_ctx, "m=bf16"));
    push("outer");
    assert_int_equal(ampc_module_precision_add(g_ctx, "x", F32), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("'outer'");
    assert_int_equal(ampc_module_precision_parse(g_ctx, "x=fp32"), AMPC_STATUS_STATE);
    ampc_module_precision_clear(g_ctx); /* ignored inside a module */
    assert_int_equal(ampc_module_precision_count(g_ctx), 1);
    push("m"); /* the rule still applies: outer.m does not match "m" */
    expect_region(false, F32);
    ampc_scope_pop(g_ctx);
    ampc_scope_pop(g_ctx);
    push("m");
    expect_region(true, BF16);
    ampc_scope_pop(g_ctx);
    ASSERT_OK(ampc_module_precision_add(g_ctx, "x", F32));
    assert_int_equal(ampc_module_precision_count(g_ctx), 2);
}

#define T(f) cmocka_unit_test_teardown(f, reset)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_fp32_island_in_region),
        T(test_low_rule_in_fp32_run),
        T(test_nested_modules),
        T(test_last_rule_wins),
        T(test_glob_opens_one_region),
        T(test_island_gradients),
        T(test_models_declare_their_scopes),
        T(test_gpt_attention_island),
        T(test_malformed_specs),
        T(test_check_against_model),
        T(test_string_round_trip),
        T(test_rules_fixed_inside_a_module),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
