/* registry.c: the one kernel registry, the bottom of the kernels floor. The four folder tables are read
 * once, in level order (ref, avx2, avx512, amx), into one list; over it: which entries this CPU runs, the
 * cells (a slot and its key) and their names, the candidates of a cell in the table of a level (the order
 * the fixed rule reads them in), and the finders tests and benchmarks use (ampci_kernel_find,
 * ampci_kernel_ref). The measurement (tune*.c) and dispatch.c build on these; this file calls neither, so
 * the floor's files depend one way (tests/layer_check.sh checks it). */
#include "kernels.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MAX_KERNELS 256
#define MAX_CELLS 160

static const ampci_kernel *g_all[MAX_KERNELS];
static bool g_usable[MAX_KERNELS];
static size_t g_nall;
static pthread_once_t g_registry_once = PTHREAD_ONCE_INIT;

uint32_t ampci_feature_set(bool reported) {
    const ampc_cpu_info *cpu = ampc_cpu();
    uint32_t s = 0;
    for (int f = 0; f < AMPC_CPU_FEATURE_COUNT; f++)
        if (reported ? cpu->cpuid[f] : ampc_cpu_has((ampc_cpu_feature)f)) s |= 1u << f;
    return s;
}

bool ampci_kernel_usable(const ampci_kernel *e) {
    return e->level <= ampc_cpu()->best && (e->needs & ~ampci_feature_set(false)) == 0;
}

ampci_key_kind ampci_slot_key_kind(ampci_slot slot) {
    switch (slot) {
    case AMPCI_SLOT_CONVERT: return AMPCI_KEY_PAIR;
    case AMPCI_SLOT_GEMM:
    case AMPCI_SLOT_IM2COL:
    case AMPCI_SLOT_UNSCALE:
    case AMPCI_SLOT_SUMSQ:
    case AMPCI_SLOT_COLSUM: return AMPCI_KEY_DTYPE;
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

int ampci_gemm_cell(ampci_slot slot, int key) {
    if (slot == AMPCI_SLOT_GEMM_F32_BF16X1) return 3;
    if (slot == AMPCI_SLOT_GEMM_F32_BF16X3) return 4;
    if (slot != AMPCI_SLOT_GEMM) return -1;
    return key == AMPC_DTYPE_F32 ? 0 : key == AMPC_DTYPE_F16 ? 1 : key == AMPC_DTYPE_BF16 ? 2 : -1;
}

bool ampci_split_cell(ampci_slot slot) {
    return slot == AMPCI_SLOT_GEMM_F32_BF16X1 || slot == AMPCI_SLOT_GEMM_F32_BF16X3;
}

/* ---- the registry ---- */

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

const ampci_kernel *const *ampci_registry(size_t *count) {
    pthread_once(&g_registry_once, registry_init);
    *count = g_nall;
    return g_all;
}

/* ---- a cell's candidates ---- */

ampc_isa ampci_kernel_level(ampc_isa isa) {
    const ampc_cpu_info *cpu = ampc_cpu();
    return isa == AMPC_ISA_AUTO || isa > cpu->chosen ? cpu->chosen : isa;
}

size_t ampci_candidates_at(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max) {
    pthread_once(&g_registry_once, registry_init);
    size_t n = 0;
    for (size_t i = 0; i < g_nall; i++) {
        const ampci_kernel *e = g_all[i];
        if (e->device != AMPC_DEVICE_CPU || e->slot != slot || ampci_kernel_key(e) != key) continue;
        if (e->role != AMPCI_ROLE_KERNEL || e->level > level || !g_usable[i]) continue;
        if (n < max) out[n] = e;
        n++;
    }
    return n;
}

size_t ampci_candidates(ampc_isa level, ampci_slot slot, int key, const ampci_kernel **out, size_t max) {
    return ampci_candidates_at(ampci_kernel_level(level), slot, key, out, max);
}

bool ampci_cell_has_choice(ampc_isa level, ampci_slot slot, int key) {
    size_t n = ampci_candidates(level, slot, key, NULL, 0);
    return n >= 2 || (n == 1 && ampci_split_cell(slot));
}

/* ---- names ---- */

/* What `ampc info` calls each slot (XENT is the cross-entropy loss). */
static const char *const g_slot_names[AMPCI_SLOT_COUNT] = {
    [AMPCI_SLOT_CONVERT] = "convert",
    [AMPCI_SLOT_GEMM] = "gemm",
    [AMPCI_SLOT_GEMM_F32_BF16X1] = "gemm_f32_bf16x1",
    [AMPCI_SLOT_GEMM_F32_BF16X3] = "gemm_f32_bf16x3",
    [AMPCI_SLOT_UNARY] = "unary",
    [AMPCI_SLOT_UNARY_BW] = "unary_bw",
    [AMPCI_SLOT_BINARY] = "binary",
    [AMPCI_SLOT_SOFTMAX] = "softmax",
    [AMPCI_SLOT_SOFTMAX_BW] = "softmax_bw",
    [AMPCI_SLOT_LAYERNORM] = "layernorm",
    [AMPCI_SLOT_LAYERNORM_BW] = "layernorm_bw",
    [AMPCI_SLOT_XENT] = "cross_entropy",
    [AMPCI_SLOT_XENT_BW] = "cross_entropy_bw",
    [AMPCI_SLOT_EMBEDDING_BW] = "embedding_bw",
    [AMPCI_SLOT_IM2COL] = "im2col",
    [AMPCI_SLOT_COL2IM] = "col2im",
    [AMPCI_SLOT_MAXPOOL] = "maxpool",
    [AMPCI_SLOT_MAXPOOL_BW] = "maxpool_bw",
    [AMPCI_SLOT_ATTENTION] = "attention",
    [AMPCI_SLOT_ATTENTION_BW] = "attention_bw",
    [AMPCI_SLOT_SGD] = "sgd",
    [AMPCI_SLOT_ADAMW] = "adamw",
    [AMPCI_SLOT_UNSCALE] = "unscale",
    [AMPCI_SLOT_SUMSQ] = "sumsq",
    [AMPCI_SLOT_RANGE] = "range",
    [AMPCI_SLOT_QUANT8] = "quant8",
    [AMPCI_SLOT_COLSUM] = "colsum",
};
#define OP_NAME(OP, op, ISA) #op,
static const char *const g_unary_names[AMPCI_UNARY_COUNT] = {AMPCI_UNARY_OPS(OP_NAME, _)};
static const char *const g_binary_names[AMPCI_BINARY_COUNT] = {AMPCI_BINARY_OPS(OP_NAME, _)};

const char *ampci_slot_name(ampci_slot slot) { return slot >= 0 && slot < AMPCI_SLOT_COUNT ? g_slot_names[slot] : "?"; }

/* The cells that hold at least one entry, in (slot, key) order, with their names. */
typedef struct cell {
    ampci_slot slot;
    int key;
    char name[40];
} cell;
static cell g_cells[MAX_CELLS];
static int g_ncells;
static pthread_once_t g_cells_once = PTHREAD_ONCE_INIT;

static void dtype_lower(char *out, size_t n, int dt) {
    snprintf(out, n, "%s", ampc_dtype_name((ampc_dtype)dt));
    for (char *p = out; *p; p++) *p = (char)tolower((unsigned char)*p);
}

static void format_cell(cell *c) {
    const char *slot = g_slot_names[c->slot];
    const char *const *ops = c->slot == AMPCI_SLOT_BINARY ? g_binary_names : g_unary_names;
    char a[8], b[8];
    switch (ampci_slot_key_kind(c->slot)) {
    case AMPCI_KEY_PAIR:
        dtype_lower(a, sizeof a, c->key % AMPC_DTYPE_COUNT), dtype_lower(b, sizeof b, c->key / AMPC_DTYPE_COUNT);
        snprintf(c->name, sizeof c->name, "%s_%s_to_%s", slot, a, b);
        return;
    case AMPCI_KEY_DTYPE:
        dtype_lower(a, sizeof a, c->key);
        snprintf(c->name, sizeof c->name, "%s_%s", slot, a);
        return;
    case AMPCI_KEY_OP: snprintf(c->name, sizeof c->name, "%s_%s", slot, ops[c->key]); return;
    default: snprintf(c->name, sizeof c->name, "%s", slot); return;
    }
}

static void cells_init(void) {
    bool seen[AMPCI_SLOT_COUNT][AMPCI_KEY_COUNT] = {{false}};
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) seen[all[i]->slot][ampci_kernel_key(all[i])] = true;
    for (int s = 0; s < AMPCI_SLOT_COUNT; s++)
        for (int key = 0; key < AMPCI_KEY_COUNT; key++) {
            if (!seen[s][key]) continue;
            AMPCI_ASSERT(g_ncells < MAX_CELLS);
            g_cells[g_ncells] = (cell){(ampci_slot)s, key, ""};
            format_cell(&g_cells[g_ncells++]);
        }
}

const char *ampci_cell_name(ampci_slot slot, int key) {
    pthread_once(&g_cells_once, cells_init);
    for (int i = 0; i < g_ncells; i++)
        if (g_cells[i].slot == slot && g_cells[i].key == key) return g_cells[i].name;
    return "?";
}

const char *ampci_cell_at(int i, ampci_slot *slot, int *key) {
    pthread_once(&g_cells_once, cells_init);
    if (i < 0 || i >= g_ncells) return NULL;
    *slot = g_cells[i].slot, *key = g_cells[i].key;
    return g_cells[i].name;
}

/* ---- finders ---- */

const ampci_kernel *ampci_kernel_find(const char *name) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    return NULL;
}

const ampci_kernel *ampci_kernel_ref(const ampci_kernel *e) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i]->level == AMPC_ISA_REF && ampci_same_cell(all[i], e)) return all[i];
    return NULL;
}
