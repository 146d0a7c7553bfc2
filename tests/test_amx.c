/* test_amx.c: the amx folder's GEMM entries (kernels/amx/gemm_amx.c) through an emulation of the tile
 * instructions, and every other split F32 entry of the registry (today the AVX-512 F32-as-one-BF16-pass
 * GEMM, on any CPU with AVX512-BF16). This file #includes gemm_amx.c with AMPCI_AMX_EMULATE defined: the
 * same packing, blocking, threading and micro-kernel code runs with every tile instruction replaced by
 * portable C that follows the Intel SDM pseudo-code (kernels/amx/amx_tile.h), so the whole kernel is
 * checked on any x86-64; that build's own table (ampci_kernels_amx_emu) lists the folder's entries, so a
 * new one is tested here without edits. Where the CPU has AMX (with the tile permission), the library's
 * native kernels run on every problem too and must give the emulation's bits (NaN payloads aside).
 *
 * Variants, each against its cell's ref entry: BF16 (ref: gemm_ref BF16), F16 as BF16 x3 (ref: gemm_ref
 * F16, exact products), F32 as BF16 x1 and x3 (ref: the split oracles ampc_k_gemm_f32_bf16x1/x3__ref),
 * and the avx512 level's gemm_f32_bf16x1 (ref: the one-pass split oracle).
 *
 * Error bounds, per element (the derivation is at the top of gemm_amx.c): with u = 2^-24, gamma_n =
 * n u / (1 - n u), S = sum_k |a_k b_k| (exact values), D = |beta c| + sum of |every product a kernel
 * adds| (split parts included), d = the longest chain of roundings one product passes through in the
 * kernel (AMX: 18 + P ceil(K / 32) for P passes; avx512: K + 3):
 *   vs the ref kernel:       |c - ref| <= (gamma_d + gamma_ref) D + drop + F
 *       gamma_ref = gamma_{K+2} for gemm_ref (test_gemm.c), gamma_2 + K 2^-53 for the split ref (one
 *       rounding of a double sum); drop = 2^-16 S for F16 x3 against gemm_ref's exact products (the
 *       dropped lo*lo), else 0; F = (34 P ceil(K / 32) + K + 2) 2^-126 for flushed tiny sums (FTZ).
 *   vs the exact product:    |c - (beta c + sum a b)| <= split S + gamma_d D + K 2^-53 S + F
 *       split = 0 (BF16), 2^-16 (F16 x3), 2^-7 (1 + 2^-9) (F32 x1), 3.02 2^-16 (F32 x3).
 *   normwise vs ref: ||c - ref||_F <= 2 (sqrt(d) + sqrt(d_ref)) u ||D||_F + drop_F, the probabilistic
 *       bound of Higham & Mary (lambda = 2 per kernel) as in test_gemm.c.
 * The sweeps print the worst error / bound ratios. Non-finite results must match the expected pattern
 * element by element (for the split F32 kernels: that of a true F32 GEMM, inf * 1 = inf).
 *
 * Coverage: M, N in {1, 15, 16, 17, 31, 32, 33, 48, 63, 65} x K in {1, 2, 3, 15, 31, 32, 33, 64, 65, 100}
 * (a rotating subset), the task and K-block edges (255, 256, 257 rows; 511, 512, 513 columns; KC - 1, KC,
 * KC + 1, 2 KC + 1 for KC = 512 and 256; 768 for the avx512 kernel), all four ta/tb layouts, beta 0 over
 * a C full of NaN, beta 1 and -0.75, leading dimensions above the minimum (gaps hold NaN), operands that
 * end at a guard page, several column chunks, 1 and 2 threads bit-identical, NaN/inf inputs, subnormal
 * and tiny inputs (the exact path), the split bounds nearly reached, the emulated instructions' own
 * semantics (SDM order, DAZ, FTZ with tininess after rounding, rows/colsb bounds), scratch OOM, and the
 * AVX-512 packing and write-out (run by the emulated kernels where the CPU has AVX-512, as by the native
 * ones) against their scalar definitions: the same packed bytes, flags and c, special values included.
 * The operands, problems and the checks shared with test_gemm.c are in gemm_harness.h (here c is NaN
 * wherever beta is 0). AMPC_GEMM_BENCH=1 prints GFLOP/s of the native kernels; AMPC_TEST_FILTER=name
 * runs matching tests. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "gemm_harness.h"

#define AMPCI_AMX_EMULATE 1
#include "kernels/amx/gemm_amx.c"

static bool g_native; /* the CPU runs AMX: the native kernels are checked too */

/* The best packing this CPU runs (g_vector of gemm_amx.c). */
static int max_vector(void) {
    if (ampc_cpu()->best < AMPC_ISA_AVX512) return 0;
    return ampc_cpu_has(AMPC_CPU_AVX512_BF16) ? 2 : 1;
}

typedef struct variant {
    const char *name;
    ampc_dtype dt;
    ampc_k_gemm_fn fn, native; /* native: the library's AMX kernel, NULL without AMX (or for non-AMX ones) */
    int passes;
    bool amx;           /* AMX chain depth; false: a vector kernel's (K + 3) */
    ampc_k_gemm_fn ref; /* the ref entry of the cell: gemm_ref, or the split oracle */
    bool split_ref;     /* that ref is a split oracle (one rounding of a double sum) */
    double split;       /* split error per |a b| vs the exact product */
    double drop;        /* error per |a b| vs the ref's products */
} variant;
static variant g_var[8];
static int g_nvar;

/* An entry's error model (the header): F16 on AMX tiles and three-pass F32 take 3 BF16 passes. */
static variant variant_of(const ampci_kernel *e, ampc_k_gemm_fn native, bool amx) {
    bool x1 = e->slot == AMPCI_SLOT_GEMM_F32_BF16X1, x3 = e->slot == AMPCI_SLOT_GEMM_F32_BF16X3;
    bool f16 = e->slot == AMPCI_SLOT_GEMM && e->dtype == AMPC_DTYPE_F16;
    variant v = {e->name,  e->dtype, e->fn.GEMM, native, x3 || f16 ? 3 : 1, amx, ampci_kernel_ref(e)->fn.GEMM,
                 x1 || x3, 0,        0};
    v.split = x1 ? 0x1p-7 * (1 + 0x1p-9) : x3 ? 3.02 * 0x1p-16 : f16 ? 0x1p-16 : 0;
    v.drop = f16 ? 0x1p-16 : 0;
    return v;
}

/* The library's entry of an emulated one (its name without "_emu"), when this CPU runs it. */
static ampc_k_gemm_fn native_of(const ampci_kernel *emu) {
    char name[96];
    snprintf(name, sizeof name, "%.*s", (int)(strlen(emu->name) - 4), emu->name);
    const ampci_kernel *e = ampci_kernel_find(name);
    assert_non_null(e);
    return ampci_kernel_usable(e) ? e->fn.GEMM : NULL;
}

static int setup(void **state) {
    (void)state;
    if (gh_setup(4242, true) != 0) return -1; /* beta 0 must never read c: it holds NaN then */
    g_native = ampc_cpu()->best >= AMPC_ISA_AMX;
    /* the emulated kernels run the AVX-512 packing and write-out where the CPU has them (test_vector
     * compares them with the scalar definitions), else the scalar ones */
    g_vector = max_vector();
    if (!g_native)
        printf("  note: no usable AMX here (%s): the native-vs-emulated bit check is skipped\n",
               ampc_cpu()->cpuid[AMPC_CPU_AMX_TILE] ? "tile permission or OS support missing" : "CPU has none");
    /* every GEMM entry of the amx folder, through its emulated build (and natively where AMX runs); the
     * attention entries have their own test (test_attention_fast.c runs the same emulated source) */
    for (size_t i = 0; i < ampci_kernels_amx_emu_count; i++) {
        const ampci_kernel *e = &ampci_kernels_amx_emu[i];
        if (e->slot == AMPCI_SLOT_ATTENTION || e->slot == AMPCI_SLOT_ATTENTION_BW) continue;
        AMPCI_ASSERT(g_nvar < 6); /* g_var holds them, never silently untested */
        g_var[g_nvar++] = variant_of(e, native_of(e), true);
    }
    /* and the split F32 entries outside the amx folder (today avx512bf16's one pass) */
    for (int slot = AMPCI_SLOT_GEMM_F32_BF16X1; slot <= AMPCI_SLOT_GEMM_F32_BF16X3; slot++) {
        kc_note_unusable((ampci_slot)slot);
        kc_list l = kc_fast((ampci_slot)slot, KC_ANY);
        for (int i = 0; i < l.n; i++) {
            AMPCI_ASSERT(g_nvar < (int)(sizeof g_var / sizeof g_var[0]));
            if (l.e[i]->level != AMPC_ISA_AMX) g_var[g_nvar++] = variant_of(l.e[i], NULL, false);
        }
    }
    for (int v = 0; v < g_nvar; v++) gh_add(g_var[v].name, g_var[v].dt, g_var[v].fn); /* the harness's tests */
    g_epilogue_work = 4e6; /* the emulation is slow: the threaded write-out is the native kernels' */
    return 0;
}

static float *run_ref(const variant *v, const prob *p) { return run(g_ctx1, v->ref, p); }

/* ---- error bounds (see the header) ---- */

/* hi and lo BF16 parts of x (split_bf16 of gemm_ref.c, through the public conversion) */
static double bf16_of(float x) { return (double)tu_float((uint32_t)ampc_bf16_from_f32(x) << 16); }
static void split(float x, double *hi, double *lo) {
    *hi = bf16_of(x);
    *lo = isfinite(*hi) ? bf16_of((float)(x - *hi)) : 0.0;
}

static double depth(const variant *v, int64_t K) {
    return v->amx ? 18.0 + (double)(v->passes * ((K + 31) / 32)) : (double)K + 3.0;
}
static double depth_ref(const variant *v, int64_t K) { return v->split_ref ? 2.0 : (double)K + 2.0; }

/* op(a) and op(b) as doubles, k-contiguous ((M, K) and (N, K)): the values, their hi parts and lo parts
 * (split kernels; BF16 values are their own hi). */
typedef struct opnds {
    double *a, *ah, *al, *b, *bh, *bl;
} opnds;

static opnds opnds_new(const variant *v, const prob *p) {
    size_t na = (size_t)(p->M * p->K), nb = (size_t)(p->N * p->K);
    opnds o;
    o.a = malloc(3 * (na + nb) * sizeof(double) + 1);
    assert_non_null(o.a);
    o.ah = o.a + na, o.al = o.ah + na, o.b = o.al + na, o.bh = o.b + nb, o.bl = o.bh + nb;
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t k = 0; k < p->K; k++) {
            size_t at = (size_t)(i * p->K + k);
            o.a[at] = op_a(p, i, k);
            if (v->dt == AMPC_DTYPE_BF16) o.ah[at] = o.a[at], o.al[at] = 0;
            else split((float)o.a[at], &o.ah[at], &o.al[at]);
        }
    for (int64_t j = 0; j < p->N; j++)
        for (int64_t k = 0; k < p->K; k++) {
            size_t at = (size_t)(j * p->K + k);
            o.b[at] = op_b(p, k, j);
            if (v->dt == AMPC_DTYPE_BF16) o.bh[at] = o.b[at], o.bl[at] = 0;
            else split((float)o.b[at], &o.bh[at], &o.bl[at]);
        }
    return o;
}

/* Per element: S = sum |a b|, D = |beta c| + sum of |products the kernel adds|, exact = beta c + sum a b. */
static void element_sums(const variant *v, const prob *p, const opnds *o, int64_t i, int64_t j, double *S, double *D,
                         double *exact) {
    double c0 = p->beta != 0.0f ? (double)p->beta * p->c0[i * p->ldc + j] : 0.0;
    const double *a = o->a + i * p->K, *ah = o->ah + i * p->K, *al = o->al + i * p->K;
    const double *b = o->b + j * p->K, *bh = o->bh + j * p->K, *bl = o->bl + j * p->K;
    double s = 0, d = 0, e = c0;
    for (int64_t k = 0; k < p->K; k++) {
        s += fabs(a[k] * b[k]);
        e += a[k] * b[k];
        d += fabs(ah[k] * bh[k]);
        if (v->passes == 3) d += fabs(ah[k] * bl[k]) + fabs(al[k] * bh[k]);
    }
    *S = s, *exact = e;
    *D = fabs(c0) + (d > s ? d : s); /* the ref's own products, for its share of the bound */
}

/* Checks a kernel's c against the ref's and against the exact product; returns the worst of the
 * elementwise and normwise error / bound ratios. Non-finite results: the pattern of `nonfinite`. */
static double check(const variant *v, const prob *p, const float *c, const float *ref, const float *nonfinite,
                    const char *what) {
    const double u = 0x1p-24;
    double gk = gamma_n(depth(v, p->K)), gr = gamma_n(depth_ref(v, p->K)) + (double)p->K * 0x1p-53;
    double flush = (34.0 * v->passes * (double)((p->K + 31) / 32) + (double)p->K + 2) * 0x1p-126;
    double worst = 0, err2 = 0, d2 = 0, s2 = 0;
    opnds o = opnds_new(v, p);
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->N; j++) {
            float f = c[i * p->ldc + j], r = ref[i * p->ldc + j];
            if (gh_nonfinite(f, nonfinite[i * p->ldc + j], i, j, what)) continue;
            double S, D, exact;
            element_sums(v, p, &o, i, j, &S, &D, &exact);
            double e_ref = fabs((double)f - (double)r), b_ref = (gk + gr) * D + v->drop * S + flush;
            double e_ex = fabs((double)f - exact), b_ex = v->split * S + gk * D + (double)p->K * 0x1p-53 * S + flush;
            if (e_ref > b_ref)
                FAILF("%s: c[%lld, %lld] = %a, ref %a: error %g above the bound %g", what, (long long)i, (long long)j,
                      f, r, e_ref, b_ref);
            if (e_ex > b_ex)
                FAILF("%s: c[%lld, %lld] = %a, exact %a: error %g above the bound %g", what, (long long)i, (long long)j,
                      f, exact, e_ex, b_ex);
            if (b_ref > 0 && e_ref / b_ref > worst) worst = e_ref / b_ref;
            if (b_ex > 0 && e_ex / b_ex > worst) worst = e_ex / b_ex;
            err2 += e_ref * e_ref, d2 += D * D, s2 += S * S;
        }
    free(o.a);
    gh_untouched(p, c, what);
    double tol = 2 * (sqrt(depth(v, p->K)) + sqrt(depth_ref(v, p->K))) * u * sqrt(d2) + v->drop * sqrt(s2);
    return fmax(worst, gh_normwise(err2, tol, what));
}

/* The native kernel gives the emulation's bits (any NaN for a NaN). */
static void same_bits(const prob *p, const float *x, const float *y, const char *what) {
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->N; j++) {
            float a = x[i * p->ldc + j], b = y[i * p->ldc + j];
            if (tu_bits(a) != tu_bits(b) && !(isnan(a) && isnan(b)))
                FAILF("%s: c[%lld, %lld] = %a, %a in the other run", what, (long long)i, (long long)j, a, b);
        }
}

/* The native kernel must give the emulation's bits. When it does not, says how far apart they are and
 * whether the native result still meets the error bounds (then the CPU's tdpbf16ps does not follow the
 * SDM pseudo-code the emulation implements, and this check would have to become a tolerance). */
static void native_vs_emulated(const variant *v, const prob *p, ampc_ctx *ctx, const float *emu, const float *ref,
                               const float *nonfinite) {
    float *n = run(ctx, v->native, p);
    int64_t ndiff = 0, at = -1;
    double worst = 0;
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->N; j++) {
            float a = emu[i * p->ldc + j], b = n[i * p->ldc + j];
            if (tu_bits(a) == tu_bits(b) || (isnan(a) && isnan(b))) continue;
            double d = fabs((double)a - (double)b) / fmax(fabs((double)a), 0x1p-126);
            if (ndiff++ == 0 || d > worst) worst = d, at = i * p->ldc + j;
        }
    if (ndiff) {
        check(v, p, n, ref, nonfinite, describe(v->name, p, " (native)")); /* fails if out of bounds */
        FAILF("%s: native AMX differs from the emulation in %lld elements (worst relative difference %g: c[%lld, "
              "%lld] = %a native, %a emulated), all within the error bounds: tdpbf16ps on this CPU does not follow "
              "the SDM pseudo-code",
              describe(v->name, p, ""), (long long)ndiff, worst, (long long)(at / p->ldc), (long long)(at % p->ldc),
              n[at], emu[at]);
    }
    free(n);
}

/* Runs the variant (and its native twin) on p and checks it; `nonfinite`: the expected non-finite
 * pattern (NULL: the ref's). Returns the error ratio. */
static double run_check(const variant *v, const prob *p, ampc_ctx *ctx, const float *nonfinite, const char *extra) {
    float *r = run_ref(v, p), *c = run(ctx, v->fn, p);
    double ratio = check(v, p, c, r, nonfinite ? nonfinite : r, describe(v->name, p, extra));
    if (v->native) native_vs_emulated(v, p, ctx, c, r, nonfinite ? nonfinite : r);
    free(c);
    free(r);
    return ratio;
}

/* combo: bit 0 ta, bit 1 tb, bit 2 beta != 0 (1 or, for odd pads, -0.75). */
static double one(const variant *v, int64_t M, int64_t N, int64_t K, int combo, int64_t pad) {
    float beta = (combo >> 2) & 1 ? (pad % 2 ? -0.75f : 1.0f) : 0.0f;
    prob p = prob_new(v->dt, M, N, K, combo & 1, (combo >> 1) & 1, beta, pad);
    double ratio = run_check(v, &p, g_ctx1, NULL, "");
    prob_free(&p);
    return ratio;
}

/* ---- tests ---- */

static const char *chosen_name(const struct ampc_kernels *k, ampci_slot slot, int key) {
    const ampci_kernel *e = k->chosen[slot][key];
    return e ? e->name : NULL;
}

/* The emulated build registers the amx folder's entries as emulations (the native names + _emu); the
 * names each level chooses; the AMX level only where AMX runs; x3 never at the avx512 level. */
static void test_table(void **state) {
    (void)state;
    static const char *const names[] = {"ampc_k_gemm_bf16f32__amx", "ampc_k_gemm_f16f32__amx_bf16x3",
                                        "ampc_k_gemm_f32_bf16x1__amx", "ampc_k_gemm_f32_bf16x3__amx"};
    for (int i = 0; i < 4; i++) assert_non_null(ampci_kernel_find(names[i]));
    assert_int_equal(ampci_kernels_amx_emu_count, ampci_kernels_amx_count);
    for (size_t i = 0; i < ampci_kernels_amx_count; i++) {
        const ampci_kernel *emu = &ampci_kernels_amx_emu[i], *nat = &ampci_kernels_amx[i];
        char want[96];
        snprintf(want, sizeof want, "%s_emu", nat->name);
        assert_string_equal(emu->name, want);
        assert_true(ampci_same_cell(emu, nat) && emu->role == AMPCI_ROLE_EMULATION && emu->level == AMPC_ISA_REF);
        assert_true(nat->role == AMPCI_ROLE_KERNEL && nat->level == AMPC_ISA_AMX);
        /* F32 GEMMs reach tiles only through the split slots */
        assert_false(nat->slot == AMPCI_SLOT_GEMM && nat->dtype == AMPC_DTYPE_F32);
    }
    const ampc_cpu_info *cpu = ampc_cpu();
    const struct ampc_kernels *amx = ampci_kernels(AMPC_ISA_AMX);
    if (cpu->chosen >= AMPC_ISA_AMX) {
        assert_string_equal(chosen_name(amx, AMPCI_SLOT_GEMM, AMPC_DTYPE_BF16), "ampc_k_gemm_bf16f32__amx");
        assert_string_equal(chosen_name(amx, AMPCI_SLOT_GEMM, AMPC_DTYPE_F16), "ampc_k_gemm_f16f32__amx_bf16x3");
        assert_string_equal(chosen_name(amx, AMPCI_SLOT_GEMM_F32_BF16X3, 0), "ampc_k_gemm_f32_bf16x3__amx");
        assert_non_null(amx->gemm_f32_bf16x3);
    } else {
        assert_null(strstr(chosen_name(amx, AMPCI_SLOT_GEMM, AMPC_DTYPE_BF16), "__amx"));
    }
    const struct ampc_kernels *k5 = ampci_kernels(AMPC_ISA_AVX512);
    assert_null(k5->gemm_f32_bf16x3);
    assert_null(chosen_name(k5, AMPCI_SLOT_GEMM_F32_BF16X3, 0));
    bool x1 = cpu->chosen >= AMPC_ISA_AVX512 && ampc_cpu_has(AMPC_CPU_AVX512_BF16) && !cpu->cpuid[AMPC_CPU_AMX_BF16];
    if (x1) {
        assert_non_null(k5->gemm_f32_bf16x1);
        assert_string_equal(chosen_name(k5, AMPCI_SLOT_GEMM_F32_BF16X1, 0), "ampc_k_gemm_f32_bf16x1__avx512bf16");
    } else {
        assert_null(k5->gemm_f32_bf16x1);
    }
    assert_null(ampci_kernels(AMPC_ISA_REF)->gemm_f32_bf16x1);
    assert_null(ampci_kernels(AMPC_ISA_REF)->gemm_f32_bf16x3);
}

/* ---- the emulated instructions themselves ---- */

/* c (16 x 16 F32, rows 64 bytes apart) += a (16 x 32 BF16) b (16 pair-rows x 16 columns), one tdpbf16ps
 * with the kernels' configuration. */
static void emu_dp(const uint16_t *a, const uint16_t *b, float *c) {
    AMX_CONFIG();
    AMX_LOAD(0, c, 64);
    AMX_LOAD(4, a, 64);
    AMX_LOAD(6, b, 64);
    AMX_DPBF16(0, 4, 6);
    AMX_STORE(0, c, 64);
    AMX_RELEASE();
}

/* c[0][0] after one tdpbf16ps from c00, with row 0 of a = ak[0..], column 0 pairs of b = bk[0..] (n of
 * them, in K order: element e of the row meets element e of the column). */
static float dp00(float c00, const uint16_t *ak, const uint16_t *bk, int n) {
    uint16_t a[TWORDS] = {0}, b[TWORDS] = {0};
    float c[CT] = {0};
    c[0] = c00;
    for (int e = 0; e < n; e++) {
        a[e] = ak[e];
        b[pos_b(1, 0, e)] = bk[e];
    }
    emu_dp(a, b, c);
    return c[0];
}

static void test_emulation(void **state) {
    (void)state;
    /* SDM order: even and odd lanes summed first, then added to c: 1 + (2^-24 + 2^-24) = 1 + 2^-23 (an
     * accumulation straight into c, as the intrinsics guide or vdpbf16ps do it, would give 1) */
    uint16_t a1[2] = {0x3980, 0x3980}, b1[2] = {0x3980, 0x3980}; /* 2^-12 */
    assert_true(dp00(1.0f, a1, b1, 2) == 1.0f + 0x1p-23f);
    /* each lane is a chain of FMAs in K order: even products 1, 2^-24, 2^-24 give 1 (each tie to even) */
    uint16_t a2[6] = {0x3f80, 0, 0x3980, 0, 0x3980, 0}, b2[6] = {0x3f80, 0, 0x3980, 0, 0x3980, 0};
    assert_true(dp00(0.0f, a2, b2, 6) == 1.0f);
    /* DAZ: a BF16 subnormal is 0, so 2^-133 * 2^100 = 0 and inf * 2^-133 = NaN */
    uint16_t a3[1] = {0x0001}, b3[1] = {0x7180};
    assert_true(dp00(0.0f, a3, b3, 1) == 0.0f);
    uint16_t a4[1] = {0x7f80}, b4[1] = {0x0001};
    assert_true(isnan(dp00(0.0f, a4, b4, 1)));
    /* DAZ of the accumulator: a subnormal c counts as 0 */
    uint16_t a5[1] = {0x3f80}, b5[1] = {0x3f80};
    assert_true(dp00(0x1p-130f, a5, b5, 1) == 1.0f);
    assert_true(dp00(0x1p-130f, a5, b5, 0) == 0.0f);
    /* FTZ: 2^-70 * 2^-70 = 2^-140 becomes 0 */
    uint16_t a6[1] = {0x1c80}, b6[1] = {0x1c80};
    assert_true(dp00(0.0f, a6, b6, 1) == 0.0f);
    /* tininess after rounding: 2^-126 - 1.5 2^-151 rounds (24 bits, unbounded exponent) below 2^-126, so
     * it is flushed, although IEEE rounding into the subnormal range would give 2^-126; with 2^-152
     * instead it rounds to 2^-126 and stays */
    uint16_t a7[3] = {0x2000, 0, 0x9980}, b7[3] = {0x2000, 0, 0x1a40}; /* 2^-63 2^-63, -2^-76 1.5 2^-75 */
    assert_true(dp00(0.0f, a7, b7, 3) == 0.0f);
    uint16_t b8[3] = {0x2000, 0, 0x1980}; /* -2^-76 2^-76 */
    assert_true(dp00(0.0f, a7, b8, 3) == 0x1p-126f);
    assert_true(amx_emu_fma(-0x1p-76f, 0x1.8p-75f, 0x1p-126f) == 0.0f);
    assert_true(amx_emu_fma(-0x1p-76f, 0x1p-76f, 0x1p-126f) == 0x1p-126f);
    assert_true(signbit(amx_emu_fma(-0x1p-70f, 0x1p-70f, 0.0f))); /* flushed to a zero of its sign */

    /* rows and colsb bound everything: C 2 x 2, A 2 rows x 2 pairs, B 2 pair-rows x 2 columns, over memory
     * full of ones; loads zero what is beyond, stores write only rows x colsb */
    amx_tilecfg cfg = {.palette_id = 1, .colsb = {8, 8, 8}, .rows = {2, 2, 2}};
    uint16_t ones[TWORDS];
    for (int i = 0; i < TWORDS; i++) ones[i] = 0x3f80;
    float c[CT];
    for (int i = 0; i < CT; i++) c[i] = (i % 16 < 2 && i / 16 < 2) ? 0.0f : -7.0f;
    amx_emu_loadconfig(&cfg);
    AMX_LOAD(0, c, 64);
    AMX_LOAD(1, ones, 64);
    AMX_LOAD(2, ones, 64);
    for (int r = 0; r < 16; r++)
        for (int x = 0; x < 64; x++)
            assert_int_equal(amx_emu.tile[1][r][x], r < 2 && x < 8 ? (x & 1 ? 0x3f : 0x80) : 0);
    AMX_DPBF16(0, 1, 2);
    AMX_STORE(0, c, 64);
    AMX_RELEASE();
    assert_int_equal(amx_emu.configured, 0);
    for (int i = 0; i < CT; i++) assert_true(c[i] == ((i % 16 < 2 && i / 16 < 2) ? 4.0f : -7.0f));
}

/* ---- the kernels against the refs ---- */

/* M, N x K over the size lists (a rotating subset of K per (M, N)); the layout and beta rotate so each of
 * the 8 combinations meets every size class. */
static void test_sizes(void **state) {
    (void)state;
    static const int64_t S[] = {1, 15, 16, 17, 31, 32, 33, 48, 63, 65};
    static const int64_t Ks[] = {1, 2, 3, 15, 31, 32, 33, 64, 65, 100};
    enum { NS = sizeof S / sizeof S[0], NK = sizeof Ks / sizeof Ks[0] };
    for (int v = 0; v < g_nvar; v++) {
        double worst = 0;
        int idx = 0;
        for (int im = 0; im < NS; im++)
            for (int in = 0; in < NS; in++)
                for (int r = 0; r < 2; r++, idx++) {
                    int64_t K = Ks[(im * 3 + in * 7 + r * 5) % NK];
                    double q = one(&g_var[v], S[im], S[in], K, (idx * 5 + im) & 7, 1 + idx % 13);
                    if (q > worst) worst = q;
                }
        printf("  %-38s sizes: worst error / bound %.3f\n", g_var[v].name, worst);
    }
}

/* Task and K-block edges: 256-row and 512-column tasks, KC (512; 256 for hi + lo kinds) +-1 and 2 KC + 1,
 * every layout and both betas. */
static void test_blocks(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        const variant *var = &g_var[v];
        int64_t KC = var->passes == 3 ? KC_TWO : KC_ONE;
        if (!var->amx) KC = 768; /* the avx512 kernel's K-block */
        const int64_t shapes[][3] = {{255, 33, 40},    {256, 17, 40},       {257, 33, 40},    {17, 511, 40},
                                     {16, 512, 40},    {17, 513, 40},       {33, 33, KC - 1}, {33, 17, KC},
                                     {17, 33, KC + 1}, {33, 33, 2 * KC + 1}};
        double worst = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int combo = 0; combo < 8; combo += (s % 2 ? 3 : 2)) {
                double q = one(var, shapes[s][0], shapes[s][1], shapes[s][2], combo, 2 + combo);
                if (q > worst) worst = q;
            }
        printf("  %-38s blocks: worst error / bound %.3f\n", var->name, worst);
    }
}

/* 1 and 2 threads, tasks cut along M or N, several column chunks of packed op(b): the same bits, and the
 * same bits as one chunk on one thread. The emulated build's knobs are lowered so small problems take
 * these paths; the avx512 kernel runs shapes above its own serial limit. */
static void test_threads(void **state) {
    (void)state;
    static const int64_t amx_shapes[][3] = {{300, 40, 70}, {40, 300, 90}, {70, 130, 600}, {33, 1000, 40}};
    static const int64_t avx_shapes[][3] = {{250, 200, 700}, {97, 45, 8000}, {1000, 256, 512}};
    size_t saved_bytes = g_bpack_max_bytes;
    double saved_work = g_serial_work;
    for (int v = 0; v < g_nvar; v++) {
        const variant *var = &g_var[v];
        size_t nshapes = var->amx ? 4 : 3;
        for (size_t s = 0; s < nshapes; s++)
            for (int combo = 0; combo < 8; combo += 3) {
                const int64_t *sh = var->amx ? amx_shapes[s] : avx_shapes[s];
                prob p = prob_new(var->dt, sh[0], sh[1], sh[2], combo & 1, (combo >> 1) & 1,
                                  (combo >> 2) & 1 ? 1.0f : 0.0f, 3);
                float *one_thread = run(g_ctx1, var->fn, &p); /* default knobs: serial, one chunk */
                g_serial_work = 0;
                g_bpack_max_bytes = s == 3 ? 40000 : saved_bytes; /* 33 x 1000: chunks of 4 to 18 groups */
                float *f1 = run(g_ctx1, var->fn, &p), *f2 = run(g_ctx2, var->fn, &p);
                g_serial_work = saved_work;
                g_bpack_max_bytes = saved_bytes;
                same_bits(&p, one_thread, f1, describe(var->name, &p, " (1 thread, chunks vs one chunk)"));
                same_bits(&p, f1, f2, describe(var->name, &p, " (1 vs 2 threads)"));
                if (combo == 0 && (var->amx || s == 0)) run_check(var, &p, g_ctx2, NULL, " (2 threads)");
                free(one_thread);
                free(f1);
                free(f2);
                prob_free(&p);
            }
    }
    /* the calling thread's tile state is back to INIT after a threaded call */
    assert_int_equal(amx_emu.configured, 0);
}

/* NaN in a, inf in b, NaN and inf in c (beta 1; beta 0 never reads c): the non-finite pattern is the
 * ref's (for the split F32 kernels, a true F32 GEMM's: inf * 1 = inf, where the split ref's hi * lo cross
 * products give inf * 0 = NaN). */
static void test_nonfinite(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++)
        for (int combo = 0; combo < 8; combo++) {
            const variant *var = &g_var[v];
            /* op(a)[3, 7]: a signaling NaN with the payload in the low bits only (a conversion to BF16 that
             * does not quiet it makes it inf) */
            prob p = gh_nonfinite_prob(var->dt, combo, tu_float(0x7f800001u));
            float *want = var->dt == AMPC_DTYPE_F32 ? run(g_ctx1, g_ref->gemm[AMPC_DTYPE_F32], &p) : NULL;
            run_check(var, &p, g_ctx2, want, " (non-finite inputs)");
            float *f = run(g_ctx2, var->fn, &p);
            gh_nonfinite_expect(&p, f);
            free(f);
            free(want);
            prob_free(&p);
        }
}

/* Values the tile path must not see take the exact path: BF16 subnormals count at their value (not 0),
 * inf * subnormal = inf (not NaN); a tile without them flushes tiny sums (FTZ), one with them does not.
 * F32 inputs whose hi or lo part is a BF16 subnormal likewise; FP16 subnormals are BF16 normals. */
static void test_subnormal(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        const variant *var = &g_var[v];
        if (var->dt == AMPC_DTYPE_BF16) {
            gh_bf16_subnormal(var->fn, var->name, true); /* the tile path flushes tiny sums */
        } else if (var->dt == AMPC_DTYPE_F32) {
            /* a = [2^-130 (an F32 subnormal: hi is a BF16 subnormal), 2^-120 + 2^-130 (lo = 2^-130 is)] */
            float a[2] = {0x1p-130f, 0x1p-120f + 0x1p-130f}, b[2] = {0x1p100f, 0x1p100f}, c[2];
            ampci_gemm g = {2, 1, 1, a, 1, false, b, 1, false, c, 1, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
            ASSERT_OK(var->fn(g_ctx1, &g));
            assert_true(c[0] == 0x1p-30f);
            assert_true(c[1] == (var->passes == 3 ? 0x1p-20f + 0x1p-30f : 0x1p-20f));
        } else {
            /* FP16 subnormals: 2^-24 * 2^-24 = 2^-48, on the tile path */
            uint16_t a[1] = {0x0001}, b[1] = {0x0001};
            float c[1];
            ampci_gemm g = {1, 1, 1, a, 1, false, b, 1, false, c, 1, 0.0f, NULL, NULL, AMPC_DTYPE_F32};
            ASSERT_OK(var->fn(g_ctx1, &g));
            assert_true(c[0] == 0x1p-48f);
        }
        /* tiny values scattered in a bigger problem: the refs' answers, 1 and 2 threads identical */
        for (int combo = 0; combo < 4; combo++) {
            prob p = prob_new(var->dt, 60, 70, 700, combo & 1, combo >> 1, 0.0f, 3);
            if (var->dt == AMPC_DTYPE_F16) gh_scatter_tiny(&p, combo, 0x1p-24f, 1024.0f);
            else gh_scatter_tiny(&p, combo, 0x1p-133f, 0x1p123f);
            run_check(var, &p, g_ctx1, NULL, " (tiny inputs)");
            float *f1 = run(g_ctx1, var->fn, &p), *f2 = run(g_ctx2, var->fn, &p);
            same_bits(&p, f1, f2, describe(var->name, &p, " (tiny inputs, 1 vs 2 threads)"));
            free(f1);
            free(f2);
            prob_free(&p);
        }
    }
}

/* The split bounds are nearly reached: F16 x3 drops exactly alo blo; F32 x1 loses up to 2^-7 |a b|. */
static void test_split_bounds(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        const variant *var = &g_var[v];
        if (var->dt == AMPC_DTYPE_BF16 || (var->dt == AMPC_DTYPE_F32 && var->passes == 3)) continue;
        /* F16: a = b = 1 + 3 2^-10 = hi 1 + lo 3 2^-10: each product loses lo lo = 9 2^-20, and the 64
         * kept parts sum exactly. F32 x1: a = b = 1 + 2^-8 rounds (a tie) to hi = 1: loses 2^-7 + 2^-16. */
        float x = var->dt == AMPC_DTYPE_F16 ? 1.0f + 3 * 0x1p-10f : 1.0f + 0x1p-8f;
        double lost = var->dt == AMPC_DTYPE_F16 ? 9 * 0x1p-20 : 0x1p-7 + 0x1p-16;
        prob p = prob_new(var->dt, 20, 20, 64, false, true, 0.0f, 1);
        for (int64_t i = 0; i < 20; i++)
            for (int64_t k = 0; k < 64; k++) p.a.f[i * p.a.ld + k] = p.b.f[i * p.b.ld + k] = x;
        mat_sync(&p.a);
        mat_sync(&p.b);
        run_check(var, &p, g_ctx1, NULL, " (split bound)");
        float *c = run(g_ctx1, var->fn, &p);
        double exact = 64.0 * (double)x * (double)x;
        if (fabs((double)c[0] - (exact - 64 * lost)) > 64 * 0x1p-24 * exact)
            FAILF("%s: c = %a, expected %a (the exact %a less the dropped parts)", var->name, c[0], exact - 64 * lost,
                  exact);
        free(c);
        prob_free(&p);
    }
}

/* Operands that end at a guard page (gemm_harness.h): no kernel may read an element past the last one. */
static void test_guard_pages(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1}, {13, 33, 17}, {29, 65, 3}, {15, 31, 769}, {17, 33, 513}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int combo = 0; combo < 4; combo++) {
                const variant *var = &g_var[v];
                gh_guard_pages(var->fn, var->ref, var->name, var->dt, shapes[s][0], shapes[s][1], shapes[s][2],
                               combo & 1, (combo >> 1) & 1, 0.0f);
            }
}

/* ---- the AVX-512 packing and write-out against their scalar definitions (amx_pack.h) ---- */

/* A source element of kind kd: random, with about one in 8 a value the packing must flag or keep exactly
 * (NaN, inf, -0, values whose hi or lo part is a BF16 subnormal, F16 subnormals, overflow to inf). */
static void special_source(akind kd, unsigned char *p, size_t n) {
    static const uint32_t f32s[] = {0x7fc00000u, 0xff800000u, 0x80000000u, 0x00000001u, 0x00012345u,
                                    0x0c012345u, 0x7f7fffffu, 0x7f800001u, 0x03800001u, 0x80400000u};
    static const uint16_t h16s[] = {0x7e00u, 0xfc00u, 0x8000u, 0x0001u, 0x03ffu, 0x7bffu, 0x7c01u, 0x0400u};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = tu_rand(&g_seed);
        float f = (float)((double)(r >> 11) * 0x1p-53 * 8.0 - 4.0);
        bool sp = (r & 7) == 0;
        if (kd == AK_F32X1 || kd == AK_F32X3) {
            uint32_t x = sp ? f32s[(r >> 3) % 10] : tu_bits(f);
            memcpy(p + 4 * i, &x, 4);
        } else {
            uint16_t h = kd == AK_F16X3 ? ampc_f16_from_f32(f) : ampc_bf16_from_f32(f);
            if (sp) h = kd == AK_F16X3 ? h16s[(r >> 3) % 8] : (uint16_t)(f32s[(r >> 3) % 10] >> 16);
            memcpy(p + 2 * i, &h, 2);
        }
    }
}

static void pack_pair(akind kd, bool is_b, bool kline, int64_t nx, int64_t kc) {
    size_t es = kind_size(kd);
    int64_t ld = (kline ? kc : nx) + 3, rows = kline ? nx : kc;
    unsigned char *src = malloc((size_t)(rows * ld) * es);
    assert_non_null(src);
    special_source(kd, src, (size_t)(rows * ld));
    pack_src s = {src, kline ? ld : 1, kline ? 1 : ld, nx, kc};
    int64_t ng = (nx + TROWS - 1) / TROWS, kt = (kc + TK - 1) / TK;
    size_t gw = (size_t)(kt * kind_parts(kd)) * TWORDS, words = gw * (size_t)ng + 64;
    uint16_t *d1 = aligned_alloc(64, words * 2), *d2 = aligned_alloc(64, words * 2);
    bool f1[8], f2[8];
    assert_true(d1 && d2 && ng <= 8);
    for (size_t i = 0; i < words; i++) d1[i] = d2[i] = 0xabcd; /* every word up to the guard is written */
    g_pack_scalar[kd][is_b](&s, ng, kt, d1, gw, f1, 1);
    for (int w = 1; w <= max_vector(); w++) { /* the AVX-512 packers, then those with vcvtne2ps2bf16 */
        for (size_t i = 0; i < words; i++) d2[i] = 0xabcd;
        (w == 2 ? g_pack_vectorbf : g_pack_vector)[kd][is_b](&s, ng, kt, d2, gw, f2, 1);
        for (size_t i = 0; i < words; i++)
            if (d1[i] != d2[i])
                FAILF("pack kind %d %s %s nx %lld kc %lld: word %zu = %04x (%s), %04x (scalar)", (int)kd,
                      is_b ? "B" : "A", kline ? "k-contiguous" : "x-contiguous", (long long)nx, (long long)kc, i, d2[i],
                      w == 2 ? "vector, AVX512-BF16" : "vector", d1[i]);
        for (int64_t g = 0; g < ng; g++) assert_int_equal(f1[g], f2[g]);
    }
    free(src);
    free(d1);
    free(d2);
}

static void write_pair(int nr, int nc, float beta) {
    enum { LDC = 37 };
    _Alignas(64) float acc[32 * CB];
    float c1[32 * LDC], c2[32 * LDC];
    for (int i = 0; i < 32 * CB; i++) acc[i] = rnd_uniform() * 1e3f;
    for (int i = 0; i < 32 * LDC; i++) c1[i] = c2[i] = i % 29 == 0 ? NAN : i % 31 == 0 ? 0x1p-140f : rnd_uniform();
    ampci_gemm g1 = {32, 34, 1, NULL, 1, false, NULL, 1, false, c1, LDC, beta, NULL, NULL, AMPC_DTYPE_F32}, g2 = g1;
    g2.c = c2;
    write_out_scalar(&g1, acc, 32 - nr, 34 - nc, nr, nc);
    write_out_vector(&g2, acc, 32 - nr, 34 - nc, nr, nc);
    for (int i = 0; i < 32 * LDC; i++)
        if (tu_bits(c1[i]) != tu_bits(c2[i]))
            FAILF("write-out %d x %d, beta %g: c[%d] = %a (vector), %a (scalar)", nr, nc, beta, i, c2[i], c1[i]);
}

/* Every kind, operand and source orientation at the edge sizes, values the packing flags or must keep
 * included: the same bytes and flags; the write-out at the edges with beta 0, 1 and -0.75: the same c.
 * Then whole problems through the emulated kernels both ways: the same bits. */
static void test_vector(void **state) {
    (void)state;
    if (ampc_cpu()->best < AMPC_ISA_AVX512) {
        printf("  note: no AVX-512 here: the emulated kernels ran the scalar packing only\n");
        return;
    }
    static const int64_t nxs[] = {1, 7, 15, 16, 17, 33, 128}, kcs[] = {1, 2, 31, 32, 33, 100, 257};
    for (int kd = 0; kd < AK_COUNT; kd++)
        for (int o = 0; o < 4; o++)
            for (size_t a = 0; a < sizeof nxs / sizeof nxs[0]; a++)
                for (size_t b = 0; b < sizeof kcs / sizeof kcs[0]; b++)
                    pack_pair((akind)kd, o & 1, o >> 1, nxs[a], kcs[b]);
    static const float betas[] = {0.0f, 1.0f, -0.75f};
    for (int k = 0; k < 3; k++)
        for (int nr = 1; nr <= 32; nr += 5)
            for (int nc = 1; nc <= 32; nc += 3) write_pair(nr, nc, betas[k]);
    for (int v = 0; v < g_nvar; v++) {
        if (!g_var[v].amx) continue;
        for (int combo = 0; combo < 8; combo++) {
            prob p = prob_new(g_var[v].dt, 60, 70, 700, combo & 1, (combo >> 1) & 1, (combo >> 2) & 1 ? -0.75f : 0.0f,
                              2);
            gh_scatter_tiny(&p, combo, g_var[v].dt == AMPC_DTYPE_F16 ? 0x1p-24f : 0x1p-133f, 1024.0f);
            g_vector = 0;
            float *c1 = run(g_ctx1, g_var[v].fn, &p);
            for (int w = 1; w <= max_vector(); w++) {
                g_vector = w;
                float *c2 = run(g_ctx1, g_var[v].fn, &p);
                same_bits(&p, c1, c2,
                          describe(g_var[v].name, &p,
                                   w == 2 ? " (scalar vs AVX512-BF16 packing)" : " (scalar vs AVX-512 packing)"));
                free(c2);
            }
            g_vector = max_vector();
            free(c1);
            prob_free(&p);
        }
    }
}

/* The write-out (bias, 16-bit results) of the native kernels and of the split oracles; the emulated ones
 * and the ref GEMMs are the harness's test_epilogue. */
static void test_epilogue_native(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        if (g_var[v].native) gh_epilogue(g_var[v].native, g_var[v].name, g_var[v].dt, 1e300);
        if (g_var[v].split_ref) gh_epilogue(g_var[v].ref, "split ref", g_var[v].dt, 4e6);
    }
}

/* ---- benchmark (AMPC_GEMM_BENCH=1): the native kernels; the emulation's speed means nothing ---- */

static void test_bench(void **state) {
    (void)state;
    if (!gh_bench_wanted() || ampc_cpu()->best < AMPC_ISA_AVX512) {
        printf("  (set AMPC_GEMM_BENCH=1 for GFLOP/s figures of the native kernels)\n");
        return;
    }
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    const ampci_kernel *runs[5] = {k->chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_F32], k->chosen[AMPCI_SLOT_GEMM_F32_BF16X1][0],
                                   k->chosen[AMPCI_SLOT_GEMM_F32_BF16X3][0],
                                   k->chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_BF16],
                                   k->chosen[AMPCI_SLOT_GEMM][AMPC_DTYPE_F16]};
    static const int64_t shapes[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {512, 512, 512}, {2048, 384, 1536}};
    printf("  GFLOP/s, best of 5, 1 / 2 threads (layout nn, beta 0)\n");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int r = 0; r < 5; r++) {
            if (!runs[r]) continue;
            prob p = prob_new(runs[r]->dtype, shapes[s][0], shapes[s][1], shapes[s][2], false, false, 0.0f, 0);
            float *c = malloc((size_t)(p.M * p.ldc + 1) * sizeof(float));
            double r1 = gh_bench_one(g_ctx1, runs[r]->fn.GEMM, &p, c, 0.1, 400e9),
                   r2 = gh_bench_one(g_ctx2, runs[r]->fn.GEMM, &p, c, 0.1, 400e9);
            printf("  %4lldx%4lldx%4lld  %-38s %8.1f / %8.1f\n", (long long)p.M, (long long)p.N, (long long)p.K,
                   runs[r]->name, r1, r2);
            free(c);
            prob_free(&p);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),        cmocka_unit_test(test_emulation),       cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_oom),          cmocka_unit_test(test_nonfinite),       cmocka_unit_test(test_subnormal),
        cmocka_unit_test(test_split_bounds), cmocka_unit_test(test_guard_pages),     cmocka_unit_test(test_threads),
        cmocka_unit_test(test_blocks),       cmocka_unit_test(test_sizes),           cmocka_unit_test(test_vector),
        cmocka_unit_test(test_epilogue),     cmocka_unit_test(test_epilogue_native), cmocka_unit_test(test_bench),
    };
    const char *only = getenv("AMPC_TEST_FILTER"); /* e.g. test_sizes */
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, setup, gh_teardown);
}
