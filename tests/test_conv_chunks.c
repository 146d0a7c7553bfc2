/* test_conv_chunks.c: conv2d and max_pool2d as the ops cut their work, which must never show in a bit.
 * conv2d runs a batch a chunk of images at a time (the column matrix of a chunk is kept in cache; a GEMM
 * per chunk): over images too large to share a chunk its output and input gradient equal conv2d's image
 * by image, byte for byte. max_pool2d stages 16-bit planes through the F32 kernels: its output and input
 * gradient equal the F32 op's on the same values, rounded once. F32, F16 and BF16, at 1 and 2 threads. */
#include "test_util.h"

#include <stdlib.h>

static const ampc_dtype DTYPES[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};

/* A leaf of dtype dt holding n values of src (in src_dt), requiring grad. */
static ampc_tensor *leaf(ampc_ctx *ctx, ampc_dtype dt, int nd, const int64_t *shape, const void *src,
                         ampc_dtype src_dt) {
    ampc_tensor *t = ampc_tensor_from_buffer(ctx, dt, nd, shape, src, src_dt);
    assert_non_null(t);
    ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    return t;
}

/* t's bytes (nbytes) in a malloc'd buffer, in dt. */
static unsigned char *bytes_of(const ampc_tensor *t, ampc_dtype dt, size_t nbytes) {
    unsigned char *b = malloc(nbytes);
    ASSERT_OK(ampc_tensor_copy_to(t, b, dt));
    return b;
}

/* 3 images of 16 x 64 x 64 with a 3 x 3 kernel: 4096 x 144 column rows per image, over 1 MiB in every
 * dtype, so each chunk holds one image. */
static void conv_case(ampc_ctx *ctx, ampc_dtype dt) {
    enum { N = 3, C = 16, H = 64, O = 8 };
    size_t es = ampc_dtype_size(dt), img = (size_t)C * H * H, out = (size_t)O * H * H;
    ampc_tensor *xs = ampc_tensor_uniform(ctx, dt, 4, (int64_t[]){N, C, H, H}, -1, 1);
    ampc_tensor *w = ampc_tensor_uniform(ctx, dt, 4, (int64_t[]){O, C, 3, 3}, -0.2, 0.2);
    ampc_tensor *b = ampc_tensor_uniform(ctx, dt, 1, (int64_t[]){O}, -1, 1);
    ampc_tensor *gy = ampc_tensor_uniform(ctx, dt, 4, (int64_t[]){N, O, H, H}, -1, 1);
    unsigned char *xv = bytes_of(xs, dt, N * img * es), *gv = bytes_of(gy, dt, N * out * es);
    ampc_conv2d_params p = {.pad_h = 1, .pad_w = 1};
    ampc_tensor *x = leaf(ctx, dt, 4, (int64_t[]){N, C, H, H}, xv, dt), *y = ampc_conv2d(ctx, x, w, b, &p);
    assert_non_null(y);
    ASSERT_OK(ampc_backward_with(ctx, y, gy));
    unsigned char *yb = bytes_of(y, dt, N * out * es), *gxb = bytes_of(ampc_tensor_grad(x), dt, N * img * es);
    for (int n = 0; n < N; n++) {
        ampc_tensor *x1 = leaf(ctx, dt, 4, (int64_t[]){1, C, H, H}, xv + n * img * es, dt);
        ampc_tensor *y1 = ampc_conv2d(ctx, x1, w, b, &p);
        ampc_tensor *g1 = ampc_tensor_from_buffer(ctx, dt, 4, (int64_t[]){1, O, H, H}, gv + n * out * es, dt);
        ASSERT_OK(ampc_backward_with(ctx, y1, g1));
        unsigned char *y1b = bytes_of(y1, dt, out * es), *gx1 = bytes_of(ampc_tensor_grad(x1), dt, img * es);
        if (memcmp(y1b, yb + n * out * es, out * es)) FAILF("%s: conv2d output of image %d", ampc_dtype_name(dt), n);
        if (memcmp(gx1, gxb + n * img * es, img * es))
            FAILF("%s: conv2d input gradient of image %d", ampc_dtype_name(dt), n);
        free(y1b), free(gx1);
    }
    free(xv), free(gv), free(yb), free(gxb);
    ampc_ctx_step_end(ctx);
}

/* 2 x 5 planes of 40 x 40 (staged 2 planes at a time), 2 x 2 windows with stride 2. */
static void pool_case(ampc_ctx *ctx, ampc_dtype dt) {
    enum { N = 2, C = 5, H = 40, OH = 20 };
    size_t nx = (size_t)N * C * H * H, ny = (size_t)N * C * OH * OH, es = ampc_dtype_size(dt);
    ampc_tensor *xs = ampc_tensor_uniform(ctx, dt, 4, (int64_t[]){N, C, H, H}, -1, 1);
    ampc_tensor *gs = ampc_tensor_uniform(ctx, dt, 4, (int64_t[]){N, C, OH, OH}, -1, 1);
    float *xv = malloc(nx * 4), *gv = malloc(ny * 4);
    ASSERT_OK(ampc_tensor_copy_to(xs, xv, AMPC_DTYPE_F32));
    ASSERT_OK(ampc_tensor_copy_to(gs, gv, AMPC_DTYPE_F32));
    ampc_pool2d_params p = {.kernel_h = 2, .kernel_w = 2};
    ampc_tensor *x = leaf(ctx, dt, 4, (int64_t[]){N, C, H, H}, xv, AMPC_DTYPE_F32);
    ampc_tensor *xf = leaf(ctx, AMPC_DTYPE_F32, 4, (int64_t[]){N, C, H, H}, xv, AMPC_DTYPE_F32);
    ampc_tensor *y = ampc_max_pool2d(ctx, x, &p), *yf = ampc_max_pool2d(ctx, xf, &p);
    assert_non_null(y), assert_non_null(yf);
    ASSERT_OK(ampc_backward_with(ctx, y, gs));
    ASSERT_OK(ampc_backward_with(
        ctx, yf, ampc_tensor_from_buffer(ctx, AMPC_DTYPE_F32, 4, (int64_t[]){N, C, OH, OH}, gv, AMPC_DTYPE_F32)));
    /* the F32 results rounded to dt, against the 16-bit op's */
    unsigned char *a = bytes_of(y, dt, ny * es), *r = bytes_of(yf, dt, ny * es);
    if (memcmp(a, r, ny * es)) FAILF("%s: max_pool2d output", ampc_dtype_name(dt));
    free(a), free(r);
    a = bytes_of(ampc_tensor_grad(x), dt, nx * es), r = bytes_of(ampc_tensor_grad(xf), dt, nx * es);
    if (memcmp(a, r, nx * es)) FAILF("%s: max_pool2d input gradient", ampc_dtype_name(dt));
    free(a), free(r), free(xv), free(gv);
    ampc_ctx_step_end(ctx);
}

static void run_all(void (*fn)(ampc_ctx *, ampc_dtype)) {
    for (int threads = 1; threads <= 2; threads++) {
        ampc_ctx *ctx;
        ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 7, .threads = threads}, &ctx));
        for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++) fn(ctx, DTYPES[d]);
        ampc_ctx_free(ctx);
    }
}

static void test_conv_chunks(void **state) {
    (void)state;
    run_all(conv_case);
}

static void test_pool_staged(void **state) {
    (void)state;
    run_all(pool_case);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_conv_chunks), cmocka_unit_test(test_pool_staged)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
