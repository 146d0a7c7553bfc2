/* gemm_harness.h: what the GEMM kernel tests (test_gemm.c: the GEMM entries of the registry outside the
 * amx folder; test_amx.c: the amx folder's through the tile emulation, and the split F32 entries) share,
 * so that each file keeps only its variants, its error bounds and the cases specific to its kernels: the
 * two contexts (1 and 2 threads) and the ref kernel table, seeded operands whose leading-dimension gaps
 * hold NaN (the entries under test come from kernel_check.h), problems (prob_new, run), failure
 * descriptions, and the checks that hold for every GEMM kernel whatever its error bound: the non-finite
 * pattern element by element, c untouched beyond N and past its last row, the normwise bound, the
 * non-finite input pattern, BF16 subnormal and tiny inputs, operands that end at a guard page, the
 * benchmark timer, and three whole cmocka tests (test_degenerate: K = 0, M = 0, N = 0; test_oom: the
 * scratch allocation failing; test_epilogue: the write-out's bias and 16-bit results). Everything is static inline: one copy per test program, no unused-function
 * warnings, no extra source in tests/CMakeLists.txt. Define _DEFAULT_SOURCE before the first include
 * (MAP_ANONYMOUS). */
#ifndef AMPC_TEST_GEMM_HARNESS_H
#define AMPC_TEST_GEMM_HARNESS_H

#include "kernel_check.h"

#include "core/core.h"
#include "kernels/kernels.h"
#include "numerics/half.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static ampc_ctx *g_ctx1, *g_ctx2;        /* 1 and 2 threads */
static const struct ampc_kernels *g_ref; /* the ref level's table: its GEMMs are the ref entries */
static uint64_t g_seed;                  /* each test file keeps its own stream (gh_setup) */
static bool g_beta0_nan_c;               /* prob_new fills c with NaN for beta 0 (which must never read it) */
static double g_epilogue_work = 1e300;   /* test_epilogue skips larger problems (M N K) of the registered kernels */

/* The kernels under test as the file's setup registers them (gh_add); test_degenerate and test_oom below
 * run on each. A file keeps its own variant table for what only it needs. */
typedef struct gh_kernel {
    const char *name;
    ampc_dtype dt;
    ampc_k_gemm_fn fn;
} gh_kernel;
static gh_kernel g_kernels[8];
static int g_nkernels;

static inline void gh_add(const char *name, ampc_dtype dt, ampc_k_gemm_fn fn) {
    if (g_nkernels == (int)(sizeof g_kernels / sizeof g_kernels[0])) { /* never silently untested */
        fprintf(stderr, "gemm_harness.h: g_kernels is full, %s not added\n", name);
        abort();
    }
    g_kernels[g_nkernels++] = (gh_kernel){name, dt, fn};
}

/* The group setup's common part: the contexts, the ref GEMMs, the input stream. */
static inline int gh_setup(uint64_t seed, bool beta0_nan_c) {
    g_seed = seed;
    g_beta0_nan_c = beta0_nan_c;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &g_ctx1) != AMPC_OK) return -1;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 2}, &g_ctx2) != AMPC_OK) return -1;
    g_ref = ampci_kernels(AMPC_ISA_REF);
    return 0;
}

static inline int gh_teardown(void **state) {
    (void)state;
    ampc_ctx_free(g_ctx1);
    ampc_ctx_free(g_ctx2);
    return 0;
}

/* ---- operands ---- */

static inline float rnd_uniform(void) { return (float)((double)(tu_rand(&g_seed) >> 11) * 0x1p-53 * 2.0 - 1.0); }

/* A stored matrix (rows, cols) with leading dimension ld, in dtype dt; f holds the same values as F32.
 * The gap between cols and ld holds NaN (a kernel that reads it poisons its result). */
typedef struct mat {
    ampc_dtype dt;
    int64_t rows, cols, ld;
    void *p;
    float *f;
} mat;

/* After editing m.f: write it to m.p (exact for values representable in dt), and back, so that f holds
 * the values the kernels see. */
static inline void mat_sync(mat *m) {
    size_t n = (size_t)(m->rows * m->ld) + 1;
    ASSERT_OK(ampc_convert(m->p, m->dt, m->f, AMPC_DTYPE_F32, n));
    ASSERT_OK(ampc_convert(m->f, AMPC_DTYPE_F32, m->p, m->dt, n));
}

static inline mat mat_new(ampc_dtype dt, int64_t rows, int64_t cols, int64_t ld) {
    mat m = {dt, rows, cols, ld, NULL, NULL};
    size_t n = (size_t)(rows * ld) + 1;
    m.f = malloc(n * sizeof(float));
    m.p = malloc(n * ampc_dtype_size(dt));
    assert_non_null(m.f);
    assert_non_null(m.p);
    for (size_t i = 0; i < n; i++) m.f[i] = NAN;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) m.f[r * ld + c] = rnd_uniform();
    mat_sync(&m);
    return m;
}

static inline void mat_free(mat *m) {
    free(m->p);
    free(m->f);
}

/* One problem: op(a) (M, K), op(b) (K, N), c (M, N) with ldc, c0 its initial contents (one element past
 * the last row, to catch a write there). */
typedef struct prob {
    int64_t M, N, K;
    bool ta, tb;
    float beta;
    mat a, b;
    int64_t ldc;
    float *c0;
} prob;

/* pad: how far each leading dimension exceeds its minimum (a and b get different extras, so that no
 * stride coincides with another). */
static inline prob prob_new(ampc_dtype dt, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float beta, int64_t pad) {
    prob p = {M, N, K, ta, tb, beta, {0}, {0}, N + pad, NULL};
    p.a = ta ? mat_new(dt, K, M, M + pad) : mat_new(dt, M, K, K + pad + 1);
    p.b = tb ? mat_new(dt, N, K, K + pad + 2) : mat_new(dt, K, N, N + pad);
    size_t nc = (size_t)(M * p.ldc) + 1;
    p.c0 = malloc(nc * sizeof(float));
    assert_non_null(p.c0);
    for (size_t i = 0; i < nc; i++) p.c0[i] = g_beta0_nan_c && beta == 0.0f ? NAN : rnd_uniform();
    return p;
}

static inline void prob_free(prob *p) {
    mat_free(&p->a);
    mat_free(&p->b);
    free(p->c0);
}

static inline ampci_gemm prob_gemm(const prob *p, float *c) {
    return (ampci_gemm){p->M,  p->N, p->K,   p->a.p,  p->a.ld, p->ta, p->b.p,        p->b.ld,
                        p->tb, c,    p->ldc, p->beta, NULL,    NULL,  AMPC_DTYPE_F32};
}

/* fn on a fresh copy of c0; the caller frees the result. */
static inline float *run(ampc_ctx *ctx, ampc_k_gemm_fn fn, const prob *p) {
    size_t nc = (size_t)(p->M * p->ldc) + 1;
    float *c = malloc(nc * sizeof(float));
    assert_non_null(c);
    memcpy(c, p->c0, nc * sizeof(float));
    ampci_gemm g = prob_gemm(p, c);
    ASSERT_OK(fn(ctx, &g));
    return c;
}

static inline double op_a(const prob *p, int64_t i, int64_t k) {
    return p->ta ? p->a.f[k * p->a.ld + i] : p->a.f[i * p->a.ld + k];
}
static inline double op_b(const prob *p, int64_t k, int64_t j) {
    return p->tb ? p->b.f[j * p->b.ld + k] : p->b.f[k * p->b.ld + j];
}

/* "name M=.. N=.. K=.. ta=.. tb=.. beta=..extra", in a static buffer (valid until the next call). */
static inline const char *describe(const char *name, const prob *p, const char *extra) {
    static char what[256];
    snprintf(what, sizeof what, "%s M=%lld N=%lld K=%lld ta=%d tb=%d beta=%g%s", name, (long long)p->M, (long long)p->N,
             (long long)p->K, p->ta, p->tb, (double)p->beta, extra);
    return what;
}

/* ---- checks every kernel's result must pass ---- */

static inline double gamma_n(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }

/* c[i, j] = f against the expected `want`: when either is NaN or inf, true (the element takes no part in
 * the error bounds), and they must be alike: NaN for NaN, inf of the same sign for inf. */
static inline bool gh_nonfinite(float f, float want, int64_t i, int64_t j, const char *what) {
    if (isfinite(f) && isfinite(want)) return false;
    if (isnan(f) != isnan(want) || isinf(f) != isinf(want) || (isinf(want) && signbit(f) != signbit(want)))
        FAILF("%s: c[%lld, %lld] = %a, expected %a", what, (long long)i, (long long)j, f, want);
    return true;
}

/* A kernel writes c[0..M) x [0..N) only: the gaps up to ldc and the element past the last row keep c0's
 * bits. */
static inline void gh_untouched(const prob *p, const float *c, const char *what) {
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = p->N; j < p->ldc; j++)
            if (tu_bits(c[i * p->ldc + j]) != tu_bits(p->c0[i * p->ldc + j]))
                FAILF("%s: c[%lld, %lld] beyond N was written", what, (long long)i, (long long)j);
    if (p->M > 0 && tu_bits(c[p->M * p->ldc]) != tu_bits(p->c0[p->M * p->ldc]))
        FAILF("%s: c written past its last row", what);
}

/* ||c - ref||_F = sqrt(err2) against its bound tol; returns the ratio (0 for a zero bound). */
static inline double gh_normwise(double err2, double tol, const char *what) {
    if (sqrt(err2) > tol) FAILF("%s: normwise error %g above the bound %g", what, sqrt(err2), tol);
    return tol > 0 ? sqrt(err2) / tol : 0;
}

/* ---- cases every GEMM kernel must pass ---- */

/* K = 0 gives beta c (0 for beta 0, even over NaN); M = 0 or N = 0 writes nothing. */
static inline void test_degenerate(void **state) {
    (void)state;
    for (int v = 0; v < g_nkernels; v++) {
        ampc_k_gemm_fn fn = g_kernels[v].fn;
        float c[6] = {1, 2, NAN, 4, 5, 6};
        ampci_gemm g = {2, 3, 0, c, 1, false, c, 3, false, c, 3, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
        ASSERT_OK(fn(g_ctx2, &g));
        for (int i = 0; i < 6; i++) assert_true(tu_bits(c[i]) == 0);
        float d[6] = {1, 2, -3, 4, 5, 6};
        g.c = d, g.beta = 1.0f;
        ASSERT_OK(fn(g_ctx2, &g));
        assert_true(d[2] == -3.0f && d[5] == 6.0f);
        g.M = 0, g.K = 4;
        ASSERT_OK(fn(g_ctx2, &g));
        g.M = 2, g.N = 0;
        ASSERT_OK(fn(g_ctx2, &g));
        assert_true(d[0] == 1.0f && d[5] == 6.0f);
    }
}

/* A (40, 50, 300) problem (combo: bit 0 ta, bit 1 tb, bit 2 beta 1, else 0) with non-finite inputs:
 * op(a)[3, 7] = nan37, op(a)[20, 299] = NaN (the last K element), op(b)[100, 9] = +inf, op(b)[260, 40] =
 * -inf, op(b)[261, 40] = +inf (inf - inf = NaN where the two a values of the row have the same sign),
 * op(b)[299, 41] = NaN; c0[5, 5] = NaN, c0[6, 6] = inf (read by beta 1 only). */
static inline prob gh_nonfinite_prob(ampc_dtype dt, int combo, float nan37) {
    bool ta = combo & 1, tb = (combo >> 1) & 1;
    prob p = prob_new(dt, 40, 50, 300, ta, tb, (combo >> 2) & 1 ? 1.0f : 0.0f, 2);
    p.a.f[ta ? 7 * p.a.ld + 3 : 3 * p.a.ld + 7] = nan37;
    p.a.f[ta ? 299 * p.a.ld + 20 : 20 * p.a.ld + 299] = NAN;
    p.b.f[tb ? 9 * p.b.ld + 100 : 100 * p.b.ld + 9] = INFINITY;
    p.b.f[tb ? 40 * p.b.ld + 260 : 260 * p.b.ld + 40] = -INFINITY;
    p.b.f[tb ? 40 * p.b.ld + 261 : 261 * p.b.ld + 40] = INFINITY;
    p.b.f[tb ? 41 * p.b.ld + 299 : 299 * p.b.ld + 41] = NAN;
    mat_sync(&p.a);
    mat_sync(&p.b);
    p.c0[5 * p.ldc + 5] = NAN;
    p.c0[6 * p.ldc + 6] = INFINITY;
    return p;
}

/* Their effect on c, spelled out: rows 3 and 20 all NaN, column 41 all NaN, column 9 +-inf outside rows
 * 3, 20; c[5, 5] and c[6, 6] finite for beta 0, NaN and inf for beta 1. */
static inline void gh_nonfinite_expect(const prob *p, const float *f) {
    for (int64_t j = 0; j < p->N; j++) assert_true(isnan(f[3 * p->ldc + j]) && isnan(f[20 * p->ldc + j]));
    for (int64_t i = 0; i < p->M; i++) assert_true(isnan(f[i * p->ldc + 41]));
    assert_true(isinf(f[10 * p->ldc + 9]));
    assert_true(p->beta == 0.0f ? isfinite(f[5 * p->ldc + 5]) : isnan(f[5 * p->ldc + 5]));
    assert_true(p->beta == 0.0f ? isfinite(f[6 * p->ldc + 6]) : isinf(f[6 * p->ldc + 6]));
}

/* BF16 subnormal inputs count at their value: a (2, 5) x b (5, 3), row 0 of a = [2^-133 (0x0001), 0...],
 * row 1 = [2^-70, 0...], row 0 of b = [2^100, inf, 2^-70]: 2^-133 * 2^100 = 2^-33, 2^-133 * inf = inf
 * (not NaN), and in a tile with a subnormal input everything is exact, 2^-140 included. Then without
 * the subnormal, 2^-70 * 2^-70 = 2^-140 (an F32 subnormal) is flushed to 0 where the kernel's sums are
 * FTZ (ftz), kept otherwise. Returns that last c[1, 2]. */
static inline float gh_bf16_subnormal(ampc_k_gemm_fn fn, const char *name, bool ftz) {
    uint16_t a[2 * 5] = {0x0001, 0, 0, 0, 0, 0x1c80 /* 2^-70 */, 0, 0, 0, 0};
    uint16_t b[5 * 3] = {0x7180 /* 2^100 */, 0x7f80 /* inf */, 0x1c80 /* 2^-70 */};
    float c[2 * 3];
    ampci_gemm g = {2, 3, 5, a, 5, false, b, 3, false, c, 3, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
    ASSERT_OK(fn(g_ctx1, &g));
    if (c[0] != 0x1p-33f) FAILF("%s: 2^-133 * 2^100 gave %a, expected 0x1p-33", name, c[0]);
    if (!(isinf(c[1]) && c[1] > 0)) FAILF("%s: 2^-133 * inf gave %a, expected inf", name, c[1]);
    if (c[2] != 0.0f) FAILF("%s: 2^-133 * 2^-70 gave %a, expected 0", name, c[2]);
    if (c[3] != 0x1p30f) FAILF("%s: 2^-70 * 2^100 gave %a", name, c[3]);
    if (c[5] != 0x1p-140f) FAILF("%s: 2^-70 * 2^-70 next to a subnormal gave %a", name, c[5]);
    a[0] = 0x3f80; /* 1 */
    ASSERT_OK(fn(g_ctx1, &g));
    float want = ftz ? 0.0f : 0x1p-140f;
    if (c[5] != want) FAILF("%s: 2^-70 * 2^-70 gave %a, expected %a", name, c[5], want);
    if (c[0] != 0x1p100f) FAILF("%s: 1 * 2^100 gave %a", name, c[0]);
    return c[5];
}

/* Tiny values scattered in a (60, 70, 700) problem (combo: bit 0 ta, bit 1 tb): op(a)[31, 650] =
 * -3 tiny, op(b)[5, 33] = 85 tiny, op(a)[32, 650] = tiny, op(b)[650, 33] = big, so that c[32, 33] holds
 * tiny * big. */
static inline void gh_scatter_tiny(prob *p, int combo, float tiny, float big) {
    p->a.f[(combo & 1) ? 650 * p->a.ld + 31 : 31 * p->a.ld + 650] = -3 * tiny;
    p->b.f[(combo >> 1) ? 33 * p->b.ld + 5 : 5 * p->b.ld + 33] = 85 * tiny;
    p->a.f[(combo & 1) ? 650 * p->a.ld + 32 : 32 * p->a.ld + 650] = tiny;
    p->b.f[(combo >> 1) ? 33 * p->b.ld + 650 : 650 * p->b.ld + 33] = big;
    mat_sync(&p->a);
    mat_sync(&p->b);
}

/* Operands with the minimum leading dimensions that end exactly where an inaccessible page begins: no
 * kernel may read an element past the last one (masked vector loads are invisible to ASan; the guard
 * page sees them). c ends at a guard page too. */
typedef struct guarded {
    unsigned char *map;
    size_t len;
    void *p; /* the object, ending at the guard page */
} guarded;

static inline guarded guarded_new(size_t bytes) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg;
    guarded g = {NULL, body + pg, NULL};
    g.map = mmap(NULL, g.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(g.map != MAP_FAILED);
    assert_int_equal(mprotect(g.map + body, pg, PROT_NONE), 0);
    g.p = g.map + body - bytes;
    return g;
}

/* fn (2 threads) on guarded operands against ref (1 thread) on the same ones, to a loose tolerance: the
 * point is the memory access, the error bounds are checked elsewhere. */
static inline void gh_guard_pages(ampc_k_gemm_fn fn, ampc_k_gemm_fn ref, const char *name, ampc_dtype dt, int64_t M,
                                  int64_t N, int64_t K, bool ta, bool tb, float beta) {
    size_t es = ampc_dtype_size(dt);
    guarded ga = guarded_new((size_t)(M * K) * es), gb = guarded_new((size_t)(K * N) * es);
    guarded gc = guarded_new((size_t)(M * N) * sizeof(float));
    float *tmp = malloc((size_t)(M * K + K * N) * sizeof(float));
    assert_non_null(tmp);
    for (int64_t i = 0; i < M * K + K * N; i++) tmp[i] = rnd_uniform();
    ASSERT_OK(ampc_convert(ga.p, dt, tmp, AMPC_DTYPE_F32, (size_t)(M * K)));
    ASSERT_OK(ampc_convert(gb.p, dt, tmp + M * K, AMPC_DTYPE_F32, (size_t)(K * N)));
    float *c = gc.p, *cr = malloc((size_t)(M * N) * sizeof(float));
    assert_non_null(cr);
    for (int64_t i = 0; i < M * N; i++) c[i] = cr[i] = (float)i;
    ampci_gemm g = {M, N, K, ga.p, ta ? M : K, ta, gb.p, tb ? K : N, tb, c, N, beta, NULL, NULL, AMPC_DTYPE_F32};
    ASSERT_OK(fn(g_ctx2, &g));
    g.c = cr;
    ASSERT_OK(ref(g_ctx1, &g));
    for (int64_t i = 0; i < M * N; i++)
        if (fabsf(c[i] - cr[i]) > 1e-4f * (float)(K + 1))
            FAILF("%s M=%lld N=%lld K=%lld ta=%d tb=%d: c[%lld] = %g, ref %g", name, (long long)M, (long long)N,
                  (long long)K, ta, tb, (long long)i, c[i], cr[i]);
    free(tmp);
    free(cr);
    munmap(ga.map, ga.len);
    munmap(gb.map, gb.len);
    munmap(gc.map, gc.len);
}

/* The scratch allocation failing gives AMPC_STATUS_OOM with a message. */
static inline void *gh_fail_alloc(void *user, size_t size, size_t align) {
    (void)user, (void)size, (void)align;
    return NULL;
}
static inline void gh_never_free(void *user, void *p, size_t size) { (void)user, (void)p, (void)size; }

static inline void test_oom(void **state) {
    (void)state;
    ampc_ctx *ctx;
    /* the context itself allocates through its allocator: build it first, then switch */
    ASSERT_OK(ampc_ctx_new(&(ampc_ctx_params){.threads = 1}, &ctx));
    ampc_allocator saved = ctx->alloc;
    ctx->alloc = (ampc_allocator){gh_fail_alloc, gh_never_free, NULL};
    for (int v = 0; v < g_nkernels; v++) {
        prob p = prob_new(g_kernels[v].dt, 20, 20, 20, false, false, 0.0f, 1);
        float c[20 * 21];
        ampci_gemm g = prob_gemm(&p, c);
        assert_int_equal(g_kernels[v].fn(ctx, &g), AMPC_STATUS_OOM);
        assert_non_null(strstr(ampc_last_error(), "gemm"));
        prob_free(&p);
    }
    ctx->alloc = saved;
    ampc_ctx_free(ctx);
}

/* ---- the write-out (kernels.h): a bias, a 16-bit result ---- */

/* v rounded once to dt (BF16 or F16) by half.h. */
static inline uint16_t gh_round16(ampc_dtype dt, float v) {
    return dt == AMPC_DTYPE_F16 ? ampci_f16_from_f32_bits(tu_bits(v)) : ampci_bf16_from_f32_bits(tu_bits(v));
}

/* got (a 16-bit pattern of dt) against want (F32, before rounding): the same bits, or NaN for NaN (the
 * payload of a sum of two NaNs is the adder's choice). */
static inline void gh_same16(ampc_dtype dt, uint16_t got, float want, int64_t i, int64_t j, const char *what) {
    uint16_t w = gh_round16(dt, want);
    if (got == w) return;
    uint16_t e = dt == AMPC_DTYPE_F16 ? 0x7c00u : 0x7f80u;
    if (isnan(want) && (got & e) == e && (got & (uint16_t) ~(e | 0x8000u)) != 0) return;
    FAILF("%s: c16[%lld, %lld] = 0x%04x, expected 0x%04x (%a rounded)", what, (long long)i, (long long)j, got, w, want);
}

/* One problem through fn: with a bias, c is bit for bit its bias-free result plus the bias (one F32 add
 * after the whole K sum); with c16 (beta 0), that result (or the bias-free one) rounded once by half.h,
 * for BF16 and F16, c16's gaps untouched and c never touched (NULL). */
static inline void gh_epilogue_one(ampc_ctx *ctx, ampc_k_gemm_fn fn, const char *name, ampc_dtype dt, int64_t M,
                                   int64_t N, int64_t K, int combo) {
    prob p = prob_new(dt, M, N, K, combo & 1, (combo >> 1) & 1, (combo >> 2) & 1 ? 1.0f : 0.0f, 3);
    const char *what = describe(name, &p, " (bias)");
    float *bias = malloc((size_t)N * sizeof *bias);
    assert_non_null(bias);
    for (int64_t j = 0; j < N; j++) bias[j] = j % 11 == 5 ? -0.0f : j % 13 == 7 ? 0x1p-140f : 4 * rnd_uniform();
    float *plain = run(ctx, fn, &p), *c = malloc((size_t)(p.M * p.ldc + 1) * sizeof *c);
    assert_non_null(c);
    memcpy(c, p.c0, (size_t)(p.M * p.ldc + 1) * sizeof *c);
    ampci_gemm g = prob_gemm(&p, c);
    g.bias = bias;
    ASSERT_OK(fn(ctx, &g));
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float got = c[i * p.ldc + j], want = plain[i * p.ldc + j] + bias[j];
            if (tu_bits(got) != tu_bits(want) && !(isnan(got) && isnan(want)))
                FAILF("%s: c[%lld, %lld] = %a, expected %a + %a", what, (long long)i, (long long)j, got,
                      plain[i * p.ldc + j], bias[j]);
        }
    gh_untouched(&p, c, what);
    static const ampc_dtype d16[2] = {AMPC_DTYPE_BF16, AMPC_DTYPE_F16};
    size_t n16 = (size_t)(p.M * p.ldc) + 1;
    uint16_t *c16 = malloc(n16 * sizeof *c16);
    assert_non_null(c16);
    for (int k = 1; k < 3 && p.beta == 0.0f; k++) { /* BF16 with the bias, F16 without */
        for (size_t i = 0; i < n16; i++) c16[i] = 0xabcd;
        g = prob_gemm(&p, NULL);
        g.bias = k & 1 ? bias : NULL, g.c16 = c16, g.c16_dt = d16[k >> 1];
        ASSERT_OK(fn(ctx, &g));
        what = describe(name, &p, k >> 1 ? " (F16 result)" : " (BF16 result)");
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < p.ldc; j++) {
                uint16_t got = c16[i * p.ldc + j];
                if (j >= N && got != 0xabcd)
                    FAILF("%s: c16[%lld, %lld] beyond N was written", what, (long long)i, (long long)j);
                if (j < N) gh_same16(d16[k >> 1], got, k & 1 ? c[i * p.ldc + j] : plain[i * p.ldc + j], i, j, what);
            }
        if (c16[n16 - 1] != 0xabcd) FAILF("%s: c16 written past its last row", what);
    }
    free(c16);
    free(c);
    free(plain);
    free(bias);
    prob_free(&p);
}

/* gh_epilogue_one at sizes around every kernel's tiles and K-blocks (avx512: 14 x 32, KC 384 / 768;
 * AMX: 32 x 32, KC 512 / 256), every layout, beta 0 and 1; the largest on 2 threads, up to max_work
 * multiply-adds. */
static inline void gh_epilogue(ampc_k_gemm_fn fn, const char *name, ampc_dtype dt, double max_work) {
    static const int64_t shapes[][3] = {{1, 1, 1},    {13, 31, 17},  {15, 33, 385}, {29, 65, 257},  {33, 47, 513},
                                        {32, 32, 64}, {70, 40, 800}, {3, 7, 0},     {250, 200, 700}};
    enum { NSH = sizeof shapes / sizeof shapes[0] };
    for (int s = 0; s < NSH; s++)
        for (int combo = 0; combo < 8; combo++) {
            if ((s == NSH - 1 && combo % 3) || (double)(shapes[s][0] * shapes[s][1] * shapes[s][2]) > max_work)
                continue; /* the big one: a few layouts */
            gh_epilogue_one(s == NSH - 1 ? g_ctx2 : g_ctx1, fn, name, dt, shapes[s][0], shapes[s][1], shapes[s][2],
                            combo);
        }
}

/* Every registered kernel and the ref GEMMs. */
static inline void test_epilogue(void **state) {
    (void)state;
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    for (int d = 0; d < 3; d++) gh_epilogue(g_ref->gemm[dts[d]], "ref", dts[d], 1e300);
    for (int v = 0; v < g_nkernels; v++)
        gh_epilogue(g_kernels[v].fn, g_kernels[v].name, g_kernels[v].dt, g_epilogue_work);
}

/* ---- benchmark (AMPC_GEMM_BENCH=1; nothing is asserted on speed) ---- */

static inline bool gh_bench_wanted(void) {
    const char *e = getenv("AMPC_GEMM_BENCH");
    return e && *e && strcmp(e, "0") != 0;
}

static inline double gh_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best GFLOP/s of 5 trials; each trial repeats the call for about `seconds` at `guess` flop/s. */
static inline double gh_bench_one(ampc_ctx *ctx, ampc_k_gemm_fn fn, const prob *p, float *c, double seconds,
                                  double guess) {
    ampci_gemm g = prob_gemm(p, c);
    ASSERT_OK(fn(ctx, &g));
    double flop = 2.0 * (double)p->M * (double)p->N * (double)p->K, best = 0;
    int reps = (int)(seconds / (flop / guess)) + 1;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = gh_now_s();
        for (int r = 0; r < reps; r++) ASSERT_OK(fn(ctx, &g));
        double rate = flop * reps / (gh_now_s() - t0) / 1e9;
        if (rate > best) best = rate;
    }
    return best;
}

#endif
