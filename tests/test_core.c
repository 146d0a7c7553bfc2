/* test_core.c: errors and status codes, accounted allocation, the growable step arena, the Philox RNG
 * (known-answer vectors from Random123, distribution checks, thread independence), parallel_for
 * (coverage, determinism, nesting), the step heap (size classes, reuse, generations) and the CPU probe's
 * consistency rules. */
#include "test_util.h"

#include "core/core.h"

#include <pthread.h>
#include <stdlib.h>

/* ---- errors ---- */

static void *other_thread(void *arg) {
    (void)arg;
    /* a fresh thread starts without an error, and its failure stays its own */
    bool clean = ampc_last_status() == AMPC_OK && ampc_last_error()[0] == '\0';
    ampci_fail(AMPC_STATUS_IO, "other thread");
    return clean ? (void *)1 : NULL;
}

static void test_errors_thread_local(void **state) {
    (void)state;
    ampc_clear_error();
    assert_int_equal(ampci_fail(AMPC_STATUS_SHAPE, "shape %d", 7), AMPC_STATUS_SHAPE);
    pthread_t th;
    void *clean;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, &clean);
    assert_non_null(clean);
    assert_string_equal(ampc_last_error(), "shape 7");
    assert_int_equal(ampc_last_status(), AMPC_STATUS_SHAPE);
    /* a NULL link in a call chain keeps the first failure's message */
    assert_null(ampc_tensor_transpose(NULL, 0, 1));
    assert_string_equal(ampc_last_error(), "shape 7");
    ampc_clear_error();
    assert_null(ampc_tensor_transpose(NULL, 0, 1));
    ASSERT_ERROR_MENTIONS("ampc_tensor_transpose", "NULL");
    assert_string_equal(ampc_status_str(AMPC_STATUS_OOM), "AMPC_STATUS_OOM");
    assert_string_equal(ampc_status_str((ampc_status)-99), "AMPC_STATUS_UNKNOWN");
    assert_non_null(strstr(ampc_version(), "."));
}

/* ---- allocation ---- */

typedef struct counting {
    size_t calls, frees, live;
} counting;

static void *count_alloc(void *user, size_t size, size_t align) {
    counting *c = user;
    c->calls++, c->live += size;
    assert_true(align >= 64 && size % align == 0);
    return aligned_alloc(align, size);
}

static void count_free(void *user, void *p, size_t size) {
    counting *c = user;
    c->frees++, c->live -= size;
    free(p);
}

static void test_memory_accounting(void **state) {
    (void)state;
    counting c = {0};
    ampc_allocator al = {count_alloc, count_free, &c};
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1, .allocator = &al, .arena_initial_bytes = 4096}, &ctx));
    ampc_memory_usage m0, m1, m2;
    ASSERT_OK(ampc_memory_stats(ctx, &m0));
    ampc_tensor *t = ampc_tensor_new(ctx, AMPC_DTYPE_F32, 2, (int64_t[]){100, 1000});
    assert_non_null(t);
    assert_true(((uintptr_t)ampc_tensor_data(t) & 63) == 0);
    ASSERT_OK(ampc_memory_stats(ctx, &m1));
    assert_true(m1.live_bytes >= m0.live_bytes + 400000);
    assert_true(m1.peak_bytes >= m1.live_bytes);
    assert_int_equal(m1.live_bytes, c.live); /* the context counts exactly what its allocator holds */
    ampc_tensor_free(t);
    ASSERT_OK(ampc_memory_stats(ctx, &m2));
    assert_int_equal(m2.live_bytes, m0.live_bytes);
    assert_int_equal(m2.peak_bytes, m1.peak_bytes); /* the peak remembers */
    ampc_memory_reset_peak(ctx);
    ASSERT_OK(ampc_memory_stats(ctx, &m2));
    assert_int_equal(m2.peak_bytes, m2.live_bytes);
    ampc_ctx_free(ctx);
    assert_int_equal(c.live, 0);
    assert_int_equal(c.calls, c.frees);
    assert_int_equal(ampc_memory_stats(NULL, &m0), AMPC_STATUS_INVALID_ARG);
}

static void test_arena_grows_and_merges(void **state) {
    (void)state;
    counting c = {0};
    ampc_allocator al = {count_alloc, count_free, &c};
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1, .allocator = &al, .arena_initial_bytes = 4096}, &ctx));
    /* a step that needs far more than the first chunk: the arena grows, never fails */
    for (int i = 0; i < 50; i++) {
        ampc_tensor *t = ampc_tensor_full(ctx, AMPC_DTYPE_F32, 1, (int64_t[]){1000 + i * 100}, 1.0);
        assert_non_null(t);
        assert_true(((uintptr_t)ampc_tensor_data(t) & 63) == 0);
    }
    ampc_memory_usage m;
    ASSERT_OK(ampc_memory_stats(ctx, &m));
    size_t used = m.arena_used;
    assert_true(used > 4096 * 50);
    ampc_ctx_step_end(ctx);
    ASSERT_OK(ampc_memory_stats(ctx, &m));
    assert_int_equal(m.arena_used, 0);
    assert_int_equal(m.arena_high_water, used);
    /* the next step merges everything into one chunk of the high-water size; the one after that
     * allocates nothing at all */
    for (int step = 0; step < 2; step++) {
        size_t calls = c.calls;
        for (int i = 0; i < 50; i++)
            assert_non_null(ampc_tensor_full(ctx, AMPC_DTYPE_F32, 1, (int64_t[]){1000 + i * 100}, 1.0));
        assert_int_equal(c.calls, calls + (step == 0 ? 1 : 0));
        ASSERT_OK(ampc_memory_stats(ctx, &m));
        assert_true(m.arena_reserved >= used && m.arena_reserved < used + 4096);
        ampc_ctx_step_end(ctx);
    }
    ampc_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* ---- step heap ---- */

static size_t heap_used(ampc_ctx *ctx) {
    ampc_memory_usage m;
    assert_int_equal(ampc_memory_stats(ctx, &m), AMPC_OK);
    return m.heap_used;
}

static void test_step_heap(void **state) {
    (void)state;
    counting c = {0};
    ampc_allocator al = {count_alloc, count_free, &c};
    ampc_ctx *ctx;
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1, .allocator = &al}, &ctx));
    const size_t big = 100000;
    /* small requests stay in the arena; large ones come from the heap, 64-byte aligned */
    assert_non_null(ampci_step_alloc(ctx, AMPCI_HEAP_MIN - 1, "small"));
    assert_int_equal(heap_used(ctx), 0);
    void *a = ampci_step_alloc(ctx, big, "a");
    assert_non_null(a);
    assert_true(((uintptr_t)a & 63) == 0);
    size_t one = heap_used(ctx);
    assert_true(one >= big && one < big + big / 8 + 128); /* size classes waste at most 1/8 */
    /* an explicit free gives the block back; the next request of that size reuses it */
    ampci_step_free(ctx, a);
    assert_int_equal(heap_used(ctx), 0);
    size_t calls = c.calls;
    assert_ptr_equal(ampci_step_alloc(ctx, big, "a again"), a);
    assert_int_equal(c.calls, calls);
    /* a free block up to twice the size serves a smaller request; a smaller one does not */
    ampci_step_free(ctx, a);
    assert_ptr_equal(ampci_step_alloc(ctx, big / 2 + 64, "half"), a);
    ampci_step_free(ctx, a);
    assert_ptr_not_equal(ampci_step_alloc(ctx, big / 3, "third"), a);
    /* forward buffers (made outside a generation) never die by unref */
    void *f = ampci_step_alloc(ctx, big, "forward");
    size_t before = heap_used(ctx);
    ampci_step_ref(ctx, f);
    ampci_step_unref(ctx, f);
    assert_int_equal(heap_used(ctx), before);
    /* a generation: unreferenced buffers die at the sweep, referenced ones at their last unref, and an
     * unref to zero inside a later generation hands the buffer to that generation's sweep */
    ampci_step_gen_begin(ctx);
    void *t1 = ampci_step_alloc(ctx, big, "t1"), *t2 = ampci_step_alloc(ctx, big, "t2");
    ampci_step_ref(ctx, t2);
    ampci_step_free(ctx, t1); /* inside a generation: left to the sweep */
    assert_true(heap_used(ctx) >= before + 2 * big);
    ampci_step_gen_sweep(ctx);
    size_t after_sweep = heap_used(ctx);
    assert_true(after_sweep >= before + big && after_sweep < before + 2 * big);
    ampci_step_gen_begin(ctx);
    ampci_step_unref(ctx, t2);
    assert_int_equal(heap_used(ctx), after_sweep);
    ampci_step_gen_sweep(ctx);
    assert_int_equal(heap_used(ctx), before);
    /* step end: everything back to the free lists, memory kept, and the same step allocates nothing */
    ampc_ctx_step_end(ctx);
    assert_int_equal(heap_used(ctx), 0);
    calls = c.calls;
    for (int i = 0; i < 3; i++) assert_non_null(ampci_step_alloc(ctx, big, "again"));
    assert_int_equal(c.calls, calls);
    ampc_ctx_free(ctx);
    assert_int_equal(c.live, 0);
    assert_int_equal(c.calls, c.frees);
}

/* ---- RNG ---- */

static void test_philox_known_answers(void **state) {
    (void)state;
    /* Random123's kat_vectors for philox4x32_10: (ctr, key) -> out */
    uint32_t out[4];
    ampc_rng_block(0, 0, 0, out);
    assert_true(out[0] == 0x6627e8d5u && out[1] == 0xe169c58du && out[2] == 0xbc57ac4cu && out[3] == 0x9b00dbd8u);
    ampc_rng_block(UINT64_MAX, UINT64_MAX, UINT64_MAX, out);
    assert_true(out[0] == 0x408f276du && out[1] == 0x41c83b0eu && out[2] == 0xa20bc7c6u && out[3] == 0x6d5451fdu);
    /* ctr = (243f6a88 85a308d3 13198a2e 03707344), key = (a4093822 299f31d0) */
    ampc_rng_block(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, out);
    assert_true(out[0] == 0xd16cfe09u && out[1] == 0x94fdccebu && out[2] == 0x5001e420u && out[3] == 0x24126ea1u);
}

static void test_rng_distributions(void **state) {
    (void)state;
    enum { N = 1 << 18 };
    float *x = malloc(N * sizeof *x);
    ampc_rng r = ampc_rng_make(5, 1);
    ampc_rng_uniform(&r, x, N, -2.0f, 3.0f);
    assert_true(r.counter == N / 4);
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        if (!(x[i] >= -2.0f && x[i] < 3.0f)) FAILF("uniform draw %d = %g outside [-2, 3)", i, x[i]);
        s += x[i], s2 += (double)x[i] * x[i];
    }
    /* mean 0.5, variance 25/12; 6-sigma bounds for N draws */
    double mean = s / N, var = s2 / N - mean * mean;
    assert_true(fabs(mean - 0.5) < 6 * sqrt(25.0 / 12 / N));
    assert_true(fabs(var - 25.0 / 12) < 0.05);
    ampc_rng_normal(&r, x, N, 1.0f, 2.0f);
    s = s2 = 0;
    int beyond3 = 0;
    for (int i = 0; i < N; i++) {
        if (!isfinite(x[i])) FAILF("normal draw %d is not finite", i);
        s += x[i], s2 += (double)x[i] * x[i];
        beyond3 += fabs(x[i] - 1.0) > 6.0;
    }
    mean = s / N, var = s2 / N - mean * mean;
    assert_true(fabs(mean - 1.0) < 6 * 2.0 / sqrt(N));
    assert_true(fabs(var - 4.0) < 0.1);
    assert_true(beyond3 > N * 0.0015 && beyond3 < N * 0.0040); /* P(|z| > 3) = 0.0027 */
    /* ranges reproduce the whole fill: element i depends only on (seed, stream, counter, i) */
    ampc_rng a = ampc_rng_make(9, 2);
    ampc_rng_normal(&a, x, 1001, 0, 1);
    float part[7];
    ampc_rng b = ampc_rng_make(9, 2);
    ampci_rng_normal_range(&b, part, 333, 340, 0, 1);
    assert_memory_equal(part, x + 333, sizeof part);
    /* different streams differ */
    ampc_rng c1 = ampc_rng_make(9, 3);
    ampc_rng_normal(&c1, part, 7, 0, 1);
    assert_memory_not_equal(part, x, sizeof part);
    free(x);
}

static void test_rng_fill_independent_of_threads(void **state) {
    (void)state;
    float *bits[2];
    for (int t = 0; t < 2; t++) {
        ampc_ctx *ctx;
        ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.seed = 77, .threads = t + 1}, &ctx));
        int64_t shape[2] = {300, 1001};
        ampc_tensor *u = ampc_tensor_normal(ctx, AMPC_DTYPE_F32, 2, shape, 0.0, 1.0);
        bits[t] = malloc(300 * 1001 * sizeof(float));
        ASSERT_OK(ampc_tensor_copy_to(u, bits[t], AMPC_DTYPE_F32));
        assert_int_equal(ampc_ctx_rng(ctx)->counter, (300 * 1001 + 3) / 4);
        ampc_ctx_free(ctx);
    }
    assert_memory_equal(bits[0], bits[1], 300 * 1001 * sizeof(float));
    free(bits[0]);
    free(bits[1]);
}

/* ---- parallel for ---- */

typedef struct pf {
    ampc_ctx *ctx;
    int *hits;
    double *partial;
    int64_t n;
} pf;

static void mark(void *arg, int64_t b, int64_t e, int64_t chunk) {
    pf *p = arg;
    double s = 0;
    for (int64_t i = b; i < e; i++) {
        __atomic_fetch_add(&p->hits[i], 1, __ATOMIC_RELAXED);
        s += 1.0 / (double)(i + 1);
    }
    p->partial[chunk] = s;
}

static void nested(void *arg, int64_t b, int64_t e, int64_t chunk) {
    (void)chunk;
    pf *p = arg;
    for (int64_t i = b; i < e; i++) {
        pf inner = {p->ctx, p->hits + i * 10, p->partial + i * 10, 10};
        ampc_parallel_for(p->ctx, 10, 3, mark, &inner); /* runs inline, no deadlock */
    }
}

static void test_parallel_for(void **state) {
    (void)state;
    enum { N = 100003 };
    int *hits = calloc(N, sizeof *hits);
    double *partial = calloc(N, sizeof *partial);
    double sums[3];
    for (int t = 1; t <= 3; t++) {
        ampc_ctx *ctx;
        ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = t}, &ctx));
        assert_int_equal(ampc_ctx_threads(ctx), t);
        memset(hits, 0, N * sizeof *hits);
        pf p = {ctx, hits, partial, N};
        ampc_parallel_for(ctx, N, 1000, mark, &p);
        for (int i = 0; i < N; i++)
            if (hits[i] != 1) FAILF("threads=%d: element %d ran %d times", t, i, hits[i]);
        int64_t chunks = ampc_parallel_chunks(N, 1000);
        assert_int_equal(chunks, 101);
        sums[t - 1] = 0;
        for (int64_t c = 0; c < chunks; c++) sums[t - 1] += partial[c]; /* fixed combination order */
        memset(hits, 0, N * sizeof *hits);
        ampc_parallel_for(ctx, 100, 7, nested, &p);
        for (int i = 0; i < 1000; i++) assert_int_equal(hits[i], 1);
        ampc_ctx_free(ctx);
    }
    assert_true(sums[0] == sums[1] && sums[1] == sums[2]); /* bit-identical, any thread count */
    assert_int_equal(ampc_parallel_chunks(0, 5), 0);
    assert_int_equal(ampc_parallel_chunks(5, 0), 5);
    free(hits);
    free(partial);
}

static void test_ctx_params(void **state) {
    (void)state;
    ampc_ctx *ctx = (ampc_ctx *)1;
    assert_int_equal(ampc_ctx_new(&(ampc_ctx_params){.threads = -2}, &ctx), AMPC_STATUS_INVALID_ARG);
    assert_null(ctx);
    ASSERT_ERROR_MENTIONS("ampc_ctx_new", "threads = -2");
    assert_int_equal(ampc_ctx_new(&(ampc_ctx_params){.isa = (ampc_isa)17}, &ctx), AMPC_STATUS_INVALID_ARG);
    ampc_allocator half = {count_alloc, NULL, NULL};
    assert_int_equal(ampc_ctx_new(&(ampc_ctx_params){.allocator = &half}, &ctx), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("allocator");
    ASSERT_OK(ampc_ctx_new(NULL, &ctx));
    assert_true(ampc_ctx_threads(ctx) >= 1);
    ASSERT_OK(ampc_ctx_set_threads(ctx, 2));
    assert_int_equal(ampc_ctx_threads(ctx), 2);
    assert_int_equal(ampc_ctx_set_threads(ctx, -1), AMPC_STATUS_INVALID_ARG);
    ampc_ctx_free(ctx);
    ampc_ctx_free(NULL);
}

/* ---- CPU probe ---- */

static void test_cpu_probe(void **state) {
    (void)state;
    const ampc_cpu_info *c = ampc_cpu();
    assert_true(c == ampc_cpu());
    for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++) {
        if (c->os_enabled[f] && !c->cpuid[f]) FAILF("%s usable but not reported", ampc_cpu_feature_name(f));
        assert_int_equal(ampc_cpu_has((ampc_cpu_feature)f), c->os_enabled[f]);
    }
    assert_true(c->chosen >= AMPC_ISA_REF && c->chosen <= c->best);
    if (c->best >= AMPC_ISA_AVX2) assert_true(ampc_cpu_has(AMPC_CPU_AVX2) && ampc_cpu_has(AMPC_CPU_F16C));
    if (c->best >= AMPC_ISA_AVX512) assert_true(ampc_cpu_has(AMPC_CPU_AVX512F) && ampc_cpu_has(AMPC_CPU_AVX512BW));
    if (c->best == AMPC_ISA_AMX) assert_int_equal(c->amx_permission, AMPC_AMX_GRANTED);
    if (!c->cpuid[AMPC_CPU_AMX_TILE]) assert_int_equal(c->amx_permission, AMPC_AMX_NOT_PRESENT);
    if (c->os_enabled[AMPC_CPU_AVX512F]) assert_true((c->xcr0 & 0xe6) == 0xe6);
    ampc_isa isa;
    ASSERT_OK(ampc_isa_parse("AVX512", &isa));
    assert_int_equal(isa, AMPC_ISA_AVX512);
    assert_int_equal(ampc_isa_parse("avx3", &isa), AMPC_STATUS_INVALID_ARG);
    ASSERT_ERROR_MENTIONS("avx3", "ref", "amx");
    assert_string_equal(ampc_cpu_feature_name(AMPC_CPU_AVX512_BF16), "avx512_bf16");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors_thread_local),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_arena_grows_and_merges),
        cmocka_unit_test(test_step_heap),
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_rng_distributions),
        cmocka_unit_test(test_rng_fill_independent_of_threads),
        cmocka_unit_test(test_parallel_for),
        cmocka_unit_test(test_ctx_params),
        cmocka_unit_test(test_cpu_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
