/* test_planted.c: the guard device catches what it is there to catch. This program is linked against the
 * library's objects with src/ops/elementwise.c built with AMPC_PLANT_HOST_ACCESS, which plants one read of
 * an op input's memory straight from the host, the slip a contributor could make in an op body. On the
 * CPU device the read goes unnoticed (host memory); on the guard device it must kill the process with
 * SIGSEGV, so the guard tests would fail on such a change. Each run happens in a child process. */
#include "test_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* A small forward and backward (through an elementwise op when `unary`) in a child on device d: the
 * signal that killed it, or 0 when it exited cleanly. */
static int train_in_child(ampc_device d, bool unary) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* cmocka's handler would catch the fault */
        ampc_ctx *ctx;
        if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1, .device = d}, &ctx) != AMPC_OK) _exit(3);
        int64_t xs[2] = {4, 8}, ws[2] = {3, 8};
        ampc_tensor *x = ampc_tensor_uniform(ctx, AMPC_DTYPE_F32, 2, xs, -1, 1);
        ampc_tensor *w = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, ws);
        if (!x || !w || ampc_tensor_fill_normal(w, 0, 0.3) != AMPC_OK || ampc_tensor_set_requires_grad(w, true))
            _exit(4);
        ampc_tensor *y = ampc_linear(ctx, x, w, NULL);
        ampc_tensor *loss = ampc_sum(ctx, unary ? ampc_tanh(ctx, y) : y, NULL, 0, false);
        if (!loss || ampc_backward(ctx, loss) != AMPC_OK) _exit(5);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) return WTERMSIG(status);
    if (WEXITSTATUS(status) != 0) FAILF("the child on device %d exited %d", (int)d.kind, WEXITSTATUS(status));
    return 0;
}

static void test_planted_read_is_caught(void **state) {
    (void)state;
    const ampc_device cpu = {AMPC_DEVICE_CPU, 0}, guard = {AMPC_DEVICE_GUARD, 0};
    assert_int_equal(train_in_child(cpu, true), 0);
    assert_int_equal(train_in_child(guard, false), 0); /* the same step without the planted op is clean */
    assert_int_equal(train_in_child(guard, true), SIGSEGV);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_planted_read_is_caught)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
