/* test_attention_fast.c: every attention entry of the kernel registry but ref's (the avx512 fused kernels
 * of src/kernels/avx512/attention_avx512.c: BF16 through widening, and through vdpbf16ps when the CPU has
 * AVX512-BF16; the AMX kernel of src/kernels/amx/attention_amx.c: BF16 on the tiles, F32 and F16 as the
 * avx512 kernel), each with its backward, plus the AMX kernel's emulated build (attention_amx_emu.c: the
 * same source on an emulation of the tile instructions and a portable vector layer, run on any CPU), all
 * against the ref kernels (the oracle): forward output and statistics, and gq, gk, gv, for F32, F16 and
 * BF16 inputs (the emulation: BF16, its tile path), causal and not, at sizes around the 64-query/64-key
 * blocks, 16-lane vectors and 32-element tile k-steps (T in 1, 37, 63, 64, 65, 100, 257; Tq != Tk; D and
 * Dv in 1, 7, 16, 64, 65, Dv != D; BH 1 and 3), scores of +-80 and steadily rising scores (the online
 * softmax rescales by e^-64 per chunk), BF16 subnormal inputs (vdpbf16ps and the tiles would read them as
 * 0: the kernels' exact paths), NaN and inf inputs, the backward run on the ref kernel's stats (the
 * kernels' stats mean the same), NULL gradients, 1 vs 2 threads (same bits), the emulated AMX kernel
 * against the native one where AMX runs (same bits), and the avx512 kernels' vector exp against double
 * (through its test hook in kernels/avx512/kernels_avx512.h). AMPC_ATTN_BENCH=1 prints ref vs fast kernel
 * times at the GPT shape (BH 48, T 256, D 64, causal).
 *
 * Tolerance (every element; derived, first order in u = 2^-24, gamma_n = n u / (1 - n u)). The inputs are
 * dtype values, exact in F32 and in double; for row i of a head, with nv visible keys, exact scores
 * s_ij = scale q_i.k_j, m_i = max_j s_ij, p_ij = softmax, S_ij = scale sum_t |q_it k_jt|. A kernel's
 * products round as its model says: a dot product of n input pairs passes through dd(n) roundings and
 * a sum of n terms with a probability (or dS) factor through sd(n):
 *   FMA chains (avx512):  dd(n) = sd(n) = n
 *   tiles (amx, BF16):    dd(n) = 17 + ceil(n / 32), sd(n) = 17 + 3 ceil(n / 32) (16 FMAs of a pair chain,
 *                         even + odd, one add into C per tile instruction; P and dS as three BF16 parts),
 *                         plus lost(n, X) = 2^-125 X + 102 ceil(n / 32) 2^-126 for the parts below 2^-126
 *                         the tiles read as 0 (X = sum |x| of the other factors) and the flushed sums;
 *                         every dot also flushes: fl(n) = 34 ceil(n / 32) 2^-126 (vdpbf16ps: n 2^-126).
 *   scores:  |s^ - s| <= E_i = gamma_{dd(D)+2} max_j S_ij (+ fl(D) scale for BF16): the dot, one rounding
 *            for the product with scale and one for scale itself rounded to F32.
 *   probabilities, relative: rho_i = 2 (2 E_i + 2 u A_i + 5 (nv + 1) u) + gamma_nv + 2u
 *            <= 4 E_i + 4 u A_i + gamma_{11 nv + 12}, with A_i = max_j |s_ij - m_i|. A numerator
 *            exp(s^ - m^) moves by |ds_ij| + |dm_i| <= 2 E_i, by u A_i for rounding s - m, and by 4u + 1u
 *            for exp (2 ulp) and a product; an online softmax multiplies it by up to nv rescaling
 *            factors exp(m_old - m_new), 4u + 1u each, whose arguments sum to at most A_i (the max only
 *            rises: another u A_i). The sum l carries the worst numerator's error plus gamma_nv, hence
 *            the 2; 1 / l and the product with it add 2u.
 *   o:       (rho_i + gamma_{sd(nv)+1}) sum_j p_ij |v_jt| + lost(nv, sum_j |v_jt|)  (the sum over keys of
 *            unnormalised numerators, then the product with 1 / l <= 1).
 *   dp_ij = go_i.v_j within gamma_dd(Dv) sum_t |go_it v_jt| (+ fl(Dv) for BF16); D_i = sum_j p dp within
 *            dD_i = sum_j (rho_i p |dp| + p edp) + gamma_nv sum_j p |dp|; ds = scale p (dp - D_i) within
 *            eds = scale (rho_i p |dp - D_i| + p (edp + dD_i) + 4u p |dp - D_i|);
 *   gq_it:   sum_j eds_ij |k_jt| + gamma_sd(nv) sum_j |ds_ij k_jt| + lost(nv, sum_j |k_jt|); gk, gv alike
 *            over the Tq queries (lost(Tq, sum_i |q_it|), lost(Tq, sum_i |go_it|)).
 *   stats:   |m^ - m| <= E_i, and 1 / l relative rho_i.
 * Each bound also gets (Tq + Tk + D + Dv) 2^-149 absolute (gradual underflow, for the subnormal case). The
 * ref kernel computes the same quantities with smaller errors (double dots and sums), so both kernels are
 * within the bound of the exact result and |fast - ref| <= 2 bound is what is checked. The printed margin
 * (largest error / tolerance) shows how far inside the bound the kernel is; a wrong key, mask or rescale
 * is off by orders of magnitude more. Non-finite inputs (test_special) are checked for the pattern: an
 * output is NaN (or the same infinity) exactly where ref's is, the finite ones within the bounds of the
 * problem with the special values replaced by 0 wherever those bounds do not involve them. */
#include "kernel_check.h"

#include "core/core.h"
#include "kernels/avx512/kernels_avx512.h"

/* attention_amx_emu.c: the AMX kernel's emulated build */
ampci_attention_kernel ampc_k_attention__amx_emu;
ampci_attention_bw_kernel ampc_k_attention_bw__amx_emu;

#include <stdlib.h>
#include <time.h>

#define U 0x1p-24

/* How a variant's products round (the header's model). */
typedef struct model {
    bool tiles; /* BF16 on the AMX tiles (else FMA chains) */
} model;

typedef struct variant {
    ampc_dtype dt;
    ampc_k_attention_fn fw;
    ampc_k_attention_bw_fn bw;
    model md;
    ampc_k_attention_fn native_fw; /* the emulation's native twin, where AMX runs: same bits */
    ampc_k_attention_bw_fn native_bw;
    char name[80]; /* "ampc_k_attention__avx512bf16 bf16" */
} variant;

static ampc_ctx *g_ctx1, *g_ctx2; /* 1 and 2 threads */
static const struct ampc_kernels *g_ref;
static variant g_var[16];
static int g_nvar;
static bool g_avx512;   /* the exp hook runs here */
static double g_margin; /* largest error / tolerance seen */

/* The backward entry that goes with a forward one: the same ISA tag (ampc_k_attention_bw__<tag>). */
static const ampci_kernel *backward_of(const ampci_kernel *fw) {
    char name[96];
    snprintf(name, sizeof name, "ampc_k_attention_bw%s", strstr(fw->name, "__"));
    const ampci_kernel *bw = ampci_kernel_find(name);
    if (!bw || bw->slot != AMPCI_SLOT_ATTENTION_BW) FAILF("%s has no backward entry %s", fw->name, name);
    return bw;
}

/* Every attention entry but the ref one (the oracle) that this CPU runs, with its backward, on each of
 * the three dtypes: a new entry is picked up here. */
static int setup(void **state) {
    (void)state;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 1}, &g_ctx1) != AMPC_OK) return -1;
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = 1, .threads = 2}, &g_ctx2) != AMPC_OK) return -1;
    g_ref = ampci_kernels(AMPC_ISA_REF);
    g_avx512 = ampc_cpu()->best >= AMPC_ISA_AVX512;
    static const ampc_dtype dts[] = {AMPC_DTYPE_F32, AMPC_DTYPE_F16, AMPC_DTYPE_BF16};
    kc_note_unusable(AMPCI_SLOT_ATTENTION);
    kc_list l = kc_fast(AMPCI_SLOT_ATTENTION, KC_ANY);
    for (int i = 0; i < l.n; i++) {
        const ampci_kernel *e = l.e[i], *bw = backward_of(e);
        for (int d = 0; d < 3; d++) {
            AMPCI_ASSERT(g_nvar < (int)(sizeof g_var / sizeof g_var[0])); /* never silently untested */
            variant *v = &g_var[g_nvar++];
            /* the amx kernel runs BF16 on the tiles, the other dtypes as the avx512 kernel */
            bool tiles = e->level == AMPC_ISA_AMX && dts[d] == AMPC_DTYPE_BF16;
            *v = (variant){dts[d], e->fn.ATTENTION, bw->fn.ATTENTION_BW, {tiles}, NULL, NULL, ""};
            snprintf(v->name, sizeof v->name, "%s %s", e->name, ampc_dtype_name(dts[d]));
        }
    }
    /* the emulated AMX kernel (any CPU), on its tile path; checked against the native one where AMX runs */
    const ampci_kernel *nat = ampci_kernel_find("ampc_k_attention__amx");
    bool native = nat && ampci_kernel_usable(nat);
    AMPCI_ASSERT(g_nvar < (int)(sizeof g_var / sizeof g_var[0]));
    g_var[g_nvar++] = (variant){AMPC_DTYPE_BF16,
                                ampc_k_attention__amx_emu,
                                ampc_k_attention_bw__amx_emu,
                                {true},
                                native ? nat->fn.ATTENTION : NULL,
                                native ? backward_of(nat)->fn.ATTENTION_BW : NULL,
                                "ampc_k_attention__amx_emu BF16"};
    if (!native) printf("  note: no usable AMX here: the emulated AMX kernel is not compared with a native one\n");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_nvar) printf("  largest |fast - ref| / tolerance over all cases: %.3g\n", g_margin);
    ampc_ctx_free(g_ctx1);
    ampc_ctx_free(g_ctx2);
    return 0;
}

/* ---- problems ---- */

typedef enum dist { D_NORMAL = 0, D_LARGE, D_RAMP, D_SUBNORMAL } dist;

typedef struct prob {
    ampci_attn a;
    int64_t nq, nk, nv, no;     /* element counts of q, k, v and o (= go) */
    void *q, *k, *v, *go;       /* of dt */
    double *dq, *dk, *dv, *dgo; /* the same values */
} prob;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double uniform01(void) {
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return (double)((g_rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53;
}
static double normal(void) { return sqrt(-2 * log(uniform01() + 0x1p-54)) * cos(6.283185307179586 * uniform01()); }

/* n values of dt drawn as off + scale N(0, 1) + ramp * (row index), rows of rowlen, with their double copies
 * (the rounded values). */
static void *draw(ampc_dtype dt, int64_t n, int64_t rowlen, double off, double scale, double ramp, double **dcopy) {
    float *f = malloc((size_t)(n + 1) * sizeof(float));
    void *x = malloc((size_t)(n + 1) * ampc_dtype_size(dt));
    *dcopy = malloc((size_t)(n + 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) f[i] = (float)(off + scale * normal() + ramp * (double)(i / rowlen));
    ampc_convert(x, dt, f, AMPC_DTYPE_F32, (size_t)n);
    ampc_convert(f, AMPC_DTYPE_F32, x, dt, (size_t)n);
    for (int64_t i = 0; i < n; i++) (*dcopy)[i] = f[i];
    free(f);
    return x;
}

static prob prob_new(ampc_dtype dt, int64_t BH, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv, bool causal, dist d) {
    prob p = {.a = {.BH = BH, .Tq = Tq, .Tk = Tk, .D = D, .Dv = Dv, .dt = dt, .causal = causal}};
    p.a.scale = 1.0 / sqrt((double)D);
    p.nq = BH * Tq * D, p.nk = BH * Tk * D, p.nv = BH * Tk * Dv, p.no = BH * Tq * Dv;
    /* D_LARGE: score sd 30 (|s| up to ~90); D_RAMP: q around 1 and key j's entries around j / 4, so the
     * scores rise along the keys and each 64-key chunk raises the row max by about 16 sqrt(D) (the online
     * softmax rescales by e^-64 for D = 16); D_SUBNORMAL: q and go below 2^-126 (BF16 subnormals), k near
     * 2^124 and v near 2^100 so that their products matter (v stays far enough below FLT_MAX / Tk: the
     * forward sums exp(s - m) v before dividing by the sum) */
    double sq = 1, sk = 1, sv = 1, sg = 1, oq = 0, ramp = 0;
    if (d == D_LARGE) sq = sk = sqrt(30.0);
    if (d == D_RAMP) sq = 0.25, oq = 1, ramp = 0.25;
    if (d == D_SUBNORMAL) sq = sg = 0x1p-128, sk = 0x1p124, sv = 0x1p100;
    p.q = draw(dt, p.nq, D, oq, sq, 0, &p.dq);
    p.k = draw(dt, p.nk, D, 0, sk, ramp, &p.dk);
    p.v = draw(dt, p.nv, Dv, 0, sv, 0, &p.dv);
    p.go = draw(dt, p.no, Dv, 0, sg, 0, &p.dgo);
    p.a.q = p.q, p.a.k = p.k, p.a.v = p.v;
    return p;
}

static void prob_free(prob *p) {
    free(p->q), free(p->k), free(p->v), free(p->go), free(p->dq), free(p->dk), free(p->dv), free(p->dgo);
}

/* ---- the bounds of the header, in double ---- */

typedef struct bounds {
    double *o, *m, *inv, *gq, *gk, *gv;
} bounds;

static double gam(double n) { return n * U / (1 - n * U); }

/* The model's roundings (the header): dd(n), sd(n), fl(n) and lost(n, X). */
static double kt32(int64_t n) { return (double)((n + 31) / 32); }
static double dd(const model *md, int64_t n) { return md->tiles ? 17 + kt32(n) : (double)n; }
static double sd(const model *md, int64_t n) { return md->tiles ? 17 + 3 * kt32(n) : (double)n; }
static double fl(const model *md, int64_t n) { return md->tiles ? 34 * kt32(n) * 0x1p-126 : (double)n * 0x1p-126; }
static double lost(const model *md, int64_t n, double x) {
    return md->tiles ? 0x1p-125 * x + 102 * kt32(n) * 0x1p-126 : 0.0;
}

/* One query row: fills the row's bounds and adds its terms to the gk, gv accumulators (sk1/sk2: sum of
 * eds |q|, |ds q|; sv1/sv2: rho p |go|, p |go|). w: scratch of 4 Tk doubles. */
static void bound_row(const prob *p, const model *md, int64_t h, int64_t i, bounds *b, double *sk1, double *sk2,
                      double *sv1, double *sv2, double *w) {
    const ampci_attn *a = &p->a;
    int64_t D = a->D, Dv = a->Dv, Tk = a->Tk, r = h * a->Tq + i;
    int64_t nv = a->causal && i + 1 < Tk ? i + 1 : Tk;
    const double *q = p->dq + r * D, *go = p->dgo + r * Dv, *k = p->dk + h * Tk * D, *v = p->dv + h * Tk * Dv;
    double *s = w, *pr = w + Tk, *dp = w + 2 * Tk, *edp = w + 3 * Tk;
    bool bf = a->dt == AMPC_DTYPE_BF16;
    double m = -INFINITY, smax = 0, l = 0, E, A = 0, rho;
    for (int64_t j = 0; j < nv; j++) {
        double d = 0, da = 0;
        for (int64_t t = 0; t < D; t++) d += q[t] * k[j * D + t], da += fabs(q[t] * k[j * D + t]);
        s[j] = d * a->scale, smax = fmax(smax, da * a->scale), m = fmax(m, s[j]);
    }
    E = gam(dd(md, D) + 2) * smax + (bf ? fl(md, D) * a->scale : 0);
    for (int64_t j = 0; j < nv; j++) l += exp(s[j] - m), A = fmax(A, fabs(s[j] - m));
    rho = 2 * (2 * E + 2 * U * A) + gam(11.0 * (double)nv + 12);
    double eta = (double)(a->Tq + Tk + D + Dv) * 0x1p-149, Dsum = 0, dD = 0, pdp = 0;
    for (int64_t j = 0; j < nv; j++) {
        pr[j] = exp(s[j] - m) / l;
        double d = 0, da = 0;
        for (int64_t t = 0; t < Dv; t++) d += go[t] * v[j * Dv + t], da += fabs(go[t] * v[j * Dv + t]);
        dp[j] = d, edp[j] = gam(dd(md, Dv)) * da + (bf ? fl(md, Dv) : 0);
        Dsum += pr[j] * d, pdp += pr[j] * fabs(d), dD += rho * pr[j] * fabs(d) + pr[j] * edp[j];
    }
    dD += gam((double)nv) * pdp;
    b->m[r] = 2 * E, b->inv[r] = 2 * rho / l;
    for (int64_t t = 0; t < Dv; t++) {
        double acc = 0, va = 0;
        for (int64_t j = 0; j < nv; j++) acc += pr[j] * fabs(v[j * Dv + t]), va += fabs(v[j * Dv + t]);
        b->o[r * Dv + t] = 2 * ((rho + gam(sd(md, nv) + 1)) * acc + lost(md, nv, va)) + eta;
    }
    for (int64_t t = 0; t < D; t++) b->gq[r * D + t] = 0;
    for (int64_t j = 0; j < nv; j++) {
        double x = dp[j] - Dsum, ds = a->scale * pr[j] * x;
        double eds = a->scale * (rho * pr[j] * fabs(x) + pr[j] * (edp[j] + dD) + 4 * U * pr[j] * fabs(x));
        for (int64_t t = 0; t < D; t++) {
            b->gq[r * D + t] += eds * fabs(k[j * D + t]) + gam(sd(md, nv)) * fabs(ds * k[j * D + t]);
            sk1[j * D + t] += eds * fabs(q[t]), sk2[j * D + t] += fabs(ds * q[t]);
        }
        for (int64_t t = 0; t < Dv; t++)
            sv1[j * Dv + t] += rho * pr[j] * fabs(go[t]), sv2[j * Dv + t] += pr[j] * fabs(go[t]);
    }
    for (int64_t t = 0; t < D; t++) {
        double ka = 0;
        for (int64_t j = 0; j < nv; j++) ka += fabs(k[j * D + t]);
        b->gq[r * D + t] = 2 * (b->gq[r * D + t] + lost(md, nv, ka)) + eta;
    }
}

/* sum over the head's queries of |x_it| (t < n), for lost(): into out (n) */
static void column_sums(const double *x, int64_t rows, int64_t n, double *out) {
    for (int64_t t = 0; t < n; t++) out[t] = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t t = 0; t < n; t++) out[t] += fabs(x[i * n + t]);
}

static bounds bounds_new(const prob *p, const model *md) {
    const ampci_attn *a = &p->a;
    int64_t rows = a->BH * a->Tq, Tk = a->Tk, D = a->D, Dv = a->Dv;
    bounds b = {malloc((size_t)(p->no + 1) * 8), malloc((size_t)(rows + 1) * 8),  malloc((size_t)(rows + 1) * 8),
                malloc((size_t)(p->nq + 1) * 8), malloc((size_t)(p->nk + 1) * 8), malloc((size_t)(p->nv + 1) * 8)};
    double *acc = calloc((size_t)(2 * Tk * (D + Dv) + 4 * Tk + D + Dv + 1), 8);
    double *sk1 = acc, *sk2 = sk1 + Tk * D, *sv1 = sk2 + Tk * D, *sv2 = sv1 + Tk * Dv, *w = sv2 + Tk * Dv;
    double *qs = w + 4 * Tk, *gs = qs + D;
    double eta = (double)(a->Tq + Tk + D + Dv) * 0x1p-149, gt = gam(sd(md, a->Tq));
    for (int64_t h = 0; h < a->BH; h++) {
        memset(acc, 0, (size_t)(2 * Tk * (D + Dv)) * 8);
        for (int64_t i = 0; i < a->Tq; i++) bound_row(p, md, h, i, &b, sk1, sk2, sv1, sv2, w);
        column_sums(p->dq + h * a->Tq * D, a->Tq, D, qs), column_sums(p->dgo + h * a->Tq * Dv, a->Tq, Dv, gs);
        for (int64_t e = 0; e < Tk * D; e++)
            b.gk[h * Tk * D + e] = 2 * (sk1[e] + gt * sk2[e] + lost(md, a->Tq, qs[e % D])) + eta;
        for (int64_t e = 0; e < Tk * Dv; e++)
            b.gv[h * Tk * Dv + e] = 2 * (sv1[e] + gt * sv2[e] + lost(md, a->Tq, gs[e % Dv])) + eta;
    }
    free(acc);
    return b;
}

static void bounds_free(bounds *b) { free(b->o), free(b->m), free(b->inv), free(b->gq), free(b->gk), free(b->gv); }

/* ---- running and comparing ---- */

typedef struct result {
    float *o, *stats, *gq, *gk, *gv;
} result;

static result run_kernels(ampc_ctx *ctx, ampc_k_attention_fn fw, ampc_k_attention_bw_fn bw, const prob *p) {
    result r = {malloc((size_t)(p->no + 1) * 4), malloc((size_t)(2 * p->a.BH * p->a.Tq + 1) * 4),
                malloc((size_t)(p->nq + 1) * 4), malloc((size_t)(p->nk + 1) * 4), malloc((size_t)(p->nv + 1) * 4)};
    ASSERT_OK(fw(ctx, &p->a, r.o, r.stats));
    ASSERT_OK(bw(ctx, &p->a, r.stats, p->go, r.gq, r.gk, r.gv));
    return r;
}

static void result_free(result *r) { free(r->o), free(r->stats), free(r->gq), free(r->gk), free(r->gv); }

/* |x[i stride] - y[i stride]| <= tol[i] for every element; NaN only where both are. */
static void check(const char *what, const char *var, const prob *p, const float *x, const float *y, int64_t stride,
                  const double *tol, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double a = x[i * stride], b = y[i * stride], e = fabs(a - b);
        if (isnan(a) && isnan(b)) continue;
        if (!(e <= tol[i]))
            FAILF("%s %s: BH %lld Tq %lld Tk %lld D %lld Dv %lld causal %d: element %lld: fast %.9g ref %.9g "
                  "(|diff| %.3g > tol %.3g)",
                  var, what, (long long)p->a.BH, (long long)p->a.Tq, (long long)p->a.Tk, (long long)p->a.D,
                  (long long)p->a.Dv, p->a.causal, (long long)i, a, b, e, tol[i]);
        if (tol[i] > 0 && e / tol[i] > g_margin) g_margin = e / tol[i];
    }
}

static void same_bits(const char *what, const float *x, const float *y, int64_t n) {
    if (memcmp(x, y, (size_t)n * sizeof(float)) != 0) FAILF("%s differs between 1 and 2 threads", what);
}

/* One problem: the variant vs ref within the bounds, and the same bits with 2 threads. */
static void run_case(const variant *var, int64_t BH, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv, bool causal,
                     dist d) {
    prob p = prob_new(var->dt, BH, Tq, Tk, D, Dv, causal, d);
    bounds b = bounds_new(&p, &var->md);
    result ref = run_kernels(g_ctx1, g_ref->attention, g_ref->attention_bw, &p);
    result got = run_kernels(g_ctx1, var->fw, var->bw, &p);
    int64_t rows = BH * Tq;
    check("o", var->name, &p, got.o, ref.o, 1, b.o, p.no);
    check("stats max", var->name, &p, got.stats, ref.stats, 2, b.m, rows);
    check("stats 1/sum", var->name, &p, got.stats + 1, ref.stats + 1, 2, b.inv, rows);
    check("gq", var->name, &p, got.gq, ref.gq, 1, b.gq, p.nq);
    check("gk", var->name, &p, got.gk, ref.gk, 1, b.gk, p.nk);
    check("gv", var->name, &p, got.gv, ref.gv, 1, b.gv, p.nv);
    /* the backward on the ref kernel's stats: same meaning, same bounds */
    ASSERT_OK(var->bw(g_ctx1, &p.a, ref.stats, p.go, got.gq, got.gk, got.gv));
    check("gq (ref stats)", var->name, &p, got.gq, ref.gq, 1, b.gq, p.nq);
    check("gk (ref stats)", var->name, &p, got.gk, ref.gk, 1, b.gk, p.nk);
    check("gv (ref stats)", var->name, &p, got.gv, ref.gv, 1, b.gv, p.nv);
    ASSERT_OK(var->bw(g_ctx1, &p.a, got.stats, p.go, got.gq, got.gk, got.gv)); /* own stats again */
    result two = run_kernels(g_ctx2, var->fw, var->bw, &p);
    same_bits("o", got.o, two.o, p.no), same_bits("stats", got.stats, two.stats, 2 * rows);
    same_bits("gq", got.gq, two.gq, p.nq), same_bits("gk", got.gk, two.gk, p.nk), same_bits("gv", got.gv, two.gv, p.nv);
    result_free(&two), result_free(&got), result_free(&ref);
    bounds_free(&b);
    prob_free(&p);
}

/* ---- tests ---- */

/* The tables name the kernels; BF16 takes vdpbf16ps exactly when the CPU has it, and the widening
 * kernel stays registered. */
static void test_table(void **state) {
    (void)state;
    assert_string_equal(g_ref->chosen[AMPCI_SLOT_ATTENTION][0]->name, "ampc_k_attention__ref");
    assert_string_equal(g_ref->chosen[AMPCI_SLOT_ATTENTION_BW][0]->name, "ampc_k_attention_bw__ref");
    assert_non_null(ampci_kernel_find("ampc_k_attention__avx512"));
    if (ampc_cpu()->chosen < AMPC_ISA_AVX512) return; /* the avx512 level is lowered here */
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AVX512);
    bool dp = ampc_cpu_has(AMPC_CPU_AVX512_BF16);
    assert_string_equal(k->chosen[AMPCI_SLOT_ATTENTION][0]->name,
                        dp ? "ampc_k_attention__avx512bf16" : "ampc_k_attention__avx512");
    assert_string_equal(k->chosen[AMPCI_SLOT_ATTENTION_BW][0]->name,
                        dp ? "ampc_k_attention_bw__avx512bf16" : "ampc_k_attention_bw__avx512");
    assert_true(k->attention == k->chosen[AMPCI_SLOT_ATTENTION][0]->fn.ATTENTION);
}

/* T (= Tq = Tk) around the blocks, each with its D, Dv and BH; every variant, causal and not. */
static void test_sizes(void **state) {
    (void)state;
    static const int64_t cases[][4] = {{1, 1, 1, 1},     {63, 7, 16, 3},  {64, 16, 7, 1},
                                       {65, 64, 65, 3},  {37, 65, 64, 1}, {100, 1, 33, 3},
                                       {257, 64, 17, 3}, {2, 64, 64, 3},  {17, 65, 1, 1}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int causal = 0; causal < 2; causal++)
                run_case(&g_var[v], cases[c][3], cases[c][0], cases[c][0], cases[c][1], cases[c][2], causal, D_NORMAL);
}

/* Tq != Tk: more queries than keys (non-causal, and causal where rows i >= Tk see every key) and fewer. */
static void test_rectangular(void **state) {
    (void)state;
    static const int64_t cases[][6] = {{37, 100, 16, 7, 3, 0}, {100, 37, 7, 16, 1, 0}, {257, 65, 64, 64, 1, 0},
                                       {1, 257, 65, 1, 3, 0},  {65, 1, 1, 65, 1, 0},   {130, 63, 16, 16, 1, 0},
                                       {100, 37, 16, 7, 3, 1}, {37, 100, 7, 16, 1, 1}};
    for (int v = 0; v < g_nvar; v++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            run_case(&g_var[v], cases[c][4], cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][5] != 0,
                     D_NORMAL);
}

/* Scores of +-80 and scores rising chunk after chunk: the running max and its rescaling. */
static void test_large_scores(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++)
        for (int causal = 0; causal < 2; causal++) {
            run_case(&g_var[v], 2, 257, 257, 64, 64, causal, D_LARGE);
            run_case(&g_var[v], 1, 200, 200, 16, 24, causal, D_RAMP);
        }
}

/* BF16 subnormal q and go (k, v large): vdpbf16ps alone would read them as 0 (o would be uniform). */
static void test_bf16_subnormal(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++)
        if (g_var[v].dt == AMPC_DTYPE_BF16)
            for (int causal = 0; causal < 2; causal++) {
                run_case(&g_var[v], 1, 70, 70, 16, 16, causal, D_SUBNORMAL);
                run_case(&g_var[v], 2, 33, 33, 7, 5, causal, D_SUBNORMAL);
            }
}

/* Fewer outputs change nothing in the others: stats NULL (o alone), and each gradient alone. */
static void test_optional_outputs(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        const variant *var = &g_var[v];
        prob p = prob_new(var->dt, 2, 100, 100, 16, 24, true, D_NORMAL);
        result all = run_kernels(g_ctx2, var->fw, var->bw, &p);
        float *o = malloc((size_t)p.no * 4);
        float *g[3] = {malloc((size_t)p.nq * 4), malloc((size_t)p.nk * 4), malloc((size_t)p.nv * 4)};
        ASSERT_OK(var->fw(g_ctx2, &p.a, o, NULL));
        same_bits("o without stats", o, all.o, p.no);
        ASSERT_OK(var->bw(g_ctx2, &p.a, all.stats, p.go, g[0], NULL, NULL));
        ASSERT_OK(var->bw(g_ctx2, &p.a, all.stats, p.go, NULL, g[1], NULL));
        ASSERT_OK(var->bw(g_ctx2, &p.a, all.stats, p.go, NULL, NULL, g[2]));
        same_bits("gq alone", g[0], all.gq, p.nq), same_bits("gk alone", g[1], all.gk, p.nk);
        same_bits("gv alone", g[2], all.gv, p.nv);
        ASSERT_OK(var->bw(g_ctx2, &p.a, all.stats, p.go, NULL, NULL, NULL));
        free(o), free(g[0]), free(g[1]), free(g[2]);
        result_free(&all);
        prob_free(&p);
    }
}

/* Degenerate sizes: no key (o = 0, as ref), no query (gk = gv = 0), no head. */
static void test_degenerate(void **state) {
    (void)state;
    for (int v = 0; v < g_nvar; v++) {
        const variant *var = &g_var[v];
        prob p = prob_new(var->dt, 2, 5, 0, 3, 4, false, D_NORMAL);
        float o[40], st[20], gq[30];
        for (int i = 0; i < 30; i++) gq[i] = NAN;
        ASSERT_OK(var->fw(g_ctx1, &p.a, o, st));
        for (int i = 0; i < 40; i++) assert_true(o[i] == 0.0f);
        for (int i = 0; i < 10; i++) assert_true(st[2 * i] == -INFINITY && st[2 * i + 1] == 0.0f);
        ASSERT_OK(var->bw(g_ctx1, &p.a, st, p.go, gq, NULL, NULL));
        for (int i = 0; i < 30; i++) assert_true(gq[i] == 0.0f);
        prob_free(&p);
        p = prob_new(var->dt, 2, 0, 5, 3, 4, true, D_NORMAL);
        float gk[30], gv[40];
        for (int i = 0; i < 30; i++) gk[i] = NAN;
        for (int i = 0; i < 40; i++) gv[i] = NAN;
        ASSERT_OK(var->fw(g_ctx1, &p.a, o, st));
        ASSERT_OK(var->bw(g_ctx1, &p.a, st, p.go, NULL, gk, gv));
        for (int i = 0; i < 30; i++) assert_true(gk[i] == 0.0f);
        for (int i = 0; i < 40; i++) assert_true(gv[i] == 0.0f);
        p.a.BH = 0;
        ASSERT_OK(var->fw(g_ctx1, &p.a, NULL, NULL));
        ASSERT_OK(var->bw(g_ctx1, &p.a, NULL, p.go, NULL, NULL, NULL));
        prob_free(&p);
    }
}

/* The exp of the probabilities: within 2 ulp of double exp for normal results, within 2^-149 for
 * subnormal ones; -inf -> +0 exactly (masked keys), +inf and overflow -> inf, NaN -> NaN, 0 -> 1. */
static void test_exp(void **state) {
    (void)state;
    if (!g_avx512) {
        printf("  skipped: no AVX-512 here\n");
        return;
    }
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    double worst = 0;
    /* every 64th float of [-104, 89]: bit patterns of the negative half, then of the positive half */
    uint32_t spans[2][2] = {{0x80000000u, tu_bits(-104.0f)}, {0u, tu_bits(89.0f)}};
    for (int s = 0; s < 2; s++)
        for (uint64_t b0 = spans[s][0]; b0 <= spans[s][1]; b0 += (uint64_t)N * 64) {
            int n = 0;
            for (uint64_t b = b0; b <= spans[s][1] && n < N; b += 64) x[n++] = tu_float((uint32_t)b);
            ampci_attn_exp_avx512(y, x, n);
            for (int i = 0; i < n; i++) {
                double e = exp((double)x[i]), err = fabs(y[i] - e);
                if (e > 0x1.fffffep127) {
                    if (!isinf(y[i])) FAILF("exp(%a) = %a, expected inf", x[i], y[i]);
                    continue;
                }
                double ulp = e < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(e) - 23);
                if (e < 0x1p-126 ? err > 0x1p-149 : err > 2 * ulp)
                    FAILF("exp(%a) = %a, double says %a (%.2f ulp)", x[i], y[i], e, err / ulp);
                if (e >= 0x1p-126 && err / ulp > worst) worst = err / ulp;
            }
        }
    float sp[8] = {-INFINITY, INFINITY, NAN, 0.0f, -0.0f, -110.0f, -1000.0f, 89.0f}, r[8];
    ampci_attn_exp_avx512(r, sp, 8);
    assert_true(r[0] == 0.0f && !signbit(r[0]));
    assert_true(isinf(r[1]) && r[1] > 0);
    assert_true(isnan(r[2]));
    assert_true(r[3] == 1.0f && r[4] == 1.0f);
    assert_true(r[5] == 0.0f && r[6] == 0.0f);
    assert_true(isinf(r[7]));
    printf("  exp: max error %.3f ulp over normal results\n", worst);
    free(x), free(y);
}

/* ---- timing (AMPC_ATTN_BENCH=1) ---- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best of `reps` times (ms) of the forward, and of forward + backward. */
static void time_pair(ampc_ctx *ctx, ampc_k_attention_fn fw, ampc_k_attention_bw_fn bw, const prob *p, result *r,
                      int reps, double *tf, double *tfb) {
    *tf = *tfb = INFINITY;
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        fw(ctx, &p->a, r->o, r->stats);
        double t1 = now_s();
        bw(ctx, &p->a, r->stats, p->go, r->gq, r->gk, r->gv);
        double t2 = now_s();
        *tf = fmin(*tf, 1e3 * (t1 - t0)), *tfb = fmin(*tfb, 1e3 * (t2 - t0));
    }
}

static void test_bench(void **state) {
    (void)state;
    const char *e = getenv("AMPC_ATTN_BENCH");
    if (!e || !*e || !strcmp(e, "0")) {
        printf("  (set AMPC_ATTN_BENCH=1 for ref vs fast kernel times at BH 48, T 256, D 64, causal)\n");
        return;
    }
    printf("  ms, best of runs: forward | forward + backward (BH 48, T 256, D 64, causal)\n");
    for (int v = 0; v < g_nvar; v++) {
        if (g_var[v].dt == AMPC_DTYPE_F16) continue;
        prob p = prob_new(g_var[v].dt, 48, 256, 256, 64, 64, true, D_NORMAL);
        result r = run_kernels(g_ctx1, g_var[v].fw, g_var[v].bw, &p);
        for (int t = 1; t <= 2; t++) {
            ampc_ctx *ctx = t == 1 ? g_ctx1 : g_ctx2;
            double rf, rfb, ff, ffb;
            time_pair(ctx, g_ref->attention, g_ref->attention_bw, &p, &r, 2, &rf, &rfb);
            time_pair(ctx, g_var[v].fw, g_var[v].bw, &p, &r, 100, &ff, &ffb);
            printf("  %-34s %dt  ref %8.2f | %8.2f   fast %7.2f | %7.2f   speed-up %5.1fx | %5.1fx\n", g_var[v].name, t,
                   rf, rfb, ff, ffb, rf / ff, rfb / ffb);
        }
        result_free(&r);
        prob_free(&p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_exp),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_rectangular),
        cmocka_unit_test(test_large_scores),
        cmocka_unit_test(test_bf16_subnormal),
        cmocka_unit_test(test_optional_outputs),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
