/* dispatch.c: the registry and the per-level tables built from it. The four folder tables are read once,
 * in level order, into one registry. Then, for each kernel level (one table per level, filled once) and
 * each cell, the candidates are the entries dispatch may choose (role KERNEL) whose level is at most the
 * table's and which this CPU runs; ampci_kernels_choose() picks one, by the measured times (tune.h) where
 * the process measured, by the fixed rule otherwise, and install() puts its function into the field of
 * struct ampc_kernels that the rest of the library calls. A GEMM cell whose measured winner changes with
 * the size of the product gets a small dispatcher in its field that runs each size class's winner.
 * Restricting the candidates by level is what lets AMPC_ISA and a context's cap lower, never raise, what
 * runs. */
#include "tune.h"

#include <math.h>
#include <pthread.h>

#define MAX_KERNELS 256
#define MAX_CANDIDATES AMPCI_TUNE_MAX_CAND /* per cell; the registry test keeps every cell well below */

static const ampci_kernel *g_all[MAX_KERNELS];
static bool g_usable[MAX_KERNELS];
static size_t g_nall;
static struct ampc_kernels g_tables[AMPC_ISA_COUNT];
static pthread_once_t g_registry_once = PTHREAD_ONCE_INIT, g_tables_once = PTHREAD_ONCE_INIT;

/* The CPU's features as a set (AMPCI_FEAT bits): usable ones, or all that CPUID reports. */
static uint32_t feature_set(bool reported) {
    const ampc_cpu_info *cpu = ampc_cpu();
    uint32_t s = 0;
    for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++)
        if (reported ? cpu->cpuid[f] : ampc_cpu_has((ampc_cpu_feature)f)) s |= 1u << f;
    return s;
}

bool ampci_kernel_usable(const ampci_kernel *e) {
    return e->level <= ampc_cpu()->best && (e->needs & ~feature_set(false)) == 0;
}

ampci_key_kind ampci_slot_key_kind(ampci_slot slot) {
    switch (slot) {
    case AMPCI_SLOT_CONVERT: return AMPCI_KEY_PAIR;
    case AMPCI_SLOT_GEMM:
    case AMPCI_SLOT_IM2COL:
    case AMPCI_SLOT_UNSCALE:
    case AMPCI_SLOT_SUMSQ: return AMPCI_KEY_DTYPE;
    case AMPCI_SLOT_UNARY:
    case AMPCI_SLOT_UNARY_BW:
    case AMPCI_SLOT_BINARY: return AMPCI_KEY_OP;
    default: return AMPCI_KEY_NONE;
    }
}

int ampci_kernel_key(const ampci_kernel *e) {
    switch (ampci_slot_key_kind(e->slot)) {
    case AMPCI_KEY_PAIR: return (int)e->dtype * AMPC_DTYPE_COUNT + (int)e->src;
    case AMPCI_KEY_DTYPE: return (int)e->dtype;
    case AMPCI_KEY_OP: return e->op;
    default: return 0;
    }
}

bool ampci_same_cell(const ampci_kernel *a, const ampci_kernel *b) {
    return a->slot == b->slot && ampci_kernel_key(a) == ampci_kernel_key(b);
}

/* Candidates of cell (slot, key) for a table of `level`, in registry order; returns how many there are
 * (out holds at most max). */
static size_t collect(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < g_nall; i++) {
        const ampci_kernel *e = g_all[i];
        if (e->slot != slot || ampci_kernel_key(e) != key) continue;
        if (e->role != AMPCI_ROLE_KERNEL || e->level > level || !g_usable[i]) continue;
        if (n < max) out[n] = e;
        n++;
    }
    return n;
}

/* THE RULE, what runs when measurement is off (AMPC_KERNEL_CHOICE=rule), for cells without a choice, and
 * the pick a measurement must beat by AMPCI_TUNE_MARGIN to replace: the last candidate in registry order
 * (folders ref, avx2, avx512, amx: the highest usable level; within a folder, its table's order, best
 * last), passing over an entry whose slow_with names a feature this CPU reports (AVX512-BF16's one-pass
 * F32 GEMM on AMX CPUs, where vdpbf16ps is slow). */
static const ampci_kernel *rule(const ampci_kernel *const *cand, size_t n) {
    uint32_t reported = feature_set(true);
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
    int n = (int)collect(level, slot, key, cand, MAX_CANDIDATES);
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
    k->isa = level;
    for (size_t i = 0; i < g_nall; i++) {
        ampci_slot slot = g_all[i]->slot;
        int key = ampci_kernel_key(g_all[i]);
        if (done[slot][key]) continue;
        done[slot][key] = true;
        AMPCI_ASSERT(collect(level, slot, key, NULL, 0) <= MAX_CANDIDATES);
        const ampci_kernel *by[AMPCI_SIZE_CLASSES];
        int classes = ampci_gemm_cell(slot, key) >= 0 ? AMPCI_SIZE_CLASSES : 1;
        for (int c = 0; c < AMPCI_SIZE_CLASSES; c++)
            by[c] = c < classes ? ampci_kernels_choose(level, slot, key, c).kernel : by[0];
        ampci_kernels_set(k, slot, key, by, level);
    }
}

static void add_folder(const ampci_kernel *table, size_t n) {
    for (size_t i = 0; i < n; i++) {
        AMPCI_ASSERT(g_nall < MAX_KERNELS);
        AMPCI_ASSERT(table[i].slot >= 0 && table[i].slot < AMPCI_SLOT_COUNT);
        AMPCI_ASSERT(ampci_kernel_key(&table[i]) >= 0 && ampci_kernel_key(&table[i]) < AMPCI_KEY_COUNT);
        g_usable[g_nall] = ampci_kernel_usable(&table[i]);
        g_all[g_nall++] = &table[i];
    }
}

static void registry_init(void) {
    add_folder(ampci_kernels_ref, ampci_kernels_ref_count);
    add_folder(ampci_kernels_avx2, ampci_kernels_avx2_count);
    add_folder(ampci_kernels_avx512, ampci_kernels_avx512_count);
    add_folder(ampci_kernels_amx, ampci_kernels_amx_count);
}

/* The tables need the measurement (ampci_tune), which needs the registry: two onces. */
static void tables_init(void) {
    pthread_once(&g_registry_once, registry_init);
    for (int l = AMPC_ISA_REF; l < AMPC_ISA_COUNT; l++) fill(&g_tables[l], (ampc_isa)l);
}

const ampci_kernel *const *ampci_registry(size_t *count) {
    pthread_once(&g_registry_once, registry_init);
    *count = g_nall;
    return g_all;
}

/* AUTO and levels above the process's chosen one become the chosen one. */
static ampc_isa lowered(ampc_isa isa) {
    const ampc_cpu_info *cpu = ampc_cpu();
    return isa == AMPC_ISA_AUTO || isa > cpu->chosen ? cpu->chosen : isa;
}

const struct ampc_kernels *ampci_kernels(ampc_isa isa) {
    pthread_once(&g_tables_once, tables_init);
    return &g_tables[lowered(isa)];
}

size_t ampci_candidates(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max) {
    pthread_once(&g_registry_once, registry_init);
    return collect(lowered(level), slot, key, out, max);
}

const ampci_kernel *ampci_gemm_pick(const struct ampc_kernels *k, ampci_slot slot, int key, int64_t M, int64_t N,
                                    int64_t K) {
    int g = ampci_gemm_cell(slot, key);
    return g < 0 ? k->chosen[slot][key] : k->by_size[g][ampci_gemm_size_class(M, N, K)];
}
