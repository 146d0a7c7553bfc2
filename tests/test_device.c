/* test_device.c: devices and the seam around them. The device calls with wrong input (unknown device,
 * index out of range, a kind this build lacks, copies of mismatched sizes) give a clear status; tensors
 * move between a CPU and a guard context bit for bit in both directions; memory and synchronisation points
 * are counted per device; the guard device really faults when the host touches its memory (in a child
 * process) and the CPU does not; the floors' listener lists take several subscribers, in order, and lose
 * none when one is removed. */
#include "test_util.h"

#include "autograd/autograd.h" /* internal: the listener lists */
#include "tensor/tensor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static const ampc_device CPU = {AMPC_DEVICE_CPU, 0}, GUARD = {AMPC_DEVICE_GUARD, 0};

static ampc_ctx *ctx_on(ampc_device d) {
    ampc_ctx *ctx = NULL;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 3, .threads = 2, .device = d}, &ctx));
    return ctx;
}

/* ---- parsing and queries ---- */

static void expect_parse(const char *text, ampc_status want, const char *mention) {
    ampc_device d = {AMPC_DEVICE_KIND_COUNT, -1};
    ampc_status s = ampc_device_parse(text, &d);
    if (s != want) FAILF("ampc_device_parse(\"%s\") -> %s, expected %s (%s)", text, ampc_status_str(s),
                         ampc_status_str(want), ampc_last_error());
    if (mention && !strstr(ampc_last_error(), mention))
        FAILF("ampc_device_parse(\"%s\"): message \"%s\" does not mention \"%s\"", text, ampc_last_error(), mention);
}

static void test_parse(void **state) {
    (void)state;
    ampc_device d;
    ASSERT_OK(ampc_device_parse("cpu", &d));
    assert_int_equal(d.kind, AMPC_DEVICE_CPU), assert_int_equal(d.index, 0);
    ASSERT_OK(ampc_device_parse("guard", &d));
    assert_int_equal(d.kind, AMPC_DEVICE_GUARD);
    expect_parse("gpu", AMPC_STATUS_INVALID_ARG, "cpu, cuda, cuda:N or guard");
    expect_parse("", AMPC_STATUS_INVALID_ARG, "unknown device");
    expect_parse("cpu:1", AMPC_STATUS_INVALID_ARG, "only cuda takes an index");
    expect_parse("cuda:x", AMPC_STATUS_INVALID_ARG, "index");
    expect_parse("cuda:", AMPC_STATUS_INVALID_ARG, "index");
    expect_parse("cuda:-1", AMPC_STATUS_INVALID_ARG, "index");
    /* this build has no CUDA: the kind is known but refused, whatever the index */
    expect_parse("cuda", AMPC_STATUS_UNSUPPORTED, "no cuda support");
    expect_parse("cuda:3", AMPC_STATUS_UNSUPPORTED, "no cuda support");
    assert_int_equal(ampc_device_parse(NULL, &d), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_device_parse("cpu", NULL), AMPC_STATUS_INVALID_ARG);
}

static void test_info(void **state) {
    (void)state;
    assert_int_equal(ampc_device_count(AMPC_DEVICE_CPU), 1);
    assert_int_equal(ampc_device_count(AMPC_DEVICE_GUARD), 1);
    assert_int_equal(ampc_device_count(AMPC_DEVICE_CUDA), 0);
    assert_int_equal(ampc_device_count((ampc_device_kind)99), 0);
    ampc_device_info info;
    ASSERT_OK(ampc_device_get_info(CPU, &info));
    assert_true(info.built && info.present && info.host_memory && info.units >= 1 && info.total_memory > 0);
    assert_string_equal(info.name, "cpu");
    ASSERT_OK(ampc_device_get_info(GUARD, &info));
    assert_true(info.present && !info.host_memory);
    assert_int_equal(ampc_device_get_info((ampc_device){AMPC_DEVICE_CUDA, 0}, &info), AMPC_STATUS_UNSUPPORTED);
    assert_true(!info.built && !info.present);
    assert_string_equal(info.name, "cuda:0");
    assert_int_equal(ampc_device_get_info((ampc_device){AMPC_DEVICE_CPU, 1}, &info), AMPC_STATUS_UNSUPPORTED);
    assert_true(info.built && !info.present);
    assert_int_equal(ampc_device_get_info((ampc_device){(ampc_device_kind)7, 0}, &info), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_device_get_info((ampc_device){AMPC_DEVICE_CPU, -1}, &info), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_device_get_info(CPU, NULL), AMPC_STATUS_INVALID_ARG);
    char buf[16];
    assert_string_equal(ampc_device_name((ampc_device){AMPC_DEVICE_CUDA, 2}, buf, sizeof buf), "cuda:2");
    assert_string_equal(ampc_device_kind_name(AMPC_DEVICE_GUARD), "guard");
    assert_string_equal(ampc_device_kind_name((ampc_device_kind)99), "?");
}

static void test_ctx_refuses_absent_devices(void **state) {
    (void)state;
    ampc_ctx *ctx = (ampc_ctx *)1;
    assert_int_equal(ampc_ctx_new(&(ampc_ctx_params){.device = {AMPC_DEVICE_CUDA, 0}}, &ctx), AMPC_STATUS_UNSUPPORTED);
    assert_null(ctx);
    ASSERT_ERROR_MENTIONS("ampc_ctx_new", "cuda:0", "not built");
    assert_int_equal(ampc_ctx_new(&(ampc_ctx_params){.device = {(ampc_device_kind)9, 0}}, &ctx),
                     AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_ctx_new(&(ampc_ctx_params){.device = {AMPC_DEVICE_GUARD, 1}}, &ctx), AMPC_STATUS_UNSUPPORTED);
    ASSERT_ERROR_MENTIONS("guard", "not present");
    ctx = ctx_on(GUARD);
    assert_int_equal(ampc_ctx_device(ctx).kind, AMPC_DEVICE_GUARD);
    ampc_ctx_free(ctx);
    assert_int_equal(ampc_ctx_device(NULL).kind, AMPC_DEVICE_CPU);
}

/* ---- copies between devices ---- */

static void test_copy_between_devices(void **state) {
    (void)state;
    ampc_ctx *c = ctx_on(CPU), *g = ctx_on(GUARD);
    int64_t shape[2] = {37, 5}, tshape[2] = {5, 37};
    float v[185], back[185];
    for (int i = 0; i < 185; i++) v[i] = (float)(i * 0.37 - 20.0);
    ampc_tensor *a = ampc_tensor_from_buffer(c, AMPC_DTYPE_F32, 2, shape, v, AMPC_DTYPE_F32);
    ampc_tensor *b = ampc_tensor_new(g, AMPC_DTYPE_BF16, 2, shape);
    assert_non_null(a), assert_non_null(b);
    ASSERT_OK(ampc_tensor_copy(b, a)); /* cpu F32 -> guard BF16: rounded once */
    ASSERT_OK(ampc_tensor_copy_to(b, back, AMPC_DTYPE_F32));
    for (int i = 0; i < 185; i++) assert_true(back[i] == ampc_bf16_to_f32(ampc_bf16_from_f32(v[i])));
    /* guard -> cpu through a transposed view on the guard side */
    ampc_tensor *bt = ampc_tensor_transpose(b, 0, 1), *ct = ampc_tensor_new(c, AMPC_DTYPE_F32, 2, tshape);
    ASSERT_OK(ampc_tensor_copy(ct, bt));
    float *cd = ampc_tensor_data(ct); /* a CPU tensor: host memory */
    for (int r = 0; r < 5; r++)
        for (int k = 0; k < 37; k++) assert_true(cd[r * 37 + k] == back[k * 5 + r]);
    /* within one guard context */
    ampc_tensor *b2 = ampc_tensor_new(g, AMPC_DTYPE_F32, 2, tshape);
    ASSERT_OK(ampc_tensor_copy(b2, bt));
    float out[185];
    ASSERT_OK(ampc_tensor_copy_to(b2, out, AMPC_DTYPE_F32));
    assert_memory_equal(out, cd, sizeof out);
    /* wrong input */
    int64_t other[1] = {184};
    ampc_tensor *short_t = ampc_tensor_new(g, AMPC_DTYPE_F32, 1, other);
    assert_int_equal(ampc_tensor_copy(short_t, a), AMPC_STATUS_SHAPE);
    ASSERT_ERROR_MENTIONS("ampc_tensor_copy", "[184]", "[37, 5]", "different numbers of elements");
    assert_int_equal(ampc_tensor_copy(NULL, a), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_tensor_copy(b, NULL), AMPC_STATUS_INVALID_ARG);
    ampc_tensor_free(a), ampc_tensor_free(b), ampc_tensor_free(ct), ampc_tensor_free(b2), ampc_tensor_free(short_t);
    ampc_ctx_free(c), ampc_ctx_free(g);
}

/* ---- memory and synchronisation points ---- */

static void test_memory_and_syncs(void **state) {
    (void)state;
    ampc_ctx *c = ctx_on(CPU), *g = ctx_on(GUARD);
    int64_t shape[1] = {1 << 16};
    ampc_tensor *tc = ampc_tensor_new(c, AMPC_DTYPE_F32, 1, shape), *tg = ampc_tensor_new(g, AMPC_DTYPE_F32, 1, shape);
    ampc_memory_usage mc, mg;
    ASSERT_OK(ampc_memory_stats(c, &mc));
    ASSERT_OK(ampc_memory_stats(g, &mg));
    assert_true(mc.device_live_bytes == mc.live_bytes && mc.device_peak_bytes == mc.peak_bytes);
    assert_true(mg.device_live_bytes >= (size_t)4 << 16 && mg.live_bytes < mg.device_live_bytes);
    ampc_tensor_free(tg);
    ASSERT_OK(ampc_memory_stats(g, &mg));
    assert_true(mg.device_live_bytes < (size_t)4 << 16 && mg.device_peak_bytes >= (size_t)4 << 16);
    /* copies to the host and anomaly checks are counted, alike on both devices */
    for (int k = 0; k < 2; k++) {
        ampc_ctx *ctx = k ? g : c;
        uint64_t before[AMPC_SYNC_POINT_COUNT], after[AMPC_SYNC_POINT_COUNT];
        ASSERT_OK(ampc_ctx_sync_counts(ctx, before));
        ampc_tensor *x = ampc_tensor_full(ctx, AMPC_DTYPE_F32, 1, shape, 2.0);
        float one;
        ampc_tensor *s = ampc_sum(ctx, x, NULL, 0, false);
        ASSERT_OK(ampc_tensor_copy_to(s, &one, AMPC_DTYPE_F32));
        assert_true(one == 131072.0f);
        ampc_autograd_set_detect_anomaly(ctx, true);
        assert_non_null(ampc_exp(ctx, x));
        ampc_autograd_set_detect_anomaly(ctx, false);
        ASSERT_OK(ampc_ctx_sync_counts(ctx, after));
        assert_int_equal(after[AMPC_SYNC_READ] - before[AMPC_SYNC_READ], 1);
        assert_int_equal(after[AMPC_SYNC_ANOMALY] - before[AMPC_SYNC_ANOMALY], 1);
        assert_int_equal(after[AMPC_SYNC_FOUND_INF], before[AMPC_SYNC_FOUND_INF]);
        ampc_ctx_step_end(ctx);
    }
    assert_int_equal(ampc_ctx_sync_counts(NULL, (uint64_t[AMPC_SYNC_POINT_COUNT]){0}), AMPC_STATUS_INVALID_ARG);
    assert_string_equal(ampc_sync_point_name(AMPC_SYNC_FOUND_INF), "found_inf");
    assert_string_equal(ampc_sync_point_name(AMPC_SYNC_POINT_COUNT), "?");
    ampc_tensor_free(tc);
    ampc_ctx_free(c), ampc_ctx_free(g);
}

/* ---- matrix-product FLOPs ---- */

/* A leaf of N(0, 1) values in ctx that requires grad when grad. */
static ampc_tensor *leaf(ampc_ctx *ctx, bool grad, int nd, const int64_t *shape) {
    ampc_tensor *t = tu_normal(ctx, AMPC_DTYPE_F32, nd, shape);
    if (grad) ASSERT_OK(ampc_tensor_set_requires_grad(t, true));
    return t;
}

/* The FLOPs counted since *mark, which moves on. */
static uint64_t flops_since(const ampc_ctx *ctx, uint64_t *mark) {
    uint64_t now = ampc_ctx_matmul_flops(ctx), d = now - *mark;
    *mark = now;
    return d;
}

static void expect_flops(const ampc_ctx *ctx, uint64_t *mark, uint64_t want, const char *what) {
    uint64_t got = flops_since(ctx, mark);
    if (got != want)
        FAILF("%s: %llu matmul FLOPs counted, expected %llu", what, (unsigned long long)got, (unsigned long long)want);
}

/* Causal attention of q (1, 2, tq, 4), k and v (1, 2, tk, 4), forward and backward: pairs (query, key)
 * pairs with key j <= query i. */
static void attention_flops(ampc_ctx *ctx, uint64_t *mark, int64_t tq, int64_t tk, uint64_t pairs) {
    ampc_tensor *q = leaf(ctx, true, SHAPE(1, 2, tq, 4)), *k = leaf(ctx, true, SHAPE(1, 2, tk, 4)),
                *v = leaf(ctx, true, SHAPE(1, 2, tk, 4));
    flops_since(ctx, mark);
    ampc_tensor *o = ampc_attention(ctx, q, k, v, true);
    assert_non_null(o);
    char what[64];
    snprintf(what, sizeof what, "causal attention, Tq %lld, Tk %lld", (long long)tq, (long long)tk);
    expect_flops(ctx, mark, 2 * 2 * pairs * (4 + 4), what); /* 2 BH pairs (D + Dv) */
    ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, o, NULL, 0, false)));
    expect_flops(ctx, mark, 2 * 2 * 2 * pairs * (4 + 4), "its backward (twice the forward)");
}

/* ampc_ctx_matmul_flops counts each matrix product's FLOPs from its shapes, once it ran, the same on every
 * device: GEMMs 2 M N K per batch, convolutions 2 N O OH OW C KH KW per product (forward, gx, gw),
 * attention 2 BH pairs (D + Dv) with the causal mask's pairs aligned as the kernels align it, its backward
 * twice that; element-wise ops and reductions nothing. */
static void test_matmul_flops(void **state) {
    (void)state;
    assert_true(ampc_ctx_matmul_flops(NULL) == 0);
    for (int dev = 0; dev < 2; dev++) {
        ampc_ctx *ctx = ctx_on(dev ? GUARD : CPU);
        assert_true(ampc_ctx_matmul_flops(ctx) == 0);
        uint64_t mark = 0;
        /* linear: x (4, 8), w (3, 8): 2 * 4 * 3 * 8 forward; backward gx and gw, one GEMM each */
        ampc_tensor *x = leaf(ctx, true, SHAPE(4, 8)), *w = leaf(ctx, true, SHAPE(3, 8)),
                    *b = leaf(ctx, true, SHAPE(3));
        flops_since(ctx, &mark);
        ampc_tensor *y = ampc_linear(ctx, x, w, NULL);
        assert_non_null(y);
        expect_flops(ctx, &mark, 2 * 4 * 3 * 8, "linear (4, 8) x (3, 8)^T");
        ampc_tensor *s = ampc_sum(ctx, y, NULL, 0, false);
        expect_flops(ctx, &mark, 0, "sum");
        ASSERT_OK(ampc_backward(ctx, s));
        expect_flops(ctx, &mark, 2 * (2 * 4 * 3 * 8), "linear's backward (gx and gw)");
        /* only the gradients wanted: x without grad, a bias (a column sum, no product) */
        ampc_tensor *xn = leaf(ctx, false, SHAPE(4, 8));
        flops_since(ctx, &mark);
        y = ampc_linear(ctx, xn, w, b);
        expect_flops(ctx, &mark, 2 * 4 * 3 * 8, "linear with a bias");
        ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, y, NULL, 0, false)));
        expect_flops(ctx, &mark, 2 * 4 * 3 * 8, "linear's backward (gw only)");
        /* a batched matmul with a broadcast operand: (2, 3, 4, 5) x (5, 6), 6 batches */
        ampc_tensor *a = leaf(ctx, true, SHAPE(2, 3, 4, 5)), *m = leaf(ctx, true, SHAPE(5, 6));
        flops_since(ctx, &mark);
        y = ampc_matmul(ctx, a, m, 0);
        assert_non_null(y);
        expect_flops(ctx, &mark, 6 * (2 * 4 * 6 * 5), "batched matmul");
        ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, y, NULL, 0, false)));
        expect_flops(ctx, &mark, 2 * 6 * (2 * 4 * 6 * 5), "batched matmul's backward");
        /* a failed op counts nothing */
        assert_null(ampc_linear(ctx, x, m, NULL));
        expect_flops(ctx, &mark, 0, "a refused linear");
        /* causal attention: the pairs with key j <= query i (key 0 aligned with query 0) */
        attention_flops(ctx, &mark, 5, 5, 15); /* 2 * 2 * 15 * 8 forward */
        attention_flops(ctx, &mark, 3, 5, 1 + 2 + 3);
        attention_flops(ctx, &mark, 5, 3, 1 + 2 + 3 + 3 + 3);
        ampc_tensor *q = leaf(ctx, false, SHAPE(1, 2, 3, 4)), *k = leaf(ctx, false, SHAPE(1, 2, 5, 4)),
                    *v = leaf(ctx, false, SHAPE(1, 2, 5, 6));
        flops_since(ctx, &mark);
        assert_non_null(ampc_attention(ctx, q, k, v, false));
        expect_flops(ctx, &mark, 2 * 2 * (3 * 5) * (4 + 6), "attention without a mask, Dv 6");
        /* conv2d: x (2, 3, 6, 6), w (4, 3, 3, 3), stride 2, pad 1: OH = OW = 3 */
        ampc_tensor *cx = leaf(ctx, true, SHAPE(2, 3, 6, 6)), *cw = leaf(ctx, true, SHAPE(4, 3, 3, 3)),
                    *cb = leaf(ctx, true, SHAPE(4));
        const uint64_t conv = 2 * 2 * 4 * 3 * 3 * 3 * 3 * 3;
        flops_since(ctx, &mark);
        y = ampc_conv2d(ctx, cx, cw, cb, &(ampc_conv2d_params){.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1});
        assert_non_null(y);
        expect_flops(ctx, &mark, conv, "conv2d");
        ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, y, NULL, 0, false)));
        expect_flops(ctx, &mark, 2 * conv, "conv2d's backward (gx and gw; the bias adds nothing)");
        ASSERT_OK(ampc_tensor_set_requires_grad(cx, false));
        y = ampc_conv2d(ctx, cx, cw, NULL, NULL); /* stride 1, no padding: OH = OW = 4 */
        expect_flops(ctx, &mark, 2 * 2 * 4 * 4 * 4 * 3 * 3 * 3, "conv2d, stride 1");
        ASSERT_OK(ampc_backward(ctx, ampc_sum(ctx, y, NULL, 0, false)));
        expect_flops(ctx, &mark, 2 * 2 * 4 * 4 * 4 * 3 * 3 * 3, "conv2d's backward (gw only)");
        /* under BF16 autocast the products count alike */
        ASSERT_OK(ampc_autocast_begin(ctx, NULL));
        y = ampc_linear(ctx, x, w, NULL);
        ASSERT_OK(ampc_autocast_end(ctx));
        assert_non_null(y);
        expect_flops(ctx, &mark, 2 * 4 * 3 * 8, "linear under BF16 autocast");
        ampc_ctx_step_end(ctx);
        ampc_ctx_free(ctx);
    }
}

/* ---- the guard faults ---- */

/* Reads the first element of a fresh tensor on device d in a child process; returns how the child ended
 * (the signal that killed it, or 0 for a normal exit). */
static int touch_in_child(ampc_device d, bool write) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* cmocka's handler would turn the fault into a test failure in the child */
        ampc_ctx *ctx;
        if (ampc_ctx_new(&(ampc_ctx_params){.threads = 1, .device = d}, &ctx) != AMPC_OK) _exit(3);
        int64_t shape[1] = {8};
        ampc_tensor *t = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, shape);
        volatile float *p = ampc_tensor_data(t);
        if (write) p[0] = 1.0f;
        else if (p[0] != 0.0f) _exit(4);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) return WTERMSIG(status);
    assert_int_equal(WEXITSTATUS(status), 0);
    return 0;
}

static void test_guard_faults(void **state) {
    (void)state;
    assert_int_equal(touch_in_child(CPU, false), 0);
    assert_int_equal(touch_in_child(CPU, true), 0);
    assert_int_equal(touch_in_child(GUARD, false), SIGSEGV);
    assert_int_equal(touch_in_child(GUARD, true), SIGSEGV);
}

/* ---- listener lists ---- */

static int g_calls[3], g_order[16], g_norder;

static void ready_a(void *arg, ampc_tensor *leaf) {
    (void)arg;
    if (leaf) g_calls[0]++, g_order[g_norder++ & 15] = 0;
}
static void ready_b(void *arg, ampc_tensor *leaf) {
    if (leaf) g_calls[1]++, g_order[g_norder++ & 15] = 1;
    assert_ptr_equal(arg, &g_calls[1]);
}
static void freed(void *arg, const ampc_tensor *t) {
    (void)t;
    (*(int *)arg)++;
}

/* One backward of sum(w * 2) on a leaf w. */
static void one_backward(ampc_ctx *ctx, ampc_tensor *w) {
    ampc_tensor *y = ampc_sum(ctx, ampc_mul_scalar(ctx, w, 2.0), NULL, 0, false);
    ASSERT_OK(ampc_backward(ctx, y));
    ampc_ctx_step_end(ctx);
}

static void test_listeners(void **state) {
    (void)state;
    ampc_ctx *ctx = ctx_on(CPU);
    int64_t shape[1] = {4};
    ampc_tensor *w = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, shape);
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ASSERT_OK(ampci_autograd_on_grad_ready(ctx, ready_a, NULL));
    ASSERT_OK(ampci_autograd_on_grad_ready(ctx, ready_b, &g_calls[1]));
    one_backward(ctx, w);
    assert_int_equal(g_calls[0], 1), assert_int_equal(g_calls[1], 1);
    assert_int_equal(g_order[0], 0), assert_int_equal(g_order[1], 1); /* in the order they were added */
    /* the same pair twice is refused, a NULL function too; a full list says so */
    assert_int_equal(ampci_autograd_on_grad_ready(ctx, ready_a, NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("grad-ready listener", "already subscribed");
    assert_int_equal(ampci_autograd_on_grad_ready(ctx, NULL, NULL), AMPC_STATUS_INVALID_ARG);
    int args[8];
    for (int i = 2; i < 8; i++) ASSERT_OK(ampci_autograd_on_grad_ready(ctx, ready_a, &args[i]));
    assert_int_equal(ampci_autograd_on_grad_ready(ctx, ready_a, &args[0]), AMPC_STATUS_STATE);
    for (int i = 2; i < 8; i++) assert_true(ampci_autograd_off_grad_ready(ctx, ready_a, &args[i]));
    /* removing one leaves the other */
    assert_true(ampci_autograd_off_grad_ready(ctx, ready_a, NULL));
    assert_false(ampci_autograd_off_grad_ready(ctx, ready_a, NULL));
    one_backward(ctx, w);
    assert_int_equal(g_calls[0], 1), assert_int_equal(g_calls[1], 2);
    assert_true(ampci_autograd_off_grad_ready(ctx, ready_b, &g_calls[1]));
    one_backward(ctx, w);
    assert_int_equal(g_calls[1], 2);
    /* the tensor floor's free event: two subscribers both hear it, a removed one no more */
    int n1 = 0, n2 = 0;
    ASSERT_OK(ampci_tensor_on_free(ctx, freed, &n1));
    ASSERT_OK(ampci_tensor_on_free(ctx, freed, &n2));
    ampc_tensor_free(ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, shape));
    assert_int_equal(n1, 1), assert_int_equal(n2, 1);
    assert_true(ampci_tensor_off_free(ctx, freed, &n1));
    ampc_tensor_free(w); /* w and its owned gradient */
    assert_int_equal(n1, 1), assert_int_equal(n2, 3);
    assert_true(ampci_tensor_off_free(ctx, freed, &n2));
    ampc_ctx_free(ctx);
}

static int g_seen[2];
static void seen(void *arg, const ampci_node *n, const ampc_tensor *t, const ampc_tensor *g) {
    (void)n, (void)t, (void)g;
    (*(int *)arg)++;
}

/* absent: the first listener is not the storage's owner (leaves it absent), the second gathers it */
static int g_absent_calls[2];
static ampc_status not_mine(void *arg, ampci_storage *st) {
    (void)arg, (void)st;
    g_absent_calls[0]++;
    return AMPC_OK;
}
static ampc_status gather(void *arg, ampci_storage *st) {
    (void)arg;
    g_absent_calls[1]++;
    st->absent = false;
    return AMPC_OK;
}

static void test_listeners_seen_and_absent(void **state) {
    (void)state;
    ampc_ctx *ctx = ctx_on(CPU);
    int64_t shape[1] = {4};
    ampc_tensor *w = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 1, shape);
    ASSERT_OK(ampc_tensor_set_requires_grad(w, true));
    ASSERT_OK(ampci_autograd_on_grad_seen(ctx, seen, &g_seen[0]));
    ASSERT_OK(ampci_autograd_on_grad_seen(ctx, seen, &g_seen[1]));
    one_backward(ctx, w); /* the leaf's contribution is seen by both */
    assert_int_equal(g_seen[0], 1), assert_int_equal(g_seen[1], 1);
    assert_true(ampci_autograd_off_grad_seen(ctx, seen, &g_seen[0]));
    one_backward(ctx, w);
    assert_int_equal(g_seen[0], 1), assert_int_equal(g_seen[1], 2);
    assert_true(ampci_autograd_off_grad_seen(ctx, seen, &g_seen[1]));
    /* an absent storage with nobody to gather it is refused by name; then two listeners run in turn */
    ASSERT_OK(ampc_tensor_set_name(w, "w"));
    w->storage->absent = true;
    assert_null(ampc_exp(ctx, w));
    ASSERT_ERROR_MENTIONS("w", "absent", "nothing gathered it");
    ASSERT_OK(ampci_tensor_on_absent(ctx, not_mine, NULL));
    ASSERT_OK(ampci_tensor_on_absent(ctx, gather, NULL));
    assert_non_null(ampc_exp(ctx, w));
    assert_int_equal(g_absent_calls[0], 1), assert_int_equal(g_absent_calls[1], 1);
    assert_non_null(ampc_exp(ctx, w)); /* present now: nobody is asked */
    assert_int_equal(g_absent_calls[0], 1);
    assert_true(ampci_tensor_off_absent(ctx, gather, NULL));
    w->storage->absent = true;
    assert_null(ampc_exp(ctx, w)); /* the remaining listener does not gather it */
    assert_int_equal(g_absent_calls[0], 2);
    w->storage->absent = false;
    assert_true(ampci_tensor_off_absent(ctx, not_mine, NULL));
    ampc_tensor_free(w);
    ampc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_ctx_refuses_absent_devices),
        cmocka_unit_test(test_copy_between_devices),
        cmocka_unit_test(test_memory_and_syncs),
        cmocka_unit_test(test_matmul_flops),
        cmocka_unit_test(test_guard_faults),
        cmocka_unit_test(test_listeners),
        cmocka_unit_test(test_listeners_seen_and_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
