/* dispatch.c: the registry and the per-level tables built from it. The four folder tables are read once,
 * in level order, into one registry. Then, for each kernel level (one table per level, filled once from
 * the CPU probe) and each cell, the candidates are the entries dispatch may choose (role KERNEL) whose
 * level is at most the table's and which this CPU runs; choose() picks one and install() puts its
 * function into the field of struct ampc_kernels that the rest of the library calls. Restricting the
 * candidates by level is what lets AMPC_ISA and a context's cap lower, never raise, what runs. */
#include "kernels.h"

#include <pthread.h>

#define MAX_KERNELS 256
#define MAX_CANDIDATES 16 /* per cell; the registry test keeps every cell well below */

static const ampci_kernel *g_all[MAX_KERNELS];
static bool g_usable[MAX_KERNELS];
static size_t g_nall;
static struct ampc_kernels g_tables[AMPC_ISA_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

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

/* THE RULE, the one place that decides which kernel runs. The next issue ("Speed where it matters")
 * replaces it with a measurement of the candidates.
 * Today: the last candidate in registry order wins (folders ref, avx2, avx512, amx: the highest usable
 * level; within a folder, its table's order, best last), passing over an entry whose slow_with names a
 * feature this CPU reports (AVX512-BF16's one-pass F32 GEMM on AMX CPUs, where vdpbf16ps is slow). */
static const ampci_kernel *choose(const ampci_kernel *const *cand, size_t n) {
    uint32_t reported = feature_set(true);
    for (size_t i = n; i-- > 0;)
        if ((cand[i]->slow_with & reported) == 0) return cand[i];
    return NULL;
}

/* Puts e's function into the field of its cell: the only code that maps slots to fields. */
static void install(struct ampc_kernels *k, const ampci_kernel *e) {
    const ampci_kernel_fn *f = &e->fn;
    switch (e->slot) {
    case AMPCI_SLOT_CONVERT: k->cvt[e->dtype][e->src] = f->CONVERT; break;
    case AMPCI_SLOT_GEMM: k->gemm[e->dtype] = f->GEMM; break;
    case AMPCI_SLOT_GEMM_F32_BF16X1: k->gemm_f32_bf16x1 = f->GEMM_F32_BF16X1; break;
    case AMPCI_SLOT_GEMM_F32_BF16X3: k->gemm_f32_bf16x3 = f->GEMM_F32_BF16X3; break;
    case AMPCI_SLOT_UNARY: k->unary[e->op] = f->UNARY; break;
    case AMPCI_SLOT_UNARY_BW: k->unary_bw[e->op] = f->UNARY_BW; break;
    case AMPCI_SLOT_BINARY: k->binary[e->op] = f->BINARY; break;
    case AMPCI_SLOT_SOFTMAX: k->softmax = f->SOFTMAX; break;
    case AMPCI_SLOT_SOFTMAX_BW: k->softmax_bw = f->SOFTMAX_BW; break;
    case AMPCI_SLOT_LAYERNORM: k->layernorm = f->LAYERNORM; break;
    case AMPCI_SLOT_LAYERNORM_BW: k->layernorm_bw = f->LAYERNORM_BW; break;
    case AMPCI_SLOT_XENT: k->xent = f->XENT; break;
    case AMPCI_SLOT_XENT_BW: k->xent_bw = f->XENT_BW; break;
    case AMPCI_SLOT_EMBEDDING_BW: k->embedding_bw = f->EMBEDDING_BW; break;
    case AMPCI_SLOT_IM2COL: k->im2col[e->dtype] = f->IM2COL; break;
    case AMPCI_SLOT_COL2IM: k->col2im = f->COL2IM; break;
    case AMPCI_SLOT_MAXPOOL: k->maxpool = f->MAXPOOL; break;
    case AMPCI_SLOT_MAXPOOL_BW: k->maxpool_bw = f->MAXPOOL_BW; break;
    case AMPCI_SLOT_ATTENTION: k->attention = f->ATTENTION; break;
    case AMPCI_SLOT_ATTENTION_BW: k->attention_bw = f->ATTENTION_BW; break;
    case AMPCI_SLOT_SGD: k->sgd = f->SGD; break;
    case AMPCI_SLOT_ADAMW: k->adamw = f->ADAMW; break;
    case AMPCI_SLOT_UNSCALE: k->unscale[e->dtype] = f->UNSCALE; break;
    case AMPCI_SLOT_SUMSQ: k->sumsq[e->dtype] = f->SUMSQ; break;
    default: AMPCI_ASSERT(!"install: slot out of range");
    }
}

/* One table: every cell that has entries gets the rule's choice among its candidates (none: the field
 * stays NULL, as the split F32 slots below the levels that speed them up). */
static void fill(struct ampc_kernels *k, ampc_isa level) {
    bool done[AMPCI_SLOT_COUNT][AMPCI_KEY_COUNT] = {{false}};
    k->isa = level;
    for (size_t i = 0; i < g_nall; i++) {
        ampci_slot slot = g_all[i]->slot;
        int key = ampci_kernel_key(g_all[i]);
        if (done[slot][key]) continue;
        done[slot][key] = true;
        const ampci_kernel *cand[MAX_CANDIDATES];
        size_t n = collect(level, slot, key, cand, MAX_CANDIDATES);
        AMPCI_ASSERT(n <= MAX_CANDIDATES);
        const ampci_kernel *e = choose(cand, n);
        if (e) k->chosen[slot][key] = e, install(k, e);
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

static void init(void) {
    add_folder(ampci_kernels_ref, ampci_kernels_ref_count);
    add_folder(ampci_kernels_avx2, ampci_kernels_avx2_count);
    add_folder(ampci_kernels_avx512, ampci_kernels_avx512_count);
    add_folder(ampci_kernels_amx, ampci_kernels_amx_count);
    for (int l = AMPC_ISA_REF; l < AMPC_ISA_COUNT; l++) fill(&g_tables[l], (ampc_isa)l);
}

const ampci_kernel *const *ampci_registry(size_t *count) {
    pthread_once(&g_once, init);
    *count = g_nall;
    return g_all;
}

/* AUTO and levels above the process's chosen one become the chosen one. */
static ampc_isa lowered(ampc_isa isa) {
    const ampc_cpu_info *cpu = ampc_cpu();
    return isa == AMPC_ISA_AUTO || isa > cpu->chosen ? cpu->chosen : isa;
}

const struct ampc_kernels *ampci_kernels(ampc_isa isa) {
    pthread_once(&g_once, init);
    return &g_tables[lowered(isa)];
}

size_t ampci_candidates(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max) {
    pthread_once(&g_once, init);
    return collect(lowered(level), slot, key, out, max);
}
