/* test_gemm.c: every GEMM entry of the kernel registry outside the ref and amx folders (today the avx512
 * folder's: F32, F16, BF16 through vdpbf16ps when the CPU has it, and BF16 through widening to F32; a new
 * entry of the slot is picked up) against its cell's ref entry, for every ta/tb layout, beta 0 and 1,
 * leading dimensions above the minimum (the gaps hold NaN, which must never be read), and sizes at and
 * around the avx512 kernels' tiles (MR = 14 rows, NR = 32 columns, KC = 384 F32 / 768 BF16 K elements,
 * 168-row tasks, 512-column tasks, column chunks of packed op(b)).
 *
 * Error bound. Both kernels compute each c element as F32 sums of the K exact-or-rounded products plus
 * beta c (beta is 0 or 1 here, so beta c is exact). With D = |beta c| + sum_k |a_ik| |b_kj| (in double):
 *   - worst case, per element: each result is within gamma_{K+2} D of the exact value (Higham, Accuracy
 *     and Stability, Thm 3.1 / eq. 3.5: K+1 additions in any order, plus one rounding of an F32 product;
 *     FMAs only remove roundings), so |fast - ref| <= 2 gamma_{K+2} D. Checked on every element.
 *   - normwise: rounding errors of the two kernels behave as independent, mean-zero quantities, and the
 *     probabilistic bound of Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019) gives lambda sqrt(K+2) u D
 *     per kernel with overwhelming probability for lambda = 2, so ||fast - ref||_F <= 4 sqrt(K+2) u ||D||_F
 *     with u = 2^-24. The inputs are fixed (seeded), so the check is deterministic; the margin printed
 *     by the sweep says how far from the bound the kernels are (a wrong element is ~1e5 times past it).
 * Non-finite results must match the ref kernel element by element (NaN where it has NaN, inf of the
 * same sign where it has inf).
 *
 * BF16 subnormal inputs (|x| < 2^-126): vdpbf16ps treats them as 0 (DAZ); the kernel detects them while
 * packing and computes those tiles with an IEEE emulation of the instruction, so the expected result is
 * their true value (tested: 2^-133 * 2^100 = 2^-33, inf * 2^-133 = inf, not NaN). Sums that fall below
 * 2^-126 are flushed to 0 on the vdpbf16ps path (FTZ) and kept by the widening path (tested: 2^-70 *
 * 2^-70 gives 0 resp. 2^-140; in a tile that holds a subnormal input, all of which is computed by the
 * IEEE emulation, it gives 2^-140 on both paths).
 *
 * The operands, problems and the checks this file shares with test_amx.c are in gemm_harness.h. Set
 * AMPC_GEMM_BENCH=1 to print GFLOP/s for the benchmark shapes (nothing is asserted on speed). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "gemm_harness.h"

static bool g_avx512;

typedef struct variant {
    ampc_dtype dt;
    ampc_k_gemm_fn fn;
    const char *name;
    bool bf16dp; /* vdpbf16ps: sums below 2^-126 are flushed (FTZ) */
} variant;
static variant g_var[8];
static int g_nvar;

/* This file's entries: the GEMM slot's outside the ref folder (the oracle) and the amx folder (whose tile
 * arithmetic has its own bounds and an emulation: test_amx.c). */
static int setup(void **state) {
    (void)state;
    if (gh_setup(12345, false) != 0) return -1;
    g_avx512 = ampc_cpu()->best >= AMPC_ISA_AVX512;
    kc_note_unusable(AMPCI_SLOT_GEMM);
    kc_list l = kc_fast(AMPCI_SLOT_GEMM, KC_ANY);
    for (int i = 0; i < l.n; i++) {
        const ampci_kernel *e = l.e[i];
        AMPCI_ASSERT(g_nvar < (int)(sizeof g_var / sizeof g_var[0])); /* never silently untested */
        /* the kernels that need AVX512-BF16 are the vdpbf16ps ones, whose tiny sums are flushed */
        if (e->level != AMPC_ISA_AMX)
            g_var[g_nvar++] = (variant){e->dtype, e->fn.GEMM, e->name, (e->needs & AMPCI_FEAT(AVX512_BF16)) != 0};
    }
    for (int v = 0; v < g_nvar; v++) gh_add(g_var[v].name, g_var[v].dt, g_var[v].fn); /* the harness's tests */
    return 0;
}

/* Checks fast against ref (see the header); returns ||fast - ref||_F / (4 sqrt(K+2) u ||D||_F). */
static double check(const prob *p, const float *fast, const float *ref, const char *what) {
    const double u = 0x1p-24;
    double gamma = gamma_n((double)(p->K + 2));
    double err2 = 0, d2 = 0;
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->N; j++) {
            float f = fast[i * p->ldc + j], r = ref[i * p->ldc + j];
            if (gh_nonfinite(f, r, i, j, what)) continue;
            double d = p->beta != 0.0f ? fabs((double)p->beta * p->c0[i * p->ldc + j]) : 0.0;
            for (int64_t k = 0; k < p->K; k++) d += fabs(op_a(p, i, k) * op_b(p, k, j));
            double e = fabs((double)f - (double)r);
            /* slack for sums flushed below 2^-126 (vdpbf16ps FTZ); none occur with these inputs */
            if (e > 2 * gamma * d + (double)(p->K + 1) * 0x1p-126)
                FAILF("%s: c[%lld, %lld] = %a, ref %a: error %g above the worst-case bound %g", what, (long long)i,
                      (long long)j, f, r, e, 2 * gamma * d);
            err2 += e * e;
            d2 += d * d;
        }
    gh_untouched(p, fast, what);
    return gh_normwise(err2, 4.0 * sqrt((double)(p->K + 2)) * u * sqrt(d2), what);
}

/* One problem through ref and the variant (1 thread); returns the error ratio. */
static double one(const variant *v, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta, int64_t pad) {
    prob p = prob_new(v->dt, M, N, K, ta, tb, beta, pad);
    float *r = run(g_ctx1, g_ref->gemm[v->dt], &p);
    float *f = run(g_ctx1, v->fn, &p);
    double ratio = check(&p, f, r, describe(v->name, &p, ""));
    free(f);
    free(r);
    prob_free(&p);
    return ratio;
}

/* ---- tests ---- */

static const char *gemm_name(const struct ampc_kernels *k, ampc_dtype dt) {
    const ampci_kernel *e = k->chosen[AMPCI_SLOT_GEMM][dt];
    assert_non_null(e);
    assert_true(e->fn.GEMM == k->gemm[dt]);
    return e->name;
}

static void test_table(void **state) {
    (void)state;
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AVX512);
    for (int d = 0; d < 3; d++) assert_non_null(gemm_name(k, dts[d]));
    if (!g_avx512 || ampc_cpu()->chosen < AMPC_ISA_AVX512) {
        /* the avx512 level is lowered to what runs here: the ref GEMMs */
        for (int d = 0; d < 3 && !g_avx512; d++) {
            assert_ptr_equal(k->gemm[dts[d]], g_ref->gemm[dts[d]]);
            assert_string_equal(gemm_name(k, dts[d]), gemm_name(g_ref, dts[d]));
        }
        return;
    }
    assert_string_equal(gemm_name(k, AMPC_DTYPE_F32), "ampc_k_gemm_f32f32__avx512");
    assert_string_equal(gemm_name(k, AMPC_DTYPE_F16), "ampc_k_gemm_f16f32__avx512");
    assert_string_equal(gemm_name(k, AMPC_DTYPE_BF16), ampc_cpu_has(AMPC_CPU_AVX512_BF16)
                                                           ? "ampc_k_gemm_bf16f32__avx512bf16"
                                                           : "ampc_k_gemm_bf16f32__avx512");
    /* the ref level keeps the ref GEMMs */
    assert_string_equal(gemm_name(ampci_kernels(AMPC_ISA_REF), AMPC_DTYPE_F32), "ampc_k_gemm_f32f32__ref");
}

/* Every (M, N, K) of the brief's size list; the layout and beta rotate with the size index so that each
 * of the 8 combinations meets every size class. */
static void test_sizes(void **state) {
    (void)state;
    static const int64_t S[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 200};
    enum { NS = sizeof S / sizeof S[0] };
    for (int v = 0; v < g_nvar; v++) {
        double worst = 0;
        int idx = 0;
        for (int im = 0; im < NS; im++)
            for (int in = 0; in < NS; in++)
                for (int ik = 0; ik < NS; ik++, idx++) {
                    int combo = (idx * 5 + im) & 7;
                    double r = one(&g_var[v], S[im], S[in], S[ik], combo & 1, (combo >> 1) & 1,
                                   (combo >> 2) & 1 ? 1.0f : 0.0f, 1 + idx % 17);
                    if (r > worst) worst = r;
                }
        printf("  %-34s sizes sweep: worst normwise error / bound %.3f\n", g_var[v].name, worst);
    }
}

/* Every layout and beta at the tile edges: MR +-1, 2 MR + 1 and MS_MAX MR + 1 rows, NR +-1 and 2 NR + 1
 * columns, K at 1, 2 and around KC (F32: 384) and KC (BF16: 768). */
static void test_tile_edges(void **state) {
    (void)state;
    static const int64_t Ms[] = {1, 13, 14, 15, 29, 169};
    static const int64_t Ns[] = {1, 31, 32, 33, 65};
    static const int64_t Ks[] = {1, 2, 383, 384, 385, 767, 769};
    for (int v = 0; v < g_nvar; v++) {
        double worst = 0;
        for (int combo = 0; combo < 8; combo++)
            for (size_t im = 0; im < sizeof Ms / sizeof Ms[0]; im++)
                for (size_t in = 0; in < sizeof Ns / sizeof Ns[0]; in++)
                    for (size_t ik = 0; ik < sizeof Ks / sizeof Ks[0]; ik++) {
                        if (Ms[im] == 169 && (Ks[ik] > 384 || in % 2)) continue; /* keep it quick */
                        double r = one(&g_var[v], Ms[im], Ns[in], Ks[ik], combo & 1, (combo >> 1) & 1,
                                       (combo >> 2) & 1 ? 1.0f : 0.0f, 3 + combo);
                        if (r > worst) worst = r;
                    }
        printf("  %-34s tile edges: worst normwise error / bound %.3f\n", g_var[v].name, worst);
    }
}

/* Shapes that take the threaded paths (above 2^25 multiply-adds, the serial limit of the vdpbf16ps
 * kernel; 2^24 for the others): tasks packing their own B slivers (250x200x700, 300x130x901,
 * 97x45x8000), a shared packed op(b) (1000x256x512), and a shared op(b) in two column chunks
 * (33x1100x2100: K x N above 2^21 words, F32 words only); uneven task cuts. 1 and 2 threads give the
 * same bits, and both agree with ref. */
static void test_threads(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {
        {250, 200, 700}, {300, 130, 901}, {33, 1100, 2100}, {97, 45, 8000}, {1000, 256, 512}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int combo = 0; combo < 8; combo++) {
                if ((s == 2 || s == 4) && combo % 3) continue; /* the big ones: a few layouts */
                const variant *var = &g_var[v];
                prob p = prob_new(var->dt, shapes[s][0], shapes[s][1], shapes[s][2], combo & 1, (combo >> 1) & 1,
                                  (combo >> 2) & 1 ? 1.0f : 0.0f, 5);
                float *f1 = run(g_ctx1, var->fn, &p);
                float *f2 = run(g_ctx2, var->fn, &p);
                size_t nc = (size_t)(p.M * p.ldc) + 1;
                if (memcmp(f1, f2, nc * sizeof(float)) != 0)
                    FAILF("%s: 1 and 2 threads differ", describe(var->name, &p, ""));
                if (combo == 0 || combo == 7 || (s != 2 && s != 4 && combo == 2)) {
                    float *r = run(g_ctx2, g_ref->gemm[var->dt], &p);
                    check(&p, f2, r, describe(var->name, &p, " (2 threads)"));
                    free(r);
                }
                free(f1);
                free(f2);
                prob_free(&p);
            }
    /* and through the contexts' own tables (ref under AMPC_ISA=ref) */
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    for (size_t d = 0; d < 3; d++) {
        prob p = prob_new(dts[d], 150, 70, 300, false, true, 0.0f, 3);
        float *f1 = run(g_ctx1, g_ctx1->kernels->gemm[dts[d]], &p);
        float *f2 = run(g_ctx2, g_ctx2->kernels->gemm[dts[d]], &p);
        assert_memory_equal(f1, f2, (size_t)(p.M * p.ldc) * sizeof(float));
        free(f1);
        free(f2);
        prob_free(&p);
    }
}

/* NaN in a, inf in b, NaN in c: the non-finite pattern is the ref's; beta 0 never reads c. */
static void test_nonfinite(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++)
        for (int combo = 0; combo < 8; combo++) {
            const variant *var = &g_var[v];
            prob p = gh_nonfinite_prob(var->dt, combo, NAN);
            float *r = run(g_ctx1, g_ref->gemm[var->dt], &p);
            float *f = run(g_ctx2, var->fn, &p);
            check(&p, f, r, describe(var->name, &p, " (non-finite inputs)"));
            gh_nonfinite_expect(&p, f);
            free(f);
            free(r);
            prob_free(&p);
        }
    /* beta 0 over a c full of NaN: finite results everywhere */
    for (int v = 0; v < g_nvar; v++) {
        prob p = prob_new(g_var[v].dt, 45, 70, 600, false, false, 0.0f, 4);
        for (int64_t i = 0; i < p.M * p.ldc; i++) p.c0[i] = NAN;
        float *f = run(g_ctx2, g_var[v].fn, &p);
        for (int64_t i = 0; i < p.M; i++)
            for (int64_t j = 0; j < p.N; j++)
                if (!isfinite(f[i * p.ldc + j]))
                    FAILF("%s: beta 0 read the NaN in c[%lld, %lld]", g_var[v].name, (long long)i, (long long)j);
        free(f);
        prob_free(&p);
    }
}

/* BF16 subnormal inputs count at their value; tiny sums: FTZ on the vdpbf16ps path only. */
static void test_bf16_subnormal(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        if (g_var[v].dt != AMPC_DTYPE_BF16) continue;
        /* the fixed cases of gemm_harness.h; only vdpbf16ps flushes tiny sums (FTZ) */
        float c5 = gh_bf16_subnormal(g_var[v].fn, g_var[v].name, g_var[v].bf16dp);
        printf("  %-34s 2^-133*2^100 = 0x1p-33, 2^-133*inf = inf; 2^-70*2^-70 = %a\n", g_var[v].name, c5);

        /* subnormals scattered in a bigger problem: same answers as ref, 1 and 2 threads identical */
        for (int combo = 0; combo < 4; combo++) {
            prob p = prob_new(AMPC_DTYPE_BF16, 60, 70, 700, combo & 1, combo >> 1, 0.0f, 3);
            gh_scatter_tiny(&p, combo, 0x1p-133f, 0x1p123f); /* 2^-133 * 2^123 = 2^-10 */
            float *r = run(g_ctx1, g_ref->gemm[AMPC_DTYPE_BF16], &p);
            float *f1 = run(g_ctx1, g_var[v].fn, &p);
            float *f2 = run(g_ctx2, g_var[v].fn, &p);
            check(&p, f2, r, describe(g_var[v].name, &p, " (subnormal inputs)"));
            assert_memory_equal(f1, f2, (size_t)(p.M * p.ldc) * sizeof(float));
            /* c[32, 33] holds 2^-10 from the subnormal: present in both */
            if (fabsf(f2[32 * p.ldc + 33] - r[32 * p.ldc + 33]) > 1e-3f)
                FAILF("%s: the subnormal's contribution was lost", g_var[v].name);
            free(r);
            free(f1);
            free(f2);
            prob_free(&p);
        }
    }
}

/* Operands that end at a guard page (gemm_harness.h): the masked loads never touch an element past the
 * last one. */
static void test_guard_pages(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1}, {13, 33, 17}, {29, 65, 3}, {15, 31, 769}, {14, 32, 384}, {3, 7, 31}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int combo = 0; combo < 8; combo++) {
                const variant *var = &g_var[v];
                gh_guard_pages(var->fn, g_ref->gemm[var->dt], var->name, var->dt, shapes[s][0], shapes[s][1],
                               shapes[s][2], combo & 1, (combo >> 1) & 1, (combo >> 2) & 1 ? 1.0f : 0.0f);
            }
}

/* ---- benchmark (AMPC_GEMM_BENCH=1) ---- */

static void test_bench(void **state) {
    (void)state;
    if (!gh_bench_wanted() || !g_avx512) {
        printf("  (set AMPC_GEMM_BENCH=1 for GFLOP/s figures)\n");
        return;
    }
    static const int64_t shapes[][3] = {{256, 256, 256},    {512, 512, 512},   {1024, 1024, 1024},
                                        {2048, 2048, 2048}, {2048, 1152, 384}, {2048, 384, 1536},
                                        {2048, 384, 384},   {256, 256, 64},    {128, 784, 1024}};
    const char *only = getenv("AMPC_GEMM_BENCH_LAYOUT"); /* "nn", "nt", "tn", "tt" (default nn) */
    bool ta = only && only[0] == 't', tb = only && only[1] == 't';
    printf("  GFLOP/s, best of 5 (layout %c%c, beta 0)\n", ta ? 't' : 'n', tb ? 't' : 'n');
    printf("  %-20s", "M x N x K");
    for (int v = 0; v < g_nvar; v++) printf(" %17.17s 1t/2t", g_var[v].name + 11);
    printf("\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%lldx%lldx%lld", (long long)shapes[s][0], (long long)shapes[s][1],
                 (long long)shapes[s][2]);
        printf("  %-20s", buf);
        for (int v = 0; v < g_nvar; v++) {
            prob p = prob_new(g_var[v].dt, shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, 0.0f, 0);
            float *c = malloc((size_t)(p.M * p.ldc + 1) * sizeof(float));
            double r1 = gh_bench_one(g_ctx1, g_var[v].fn, &p, c, 0.05, 200e9),
                   r2 = gh_bench_one(g_ctx2, g_var[v].fn, &p, c, 0.05, 200e9);
            printf("   %7.1f / %7.1f", r1, r2);
            fflush(stdout);
            free(c);
            prob_free(&p);
        }
        printf("\n");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),          cmocka_unit_test(test_degenerate), cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_bf16_subnormal), cmocka_unit_test(test_oom),        cmocka_unit_test(test_guard_pages),
        cmocka_unit_test(test_threads),        cmocka_unit_test(test_tile_edges), cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_epilogue),       cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, setup, gh_teardown);
}
