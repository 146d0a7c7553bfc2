/* test_tensor.c: tensor creation in every dtype, fills, views (reshape, view, transpose, permute,
 * slice) checked element by element against index arithmetic, contiguous copies and casts of strided
 * tensors, lifetimes (owned vs arena, views outliving a freed base), version counters, and the error
 * messages of bad shapes, dims and dtypes; stale handles (from an ended step, or freed) refused. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(1, 2)

/* Reads every element as double, row-major. */
static double *read_all(const ampc_tensor *t) {
    int64_t n = ampc_tensor_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    ASSERT_OK(ampc_tensor_copy_to(t, v, AMPC_DTYPE_F64));
    return v;
}

/* A [d0, d1, d2] F32 tensor with element (i, j, k) = 100 i + 10 j + k. */
static ampc_tensor *iota3(int64_t d0, int64_t d1, int64_t d2) {
    float *v = malloc((size_t)(d0 * d1 * d2) * sizeof *v);
    for (int64_t i = 0; i < d0; i++)
        for (int64_t j = 0; j < d1; j++)
            for (int64_t k = 0; k < d2; k++) v[(i * d1 + j) * d2 + k] = (float)(100 * i + 10 * j + k);
    ampc_tensor *t = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, SHAPE(d0, d1, d2), v, AMPC_DTYPE_F32);
    free(v);
    return t;
}

static void test_factories_every_dtype(void **state) {
    (void)state;
    for (int dt = 0; dt < AMPC_DTYPE_COUNT; dt++) {
        ampc_tensor *z = ampc_tensor_zeros(g_ctx, (ampc_dtype)dt, SHAPE(3, 5));
        ampc_tensor *f = ampc_tensor_full(g_ctx, (ampc_dtype)dt, SHAPE(2, 3, 4), 7.0);
        assert_non_null(z);
        assert_non_null(f);
        assert_int_equal(ampc_tensor_dtype(f), dt);
        assert_int_equal(ampc_tensor_numel(f), 24);
        assert_true(ampc_tensor_is_contiguous(f) && !ampc_tensor_is_owned(f));
        double *a = read_all(z), *b = read_all(f);
        for (int i = 0; i < 15; i++) assert_true(a[i] == 0.0);
        for (int i = 0; i < 24; i++) assert_true(b[i] == 7.0);
        free(a), free(b);
    }
    /* full rounds the value once, into the dtype */
    ampc_tensor *h = ampc_tensor_full(g_ctx, AMPC_DTYPE_F16, SHAPE(4), 0.1);
    assert_int_equal(((uint16_t *)ampc_tensor_data(h))[3], 0x2e66);
    ampc_tensor *s = ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 0, NULL, 2.5); /* a 0-dim scalar */
    assert_int_equal(ampc_tensor_numel(s), 1);
    assert_true(*(float *)ampc_tensor_data(s) == 2.5f);
    ampc_tensor *e = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_BF16, SHAPE(0, 4));
    assert_non_null(e);
    assert_int_equal(ampc_tensor_numel(e), 0);
    assert_non_null(ampc_tensor_cast(e, AMPC_DTYPE_F32));
}

static void test_from_buffer_converts(void **state) {
    (void)state;
    float src[6] = {1.0f, 0.1f, -65520.0f, 1e-8f, 3.14159f, -0.0f};
    ampc_tensor *b = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_BF16, SHAPE(2, 3), src, AMPC_DTYPE_F32);
    ampc_tensor *h = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F16, SHAPE(2, 3), src, AMPC_DTYPE_F32);
    const uint16_t *bb = ampc_tensor_data(b), *hh = ampc_tensor_data(h);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(bb[i], ampc_bf16_from_f32(src[i]));
        assert_int_equal(hh[i], ampc_f16_from_f32(src[i]));
    }
    /* and back out through copy_to in another dtype */
    float back[6];
    ASSERT_OK(ampc_tensor_copy_to(h, back, AMPC_DTYPE_F32));
    for (int i = 0; i < 6; i++) assert_true(tu_bits(back[i]) == tu_bits(ampc_f16_to_f32(hh[i])));
    assert_null(ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, SHAPE(2), NULL, AMPC_DTYPE_F32));
    ASSERT_ERROR_MENTIONS("ampc_tensor_from_buffer", "data", "NULL", "[2] F32");
}

static void test_random_fills(void **state) {
    (void)state;
    ampc_rng saved = *ampc_ctx_rng(g_ctx);
    ampc_tensor *u = ampc_tensor_uniform(g_ctx, AMPC_DTYPE_F32, SHAPE(1000), -1.0, 1.0);
    *ampc_ctx_rng(g_ctx) = saved;
    ampc_tensor *ub = ampc_tensor_uniform(g_ctx, AMPC_DTYPE_BF16, SHAPE(1000), -1.0, 1.0);
    const float *uf = ampc_tensor_data(u);
    const uint16_t *ubf = ampc_tensor_data(ub);
    for (int i = 0; i < 1000; i++) {
        assert_true(uf[i] >= -1.0f && uf[i] < 1.0f);
        assert_int_equal(ubf[i], ampc_bf16_from_f32(uf[i])); /* drawn in F32, then rounded */
    }
    /* consecutive draws continue the sequence */
    ampc_tensor *n1 = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, SHAPE(10), 0, 1);
    ampc_tensor *n2 = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, SHAPE(10), 0, 1);
    assert_memory_not_equal(ampc_tensor_data(n1), ampc_tensor_data(n2), 40);
    assert_null(ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, SHAPE(10), 0, -1));
    ASSERT_ERROR_MENTIONS("ampc_tensor_normal", "std = -1");
    assert_null(ampc_tensor_uniform(g_ctx, AMPC_DTYPE_F32, SHAPE(10), 2, 1));
    ASSERT_ERROR_MENTIONS("ampc_tensor_uniform", "lo <= hi");
}

static void test_reshape_view_and_copy(void **state) {
    (void)state;
    ampc_tensor *t = iota3(2, 3, 4);
    ampc_tensor *r = ampc_tensor_reshape(t, SHAPE(6, -1));
    assert_non_null(r);
    assert_int_equal(ampc_tensor_dim(r, 1), 4);
    assert_ptr_equal(ampc_tensor_data(r), ampc_tensor_data(t)); /* a view */
    ampc_tensor_bump_version(r);
    assert_int_equal(ampc_tensor_version(t), ampc_tensor_version(r)); /* shared counter */
    /* a transposed tensor cannot be flattened without a copy: view fails, reshape copies */
    ampc_tensor *tt = ampc_tensor_transpose(t, 0, 2); /* [4, 3, 2] */
    assert_null(ampc_tensor_view(tt, SHAPE(24)));
    ASSERT_ERROR_MENTIONS("ampc_tensor_view", "[4, 3, 2] F32 (strides [1, 4, 12])", "[24]", "reshape");
    ampc_tensor *flat = ampc_tensor_reshape(tt, SHAPE(-1));
    assert_non_null(flat);
    assert_ptr_not_equal(ampc_tensor_data(flat), ampc_tensor_data(t));
    double *v = read_all(flat);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++) assert_true(v[(k * 3 + j) * 2 + i] == 100 * i + 10 * j + k);
    free(v);
    /* merging dims that are contiguous within a transposed tensor is still a view */
    ampc_tensor *p = ampc_tensor_permute(iota3(2, 3, 4), (int[]){1, 2, 0}); /* [3, 4, 2]: dims 0,1 mergeable */
    ampc_tensor *m = ampc_tensor_view(p, SHAPE(12, 2));
    assert_non_null(m);
    assert_int_equal(ampc_tensor_stride(m, 0), 1);
    assert_int_equal(ampc_tensor_stride(m, 1), 12);
    /* errors name the shapes */
    assert_null(ampc_tensor_reshape(t, SHAPE(5, 5)));
    ASSERT_ERROR_MENTIONS("ampc_tensor_reshape", "[2, 3, 4] F32", "24 elements", "[5, 5]", "25 elements");
    assert_null(ampc_tensor_reshape(t, SHAPE(-1, -1)));
    ASSERT_ERROR_MENTIONS("ampc_tensor_reshape", "[-1, -1]");
    assert_null(ampc_tensor_reshape(t, SHAPE(7, -1)));
    ASSERT_ERROR_MENTIONS("cannot infer", "[7, -1]");
    assert_null(ampc_tensor_reshape(t, 5, (int64_t[]){1, 1, 2, 3, 4}));
    ASSERT_ERROR_MENTIONS("5 dims", "0 to 4");
}

static void test_transpose_permute_slice(void **state) {
    (void)state;
    ampc_tensor *t = iota3(3, 4, 5);
    ampc_tensor *p = ampc_tensor_permute(t, (int[]){2, 0, -2}); /* [5, 3, 4] */
    double *v = read_all(p);
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) assert_true(v[(k * 3 + i) * 4 + j] == 100 * i + 10 * j + k);
    free(v);
    /* t[1:3, ::2, -2:] */
    ampc_tensor *s = ampc_tensor_slice(ampc_tensor_slice(ampc_tensor_slice(t, 0, 1, 3, 1), 1, 0, 100, 2), -1, -2, 5, 1);
    assert_non_null(s);
    assert_int_equal(ampc_tensor_dim(s, 0), 2);
    assert_int_equal(ampc_tensor_dim(s, 1), 2);
    assert_int_equal(ampc_tensor_dim(s, 2), 2);
    v = read_all(s);
    static const double want[8] = {103, 104, 123, 124, 203, 204, 223, 224};
    for (int i = 0; i < 8; i++) assert_true(v[i] == want[i]);
    free(v);
    assert_int_equal(ampc_tensor_numel(ampc_tensor_slice(t, 1, 4, 4, 1)), 0); /* empty slice */
    assert_null(ampc_tensor_slice(t, 1, 3, 2, 1));
    ASSERT_ERROR_MENTIONS("ampc_tensor_slice", "[3, 4, 5] F32");
    assert_null(ampc_tensor_slice(t, 0, 0, 1, 0));
    ASSERT_ERROR_MENTIONS("step >= 1");
    assert_null(ampc_tensor_transpose(t, 0, 3));
    ASSERT_ERROR_MENTIONS("ampc_tensor_transpose", "dim 3", "[3, 4, 5] F32", "-3 to 2");
    assert_null(ampc_tensor_permute(t, (int[]){0, 0, 1}));
    ASSERT_ERROR_MENTIONS("ampc_tensor_permute", "repeated");
}

static void test_contiguous_and_cast_of_strided(void **state) {
    (void)state;
    /* large enough to be split over threads, strided in two ways */
    ampc_tensor *big = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, SHAPE(64, 300, 7), 0, 100);
    ampc_tensor *view = ampc_tensor_slice(ampc_tensor_transpose(big, 0, 2), 1, 1, 300, 3); /* [7, 100, 64] */
    ampc_tensor *c = ampc_tensor_contiguous(view);
    ampc_tensor *h = ampc_tensor_cast(view, AMPC_DTYPE_F16);
    ampc_tensor *b = ampc_tensor_cast(view, AMPC_DTYPE_BF16);
    assert_true(ampc_tensor_is_contiguous(c) && !ampc_tensor_is_contiguous(view));
    const float *src = ampc_tensor_data(big), *cf = ampc_tensor_data(c);
    const uint16_t *hh = ampc_tensor_data(h), *bb = ampc_tensor_data(b);
    for (int k = 0; k < 7; k++)
        for (int j = 0; j < 100; j++)
            for (int i = 0; i < 64; i++) {
                float x = src[(i * 300 + (1 + 3 * j)) * 7 + k];
                int64_t o = (k * 100 + j) * 64 + i;
                if (cf[o] != x || hh[o] != ampc_f16_from_f32(x) || bb[o] != ampc_bf16_from_f32(x))
                    FAILF("element (%d, %d, %d) differs", k, j, i);
            }
    /* and back: writing into the strided view changes exactly those elements of the base */
    ampc_tensor *base = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_BF16, SHAPE(6, 8));
    uint64_t v0 = ampc_tensor_version(base);
    ampc_tensor *cols = ampc_tensor_slice(ampc_tensor_transpose(base, 0, 1), 0, 1, 8, 2); /* [4, 6] */
    float ones[24];
    for (int i = 0; i < 24; i++) ones[i] = (float)(i + 1);
    ASSERT_OK(ampc_tensor_copy_from(cols, ones, AMPC_DTYPE_F32));
    assert_true(ampc_tensor_version(base) > v0);
    const uint16_t *bd = ampc_tensor_data(base);
    for (int r = 0; r < 6; r++)
        for (int col = 0; col < 8; col++) {
            float want = col % 2 ? (float)((col / 2) * 6 + r + 1) : 0.0f;
            assert_true(ampc_bf16_to_f32(bd[r * 8 + col]) == want);
        }
    ASSERT_OK(ampc_tensor_fill(ampc_tensor_slice(base, 0, 0, 1, 1), -2.0));
    assert_true(ampc_bf16_to_f32(bd[7]) == -2.0f && ampc_bf16_to_f32(bd[9]) == 2.0f);
}

static void test_cast_threads_independent(void **state) {
    (void)state;
    ampc_ctx *one;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 3, .threads = 1}, &one));
    ampc_tensor *a = ampc_tensor_normal(one, AMPC_DTYPE_F32, SHAPE(3, 100001), 0, 1000);
    ampc_tensor *ga = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, SHAPE(3, 100001), ampc_tensor_data(a),
                                              AMPC_DTYPE_F32);
    ampc_tensor *h1 = ampc_tensor_cast(ampc_tensor_transpose(a, 0, 1), AMPC_DTYPE_F16);
    ampc_tensor *h2 = ampc_tensor_cast(ampc_tensor_transpose(ga, 0, 1), AMPC_DTYPE_F16);
    assert_memory_equal(ampc_tensor_data(h1), ampc_tensor_data(h2), 3 * 100001 * 2);
    ampc_ctx_free(one);
}

static void test_lifetimes(void **state) {
    (void)state;
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, SHAPE(4, 4));
    assert_true(ampc_tensor_is_owned(w));
    ASSERT_OK(ampc_tensor_fill(w, 3.0));
    ampc_tensor *v = ampc_tensor_transpose(w, 0, 1);
    ampc_tensor_free(w); /* the view keeps the storage alive */
    double *x = read_all(v);
    assert_true(x[15] == 3.0);
    free(x);
    ampc_tensor *keep = ampc_tensor_detach_copy(v);
    assert_true(ampc_tensor_is_owned(keep));
    ampc_ctx_step_end(g_ctx); /* the view and its reference go away here */
    x = read_all(keep);
    assert_true(x[0] == 3.0);
    free(x);
    ampc_tensor_free(keep);
    ampc_tensor_free(NULL);
    ampc_tensor *arena = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, SHAPE(2));
    ampc_tensor_free(arena); /* allowed, does nothing */
    assert_int_equal(ampc_tensor_numel(arena), 2);
}

static void test_bad_input(void **state) {
    (void)state;
    assert_null(ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, SHAPE(2, -3)));
    ASSERT_ERROR_MENTIONS("ampc_tensor_zeros", "[2, -3]", "-3", "dim 1");
    assert_null(ampc_tensor_zeros(g_ctx, (ampc_dtype)12, SHAPE(2)));
    ASSERT_ERROR_MENTIONS("ampc_tensor_zeros", "dtype 12", "BF16");
    assert_null(ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 5, (int64_t[]){1, 2, 3, 4, 5}));
    ASSERT_ERROR_MENTIONS("ampc_tensor_new", "5 dims");
    assert_null(ampc_tensor_new(NULL, AMPC_DTYPE_F32, SHAPE(2)));
    ASSERT_ERROR_MENTIONS("ampc_tensor_new", "ctx");
    assert_null(ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, 2, NULL));
    ASSERT_ERROR_MENTIONS("shape is NULL");
    assert_null(ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F64, SHAPE((int64_t)1 << 40, (int64_t)1 << 30)));
    ASSERT_ERROR_MENTIONS("too many elements");
    ampc_tensor *t = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, SHAPE(2));
    assert_int_equal(ampc_tensor_copy_to(t, NULL, AMPC_DTYPE_F32), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_tensor_copy_to", "dst", "[2] F32");
    assert_int_equal(ampc_tensor_copy_from(t, t, (ampc_dtype)-1), AMPC_STATUS_DTYPE);
    assert_int_equal(ampc_tensor_fill(NULL, 1.0), AMPC_STATUS_INVALID_ARG);
    /* a NULL input propagates through a chain without crashing */
    ampc_clear_error();
    ampc_tensor *chain = ampc_tensor_cast(
        ampc_tensor_contiguous(ampc_tensor_reshape(ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, SHAPE(3)), SHAPE(4))),
        AMPC_DTYPE_F16);
    assert_null(chain);
    ASSERT_ERROR_MENTIONS("ampc_tensor_reshape", "[3] F32", "[4]"); /* the first failure is kept */
    char buf[64];
    assert_string_equal(ampc_tensor_describe(t, buf, sizeof buf), "[2] F32");
    assert_string_equal(ampc_tensor_describe(NULL, buf, sizeof buf), "(null)");
    assert_int_equal(ampc_tensor_dim(t, 5), 0);
    assert_int_equal(ampc_tensor_stride(t, -2), -1);
}

/* A handle kept past its step (the C user's mistake: ampc_tensor_from_buffer before the loop) is refused
 * on every path that reads it, saying which step end released it, even when the next step has made a
 * tensor of the same shape (which used to take its memory and be read through the old handle, silently);
 * a freed owned tensor likewise. */
static void test_stale_handles(void **state) {
    (void)state;
    ampc_ctx_step_end(g_ctx);
    float v[6] = {1, 2, 3, 4, 5, 6}, out[6];
    ampc_tensor *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){2, 3}, v, AMPC_DTYPE_F32);
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){4, 3});
    ASSERT_OK(ampc_tensor_fill(w, 0.5));
    ampc_tensor *y = ampc_linear(g_ctx, x, w, NULL), *view = ampc_tensor_transpose(x, 0, 1);
    ampc_tensor *loss = ampc_sum(g_ctx, y, NULL, 0, false);
    assert_non_null(y), assert_non_null(view), assert_non_null(loss);
    ASSERT_OK(ampc_tensor_copy_to(x, out, AMPC_DTYPE_F32)); /* within its step: fine */
    ampc_ctx_step_end(g_ctx);
    uint64_t ended = ampc_ctx_step(g_ctx); /* step ends so far: the one that released x */
    float other[6] = {9, 9, 9, 9, 9, 9};
    ampc_tensor *same = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){2, 3}, other, AMPC_DTYPE_F32);
    assert_non_null(same);
    char want[96];
    snprintf(want, sizeof want, "released by ampc_ctx_step_end at the end of step %llu", (unsigned long long)ended);
    assert_null(ampc_linear(g_ctx, x, w, NULL));
    assert_int_equal(ampc_last_status(), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("ampc_linear: x was released", want, "ampc_tensor_new");
    assert_int_equal(ampc_tensor_copy_to(x, out, AMPC_DTYPE_F32), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("ampc_tensor_copy_to: tensor was released", want);
    assert_int_equal(ampc_tensor_copy_from(view, v, AMPC_DTYPE_F32), AMPC_STATUS_STATE);
    assert_int_equal(ampc_tensor_fill(y, 0), AMPC_STATUS_STATE);
    assert_null(ampc_add(g_ctx, same, y));
    ASSERT_ERROR_MENTIONS("ampc_add", "was released");
    assert_int_equal(ampc_backward(g_ctx, loss), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("ampc_backward: the loss was released");
    assert_null(ampc_tensor_data(x));
    assert_null(ampc_tensor_detach(y));
    /* the tensor of this step is its own, untouched */
    ASSERT_OK(ampc_tensor_copy_to(same, out, AMPC_DTYPE_F32));
    assert_memory_equal(out, other, sizeof out);
    /* a freed owned tensor */
    ampc_tensor_free(w);
    assert_int_equal(ampc_tensor_fill(w, 1), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("ampc_tensor_fill: tensor is a tensor freed by ampc_tensor_free");
    ampc_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_factories_every_dtype),
        cmocka_unit_test(test_from_buffer_converts),
        cmocka_unit_test(test_random_fills),
        cmocka_unit_test(test_reshape_view_and_copy),
        cmocka_unit_test(test_transpose_permute_slice),
        cmocka_unit_test(test_contiguous_and_cast_of_strided),
        cmocka_unit_test(test_cast_threads_independent),
        cmocka_unit_test(test_lifetimes),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_stale_handles),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
