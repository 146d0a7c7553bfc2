/* test_gemm.c: the GEMM kernels of the avx512 level against the ref kernel, for every dtype (F32, F16,
 * BF16 through vdpbf16ps when the CPU has it, and BF16 through widening to F32), every ta/tb layout,
 * beta 0 and 1, leading dimensions above the minimum (the gaps hold NaN, which must never be read), and
 * sizes at and around the kernel's tiles (MR = 14 rows, NR = 32 columns, KC = 384 F32 / 768 BF16 K
 * elements, 168-row tasks, 512-column tasks, column chunks of packed op(b)).
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
 * Set AMPC_GEMM_BENCH=1 to print GFLOP/s for the benchmark shapes (nothing is asserted on speed). */
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS */
#include "test_util.h"

#include "core/core.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static ampc_ctx *g_ctx1, *g_ctx2;   /* 1 and 2 threads */
static struct ampc_kernels g_ref;
static bool g_avx512;

typedef struct variant {
    ampc_dtype dt;
    ampc_k_gemm_fn fn;
    const char *name;
    bool bf16dp;
} variant;
static variant g_var[4];
static int g_nvar;

static int setup(void **state) {
    (void)state;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &g_ctx1) != AMPC_OK) return -1;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 2}, &g_ctx2) != AMPC_OK) return -1;
    ampci_fill_ref_gemm(&g_ref);
    g_avx512 = ampc_cpu()->best >= AMPC_ISA_AVX512;
    if (!g_avx512) {
        printf("  note: this CPU has no AVX-512: only the avx512 level's table is checked (it must be ref)\n");
        return 0;
    }
    struct ampc_kernels k, kw;
    ampci_fill_ref_gemm(&k);
    ampci_fill_avx512_gemm(&k, true);
    ampci_fill_ref_gemm(&kw);
    ampci_fill_avx512_gemm(&kw, false);
    g_var[g_nvar++] = (variant){AMPC_DTYPE_F32, k.gemm[AMPC_DTYPE_F32], k.gemm_name[AMPC_DTYPE_F32], false};
    g_var[g_nvar++] = (variant){AMPC_DTYPE_F16, k.gemm[AMPC_DTYPE_F16], k.gemm_name[AMPC_DTYPE_F16], false};
    g_var[g_nvar++] = (variant){AMPC_DTYPE_BF16, kw.gemm[AMPC_DTYPE_BF16], kw.gemm_name[AMPC_DTYPE_BF16], false};
    if (ampc_cpu_has(AMPC_CPU_AVX512_BF16))
        g_var[g_nvar++] = (variant){AMPC_DTYPE_BF16, k.gemm[AMPC_DTYPE_BF16], k.gemm_name[AMPC_DTYPE_BF16], true};
    else
        printf("  note: no AVX512_BF16: the vdpbf16ps kernel is not tested\n");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ampc_ctx_free(g_ctx1);
    ampc_ctx_free(g_ctx2);
    return 0;
}

/* ---- operands ---- */

/* A stored matrix (rows, cols) with leading dimension ld, in dtype dt; f holds the same values as F32.
 * The gap between cols and ld holds NaN. */
typedef struct mat {
    ampc_dtype dt;
    int64_t rows, cols, ld;
    void *p;
    float *f;
} mat;

static uint64_t g_seed = 12345;

static float rnd_uniform(void) { return (float)((double)(tu_rand(&g_seed) >> 11) * 0x1p-53 * 2.0 - 1.0); }

static mat mat_new(ampc_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
    mat m = {dt, rows, cols, ld, NULL, NULL};
    size_t n = (size_t)(rows * ld) + 1;
    m.f = malloc(n * sizeof(float));
    m.p = malloc(n * ampc_dtype_size(dt));
    assert_non_null(m.f);
    assert_non_null(m.p);
    for (size_t i = 0; i < n; i++) m.f[i] = NAN;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) m.f[r * ld + c] = rnd_uniform();
    ASSERT_OK(ampc_convert(m.p, dt, m.f, AMPC_DTYPE_F32, n));
    ASSERT_OK(ampc_convert(m.f, AMPC_DTYPE_F32, m.p, dt, n));   /* the values the kernels see */
    return m;
}

/* After editing m.f: write it to m.p (exact for values representable in dt). */
static void mat_sync(mat *m) {
    size_t n = (size_t)(m->rows * m->ld) + 1;
    ASSERT_OK(ampc_convert(m->p, m->dt, m->f, AMPC_DTYPE_F32, n));
    ASSERT_OK(ampc_convert(m->f, AMPC_DTYPE_F32, m->p, m->dt, n));
}

static void mat_free(mat *m) {
    free(m->p);
    free(m->f);
}

/* One problem: op(a) (M, K), op(b) (K, N), c (M, N) with ldc, c0 its initial contents. */
typedef struct prob {
    int64_t M, N, K;
    bool ta, tb;
    float beta;
    mat a, b;
    int64_t ldc;
    float *c0;
} prob;

static prob prob_new(ampc_dtype dt, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta, int64_t pad) {
    prob p = {M, N, K, ta, tb, beta, {0}, {0}, N + pad, NULL};
    p.a = ta ? mat_new(dt, K, M, M + pad) : mat_new(dt, M, K, K + pad + 1);
    p.b = tb ? mat_new(dt, N, K, K + pad + 2) : mat_new(dt, K, N, N + pad);
    size_t nc = (size_t)(M * p.ldc) + 1;
    p.c0 = malloc(nc * sizeof(float));
    assert_non_null(p.c0);
    for (size_t i = 0; i < nc; i++) p.c0[i] = rnd_uniform();
    return p;
}

static void prob_free(prob *p) {
    mat_free(&p->a);
    mat_free(&p->b);
    free(p->c0);
}

static ampci_gemm prob_gemm(const prob *p, float *c) {
    return (ampci_gemm){p->M, p->N, p->K, p->a.p, p->a.ld, p->ta, p->b.p, p->b.ld, p->tb, c, p->ldc, p->beta};
}

static float *run(ampc_ctx *ctx, ampc_k_gemm_fn fn, const prob *p) {
    size_t nc = (size_t)(p->M * p->ldc) + 1;
    float *c = malloc(nc * sizeof(float));
    assert_non_null(c);
    memcpy(c, p->c0, nc * sizeof(float));
    ampci_gemm g = prob_gemm(p, c);
    ASSERT_OK(fn(ctx, &g));
    return c;
}

static double op_a(const prob *p, int64_t i, int64_t k) {
    return p->ta ? p->a.f[k * p->a.ld + i] : p->a.f[i * p->a.ld + k];
}
static double op_b(const prob *p, int64_t k, int64_t j) {
    return p->tb ? p->b.f[j * p->b.ld + k] : p->b.f[k * p->b.ld + j];
}

/* Checks fast against ref (see the header); returns ||fast - ref||_F / (4 sqrt(K+2) u ||D||_F). */
static double check(const prob *p, const float *fast, const float *ref, const char *what) {
    const double u = 0x1p-24;
    double gamma = (double)(p->K + 2) * u / (1.0 - (double)(p->K + 2) * u);
    double err2 = 0, d2 = 0;
    for (int64_t i = 0; i < p->M; i++) {
        for (int64_t j = 0; j < p->N; j++) {
            double d = p->beta != 0.0f ? fabs((double)p->beta * p->c0[i * p->ldc + j]) : 0.0;
            for (int64_t k = 0; k < p->K; k++) d += fabs(op_a(p, i, k) * op_b(p, k, j));
            float f = fast[i * p->ldc + j], r = ref[i * p->ldc + j];
            if (isnan(r) || isnan(f) || isinf(r) || isinf(f)) {
                if (isnan(r) != isnan(f) || isinf(r) != isinf(f) || (isinf(r) && signbit(r) != signbit(f)))
                    FAILF("%s: c[%lld, %lld] = %a, ref %a", what, (long long)i, (long long)j, f, r);
                continue;
            }
            double e = fabs((double)f - (double)r);
            /* slack for sums flushed below 2^-126 (vdpbf16ps FTZ); none occur with these inputs */
            if (e > 2 * gamma * d + (double)(p->K + 1) * 0x1p-126)
                FAILF("%s: c[%lld, %lld] = %a, ref %a: error %g above the worst-case bound %g", what, (long long)i,
                      (long long)j, f, r, e, 2 * gamma * d);
            err2 += e * e;
            d2 += d * d;
        }
        for (int64_t j = p->N; j < p->ldc; j++)
            if (tu_bits(fast[i * p->ldc + j]) != tu_bits(p->c0[i * p->ldc + j]))
                FAILF("%s: c[%lld, %lld] beyond N was written", what, (long long)i, (long long)j);
    }
    if (p->M > 0 && tu_bits(fast[p->M * p->ldc]) != tu_bits(p->c0[p->M * p->ldc]))
        FAILF("%s: c written past its last row", what);
    double tol = 4.0 * sqrt((double)(p->K + 2)) * u * sqrt(d2);
    if (sqrt(err2) > tol)
        FAILF("%s: normwise error %g above the bound %g", what, sqrt(err2), tol);
    return tol > 0 ? sqrt(err2) / tol : 0;
}

static char g_what[256];

static const char *describe(const variant *v, const prob *p, const char *extra) {
    snprintf(g_what, sizeof g_what, "%s M=%lld N=%lld K=%lld ta=%d tb=%d beta=%g%s", v->name, (long long)p->M,
             (long long)p->N, (long long)p->K, p->ta, p->tb, (double)p->beta, extra);
    return g_what;
}

/* One problem through ref and the variant (1 and, when big, 2 threads); returns the error ratio. */
static double one(const variant *v, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta, int64_t pad) {
    prob p = prob_new(v->dt, M, N, K, ta, tb, beta, pad);
    float *r = run(g_ctx1, g_ref.gemm[v->dt], &p);
    float *f = run(g_ctx1, v->fn, &p);
    double ratio = check(&p, f, r, describe(v, &p, ""));
    free(f);
    free(r);
    prob_free(&p);
    return ratio;
}

/* ---- tests ---- */

static void test_table(void **state) {
    (void)state;
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AVX512);
    for (int dt = AMPC_DTYPE_F32; dt <= AMPC_DTYPE_BF16; dt++) {
        if (dt != AMPC_DTYPE_F32 && dt != AMPC_DTYPE_F16 && dt != AMPC_DTYPE_BF16) continue;
        assert_non_null(k->gemm[dt]);
        assert_non_null(k->gemm_name[dt]);
    }
    if (!g_avx512 || ampc_cpu()->chosen < AMPC_ISA_AVX512) {
        /* the avx512 level is lowered to what runs here: the ref GEMMs */
        for (int dt = AMPC_DTYPE_F32; dt <= AMPC_DTYPE_BF16; dt++) {
            if (dt != AMPC_DTYPE_F32 && dt != AMPC_DTYPE_F16 && dt != AMPC_DTYPE_BF16) continue;
            if (!g_avx512) assert_ptr_equal(k->gemm[dt], g_ref.gemm[dt]);
            if (!g_avx512) assert_string_equal(k->gemm_name[dt], g_ref.gemm_name[dt]);
        }
        return;
    }
    assert_string_equal(k->gemm_name[AMPC_DTYPE_F32], "ampc_k_gemm_f32f32__avx512");
    assert_string_equal(k->gemm_name[AMPC_DTYPE_F16], "ampc_k_gemm_f16f32__avx512");
    assert_string_equal(k->gemm_name[AMPC_DTYPE_BF16], ampc_cpu_has(AMPC_CPU_AVX512_BF16)
                                                           ? "ampc_k_gemm_bf16f32__avx512bf16"
                                                           : "ampc_k_gemm_bf16f32__avx512");
    /* the ref level keeps the ref GEMMs */
    assert_string_equal(ampci_kernels(AMPC_ISA_REF)->gemm_name[AMPC_DTYPE_F32], "ampc_k_gemm_f32f32__ref");
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
                        if (Ms[im] == 169 && (Ks[ik] > 384 || in % 2)) continue;   /* keep it quick */
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
    static const int64_t shapes[][3] = {{250, 200, 700}, {300, 130, 901}, {33, 1100, 2100}, {97, 45, 8000},
                                        {1000, 256, 512}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int combo = 0; combo < 8; combo++) {
                if ((s == 2 || s == 4) && combo % 3) continue;   /* the big ones: a few layouts */
                const variant *var = &g_var[v];
                prob p = prob_new(var->dt, shapes[s][0], shapes[s][1], shapes[s][2], combo & 1, (combo >> 1) & 1,
                                  (combo >> 2) & 1 ? 1.0f : 0.0f, 5);
                float *f1 = run(g_ctx1, var->fn, &p);
                float *f2 = run(g_ctx2, var->fn, &p);
                size_t nc = (size_t)(p.M * p.ldc) + 1;
                if (memcmp(f1, f2, nc * sizeof(float)) != 0)
                    FAILF("%s: 1 and 2 threads differ", describe(var, &p, ""));
                if (combo == 0 || combo == 7 || (s != 2 && s != 4 && combo == 2)) {
                    float *r = run(g_ctx2, g_ref.gemm[var->dt], &p);
                    check(&p, f2, r, describe(var, &p, " (2 threads)"));
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
            bool ta = combo & 1, tb = (combo >> 1) & 1;
            float beta = (combo >> 2) & 1 ? 1.0f : 0.0f;
            prob p = prob_new(var->dt, 40, 50, 300, ta, tb, beta, 2);
            /* op(a)[3, 7] = NaN, op(a)[20, 299] = NaN (the last K element), op(b)[100, 9] = +inf,
             * op(b)[260, 40] = -inf, op(b)[261, 40] = +inf (inf - inf = NaN where the two a values of the
             * row have the same sign), op(b)[299, 41] = NaN */
            p.a.f[ta ? 7 * p.a.ld + 3 : 3 * p.a.ld + 7] = NAN;
            p.a.f[ta ? 299 * p.a.ld + 20 : 20 * p.a.ld + 299] = NAN;
            p.b.f[tb ? 9 * p.b.ld + 100 : 100 * p.b.ld + 9] = INFINITY;
            p.b.f[tb ? 40 * p.b.ld + 260 : 260 * p.b.ld + 40] = -INFINITY;
            p.b.f[tb ? 40 * p.b.ld + 261 : 261 * p.b.ld + 40] = INFINITY;
            p.b.f[tb ? 41 * p.b.ld + 299 : 299 * p.b.ld + 41] = NAN;
            mat_sync(&p.a);
            mat_sync(&p.b);
            p.c0[5 * p.ldc + 5] = NAN;
            p.c0[6 * p.ldc + 6] = INFINITY;
            float *r = run(g_ctx1, g_ref.gemm[var->dt], &p);
            float *f = run(g_ctx2, var->fn, &p);
            check(&p, f, r, describe(var, &p, " (non-finite inputs)"));
            /* spelled out: rows 3 and 20 all NaN, column 41 all NaN, column 9 +-inf outside rows 3, 20 */
            for (int64_t j = 0; j < p.N; j++) assert_true(isnan(f[3 * p.ldc + j]) && isnan(f[20 * p.ldc + j]));
            for (int64_t i = 0; i < p.M; i++) assert_true(isnan(f[i * p.ldc + 41]));
            assert_true(isinf(f[10 * p.ldc + 9]));
            assert_true(beta == 0.0f ? isfinite(f[5 * p.ldc + 5]) : isnan(f[5 * p.ldc + 5]));
            assert_true(beta == 0.0f ? isfinite(f[6 * p.ldc + 6]) : isinf(f[6 * p.ldc + 6]));
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
                if (!isfinite(f[i * p.ldc + j])) FAILF("%s: beta 0 read the NaN in c[%lld, %lld]", g_var[v].name,
                                                       (long long)i, (long long)j);
        free(f);
        prob_free(&p);
    }
}

/* K = 0 gives beta c (0 for beta 0, even over NaN); M = 0 or N = 0 writes nothing. */
static void test_degenerate(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        float c[6] = {1, 2, NAN, 4, 5, 6};
        ampci_gemm g = {2, 3, 0, c, 1, false, c, 3, false, c, 3, 0.0f};
        ASSERT_OK(g_var[v].fn(g_ctx2, &g));
        for (int i = 0; i < 6; i++) assert_true(tu_bits(c[i]) == 0);
        float d[6] = {1, 2, -3, 4, 5, 6};
        g.c = d, g.beta = 1.0f;
        ASSERT_OK(g_var[v].fn(g_ctx2, &g));
        assert_true(d[2] == -3.0f && d[5] == 6.0f);
        g.M = 0, g.K = 4;
        ASSERT_OK(g_var[v].fn(g_ctx2, &g));
        g.M = 2, g.N = 0;
        ASSERT_OK(g_var[v].fn(g_ctx2, &g));
        assert_true(d[0] == 1.0f && d[5] == 6.0f);
    }
}

/* BF16 subnormal inputs count at their value; tiny sums: FTZ on the vdpbf16ps path only. */
static void test_bf16_subnormal(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        if (g_var[v].dt != AMPC_DTYPE_BF16) continue;
        /* a (2, K) x b (K, 3), K = 5: row 0 of a = [2^-133 (0x0001), 0, 0, 0, 0], row 1 = [2^-70, ...] */
        uint16_t a[2 * 5] = {0x0001, 0, 0, 0, 0, 0x1c80 /* 2^-70 */, 0, 0, 0, 0};
        uint16_t b[5 * 3] = {0x7180 /* 2^100 */, 0x7f80 /* inf */, 0x1c80 /* 2^-70 */};
        float c[2 * 3];
        ampci_gemm g = {2, 3, 5, a, 5, false, b, 3, false, c, 3, 0.0f};
        ASSERT_OK(g_var[v].fn(g_ctx1, &g));
        if (c[0] != 0x1p-33f) FAILF("%s: 2^-133 * 2^100 gave %a, expected 0x1p-33", g_var[v].name, c[0]);
        if (!(isinf(c[1]) && c[1] > 0)) FAILF("%s: 2^-133 * inf gave %a, expected inf", g_var[v].name, c[1]);
        if (c[2] != 0.0f) FAILF("%s: 2^-133 * 2^-70 gave %a, expected 0", g_var[v].name, c[2]);
        if (c[3] != 0x1p30f) FAILF("%s: 2^-70 * 2^100 gave %a", g_var[v].name, c[3]);
        /* In a tile with a subnormal input everything is exact, 2^-140 included */
        if (c[5] != 0x1p-140f) FAILF("%s: 2^-70 * 2^-70 next to a subnormal gave %a", g_var[v].name, c[5]);
        /* Without subnormal inputs: 2^-70 * 2^-70 = 2^-140 is an F32 subnormal, flushed to 0 by vdpbf16ps
         * (FTZ), kept when widening */
        a[0] = 0x3f80;   /* 1 */
        ASSERT_OK(g_var[v].fn(g_ctx1, &g));
        float want = g_var[v].bf16dp ? 0.0f : 0x1p-140f;
        if (c[5] != want) FAILF("%s: 2^-70 * 2^-70 gave %a, expected %a", g_var[v].name, c[5], want);
        if (c[0] != 0x1p100f) FAILF("%s: 1 * 2^100 gave %a", g_var[v].name, c[0]);
        printf("  %-34s 2^-133*2^100 = 0x1p-33, 2^-133*inf = inf; 2^-70*2^-70 = %a\n", g_var[v].name, c[5]);

        /* subnormals scattered in a bigger problem: same answers as ref, 1 and 2 threads identical */
        for (int combo = 0; combo < 4; combo++) {
            prob p = prob_new(AMPC_DTYPE_BF16, 60, 70, 700, combo & 1, combo >> 1, 0.0f, 3);
            uint16_t *ap = p.a.p, *bp = p.b.p;
            ap[(combo & 1) ? 650 * p.a.ld + 31 : 31 * p.a.ld + 650] = 0x8003;   /* -3 * 2^-133 */
            bp[(combo >> 1) ? 33 * p.b.ld + 5 : 5 * p.b.ld + 33] = 0x0055;
            ap[(combo & 1) ? 650 * p.a.ld + 32 : 32 * p.a.ld + 650] = 0x0001;
            bp[(combo >> 1) ? 33 * p.b.ld + 650 : 650 * p.b.ld + 33] = 0x7d00;  /* 2^123: 2^-133 * 2^123 = 2^-10 */
            ASSERT_OK(ampc_convert(p.a.f, AMPC_DTYPE_F32, p.a.p, AMPC_DTYPE_BF16, (size_t)(p.a.rows * p.a.ld) + 1));
            ASSERT_OK(ampc_convert(p.b.f, AMPC_DTYPE_F32, p.b.p, AMPC_DTYPE_BF16, (size_t)(p.b.rows * p.b.ld) + 1));
            float *r = run(g_ctx1, g_ref.gemm[AMPC_DTYPE_BF16], &p);
            float *f1 = run(g_ctx1, g_var[v].fn, &p);
            float *f2 = run(g_ctx2, g_var[v].fn, &p);
            check(&p, f2, r, describe(&g_var[v], &p, " (subnormal inputs)"));
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

/* Operands with the minimum leading dimensions that end exactly where an inaccessible page begins: the
 * kernels' masked loads must never touch an element past the last one (ASan cannot see masked vector
 * loads; the guard page can). c ends at a guard page too. */
typedef struct guarded {
    unsigned char *map;
    size_t len;
    void *p;   /* the object, ending at the guard page */
} guarded;

static guarded guarded_new(size_t bytes) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg;
    guarded g = {NULL, body + pg, NULL};
    g.map = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g.map != MAP_FAILED);
    assert_int_equal(mprotect(g.map + body, pg, PROT_NONE), 0);
    g.p = g.map + body - bytes;
    return g;
}

static void test_guard_pages(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1},     {13, 33, 17},  {29, 65, 3},
                                        {15, 31, 769}, {14, 32, 384}, {3, 7, 31}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int combo = 0; combo < 8; combo++) {
                const variant *var = &g_var[v];
                int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                bool ta = combo & 1, tb = (combo >> 1) & 1;
                float beta = (combo >> 2) & 1 ? 1.0f : 0.0f;
                size_t es = ampc_dtype_size(var->dt);
                guarded ga = guarded_new((size_t)(M * K) * es), gb = guarded_new((size_t)(K * N) * es);
                guarded gc = guarded_new((size_t)(M * N) * sizeof(float));
                float *tmp = malloc((size_t)(M * K + K * N) * sizeof(float));
                for (int64_t i = 0; i < M * K + K * N; i++) tmp[i] = rnd_uniform();
                ASSERT_OK(ampc_convert(ga.p, var->dt, tmp, AMPC_DTYPE_F32, (size_t)(M * K)));
                ASSERT_OK(ampc_convert(gb.p, var->dt, tmp + M * K, AMPC_DTYPE_F32, (size_t)(K * N)));
                float *c = gc.p, *cr = malloc((size_t)(M * N) * sizeof(float));
                for (int64_t i = 0; i < M * N; i++) c[i] = cr[i] = (float)i;
                ampci_gemm g = {M, N, K, ga.p, ta ? M : K, ta, gb.p, tb ? K : N, tb, c, N, beta};
                ASSERT_OK(var->fn(g_ctx2, &g));
                g.c = cr;
                ASSERT_OK(g_ref.gemm[var->dt](g_ctx1, &g));
                for (int64_t i = 0; i < M * N; i++)
                    if (fabsf(c[i] - cr[i]) > 1e-4f * (float)(K + 1))
                        FAILF("%s M=%lld N=%lld K=%lld ta=%d tb=%d: c[%lld] = %g, ref %g", var->name, (long long)M,
                              (long long)N, (long long)K, ta, tb, (long long)i, c[i], cr[i]);
                free(tmp);
                free(cr);
                munmap(ga.map, ga.len);
                munmap(gb.map, gb.len);
                munmap(gc.map, gc.len);
            }
}

/* The scratch allocation failing gives AMPC_STATUS_OOM with a message. */
static void *fail_alloc(void *user, size_t size, size_t align) {
    (void)user, (void)size, (void)align;
    return NULL;
}
static void never_free(void *user, void *p, size_t size) { (void)user, (void)p, (void)size; }

static void test_oom(void **state) {
    (void)state;
    ampc_ctx *ctx;
    /* the context itself allocates through its allocator: build it first, then switch */
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1}, &ctx));
    ampc_allocator saved = ctx->alloc;
    ctx->alloc = (ampc_allocator){fail_alloc, never_free, NULL};
    for (int v = 0; v < g_nvar; v++) {
        prob p = prob_new(g_var[v].dt, 20, 20, 20, false, false, 0.0f, 1);
        float c[20 * 21];
        ampci_gemm g = prob_gemm(&p, c);
        assert_int_equal(g_var[v].fn(ctx, &g), AMPC_STATUS_OOM);
        assert_non_null(strstr(ampc_last_error(), "gemm"));
        prob_free(&p);
    }
    ctx->alloc = saved;
    ampc_ctx_free(ctx);
}

/* ---- benchmark (AMPC_GEMM_BENCH=1) ---- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double bench_one(ampc_ctx *ctx, ampc_k_gemm_fn fn, const prob *p, float *c) {
    ampci_gemm g = prob_gemm(p, c);
    ASSERT_OK(fn(ctx, &g));
    double flop = 2.0 * (double)p->M * (double)p->N * (double)p->K, best = 0;
    int reps = (int)(0.05 / (flop / 200e9)) + 1;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++) fn(ctx, &g);
        double rate = flop * reps / (now_s() - t0) / 1e9;
        if (rate > best) best = rate;
    }
    return best;
}

static void test_bench(void **state) {
    (void)state;
    const char *e = getenv("AMPC_GEMM_BENCH");
    if (!e || !*e || !strcmp(e, "0") || !g_avx512) {
        printf("  (set AMPC_GEMM_BENCH=1 for GFLOP/s figures)\n");
        return;
    }
    static const int64_t shapes[][3] = {{256, 256, 256},   {512, 512, 512},  {1024, 1024, 1024},
                                        {2048, 2048, 2048}, {2048, 1152, 384}, {2048, 384, 1536},
                                        {2048, 384, 384},   {256, 256, 64},    {128, 784, 1024}};
    const char *only = getenv("AMPC_GEMM_BENCH_LAYOUT");   /* "nn", "nt", "tn", "tt" (default nn) */
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
            double r1 = bench_one(g_ctx1, g_var[v].fn, &p, c), r2 = bench_one(g_ctx2, g_var[v].fn, &p, c);
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
        cmocka_unit_test(test_table),       cmocka_unit_test(test_degenerate),   cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_bf16_subnormal), cmocka_unit_test(test_oom),       cmocka_unit_test(test_guard_pages),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_tile_edges),  cmocka_unit_test(test_sizes),        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
