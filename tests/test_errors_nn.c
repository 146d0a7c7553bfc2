/* test_errors_nn.c: bad inputs to the nn ops (softmax, log_softmax, layer_norm, embedding,
 * cross_entropy, mse_loss, dropout, positional_encoding): each returns NULL with a message naming the op,
 * the offending shapes or values and what was expected, and a NULL input keeps the earlier failure's
 * message. Also the documented edge behaviour (all-ignored cross-entropy is NaN, dropout in eval mode is
 * the identity) and that dropout's mask and the reductions give the same bits with 1 and 2 threads. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(1, 2)

static ampc_tensor *f32(int ndim, const int64_t *shape) {
    return ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, ndim, shape, 0, 1);
}

static ampc_tensor *i64s(const int64_t *v, int ndim, const int64_t *shape) {
    return ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I64, ndim, shape, v, AMPC_DTYPE_I64);
}

/* A NULL input: with no earlier failure the message names the op; after one, that message is kept. */
static void check_null_chain(ampc_tensor *(*call)(void), const char *op) {
    ampc_clear_error();
    assert_null(call());
    ASSERT_ERROR_MENTIONS(op, "NULL");
    assert_null(ampc_tensor_reshape(f32(SHAPE(2, 3)), SHAPE(7))); /* an earlier failure */
    assert_null(call());
    ASSERT_ERROR_MENTIONS("ampc_tensor_reshape", "[7]");
    ampc_clear_error();
}

static ampc_tensor *null_softmax(void) { return ampc_softmax(g_ctx, NULL, 0); }
static ampc_tensor *null_log_softmax(void) { return ampc_log_softmax(g_ctx, NULL, -1); }
static ampc_tensor *null_layer_norm(void) { return ampc_layer_norm(g_ctx, NULL, NULL, NULL, 1e-5); }
static ampc_tensor *null_embedding(void) { return ampc_embedding(g_ctx, NULL, NULL); }
static ampc_tensor *null_embedding_ids(void) { return ampc_embedding(g_ctx, f32(SHAPE(4, 3)), NULL); }
static ampc_tensor *null_cross_entropy(void) { return ampc_cross_entropy(g_ctx, f32(SHAPE(2, 3)), NULL, -100); }
static ampc_tensor *null_mse(void) { return ampc_mse_loss(g_ctx, NULL, f32(SHAPE(2))); }
static ampc_tensor *null_dropout(void) { return ampc_dropout(g_ctx, NULL, 0.5, true); }
static ampc_tensor *null_pe(void) { return ampc_positional_encoding(g_ctx, NULL); }

static void test_null_inputs(void **state) {
    (void)state;
    check_null_chain(null_softmax, "ampc_softmax");
    check_null_chain(null_log_softmax, "ampc_log_softmax");
    check_null_chain(null_layer_norm, "ampc_layer_norm");
    check_null_chain(null_embedding, "ampc_embedding");
    check_null_chain(null_embedding_ids, "ampc_embedding");
    check_null_chain(null_cross_entropy, "ampc_cross_entropy");
    check_null_chain(null_mse, "ampc_mse_loss");
    check_null_chain(null_dropout, "ampc_dropout");
    check_null_chain(null_pe, "ampc_positional_encoding");
}

static void test_softmax_errors(void **state) {
    (void)state;
    ampc_tensor *x = f32(SHAPE(2, 3));
    assert_null(ampc_softmax(g_ctx, x, 2));
    ASSERT_ERROR_MENTIONS("ampc_softmax", "dim 2", "[2, 3] F32", "-2 to 1");
    assert_null(ampc_log_softmax(g_ctx, x, -3));
    ASSERT_ERROR_MENTIONS("ampc_log_softmax", "dim -3");
    ampc_tensor *xi = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I32, SHAPE(2, 3));
    assert_null(ampc_softmax(g_ctx, xi, -1));
    ASSERT_ERROR_MENTIONS("ampc_softmax", "[2, 3] I32", "expected F32, F16 or BF16");
    ampc_tensor *xd = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F64, SHAPE(4));
    assert_null(ampc_log_softmax(g_ctx, xd, 0));
    ASSERT_ERROR_MENTIONS("ampc_log_softmax", "F64");
    /* a 0-dim tensor is one row of one element (dim 0 or -1), as in PyTorch */
    ampc_tensor *s = ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 0, NULL, 3.0);
    ampc_tensor *y = ampc_softmax(g_ctx, s, -1);
    assert_non_null(y);
    assert_int_equal(ampc_tensor_ndim(y), 0);
    assert_true(*(float *)ampc_tensor_data(y) == 1.0f);
    assert_null(ampc_softmax(g_ctx, s, 1));
    ASSERT_ERROR_MENTIONS("ampc_softmax", "dim 1");
}

static void test_layer_norm_errors(void **state) {
    (void)state;
    ampc_tensor *x = f32(SHAPE(4, 5)), *w = f32(SHAPE(5)), *b = f32(SHAPE(5));
    assert_null(ampc_layer_norm(g_ctx, x, f32(SHAPE(6)), b, 1e-5));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "[4, 5] F32", "[6] F32", "(D) = (5)");
    assert_null(ampc_layer_norm(g_ctx, x, w, f32(SHAPE(1, 5)), 1e-5));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "bias [1, 5] F32");
    assert_null(ampc_layer_norm(g_ctx, ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 0, NULL, 1.0), NULL, NULL, 1e-5));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "at least 1 dim");
    assert_null(ampc_layer_norm(g_ctx, x, w, b, 0.0));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "eps 0", "eps > 0");
    assert_null(ampc_layer_norm(g_ctx, x, w, b, -1e-5));
    ASSERT_ERROR_MENTIONS("eps -1e-05");
    assert_null(ampc_layer_norm(g_ctx, x, NULL, NULL, NAN));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "eps nan");
    ampc_tensor *wb = ampc_tensor_cast(w, AMPC_DTYPE_BF16);
    assert_null(ampc_layer_norm(g_ctx, x, wb, b, 1e-5));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "weight [5] BF16", "same dtype");
    assert_null(ampc_layer_norm(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F64, SHAPE(2, 5)), NULL, NULL, 1e-5));
    ASSERT_ERROR_MENTIONS("ampc_layer_norm", "F64");
}

static void test_embedding_errors(void **state) {
    (void)state;
    ampc_tensor *w = f32(SHAPE(10, 4));
    int64_t ids[6] = {0, 9, 3, 10, 2, 1};
    assert_null(ampc_embedding(g_ctx, w, i64s(ids, SHAPE(2, 3))));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "id 10", "flat position 3", "V = 10", "[10, 4] F32");
    ids[3] = -1;
    int32_t ids32[6];
    for (int i = 0; i < 6; i++) ids32[i] = (int32_t)ids[i];
    ampc_tensor *t32 = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_I32, SHAPE(6), ids32, AMPC_DTYPE_I32);
    assert_null(ampc_embedding(g_ctx, w, t32));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "id -1", "flat position 3", "[6] I32");
    assert_null(ampc_embedding(g_ctx, w, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, SHAPE(3))));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "[3] F32", "I32 or I64");
    assert_null(ampc_embedding(g_ctx, w, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I64, SHAPE(1, 2, 3, 4))));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "[1, 2, 3, 4] I64", "at most 3");
    assert_null(ampc_embedding(g_ctx, f32(SHAPE(10)), t32));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "weight [10] F32", "(V, D)");
    assert_null(ampc_embedding(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I32, SHAPE(10, 4)), t32));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "weight", "I32");
    /* a 0-dim id gives one row (D) */
    int64_t one = 7;
    ampc_tensor *row = ampc_embedding(g_ctx, w, i64s(&one, 0, NULL));
    assert_non_null(row);
    assert_int_equal(ampc_tensor_ndim(row), 1);
    assert_int_equal(ampc_tensor_dim(row, 0), 4);
}

static void test_cross_entropy_errors(void **state) {
    (void)state;
    ampc_tensor *logits = f32(SHAPE(3, 5));
    int64_t t[3] = {0, 4, 5};
    assert_null(ampc_cross_entropy(g_ctx, logits, i64s(t, SHAPE(3)), AMPC_IGNORE_INDEX_DEFAULT));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "target 5", "index 2", "C = 5", "ignore_index -100");
    t[2] = -2;
    assert_null(ampc_cross_entropy(g_ctx, logits, i64s(t, SHAPE(3)), -1));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "target -2", "index 2");
    t[2] = 2;
    assert_null(ampc_cross_entropy(g_ctx, logits, i64s(t, SHAPE(2)), -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "targets [2] I64", "logits [3, 5] F32", "(N) = (3)");
    assert_null(ampc_cross_entropy(g_ctx, logits, i64s(t, SHAPE(3, 1)), -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "[3, 1] I64");
    assert_null(ampc_cross_entropy(g_ctx, logits, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, SHAPE(3)), -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "targets [3] F32", "I32 or I64");
    assert_null(
        ampc_cross_entropy(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F64, SHAPE(3, 5)), i64s(t, SHAPE(3)), -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "logits [3, 5] F64", "F32, F16 or BF16");
    assert_null(
        ampc_cross_entropy(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I32, SHAPE(3, 5)), i64s(t, SHAPE(3)), -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "I32");
    assert_null(ampc_cross_entropy(g_ctx, f32(SHAPE(3, 5, 1)), i64s(t, SHAPE(3)), -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "[3, 5, 1] F32", "(N, C)");
    /* targets and ids from another context */
    ampc_ctx *other;
    ASSERT_OK(ampc_ctx_new(NULL, &other));
    ampc_tensor *ot = ampc_tensor_from_buffer(other, AMPC_DTYPE_I64, SHAPE(3), t, AMPC_DTYPE_I64);
    assert_null(ampc_cross_entropy(g_ctx, logits, ot, -100));
    ASSERT_ERROR_MENTIONS("ampc_cross_entropy", "targets [3] I64", "another context");
    assert_null(ampc_embedding(g_ctx, f32(SHAPE(5, 2)), ot));
    ASSERT_ERROR_MENTIONS("ampc_embedding", "ids [3] I64", "another context");
    ampc_ctx_free(other);
}

/* All targets ignored: NaN loss (as PyTorch), and a zero gradient rather than NaN. */
static void test_cross_entropy_all_ignored(void **state) {
    (void)state;
    ampc_tensor *logits = f32(SHAPE(2, 3));
    ASSERT_OK(ampc_tensor_set_requires_grad(logits, true));
    int64_t t[2] = {-100, -100};
    ampc_tensor *loss = ampc_cross_entropy(g_ctx, logits, i64s(t, SHAPE(2)), -100);
    assert_non_null(loss);
    assert_int_equal(ampc_tensor_ndim(loss), 0);
    assert_true(isnan(*(float *)ampc_tensor_data(loss)));
    ASSERT_OK(ampc_backward(g_ctx, loss));
    const float *g = ampc_tensor_data(ampc_tensor_grad(logits));
    for (int i = 0; i < 6; i++) assert_true(g[i] == 0.0f);
}

static void test_mse_errors(void **state) {
    (void)state;
    assert_null(ampc_mse_loss(g_ctx, f32(SHAPE(2, 3)), f32(SHAPE(3, 2))));
    ASSERT_ERROR_MENTIONS("ampc_mse_loss", "x [2, 3] F32", "target [3, 2] F32", "equal shapes");
    assert_null(ampc_mse_loss(g_ctx, f32(SHAPE(6)), f32(SHAPE(1, 6))));
    ASSERT_ERROR_MENTIONS("ampc_mse_loss", "[1, 6]");
    assert_null(ampc_mse_loss(g_ctx, f32(SHAPE(6)), ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F16, SHAPE(6))));
    ASSERT_ERROR_MENTIONS("ampc_mse_loss", "[6] F16", "same dtype");
    assert_null(ampc_mse_loss(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F64, SHAPE(6)), f32(SHAPE(6))));
    ASSERT_ERROR_MENTIONS("ampc_mse_loss", "F64");
}

static void test_dropout_errors(void **state) {
    (void)state;
    ampc_tensor *x = f32(SHAPE(4, 4));
    assert_null(ampc_dropout(g_ctx, x, 1.0, true));
    ASSERT_ERROR_MENTIONS("ampc_dropout", "p = 1", "0 <= p < 1");
    assert_null(ampc_dropout(g_ctx, x, -0.25, false));
    ASSERT_ERROR_MENTIONS("ampc_dropout", "p = -0.25");
    assert_null(ampc_dropout(g_ctx, x, NAN, true));
    ASSERT_ERROR_MENTIONS("ampc_dropout", "p = nan");
    assert_null(ampc_dropout(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I64, SHAPE(4)), 0.5, true));
    ASSERT_ERROR_MENTIONS("ampc_dropout", "I64");
    /* eval mode and p = 0: the same values, no RNG draw */
    uint64_t before = ampc_ctx_rng(g_ctx)->counter;
    ampc_tensor *a = ampc_dropout(g_ctx, x, 0.5, false), *b = ampc_dropout(g_ctx, x, 0.0, true);
    assert_non_null(a);
    assert_non_null(b);
    assert_memory_equal(ampc_tensor_data(a), ampc_tensor_data(x), 16 * sizeof(float));
    assert_memory_equal(ampc_tensor_data(b), ampc_tensor_data(x), 16 * sizeof(float));
    assert_int_equal(ampc_ctx_rng(g_ctx)->counter, before);
}

static void test_positional_encoding_errors(void **state) {
    (void)state;
    assert_null(ampc_positional_encoding(g_ctx, f32(SHAPE(8))));
    ASSERT_ERROR_MENTIONS("ampc_positional_encoding", "x [8] F32", "(..., T, D)");
    assert_null(ampc_positional_encoding(g_ctx, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_U8, SHAPE(2, 8))));
    ASSERT_ERROR_MENTIONS("ampc_positional_encoding", "U8");
}

/* ---- thread-count independence ---- */

#define DROP_N 100003 /* several parallel chunks and a ragged tail */

/* dropout(ones) with the given thread count, its gradient, and the RNG counter afterwards. */
static void dropout_with_threads(int threads, float *y, float *g, uint64_t *counter) {
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 42, .threads = threads}, &ctx));
    ampc_tensor *x = ampc_tensor_full(ctx, AMPC_DTYPE_F32, SHAPE(DROP_N), 1.0);
    ASSERT_OK(ampc_tensor_set_requires_grad(x, true));
    ampc_rng_uniform(ampc_ctx_rng(ctx), y, 5, 0, 1); /* start at a counter that is not 0 */
    ampc_tensor *out = ampc_dropout(ctx, x, 0.3, true);
    assert_non_null(out);
    *counter = ampc_ctx_rng(ctx)->counter;
    memcpy(y, ampc_tensor_data(out), DROP_N * sizeof(float));
    ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, out, NULL, 0, false)));
    memcpy(g, ampc_tensor_data(ampc_tensor_grad(x)), DROP_N * sizeof(float));
    ampc_ctx_free(ctx);
}

static void test_dropout_threads(void **state) {
    (void)state;
    float *y1 = malloc(DROP_N * sizeof *y1), *y2 = malloc(DROP_N * sizeof *y2);
    float *g1 = malloc(DROP_N * sizeof *g1), *g2 = malloc(DROP_N * sizeof *g2);
    uint64_t c1, c2;
    dropout_with_threads(1, y1, g1, &c1);
    dropout_with_threads(2, y2, g2, &c2);
    assert_memory_equal(y1, y2, DROP_N * sizeof *y1);
    assert_memory_equal(g1, g2, DROP_N * sizeof *g1);
    assert_memory_equal(y1, g1, DROP_N * sizeof *y1); /* the backward regenerates the same mask */
    assert_int_equal(c1, 2 + (DROP_N + 3) / 4);       /* 5 draws took 2 blocks, then ceil(n/4) */
    assert_int_equal(c2, c1);
    int64_t kept = 0;
    for (int i = 0; i < DROP_N; i++) {
        assert_true(y1[i] == 0.0f || y1[i] == (float)(1.0 / 0.7));
        kept += y1[i] != 0.0f;
    }
    double frac = (double)kept / DROP_N; /* binomial: sd ~ 0.0015 */
    if (fabs(frac - 0.7) > 0.01) FAILF("dropout kept %.4f of the elements; expected about 0.7", frac);
    free(y1), free(y2), free(g1), free(g2);
}

/* layer_norm (with weight and bias gradients summed over row chunks), embedding (its gradient scattered
 * by column blocks), cross-entropy and mse_loss give the same bits with 1 and 3 threads. */
#define RT_N (1 + 40 + 40 + 50 * 40 + 3000 * 40)
static void reductions_with_threads(int threads, float *out) {
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 7, .threads = threads}, &ctx));
    ampc_tensor *x = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, SHAPE(3000, 40), 0, 1);
    ampc_tensor *w = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, SHAPE(40), 1, 0.1);
    ampc_tensor *b = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, SHAPE(40), 0, 0.1);
    int64_t *t = malloc(3000 * sizeof *t);
    for (int i = 0; i < 3000; i++) t[i] = (i * 7) % 40;
    ampc_tensor *targets = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_I64, SHAPE(3000), t, AMPC_DTYPE_I64);
    free(t);
    ASSERT_OK(ampc_tensor_set_requires_grad(x, true));
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ASSERT_OK(ampc_tensor_set_requires_grad(b, true));
    ampc_tensor *h = ampc_layer_norm(ctx, x, w, b, 1e-5);
    ampc_tensor *l1 = ampc_cross_entropy(ctx, h, targets, -100), *l2 = ampc_mse_loss(ctx, h, ampc_tensor_detach(x));
    ampc_tensor *emb = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, SHAPE(50, 40), 0, 1);
    ASSERT_OK(ampc_tensor_set_requires_grad(emb, true));
    ampc_tensor *l3 = ampc_mse_loss(ctx, ampc_embedding(ctx, emb, targets), h); /* ids repeat 75 times each */
    ampc_tensor *loss = ampc_add(ctx, ampc_add(ctx, l1, l2), l3);
    assert_non_null(loss);
    ASSERT_OK(ampc_backward(ctx, loss));
    out[0] = *(float *)ampc_tensor_data(loss);
    memcpy(out + 1, ampc_tensor_data(ampc_tensor_grad(w)), 40 * sizeof *out);
    memcpy(out + 41, ampc_tensor_data(ampc_tensor_grad(b)), 40 * sizeof *out);
    memcpy(out + 81, ampc_tensor_data(ampc_tensor_grad(emb)), 50 * 40 * sizeof *out);
    memcpy(out + 81 + 50 * 40, ampc_tensor_data(ampc_tensor_grad(x)), 3000 * 40 * sizeof *out);
    ampc_ctx_free(ctx);
}

static void test_reductions_threads(void **state) {
    (void)state;
    float *a = malloc(RT_N * sizeof *a), *b = malloc(RT_N * sizeof *b);
    reductions_with_threads(1, a);
    reductions_with_threads(3, b);
    assert_memory_equal(a, b, RT_N * sizeof *a);
    free(a), free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_inputs),
        cmocka_unit_test(test_softmax_errors),
        cmocka_unit_test(test_layer_norm_errors),
        cmocka_unit_test(test_embedding_errors),
        cmocka_unit_test(test_cross_entropy_errors),
        cmocka_unit_test(test_cross_entropy_all_ignored),
        cmocka_unit_test(test_mse_errors),
        cmocka_unit_test(test_dropout_errors),
        cmocka_unit_test(test_positional_encoding_errors),
        cmocka_unit_test(test_dropout_threads),
        cmocka_unit_test(test_reductions_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
