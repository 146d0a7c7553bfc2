/* test_convert.c: every conversion entry of the kernel registry this CPU can run, bit for bit against
 * its cell's ref entry: at edge sizes (0, 1, tile-1, tile, tile+1, odd, long), misaligned, over every 16-bit input
 * pattern and over specials plus random f32 patterns. Also the dispatch rules: a table never uses an
 * implementation above its level, and AMPC_ISA only lowers the level. */
#include "kernel_check.h"

#include <stdlib.h>

/* Runs impl and ref on the same input (n elements starting `offset` elements into the buffers) and
 * compares the output bytes, plus a guard after the end that must stay untouched. */
static void compare_one(const ampci_kernel *im, const void *src, size_t n, size_t offset) {
    const ampci_kernel *ref = ampci_kernel_ref(im);
    assert_non_null(ref);
    size_t ss = ampc_dtype_size(im->src), ds = ampc_dtype_size(im->dtype);
    size_t bytes = (n + offset + 64) * ds;
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    memset(a, 0xa5, bytes);
    memset(b, 0xa5, bytes);
    const unsigned char *s = (const unsigned char *)src + offset * ss;
    ref->fn.CONVERT(a + offset * ds, s, n);
    im->fn.CONVERT(b + offset * ds, s, n);
    if (memcmp(a, b, bytes) != 0) {
        size_t i = 0;
        while (a[i] == b[i]) i++;
        size_t e = i / ds;
        uint32_t in = 0;
        memcpy(&in, (const unsigned char *)src + e * ss, ss);
        FAILF("%s differs from ref at element %zu of %zu (offset %zu, input 0x%x)%s", im->name, e - offset, n, offset,
              in, e >= n + offset ? " -- wrote past the end" : "");
    }
    free(a);
    free(b);
}

/* fn on every conversion entry but the ref ones that this CPU runs. */
static void for_each_usable(void (*fn)(const ampci_kernel *, void *), void *arg) {
    kc_list l = kc_fast(AMPCI_SLOT_CONVERT, KC_ANY);
    for (int i = 0; i < l.n; i++) fn(l.e[i], arg);
}

/* Inputs for a source dtype: every 16-bit pattern, or interesting f32 patterns. */
static void *make_input(ampc_dtype src, size_t n) {
    if (src == AMPC_DTYPE_F32) {
        uint32_t *x = malloc(n * 4);
        tu_fill_interesting(x, n, 1234);
        return x;
    }
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = (uint16_t)(i * 40503u); /* odd multiplier: a permutation */
    return h;
}

static void edge_sizes(const ampci_kernel *im, void *arg) {
    (void)arg;
    static const size_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 127, 1000, 4099};
    void *in = make_input(im->src, 5000);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t off = 0; off < 3; off++) compare_one(im, in, sizes[k], off);
    free(in);
}

static void test_edge_sizes_and_alignment(void **state) {
    (void)state;
    for_each_usable(edge_sizes, NULL);
}

static void all_patterns(const ampci_kernel *im, void *arg) {
    (void)arg;
    if (im->src == AMPC_DTYPE_F32) {
        enum { N = 1 << 20 };
        void *in = make_input(AMPC_DTYPE_F32, N);
        compare_one(im, in, N, 0);
        free(in);
        return;
    }
    uint16_t *h = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    compare_one(im, h, 65536, 0);
    free(h);
}

static void test_all_16bit_patterns_and_sampled_f32(void **state) {
    (void)state;
    for_each_usable(all_patterns, NULL);
}

/* Every f32 subnormal goes through the BF16 fix-up lane of the avx512bf16 path. */
static void subnormals(const ampci_kernel *im, void *arg) {
    (void)arg;
    if (im->src != AMPC_DTYPE_F32) return;
    enum { N = 1 << 16 };
    uint32_t *x = malloc(N * 4);
    for (uint32_t base = 0; base < 0x800000u; base += N) {
        for (uint32_t i = 0; i < N; i++) x[i] = (base + i) | (i & 1u) << 31;
        compare_one(im, x, N, 0);
    }
    free(x);
}

static void test_every_subnormal_input(void **state) {
    (void)state;
    for_each_usable(subnormals, NULL);
}

/* ---- dispatch ---- */

static void test_tables_respect_levels(void **state) {
    (void)state;
    const ampc_cpu_info *cpu = ampc_cpu();
    for (int l = AMPC_ISA_REF; l < AMPC_ISA_COUNT; l++) {
        const struct ampc_kernels *k = ampci_kernels((ampc_isa)l);
        assert_true(k->isa <= cpu->chosen);
        assert_true(k->isa <= (ampc_isa)l);
        for (int d = 0; d < AMPC_DTYPE_COUNT; d++)
            for (int s = 0; s < AMPC_DTYPE_COUNT; s++) {
                const ampci_kernel *e = k->chosen[AMPCI_SLOT_CONVERT][d * AMPC_DTYPE_COUNT + s];
                if (!e) {
                    assert_null(k->cvt[d][s]);
                    continue;
                }
                assert_true(e->fn.CONVERT == k->cvt[d][s]);
                if (e->level > k->isa) FAILF("table %s uses %s", ampc_isa_name(k->isa), e->name);
            }
    }
    /* the ref table uses only ref kernels; every float pair has a slot */
    const struct ampc_kernels *ref = ampci_kernels(AMPC_ISA_REF);
    assert_int_equal(ref->isa, AMPC_ISA_REF);
    assert_string_equal(ref->chosen[AMPCI_SLOT_CONVERT][AMPC_DTYPE_F16 * AMPC_DTYPE_COUNT + AMPC_DTYPE_F32]->name,
                        "ampc_k_cvt_f16f32__ref");
    assert_non_null(ref->cvt[AMPC_DTYPE_BF16][AMPC_DTYPE_F16]);
}

/* CTest runs this program again with AMPC_ISA set and AMPC_TEST_EXPECT_CAP naming the cap. */
static void test_env_cap(void **state) {
    (void)state;
    const ampc_cpu_info *cpu = ampc_cpu();
    const char *env = getenv("AMPC_ISA"), *cap = getenv("AMPC_TEST_EXPECT_CAP");
    assert_true(cpu->chosen <= cpu->best);
    if (!env) {
        assert_int_equal(cpu->chosen, cpu->best);
        return;
    }
    assert_string_equal(cpu->isa_env, env);
    if (!cap) return;
    ampc_isa want;
    if (strcmp(cap, "invalid") == 0) {
        assert_false(cpu->isa_env_valid);
        assert_int_equal(cpu->chosen, cpu->best);
        return;
    }
    ASSERT_OK(ampc_isa_parse(cap, &want));
    assert_true(cpu->isa_env_valid);
    assert_int_equal(cpu->chosen, want < cpu->best ? want : cpu->best);
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1, .isa = AMPC_ISA_AMX}, &ctx));
    assert_int_equal(ampc_ctx_isa(ctx), cpu->chosen); /* a context cannot raise it either */
    ampc_ctx_free(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_sizes_and_alignment),
        cmocka_unit_test(test_all_16bit_patterns_and_sampled_f32),
        cmocka_unit_test(test_every_subnormal_input),
        cmocka_unit_test(test_tables_respect_levels),
        cmocka_unit_test(test_env_cap),
    };
    printf("# kernel level: best %s, chosen %s\n", ampc_isa_name(ampc_cpu()->best), ampc_isa_name(ampc_cpu()->chosen));
    kc_note_unusable(AMPCI_SLOT_CONVERT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
