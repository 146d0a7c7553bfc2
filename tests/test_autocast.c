/* test_autocast.c: autocast regions and policies. Output dtypes of every op class under each built-in
 * table (PyTorch's test_autocast_* out-of-place checks), bitwise equality with manually pre-cast inputs,
 * nesting and FP32 islands, ignored types (F64, integers), banned ops, the promote rule, the weight-cast
 * cache (one cast per weight per region, invalidated by in-place updates, no memory growth over 1000
 * regions), anomaly mode and the FP32 matmul precision switch; the parameter struct's defaults and its
 * refusals (a struct not from ampc_autocast_defaults(), an enabled F32 region); a step end inside an open
 * region, said once. */
#include "test_util.h"

#include "core/core.h"
#include "kernels/kernels.h"

#include <math.h>

TU_CONTEXT(9, 2)

static int end_step(void **state) {
    (void)state;
    while (ampc_autocast_end(g_ctx) == AMPC_OK) { /* close whatever a failed test left open */
    }
    ampc_clear_error();
    ASSERT_OK(ampc_autocast_load_table(g_ctx, AMPC_AUTOCAST_TABLE_TUTORIAL));
    ampc_ctx_step_end(g_ctx);
    return 0;
}

static void begin(ampc_dtype dt) { TU_AUTOCAST(dt); }

static void expect_dtype(const ampc_tensor *t, ampc_dtype want, const char *what) {
    if (!t) FAILF("%s failed: %s", what, ampc_last_error());
    if (ampc_tensor_dtype(t) != want)
        FAILF("%s: dtype %s, expected %s", what, ampc_dtype_name(ampc_tensor_dtype(t)), ampc_dtype_name(want));
}

/* One tensor per op class, produced inside a region of dtype `lp` from F32 (and low-precision) inputs. */
static void check_classes(ampc_dtype lp, ampc_dtype gemm, ampc_dtype sens, ampc_dtype softmax_dt) {
    ampc_tensor *x = R(AMPC_DTYPE_F32, 4, 8), *w = R(AMPC_DTYPE_F32, 6, 8), *xl = R(lp, 4, 8);
    begin(lp);
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), gemm, "linear");
    expect_dtype(ampc_matmul(g_ctx, x, w, AMPC_TRANS_B), gemm, "matmul");
    expect_dtype(ampc_bmm(g_ctx, R(AMPC_DTYPE_F32, 2, 3, 4), R(AMPC_DTYPE_F32, 2, 4, 5), 0), gemm, "bmm");
    expect_dtype(ampc_conv2d(g_ctx, R(AMPC_DTYPE_F32, 1, 2, 5, 5), R(AMPC_DTYPE_F32, 3, 2, 3, 3), NULL, NULL), gemm,
                 "conv2d");
    ampc_tensor *q = R(AMPC_DTYPE_F32, 1, 2, 3, 4);
    expect_dtype(ampc_attention(g_ctx, q, q, q, true), gemm, "attention");
    expect_dtype(ampc_softmax(g_ctx, xl, -1), softmax_dt, "softmax");
    expect_dtype(ampc_log_softmax(g_ctx, xl, -1), softmax_dt, "log_softmax");
    expect_dtype(ampc_layer_norm(g_ctx, xl, NULL, NULL, 1e-5), sens, "layer_norm");
    int64_t tgt[4] = {0, 1, 2, 3};
    ampc_tensor *t = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 1, (int64_t[]){4}, tgt, AMPC_DTYPE_I64);
    expect_dtype(ampc_cross_entropy(g_ctx, xl, t, -100), AMPC_DTYPE_F32, "cross_entropy");
    expect_dtype(ampc_mse_loss(g_ctx, xl, xl), AMPC_DTYPE_F32, "mse_loss");
    expect_dtype(ampc_relu(g_ctx, xl), lp, "relu (not listed: input dtype)");
    expect_dtype(ampc_relu(g_ctx, x), AMPC_DTYPE_F32, "relu of F32");
    ampc_autocast_end(g_ctx);
}

static void test_tutorial_table_dtypes(void **state) {
    (void)state;
    static const ampc_dtype lps[2] = {AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
    for (int i = 0; i < 2; i++) {
        check_classes(lps[i], lps[i], AMPC_DTYPE_F32, AMPC_DTYPE_F32);
        ampc_tensor *xl = R(lps[i], 4, 8), *x = R(AMPC_DTYPE_F32, 4, 8);
        begin(lps[i]);
        expect_dtype(ampc_exp(g_ctx, xl), AMPC_DTYPE_F32, "exp");
        expect_dtype(ampc_log(g_ctx, ampc_exp(g_ctx, xl)), AMPC_DTYPE_F32, "log");
        expect_dtype(ampc_sum(g_ctx, xl, NULL, 0, false), AMPC_DTYPE_F32, "sum");
        expect_dtype(ampc_mean(g_ctx, xl, NULL, 0, false), AMPC_DTYPE_F32, "mean");
        expect_dtype(ampc_positional_encoding(g_ctx, xl), AMPC_DTYPE_F32, "positional_encoding");
        expect_dtype(ampc_add(g_ctx, xl, x), AMPC_DTYPE_F32, "add (promote, an F32 input)");
        expect_dtype(ampc_add(g_ctx, xl, xl), lps[i], "add (promote, low-precision inputs)");
        const ampc_tensor *parts[2] = {xl, x};
        expect_dtype(ampc_concat(g_ctx, parts, 2, 0), AMPC_DTYPE_F32, "concat (promote)");
        ampc_autocast_end(g_ctx);
    }
}

static void test_pytorch_tables(void **state) {
    (void)state;
    ASSERT_OK(ampc_autocast_load_table(g_ctx, AMPC_AUTOCAST_TABLE_PYTORCH_CPU));
    /* AutocastCPU: softmax and layer_norm are not listed and run in BF16 when given BF16 */
    check_classes(AMPC_DTYPE_BF16, AMPC_DTYPE_BF16, AMPC_DTYPE_BF16, AMPC_DTYPE_BF16);
    ASSERT_OK(ampc_autocast_load_table(g_ctx, AMPC_AUTOCAST_TABLE_PYTORCH_CUDA));
    /* CUDA: layer_norm fp32; softmax sets its output dtype to fp32 */
    check_classes(AMPC_DTYPE_F16, AMPC_DTYPE_F16, AMPC_DTYPE_F32, AMPC_DTYPE_F32);
    ampc_cast_policy p;
    ASSERT_OK(ampc_autocast_policy(g_ctx, "softmax", &p));
    assert_int_equal(p, AMPC_CAST_FP32_OUTPUT);
    assert_string_equal(ampc_cast_policy_name(p), "fp32_output");
}

static void test_editable_policies(void **state) {
    (void)state;
    ampc_tensor *xl = R(AMPC_DTYPE_BF16, 4, 8);
    ASSERT_OK(ampc_autocast_set_policy(g_ctx, "softmax", AMPC_CAST_LOWER));
    ASSERT_OK(ampc_autocast_set_policy(g_ctx, "LINEAR", AMPC_CAST_FP32));
    begin(AMPC_DTYPE_BF16);
    expect_dtype(ampc_softmax(g_ctx, R(AMPC_DTYPE_F32, 2, 3), 0), AMPC_DTYPE_BF16, "softmax moved to lower");
    expect_dtype(ampc_linear(g_ctx, xl, R(AMPC_DTYPE_BF16, 3, 8), NULL), AMPC_DTYPE_F32, "linear moved to fp32");
    ASSERT_OK(ampc_autocast_set_policy(g_ctx, "mse_loss", AMPC_CAST_BANNED));
    assert_null(ampc_mse_loss(g_ctx, xl, xl));
    ASSERT_ERROR_MENTIONS("ampc_mse_loss is banned", "ampc_autocast_set_policy");
    /* an FP32 island runs anything, banned or not, in the inputs' dtypes */
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.enabled = false)));
    expect_dtype(ampc_mse_loss(g_ctx, xl, xl), AMPC_DTYPE_BF16, "mse_loss in an island");
    ASSERT_OK(ampc_autocast_end(g_ctx));
    ASSERT_OK(ampc_autocast_end(g_ctx));
    assert_int_equal(ampc_autocast_set_policy(g_ctx, "softmaks", AMPC_CAST_FP32), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("unknown op 'softmaks'", "softmax", "linear");
    assert_int_equal(ampc_autocast_set_policy(g_ctx, "exp", (ampc_cast_policy)9), AMPC_STATUS_INVALID_ARG);
    for (int i = 0; ampc_autocast_op_name(i); i++) {
        ampc_cast_policy p;
        ASSERT_OK(ampc_autocast_policy(g_ctx, ampc_autocast_op_name(i), &p));
    }
}

static void test_nesting_and_islands(void **state) {
    (void)state;
    ampc_tensor *x = R(AMPC_DTYPE_F32, 4, 8), *w = R(AMPC_DTYPE_F32, 6, 8);
    assert_false(ampc_autocast_enabled(g_ctx));
    ASSERT_OK(ampc_autocast_begin(g_ctx, NULL)); /* PyTorch's CPU defaults: BF16, enabled, cache */
    assert_true(ampc_autocast_enabled(g_ctx));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_BF16, "outer region");
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.enabled = false)));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_F32, "FP32 island (layer_norm-style module)");
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = AMPC_DTYPE_F16, .enabled = true)));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_F16, "inner F16 region");
    ASSERT_OK(ampc_autocast_end(g_ctx));
    ASSERT_OK(ampc_autocast_end(g_ctx));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_BF16, "back in the outer region");
    ASSERT_OK(ampc_autocast_end(g_ctx));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_F32, "outside");
    assert_int_equal(ampc_autocast_end(g_ctx), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("no autocast region is open");
    assert_int_equal(ampc_autocast_begin(g_ctx, TU_AC(.dtype = AMPC_DTYPE_F64, .enabled = true)), AMPC_STATUS_DTYPE);
}

/* A step end inside an open region is said (once per context), through the context's log. */
static char g_logged[1024];
static int g_warnings;
static void capture(void *user, ampc_log_level level, const char *message) {
    (void)user;
    if (level != AMPC_LOG_WARN) return;
    g_warnings++;
    snprintf(g_logged, sizeof g_logged, "%s", message);
}

static void test_step_end_inside_region(void **state) {
    (void)state;
    ampc_ctx *c;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1, .log = capture}, &c));
    g_warnings = 0;
    ASSERT_OK(ampc_autocast_begin(c, NULL));
    ASSERT_OK(ampc_autocast_end(c));
    ampc_ctx_step_end(c);
    assert_int_equal(g_warnings, 0); /* regions closed before the step end: nothing said */
    ASSERT_OK(ampc_autocast_begin(c, NULL));
    ampc_ctx_step_end(c);
    assert_int_equal(g_warnings, 1);
    assert_non_null(strstr(g_logged, "ampc_ctx_step_end: 1 autocast region is still open"));
    assert_non_null(strstr(g_logged, "end regions before the step end"));
    ampc_ctx_step_end(c); /* once per context */
    assert_int_equal(g_warnings, 1);
    assert_true(ampc_autocast_enabled(c)); /* the region itself goes on */
    ASSERT_OK(ampc_autocast_end(c));
    ampc_ctx_free(c);
}

/* The parameter struct: what a user who writes only the dtype gets (refused, not a disabled region), the
 * defaults function, and F32 (refused while enabled, as PyTorch's CPU autocast will not run it; an F32
 * region is a disabled one). */
static void test_params_defaults(void **state) {
    (void)state;
    ampc_tensor *x = R(AMPC_DTYPE_F32, 4, 8), *w = R(AMPC_DTYPE_F32, 6, 8);
    assert_int_equal(ampc_autocast_begin(g_ctx, &(ampc_autocast_params){.dtype = AMPC_DTYPE_F16}),
                     AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("not made by ampc_autocast_defaults()", "enabled = false", "pass NULL");
    assert_false(ampc_autocast_enabled(g_ctx)); /* nothing opened */
    ampc_autocast_params p = ampc_autocast_defaults();
    assert_true(p.enabled && p.cache_enabled && p.dtype == AMPC_DTYPE_BF16 && p.init == AMPC_PARAMS_INIT);
    p.dtype = AMPC_DTYPE_F16;
    ASSERT_OK(ampc_autocast_begin(g_ctx, &p));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_F16, "defaults with .dtype = F16");
    ASSERT_OK(ampc_autocast_end(g_ctx));
    p.dtype = AMPC_DTYPE_F32;
    assert_int_equal(ampc_autocast_begin(g_ctx, &p), AMPC_STATUS_DTYPE);
    ASSERT_ERROR_MENTIONS("dtype F32", "enabled = false", "disables itself for float32");
    assert_false(ampc_autocast_enabled(g_ctx));
    p.enabled = false; /* the F32 region PyTorch's warning leaves you with */
    ASSERT_OK(ampc_autocast_begin(g_ctx, &p));
    expect_dtype(ampc_linear(g_ctx, x, w, NULL), AMPC_DTYPE_F32, "F32: a disabled region");
    ASSERT_OK(ampc_autocast_end(g_ctx));
}

/* test_autocast_ignored_types: F64 and integers pass untouched (so an F64 GEMM still fails) */
static void test_ignored_types(void **state) {
    (void)state;
    begin(AMPC_DTYPE_BF16);
    ampc_tensor *d = ampc_tensor_full(g_ctx, AMPC_DTYPE_F64, 2, (int64_t[]){2, 2}, 1.0);
    assert_null(ampc_matmul(g_ctx, d, R(AMPC_DTYPE_BF16, 2, 2), 0));
    ASSERT_ERROR_MENTIONS("ampc_matmul", "F64");
    ampc_tensor *emb = R(AMPC_DTYPE_F32, 10, 4);
    int64_t ids[3] = {1, 5, 9};
    ampc_tensor *it = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, 1, (int64_t[]){3}, ids, AMPC_DTYPE_I64);
    expect_dtype(ampc_embedding(g_ctx, emb, it), AMPC_DTYPE_F32, "embedding (not listed)");
    /* promote refuses an F16 / BF16 mix, as at::autocast::prioritize does */
    assert_null(ampc_add(g_ctx, R(AMPC_DTYPE_F16, 3), R(AMPC_DTYPE_BF16, 3)));
    ASSERT_ERROR_MENTIONS("ampc_add", "mixes F16 and BF16");
    ampc_autocast_end(g_ctx);
}

/* _run_autocast_outofplace: the autocast result equals the op on manually cast inputs, bit for bit */
static void test_bitwise_equal_to_manual_casts(void **state) {
    (void)state;
    ampc_tensor *x = R(AMPC_DTYPE_F32, 5, 16), *w = R(AMPC_DTYPE_F32, 7, 16), *b = R(AMPC_DTYPE_F32, 7);
    ampc_tensor *xl = R(AMPC_DTYPE_BF16, 5, 16);
    begin(AMPC_DTYPE_BF16);
    ampc_tensor *a1 = ampc_linear(g_ctx, x, w, b), *a2 = ampc_softmax(g_ctx, xl, 1), *a3 = ampc_gelu(g_ctx, xl, 0);
    ampc_autocast_end(g_ctx);
    ampc_tensor *m1 = ampc_linear(g_ctx, ampc_tensor_cast(x, AMPC_DTYPE_BF16), ampc_tensor_cast(w, AMPC_DTYPE_BF16),
                                  ampc_tensor_cast(b, AMPC_DTYPE_BF16));
    ampc_tensor *m2 = ampc_softmax(g_ctx, ampc_tensor_cast(xl, AMPC_DTYPE_F32), 1), *m3 = ampc_gelu(g_ctx, xl, 0);
    assert_memory_equal(ampc_tensor_data(a1), ampc_tensor_data(m1), 5 * 7 * 2);
    assert_memory_equal(ampc_tensor_data(a2), ampc_tensor_data(m2), 5 * 16 * 4);
    assert_memory_equal(ampc_tensor_data(a3), ampc_tensor_data(m3), 5 * 16 * 2);
}

/* test_cast_cache_is_global / test_autocast_cache_leak: a weight is cast once per region, its gradient
 * reaches the F32 leaf through that one cast, and regions do not accumulate memory */
static void test_weight_cast_cache(void **state) {
    (void)state;
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){8, 8});
    ASSERT_OK(ampc_tensor_fill_normal(w, 0, 0.1));
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ampc_autocast_stats s0, s1;
    ASSERT_OK(ampc_autocast_get_stats(g_ctx, &s0));
    begin(AMPC_DTYPE_BF16);
    ampc_tensor *h = R(AMPC_DTYPE_F32, 2, 8);
    for (int i = 0; i < 5; i++) h = ampc_tanh(g_ctx, ampc_linear(g_ctx, h, w, NULL));
    ASSERT_OK(ampc_autocast_get_stats(g_ctx, &s1));
    assert_int_equal(s1.cache_hits - s0.cache_hits, 4); /* 5 uses, 1 cast */
    assert_int_equal(s1.cache_entries, 1);
    ampc_autocast_end(g_ctx);
    ASSERT_OK(ampc_autocast_get_stats(g_ctx, &s1));
    assert_int_equal(s1.cache_entries, 0); /* cleared at the outermost exit */
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, h, NULL, 0, false)));
    assert_int_equal(ampc_tensor_dtype(ampc_tensor_grad(w)), AMPC_DTYPE_F32);
    ampc_ctx_step_end(g_ctx);
    /* an in-place update inside a region is never served stale */
    begin(AMPC_DTYPE_BF16);
    ampc_tensor *x = R(AMPC_DTYPE_F32, 2, 8);
    ampc_tensor *y1 = ampc_linear(g_ctx, x, w, NULL);
    ASSERT_OK(ampc_tensor_fill(w, 0.5));
    ampc_tensor *y2 = ampc_linear(g_ctx, x, w, NULL);
    ampc_autocast_end(g_ctx);
    assert_memory_not_equal(ampc_tensor_data(y1), ampc_tensor_data(y2), 2 * 8 * 2);
    ampc_ctx_step_end(g_ctx);
    /* 1000 regions, one step each: memory is flat after the first */
    ampc_memory_usage m;
    size_t live = 0;
    for (int i = 0; i < 1000; i++) {
        begin(AMPC_DTYPE_BF16);
        ampc_tensor *y = ampc_linear(g_ctx, ampc_linear(g_ctx, R(AMPC_DTYPE_F32, 4, 8), w, NULL), w, NULL);
        ampc_autocast_end(g_ctx);
        ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, y, NULL, 0, false)));
        ampc_ctx_step_end(g_ctx);
        ASSERT_OK(ampc_memory_stats(g_ctx, &m));
        if (i == 1) live = m.live_bytes;
        if (i > 1 && m.live_bytes != live) FAILF("region %d: live bytes %zu, expected %zu", i, m.live_bytes, live);
    }
    ampc_tensor_free(w);
}

/* anomaly mode: the first non-finite value fails the op or the backward, with names, scope and step */
static void test_anomaly_mode(void **state) {
    (void)state;
    ampc_autograd_set_detect_anomaly(g_ctx, true);
    ampc_tensor *x = ampc_tensor_full(g_ctx, AMPC_DTYPE_F16, 1, (int64_t[]){4}, 20.0);
    ASSERT_OK(ampc_tensor_set_name(x, "logits"));
    ASSERT_OK(ampc_scope_push(g_ctx, "blocks"));
    ASSERT_OK(ampc_scope_push(g_ctx, "3"));
    assert_null(ampc_exp(g_ctx, x)); /* e^20 overflows FP16 */
    ASSERT_ERROR_MENTIONS("anomaly", "ampc_exp", "+inf", "scope 'blocks.3'", "'logits' [4] F16", "step");
    ampc_scope_pop(g_ctx);
    ampc_scope_pop(g_ctx);
    assert_string_equal(ampc_scope_path(g_ctx), "");
    ampc_tensor *z = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){3}); /* zeros */
    ASSERT_OK(ampc_tensor_set_requires_grad(z, true));
    ASSERT_OK(ampc_tensor_set_name(z, "gain"));
    ampc_tensor *s = ampc_sum(g_ctx, ampc_sqrt(g_ctx, z), NULL, 0, false); /* finite forward, d sqrt(0) = inf */
    assert_non_null(s);
    assert_int_equal(ampc_backward(g_ctx, s), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("anomaly", "backward of ampc_sqrt", "'gain'");
    ampc_autograd_set_detect_anomaly(g_ctx, false);
    ampc_ctx_step_end(g_ctx);
    ampc_tensor_free(z);
    assert_true(ampc_all_finite(ampc_tensor_full(g_ctx, AMPC_DTYPE_BF16, 1, (int64_t[]){2}, 1.0)));
    x = ampc_tensor_full(g_ctx, AMPC_DTYPE_F16, 1, (int64_t[]){4}, 20.0); /* the old x went with the step */
    assert_false(ampc_all_finite(ampc_exp(g_ctx, x)));
}

/* ---- the FP32 matmul precision switch ---- */

static void test_fp32_precision_api(void **state) {
    (void)state;
    assert_int_equal(ampc_ctx_fp32_matmul_precision(g_ctx), AMPC_FP32_HIGHEST);
    ASSERT_OK(ampc_ctx_set_fp32_matmul_precision(g_ctx, AMPC_FP32_MEDIUM));
    ASSERT_OK(ampc_ctx_push_fp32_matmul_precision(g_ctx, AMPC_FP32_HIGH));
    assert_int_equal(ampc_ctx_fp32_matmul_precision(g_ctx), AMPC_FP32_HIGH);
    ASSERT_OK(ampc_ctx_set_fp32_matmul_precision(g_ctx, AMPC_FP32_HIGHEST)); /* inside the override: until pop */
    assert_int_equal(ampc_ctx_fp32_matmul_precision(g_ctx), AMPC_FP32_HIGHEST);
    ASSERT_OK(ampc_ctx_pop_fp32_matmul_precision(g_ctx));
    assert_int_equal(ampc_ctx_fp32_matmul_precision(g_ctx), AMPC_FP32_MEDIUM);
    assert_int_equal(ampc_ctx_pop_fp32_matmul_precision(g_ctx), AMPC_STATUS_STATE);
    assert_non_null(strstr(ampc_last_error(), "no override"));
    int pushed = 0;
    while (ampc_ctx_push_fp32_matmul_precision(g_ctx, AMPC_FP32_HIGH) == AMPC_OK) pushed++;
    assert_int_equal(pushed, 8);
    assert_non_null(strstr(ampc_last_error(), "at most 8"));
    while (ampc_ctx_pop_fp32_matmul_precision(g_ctx) == AMPC_OK) {}
    assert_int_equal(ampc_ctx_set_fp32_matmul_precision(g_ctx, (ampc_fp32_precision)7), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_ctx_set_fp32_matmul_precision(NULL, AMPC_FP32_HIGH), AMPC_STATUS_INVALID_ARG);
    ampc_fp32_precision p;
    ASSERT_OK(ampc_fp32_precision_parse("medium", &p));
    assert_int_equal(p, AMPC_FP32_MEDIUM);
    assert_string_equal(ampc_fp32_precision_name(AMPC_FP32_HIGH), "high");
    assert_int_equal(ampc_fp32_precision_parse("tf32", &p), AMPC_STATUS_INVALID_ARG);
    assert_non_null(strstr(ampc_last_error(), "'tf32': expected highest, high or medium"));
    ASSERT_OK(ampc_ctx_set_fp32_matmul_precision(g_ctx, AMPC_FP32_HIGHEST));
}

/* max |got - want| / (u * K * sum |a||b| row-col bound) over c (M, N): how many F32 unit roundoffs of the
 * summation the difference is, relative to the worst-case magnitude of each dot product. */
static double rel_err(const float *got, const float *want, const float *a, const float *b, int64_t M, int64_t N,
                      int64_t K) {
    double worst = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double mag = 0;
            for (int64_t k = 0; k < K; k++) mag += fabs((double)a[m * K + k] * b[k * N + n]);
            double e = fabs((double)got[m * N + n] - want[m * N + n]) / (mag * 0x1p-24 * (double)K);
            if (e > worst) worst = e;
        }
    return worst;
}

/* Under each setting a matmul gives either the F32 result (no faster kernel on this CPU: bit for bit) or
 * the split reference's result within F32 summation error. */
static void test_fp32_precision_numerics(void **state) {
    (void)state;
    enum { M = 37, N = 45, K = 96 };
    ampc_tensor *a = R(AMPC_DTYPE_F32, M, K), *b = R(AMPC_DTYPE_F32, K, N);
    const float *pa = ampc_tensor_data(a), *pb = ampc_tensor_data(b);
    ampc_tensor *exact = ampc_matmul(g_ctx, a, b, 0);
    assert_non_null(exact);
    static const ampc_fp32_precision modes[2] = {AMPC_FP32_HIGH, AMPC_FP32_MEDIUM};
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(ampc_ctx_push_fp32_matmul_precision(g_ctx, modes[i]));
        ampc_tensor *c = ampc_matmul(g_ctx, a, b, 0);
        ASSERT_OK(ampc_ctx_pop_fp32_matmul_precision(g_ctx));
        assert_non_null(c);
        const struct ampc_kernels *k = g_ctx->kernels;
        ampc_k_gemm_fn fn = modes[i] == AMPC_FP32_MEDIUM && k->gemm_f32_bf16x1 ? k->gemm_f32_bf16x1
                                                                               : k->gemm_f32_bf16x3;
        int passes = fn == k->gemm_f32_bf16x1 ? 1 : 3;
        if (!fn) {
            assert_memory_equal(ampc_tensor_data(c), ampc_tensor_data(exact), sizeof(float) * M * N);
            continue;
        }
        float want[M * N];
        ampci_gemm g = {M, N, K, pa, K, false, pb, N, false, want, N, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
        ampci_slot split = passes == 1 ? AMPCI_SLOT_GEMM_F32_BF16X1 : AMPCI_SLOT_GEMM_F32_BF16X3;
        ASSERT_OK(ampci_kernel_ref(k->chosen[split][0])->fn.GEMM(g_ctx, &g)); /* the split oracle */
        double e = rel_err(ampc_tensor_data(c), want, pa, pb, M, N, K);
        if (e > 1.0)
            FAILF("%s (%d BF16 passes): %.3g F32 roundoffs from the split reference",
                  ampc_fp32_precision_name(modes[i]), passes, e);
        /* and it really is a different computation: one pass loses most of F32's bits */
        double e32 = rel_err(ampc_tensor_data(c), ampc_tensor_data(exact), pa, pb, M, N, K);
        if (passes == 1 && e32 < 2.0) FAILF("medium: %.3g roundoffs from F32: not a BF16 pass?", e32);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_tutorial_table_dtypes, end_step),
        cmocka_unit_test_teardown(test_pytorch_tables, end_step),
        cmocka_unit_test_teardown(test_editable_policies, end_step),
        cmocka_unit_test_teardown(test_nesting_and_islands, end_step),
        cmocka_unit_test_teardown(test_params_defaults, end_step),
        cmocka_unit_test(test_step_end_inside_region),
        cmocka_unit_test_teardown(test_ignored_types, end_step),
        cmocka_unit_test_teardown(test_bitwise_equal_to_manual_casts, end_step),
        cmocka_unit_test_teardown(test_weight_cast_cache, end_step),
        cmocka_unit_test_teardown(test_anomaly_mode, end_step),
        cmocka_unit_test_teardown(test_fp32_precision_api, end_step),
        cmocka_unit_test_teardown(test_fp32_precision_numerics, end_step),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
