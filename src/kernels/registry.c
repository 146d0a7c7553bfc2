/* registry.c: names and lookups over the kernel registry: the slot and cell names `ampc info` shows, the
 * public introspection calls (ampc_kernel_slot_name/impl, ampc_convert_kernel_name, ampc_kernel_describe,
 * and how the kernels were chosen: ampc_kernel_get_tuning, ampc_kernel_get_choice) and the finders tests
 * and benchmarks use (ampci_kernel_find, ampci_kernel_ref). */
#include "tune.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MAX_CELLS 160

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

/* The i-th compute cell (conversions have their own listing); NULL past the end. */
static const cell *compute_cell(int i) {
    pthread_once(&g_cells_once, cells_init);
    for (int c = 0; c < g_ncells && i >= 0; c++)
        if (g_cells[c].slot != AMPCI_SLOT_CONVERT && i-- == 0) return &g_cells[c];
    return NULL;
}

const char *ampc_kernel_slot_name(int i) {
    const cell *c = compute_cell(i);
    return c ? c->name : NULL;
}

const char *ampc_kernel_slot_impl(int i) {
    const cell *c = compute_cell(i);
    if (!c) return NULL;
    const ampci_kernel *e = ampci_kernels(AMPC_ISA_AUTO)->chosen[c->slot][c->key];
    return e ? e->name : "-";
}

const char *ampc_convert_kernel_name(ampc_dtype dst_dtype, ampc_dtype src_dtype) {
    if ((unsigned)dst_dtype >= AMPC_DTYPE_COUNT || (unsigned)src_dtype >= AMPC_DTYPE_COUNT) return NULL;
    if (dst_dtype == src_dtype) return "memcpy";
    const ampci_kernel *e =
        ampci_kernels(AMPC_ISA_AUTO)->chosen[AMPCI_SLOT_CONVERT][dst_dtype * AMPC_DTYPE_COUNT + src_dtype];
    return e ? e->name : "generic";
}

/* e runs in its cell at the process's level (for a GEMM cell: in some size class). */
static bool runs(const ampci_kernel *e) {
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    int key = ampci_kernel_key(e), g = ampci_gemm_cell(e->slot, key);
    bool any = k->chosen[e->slot][key] == e;
    for (int c = 0; g >= 0 && c < AMPCI_SIZE_CLASSES; c++) any |= k->by_size[g][c] == e;
    return any;
}

bool ampc_kernel_describe(int i, ampc_kernel_desc *out) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    if (i < 0 || (size_t)i >= n || !out) return false;
    const ampci_kernel *e = all[i];
    int key = ampci_kernel_key(e);
    *out = (ampc_kernel_desc){.name = e->name,
                              .slot = ampci_cell_name(e->slot, key),
                              .level = e->level,
                              .needs = e->needs,
                              .usable = ampci_kernel_usable(e),
                              .candidate = e->role == AMPCI_ROLE_KERNEL,
                              .chosen = runs(e)};
    return true;
}

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

/* ---- how the kernels were chosen ---- */

void ampc_kernel_get_tuning(ampc_kernel_tuning *out) {
    static const char *const sources[] = {"rule", "measured", "cache"};
    if (!out) return;
    const ampci_tune_state *st = ampci_tune();
    int rows = 0;
    for (ampc_kernel_choice c; ampc_kernel_get_choice(rows, &c);) rows++;
    *out = (ampc_kernel_tuning){.mode = st->mode == AMPCI_TUNE_RULE ? "rule" : "measure",
                                .source = sources[st->source],
                                .cache_file = st->path,
                                .note = st->note,
                                .cache_written = st->written,
                                .seconds = st->source == AMPCI_TUNE_FROM_RULE ? 0 : st->times.seconds,
                                .choices = rows};
}

/* The i-th (cell, size class) with a choice at the process's level. */
static bool choice_row(int i, const cell **out, int *cls) {
    pthread_once(&g_cells_once, cells_init);
    ampc_isa level = ampci_kernels(AMPC_ISA_AUTO)->isa;
    for (int c = 0; c < g_ncells; c++) {
        size_t n = ampci_candidates(level, g_cells[c].slot, g_cells[c].key, NULL, 0);
        if (n < 2 && !(n == 1 && ampci_split_cell(g_cells[c].slot))) continue;
        int classes = ampci_gemm_cell(g_cells[c].slot, g_cells[c].key) >= 0 ? AMPCI_SIZE_CLASSES : 1;
        if (i < classes) return *out = &g_cells[c], *cls = i, true;
        i -= classes;
    }
    return false;
}

bool ampc_kernel_get_choice(int i, ampc_kernel_choice *out) {
    const cell *c;
    int cls;
    if (i < 0 || !out || !choice_row(i, &c, &cls)) return false;
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    bool sized = ampci_gemm_cell(c->slot, c->key) >= 0;
    ampci_choice ch = ampci_kernels_choose(k->isa, c->slot, c->key, cls);
    const ampci_kernel *e = sized ? k->by_size[ampci_gemm_cell(c->slot, c->key)][cls] : k->chosen[c->slot][c->key];
    AMPCI_ASSERT(e == ch.kernel); /* the table holds what the choice says */
    *out = (ampc_kernel_choice){
        .slot = c->name,
        .size_class = sized ? ampci_size_class_name(cls) : "all",
        .kernel = e ? e->name : "-",
        .seconds = isfinite(ch.sec) ? ch.sec : 0,
        .runner_up = ch.second        ? ch.second->name
                     : ch.second_none ? "-"
                                      : NULL,
        .runner_up_seconds = isfinite(ch.second_sec) ? ch.second_sec : 0,
    };
    return true;
}
