/* test_dist.c: the communication layer of data parallelism (src/dist) under mpirun (tests/dist_api.cmake: 2
 * ranks, and 3 for the cases that depend on the world size). It checks broadcast and all-reduce against values
 * computed here (16-bit sums bit for bit against one RNE rounding of the F32 sum), argument and dtype errors,
 * agreement on a status, the barrier, the timeout of a collective a rank never joins, and attach (argument
 * checks; rank 0's parameters win). Training over it is test_dist_train.c; the harness both share (agreement,
 * rank-aware log and exit status) is dist_test_util.h. */
#include "dist_test_util.h"

#include <time.h>

/* ---- 1. collectives, agreement, barrier, timeout ---- */

static void test_broadcast_every_dtype(void **state) {
    (void)state;
    enum { N = 37 };
    bool ok = true;
    for (int root = 0; root < 2; root++)
        for (int dt = 0; dt < AMPC_DTYPE_COUNT; dt++) {
            size_t bytes = N * ampc_dtype_size(dt);
            unsigned char buf[N * 8], want[N * 8];
            for (size_t i = 0; i < bytes; i++)
                want[i] = (unsigned char)(i * 31 + dt * 7 + root), buf[i] = g_rank == root ? want[i] : 0xA5;
            ASSERT_OK(ampc_dist_broadcast(g_d, buf, N, (ampc_dtype)dt, root));
            if (memcmp(buf, want, bytes))
                ok = false, print_error("broadcast %s from %d differs\n", ampc_dtype_name(dt), root);
        }
    AGREE(ok, "a broadcast did not deliver the root's bytes");
}

/* Rank r's i-th value of each dtype: F32/F64 sums stay exact (multiples of 1/8 below 2^17, of 2^17 below
 * 2^40), I64 values beyond 2^53 so a detour through double would show. */
static float f32_of(int r, int i) { return (float)(int)(val((uint32_t)i, (uint32_t)r) * 1e6f) / 8; }
static double f64_of(int r, int i) { return val((uint32_t)i, 100u + (uint32_t)r) * 0x1p40; }
static int64_t i64_of(int r, int i) {
    return (int64_t)(val((uint32_t)i, 200u + (uint32_t)r) * 1e6) * ((int64_t)1 << 36) + r + i;
}
static double combine(int op, double a, double b) { return op ? op == AMPC_DIST_MAX ? fmax(a, b) : fmin(a, b) : a + b; }
static int64_t combine_i(int op, int64_t a, int64_t b) { return op ? (op == AMPC_DIST_MAX) == (a > b) ? a : b : a + b; }

static void test_allreduce_f32_f64_i64(void **state) {
    (void)state;
    enum { N = 50 };
    bool ok = true;
    for (int op = AMPC_DIST_SUM; op <= AMPC_DIST_MIN; op++) {
        float f[N], fw[N];
        double d[N], dw[N];
        int64_t q[N], qw[N];
        for (int i = 0; i < N; i++) {
            f[i] = f32_of(g_rank, i), d[i] = f64_of(g_rank, i), q[i] = i64_of(g_rank, i);
            fw[i] = f32_of(0, i), dw[i] = f64_of(0, i), qw[i] = i64_of(0, i);
            for (int r = 1; r < g_size; r++)
                fw[i] = (float)combine(op, fw[i], f32_of(r, i)), dw[i] = combine(op, dw[i], f64_of(r, i)),
                qw[i] = combine_i(op, qw[i], i64_of(r, i));
        }
        ASSERT_OK(ampc_dist_allreduce(g_d, f, N, F32, (ampc_dist_op)op));
        ASSERT_OK(ampc_dist_allreduce(g_d, d, N, AMPC_DTYPE_F64, (ampc_dist_op)op));
        ASSERT_OK(ampc_dist_allreduce(g_d, q, N, AMPC_DTYPE_I64, (ampc_dist_op)op));
        if (memcmp(f, fw, sizeof f) || memcmp(d, dw, sizeof d) || memcmp(q, qw, sizeof q))
            ok = false, print_error("allreduce op %d: f32 %.9g/%.9g f64 %.17g/%.17g i64 %lld/%lld\n", op, f[0], fw[0],
                                    d[0], dw[0], (long long)q[0], (long long)qw[0]);
    }
    AGREE(ok, "an all-reduce differs from the sum, max or min computed here");
}

/* BF16/F16 sums: for two ranks the result is the RNE rounding of the F32 sum of the two values, bit for bit;
 * 2500 values cross the 1024-element chunks of the sum op, and include ties, overflow and infinities. */
static void test_allreduce_16bit_sum_rounds_once(void **state) {
    (void)state;
    if (g_size != 2) skip();
    enum { N = 2500 };
    static const float ties[][2] = {{1.0f, 0x1p-8f},   {1.0078125f, 0x1p-8f}, {3.0e38f, 3.0e38f},
                                    {65504.0f, 32.0f}, {INFINITY, 1.0f},      {-2.5f, 2.5f}};
    bool ok = true;
    for (ampc_dtype dt = F16; dt <= BF16; dt++) {
        static uint16_t mine[N], other, want[N];
        for (int i = 0; i < N; i++) {
            float a = val((uint32_t)i, 7) * ldexpf(1, i % 20 - 10), b = val((uint32_t)i, 8) * ldexpf(1, i % 17 - 8);
            if (i < (int)(sizeof ties / sizeof ties[0])) a = ties[i][0], b = ties[i][1];
            float mv = g_rank == 0 ? a : b, ov = g_rank == 0 ? b : a, fa, fb;
            ampc_convert(&mine[i], dt, &mv, F32, 1), ampc_convert(&other, dt, &ov, F32, 1);
            ampc_convert(&fa, F32, &mine[i], dt, 1), ampc_convert(&fb, F32, &other, dt, 1);
            float sum = fa + fb;
            ampc_convert(&want[i], dt, &sum, F32, 1);
        }
        ASSERT_OK(ampc_dist_allreduce(g_d, mine, N, dt, AMPC_DIST_SUM));
        for (int i = 0; i < N && ok; i++)
            if (mine[i] != want[i])
                ok = false,
                print_error("%s sum %d: 0x%04x, RNE of the F32 sum 0x%04x\n", ampc_dtype_name(dt), i, mine[i], want[i]);
    }
    AGREE(ok, "a 16-bit sum is not one rounding of the F32 sum");
}

static void test_collective_errors(void **state) {
    (void)state;
    float f[4] = {0};
    uint16_t h[4] = {0};
    assert_int_equal(ampc_dist_broadcast(g_d, f, 4, F32, g_size), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_broadcast(g_d, f, 4, F32, -1), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_broadcast(g_d, f, -1, F32, 0), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_broadcast(g_d, NULL, 4, F32, 0), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_broadcast(g_d, f, 4, AMPC_DTYPE_COUNT, 0), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_allreduce(g_d, f, 4, F32, (ampc_dist_op)3), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_allreduce(g_d, NULL, 4, F32, AMPC_DIST_SUM), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_allreduce(NULL, f, 4, F32, AMPC_DIST_SUM), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_allreduce(g_d, h, 4, BF16, AMPC_DIST_MAX), AMPC_STATUS_DTYPE);
    ASSERT_ERROR_MENTIONS("ampc_dist_allreduce", "BF16", "max");
    assert_int_equal(ampc_dist_allreduce(g_d, h, 4, F16, AMPC_DIST_MIN), AMPC_STATUS_DTYPE);
    assert_int_equal(ampc_dist_allreduce(g_d, f, 4, AMPC_DTYPE_I32, AMPC_DIST_SUM), AMPC_STATUS_DTYPE);
    assert_int_equal(ampc_dist_barrier(NULL), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_set_grad_weight(g_d, 0), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_set_grad_weight(g_d, NAN), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_sync_grads(g_d), AMPC_STATUS_STATE); /* nothing attached */
    ampc_dist_stats st;
    assert_int_equal(ampc_dist_get_stats(g_d, NULL), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_get_stats(NULL, &st), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_set_timeout(g_d, 0), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("ampc_dist_set_timeout", "> 0");
    assert_int_equal(ampc_dist_set_timeout(NULL, 5), AMPC_STATUS_INVALID_ARG);
    double secs;
    assert_int_equal(ampc_dist_time_reduction(g_d, 5, &secs), AMPC_STATUS_INVALID_ARG); /* nothing attached */
    ASSERT_ERROR_MENTIONS("ampc_dist_time_reduction", "attached");
    assert_int_equal(ampc_dist_unshard(NULL), AMPC_STATUS_INVALID_ARG);
    ASSERT_OK(ampc_dist_unshard(g_d)); /* nothing sharded: nothing to do */
    ampc_dist *d2 = (ampc_dist *)1;
    assert_int_equal(ampc_dist_new(&(ampc_dist_params){.timeout_s = -1}, &d2), AMPC_STATUS_INVALID_ARG);
    assert_null(d2);
    ASSERT_ERROR_MENTIONS("timeout_s -1");
    ASSERT_OK(ampc_dist_allreduce(g_d, NULL, 0, F32, AMPC_DIST_SUM)); /* nothing to do */
    ASSERT_OK(ampc_dist_barrier(g_d));                                /* the ranks are still in step */
}

static void test_agree_barrier_timeout(void **state) {
    (void)state;
    ASSERT_OK(ampc_dist_agree(g_d, AMPC_OK));
    /* every rank but 0 fails: each keeps its own status, rank 0 gets DIST naming the lowest, rank 1 */
    ampc_status s = ampc_dist_agree(g_d, g_rank ? AMPC_STATUS_IO : AMPC_OK);
    assert_int_equal(s, g_rank ? AMPC_STATUS_IO : AMPC_STATUS_DIST);
    if (!g_rank) ASSERT_ERROR_MENTIONS("rank 1 failed");
    /* every rank its own error: each keeps its own */
    assert_int_equal(ampc_dist_agree(g_d, g_rank ? AMPC_STATUS_SHAPE : AMPC_STATUS_FORMAT),
                     g_rank ? AMPC_STATUS_SHAPE : AMPC_STATUS_FORMAT);
    /* nobody leaves the barrier before the last rank arrives (200 ms late); one machine's wall clock */
    struct timespec ts;
    if (g_rank == g_size - 1) nanosleep(&(struct timespec){0, 200000000}, NULL);
    clock_gettime(CLOCK_REALTIME, &ts);
    double arrived = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    ASSERT_OK(ampc_dist_barrier(g_d));
    clock_gettime(CLOCK_REALTIME, &ts);
    double left = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    ASSERT_OK(ampc_dist_allreduce(g_d, &arrived, 1, AMPC_DTYPE_F64, AMPC_DIST_MAX));
    AGREE(left >= arrived, "left the barrier %.3f s before the last rank arrived", arrived - left);
    /* a rank that never joins: the others fail within timeout_s with DIST naming the collective */
    ampc_dist *d;
    ASSERT_OK(ampc_dist_new(&(ampc_dist_params){.timeout_s = 0.3}, &d));
    static float x[4]; /* static: the abandoned all-reduce keeps its buffer */
    if (g_rank == 0) {
        assert_int_equal(ampc_dist_allreduce(d, x, 4, F32, AMPC_DIST_SUM), AMPC_STATUS_DIST);
        ASSERT_ERROR_MENTIONS("ampc_dist_allreduce", "did not complete within");
    }
    ampc_dist_free(d);
}

/* ---- 2. attach ---- */

/* Attaching: argument checks; rank 0's parameters win (the other ranks' are overwritten). */
static void test_attach_checks_and_broadcasts(void **state) {
    (void)state;
    static float p[NP], p0[NP];
    replica a = rep_new(F32), z = rep_new(F32);
    read_all(a.m, false, p0);
    if (g_rank > 0) ASSERT_OK(ampc_tensor_fill(ampc_model_param(a.m, 2), g_rank));
    ampc_optim *empty;
    ASSERT_OK(ampc_optim_new(a.ctx, NULL, &empty));
    assert_int_equal(ampc_dist_attach(g_d, empty, NULL), AMPC_STATUS_STATE);
    assert_int_equal(ampc_dist_attach(NULL, a.opt, NULL), AMPC_STATUS_INVALID_ARG);
    assert_int_equal(ampc_dist_attach(g_d, a.opt, &(ampc_dist_train_params){.reduce_dtype = AMPC_DTYPE_F64}),
                     AMPC_STATUS_DTYPE);
    assert_int_equal(ampc_dist_attach(g_d, a.opt, &(ampc_dist_train_params){.bucket_bytes = -1}),
                     AMPC_STATUS_INVALID_ARG);
    rep_attach(&a, F32, AMPC_DIST_SHARD_NONE, 0);
    read_all(a.m, false, p);
    AGREE(!memcmp(p, p0, sizeof p), "after attach the parameters are not rank 0's");
    assert_int_equal(ampc_dist_attach(g_d, z.opt, NULL), AMPC_STATUS_STATE); /* the handle has one */
    ampc_dist *d2;
    ASSERT_OK(ampc_dist_new(NULL, &d2));
    assert_int_equal(ampc_dist_attach(d2, a.opt, NULL), AMPC_STATUS_STATE); /* the optimizer has one */
    ampc_dist_free(d2), ampc_optim_free(empty), rep_free(&a), rep_free(&z);
}

/* ---- the program ---- */

int main(int argc, char **argv) {
    // clang-format off
    const struct CMUnitTest all[] = {
        DIST_TEST(test_broadcast_every_dtype), DIST_TEST(test_allreduce_f32_f64_i64),
        DIST_TEST(test_allreduce_16bit_sum_rounds_once), DIST_TEST(test_collective_errors),
        DIST_TEST(test_agree_barrier_timeout), DIST_TEST(test_attach_checks_and_broadcasts),
    };
    // clang-format on
    return dist_test_main("test_dist", all, sizeof all / sizeof all[0], argc, argv);
}
