/* test_profile.c: the profile of device calls (ampc_ctx_profile_*) and the passes whose splitting over
 * threads changed with it. The profile names each call's op kind, device operation and phase (a linear's
 * forward GEMM, its backward's two GEMMs and column sum, the optimizer's updates) on the CPU and the guard
 * device, counts them exactly, stops and restarts cleanly, and changes no result. The bias gradient's
 * column sums (tiles of rows and columns) and the optimizer's list passes (unscale with found-inf, sums of
 * squares for clipping, in pieces of AMPCI_GRAD_PIECE) give the same bits at 1, 2 and 3 threads, and the
 * values their documented order gives; so do broadcast adds and their gradients' sums over the broadcast
 * dims (rows and column blocks on the threads). */
#include "test_util.h"

#include "kernels/device.h" /* internal: the kernel table and the piece size, for the documented orders */

#include <math.h>
#include <stdlib.h>

static const ampc_device CPU = {AMPC_DEVICE_CPU, 0}, GUARD = {AMPC_DEVICE_GUARD, 0};

static ampc_ctx *ctx_with(ampc_device d, int threads) {
    ampc_ctx *ctx = NULL;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 5, .threads = threads, .device = d}, &ctx));
    return ctx;
}

/* An owned F32 parameter of n values i * step - 1 (mod 2), requiring grad. */
static ampc_tensor *param(ampc_ctx *ctx, int nd, const int64_t *shape, float step) {
    ampc_tensor *p = ampc_tensor_new(ctx, AMPC_DTYPE_F32, nd, shape);
    assert_non_null(p);
    int64_t n = ampc_tensor_numel(p);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = fmodf((float)i * step, 2.0f) - 1.0f;
    ASSERT_OK(ampc_tensor_copy_from(p, v, AMPC_DTYPE_F32));
    free(v);
    ASSERT_OK(ampc_tensor_set_requires_grad(p, true));
    return p;
}

static const ampc_profile_entry *entry(const ampc_profile_entry *e, int n, const char *kind, const char *op,
                                       const char *phase) {
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].kind, kind) == 0 && strcmp(e[i].op, op) == 0 && strcmp(e[i].phase, phase) == 0) return &e[i];
    return NULL;
}

static void expect_calls(const ampc_profile_entry *e, int n, const char *kind, const char *op, const char *phase,
                         uint64_t calls) {
    const ampc_profile_entry *x = entry(e, n, kind, op, phase);
    if (!x) FAILF("no profile row for %s %s: %s", kind, phase, op);
    if (x->calls != calls)
        FAILF("%s %s: %s: %llu calls, expected %llu", kind, phase, op, (unsigned long long)x->calls,
              (unsigned long long)calls);
    assert_true(x->seconds >= 0 && x->regions <= 64 * x->calls);
}

/* One SGD step of a linear layer with a bias on (4, 8) inputs; y's values into out (12 floats). */
static void linear_step(ampc_ctx *ctx, float *out) {
    ampc_tensor *w = param(ctx, SHAPE(3, 8), 0.37f), *b = param(ctx, SHAPE(3), 0.5f);
    ampc_tensor *x = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, SHAPE(4, 8), 0, 1);
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_SGD, .lr = 0.1}, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "all", (ampc_tensor *[]){w, b}, 2, NULL));
    ampc_tensor *y = ampc_linear(ctx, x, w, b);
    assert_non_null(y);
    ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, y, NULL, 0, false)));
    ASSERT_OK(ampc_optim_step(opt));
    ampc_optim_zero_grad(opt);
    ASSERT_OK(ampc_tensor_copy_to(y, out, AMPC_DTYPE_F32));
    ampc_ctx_step_end(ctx);
    ampc_optim_free(opt);
    ampc_tensor_free(w), ampc_tensor_free(b);
}

static void test_rows(void **state) {
    (void)state;
    assert_int_equal(ampc_ctx_profile_read(NULL, NULL, 0), 0);
    assert_int_equal(ampc_ctx_profile_start(NULL), AMPC_STATUS_INVALID_ARG);
    ampc_ctx_profile_stop(NULL);
    for (int dev = 0; dev < 2; dev++) {
        ampc_ctx *ctx = ctx_with(dev ? GUARD : CPU, 2);
        float y[12], y_plain[12];
        assert_int_equal(ampc_ctx_profile_read(ctx, NULL, 0), 0); /* off */
        ASSERT_OK(ampc_ctx_profile_start(ctx));
        assert_int_equal(ampc_ctx_profile_read(ctx, NULL, 0), 0);
        linear_step(ctx, y);
        int n = ampc_ctx_profile_read(ctx, NULL, 0);
        assert_true(n > 0);
        ampc_profile_entry *e = calloc((size_t)n, sizeof *e);
        assert_int_equal(ampc_ctx_profile_read(ctx, e, n), n);
        expect_calls(e, n, "linear", "gemm", "forward", 1);
        expect_calls(e, n, "linear", "gemm", "backward", 1);    /* gw only: x needs no gradient */
        expect_calls(e, n, "linear", "col_sum", "backward", 1); /* the bias gradient */
        expect_calls(e, n, "optimizer", "optim_update", "optimizer", 2);
        assert_null(entry(e, n, "linear", "optim_update", "forward"));
        bool zeroed = false; /* raw memsets are rows too: the new parameters' zeros */
        for (int i = 0; i < n; i++) zeroed |= strcmp(e[i].op, "memset") == 0 && e[i].calls >= 2;
        assert_true(zeroed);
        assert_int_equal(ampc_ctx_profile_read(ctx, e, 1), n); /* a short array: the count still */
        free(e);
        /* restarted: from zero; stopped: nothing counted, and the device's own table is back */
        ASSERT_OK(ampc_ctx_profile_start(ctx));
        assert_int_equal(ampc_ctx_profile_read(ctx, NULL, 0), 0);
        ampc_ctx_profile_stop(ctx);
        linear_step(ctx, y_plain);
        assert_int_equal(ampc_ctx_profile_read(ctx, NULL, 0), 0);
        ASSERT_OK(ampc_ctx_profile_start(ctx)); /* left on: ampc_ctx_free stops it */
        ampc_ctx_free(ctx);
        ampc_ctx *plain = ctx_with(dev ? GUARD : CPU, 2); /* the same seed's step, never profiled */
        linear_step(plain, y_plain);
        assert_memory_equal(y, y_plain, sizeof y);
        ampc_ctx_free(plain);
    }
}

/* ---- column sums: tiles of 256 rows x 128 columns, partials added in row-block order ---- */

enum { CS_ROWS = 600, CS_IN = 5, CS_OUT = 300 };

/* The bias gradient of linear(x, w, b) for the upstream gradient c (CS_ROWS, CS_OUT) at `threads`. */
static void bias_grad(int threads, const float *c, float *gb) {
    ampc_ctx *ctx = ctx_with(CPU, threads);
    ampc_tensor *w = param(ctx, SHAPE(CS_OUT, CS_IN), 0.11f), *b = param(ctx, SHAPE(CS_OUT), 0.7f);
    ampc_tensor *x = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, SHAPE(CS_ROWS, CS_IN), 0, 1);
    ampc_tensor *ct = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_F32, SHAPE(CS_ROWS, CS_OUT), c, AMPC_DTYPE_F32);
    ampc_tensor *y = ampc_linear(ctx, x, w, b);
    ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, ampc_mul(ctx, y, ct), NULL, 0, false)));
    ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(b), gb, AMPC_DTYPE_F32));
    ampc_tensor_free(w), ampc_tensor_free(b);
    ampc_ctx_free(ctx);
}

static void test_col_sum_threads(void **state) {
    (void)state;
    float *c = malloc(CS_ROWS * CS_OUT * sizeof *c), want[CS_OUT], got[CS_OUT];
    uint64_t seed = 7;
    for (int i = 0; i < CS_ROWS * CS_OUT; i++) /* magnitudes from 2^-20 to 2^20: order matters in F32 */
        c[i] = ldexpf((float)(tu_rand(&seed) % 1000) / 999.0f - 0.5f, (int)(tu_rand(&seed) % 41) - 20);
    for (int j = 0; j < CS_OUT; j++) {
        double s = 0;
        for (int rb = 0; rb < CS_ROWS; rb += 256) {
            double part = 0;
            for (int r = rb; r < rb + 256 && r < CS_ROWS; r++) part += (double)c[r * CS_OUT + j];
            s = rb == 0 ? part : s + part;
        }
        want[j] = (float)s;
    }
    for (int threads = 1; threads <= 3; threads++) {
        bias_grad(threads, c, got);
        for (int j = 0; j < CS_OUT; j++)
            if (tu_bits(got[j]) != tu_bits(want[j]))
                FAILF("%d threads, column %d: %.9g, expected %.9g", threads, j, got[j], want[j]);
    }
    free(c);
}

/* ---- the optimizer's list passes, in pieces ---- */

enum { BIG = 2 * (1 << 20) + 12345 }; /* three pieces of AMPCI_GRAD_PIECE */

typedef struct list_result {
    double norm;
    float tail[4]; /* the big gradient's last values after clipping */
    bool skipped;
    char first_bad[64];
} list_result;

/* Gradients of a BIG parameter and a small one (grad = the parameter's values times 3), clipped to norm 1
 * (or, with inf_at >= 0, the big gradient holds an inf there and a GradScaler unscales and skips). */
static list_result list_passes(int threads, int64_t inf_at) {
    ampc_ctx *ctx = ctx_with(CPU, threads);
    ampc_tensor *p = param(ctx, SHAPE(BIG), 0.001f), *q = param(ctx, SHAPE(7), 0.3f);
    ASSERT_OK(ampc_tensor_set_name(p, "big"));
    ampc_optim *opt;
    ASSERT_OK(ampc_optim_new(ctx, &(ampc_optim_params){.kind = AMPC_OPTIM_SGD, .lr = 0.1}, &opt));
    ASSERT_OK(ampc_optim_add_group(opt, "all", (ampc_tensor *[]){p, q}, 2, NULL));
    float *g = malloc((size_t)BIG * sizeof *g);
    ASSERT_OK(ampc_tensor_copy_to(p, g, AMPC_DTYPE_F32));
    if (inf_at >= 0) g[inf_at] = INFINITY;
    ampc_tensor *gt = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_F32, SHAPE(BIG), g, AMPC_DTYPE_F32);
    ampc_tensor *loss = ampc_add(ctx, ampc_sum(ctx, ampc_mul(ctx, p, gt), NULL, 0, false),
                                 ampc_sum(ctx, ampc_mul_scalar(ctx, q, 3.0), NULL, 0, false));
    ASSERT_OK(ampc_backward(ctx, ampc_mul_scalar(ctx, loss, 3.0)));
    list_result r = {0};
    if (inf_at < 0) {
        ASSERT_OK(ampc_clip_grad_norm(opt, 1.0, &r.norm));
        float *gg = malloc((size_t)BIG * sizeof *gg);
        ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(p), gg, AMPC_DTYPE_F32));
        memcpy(r.tail, gg + BIG - 4, sizeof r.tail);
        free(gg);
    } else {
        ampc_grad_scaler *gs;
        ampc_grad_scaler_params sp = ampc_grad_scaler_defaults();
        sp.init_scale = 4;
        ASSERT_OK(ampc_grad_scaler_new(ctx, &sp, &gs));
        bool stepped = true;
        ASSERT_OK(ampc_grad_scaler_step(gs, opt, &stepped));
        r.skipped = !stepped;
        ampc_grad_scaler_overflow ov;
        ASSERT_OK(ampc_grad_scaler_get_overflow(gs, &ov));
        snprintf(r.first_bad, sizeof r.first_bad, "%s", ov.first_tensor);
        ampc_grad_scaler_free(gs);
    }
    free(g);
    ampc_optim_free(opt);
    ampc_tensor_free(p), ampc_tensor_free(q);
    ampc_ctx_free(ctx);
    return r;
}

static void test_list_passes_threads(void **state) {
    (void)state;
    list_result one = list_passes(1, -1);
    /* the documented order: each piece's kernel sum, pieces added in order, then the small gradient */
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    float *g = malloc((size_t)BIG * sizeof *g);
    for (int64_t i = 0; i < BIG; i++) g[i] = 3.0f * (fmodf((float)i * 0.001f, 2.0f) - 1.0f);
    double big = 0;
    for (int64_t b = 0; b < BIG; b += AMPCI_GRAD_PIECE) {
        double part = k->sumsq[AMPC_DTYPE_F32](g + b, BIG - b < AMPCI_GRAD_PIECE ? BIG - b : AMPCI_GRAD_PIECE);
        big = b == 0 ? part : big + part;
    }
    float small[7];
    for (int i = 0; i < 7; i++) small[i] = 9.0f;
    double want = sqrt(big + k->sumsq[AMPC_DTYPE_F32](small, 7));
    free(g);
    if (one.norm != want) FAILF("norm %.17g, expected %.17g", one.norm, want);
    for (int threads = 2; threads <= 3; threads++) {
        list_result r = list_passes(threads, -1);
        assert_memory_equal(&r.norm, &one.norm, sizeof r.norm);
        assert_memory_equal(r.tail, one.tail, sizeof r.tail);
    }
    for (int threads = 1; threads <= 3; threads++) { /* an inf in the last piece only */
        list_result r = list_passes(threads, BIG - 3);
        assert_true(r.skipped);
        assert_string_equal(r.first_bad, "big");
    }
}

/* ---- broadcasting: rows on the threads, sums over broadcast dims by column blocks ---- */

enum { BA = 40, BB = 30, BC = 200 }; /* 240000 elements: many chunks */

/* z = x + y with x (BA, BB, BC) and y of shape ys (broadcast), loss = sum(z * c): z's values and y's
 * gradient at `threads`. */
static void broadcast_add(int threads, int ynd, const int64_t *ys, const float *x, const float *y, const float *c,
                          float *z, float *gy) {
    ampc_ctx *ctx = ctx_with(CPU, threads);
    ampc_tensor *xt = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_F32, SHAPE(BA, BB, BC), x, AMPC_DTYPE_F32);
    ampc_tensor *yt = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_F32, ynd, ys, y, AMPC_DTYPE_F32);
    ampc_tensor *ct = ampc_tensor_from_buffer(ctx, AMPC_DTYPE_F32, SHAPE(BA, BB, BC), c, AMPC_DTYPE_F32);
    ASSERT_OK(ampc_tensor_set_requires_grad(yt, true));
    ampc_tensor *zt = ampc_add(ctx, xt, yt);
    assert_non_null(zt);
    ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, ampc_mul(ctx, zt, ct), NULL, 0, false)));
    ASSERT_OK(ampc_tensor_copy_to(zt, z, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_to(ampc_tensor_grad(yt), gy, AMPC_DTYPE_F32));
    ampc_ctx_free(ctx);
}

static void test_broadcast_threads(void **state) {
    (void)state;
    enum { N = BA * BB * BC };
    float *x = malloc(N * sizeof *x), *c = malloc(N * sizeof *c), *z = malloc(N * sizeof *z), y[BB * BC], gy[BB * BC];
    uint64_t seed = 11;
    for (int i = 0; i < N; i++)
        x[i] = (float)(tu_rand(&seed) % 2001) - 1000,
        c[i] = ldexpf((float)(tu_rand(&seed) % 999) - 499, -(int)(i % 23));
    for (int i = 0; i < BB * BC; i++) y[i] = 0.5f * (float)(i % 97);
    /* y as (BB, BC) (a positional table), (BA, 1, BC) (a middle dim broadcast) and (BC) (a bias) */
    static const int64_t s2[] = {BB, BC}, s3[] = {BA, 1, BC}, s1[] = {BC};
    const struct {
        int nd;
        const int64_t *shape;
        int64_t n;
    } cases[] = {{2, s2, BB * BC}, {3, s3, BA * BC}, {1, s1, BC}};
    float *y3 = malloc(BA * BC * sizeof *y3), *g3 = malloc(BA * BC * sizeof *g3);
    for (int i = 0; i < BA * BC; i++) y3[i] = 0.25f * (float)(i % 89);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const float *yv = k == 1 ? y3 : y;
        float *g = k == 1 ? g3 : gy;
        double *want = calloc((size_t)cases[k].n, sizeof *want); /* the host loop: row-major order, in double */
        for (int a = 0; a < BA; a++)
            for (int b = 0; b < BB; b++)
                for (int e = 0; e < BC; e++) {
                    int i = (a * BB + b) * BC + e, o = k == 0 ? b * BC + e : k == 1 ? a * BC + e : e;
                    want[o] += c[i];
                }
        for (int threads = 1; threads <= 3; threads++) {
            broadcast_add(threads, cases[k].nd, cases[k].shape, x, yv, c, z, g);
            for (int a = 0; a < BA; a++)
                for (int b = 0; b < BB; b++)
                    for (int e = 0; e < BC; e++) {
                        int i = (a * BB + b) * BC + e, o = k == 0 ? b * BC + e : k == 1 ? a * BC + e : e;
                        if (z[i] != x[i] + yv[o]) FAILF("case %zu, %d threads: z[%d] %g", k, threads, i, z[i]);
                    }
            for (int64_t o = 0; o < cases[k].n; o++)
                if (tu_bits(g[o]) != tu_bits((float)want[o]))
                    FAILF("case %zu, %d threads: gradient %lld %.9g, expected %.9g", k, threads, (long long)o, g[o],
                          (float)want[o]);
        }
        free(want);
    }
    free(x), free(c), free(z), free(y3), free(g3);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rows), cmocka_unit_test(test_col_sum_threads),
                                       cmocka_unit_test(test_list_passes_threads),
                                       cmocka_unit_test(test_broadcast_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
