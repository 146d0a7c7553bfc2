/* test_convert_exhaustive.c: all 2^32 float bit patterns, converted to FP16 and to BF16 by every row path
 * this CPU can run, must equal the scalar reference; and the scalar reference must equal two other
 * implementations: the independent rounding in double of test_util.h and the library's generic format
 * codec. CTest label `exhaustive` (a minute or two on two cores). Blocks of 2^16 patterns are spread over
 * the context's threads; a mismatch is reported with its input and the first one wins. */
#include "test_util.h"

#include "kernels/kernels.h"

#include <fenv.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { BLOCK = 1 << 16 };

typedef struct job {
    const ampci_kernel *paths[16];
    size_t npaths;
    atomic_int failed;
    char message[256];
    atomic_flag message_taken;
} job;

static void report(job *j, const char *what, uint32_t x, unsigned got, unsigned want) {
    if (atomic_flag_test_and_set(&j->message_taken)) return;
    snprintf(j->message, sizeof j->message, "%s: input 0x%08x gives 0x%04x, expected 0x%04x", what, x, got, want);
    atomic_store(&j->failed, 1);
}

static void check_block(void *arg, int64_t begin, int64_t end, int64_t chunk) {
    (void)end;
    job *j = arg;
    if (atomic_load(&j->failed)) return;
    uint32_t x[BLOCK];
    uint16_t ref[2][BLOCK], out[BLOCK];
    for (uint32_t i = 0; i < BLOCK; i++) x[i] = (uint32_t)begin + i;
    (void)chunk;
    for (uint32_t i = 0; i < BLOCK; i++) {
        float f = tu_float(x[i]);
        ref[0][i] = ampc_f16_from_f32(f);
        ref[1][i] = ampc_bf16_from_f32(f);
        uint16_t ih = tu_f16_ref(f), ib = tu_bf16_ref(f);
        if (ih != ref[0][i]) report(j, "f16 scalar vs independent rounding", x[i], ref[0][i], ih);
        if (ib != ref[1][i]) report(j, "bf16 scalar vs independent rounding", x[i], ref[1][i], ib);
        if (isnan(f)) continue; /* (double)f of a signalling NaN is up to the compiler; NaN rule checked above */
        uint32_t gh = ampc_format_from_f64(AMPC_FORMAT_FP16, f), gb = ampc_format_from_f64(AMPC_FORMAT_BF16, f);
        if (gh != ref[0][i]) report(j, "f16 scalar vs generic codec", x[i], ref[0][i], gh);
        if (gb != ref[1][i]) report(j, "bf16 scalar vs generic codec", x[i], ref[1][i], gb);
    }
    for (size_t p = 0; p < j->npaths; p++) {
        const ampci_kernel *im = j->paths[p];
        const uint16_t *want = ref[im->dtype == AMPC_DTYPE_F16 ? 0 : 1];
        im->fn.CONVERT(out, x, BLOCK);
        if (memcmp(out, want, sizeof out) == 0) continue;
        for (uint32_t i = 0; i < BLOCK; i++)
            if (out[i] != want[i]) {
                report(j, im->name, x[i], out[i], want[i]);
                break;
            }
    }
}

static void test_all_floats(void **state) {
    (void)state;
    assert_int_equal(fegetround(), FE_TONEAREST);
    static job j;
    atomic_init(&j.failed, 0);
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        const ampci_kernel *im = all[i];
        bool narrowing = im->slot == AMPCI_SLOT_CONVERT && im->src == AMPC_DTYPE_F32 &&
                         (im->dtype == AMPC_DTYPE_F16 || im->dtype == AMPC_DTYPE_BF16);
        if (narrowing && ampci_kernel_usable(im)) {
            assert_true(j.npaths < 16);
            j.paths[j.npaths++] = im;
            printf("# path %s\n", im->name);
        } else if (narrowing) {
            printf("# path %s not run (this CPU lacks what it needs)\n", im->name);
        }
    }
    assert_true(j.npaths >= 2); /* at least the two ref paths */
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 0}, &ctx));
    ampc_parallel_for(ctx, (int64_t)1 << 32, BLOCK, check_block, &j);
    ampc_ctx_free(ctx);
    if (atomic_load(&j.failed)) FAILF("%s", j.message);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_floats)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
