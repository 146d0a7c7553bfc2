/* test_frame.c: the frames model code releases its intermediates with (src/ops/frame.h). What a frame made
 * goes back to the step heap when the frame ends or keeps a newer tensor; kept tensors and views of them
 * stay valid and pass to the enclosing frame; tensors made before the frame (and views of them) are never
 * released; autocast's cached weight casts are never released; a release is deferred while a recorded
 * backward reads the tensor, so a backward after frames gives the same gradients, bit for bit, as one
 * without. Freed step-heap blocks are reused by the next allocation of their size, so every check of a
 * kept value first fills fresh tensors of the same size: a wrong release shows as wrong values. */
#include "test_util.h"

#include <stdlib.h>

#include "amp/amp.h"
#include "ops/frame.h"

TU_CONTEXT(5, 2)

enum { R = 64, C = 128 }; /* R x C F32: 32 KiB, a step-heap buffer */
static const size_t S = (size_t)R * C * sizeof(float);

static int end_step(void **state) {
    (void)state;
    while (ampc_autocast_end(g_ctx) == AMPC_OK) {}
    ampc_clear_error();
    ampc_ctx_step_end(g_ctx);
    return 0;
}

static size_t heap_used(void) {
    ampc_memory_usage m;
    ASSERT_OK(ampc_memory_stats(g_ctx, &m));
    return m.heap_used;
}

static ampc_tensor *rnd(int64_t r, int64_t c) {
    ampc_tensor *t = ampc_tensor_normal(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){r, c}, 0, 1);
    assert_non_null(t);
    return t;
}

/* Takes any block a wrong release left free and writes over it. */
static void scribble(int n) {
    for (int i = 0; i < n; i++) ASSERT_OK(ampc_tensor_fill(rnd(R, C), 1e30));
}

static void expect_values(const ampc_tensor *t, const float *want, int64_t n) {
    float *got = malloc((size_t)n * sizeof *got);
    assert_non_null(got);
    ASSERT_OK(ampc_tensor_copy_to(t, got, AMPC_DTYPE_F32));
    for (int64_t i = 0; i < n; i++)
        if (tu_bits(got[i]) != tu_bits(want[i])) FAILF("element %lld: %g, expected %g", (long long)i, got[i], want[i]);
    free(got);
}

static float *values_of(const ampc_tensor *t) {
    float *v = malloc((size_t)ampc_tensor_numel(t) * sizeof *v);
    assert_non_null(v);
    ASSERT_OK(ampc_tensor_copy_to(t, v, AMPC_DTYPE_F32));
    return v;
}

static void test_end_releases_intermediates(void **state) {
    (void)state;
    ampc_tensor *x = rnd(R, C);
    size_t before = heap_used();
    ampci_frame f = ampci_frame_begin(g_ctx);
    ampc_tensor *a = ampc_exp(g_ctx, x), *b = ampc_tanh(g_ctx, a);
    ampc_tensor *y = ampc_add(g_ctx, a, b);
    size_t during = heap_used();
    assert_true(during >= before + 3 * S);
    float *want = values_of(y);
    assert_ptr_equal(ampci_frame_end(&f, y), y);
    size_t after = heap_used();
    assert_true(during - after >= 2 * S && during - after < 3 * S); /* a and b went, y stayed */
    assert_true(after >= before + S);
    scribble(4);
    expect_values(y, want, R * C);
    free(want);
    /* a failed op ends its frame with nothing kept: everything goes */
    f = ampci_frame_begin(g_ctx);
    ampc_tensor *z = ampc_exp(g_ctx, x);
    assert_non_null(z);
    size_t mid = heap_used();
    assert_null(ampci_frame_end(&f, ampc_add(g_ctx, z, rnd(3, 3)))); /* shapes do not broadcast */
    assert_true(mid - heap_used() >= S);
}

static void test_kept_views_stay(void **state) {
    (void)state;
    ampc_tensor *x = rnd(R, C);
    float *xv = values_of(x);
    size_t before = heap_used();
    ampci_frame f = ampci_frame_begin(g_ctx);
    ampc_tensor *a = ampc_exp(g_ctx, x);
    ampc_tensor *t = ampc_tensor_transpose(a, 0, 1);               /* a view of a */
    ampc_tensor *v = ampc_tensor_reshape(a, 2, (int64_t[]){C, R}); /* a view of a */
    ampc_tensor *xt = ampc_tensor_transpose(x, 0, 1);              /* a view of x */
    ampc_tensor *other = ampc_tanh(g_ctx, x);
    assert_true(v && t && xt && other);
    float *want = values_of(a), *want_t = values_of(t);
    ampci_frame_end(&f, v); /* keeps a's storage: a, t and v stay; other goes; x was never the frame's */
    assert_true(heap_used() >= before + S && heap_used() < before + 2 * S);
    scribble(4);
    expect_values(v, want, R * C);
    expect_values(a, want, R * C);
    expect_values(t, want_t, R * C);
    expect_values(x, xv, R * C);
    assert_false(x->storage->released);
    free(want), free(want_t), free(xv);
}

static void test_keep_and_nesting(void **state) {
    (void)state;
    ampc_tensor *x = rnd(R, C);
    ampci_frame outer = ampci_frame_begin(g_ctx);
    ampc_tensor *a = ampc_exp(g_ctx, x);
    size_t with_a = heap_used();
    ampci_frame inner = ampci_frame_begin(g_ctx);
    ampc_tensor *b = ampc_tanh(g_ctx, a), *c = ampc_mul(g_ctx, b, b);
    ampc_tensor *d = ampc_neg(g_ctx, c);
    size_t in_inner = heap_used();
    ampc_tensor *kept[2] = {c, d};
    ampci_frame_end_keeping(&inner, kept, 2); /* b goes; c and d pass to the outer frame */
    assert_true(in_inner - heap_used() >= S && in_inner - heap_used() < 2 * S);
    assert_true(b->storage->released && !c->storage->released && !d->storage->released && !a->storage->released);
    /* a keep inside the outer frame lets everything but the newest result go: a, c and d */
    ampc_tensor *e = ampci_frame_keep(&outer, ampc_add(g_ctx, c, d));
    assert_true(a->storage->released && c->storage->released && d->storage->released && !e->storage->released);
    assert_true(heap_used() <= with_a); /* e in a's place */
    ampc_tensor *g = ampc_sqrt(g_ctx, ampc_exp(g_ctx, e));
    float *want = values_of(g);
    assert_ptr_equal(ampci_frame_end(&outer, g), g);
    assert_true(e->storage->released && !g->storage->released);
    scribble(4);
    expect_values(g, want, R * C);
    free(want);
    /* outside any frame nothing is noted: ops' outputs stay until step end */
    ampc_tensor *h = ampc_exp(g_ctx, x);
    ampci_frame f = ampci_frame_begin(g_ctx);
    ampci_frame_end(&f, NULL);
    assert_false(h->storage->released);
}

/* A frame releases what model code got from ops, never the casts ops make for themselves: autocast's
 * cached cast of a weight is served again later in the region. */
static void test_cached_weight_cast_survives(void **state) {
    (void)state;
    ampc_tensor *w = ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){C, C}); /* BF16 cast: 32 KiB */
    ASSERT_OK(ampc_tensor_fill_normal(w, 0, 0.1));
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ampc_tensor *x = rnd(R, C);
    ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = AMPC_DTYPE_BF16, .enabled = true, .cache_enabled = true)));
    ampci_frame f = ampci_frame_begin(g_ctx);
    ampc_tensor *y1 = ampci_frame_end(&f, ampc_tanh(g_ctx, ampc_linear(g_ctx, x, w, NULL)));
    assert_non_null(y1);
    const ampc_tensor *cast = ampci_autocast_cache_find(g_ctx, w, AMPC_DTYPE_BF16);
    assert_non_null(cast);
    assert_false(cast->storage->released);
    float *want = values_of(y1);
    scribble(4);
    ampc_autocast_stats st0, st1;
    ASSERT_OK(ampc_autocast_get_stats(g_ctx, &st0));
    f = ampci_frame_begin(g_ctx);
    ampc_tensor *y2 = ampci_frame_end(&f, ampc_tanh(g_ctx, ampc_linear(g_ctx, x, w, NULL)));
    ASSERT_OK(ampc_autocast_get_stats(g_ctx, &st1));
    assert_int_equal(st1.cache_hits, st0.cache_hits + 1); /* the second linear used the cached cast */
    expect_values(y2, want, R * C);
    free(want);
    ASSERT_OK(ampc_backward(g_ctx, ampc_sum(g_ctx, ampc_add(g_ctx, y1, y2), NULL, 0, false)));
    assert_non_null(ampc_tensor_grad(w));
    ampc_autocast_end(g_ctx);
    ampc_ctx_step_end(g_ctx);
    ampc_tensor_free(w);
}

/* A small residual network: x = x + linear(tanh(linear(ln(x)))), twice, then mean(x^2); with frames as in
 * gpt.c (ln(x) goes once the branch is done, the branch once the sum is made) or without any. */
static ampc_tensor *branch(ampc_tensor *const *p, const ampc_tensor *x) {
    ampc_tensor *h = ampc_layer_norm(g_ctx, x, p[2], p[3], 1e-5);
    return ampc_linear(g_ctx, ampc_tanh(g_ctx, ampc_linear(g_ctx, h, p[0], NULL)), p[1], NULL);
}

static ampc_tensor *forward(ampc_tensor *const *p, ampc_tensor *x, bool frames) {
    if (!frames) {
        for (int i = 0; i < 2; i++) x = ampc_add(g_ctx, x, branch(p, x));
        return ampc_mean(g_ctx, ampc_mul(g_ctx, x, x), NULL, 0, false);
    }
    ampci_frame f = ampci_frame_begin(g_ctx);
    for (int i = 0; i < 2; i++) {
        ampci_frame r = ampci_frame_begin(g_ctx);
        ampc_tensor *y = ampci_frame_keep(&r, branch(p, x));
        x = ampci_frame_keep(&f, ampci_frame_end(&r, ampc_add(g_ctx, x, y)));
    }
    return ampci_frame_end(&f, ampc_mean(g_ctx, ampc_mul(g_ctx, x, x), NULL, 0, false));
}

static void grads(ampc_tensor *const *p, const float *xv, bool frames, ampc_dtype lp, float *out) {
    if (lp != AMPC_DTYPE_F32)
        ASSERT_OK(ampc_autocast_begin(g_ctx, TU_AC(.dtype = lp, .enabled = true, .cache_enabled = true)));
    ampc_tensor *x = ampc_tensor_from_buffer(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){R, C}, xv, AMPC_DTYPE_F32);
    ampc_tensor *loss = forward(p, x, frames);
    if (lp != AMPC_DTYPE_F32) ampc_autocast_end(g_ctx);
    assert_non_null(loss);
    scribble(8);
    ASSERT_OK(ampc_backward(g_ctx, loss));
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(p[i]), out, AMPC_DTYPE_F32));
        out += ampc_tensor_numel(p[i]);
        ampc_tensor_clear_grad(p[i]);
    }
    ampc_ctx_step_end(g_ctx);
}

static void test_backward_after_frames(void **state) {
    (void)state;
    ampc_tensor *p[4] = {ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){2 * C, C}),
                         ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 2, (int64_t[]){C, 2 * C}),
                         ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){C}),
                         ampc_tensor_new(g_ctx, AMPC_DTYPE_F32, 1, (int64_t[]){C})};
    ASSERT_OK(ampc_tensor_fill_normal(p[0], 0, 0.05));
    ASSERT_OK(ampc_tensor_fill_normal(p[1], 0, 0.05));
    ASSERT_OK(ampc_tensor_fill(p[2], 1));
    ASSERT_OK(ampc_tensor_fill(p[3], 0));
    for (int i = 0; i < 4; i++) ASSERT_OK(ampc_tensor_set_requires_grad(p[i], true));
    int64_t n = 4 * C * C + 2 * C;
    float *plain = malloc((size_t)n * sizeof *plain), *framed = malloc((size_t)n * sizeof *framed);
    float *xv = malloc(S);
    assert_true(plain && framed && xv);
    ASSERT_OK(ampc_tensor_copy_to(rnd(R, C), xv, AMPC_DTYPE_F32));
    static const ampc_dtype lps[3] = {AMPC_DTYPE_F32, AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
    for (int k = 0; k < 3; k++) {
        grads(p, xv, false, lps[k], plain);
        grads(p, xv, true, lps[k], framed);
        for (int64_t i = 0; i < n; i++)
            if (tu_bits(plain[i]) != tu_bits(framed[i]))
                FAILF("%s: gradient element %lld: %g with frames, %g without", ampc_dtype_name(lps[k]), (long long)i,
                      framed[i], plain[i]);
    }
    free(plain), free(framed), free(xv);
    for (int i = 0; i < 4; i++) ampc_tensor_free(p[i]);
}

/* Frames note only their own context's tensors. */
static void test_other_context(void **state) {
    (void)state;
    ampc_ctx *other;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &other));
    ampc_tensor *xo = ampc_tensor_normal(other, AMPC_DTYPE_F32, 2, (int64_t[]){R, C}, 0, 1);
    ampci_frame f = ampci_frame_begin(g_ctx);
    ampc_tensor *yo = ampc_exp(other, xo), *y = ampc_exp(g_ctx, rnd(R, C));
    ampci_frame_end(&f, NULL);
    assert_true(y->storage->released);
    assert_false(yo->storage->released);
    ampc_ctx_step_end(other);
    ampc_ctx_free(other);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_end_releases_intermediates, end_step),
        cmocka_unit_test_teardown(test_kept_views_stay, end_step),
        cmocka_unit_test_teardown(test_keep_and_nesting, end_step),
        cmocka_unit_test_teardown(test_cached_weight_cast_survives, end_step),
        cmocka_unit_test_teardown(test_backward_after_frames, end_step),
        cmocka_unit_test_teardown(test_other_context, end_step),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
