/* test_autograd.c: the tape's contract: requires_grad propagation, no-grad scopes, accumulation for a
 * tensor used several times and across backward passes, gradient dtypes (F32 leaves stay F32 through a
 * BF16 cast), the errors of a second backward, of a tensor without a graph, of a non-scalar loss and of
 * an input modified in place, release at step end, dtype promotion, and a two-layer MLP that learns XOR
 * in F32 and in BF16 with identical bits for 1 and 2 threads; large gradient sums, cut into pieces over the
 * threads, against a host loop. */
#include "test_util.h"

#include <stdlib.h>

TU_CONTEXT(3, 2)

static int end_step(void **state) {
    (void)state;
    ampc_ctx_step_end(g_ctx);
    ampc_clear_error();
    return 0;
}

static ampc_tensor *leaf(ampc_dtype dt, int n, const float *v) {
    ampc_tensor *t = ampc_tensor_from_buffer(g_ctx, dt, 1, (int64_t[]){n}, v, AMPC_DTYPE_F32);
    assert_non_null(t);
    ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    return t;
}

static void read_f32(const ampc_tensor *t, float *out) { ASSERT_OK(ampc_tensor_copy_to(t, out, AMPC_DTYPE_F32)); }

static void test_requires_grad_propagation(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    ampc_tensor *x = leaf(AMPC_DTYPE_F32, 3, v);
    ampc_tensor *c = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){3}, v, AMPC_DTYPE_F32);
    assert_true(ampc_tensor_requires_grad(ampc_mul(g_ctx, x, c)));
    assert_false(ampc_tensor_requires_grad(ampc_mul(g_ctx, c, c)));
    assert_false(ampc_tensor_requires_grad(ampc_tensor_detach(x)));
    ampc_no_grad_begin(g_ctx);
    ampc_no_grad_begin(g_ctx);
    ampc_tensor *y = ampc_exp(g_ctx, x);
    ampc_no_grad_end(g_ctx);
    assert_false(ampc_grad_enabled(g_ctx));
    ampc_no_grad_end(g_ctx);
    assert_true(ampc_grad_enabled(g_ctx));
    assert_false(ampc_tensor_requires_grad(y));
    assert_int_equal(ampc_backward(g_ctx, ampc_sum(g_ctx, y, NULL, 0, false)), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("ampc_backward", "does not require grad", "no-grad");
    /* only leaves can be marked, only float tensors can require grad */
    assert_int_equal(ampc_tensor_set_requires_grad(ampc_exp(g_ctx, x), false), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("only leaves", "ampc_exp");
    ampc_tensor *ids = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I64, 1, (int64_t[]){2});
    assert_int_equal(ampc_tensor_set_requires_grad(ids, true), AMPC_STATUS_DTYPE);
    ASSERT_ERROR_MENTIONS("[2] I64", "float");
}

static void test_accumulation(void **state) {
    (void)state;
    float v[3] = {1, -2, 0.5f}, g[3];
    ampc_tensor *x = leaf(AMPC_DTYPE_F32, 3, v);
    /* y = sum(x * x + x): x is used three times, dy/dx = 2x + 1 */
    ampc_tensor *y = ampc_sum(g_ctx, ampc_add(g_ctx, ampc_mul(g_ctx, x, x), x), NULL, 0, false);
    ASSERT_OK(ampc_backward(g_ctx, y));
    read_f32(ampc_tensor_grad(x), g);
    for (int i = 0; i < 3; i++) assert_true(g[i] == 2 * v[i] + 1);
    /* a second forward and backward add to the same leaf gradient */
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul_scalar(g_ctx, x, 3.0), NULL, 0, false)));
    read_f32(ampc_tensor_grad(x), g);
    for (int i = 0; i < 3; i++) assert_true(g[i] == 2 * v[i] + 1 + 3);
    ampc_tensor_clear_grad(x);
    assert_null(ampc_tensor_grad(x));
    /* a leaf used through a view: the transpose's backward re-strides the gradient */
    ampc_tensor *m = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6},
                                             AMPC_DTYPE_F32);
    ASSERT_OK(ampc_tensor_set_requires_grad(m, true));
    ampc_tensor *w = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){3, 2},
                                             (float[]){1, 10, 100, 1000, 1e4f, 1e5f}, AMPC_DTYPE_F32);
    ASSERT_OK(
        ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul(g_ctx, ampc_tensor_transpose(m, 0, 1), w), NULL, 0, false)));
    float gm[6];
    read_f32(ampc_tensor_grad(m), gm);
    static const float want[6] = {1, 100, 1e4f, 10, 1000, 1e5f};
    assert_memory_equal(gm, want, sizeof want);
}

/* Slices of one op output (q, k and v of a projection; overlapping and stepped windows): the later slices'
 * gradients go into the pending gradient's window in place, the sums rounded once to its dtype (BF16: 3 +
 * 2^-8 rounds to 3 in one window, and the overlap's 1 + 2^-8 + 2^-8 is formed in F32 before rounding). */
enum { SL_R = 1000, SL_C = 10 }; /* 20 KB in BF16: a step-heap buffer, as large gradients are */

static void slice_grads(ampc_dtype dt, float *gx) {
    float *v = malloc(SL_R * SL_C * sizeof *v);
    for (int i = 0; i < SL_R * SL_C; i++) v[i] = (float)(i % 7) - 3;
    ampc_tensor *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){SL_R, SL_C}, v, AMPC_DTYPE_F32);
    free(v);
    ASSERT_OK(ampc_tensor_set_requires_grad(x, true));
    /* an op output of dt, whose gradient is dt */
    ampc_tensor *y = ampc_tensor_cast(ampc_mul_scalar(g_ctx, x, 1.0), dt);
    static const struct {
        int64_t start, end, step;
        float w;
    } sl[] = {{0, 3, 1, 1}, {3, 6, 1, 2}, {6, 10, 1, 3}, {2, 5, 1, 0x1p-8f}, {1, 10, 3, 0x1p-8f}};
    ampc_tensor *loss = NULL;
    for (size_t i = 0; i < sizeof sl / sizeof sl[0]; i++) {
        ampc_tensor *part = ampc_tensor_slice(y, 1, sl[i].start, sl[i].end, sl[i].step);
        ampc_tensor *term = ampc_sum(g_ctx, ampc_mul_scalar(g_ctx, part, sl[i].w), NULL, 0, false);
        loss = loss ? ampc_add(g_ctx, loss, term) : term;
    }
    ASSERT_OK(ampc_backward(g_ctx, loss));
    read_f32(ampc_tensor_grad(x), gx);
}

static void test_slice_gradients(void **state) {
    (void)state;
    float *g32 = malloc(SL_R * SL_C * sizeof *g32), *g16 = malloc(SL_R * SL_C * sizeof *g16);
    ASSERT_OK(ampc_ctx_profile_start(g_ctx));
    slice_grads(AMPC_DTYPE_F32, g32);
    slice_grads(AMPC_DTYPE_BF16, g16);
    /* the first slice's backward makes the whole gradient; the others add into it, no whole-size sums */
    ampc_profile_entry e[64];
    int n = ampc_ctx_profile_read(g_ctx, e, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (strcmp(e[i].kind, "tensor_slice") == 0 && strcmp(e[i].op, "accumulate") == 0)
            FAILF("slice backward added %llu whole gradients", (unsigned long long)e[i].calls);
    ampc_ctx_profile_stop(g_ctx);
    for (int r = 0; r < SL_R; r++)
        for (int c = 0; c < SL_C; c++) {
            float base = c < 3 ? 1 : c < 6 ? 2 : 3;
            int hits = (c >= 2 && c < 5) + (c % 3 == 1); /* in windows 4 and 5 */
            float want32 = base + (float)hits * 0x1p-8f;
            float want16 = ampc_bf16_to_f32(ampc_bf16_from_f32(want32)); /* F32 sum, rounded once */
            if (g32[r * SL_C + c] != want32) FAILF("F32 [%d, %d]: %g, expected %g", r, c, g32[r * SL_C + c], want32);
            if (g16[r * SL_C + c] != want16) FAILF("BF16 [%d, %d]: %g, expected %g", r, c, g16[r * SL_C + c], want16);
        }
    free(g32), free(g16);
    ampc_ctx_step_end(g_ctx);
}

/* Gradient sums and first writes of a large leaf gradient run in pieces over the threads (a grain of 16384
 * elements, 32768 for conversions): at 2 x 65536 + 7 elements, every piece and the odd tail must hold the
 * sum a host loop makes, for F32, BF16 and F16 leaves (the sum is F32, rounded once to the leaf's dtype). */
static void test_large_gradient_sums(void **state) {
    (void)state;
    enum { N = 2 * 65536 + 7 };
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
    float *v = malloc(N * sizeof *v), *a1 = malloc(N * sizeof *a1), *a2 = malloc(N * sizeof *a2),
          *g = malloc(N * sizeof *g), *want = malloc(N * sizeof *want);
    assert_true(v && a1 && a2 && g && want);
    for (int i = 0; i < N; i++) { /* sums that need rounding in BF16/F16 */
        v[i] = 1.0f;
        a1[i] = (float)(i % 509) / 8.0f;
        a2[i] = (float)(i % 251 + 1) / 1024.0f;
    }
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        ampc_tensor *x = leaf(dts[d], N, v);
        ampc_tensor *c1 = ampc_tensor_from_buffer(g_ctx, dts[d], 1, (int64_t[]){N}, a1, AMPC_DTYPE_F32);
        ampc_tensor *c2 = ampc_tensor_from_buffer(g_ctx, dts[d], 1, (int64_t[]){N}, a2, AMPC_DTYPE_F32);
        ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul(g_ctx, x, c1), NULL, 0, false)));
        ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul(g_ctx, x, c2), NULL, 0, false)));
        assert_int_equal(ampc_tensor_dtype(ampc_tensor_grad(x)), dts[d]);
        read_f32(ampc_tensor_grad(x), g);
        read_f32(c1, want), read_f32(c2, a2); /* the coefficients as the dtype holds them */
        for (int i = 0; i < N; i++) want[i] += a2[i];
        if (dts[d] != AMPC_DTYPE_F32) { /* the host's rounding of the F32 sum to the leaf's dtype */
            uint16_t *h = malloc(N * sizeof *h);
            assert_non_null(h);
            ASSERT_OK(ampc_convert(h, dts[d], want, AMPC_DTYPE_F32, N));
            ASSERT_OK(ampc_convert(want, AMPC_DTYPE_F32, h, dts[d], N));
            free(h);
        }
        assert_memory_equal(g, want, N * sizeof *g);
        ampc_ctx_step_end(g_ctx);
    }
    free(v), free(a1), free(a2), free(g), free(want);
}

static void test_gradient_dtypes(void **state) {
    (void)state;
    /* an F32 parameter used through a BF16 copy: its gradient is F32 (the cast's backward widens) */
    float v[4] = {0.1f, 0.2f, 0.3f, 0.4f}, g[4];
    ampc_tensor *w = leaf(AMPC_DTYPE_F32, 4, v);
    ampc_tensor *wb = ampc_tensor_cast(w, AMPC_DTYPE_BF16);
    ampc_tensor *y = ampc_sum(g_ctx, ampc_mul_scalar(g_ctx, wb, 1.0 / 3.0), NULL, 0, false);
    assert_int_equal(ampc_tensor_dtype(y), AMPC_DTYPE_BF16);
    ASSERT_OK(ampc_backward(g_ctx, y));
    assert_int_equal(ampc_tensor_dtype(ampc_tensor_grad(w)), AMPC_DTYPE_F32);
    read_f32(ampc_tensor_grad(w), g);
    /* the BF16 activation gradient is 1/3 rounded to BF16, handed to the F32 leaf exactly */
    for (int i = 0; i < 4; i++) assert_true(g[i] == ampc_bf16_to_f32(ampc_bf16_from_f32(1.0f / 3.0f)));
    /* a BF16 leaf gets a BF16 gradient */
    ampc_tensor *b = leaf(AMPC_DTYPE_BF16, 4, v);
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, b, NULL, 0, false)));
    assert_int_equal(ampc_tensor_dtype(ampc_tensor_grad(b)), AMPC_DTYPE_BF16);
}

static void test_promotion(void **state) {
    (void)state;
    float v[2] = {1, 2};
    ampc_tensor *f = leaf(AMPC_DTYPE_F32, 2, v), *h = leaf(AMPC_DTYPE_F16, 2, v), *b = leaf(AMPC_DTYPE_BF16, 2, v);
    assert_int_equal(ampc_tensor_dtype(ampc_add(g_ctx, b, f)), AMPC_DTYPE_F32);
    assert_int_equal(ampc_tensor_dtype(ampc_mul(g_ctx, h, b)), AMPC_DTYPE_F32);
    assert_int_equal(ampc_tensor_dtype(ampc_sub(g_ctx, h, h)), AMPC_DTYPE_F16);
    assert_int_equal(ampc_tensor_dtype(ampc_mul_scalar(g_ctx, b, 2.0)), AMPC_DTYPE_BF16);
    /* gradients return in each operand's own dtype */
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_mul(g_ctx, h, b), NULL, 0, false)));
    assert_int_equal(ampc_tensor_dtype(ampc_tensor_grad(h)), AMPC_DTYPE_F16);
    assert_int_equal(ampc_tensor_dtype(ampc_tensor_grad(b)), AMPC_DTYPE_BF16);
    /* GEMM-like ops do not promote */
    ampc_tensor *a2 = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_BF16, 2, (int64_t[]){2, 2});
    ampc_tensor *f2 = ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){2, 2});
    assert_null(ampc_matmul(g_ctx, a2, f2, 0));
    ASSERT_ERROR_MENTIONS("ampc_matmul", "[2, 2] BF16", "[2, 2] F32", "same dtype");
}

static void test_backward_errors(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    ampc_tensor *x = leaf(AMPC_DTYPE_F32, 3, v);
    ampc_tensor *loss = ampc_sum(g_ctx, ampc_tanh(g_ctx, x), NULL, 0, false);
    ASSERT_OK(ampc_backward(g_ctx, loss));
    assert_int_equal(ampc_backward(g_ctx, loss), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("ampc_backward", "already used", "ampc_sum");
    /* a graph that shares released nodes is refused too */
    assert_int_equal(ampc_backward(g_ctx, ampc_sum(g_ctx, loss, NULL, 0, false)), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("already used");
    /* no graph at all */
    ampc_tensor *plain = ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 0, NULL, 1.0);
    assert_int_equal(ampc_backward(g_ctx, plain), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("does not require grad", "no graph");
    /* non-scalar loss; a gradient of the wrong shape or dtype */
    ampc_tensor *y = ampc_exp(g_ctx, x);
    assert_int_equal(ampc_backward(g_ctx, y), AMPC_STATUS_SHAPE);
    ASSERT_ERROR_MENTIONS("[3] F32", "not a scalar", "ampc_backward_with");
    assert_int_equal(ampc_backward_with(g_ctx, y, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){4})),
                     AMPC_STATUS_SHAPE);
    ASSERT_ERROR_MENTIONS("[4] F32", "does not match", "[3] F32");
    assert_int_equal(ampc_backward_with(g_ctx, y, ampc_tensor_zeros(g_ctx, AMPC_DTYPE_I32, 1, (int64_t[]){3})),
                     AMPC_STATUS_DTYPE);
    assert_int_equal(ampc_backward(g_ctx, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("loss is NULL", "earlier error");
    /* with a gradient, a non-scalar output is fine: d/dx exp(x) . g */
    ASSERT_OK(ampc_backward_with(g_ctx, y, ampc_tensor_full(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){3}, 2.0)));
    float g[3];
    read_f32(ampc_tensor_grad(x), g);
    for (int i = 0; i < 3; i++) assert_true(fabsf(g[i] - (1 - tanhf(v[i]) * tanhf(v[i]) + 2 * expf(v[i]))) < 1e-5f);
}

static void test_modified_in_place(void **state) {
    (void)state;
    float v[2] = {1, 2};
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){2});
    ASSERT_OK(ampc_tensor_copy_from(w, v, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ampc_tensor *x = leaf(AMPC_DTYPE_F32, 2, v);
    ampc_tensor *loss = ampc_sum(g_ctx, ampc_mul(g_ctx, x, w), NULL, 0, false); /* mul saves w */
    ASSERT_OK(ampc_tensor_fill(w, 5.0));                                        /* e.g. an early optimizer step */
    assert_int_equal(ampc_backward(g_ctx, loss), AMPC_STATUS_STATE);
    ASSERT_ERROR_MENTIONS("input 1 of ampc_mul", "modified in place");
    ampc_ctx_step_end(g_ctx);
    ampc_tensor_free(w);
}

static void test_free_before_backward(void **state) {
    (void)state;
    /* freeing an owned parameter that the tape still uses is deferred to the step end */
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){4});
    ASSERT_OK(ampc_tensor_fill(w, 2.0));
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ampc_tensor *loss = ampc_sum(g_ctx, ampc_mul(g_ctx, w, w), NULL, 0, false);
    ampc_tensor_free(w);
    ASSERT_OK(ampc_backward(g_ctx, loss));
    ampc_memory_usage before, after;
    ASSERT_OK(ampc_memory_stats(g_ctx, &before));
    ampc_ctx_step_end(g_ctx);
    ASSERT_OK(ampc_memory_stats(g_ctx, &after));
    assert_true(after.live_bytes < before.live_bytes); /* the tensor and its gradient are gone now */
}

/* The backward walk holds about one gradient at a time, not one per op: a chain of L ops on S-byte
 * tensors adds a few S to the forward's memory, not L * S. */
static void test_backward_releases_gradients(void **state) {
    (void)state;
    enum { L = 24 };
    const int64_t shape[2] = {128, 256}; /* 128 KiB in F32 */
    const size_t S = 128 * 256 * sizeof(float);
    ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, shape, 0, 1);
    ASSERT_OK(ampc_tensor_set_requires_grad(x, true));
    ampc_tensor *h = x;
    for (int i = 0; i < L; i++) h = ampc_tanh(g_ctx, ampc_mul_scalar(g_ctx, h, 0.9));
    ampc_tensor *loss = ampc_sum(g_ctx, h, NULL, 0, false);
    ampc_memory_usage fwd, bwd;
    ASSERT_OK(ampc_memory_stats(g_ctx, &fwd));
    ASSERT_OK(ampc_backward(g_ctx, loss));
    ASSERT_OK(ampc_memory_stats(g_ctx, &bwd));
    assert_non_null(ampc_tensor_grad(x));
    size_t extra = bwd.heap_high_water - (fwd.heap_high_water > fwd.heap_used ? fwd.heap_high_water : fwd.heap_used);
    assert_true(extra <= 6 * S);
    /* the forward's tensors stay (they are the caller's until step end), plus x's gradient */
    assert_true(bwd.heap_used >= fwd.heap_used + S && bwd.heap_used <= fwd.heap_used + S + S / 8 + 128);
    ampc_ctx_step_end(g_ctx);
}

static void test_step_end_releases(void **state) {
    (void)state;
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){64, 64});
    ASSERT_OK(ampc_tensor_fill_normal(w, 0, 1));
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ampc_memory_usage m;
    size_t used_first = 0;
    for (int step = 0; step < 3; step++) {
        ampc_tensor *x = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){32, 64}, 0, 1);
        ampc_tensor *h = ampc_tanh(g_ctx, ampc_linear(g_ctx, x, w, NULL));
        ASSERT_OK(ampc_backward(g_ctx, ampc_mean(g_ctx, h, NULL, 0, false)));
        ASSERT_OK(ampc_memory_stats(g_ctx, &m));
        if (step == 0) used_first = m.arena_used;
        assert_int_equal(m.arena_used, used_first); /* every step uses the same arena space */
        ampc_ctx_step_end(g_ctx);
        ASSERT_OK(ampc_memory_stats(g_ctx, &m));
        assert_int_equal(m.arena_used, 0);
        assert_non_null(ampc_tensor_grad(w)); /* an owned leaf's gradient survives the step */
        assert_true(ampc_tensor_is_owned(ampc_tensor_grad(w)));
    }
    ASSERT_OK(ampc_tensor_set_name(w, "layers.0.weight"));
    assert_string_equal(ampc_tensor_name(w), "layers.0.weight");
    char longname[80];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(ampc_tensor_set_name(w, longname), AMPC_STATUS_INVALID_ARG);
    ampc_tensor_free(w); /* frees its gradient too (checked by the ASan run) */
}

/* ---- a two-layer MLP learns XOR (public API only): F32 master weights, optional BF16 compute ---- */

typedef struct xor_result {
    float loss;
    float pred[4];
    uint32_t bits; /* a checksum of the final weights */
} xor_result;

static xor_result train_xor(int threads, ampc_dtype compute) {
    ampc_ctx *ctx;
    ampc_ctx_new(&(ampc_ctx_params){.seed = 11, .threads = threads}, &ctx);
    enum { H = 8 };
    int64_t s1[2] = {H, 2}, s2[2] = {1, H}, sb1[1] = {H}, sb2[1] = {1};
    ampc_tensor *p[4] = {ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, s1), ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, sb1),
                         ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, s2), ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, sb2)};
    ampc_tensor_fill_uniform(p[0], -1, 1);
    ampc_tensor_fill_uniform(p[2], -1, 1);
    for (int i = 0; i < 4; i++) ampc_tensor_set_requires_grad(p[i], true);
    static const float X[8] = {0, 0, 0, 1, 1, 0, 1, 1}, Y[4] = {0, 1, 1, 0};
    xor_result r = {0};
    for (int step = 0; step < 2000; step++) {
        ampc_tensor *x = ampc_tensor_from_buffer(ctx, compute, 2, (int64_t[]){4, 2}, X, AMPC_DTYPE_F32);
        ampc_tensor *y = ampc_tensor_from_buffer(ctx, compute, 2, (int64_t[]){4, 1}, Y, AMPC_DTYPE_F32);
        ampc_tensor *q[4];
        for (int i = 0; i < 4; i++) q[i] = ampc_tensor_cast(p[i], compute); /* low-precision copies */
        ampc_tensor *h = ampc_tanh(ctx, ampc_linear(ctx, x, q[0], q[1]));
        ampc_tensor *out = ampc_sigmoid(ctx, ampc_linear(ctx, h, q[2], q[3]));
        ampc_tensor *d = ampc_sub(ctx, out, y);
        ampc_tensor *loss = ampc_mean(ctx, ampc_mul(ctx, d, d), NULL, 0, false);
        assert_non_null(loss);
        if (ampc_backward(ctx, loss) != AMPC_OK) fail_msg("backward: %s", ampc_last_error());
        for (int i = 0; i < 4; i++) { /* SGD, lr 2, on the F32 masters */
            int64_t n = ampc_tensor_numel(p[i]);
            float *w = ampc_tensor_data(p[i]), *g = ampc_tensor_data(ampc_tensor_grad(p[i]));
            for (int64_t k = 0; k < n; k++) w[k] -= 2.0f * g[k];
            ampc_tensor_bump_version(p[i]);
            ampc_tensor_clear_grad(p[i]);
        }
        ampc_tensor_copy_to(loss, &r.loss, AMPC_DTYPE_F32);
        ampc_tensor_copy_to(out, r.pred, AMPC_DTYPE_F32);
        ampc_ctx_step_end(ctx);
    }
    for (int i = 0; i < 4; i++) {
        const uint32_t *w = ampc_tensor_data(p[i]);
        for (int64_t k = 0; k < ampc_tensor_numel(p[i]); k++) r.bits = r.bits * 31 + w[k];
        ampc_tensor_free(p[i]);
    }
    ampc_ctx_free(ctx);
    return r;
}

static void test_mlp_learns_xor(void **state) {
    (void)state;
    static const float Y[4] = {0, 1, 1, 0};
    static const ampc_dtype dts[2] = {AMPC_DTYPE_F32, AMPC_DTYPE_BF16};
    for (int d = 0; d < 2; d++) {
        xor_result a = train_xor(1, dts[d]), b = train_xor(2, dts[d]);
        print_message("  XOR %s: final loss %.5f, predictions %.3f %.3f %.3f %.3f\n", ampc_dtype_name(dts[d]), a.loss,
                      a.pred[0], a.pred[1], a.pred[2], a.pred[3]);
        assert_true(a.loss < 0.02f);
        for (int i = 0; i < 4; i++) assert_true(fabsf(a.pred[i] - Y[i]) < 0.25f);
        assert_int_equal(a.bits, b.bits); /* the same bits with 1 and 2 threads */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_requires_grad_propagation, end_step),
        cmocka_unit_test_teardown(test_accumulation, end_step),
        cmocka_unit_test_teardown(test_large_gradient_sums, end_step),
        cmocka_unit_test_teardown(test_gradient_dtypes, end_step),
        cmocka_unit_test_teardown(test_promotion, end_step),
        cmocka_unit_test_teardown(test_backward_errors, end_step),
        cmocka_unit_test_teardown(test_modified_in_place, end_step),
        cmocka_unit_test_teardown(test_free_before_backward, end_step),
        cmocka_unit_test_teardown(test_backward_releases_gradients, end_step),
        cmocka_unit_test_teardown(test_step_end_releases, end_step),
        cmocka_unit_test(test_mlp_learns_xor),
        cmocka_unit_test(test_slice_gradients),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
