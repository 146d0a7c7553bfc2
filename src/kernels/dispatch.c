/* dispatch.c: the resolved per-level tables. For each kernel level (one table per level, filled once) and
 * each cell, ampci_kernels_choose() picks one of the cell's candidates (registry.c), by the measured times
 * (tune.h) where the process measured, by the fixed rule otherwise, and install() puts its function into
 * the field of struct ampc_kernels that the rest of the library calls. A GEMM cell whose measured winner
 * changes with the size of the product gets a small dispatcher in its field that runs each size class's
 * winner. Restricting the candidates by level is what lets AMPC_ISA and a context's cap lower, never
 * raise, what runs. Above the registry and the measurement in the kernels floor: neither calls back here. */
#include "tune.h"

#include <math.h>
#include <pthread.h>

#define MAX_CANDIDATES AMPCI_TUNE_MAX_CAND /* per cell; the registry test keeps every cell well below */

static struct ampc_kernels g_tables[AMPC_ISA_COUNT];
static pthread_once_t g_tables_once = PTHREAD_ONCE_INIT;

/* THE RULE, what runs when measurement is off (AMPC_KERNEL_CHOICE=rule), for cells without a choice, and
 * the pick a measurement must beat by AMPCI_TUNE_MARGIN to replace: the last candidate in registry order
 * (folders ref, avx2, avx512, amx: the highest usable level; within a folder, its table's order, best
 * last), passing over an entry whose slow_with names a feature this CPU reports (AVX512-BF16's one-pass
 * F32 GEMM on AMX CPUs, where vdpbf16ps is slow). */
static const ampci_kernel *rule(const ampci_kernel *const *cand, size_t n) {
    uint32_t reported = ampci_feature_set(true);
    for (size_t i = n; i-- > 0;)
        if ((cand[i]->slow_with & reported) == 0) return cand[i];
    return NULL;
}

/* The measured times of cand[0..n) in class cls (INFINITY: not measured), and, for a split cell, "none"
 * as entry n at the cost of the F32 GEMM's choice, timed in the split cell's own rounds. */
static int measured(ampc_isa level, ampci_slot slot, int key, int cls, const ampci_kernel **cand, int n, double *sec) {
    const ampci_tune_state *st = ampci_tune();
    const ampci_tune_times *t = st->source == AMPCI_TUNE_FROM_RULE ? NULL : &st->times;
    for (int i = 0; i < n; i++) {
        const double *s = t ? ampci_tune_sec(t, slot, key, cand[i]) : NULL;
        sec[i] = s ? s[cls] : INFINITY;
    }
    if (!ampci_split_cell(slot)) return n;
    const ampci_kernel *f32 = ampci_kernels_choose(level, AMPCI_SLOT_GEMM, AMPC_DTYPE_F32, cls).kernel;
    const double *s = t ? ampci_tune_sec(t, slot, key, f32) : NULL;
    sec[n] = s ? s[cls] : INFINITY;
    cand[n] = NULL;
    return n + 1;
}

ampci_choice ampci_kernels_choose(ampc_isa level, ampci_slot slot, int key, int cls) {
    const ampci_kernel *cand[MAX_CANDIDATES + 1];
    int n = (int)ampci_candidates_at(level, slot, key, cand, MAX_CANDIDATES);
    ampci_choice c = {.kernel = rule(cand, (size_t)n), .sec = INFINITY, .second_sec = INFINITY};
    if (n == 0 || ampci_tune()->mode == AMPCI_TUNE_RULE) return c;
    double sec[MAX_CANDIDATES + 1];
    int m = measured(level, slot, key, cls, cand, n, sec), pref = m - 1, second;
    while (pref >= 0 && cand[pref] != c.kernel) pref--; /* the rule's pick (NULL: "none", the last) */
    int best = ampci_tune_pick(sec, m, pref, &second);
    if (best < 0) return c; /* nothing timed (not measured, or every candidate failed): the rule */
    c = (ampci_choice){cand[best],
                       sec[best],
                       second >= 0 ? cand[second] : NULL,
                       second >= 0 && !cand[second],
                       second >= 0 ? sec[second] : INFINITY,
                       true};
    return c;
}

/* ---- per-size dispatchers: one per GEMM cell and table (each level's, and a context's own table) ---- */

static ampc_status run_sized(const struct ampc_kernels *k, int cell, ampc_ctx *ctx, const ampci_gemm *g) {
    const ampci_kernel *e = k->by_size[cell][ampci_gemm_size_class(g->M, g->N, g->K)];
    return e ? e->fn.GEMM(ctx, g) : k->gemm[AMPC_DTYPE_F32](ctx, g); /* none: the F32 GEMM is faster there */
}
/* sized_T_C: cell C of table T (1..4: the level's; AMPCI_TABLE_CTX: the calling context's own). */
#define TABLE_OF(T, ctx) ((T) < AMPC_ISA_COUNT ? &g_tables[(T) % AMPC_ISA_COUNT] : (ctx)->kernels)
/* clang-format off */
#define SIZED(T, C)                                                                                                    \
    static ampc_status sized_##T##_##C(ampc_ctx *ctx, const ampci_gemm *g) {                                           \
        return run_sized(TABLE_OF(T, ctx), C, ctx, g);                                                                 \
    }
#define SIZED_ROW(T) SIZED(T, 0) SIZED(T, 1) SIZED(T, 2) SIZED(T, 3) SIZED(T, 4)
SIZED_ROW(1) SIZED_ROW(2) SIZED_ROW(3) SIZED_ROW(4) SIZED_ROW(5)
#define ROW(T) {sized_##T##_0, sized_##T##_1, sized_##T##_2, sized_##T##_3, sized_##T##_4}
static ampc_k_gemm_fn const g_sized[AMPCI_TABLE_CTX + 1][AMPCI_GEMM_CELLS] = {
    {NULL}, ROW(1), ROW(2), ROW(3), ROW(4), ROW(5)};
/* clang-format on */

/* Puts f into the field of cell (slot, key): the only code that maps slots to fields. */
static void install(struct ampc_kernels *k, ampci_slot slot, int key, const ampci_kernel_fn *f) {
    int d = key / AMPC_DTYPE_COUNT, s = key % AMPC_DTYPE_COUNT;
    switch (slot) {
    case AMPCI_SLOT_CONVERT: k->cvt[d][s] = f->CONVERT; break;
    case AMPCI_SLOT_GEMM: k->gemm[key] = f->GEMM; break;
    case AMPCI_SLOT_GEMM_F32_BF16X1: k->gemm_f32_bf16x1 = f->GEMM_F32_BF16X1; break;
    case AMPCI_SLOT_GEMM_F32_BF16X3: k->gemm_f32_bf16x3 = f->GEMM_F32_BF16X3; break;
    case AMPCI_SLOT_UNARY: k->unary[key] = f->UNARY; break;
    case AMPCI_SLOT_UNARY_BW: k->unary_bw[key] = f->UNARY_BW; break;
    case AMPCI_SLOT_BINARY: k->binary[key] = f->BINARY; break;
    case AMPCI_SLOT_SOFTMAX: k->softmax = f->SOFTMAX; break;
    case AMPCI_SLOT_SOFTMAX_BW: k->softmax_bw = f->SOFTMAX_BW; break;
    case AMPCI_SLOT_LAYERNORM: k->layernorm = f->LAYERNORM; break;
    case AMPCI_SLOT_LAYERNORM_BW: k->layernorm_bw = f->LAYERNORM_BW; break;
    case AMPCI_SLOT_XENT: k->xent = f->XENT; break;
    case AMPCI_SLOT_XENT_BW: k->xent_bw = f->XENT_BW; break;
    case AMPCI_SLOT_EMBEDDING_BW: k->embedding_bw = f->EMBEDDING_BW; break;
    case AMPCI_SLOT_IM2COL: k->im2col[key] = f->IM2COL; break;
    case AMPCI_SLOT_COL2IM: k->col2im = f->COL2IM; break;
    case AMPCI_SLOT_MAXPOOL: k->maxpool = f->MAXPOOL; break;
    case AMPCI_SLOT_MAXPOOL_BW: k->maxpool_bw = f->MAXPOOL_BW; break;
    case AMPCI_SLOT_ATTENTION: k->attention = f->ATTENTION; break;
    case AMPCI_SLOT_ATTENTION_BW: k->attention_bw = f->ATTENTION_BW; break;
    case AMPCI_SLOT_SGD: k->sgd = f->SGD; break;
    case AMPCI_SLOT_ADAMW: k->adamw = f->ADAMW; break;
    case AMPCI_SLOT_UNSCALE: k->unscale[key] = f->UNSCALE; break;
    case AMPCI_SLOT_SUMSQ: k->sumsq[key] = f->SUMSQ; break;
    case AMPCI_SLOT_RANGE: k->range = f->RANGE; break;
    case AMPCI_SLOT_QUANT8: k->quant8 = f->QUANT8; break;
    case AMPCI_SLOT_COLSUM: k->colsum[key] = f->COLSUM; break;
    default: AMPCI_ASSERT(!"install: slot out of range");
    }
}

void ampci_kernels_set(struct ampc_kernels *k, ampci_slot slot, int key, const ampci_kernel *const *by_class,
                       int table) {
    int g = ampci_gemm_cell(slot, key);
    const ampci_kernel *e = by_class[0];
    bool same = true;
    for (int c = 1; g >= 0 && c < AMPCI_SIZE_CLASSES; c++) same &= by_class[c] == e;
    for (int c = 0; g >= 0 && c < AMPCI_SIZE_CLASSES; c++) k->by_size[g][c] = by_class[c];
    if (!same)
        for (int c = AMPCI_SIZE_CLASSES; c-- > 0 && !(e = by_class[c]);) continue; /* the largest class's */
    k->chosen[slot][key] = e;
    ampci_kernel_fn f = {.GEMM = NULL};
    if (!same) f.GEMM = g_sized[table][g];
    else if (e) f = e->fn;
    install(k, slot, key, &f);
}

/* One table: every cell that has entries gets its choice among its candidates (none: the field stays
 * NULL, as the split F32 slots below the levels that speed them up). */
static void fill(struct ampc_kernels *k, ampc_isa level) {
    bool done[AMPCI_SLOT_COUNT][AMPCI_KEY_COUNT] = {{false}};
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    k->isa = level;
    for (size_t i = 0; i < n; i++) {
        ampci_slot slot = all[i]->slot;
        int key = ampci_kernel_key(all[i]);
        if (done[slot][key]) continue;
        done[slot][key] = true;
        AMPCI_ASSERT(ampci_candidates_at(level, slot, key, NULL, 0) <= MAX_CANDIDATES);
        const ampci_kernel *by[AMPCI_SIZE_CLASSES];
        int classes = ampci_gemm_cell(slot, key) >= 0 ? AMPCI_SIZE_CLASSES : 1;
        for (int c = 0; c < AMPCI_SIZE_CLASSES; c++)
            by[c] = c < classes ? ampci_kernels_choose(level, slot, key, c).kernel : by[0];
        ampci_kernels_set(k, slot, key, by, level);
    }
}

/* Every level's table, once. The first choice runs the measurement (ampci_tune), which reads the registry
 * under the registry's own once and never these tables. */
static void tables_init(void) {
    for (int l = AMPC_ISA_REF; l < AMPC_ISA_COUNT; l++) fill(&g_tables[l], (ampc_isa)l);
}

const struct ampc_kernels *ampci_kernels(ampc_isa isa) {
    pthread_once(&g_tables_once, tables_init);
    return &g_tables[ampci_kernel_level(isa)];
}

const ampci_kernel *ampci_gemm_pick(const struct ampc_kernels *k, ampci_slot slot, int key, int64_t M, int64_t N,
                                    int64_t K) {
    int g = ampci_gemm_cell(slot, key);
    return g < 0 ? k->chosen[slot][key] : k->by_size[g][ampci_gemm_size_class(M, N, K)];
}
